"""Holding writers right after one of their system calls: what KILL-001 and READ-003's holds share.

`checkpointspec.conformance.engines.crash.stopper` holds a worker process (and a
stdio backend's child) right after the Nth system call of a write that changes
a store file. No fault point, no timer: every point of every write can be
reached on every run. `holds` says which (write, N) pairs a check tries. The
budget, ``profile.held_writes``, is allotted per kind of write
(`checkpointspec.conformance.engines.crash.verdicts.allot`, by ``KIND_WEIGHTS``): appends of several events to a session that has events, truncates
(TRUNCATE), deletes (DELETE), first appends of a session; each kind the workload
has is held at least once, and a kind that makes fewer calls than its share
leaves the rest to the next. Within a kind, writes come in the seed's order,
each has its store calls counted in a first run, and ``PER_WRITE`` of them
are drawn with the seed, spread over the write (`spread`). Each hold starts from a copy of a store holding the
workload's earlier writes (`prepared`), with fresh worker processes
(`opened_worker`), and `held_write` sends the write and ends the hold.

Every wait of a hold has a deadline: a worker's reply (``REPLY_TIMEOUT``), the
stopper process's lines and exit (`STOPPER_PATIENCE`). A writer that exits in
the middle of its write without being killed is the backend's doing: the
check's rule fails, with its exit status and last stderr lines. A wait that
runs out is the kit's error (`WorkerHung`, `StopperHung`), naming the process,
the request or system call, how long, and the last stderr lines.

*A backend whose data lives in a server* changes no file under the store
directory: when an append counts no store call, its client is held at its round
trips instead, right after each send to the server (the stopper's ``sends``
mode), and every hold of the check is. Such a store cannot be copied (its
directory only names where the data lives), so each hold starts from a store
prepared afresh with the workload's earlier writes (`hold_store`).

A writer behind a held one: `until_waiting` says when a second worker waits in
the middle of its request (its processes asleep and idle, or blocked on a file
lock), so it can be killed there; `read_while_held` reads from a third.

The checks: `checkpointspec.conformance.checks.kill` (killed there, KILL-001)
and `checkpointspec.conformance.checks.reading` (read from another process
there, READ-003).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from ....backends.stdio.messages import Read
from ....spec import CheckpointError
from ..contract.violations import RuleViolation
from ..processes.client import (
    UNSENT,
    Failed,
    Opened,
    Succeeded,
    WorkerClient,
    WorkerExited,
    WorkerHung,
    WorkerReply,
    backend_error,
    hello,
    marker_prompts,
)
from ..run.harness import CheckSkipped, Harness
from .stopper import (
    STOPPER_PATIENCE,
    StopperError,
    SyscallStopper,
    server_sends_unavailable,
    stopper_unavailable,
    tree_cpu_ticks,
    tree_sleeps,
    tree_states,
    tree_threads,
)
from .verdicts import KIND_WEIGHTS, Call, allot, kind_of

__all__ = [
    "LOCK_POLL",
    "NEVER",
    "PER_WRITE",
    "QUIET",
    "READER_PATIENCE",
    "REPLY_TIMEOUT",
    "STOPPER_PATIENCE",
    "Held",
    "HeldWrite",
    "Hold",
    "copy_store",
    "counted_write",
    "held_write",
    "hold_store",
    "holds",
    "needs_holding",
    "opened_worker",
    "opened_workers_on",
    "prepared",
    "read_while_held",
    "spread",
    "targets",
    "until_waiting",
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
QUIET: Final = 0.3
"""Seconds a writer's processes must all sleep, using no CPU time, to count as waiting."""
POLLING: Final = 1.0
"""Seconds over which a writer polling for a lock (sleeping between attempts) is told
apart from one at work: asleep at nearly every look, using little CPU time."""
POLLING_ASLEEP: Final = 0.5
"""The least share of looks over `POLLING` at which a polling writer's processes all
sleep. Measured on the Node example's writer retrying its lock file under the
stopper: asleep at 53-84% of the looks, using 14-35% of a CPU (each attempt is a few
system calls, every one stopping it twice). A writer at work is not asleep: it runs,
or stops at its traced calls, or waits for a CPU on a busy machine (runnable)."""
POLLING_CPU: Final = 0.4
"""The most of one CPU a polling writer's processes use over `POLLING`."""


_TICKS_PER_SECOND: Final = os.sysconf("SC_CLK_TCK")


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
        worker = await WorkerClient.start(h.target, stderr, REPLY_TIMEOUT)
        try:
            opened = await worker.call(hello(str(store), h.target.options))
            if not isinstance(opened, Opened):
                raise RuleViolation(rule_id, f"a worker could not open the store: {opened}")
            yield worker
        finally:
            if worker.running:
                await worker.kill()


