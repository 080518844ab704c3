"""A writer of any contract killed right after each of its store-changing system calls.

For a contract whose stores keep their data in files under the store's directory,
`killed_at_each_call` runs one program of calls in a worker process
(`checkpointspec.conformance.engines.processes.contract_worker`) under the
system-call stopper (`stopper`): first to the end, counting the calls that change a
file under the store (K of them), then once for each chosen N of 1..K on a fresh
store, held right after the Nth and killed there, with no instruction run after
it. After each kill the store is opened in this process and read back (the
contract's ``readback`` calls), and the history is judged like any other
(`checkpointspec.conformance.engines.history.linearizable`): the calls the worker
answered before the kill, the one it was making (which may have taken effect or
not), then the reads. A store that loses an answered call, or shows half of one,
has no order that explains its reads: the finding names the read, what the model
gives and what came back, and the call the writer was killed after.

A process kill leaves the page cache alone, so what this checks is that every
state a killed writer can leave is one the contract allows (no torn write, no
answered call undone); a power loss is not simulated here.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from ....backends.registry import BackendTarget
from ..contract.contract import Call
from ..processes.contract_programs import judge_history
from ..processes.contract_worker import ContractWorker, load_contract, read_back
from .stopper import SyscallStopper, store_call_filter

__all__ = ["KilledAt", "killed_at_each_call"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)

EVERY_CALL = 10**9
"""A stopper target no program reaches: the run that counts the calls."""


class KilledAt(msgspec.Struct, frozen=True):
    """What the kill checks covered: ``calls`` store-changing system calls in the
    program's run, ``killed`` the points a writer was killed at (1-based)."""

    calls: int
    killed: tuple[int, ...]


async def killed_at_each_call(
    contract_ref: str,
    target: BackendTarget,
    root: Path,
    program: Sequence[Call],
    *,
    env: Mapping[str, str] | None = None,
    points: Iterable[int] | None = None,
    budget: int | None = None,
    seed: int = 0,
) -> KilledAt:
    """Kill a worker running ``program`` right after each of its store-changing
    system calls (or only at ``points``, 1-based, those past the last ignored; or,
    with ``budget`` and more calls than it, at a sample of ``budget`` of them drawn
    by ``seed``), and judge what each kill left (see the module). Raises the first
    `RuleViolation` found, naming the kill point in its message (`HistoryUndecided`
    for a history too tangled to decide); returns what was covered."""
    contract = load_contract(contract_ref)
    if contract.readback is None:
        raise ValueError(f"contract {contract.name!r} has no readback: kills cannot be judged")
    reads = contract.readback(program)

    async def held_at(point: int) -> tuple[Path, ContractWorker, SyscallStopper]:
        """A worker on a fresh store, traced to be held after its ``point``-th call."""
        path = Path(tempfile.mkdtemp(prefix="killed-", dir=root))
        worker = await ContractWorker.start(0, contract_ref, target, path, env=env)
        stopper = await SyscallStopper.start(worker.pid, [path], point, filtered=True)
        await worker.send(program, call_filter=store_call_filter())
        return path, worker, stopper

    path, worker, stopper = await held_at(EVERY_CALL)
    await worker.records()
    counted = len(await stopper.finish())
    await worker.kill()
    killed: list[int] = []
    if points is None:
        points = range(1, counted + 1)
        if budget is not None and counted > budget:
            points = sorted(random.Random(seed).sample(points, budget))
    for point in points:
        if not 1 <= point <= counted:
            continue
        path, worker, stopper = await held_at(point)
        outcome = await stopper.outcome
        await stopper.kill()
        history = await worker.records()
        await worker.kill()
        if not outcome.startswith("stopped "):
            continue  # the run took another path and ended first: nothing held
        killed.append(point)
        where = outcome.split(" ", 2)[2] if outcome.count(" ") >= 2 else f"call {point}"
        try:
            history += await read_back(contract, target, path, reads, process=1)
        except Exception as exc:
            exc.add_note(
                f"read back after the writer was killed right after its store-changing "
                f"system call {point} of {counted} ({where})"
            )
            raise
        judge_history(
            contract,
            history,
            f"the writer was killed right after its store-changing system call "
            f"{point} of {counted} ({where})",
        )
    return KilledAt(counted, tuple(killed))
