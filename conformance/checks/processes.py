"""Checks of the MP rules: writers in several processes share one log, raced with expected heads and free-running under a history checker.

Both run the kit's worker processes
(`checkpointspec.conformance.engines.processes.client`), each with its own handle.

The racing check opens three, then sends each an `AppendBatches` with expected
heads at once: no two may be acknowledged at the same head, and every
acknowledged batch is stored once, whole, where it was acknowledged.

The free-running stress check: many processes, random calls, one history to
explain. Unlike the commanded machine, nobody chooses the interleaving here: the
workers (`checkpointspec.conformance.engines.processes.stress`) run as fast as the backend
lets them, one of them is killed part-way, and afterwards
`checkpointspec.conformance.engines.history.check_history` decides whether some
sequential execution of the contract explains everything they saw. That finds
what only real contention shows: lost updates, forked logs, reads that are not
snapshots, stale heads, conflicts reporting heads that never existed, a delete
or truncate torn by an append racing it (the mix truncates and deletes every
session when the backend declares it, and appends to it again). A call that
raises anything but `StoreBusyError` (and a conflict) fails the check: on a
store only the workers wrote, nothing else has a cause outside the backend.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Sequence

from ...spec import Capability, errors
from ..engines.contract.violations import RuleViolation, expect
from ..engines.history import Raised, check_history, describe
from ..engines.history.causes import unheeded_expectation
from ..engines.processes.client import (
    UNSENT,
    Acked,
    Failed,
    Succeeded,
    WorkerClient,
    WorkerExited,
    WorkerHung,
    backend_error,
)
from ..engines.processes.messages import AppendBatches
from ..engines.processes.stress import (
    StressHung,
    StressPlan,
    StressRun,
    overlapping_calls,
    run_stress,
    share_of,
)
from ..engines.run.harness import Harness, NothingExercised, read_all
from ._support import check_whole_batches, opened_workers
from .base import check

__all__ = ["CHECKS"]

SESSIONS = ("s0", "s1", "s2")


_CONTENTION_ERRORS = frozenset({errors.StoreBusyError.__name__})
"""The errors a call may raise under contention alone."""


STRESS_SHARE = 0.5
"""The part of the time left of the run's cap the stress workers may run at most: the
rest goes on starting them and checking the history they leave."""


def _stress_seconds(h: Harness) -> float:
    """How long each stress worker may run: the profile's ``stress_seconds``, a cap, or
    less when the run's time cap is nearer (at least a second)."""
    left = h.slice.left()
    if left is None or left * STRESS_SHARE >= h.profile.stress_seconds:
        return h.profile.stress_seconds
    return max(1.0, left * STRESS_SHARE)


def _calls_left_unmade(h: Harness, plan: StressPlan, run: StressRun) -> None:
    """Record (`Slice.stopped`) when workers that were not killed stopped at their time cap
    with calls of the profile's count unmade: the history is shorter than the profile
    asks for, so the check is incomplete."""
    made = Counter(op.process for op in run.operations)
    short = [
        n for n in range(plan.processes) if n not in run.killed and made[n] < share_of(plan, n)
    ]
    if short:
        h.slice.stopped(
            f"its stress workers {short} made {sum(made[n] for n in short)} of their "
            f"{sum(share_of(plan, n) for n in short)} calls within the {plan.seconds:g} s "
            "each may run"
        )


