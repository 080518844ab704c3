"""Checks of the DUR rules: acknowledged writes survive a reopen (DUR-001), a SIGKILL of the writer (DUR-002) and a power loss (DUR-003).

The power-loss check (DUR-003): a simulated disk's crash states, reopened through the factory.

Each round uses a new store and a workload drawn from the run's seed; rounds
repeat until ``profile.powerloss_states`` crash states have been checked.

1. Open a handle through the factory and close it. A handle that is not
   `FileSystemPorted` skips the check. Copy the store's files into a
   `SimulatedDisk` and get a handle doing its I/O there (``on_filesystem``).
2. Drive that handle: appends of 1-3 events to two or three sessions, a
   truncate (TRUNCATE), a delete (DELETE), more appends, one of them re-creating
   the deleted session. Each call notes the disk's op count when it starts and when
   it returns, and `SpecModel` says what the store holds after it.
3. For each crash state (`checkpointspec.conformance.engines.crash.states` says which are
   built; over budget they are sampled with the seed), write it into a fresh
   directory and reopen that through the factory with the real file system. A
   call that returned at or before the crash point is acknowledged and must be in
   effect; the call in flight may be in effect wholly or not at all; later calls
   not at all. Every session is read, its seqs and parent links checked, its head
   compared, the listing compared (LIST), and ``check_integrity`` must be ok.
"""

from __future__ import annotations

import random
import time

from ...spec import (
    Capability,
    Checkpointer,
    FileSystemPorted,
    UserPrompt,
)
from ..engines.contract.violations import RuleViolation
from ..engines.crash.disk import SimulatedDisk
from ..engines.crash.verdicts import Round, Step, check_rounds, plan_workload
from ..engines.processes.client import (
    UNSENT,
    Acked,
    WorkerExited,
    WorkerHung,
    backend_error,
)
from ..engines.processes.messages import AppendBatches
from ..engines.run.harness import CheckSkipped, Harness, read_all
from ..engines.target.authoring import why_no_simulated_disk
from ._support import check_whole_batches, expect, opened_workers, snapshot, spin
from .base import check

__all__ = ["CHECKS"]


async def _record_round(h: Harness, rng: random.Random, number: int) -> Round:
    store = h.path if number == 0 else h.new_store()
    base = await h.open(store)
    # Closed first, so that the files copied below are everything it wrote.
    await base.close()
    if not isinstance(base, FileSystemPorted):
        raise CheckSkipped(
            "DUR-003 on the simulated disk needs the backend's file I/O routed through it: "
            + why_no_simulated_disk(base)
        )
    disk = SimulatedDisk.load(store)
    cp = base.on_filesystem(disk)
    sessions, calls = plan_workload(rng, h.capabilities, number)
    steps: list[Step] = []
    try:
        for call in calls:
            start = disk.op_count
            if call.kind == "append":
                await cp.append(call.session, [UserPrompt(t) for t in call.texts])
            elif call.kind == "truncate":
                await cp.truncate(call.session, call.to_seq)
            else:
                await cp.delete(call.session)
            steps.append(Step(call.label, start, disk.op_count, call.after))
    finally:
        await cp.close()
    plan = disk.crash_plan()
    if not plan.ops:
        raise RuleViolation(
            "DUR-003",
            "the handle from on_filesystem(fs) changed nothing through fs during "
            f"{len(steps)} writes: on_filesystem must route all of the store's I/O through fs",
        )
    return Round(number, plan, tuple(steps), sessions)


@check("DUR-003", "APPEND-003", "INTEG-001", kind="crash")
async def acknowledged_writes_survive_power_loss(h: Harness) -> None:
    """DUR-003: after a simulated power loss at every point, acknowledged writes are in effect."""

    async def record(rng: random.Random, number: int) -> Round:
        return await _record_round(h, rng, number)

    checked, rounds, ops = await check_rounds(
        h, h.profile.powerloss_states, record, lambda rnd, rng, left: rnd.plan.sample(left, rng)
    )
    h.measure(f"checked {checked} crash states of {rounds} rounds ({ops} ops on a simulated disk)")