@contextlib.asynccontextmanager
async def opened_workers_on(
    h: Harness, store: Path, rule_id: str, count: int
) -> AsyncIterator[list[WorkerClient]]:
    """``count`` workers of `opened_worker`, started at once (a worker's start is mostly
    waiting), every one killed when the block ends, also when another failed to start."""
    async with contextlib.AsyncExitStack() as stack:
        started = await asyncio.gather(
            *(stack.enter_async_context(opened_worker(h, store, rule_id)) for _ in range(count)),
            return_exceptions=True,
        )
        failed = [result for result in started if isinstance(result, BaseException)]
        if failed:
            raise failed[0]
        yield [worker for worker in started if isinstance(worker, WorkerClient)]


async def prepared(h: Harness, calls: list[Call], upto: int, rule_id: str) -> Path:
    """A store holding the first ``upto`` writes, every handle on it closed.

    Written through a handle of the kit's process: a worker process would cost a
    start per hold, and a server backend's holds each prepare a store afresh."""
    store = h.new_store()
    async with h.opened(store) as cp:
        for call in calls[:upto]:
            try:
                if call.kind == "append":
                    await cp.append(call.session, marker_prompts(call.texts))
                elif call.kind == "truncate":
                    await cp.truncate(call.session, call.to_seq)
                else:
                    await cp.delete(call.session)
            except CheckpointError as exc:
                raise RuleViolation.or_crash(
                    rule_id,
                    f"{call.label} failed: {type(exc).__name__}: {exc}",
                    call.kind,
                    type(exc).__name__,
                ) from exc
    return store


def copy_store(h: Harness, store: Path) -> Path:
    """A new store of this check holding a copy of ``store``'s files. Raises `CheckSkipped`,
    saying why, for a backend that keeps its data outside the store's directory
    (`ExternalStorage`): a copy of the directory would share the original's data."""
    if h.run.probe.external_storage:
        raise CheckSkipped(
            "this check copies a store's directory, and the backend keeps its data outside "
            "it (ExternalStorage): a copy would share the original's data"
        )
    target = h.new_store()
    shutil.rmtree(target)
    shutil.copytree(store, target)
    return target


class Hold(NamedTuple):
    """One hold a check tries: write ``t`` of the workload held after its ``n``-th store call,
    from ``before``, a store holding the writes before it; ``sends``: the calls counted
    are the client's sends to a server (a backend whose data lives there)."""

    t: int
    n: int
    before: Path
    sends: bool


async def hold_store(h: Harness, hold: Hold, calls: list[Call], rule_id: str) -> Path:
    """A new store for ``hold`` holding the writes before it: a copy of its files, or,
    for a server backend (whose directory only names its data: its calls counted as
    sends, or ExternalStorage declared), prepared afresh."""
    if hold.sends or h.run.probe.external_storage:
        return await prepared(h, calls, hold.t, rule_id)
    return copy_store(h, hold.before)


class HeldWrite(NamedTuple):
    """One write sent to a traced worker: its stopper, its reply to come, and what it reached."""

    stopper: SyscallStopper
    reply: asyncio.Future[WorkerReply]
    reached: Held


@contextlib.asynccontextmanager
async def held_write(
    worker: WorkerClient, store: Path, call: Call, n: int, rule_id: str, sends: bool = False
) -> AsyncIterator[HeldWrite]:
    """Send ``call`` to ``worker`` with the stopper process holding it after its ``n``-th
    store call (with ``sends``, its sends to a server count too); when the block ends,
    the stopper process is ended whatever happened (its exit kills a tree still held),
    so the worker can always be reaped.

    A worker that exits before its reply without being killed fails ``rule_id``.
    Raises `StopperHung` or `WorkerHung` when a wait runs out, `CheckSkipped` when
    no process can be held here.
    """
    try:
        stopper = await SyscallStopper.start(worker.process.pid, [store], n, sends=sends)
    except StopperError as exc:
        raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
    reply: asyncio.Future[WorkerReply] = asyncio.ensure_future(_first_reply(worker, call))
    try:
        yield HeldWrite(stopper, reply, await _reached(stopper, reply, worker, call, n, rule_id))
    finally:
        await stopper.kill()
        if not reply.done():
            reply.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reply  # what it came to is the block's to judge; never left unretrieved


async def _first_reply(worker: WorkerClient, call: Call) -> WorkerReply:
    await worker.send(call.as_request())
    return await worker.receive()


