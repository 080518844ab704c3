"""Holding writers right after one of their system calls: what KILL-001 and READ-003's holds share.

`checkpointspec.conformance.engines.crash.stopper` holds a worker process (and a
stdio backend's child) right after the Nth system call of a write that changes
a store file. No fault point, no timer: every point of every write can be
reached on every run. `holds` says which (write, N) pairs a check tries: each
write of a workload drawn from the seed, those that can show a partial state
first (appends of several events to a session that has events, then truncates
and deletes), has its store calls counted in a first run, then ``PER_WRITE``
of them are drawn with the seed, up to ``profile.held_writes``. Each hold starts
from a copy of a store holding the workload's earlier writes (`prepared`), with
fresh worker processes (`opened_worker`), and `send_held` sends the write.

The checks: `checkpointspec.conformance.checks.kill` (killed there, KILL-001)
and `checkpointspec.conformance.checks.reading` (read from another process
there, READ-003).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final, NamedTuple

from ..harness import CheckSkipped, Harness
from ..processes.client import (
    Ok,
    Opened,
    WorkerClient,
    WorkerReply,
    hello,
)
from ..violations import RuleViolation
from .stopper import (
    StopperError,
    SyscallStopper,
    stopper_unavailable,
    tree_threads,
)
from .verdicts import Call

__all__ = [
    "LOCK_POLL",
    "NEVER",
    "PER_WRITE",
    "READER_PATIENCE",
    "REPLY_TIMEOUT",
    "Held",
    "copy_store",
    "holds",
    "needs_holding",
    "opened_worker",
    "prepared",
    "send_held",
    "targets",
    "waits_on_a_lock",
]

REPLY_TIMEOUT: Final = 60.0
"""Seconds a worker may take for any one reply."""
READER_PATIENCE: Final = 2.0
"""Seconds a reader may take while the writer is held before it counts as waiting for it."""
NEVER: Final = 1 << 30
"""A hold no write reaches: the stopper process only counts the write's calls."""
PER_WRITE: Final = 4
"""Holds drawn per write (all of its calls when it makes fewer)."""
LOCK_POLL: Final = 0.02
"""How often a silent reader is looked for among the waiters of ``/proc/locks``."""


def waits_on_a_lock(pid: int) -> bool:
    """True when a process of ``pid``'s tree is blocked on a file lock another holds."""
    tree = {str(tid) for tid in tree_threads(pid)}
    with contextlib.suppress(OSError), open("/proc/locks") as locks:
        for line in locks:
            parts = line.split()
            if len(parts) > 5 and parts[1] == "->" and parts[5] in tree:
                return True
    return False


class Held(NamedTuple):
    """What one trial reached: the Nth call it held the writer after, or None if the write ended."""

    call: str | None
    counted: int


@contextlib.asynccontextmanager
async def opened_worker(h: Harness, store: Path, rule_id: str) -> AsyncIterator[WorkerClient]:
    """A worker process with a handle open on ``store``, killed when the block ends; a
    backend that refuses the worker's ``hello`` fails ``rule_id``."""
    with tempfile.TemporaryFile() as stderr:
        worker = await WorkerClient.start(h.backend.target, stderr, REPLY_TIMEOUT)
        try:
            opened = await worker.call(hello(str(store), h.options))
            if not isinstance(opened, Opened):
                raise RuleViolation(rule_id, f"a worker could not open the store: {opened}")
            yield worker
        finally:
            if worker.running:
                await worker.kill()


async def prepared(h: Harness, calls: list[Call], upto: int, rule_id: str) -> Path:
    """A store holding the first ``upto`` writes, every handle on it closed."""
    store = h.new_store()
    async with opened_worker(h, store, rule_id) as worker:
        for call in calls[:upto]:
            reply = await worker.call(call.as_request())
            if not isinstance(reply, Ok):
                raise RuleViolation(rule_id, f"{call.label} failed in a worker: {reply}")
        await worker.close()
    return store


def copy_store(h: Harness, store: Path) -> Path:
    """A new store of this check holding a copy of ``store``'s files."""
    target = h.new_store()
    shutil.rmtree(target)
    shutil.copytree(store, target)
    return target


async def send_held(
    worker: WorkerClient, store: Path, call: Call, n: int
) -> tuple[SyscallStopper, asyncio.Task[WorkerReply], Held]:
    """Send ``call`` to ``worker`` with the stopper process holding it after its ``n``-th store call."""
    try:
        stopper = await SyscallStopper.start(worker.process.pid, [store], n)
    except StopperError as exc:
        raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
    await worker.send(call.as_request())
    reply = asyncio.ensure_future(worker.receive())
    pending: list[asyncio.Future[WorkerReply] | asyncio.Future[str]] = [reply, stopper.outcome]
    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if stopper.outcome.done():
        line = stopper.outcome.result()
        if line.startswith("stopped "):
            return stopper, reply, Held(line.split(" ", 2)[2], n)
    # The write ended before its nth call: n - 1 was its last.
    await reply
    counted = await stopper.finish()
    return stopper, reply, Held(None, len(counted))


def targets(rng: random.Random, calls: list[Call]) -> list[int]:
    """The writes to hold, those that can show a partial state first: appends of two or
    more events to a session that has events, then truncates and deletes, then the
    rest; each group in the seed's order."""

    def grown(t: int) -> bool:
        before = calls[t - 1].after.logs.get(calls[t].session, ()) if t else ()
        return calls[t].kind == "append" and len(calls[t].texts) > 1 and bool(before)

    groups: list[list[int]] = [[], [], []]
    for t, call in enumerate(calls):
        groups[0 if grown(t) else 1 if call.kind != "append" else 2].append(t)
    for group in groups:
        rng.shuffle(group)
    return [t for group in groups for t in group]


async def holds(
    h: Harness, rng: random.Random, calls: list[Call], rule_id: str
) -> AsyncIterator[tuple[int, int, Path]]:
    """(write, n, store before it) for every hold the budget allows: each write's store
    calls are counted once, then ``PER_WRITE`` of them (or all) are drawn with the seed.

    Raises `CheckSkipped` when the first write, an append, changes no file under
    the store directory (a backend whose data lives in a server): there is nothing
    to hold it at.
    """
    budget, held = h.profile.held_writes, 0
    for t in targets(rng, calls):
        if held >= budget:
            return
        before = await prepared(h, calls, t, rule_id)
        try:
            store = copy_store(h, before)
            async with opened_worker(h, store, rule_id) as worker:
                _, _, reached = await send_held(worker, store, calls[t], NEVER)
            shutil.rmtree(store, ignore_errors=True)
            if reached.counted == 0 and calls[t].kind == "append":
                raise CheckSkipped(
                    f"{calls[t].label} changed no file under the store directory: the "
                    "backend keeps its data elsewhere (a server), where no system call of "
                    "its client can be held"
                )
            points = range(1, reached.counted + 1)
            take = min(len(points), PER_WRITE, budget - held)
            for n in sorted(rng.sample(points, take)):
                yield t, n, before
                held += 1
        finally:
            shutil.rmtree(before, ignore_errors=True)


def needs_holding() -> None:
    reason = stopper_unavailable()
    if reason is not None:
        raise CheckSkipped(f"cannot hold a process at a system call here: {reason}")
