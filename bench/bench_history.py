"""Benchmark the history checker on large synthetic histories.

Run ``python bench/bench_history.py`` (``--operations N`` to change the size).
It builds a valid history the way the stress check records one — processes
calling append (with and without expected_head), read since a recent seq and
head on a few shared sessions, each call's interval drawn around the instant
a sequential log applied it — and times `check_history` on:

- the valid history: 100k calls by 8 processes (target: under 10 s), which must
  be accepted, all of it by the chain (fast path);
- the same history with one lost update put in: a read overlapping a successful
  append becomes a second successful append from the same expected_head, whose
  events the final log lacks; it must be reported as APPEND-004;
- a 20k-call history whose last session also sees truncates overlapping the
  other calls, the part the linearizability search decides (information only).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict

import msgspec
from checkpointspec.conformance.engines.history import (
    Conflicted,
    HistoryVerdict,
    Operation,
    OperationOutcome,
    Returned,
    check_history,
)

TARGET_SECONDS = 10.0


def synthesize(
    operations: int, processes: int, sessions: int, seed: int, truncating: bool = False
) -> tuple[list[Operation], dict[str, list[str]]]:
    """A valid history: calls applied one at a time, then given overlapping intervals.

    Call k takes effect at instant 10k + 10; with 8 processes each process calls
    about every 80 time units, so every call overlaps several others.
    """
    rng = random.Random(seed)
    names = [f"s{n}" for n in range(sessions)]
    logs: dict[str, list[str]] = {name: [] for name in names}
    known: dict[tuple[int, str], int] = defaultdict(int)
    calls: dict[int, list[tuple[int, Operation]]] = defaultdict(list)
    for k in range(operations):
        process = rng.randrange(processes)
        session = rng.choice(names)
        log, seen = logs[session], known[process, session]
        index = len(calls[process])
        roll = rng.random()
        args: dict[str, object] = {}
        outcome: OperationOutcome
        if roll < 0.45:
            kind = "append"
            expected = seen if rng.random() < 0.6 else None
            markers = tuple(f"p{process}.{index}.{n}" for n in range(rng.randint(1, 3)))
            args = {"markers": markers, "expected_head": expected}
            if expected is not None and expected != len(log):
                outcome = Conflicted(expected, len(log))
            else:
                log.extend(markers)
                outcome = Returned(len(log))
        elif roll < 0.72:
            kind = "read"
            since = rng.randint(max(0, seen - 4), seen)
            args = {"since_seq": since}
            outcome = Returned(0, tuple((n + 1, log[n]) for n in range(since, len(log))))
        elif roll < 0.92 or not truncating or session != names[-1] or seen == 0:
            kind = "head"
            outcome = Returned(len(log))
        else:
            kind = "truncate"
            to_seq = rng.randint(max(0, seen - 3), seen - 1)
            args = {"expected_head": seen, "to_seq": to_seq}
            if seen != len(log):
                outcome = Conflicted(seen, len(log))
            else:
                del log[to_seq:]
                outcome = Returned(to_seq)
        # Whatever the call returned is the head this process now believes in.
        known[process, session] = outcome.actual if isinstance(outcome, Conflicted) else len(log)
        op = Operation(process, index, kind, session, 0, 0, outcome, **args)  # type: ignore[arg-type]
        calls[process].append((10 * k + 10, op))
    history = []
    for ops in calls.values():
        previous_end = 0
        for n, (instant, op) in enumerate(ops):
            invoked = rng.randint(previous_end + 1, instant)
            limit = ops[n + 1][0] - 1 if n + 1 < len(ops) else instant + 80
            completed = rng.randint(instant, limit)
            history.append(msgspec.structs.replace(op, invoked=invoked, completed=completed))
            previous_end = completed
    return history, logs


def inject_lost_update(history: list[Operation]) -> tuple[list[Operation], Operation, Operation]:
    """Turn a read that overlaps a successful guarded append into a second winner."""
    winners = [
        op
        for op in history
        if op.kind == "append" and op.expected_head is not None and isinstance(op.outcome, Returned)
    ]
    for winner in winners[len(winners) // 2 :]:
        for place, other in enumerate(history):
            assert other.completed is not None
            assert winner.completed is not None
            if (
                other.kind == "read"
                and other.process != winner.process
                and other.session == winner.session
                and other.invoked < winner.completed
                and winner.invoked < other.completed
            ):
                assert winner.expected_head is not None
                twin = msgspec.structs.replace(
                    other,
                    kind="append",
                    markers=(f"lost.{other.process}.{other.index}",),
                    expected_head=winner.expected_head,
                    since_seq=0,
                    outcome=Returned(winner.expected_head + 1),
                )
                changed = list(history)
                changed[place] = twin
                return changed, winner, twin
    raise RuntimeError("no read overlaps a guarded append; use a larger history")


def timed(history: list[Operation], finals: dict[str, list[str]]) -> tuple[HistoryVerdict, float]:
    started = time.perf_counter()
    verdict = check_history(history, finals)
    return verdict, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    history, finals = synthesize(args.operations, args.processes, 4, args.seed)
    verdict, seconds = timed(history, finals)
    ok = verdict.ok and set(verdict.decided_by.values()) == {"chain"}
    print(
        f"valid history, {len(history)} calls, {args.processes} processes: "
        f"{seconds:.2f} s (target < {TARGET_SECONDS:.0f} s), "
        f"{'accepted by the chain' if ok else 'NOT ACCEPTED'}"
    )
    if not ok:
        print(verdict.report())

    broken, winner, twin = inject_lost_update(history)
    lost, lost_seconds = timed(broken, finals)
    found = [a for a in lost.anomalies if a.rule_id == "APPEND-004"]
    caught = any(winner in a.operations and twin in a.operations for a in found)
    print(
        f"one injected lost update: {lost_seconds:.2f} s, "
        f"{'found' if caught else 'NOT FOUND'}: " + (found[0].summary if found else lost.report())
    )

    small, small_finals = synthesize(20_000, 4, 3, args.seed, truncating=True)
    searched, search_seconds = timed(small, small_finals)
    print(
        f"20k calls, 4 processes, truncates on one session: {search_seconds:.2f} s, "
        f"decided by {searched.decided_by}, {'accepted' if searched.ok else 'NOT ACCEPTED'}"
    )
    good = ok and caught and seconds < TARGET_SECONDS and searched.ok and not searched.undecided
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
