"""Crash checks of a backend whose data lives in a server: the server killed (DUR-002) and its host's power cut (DUR-003).

Both need the backend's handle to be `ServerLaunching`: it starts a throwaway
server and hands the kit a `ServerControl` (its address as backend options,
its data directory, its processes, crash, start, settle, a copy). Every handle
the checks open gets the server's options added to the run's, so it stores into
that server. Without the opt-in, or when the server cannot be launched (no
``initdb``), both are skipped with the reason.

*The server killed* (DUR-002). Each round appends batches of three events to a
new session, then SIGKILLs every server process (`ServerControl.crash`):
alternately right after the server acknowledged a commit, and a random moment
into a stream of appends (after a random number of acknowledgements and a
random fraction of an append's measured duration). The server is started again
(its recovery runs), a new handle reads the session: every acknowledged batch is
there, whole (APPEND-003), and ``check_integrity`` is ok. A server that
acknowledges a commit before its log reaches the operating system
(``synchronous_commit=off``) loses it here.

*The server's power cut, from its own trace* (DUR-003). Each round: the server
settles (`ServerControl.settle`: everything written is durable, nothing more is
being written) and the kit takes its data directory as the durable starting
image. A worker process opens the store; ``strace`` attaches to it and to every
server process (`checkpointspec.conformance.engines.crash.recorder.attach_argv`);
the worker runs a workload drawn from the seed and closes. The trace holds the
server's writes to its data directory and the worker's replies, in the order
they happened: the server writes and syncs a commit before it sends the reply
the worker then passes on. From the trace's operations the crash states of
the data directory are built as for files
(`checkpointspec.conformance.engines.crash.states`); for each, a server is
started on a copy (its recovery runs), the store is reopened through the
factory and judged as a file backend's state is
(`checkpointspec.conformance.engines.crash.verdicts.check_state`). The power
cut right after each acknowledgement comes first, then states drawn with the
seed, up to ``profile.server_states``. A server that does not sync its log
(``fsync=off``) or acknowledges before it does (``synchronous_commit=off``)
loses acknowledged writes in these states, though its files hold them in the
page cache.

Limits: writes the server makes between its settling and the tracer attaching
are in neither the image nor the trace (a settled server makes none); the kit
sees system calls only (a server writing its data through a shared mapping or
io_uring is not judged correctly); each state costs a server start.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from ...spec import Checkpointer, ServerControl, ServerLaunching, UserPrompt
from ..engines.contract.violations import RuleViolation, expect
from ..engines.crash.disk import SimulatedDisk
from ..engines.crash.recorder import (
    NotAttached,
    TracedRun,
    TraceError,
    attach_argv,
    attach_unavailable,
    attached,
    parse_trace,
)
from ..engines.crash.states import CrashPlan, CrashSpec, CrashState, Image, server_crash_specs
from ..engines.crash.verdicts import (
    Call,
    Round,
    Seen,
    check_rounds,
    plan_workload,
    quiet,
    reopened_in_a_server,
)
from ..engines.processes.client import WorkerClient
from ..engines.run.harness import CheckSkipped, Harness, read_all
from ..engines.target.authoring import missing_python_protocol
from ._support import check_whole_batches, spin
from .base import check
from .durability_traced import drive_traced_worker, steps_of

__all__ = ["CHECKS"]

_BATCH: Final = 3
"""Events per batch of the kill rounds: a batch stored in part shows as APPEND-003."""

_PATIENCE: Final = 120.0
"""Seconds for a reply, a close, or the tracer to attach, on a loaded machine."""


@contextlib.asynccontextmanager
async def _launched(h: Harness, rule_id: str) -> AsyncIterator[ServerControl]:
    """A throwaway server from the backend (`ServerLaunching`), removed when the block ends."""
    async with h.opened() as cp:
        launcher = cp if isinstance(cp, ServerLaunching) else None
    if launcher is None:
        raise CheckSkipped(
            f"{rule_id} of a server needs a server the kit may kill: "
            + missing_python_protocol(
                cp,
                "a server it may kill",
                "ServerLaunching (launch_server() -> ServerControl, see checkpointspec.spec.server)",
            )
        )
    try:
        server = launcher.launch_server()
    except (OSError, RuntimeError) as exc:
        raise CheckSkipped(
            f"{rule_id} of a server needs a throwaway server: launch_server() failed: {exc}"
        ) from exc
    try:
        yield server
    finally:
        server.remove()


async def _abandon(cp: Checkpointer) -> None:
    """Close a handle whose server was killed under it: its outcome does not matter."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(cp.close(), _PATIENCE)