@check(
    "MP-001",
    "APPEND-002",
    "APPEND-003",
    "APPEND-004",
    "READ-001",
    "READ-003",
    "HEAD-001",
    "SEQ-001",
    "SEQ-003",
    "KILL-001",
    "INTEG-001",
    "TRUNC-001",
    "TRUNC-002",
    "TRUNC-003",
    "DELETE-001",
    "DELETE-002",
    replay_note="the seed fixes each process's calls and which are killed, but not how "
    "the operating system interleaves them nor the moment a kill lands",
    kind="stress",
)
async def free_running_history(h: Harness) -> None:
    """MP-001: a history of processes hammering shared sessions is explained by the contract."""
    profile = h.profile
    seconds = _stress_seconds(h)
    plan = StressPlan(
        target=h.target,
        path=str(h.path),
        processes=profile.stress_processes,
        operations=profile.stress_operations,
        seconds=seconds,
        sessions=SESSIONS,
        truncate=h.has(Capability.TRUNCATE),
        delete=h.has(Capability.DELETE),
        seed=h.seed,
    )
    try:
        run = await run_stress(plan, h.root / "stress", kills=profile.stress_kills)
    except StressHung as hung:
        raise RuleViolation(
            "KILL-001" if hung.killed else "MP-001",
            f"stress workers {hung.stuck} made no progress for {hung.waited:.0f}s"
            + (
                f" after workers {sorted(hung.killed)} were killed: something a killed "
                "process held was not released"
                if hung.killed
                else ""
            ),
        ) from None
    _calls_left_unmade(h, plan, run)
    completed = sum(1 for op in run.operations if op.completed is not None)
    overlapping = overlapping_calls(run.operations)
    h.measure(
        f"{len(run.operations)} calls of {plan.processes} processes, {completed} completed, "
        f"{overlapping} begun while another process's call was in flight"
    )
    expect(not run.failures, "MP-001", "a stress worker failed: " + "; ".join(run.failures))
    # Contention may make a call wait too long (StoreBusyError); on a store only
    # the workers wrote, any other error is one the backend made for itself.
    unexplained = [
        op
        for op in run.operations
        if isinstance(op.outcome, Raised) and op.outcome.error not in _CONTENTION_ERRORS
    ]
    if unexplained:
        kinds = Counter(op.outcome.error for op in unexplained if isinstance(op.outcome, Raised))
        for op in unexplained:
            cause = unheeded_expectation(op)
            if cause is not None:
                assert isinstance(op.outcome, Raised)
                raise RuleViolation(
                    cause[0],
                    f"{describe(op)}: {op.outcome.message}; with to_seq at most its "
                    f"expected_head, a refusal of the bound shows the head was below "
                    f"expected_head, so CheckpointConflictError was due: the expected head "
                    f"is not compared ({len(unexplained)} unexplained errors: {dict(kinds)})",
                    call=describe(op),
                    expected="raises CheckpointConflictError",
                    got=f"raised {op.outcome.error}",
                    shape=cause[1],
                )
        first = unexplained[0]
        assert isinstance(first.outcome, Raised)
        raise RuleViolation.or_crash(
            "MP-001",
            f"{len(unexplained)} calls raised errors contention does not explain (only "
            f"StoreBusyError) on a store only the workers wrote: {dict(kinds)}; the first: "
            f"{describe(first)}: "
            f"{first.outcome.message}",
            first.kind,
            first.outcome.error,
        )
    busy = Counter(op.outcome.error for op in run.operations if isinstance(op.outcome, Raised))
    if busy:
        h.warn("MP-001", f"under contention some calls raised: {dict(busy)}")

    cp = await h.open()
    finals: dict[str, list[str]] = {}
    for session in SESSIONS:
        log = await read_all(cp, session)
        seqs = [stored.seq for stored in log]
        expect(
            seqs == list(range(1, len(log) + 1)),
            "SEQ-001",
            f"after the stress run session {session!r} has seqs {seqs[:30]}",
        )
        finals[session] = [getattr(stored.event, "text", "") for stored in log]
    integrity = await cp.check_integrity()
    expect(integrity.ok, "INTEG-001", f"check_integrity after the stress run: {integrity.detail}")
    await cp.close()

    # A truncate declared to take no expected head (TRUNC-003 expected) is judged as
    # the unconditional truncate it is: what it explains downstream is that gap's.
    unconditional = "TRUNC-003" in h.run.expected_failures
    verdict = check_history(run.operations, finals, unconditional_truncates=unconditional)
    if not verdict.ok:
        kills = f", workers {sorted(run.killed)} killed part-way" if run.killed else ""
        raise verdict.violation(
            f"{plan.processes} processes made {len(run.operations)} calls{kills}"
        )
    for line in verdict.undecided:
        h.warn("MP-001", f"history not decided: {line}")
    if not completed:
        raise NothingExercised(
            f"no call completed: the {plan.processes} stress processes made "
            f"{len(run.operations)} calls and none returned, so no history was explained"
        )
    if not overlapping:
        raise NothingExercised(
            f"no two processes' calls overlapped in time: the {completed} calls that "
            "completed ran one at a time, so nothing was raced"
        )


async def _acked(n: int, worker: WorkerClient, conflicts: int) -> list[Acked]:
    """Worker ``n``'s acknowledgements, up to its final reply, which must be `Succeeded`;
    a conflict beyond the ``conflicts`` the other writers' appends can cause ends it."""
    acks: list[Acked] = []
    try:
        async for reply in worker.replies():
            if isinstance(reply, Acked):
                acks.append(reply)
            elif isinstance(reply, Failed) and reply.error == "CheckpointConflictError":
                raise RuleViolation(
                    "MP-001",
                    f"worker {n}'s appends with the head it had just read conflicted "
                    f"{conflicts + 1} times, more often than the other writers' "
                    f"{conflicts} appends can cause: the last passed expected_head="
                    f"{reply.expected} and the store said its head was {reply.actual}",
                )
            elif not isinstance(reply, Succeeded):
                raise RuleViolation.or_crash(
                    "MP-001", f"worker {n} failed: {reply}", "append", backend_error(reply)
                )
    except (WorkerExited, WorkerHung) as lost:
        raise RuleViolation.or_crash(
            "MP-001", f"worker {n} failed: {lost}", "append", backend_error(lost)
        ) from None
    return acks


