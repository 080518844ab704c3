"""A power loss at any point of a writer of any contract, rebuilt from its trace.

For a contract whose stores keep their data in files under the store's directory
and that claims its answered calls survive a power loss, `power_loss_states` runs
one program in a worker process
(`checkpointspec.conformance.engines.processes.contract_worker`) under ``strace``
(`recorder`): every call that changed a file under the store, with its bytes, and
every line the worker wrote to the kit, so each answer is placed among the store's
operations (a call is answered once its line is written). From those operations
`states.CrashPlan` builds what a power loss after any of them may leave (only what
was synced is certain; the rest may be lost, reordered or torn); a sample of those
states, drawn with the seed, is written to fresh directories, each opened in this
process and read back (the contract's ``readback`` calls). The history of the
calls answered before the power loss, the one in flight (which may have taken
effect or not) and the reads is judged like any other
(`checkpointspec.conformance.engines.history.linearizable`): an answered call
lost, or half of one kept, leaves no order that explains the reads.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from ....backends.registry import BackendTarget
from ..contract.contract import Call
from ..history.linearizable import Recorded
from ..processes.contract_programs import judge_history
from ..processes.contract_worker import (
    ContractWorker,
    load_contract,
    open_contract_store,
    read_back,
)
from .disk import SimulatedDisk
from .recorder import TraceError, parse_trace, tracer_argv
from .scratch import unseen
from .states import CrashPlan

__all__ = ["PowerLosses", "TraceUnusable", "before_the_loss", "power_loss_states"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)


class PowerLosses(msgspec.Struct, frozen=True):
    """What was covered: ``operations`` store operations traced, ``states`` crash
    states built and judged, of ``possible``."""

    operations: int
    states: int
    possible: int


class TraceUnusable(Exception):
    """The trace cannot be judged (the tracer lost the worker's lines, or a call it
    cannot place): neither a pass nor a finding."""


def before_the_loss(
    records: Sequence[Recorded], program: Sequence[Call], replies: Sequence[int], point: int
) -> list[Recorded]:
    """The calls answered by the time ops 1..``point`` were issued, and the one then in
    flight with no answer. ``replies[n]`` is how many ops had completed when the
    worker wrote its line ``n`` (0: ready, n: call n - 1 answered)."""
    history: list[Recorded] = []
    for n, call in enumerate(program):
        start, end = replies[n], replies[n + 1]
        if end <= point:
            history.append(records[n])
        elif start < point:
            history.append(Recorded(records[n].process, call, records[n].invoked))
            break
        else:
            break
    return history


async def power_loss_states(
    contract_ref: str,
    target: BackendTarget,
    root: Path,
    program: Sequence[Call],
    *,
    budget: int,
    seed: int,
    env: Mapping[str, str] | None = None,
) -> PowerLosses:
    """Judge up to ``budget`` crash states of a traced run of ``program`` (see the
    module). Raises the first `RuleViolation` found, naming the crash state in its
    message; `TraceUnusable` when the trace cannot be judged, `HistoryUndecided` when a
    state's history is too tangled to decide; returns what was covered."""
    contract = load_contract(contract_ref)
    if contract.readback is None:
        raise ValueError(f"contract {contract.name!r} has no readback: crashes cannot be judged")
    reads = contract.readback(program)
    store = Path(tempfile.mkdtemp(prefix="traced-", dir=root))
    # The store once opened and closed is the durable image the run starts from.
    await contract.close(await open_contract_store(contract, target, store))
    base = SimulatedDisk.load(store).image()
    trace_file = root / f"{store.name}.strace"
    worker = await ContractWorker.start(
        0, contract_ref, target, store, env=env, prefix=tracer_argv(trace_file)
    )
    try:
        await worker.send(program)
        records = await worker.records()
    finally:
        await worker.kill()
    try:
        with trace_file.open(encoding="ascii", errors="replace") as lines:
            run = parse_trace(lines, store, base)
    except TraceError as exc:
        raise TraceUnusable(str(exc)) from exc
    finally:
        trace_file.unlink(missing_ok=True)
    unjudged = unseen(store, run.mapped, {})
    if unjudged:
        raise TraceUnusable(
            f"the store maps files shared and writable ({', '.join(unjudged)}): writes "
            "through a mapping are not system calls, so a trace cannot say what a power "
            "loss leaves in them"
        )
    replies = run.replies(bytes(worker.transcript))
    if replies is None or len(replies) != len(program) + 1 or len(records) != len(program):
        raise TraceUnusable(
            f"the trace does not place the worker's {len(program) + 1} lines "
            f"({len(records)} calls recorded)"
        )
    plan = CrashPlan(base, run.ops)
    possible = len(plan.all_specs())
    specs = plan.sample(budget, random.Random(seed))
    for number, spec in enumerate(specs):
        state = plan.build(spec)
        crashed = store.parent / f"{store.name}-state-{number}"
        crashed.mkdir()
        state.materialise(crashed)
        history = before_the_loss(records, program, replies, spec.point)
        history += await read_back(contract, target, crashed, reads, process=1)
        judge_history(contract, history, f"a {spec} ({len(run.ops)} store operations traced)")
    return PowerLosses(len(run.ops), len(specs), possible)