def _texts(writer: str, batch: int) -> list[str]:
    return [f"{writer}:{batch}:{i}" for i in range(_BATCH)]


async def _killed_after_an_acknowledgement(
    cp: Checkpointer, server: ServerControl, session: str, writer: str, batches: int
) -> list[int]:
    """Append ``batches`` batches, then kill the server the moment the last is acknowledged."""
    for batch in range(batches):
        await cp.append(session, [UserPrompt(t) for t in _texts(writer, batch)])
    server.crash()
    return list(range(batches))


async def _killed_in_a_stream(
    cp: Checkpointer, server: ServerControl, session: str, writer: str, rng: random.Random
) -> list[int]:
    """Append batches without pause; kill the server after a random number of
    acknowledgements and a random fraction of an append's duration more."""
    acked: list[int] = []
    times: list[float] = []
    enough = asyncio.Event()
    wanted = rng.randint(2, 12)

    async def stream() -> None:
        batch = 0
        while True:
            await cp.append(session, [UserPrompt(t) for t in _texts(writer, batch)])
            acked.append(batch)
            times.append(time.perf_counter())
            if len(acked) >= wanted:
                enough.set()
            batch += 1

    writing = asyncio.create_task(stream())
    counted = asyncio.create_task(enough.wait())
    try:
        done, _ = await asyncio.wait(
            [writing, counted],
            timeout=_PATIENCE,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if writing in done:
            writing.result()  # the stream stopped on its own: say why
        if not enough.is_set():
            raise RuleViolation(
                "DUR-002", f"no {wanted} appends were acknowledged in {_PATIENCE:g}s"
            )
        interval = (times[-1] - times[0]) / max(len(times) - 1, 1)
        # The loop is held while spinning: the next append is at the server, not here.
        spin(min(interval, 0.05) * rng.random())
        server.crash()
        return list(acked)
    finally:
        for task in (writing, counted):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@check(
    "DUR-002",
    "APPEND-003",
    "INTEG-001",
    kind="processes",
    replay_note="where in the server's work a kill at a random moment lands depends on timing",
)
async def server_killed_keeps_acknowledged_writes(h: Harness) -> None:
    """DUR-002: a server killed right after it acknowledged a write, or at a random moment, keeps every acknowledged write, whole."""
    rng = random.Random(h.seed)
    async with _launched(h, "DUR-002") as server:
        for number in h.slice.within(range(h.profile.server_kills), "server kills"):
            session, writer = f"killed-{number}", f"w{number}"
            store = h.new_store()
            # The handle's pool reconnects to the dead server and says so each time.
            with quiet():
                cp = await h.open(store, options=server.options)
                if number % 2 == 0:
                    how = "right after it acknowledged the last of them"
                    acked = await _killed_after_an_acknowledgement(
                        cp, server, session, writer, rng.randint(1, 5)
                    )
                else:
                    how = "at a random moment of a stream of appends"
                    acked = await _killed_in_a_stream(cp, server, session, writer, rng)
                try:
                    server.start()
                except (OSError, RuntimeError) as exc:
                    raise RuleViolation(
                        "DUR-002",
                        f"the server did not start again after it was killed {how}: {exc}",
                    ) from exc
                # Closed once the server is back: a pool still reconnecting to a dead
                # server holds its close for seconds.
                await _abandon(cp)
            async with h.opened(store, options=server.options) as again:
                log = await read_all(again, session)
                stored = {getattr(s.event, "text", "") for s in log}
                lost = [b for b in acked if _texts(writer, b)[-1] not in stored]
                expect(
                    not lost,
                    "DUR-002",
                    f"acknowledged batches are gone after the server was killed {how} and "
                    f"restarted: batches {lost} of {len(acked)} acknowledged "
                    f"({len(log)} events stored)",
                )
                batches = [_texts(writer, b) for b in range(len(log) // _BATCH + 2)]
                check_whole_batches(log, batches, "APPEND-003")
                report = await again.check_integrity()
                expect(
                    report.ok,
                    "DUR-002",
                    f"check_integrity fails after the server was killed {how}: {report.detail}",
                )
        h.measure(f"killed the server {h.profile.server_kills} times")


# -- the power cut, from the server's trace ------------------------------------------------


async def _run_traced(
    h: Harness, server: ServerControl, store: Path, calls: list[Call], trace_file: Path
) -> bytes:
    """Run ``calls`` in a worker process on ``store`` with strace attached to it and to
    every server process, recording into ``trace_file``; the replies the worker sent."""
    options = {**h.options, **server.options}
    with tempfile.TemporaryFile() as stderr:
        worker = await WorkerClient.start(h.target, stderr, _PATIENCE)
        pids = [worker.process.pid, *server.processes()]
        tracer = await asyncio.create_subprocess_exec(
            *attach_argv(trace_file, pids),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            try:
                await attached(tracer, pids, _PATIENCE)
            except NotAttached as exc:
                raise CheckSkipped(str(exc)) from exc
            transcript = await drive_traced_worker(worker, store, options, calls, "DUR-003")
        finally:
            await worker.close()
            if tracer.returncode is None:
                tracer.send_signal(signal.SIGINT)  # strace detaches: the server runs on
            await asyncio.wait_for(tracer.wait(), _PATIENCE)
    return transcript


async def _record_round(
    h: Harness, server: ServerControl, store: Path, rng: random.Random, number: int
) -> Round:
    async with h.opened(store, options=server.options):
        pass  # the store exists before the image is taken
    sessions, calls = plan_workload(rng, h.capabilities, number)
    server.settle()
    base: Image = SimulatedDisk.load(server.data_directory).image()
    trace_file = h.root / f"{store.name}.strace"
    try:
        transcript = await _run_traced(h, server, store, calls, trace_file)
        with trace_file.open(encoding="ascii", errors="replace") as lines:
            run: TracedRun = parse_trace(lines, server.data_directory, base)
    except TraceError as exc:
        raise CheckSkipped(f"the trace of the server cannot be judged: {exc}") from exc
    finally:
        trace_file.unlink(missing_ok=True)
    if not run.ops:
        raise RuleViolation(
            "DUR-003",
            f"the server wrote nothing to its data directory during {len(calls)} acknowledged "
            "writes: what it acknowledged can only be in memory",
        )
    return Round(
        number,
        CrashPlan(base, run.ops),
        steps_of(run, calls, transcript),
        sessions,
        ", traced server",
    )


def _cut_after_acknowledgements(rnd: Round, rng: random.Random, left: int) -> list[CrashSpec]:
    """`server_crash_specs` after the round's acknowledgements."""
    return server_crash_specs(rnd.plan, {s.end for s in rnd.steps if s.end > 0}, rng, left)


@check("DUR-003", "APPEND-003", "INTEG-001", kind="crash")
async def server_power_loss_from_its_trace(h: Harness) -> None:
    """DUR-003: after a power loss of the server's host at any point of a traced workload, acknowledged writes are in effect.

    The crash states are those of the server's data directory, rebuilt from a
    trace of every server process; each is judged in a server started on a copy.
    """
    reason = attach_unavailable()
    if reason is not None:
        raise CheckSkipped(f"DUR-003 of a server needs a tracer that attaches to it: {reason}")
    async with _launched(h, "DUR-003") as server:
        stores: list[Path] = []

        async def record(rng: random.Random, number: int) -> Round:
            stores.append(h.new_store())
            return await _record_round(h, server, stores[-1], rng, number)

        async def reopen(state: CrashState, sessions: tuple[str, ...]) -> Seen:
            return await reopened_in_a_server(h, stores[-1], server, state, sessions)

        checked, rounds, ops = await check_rounds(
            h, h.profile.server_states, record, _cut_after_acknowledgements, "DUR-003", reopen
        )
    h.measure(
        f"checked {checked} power cuts of the server in {rounds} traced rounds "
        f"({ops} operations on its data directory)"
    )


CHECKS = (server_killed_keeps_acknowledged_writes, server_power_loss_from_its_trace)