async def _reopened(h: Harness, handles: list[Checkpointer]) -> Checkpointer:
    for cp in handles:
        await cp.close()
    return await h.open()


@check("DUR-001")
async def acknowledged_writes_survive_reopen(h: Harness) -> None:
    """DUR-001: after closing every handle and reopening, appends, truncates and deletes are in effect."""
    cp = await h.open()
    await cp.append("kept", [h.prompt(f"k{i}") for i in range(10)])
    await cp.append("gone", [h.prompt("g")])
    await cp.append("cut", [h.prompt(f"c{i}") for i in range(5)])
    if h.has(Capability.TRUNCATE):
        await cp.truncate("cut", 2)
    if h.has(Capability.DELETE):
        await cp.delete("gone")
    before = await snapshot(cp, ["kept", "gone", "cut"])
    again = await _reopened(h, [cp])
    after = await snapshot(again, ["kept", "gone", "cut"])
    expect(after == before, "DUR-001", f"after reopen the store differs: {before[0]} -> {after[0]}")
    expect(
        await again.append("kept", [h.prompt("more")]) == 11,
        "DUR-001",
        "appending after reopen did not continue at 11",
    )


@check(
    "DUR-002",
    "APPEND-003",
    "INTEG-001",
    replay_note="the seed picks when to kill the writer, as a fraction of an append's "
    "measured duration; where in the backend's code that lands depends on timing",
    kind="processes",
)
async def acknowledged_writes_survive_kill(h: Harness) -> None:
    """DUR-002: after SIGKILL of a writer, every acknowledged batch is stored, whole; no partial batch.

    The kill comes a random fraction of an append's duration after the writer's
    Nth acknowledgement: killing on the acknowledgement itself would mostly land
    at the start of the next append, before it writes anything, where a batch
    written in pieces (APPEND-003) cannot show.
    """
    rng = random.Random(h.seed)
    size = 3
    for round_ in h.slice.within(range(h.profile.process_rounds * 2), "writers to kill"):
        session, writer = f"killed-{round_}", f"k{round_}"
        stop_after = rng.randint(2, 40)
        acked: list[Acked] = []
        ended: object = None
        async with opened_workers(h, 1, "DUR-002") as (worker,):
            await worker.send(AppendBatches(UNSENT, session, writer, 100_000, size))
            ack_times: list[float] = []
            try:
                while len(acked) < stop_after:
                    reply = await worker.receive()
                    if not isinstance(reply, Acked):
                        ended = reply  # the writer stopped on its own
                        break
                    acked.append(reply)
                    ack_times.append(time.perf_counter())
            except (WorkerExited, WorkerHung) as lost:
                ended = lost
            if len(ack_times) >= 2:
                interval = (ack_times[-1] - ack_times[0]) / (len(ack_times) - 1)
                spin(min(interval, 0.05) * rng.random())
            # Acknowledgements sent before the kill but not yet read count too.
            acked += [r for r in await worker.kill() if isinstance(r, Acked)]
        if not acked:
            raise RuleViolation.or_crash(
                "DUR-002",
                f"the writer acknowledged nothing before it was killed: {ended}",
                "append",
                backend_error(ended),
            )
        cp = await h.open()
        log = await read_all(cp, session)
        stored = {getattr(s.event, "text", "") for s in log}
        for ack in acked:
            expect(
                f"{writer}:{ack.batch}:{size - 1}" in stored,
                "DUR-002",
                f"batch {ack.batch}, acknowledged at head {ack.head}, is gone after the kill",
            )
        check_whole_batches(
            log,
            [[f"{writer}:{b}:{i}" for i in range(size)] for b in range(len(log) // size + 2)],
            "APPEND-003",
        )
        report = await cp.check_integrity()
        expect(report.ok, "DUR-002", f"check_integrity after a kill: {report.detail}")
        await cp.close()


CHECKS = (
    acknowledged_writes_survive_power_loss,
    acknowledged_writes_survive_reopen,
    acknowledged_writes_survive_kill,
)