@check(
    "MP-001",
    "APPEND-004",
    "SEQ-001",
    replay_note="the writers race in separate processes; the operating system, not the "
    "seed, decides who wins each race",
    kind="processes",
)
async def processes_share_one_log(h: Harness) -> None:
    """MP-001: writers in several processes racing with expected_head never lose an update."""
    count, size, workers = 10 * h.profile.process_rounds, 2, 3
    # A writer's append conflicts only when another append landed between its read of
    # the head and its append, each landed append at most once per writer: a writer
    # meets at most as many conflicts as the others make appends. More is a backend
    # whose head and append disagree, and would otherwise retry until a deadline.
    conflicts = (workers - 1) * count
    batches = 0
    async with opened_workers(h, workers, "MP-001") as clients:
        # On a busy machine the processes may run one after another, their appends
        # never overlapping: such a race is made again on a fresh session, up to
        # RACES times, before the check says it raced nothing.
        for race in range(RACES):
            session = "shared" if race == 0 else f"shared-{race}"
            acks = await _race(clients, session, count, size, conflicts)
            in_head_order = [w for _, w in sorted((a.head, w) for w, r in acks.items() for a in r)]
            turns = sum(1 for a, b in itertools.pairwise(in_head_order) if a != b)
            batches += len(in_head_order)
            await _judge_race(h, session, acks, count, size)
            if in_head_order and turns > len(set(in_head_order)) - 1:
                break
    h.measure(
        f"{len(in_head_order)} batches acknowledged to {workers} processes, the writer "
        f"changing {turns} times along the log"
        + (f" (race {race + 1}: the earlier ones ran one process after another)" if race else "")
    )
    if not in_head_order:
        raise NothingExercised(
            f"no append completed: none of the {workers} processes had a batch acknowledged"
        )
    if turns == len(set(in_head_order)) - 1:
        raise NothingExercised(
            f"no two processes' appends overlapped in time in {RACES} races: the "
            f"{batches} acknowledged batches lay in each log one process after another"
        )


RACES = 3
"""Races MP-001's writers make at most, each on a fresh session, until their appends overlap."""


async def _race(
    clients: Sequence[WorkerClient], session: str, count: int, size: int, conflicts: int
) -> dict[str, list[Acked]]:
    """Each worker appends ``count`` batches of ``size`` to ``session`` with the head it
    read: every handle is open before any append starts, and the requests go out back
    to back, so the workers' appends race. Each worker's acknowledgements."""
    for n, worker in enumerate(clients):
        await worker.send(
            AppendBatches(
                UNSENT, session, f"w{n}", count, size, expect_head=True, conflicts=conflicts
            )
        )
    streams = await asyncio.gather(*(_acked(n, w, conflicts) for n, w in enumerate(clients)))
    return {f"w{n}": stream for n, stream in enumerate(streams)}


async def _judge_race(
    h: Harness, session: str, acks: dict[str, list[Acked]], count: int, size: int
) -> None:
    """Every acknowledged batch landed where its expected head says, once, whole."""
    for writer, records in acks.items():
        for ack in records:
            assert ack.expected_head is not None  # the workers pass expected heads
            expect(
                ack.head == ack.expected_head + size,
                "MP-001",
                f"{writer} batch {ack.batch} was appended with expected_head={ack.expected_head} "
                f"and acknowledged at head {ack.head}; it must land at {ack.expected_head + size}: "
                "another process wrote in between",
            )
    heads = [ack.head for records in acks.values() for ack in records]
    duplicates = sorted({x for x in heads if heads.count(x) > 1})
    expect(
        not duplicates,
        "MP-001",
        f"two processes were both acknowledged with heads {duplicates}: a lost update",
    )
    cp = await h.open()
    log = await read_all(cp, session)
    expect(
        len(log) == len(acks) * count * size,
        "MP-001",
        f"{len(log)} events stored; {len(acks) * count * size} were acknowledged",
    )
    by_text = {getattr(s.event, "text", ""): s.seq for s in log}
    for writer, records in acks.items():
        for ack in records:
            last = by_text.get(f"{writer}:{ack.batch}:{size - 1}")
            expect(
                last == ack.head,
                "MP-001",
                f"{writer} batch {ack.batch} was acknowledged at head {ack.head}; it is stored at {last}",
            )
    check_whole_batches(
        log, [[f"{t}:{b}:{i}" for i in range(size)] for t in acks for b in range(count)], "MP-001"
    )


CHECKS = (
    free_running_history,
    processes_share_one_log,
)
