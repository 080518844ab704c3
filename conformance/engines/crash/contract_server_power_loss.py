"""A power cut of a database server's host at any point of a writer of any contract.

For a contract whose stores keep their data in a server the kit controls (a
`checkpointspec.spec.ServerControl`: a throwaway PostgreSQL cluster) and that claims
its answered calls survive the loss of that server's host, `server_power_loss_states`
opens a store of the server, starts a worker process on it
(`checkpointspec.conformance.engines.processes.contract_worker`), lets the server
settle (everything it wrote is durable) and takes its data directory as the durable
image, attaches ``strace`` to the worker and to every server process, and runs one
program. The trace holds the server's changes to its data directory and the worker's
answers in the order they happened (a server writes and syncs a commit before it
answers). From those operations `states.CrashPlan` builds what a power cut after any
of them may leave; the cut right after each answer comes first, then states drawn
with the seed (`states.server_crash_specs`). For each, a server is started on a copy
of that state (its recovery runs), the store is read back through the contract's
``readback`` calls and the history of the calls answered before the cut, the one in
flight and the reads is judged like any other.

Limits, as for the PostgreSQL backend's own check: writes the server makes between its
settling and the tracer attaching are in neither the image nor the trace; the kit sees
system calls only; each state costs a server start.
"""

from __future__ import annotations

import asyncio
import random
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ....backends.registry import BackendTarget
from ....spec import ServerControl
from ..contract.contract import Call
from ..processes.contract_programs import judge_history
from ..processes.contract_worker import (
    READY,
    ContractWorker,
    load_contract,
    open_contract_store,
    read_back,
)
from .contract_power_loss import PowerLosses, TraceUnusable, before_the_loss
from .disk import SimulatedDisk
from .recorder import NotAttached, TraceError, attach_argv, attached, parse_trace
from .states import CrashPlan, server_crash_specs

__all__ = ["server_power_loss_states"]

PATIENCE = 120.0
"""Seconds the tracer gets to attach, and to detach again."""


def _on(target: BackendTarget, server: ServerControl) -> BackendTarget:
    """``target`` pointed at ``server`` (its options over the target's)."""
    return msgspec.structs.replace(target, options={**target.options, **server.options})


async def server_power_loss_states(
    contract_ref: str,
    target: BackendTarget,
    root: Path,
    program: Sequence[Call],
    server: ServerControl,
    *,
    budget: int,
    seed: int,
) -> PowerLosses:
    """Judge up to ``budget`` power cuts of ``server``'s host during a traced run of
    ``program`` on a store of it (see the module). Raises the first `RuleViolation`
    found, naming the cut; `TraceUnusable` when the trace cannot be judged (strace
    could not attach, or the answers cannot be placed), `HistoryUndecided` when a
    history is too tangled to decide; returns what was covered."""
    contract = load_contract(contract_ref)
    if contract.readback is None:
        raise ValueError(f"contract {contract.name!r} has no readback: crashes cannot be judged")
    reads = contract.readback(program)
    on_server = _on(target, server)
    store = Path(tempfile.mkdtemp(prefix="traced-", dir=root))
    await contract.close(await open_contract_store(contract, on_server, store))
    worker = await ContractWorker.start(0, contract_ref, on_server, store)
    trace_file = root / f"{store.name}.strace"
    try:
        await asyncio.to_thread(server.settle)
        base = SimulatedDisk.load(server.data_directory).image()
        pids = [worker.pid, *server.processes()]
        tracer = await asyncio.create_subprocess_exec(
            *attach_argv(trace_file, pids),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await attached(tracer, pids, PATIENCE)
            await worker.send(program)
            records = await worker.records()
        except NotAttached as exc:
            raise TraceUnusable(str(exc)) from exc
        finally:
            await worker.kill()
            if tracer.returncode is None:
                tracer.send_signal(signal.SIGINT)  # strace detaches: the server runs on
            await asyncio.wait_for(tracer.wait(), PATIENCE)
        with trace_file.open(encoding="ascii", errors="replace") as lines:
            run = parse_trace(lines, server.data_directory, base)
    except TraceError as exc:
        raise TraceUnusable(str(exc)) from exc
    finally:
        trace_file.unlink(missing_ok=True)
    # The tracer attached after the worker said it was ready: its answers are the lines
    # after that one, and none of the server's operations came before it.
    answers = run.replies(bytes(worker.transcript)[len(READY) :])
    if answers is None or len(answers) != len(program) or len(records) != len(program):
        raise TraceUnusable(
            f"the trace does not place the worker's {len(program)} answers "
            f"({len(records)} calls recorded)"
        )
    replies = [0, *answers]
    plan = CrashPlan(base, run.ops)
    specs = server_crash_specs(plan, answers, random.Random(seed), budget)
    for spec in specs:
        state = plan.build(spec)
        copy = server.copy_at()
        try:
            copy.data_directory.mkdir()
            state.materialise(copy.data_directory)
            await asyncio.to_thread(copy.start)
            history = before_the_loss(records, program, replies, spec.point)
            history += await read_back(contract, _on(target, copy), store, reads, process=1)
        finally:
            await asyncio.to_thread(copy.remove)
        judge_history(
            contract,
            history,
            f"a power cut of the server's host: {spec} ({len(run.ops)} operations on its "
            "data directory traced)",
        )
    return PowerLosses(len(run.ops), len(specs), len(plan.all_specs()))
