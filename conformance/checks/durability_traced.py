"""Crash checks at system-call precision for any backend: kills and power losses rebuilt from a trace.

Method (after ALICE, OSDI 2014). Each round uses a new store:

1. Open a handle through the factory and close it; the store's files are the
   round's durable starting image.
2. Start a worker process (`checkpointspec.conformance.engines.processes.worker`) under
   ``strace`` (`checkpointspec.conformance.engines.crash.recorder`) and drive it through
   a workload drawn from the seed (`plan_workload`: appends, a truncate, a
   delete, more appends), then close its handle. A stdio backend's child process
   runs under the same tracer; so does every thread. The trace holds every call
   that changed a file under the store's directory, with its bytes, and every
   reply the worker wrote to the kit: the reply to a write comes after all of its
   calls, so the reply is where the write is acknowledged.
3. From the trace's operations, build crash states (`CrashPlan`) in fresh
   directories, reopen each through the factory and judge it
   (`checkpointspec.conformance.engines.crash.verdicts.check_state`): every write
   acknowledged before the crash point in effect, the one in flight wholly or not
   at all, seqs contiguous, ``check_integrity`` ok.

DUR-002 (a kill) uses, at every operation of the trace, the state that a
SIGKILL right after it leaves: every operation issued is kept (the page cache
survives a kill), nothing is torn. Over ``profile.kill_states`` they are
allotted per kind of write as KILL-001's holds are (`allot`). Every operation is a crash point, so a write
done in two calls is caught between them, whatever the timing. DUR-003 (a
power loss) uses every state of the persistence model
(`checkpointspec.conformance.engines.crash.states`): only what was fsynced is
certain, the rest may be lost, reordered or torn.

What is needed: ``strace`` and permission to trace (a skip says so otherwise);
a backend whose files live under the store directory (a server's are elsewhere:
its trace shows no store operation and the check is skipped with that reason);
no store file mapped shared and writable, unless the backend declares it scratch
(`ScratchFiles`) or the kit knows it is (SQLite's WAL index:
`checkpointspec.conformance.engines.crash.scratch`).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ...backends.stdio.messages import Close
from ...spec import ScratchFiles
from ..engines.contract.violations import RuleViolation
from ..engines.crash.disk import SimulatedDisk
from ..engines.crash.recorder import (
    TracedRun,
    TraceError,
    parse_trace,
    tracer_argv,
    tracer_unavailable,
)
from ..engines.crash.scratch import unseen
from ..engines.crash.states import CrashPlan, CrashSpec, Image
from ..engines.crash.verdicts import (
    Call,
    Round,
    Step,
    allot,
    check_rounds,
    kind_of,
    plan_workload,
)
from ..engines.processes.client import (
    UNSENT,
    Failed,
    Opened,
    WorkerClient,
    WorkerExited,
    WorkerHung,
    backend_error,
    hello,
)
from ..engines.run.harness import CheckSkipped, Harness
from ..engines.target.authoring import how_to_declare_scratch
from .base import check

__all__ = ["CHECKS"]

_TRACED_ENV: Final = {"UV_USE_IO_URING": "0"}
"""Node's libuv may do file I/O through io_uring, which no system-call tracer sees."""

_REPLY_TIMEOUT: Final = 120.0
"""Seconds per reply: a traced worker is slower, and a busy machine slower still."""


async def _scratch(h: Harness, store: Path) -> tuple[dict[str, str], str]:
    """Open and close a handle on ``store`` (its files are then the starting image);
    the scratch files it declares, and how its author declares them."""
    async with h.opened(store) as cp:
        declared = dict(cp.scratch_files()) if isinstance(cp, ScratchFiles) else {}
        return declared, how_to_declare_scratch(cp)


async def _traced_run(
    h: Harness, store: Path, calls: list[Call], rule_id: str
) -> tuple[Image, TracedRun, bytes]:
    """The store's starting image, what a traced worker did to it running ``calls``,
    and the replies it sent."""
    base = SimulatedDisk.load(store).image()
    trace_file = store.parent / f"{store.name}.strace"
    with tempfile.TemporaryFile() as stderr:
        worker = await WorkerClient.start(
            h.target, stderr, _REPLY_TIMEOUT, tracer_argv(trace_file), _TRACED_ENV
        )
        try:
            transcript = await drive_traced_worker(worker, store, h.options, calls, rule_id)
        finally:
            await worker.close()
    try:
        with trace_file.open(encoding="ascii", errors="replace") as lines:
            return base, parse_trace(lines, store, base), transcript
    except TraceError as exc:
        raise CheckSkipped(f"the trace of the backend cannot be judged: {exc}") from exc
    finally:
        trace_file.unlink(missing_ok=True)


async def drive_traced_worker(
    worker: WorkerClient,
    store: Path,
    options: Mapping[str, str],
    calls: list[Call],
    rule_id: str,
) -> bytes:
    """Open ``store`` in ``worker`` (a traced one) with ``options``, run ``calls``, close
    its handle; the reply lines the kit received, for `steps_of`. A store the worker
    cannot open, a call it refuses, or a worker lost on the way breaks ``rule_id``."""
    worker.transcript = transcript = bytearray()
    operation = "open"
    try:
        opened = await worker.call(hello(str(store), options))
        if not isinstance(opened, Opened):
            raise RuleViolation(rule_id, f"the traced worker could not open the store: {opened}")
        for call in calls:
            operation = call.kind
            reply = await worker.call(call.as_request())
            if isinstance(reply, Failed):
                raise RuleViolation.or_crash(
                    rule_id,
                    f"{call.label} raised {reply.error} in the traced worker: {reply.message}",
                    call.kind,
                    reply.error,
                )
        operation = "close"
        await worker.call(Close(UNSENT))
    except (WorkerExited, WorkerHung) as lost:
        raise RuleViolation.or_crash(
            rule_id, f"the traced worker stopped: {lost}", operation, backend_error(lost)
        ) from lost
    return bytes(transcript)