async def _reached(
    stopper: SyscallStopper,
    reply: asyncio.Future[WorkerReply],
    worker: WorkerClient,
    call: Call,
    n: int,
    rule_id: str,
) -> Held:
    """Where the write stands once it is held or has ended."""
    pending: list[asyncio.Future[WorkerReply] | asyncio.Future[str]] = [reply, stopper.outcome]
    # The worker's own reply deadline bounds this wait; this one is for a stopper
    # that neither holds nor lets go.
    await asyncio.wait(
        pending,
        timeout=worker.reply_timeout + STOPPER_PATIENCE,
        return_when=asyncio.FIRST_COMPLETED,
    )
    if stopper.outcome.done():
        line = stopper.outcome.result()
        if line.startswith("stopped "):
            return Held(line.split(" ", 2)[2], n)
        if line.startswith("error "):
            await worker.kill()
            raise StopperError(
                f"holding worker process {worker.process.pid} after store call #{n} of "
                f"{call.label}: {line.removeprefix('error ')}"
            )
    try:
        await reply  # bounded: the worker's reply deadline raises WorkerHung
    except WorkerHung as hung:
        hold = "counted" if n == NEVER else f"to be held after its store call #{n}"
        threads = tree_states(worker.process.pid)
        raise WorkerHung(
            f"{call.label}, sent to a worker with its store calls {hold}: {hung} (its "
            f"threads: {threads})",
            hung.waiting_for,
            hung.stderr,
        ) from hung
    except WorkerExited as exited:
        raise RuleViolation.or_crash(
            rule_id,
            f"the worker (process {worker.process.pid}) exited in the middle of {call.label} "
            f"without being killed: {exited}",
            call.kind,
            backend_error(exited),
        ) from exited
    # The write ended before its nth call: the ones counted were all it made.
    counted = await stopper.finish()
    return Held(None, len(counted))


def targets(rng: random.Random, calls: Sequence[Call]) -> dict[str, list[int]]:
    """The writes to hold by kind, in `KIND_WEIGHTS`' order; each kind's in the seed's order."""
    groups: dict[str, list[int]] = {kind: [] for kind in KIND_WEIGHTS}
    for t in range(len(calls)):
        groups[kind_of(calls, t)].append(t)
    for group in groups.values():
        rng.shuffle(group)
    return {kind: group for kind, group in groups.items() if group}


async def holds(
    h: Harness, rng: random.Random, calls: list[Call], rule_id: str
) -> AsyncIterator[Hold]:
    """Every hold the budget allows, kind by kind as `allot` shares it out: each
    write's store calls are counted once, then ``PER_WRITE`` of them (all of them
    with the profile's ``held_every_call``; or what is left of the kind's share)
    are drawn with the seed, spread over the write. A kind whose writes make fewer calls than its share leaves the rest to
    the next kind.

    Once the run's time cap is reached, each kind not yet held is held
    once and no more; the slice records how many holds were left out (the check is
    then incomplete).

    When an append changes no file under the store directory (a backend whose
    data lives in a server), its sends to the server are counted instead, and
    every hold from then on is at a round trip. Raises `CheckSkipped` when they
    cannot be counted here either.
    """
    groups = targets(rng, calls)
    shares = allot(h.profile.held_writes, list(groups))
    spare, held, cut, sends = 0, 0, False, False
    for kind, writes in groups.items():
        share, taken = shares[kind] + spare, 0
        for t in writes:
            if taken and taken < share and h.slice.spent():
                # The slice is spent: this kind was held, and the next ones get one hold each.
                share, cut = taken, True
            if taken >= share:
                break
            before = await prepared(h, calls, t, rule_id)
            try:
                counted, sends = await _count_write(h, before, calls, t, rule_id, sends)
                per_write = counted if h.profile.held_every_call else PER_WRITE
                for n in spread(rng, counted, min(per_write, share - taken)):
                    if taken and h.slice.spent():
                        cut = True
                        break
                    yield Hold(t, n, before, sends)
                    taken += 1
            finally:
                h.discard_store(before)
        spare, held = share - taken, held + taken
    if cut:
        h.slice.stopped(f"held writers {held} times of up to {h.profile.held_writes}")


async def _count_write(
    h: Harness, before: Path, calls: list[Call], t: int, rule_id: str, sends: bool
) -> tuple[int, bool]:
    """How many store calls write ``t`` makes on a store like ``before``, and whether
    they are sends: an append that changes no file under the store is counted again,
    by its sends to a server."""
    counted = await _count_calls(h, before, calls, t, rule_id, sends)
    if counted == 0 and calls[t].kind == "append" and not sends:
        _needs_sends(calls[t])
        return await _count_calls(h, before, calls, t, rule_id, True), True
    return counted, sends


def _needs_sends(call: Call) -> None:
    reason = server_sends_unavailable()
    if reason is not None:
        raise CheckSkipped(
            f"{call.label} changed no file under the store directory (a backend whose data "
            f"lives in a server), and its sends to the server cannot be counted here: {reason}"
        )


