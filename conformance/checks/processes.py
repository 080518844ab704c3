"""Checks of the MP rules: writers in several processes share one log, raced with expected heads and free-running under a history checker.

The free-running stress check: many processes, random calls, one history to explain.

Unlike the commanded machine, nobody chooses the interleaving here: worker
processes (`checkpointspec.conformance.engines.stress`) run as fast as the backend lets
them, one of them is killed part-way, and afterwards
`checkpointspec.conformance.engines.history.check_history` decides whether some
sequential execution of the contract explains everything they saw. That finds
what only real contention shows: lost updates, forked logs, reads that are not
snapshots, stale heads, conflicts reporting heads that never existed.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from ...spec import Capability, errors
from ..engines.history import Raised, check_history
from ..engines.stress import StressHung, StressPlan, run_stress
from ..engines.violations import RuleViolation, expect
from ._support import check_whole_batches, parse_acks, spawn_worker
from .base import check
from .harness import Harness, read_all

__all__ = ["CHECKS"]

SESSIONS = ("s0", "s1", "s2")


_CONTRACT_ERRORS = frozenset(errors.__all__)


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
    "TRUNC-003",
)
async def free_running_history(h: Harness) -> None:
    """MP-001: a history of processes hammering shared sessions is explained by the contract."""
    profile = h.profile
    plan = StressPlan(
        backend=h.backend.target,
        path=str(h.path),
        options=h.options,
        processes=profile.stress_processes,
        operations=profile.stress_operations,
        seconds=profile.stress_seconds,
        sessions=SESSIONS,
        # Truncates on one session only: the others keep growing, so their reads
        # and conflicts stay decidable by the fast path however long the run.
        truncate_session=SESSIONS[-1] if h.has(Capability.TRUNCATE) else None,
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
    expect(not run.failures, "MP-001", "a stress worker failed: " + "; ".join(run.failures))
    foreign = [
        op
        for op in run.operations
        if isinstance(op.outcome, Raised) and op.outcome.error not in _CONTRACT_ERRORS
    ]
    expect(
        not foreign,
        "MP-001",
        f"{len(foreign)} calls raised errors outside the contract, e.g. process "
        f"{foreign[0].process}'s {foreign[0].kind}: {foreign[0].outcome}"
        if foreign
        else "",
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

    verdict = check_history(run.operations, finals)
    if not verdict.ok:
        kills = f", workers {sorted(run.killed)} killed part-way" if run.killed else ""
        raise RuleViolation(
            verdict.anomalies[0].rule_id,
            f"{plan.processes} processes made {len(run.operations)} calls{kills}; "
            f"{len(verdict.anomalies)} anomalies in their history "
            f"(times in ms from the first call):\n{verdict.report()}",
        )
    for line in verdict.undecided:
        h.warn("MP-001", f"history not decided: {line}")


@check("MP-001", "APPEND-004", "SEQ-001")
async def processes_share_one_log(h: Harness) -> None:
    """MP-001: writers in several processes racing with expected_head never lose an update."""
    count, size, workers = 10 * h.profile.process_rounds, 2, 3
    procs = [
        await spawn_worker(h, "shared", f"w{n}", count, size, expected=True, wait=True)
        for n in range(workers)
    ]
    for proc in procs:  # every handle is open before any append starts
        assert proc.stdout is not None
        await proc.stdout.readline()
    results = await asyncio.gather(*(p.communicate(b"go\n") for p in procs))
    acks: dict[str, list[tuple[int, int, int | None]]] = {}
    for n, (proc, (out, err)) in enumerate(zip(procs, results, strict=True)):
        expect(
            proc.returncode == 0,
            "MP-001",
            f"worker {n} failed (exit {proc.returncode}): {err.decode()[-500:]}",
        )
        acks[f"w{n}"] = parse_acks(out.decode().splitlines())
    for worker, records in acks.items():
        for number, landed, want in records:
            assert want is not None  # the workers run with --expected
            expect(
                landed == want + size,
                "MP-001",
                f"{worker} batch {number} was appended with expected_head={want} and acknowledged "
                f"at head {landed}; it must land at {want + size}: another process wrote in between",
            )
    heads = [head for tag_acks in acks.values() for _, head, _ in tag_acks]
    duplicates = sorted({x for x in heads if heads.count(x) > 1})
    expect(
        not duplicates,
        "MP-001",
        f"two processes were both acknowledged with heads {duplicates}: a lost update",
    )
    cp = await h.open()
    log = await read_all(cp, "shared")
    expect(
        len(log) == workers * count * size,
        "MP-001",
        f"{len(log)} events stored; {workers * count * size} were acknowledged",
    )
    by_text = {getattr(s.event, "text", ""): s.seq for s in log}
    for tag, tag_acks in acks.items():
        for batch, head, _ in tag_acks:
            last = by_text.get(f"{tag}:{batch}:{size - 1}")
            expect(
                last == head,
                "MP-001",
                f"{tag} batch {batch} was acknowledged at head {head}; it is stored at {last}",
            )
    check_whole_batches(
        log, [[f"{t}:{b}:{i}" for i in range(size)] for t in acks for b in range(count)], "MP-001"
    )


CHECKS = (
    free_running_history,
    processes_share_one_log,
)