def steps_of(run: TracedRun, calls: list[Call], transcript: bytes) -> tuple[Step, ...]:
    """The workload's calls placed in the trace: each from the reply before it to its own
    (``transcript``: the replies the kit received, the worker's first being Opened)."""
    replies = run.replies(transcript)
    # Replies: Opened, one per call, then the close's.
    if replies is None or len(replies) != len(calls) + 2:
        raise CheckSkipped(
            f"the trace does not show the worker's {len(calls) + 2} replies on any pipe "
            f"({len(run.pipes)} pipes written): the tracer lost calls, or the backend "
            "writes to the worker's reply pipe"
        )
    steps = [
        Step(call.label, replies[n], replies[n + 1], call.after, kind_of(calls, n))
        for n, call in enumerate(calls)
    ]
    steps.append(Step("close()", replies[-2], replies[-1], calls[-1].after, "close"))
    return tuple(steps)


async def _record(h: Harness, rng: random.Random, number: int, rule_id: str) -> Round:
    reason = tracer_unavailable()
    if reason is not None:
        raise CheckSkipped(f"{rule_id} at system-call precision needs a tracer: {reason}")
    store = h.new_store()
    scratch, how_to_declare = await _scratch(h, store)
    sessions, calls = plan_workload(rng, h.capabilities, number)
    base, run, transcript = await _traced_run(h, store, calls, rule_id)
    if not run.ops:
        raise CheckSkipped(
            f"the traced worker changed no file under the store directory during {len(calls)} "
            "writes: the backend keeps its data elsewhere (a server), where a trace of its "
            "client cannot judge a crash (a server backend gets this rule checked by tracing "
            "its server: checkpointspec.spec.ServerLaunching)"
        )
    unjudged = unseen(store, run.mapped, scratch)
    if unjudged:
        raise CheckSkipped(
            f"the backend maps store files shared and writable ({', '.join(unjudged)}): writes "
            "through a mapping are not system calls, so a trace cannot say what a crash leaves "
            "in them. A backend that rebuilds such a file on open declares it: " + how_to_declare
        )
    steps = steps_of(run, calls, transcript)
    return Round(number, CrashPlan(base, run.ops), steps, sessions, ", traced")


def _kill_states(rnd: Round, rng: random.Random, left: int) -> list[CrashSpec]:
    """Every kill state of the round, or ``left`` of them allotted per kind of write
    (`allot`): a truncate or a delete is killed in even when appends make most calls."""
    points = list(rnd.plan.points)
    if len(points) > left:
        points = sorted(_allotted(rnd, points, rng, left))
    return [rnd.plan.kill(point) for point in points]


def _allotted(rnd: Round, points: list[int], rng: random.Random, budget: int) -> list[int]:
    by_kind: dict[str, list[int]] = {}
    for point in points:
        # An op between two replies belongs to the call that the later reply answers.
        step = next((s for s in rnd.steps if s.start < point <= s.end), None)
        by_kind.setdefault(step.kind if step is not None else "", []).append(point)
    shares = allot(budget, list(by_kind))
    chosen: list[int] = []
    spare = 0
    for kind, share in shares.items():
        group = by_kind[kind]
        take = min(len(group), share + spare)
        chosen += rng.sample(group, take)
        spare = share + spare - take
    return chosen


@check("DUR-002", "APPEND-003", "INTEG-001", kind="crash")
async def killed_at_every_system_call(h: Harness) -> None:
    """DUR-002: a writer killed after any one of its system calls leaves every acknowledged write, whole.

    The states are rebuilt from a trace of a real worker process (strace): one per
    store operation it made, in the order made. Over ``profile.kill_states`` they
    are sampled with the seed.
    """

    h.judged_on_the_kit_side("INTEG-001")

    async def record(rng: random.Random, number: int) -> Round:
        return await _record(h, rng, number, "DUR-002")

    checked, rounds, ops = await check_rounds(
        h, h.profile.kill_states, record, _kill_states, "DUR-002"
    )
    h.measure(f"checked {checked} kill states of {rounds} traced rounds ({ops} store operations)")


@check("DUR-003", "APPEND-003", "INTEG-001", kind="crash")
async def power_loss_after_every_system_call(h: Harness) -> None:
    """DUR-003: after a power loss at any point of a traced writer, acknowledged writes are in effect.

    The crash states of every operation the trace holds (durable image, prefixes,
    omissions, torn writes), sampled with the seed to ``profile.traced_states``.
    """

    h.judged_on_the_kit_side("INTEG-001")

    async def record(rng: random.Random, number: int) -> Round:
        return await _record(h, rng, number, "DUR-003")

    checked, rounds, ops = await check_rounds(
        h, h.profile.traced_states, record, lambda rnd, rng, left: rnd.plan.sample(left, rng)
    )
    h.measure(f"checked {checked} crash states of {rounds} traced rounds ({ops} store operations)")


CHECKS = (killed_at_every_system_call, power_loss_after_every_system_call)