def spread(rng: random.Random, counted: int, take: int) -> list[int]:
    """``take`` of the calls ``1..counted`` (all if fewer), one drawn from each of
    ``take`` consecutive, near-equal stretches, except that with two or more the
    stretch holding the write's middle call takes that call: a write done in equal
    pieces (a truncate cutting one event at a time, a batch written event by event)
    has finished its first piece and not its last there, so the defect shows on
    every seed, not only where a draw happened to fall between two pieces."""
    if counted <= take:
        return list(range(1, counted + 1))
    bounds = [1 + counted * i // take for i in range(take + 1)]
    drawn = [rng.randrange(start, end) for start, end in itertools.pairwise(bounds)]
    if take >= 2:
        middle = 1 + counted // 2
        drawn = [
            middle if start <= middle < end else n
            for n, (start, end) in zip(drawn, itertools.pairwise(bounds), strict=True)
        ]
    return drawn


async def _count_calls(
    h: Harness, before: Path, calls: list[Call], t: int, rule_id: str, sends: bool
) -> int:
    """How many store calls write ``t`` makes on a store like ``before``."""
    store = await hold_store(h, Hold(t, NEVER, before, sends), calls, rule_id)
    try:
        async with (
            opened_worker(h, store, rule_id) as worker,
            held_write(worker, store, calls[t], NEVER, rule_id, sends) as write,
        ):
            counted = write.reached.counted
    finally:
        h.discard_store(store)
    if counted == 0 and sends and calls[t].kind == "append":
        raise CheckSkipped(
            f"{calls[t].label} changed no file under the store directory and sent nothing "
            "to a server: there is no system call of its client to hold it at"
        )
    return counted


async def counted_write(h: Harness, calls: list[Call], t: int, rule_id: str) -> tuple[int, bool]:
    """How many store calls write ``t`` makes after the writes before it, and whether
    they are sends to a server (its append changed no file under the store)."""
    before = await prepared(h, calls, t, rule_id)
    try:
        return await _count_write(h, before, calls, t, rule_id, False)
    finally:
        h.discard_store(before)


async def until_waiting(worker: WorkerClient, reply: asyncio.Future[WorkerReply]) -> bool:
    """True once ``worker`` waits in the middle of its request: every process of its
    tree sleeps (on a lock, a socket, a pipe) and uses no CPU time for ``QUIET``
    seconds, or it waits on a file lock another holds, or it polls for a lock (over
    `POLLING` seconds asleep at `POLLING_ASLEEP` of the looks, using at most
    `POLLING_CPU` of a CPU: a store without ``flock``, such as the Node example's,
    retries a lock file with pauses between); False when ``reply`` came first.
    Bounded by the worker's reply deadline (`WorkerHung` from ``reply``)."""
    pid = worker.process.pid
    loop = asyncio.get_running_loop()
    quiet_since, used = loop.time(), tree_cpu_ticks(pid)
    window_since, window_used, looks, asleep = quiet_since, used, 0, 0
    while not reply.done():
        await asyncio.wait([reply], timeout=LOCK_POLL)
        if reply.done():
            break
        if waits_on_a_lock(pid):
            return True
        now, sleeps = tree_cpu_ticks(pid), tree_sleeps(pid)
        if now != used or not sleeps:
            quiet_since, used = loop.time(), now
        elif loop.time() - quiet_since >= QUIET:
            return True
        looks, asleep = looks + 1, asleep + sleeps
        if loop.time() - window_since >= POLLING:
            busy = (now - window_used) / _TICKS_PER_SECOND / (loop.time() - window_since)
            if asleep >= POLLING_ASLEEP * looks and busy <= POLLING_CPU:
                return True
            window_since, window_used, looks, asleep = loop.time(), now, 0, 0
    await reply  # its error, if it came to one (a hang, an exit), is the caller's to see
    return False


async def read_while_held(
    reader: WorkerClient, session: str, rule_id: str
) -> list[tuple[int, str]] | None:
    """What ``reader`` reads of ``session`` now, or None if it waits for a held writer:
    blocked on a file lock (``/proc/locks`` says so at once) or silent for
    ``READER_PATIENCE`` seconds. A read that raises fails ``rule_id``."""
    await reader.send(Read(UNSENT, session))
    answer = asyncio.ensure_future(reader.receive())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READER_PATIENCE
    while not answer.done():
        await asyncio.wait([answer], timeout=LOCK_POLL)
        if not answer.done() and (waits_on_a_lock(reader.process.pid) or loop.time() > deadline):
            answer.cancel()
            return None  # it waits for the writer: nothing seen, nothing wrong
    reply = answer.result()
    if isinstance(reply, Failed):
        raise RuleViolation(
            rule_id, f"a read while a writer was held raised {reply.error}: {reply.message}"
        )
    assert isinstance(reply, Succeeded)
    assert isinstance(reply.value, list)
    return [(int(seq), str(text)) for seq, text in reply.value]


def needs_holding() -> None:
    reason = stopper_unavailable()
    if reason is not None:
        raise CheckSkipped(f"cannot hold a process at a system call here: {reason}")
