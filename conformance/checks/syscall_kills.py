"""Writers held at each of their system calls: killed there (KILL-001), or read from another process there (READ-003).

Unlike the traced checks (`checkpointspec.conformance.checks.traced`), which
rebuild the files a crash leaves, these stop a live process:
`checkpointspec.conformance.engines.syscall_stop` holds a worker process (and a
stdio backend's child) right after the Nth system call of a write that changes
a store file, for N = 1, 2, ... until the write ends first. No fault point, no
timer: every point of every write is reached on every run.

A trial: a store holding the workload's earlier writes (acknowledged), a worker
open on it, the helper attached to the worker's process tree, then the write
under test sent to the worker.

* KILL-001 (`killed_after_every_system_call`): at the hold, the worker's whole
  tree is SIGKILLed where it stands. The store, reopened through the factory,
  holds every acknowledged write and the killed one wholly or not at all, and a
  handle in this process can append to the killed write's session at once: the
  dead writer holds nothing.
* READ-003 (`read_while_a_writer_is_held`): at the hold, a second worker
  process, opened on the store beforehand, reads the written session. It sees
  the session as before the write or as after it, never in between; a reader
  that waits for the held writer (a file lock, a busy handler) shows nothing and
  passes. The writer is then let go and must finish its write.

Which holds: the workload's writes, those that can show a partial state first
(appends of several events to a session that has events, then truncates and
deletes); each write's store calls are counted in a first run, then
``_PER_WRITE`` of them are drawn with the seed, up to ``profile.held_writes``
holds. A passing check says how many.
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

from ...spec import Capability, UserPrompt
from ..engines.commanded import (
    Append,
    Command,
    Delete,
    Failed,
    Ok,
    Open,
    Opened,
    Read,
    Reply,
    Truncate,
    WorkerClient,
    WorkerExited,
    WorkerHung,
)
from ..engines.syscall_stop import (
    StopperError,
    SyscallStopper,
    stopper_unavailable,
    tree_threads,
)
from ..engines.violations import RuleViolation
from ._crash_states import Call, Expected, Step, plan_workload, verdict_on
from .base import check
from .harness import CheckSkipped, Harness

__all__ = ["CHECKS"]

_REPLY_TIMEOUT: Final = 60.0
_READER_PATIENCE: Final = 2.0
"""Seconds a reader may take while the writer is held before it counts as waiting for it."""
_NEVER: Final = 1 << 30
"""A hold no write reaches: the helper only counts the write's calls."""
_PER_WRITE: Final = 4
"""Holds drawn per write (all of its calls when it makes fewer)."""
_LOCK_POLL: Final = 0.02
"""How often a silent reader is looked for among the waiters of ``/proc/locks``."""


def _waits_on_a_lock(pid: int) -> bool:
    """True when a process of ``pid``'s tree is blocked on a file lock another holds."""
    tree = {str(tid) for tid in tree_threads(pid)}
    with contextlib.suppress(OSError), open("/proc/locks") as locks:
        for line in locks:
            parts = line.split()
            if len(parts) > 5 and parts[1] == "->" and parts[5] in tree:
                return True
    return False


def _command(call: Call) -> Command:
    if call.kind == "append":
        return Append(call.session, call.texts)
    if call.kind == "truncate":
        return Truncate(call.session, call.to_seq)
    return Delete(call.session)


class _Held(NamedTuple):
    """What one trial reached: the Nth call it held the writer after, or None if the write ended."""

    call: str | None
    counted: int


@contextlib.asynccontextmanager
async def _worker(h: Harness, store: Path, rule_id: str) -> AsyncIterator[WorkerClient]:
    with tempfile.TemporaryFile() as stderr:
        worker = await WorkerClient.start(h.backend.target, stderr, _REPLY_TIMEOUT)
        try:
            opened = await worker.call(Open(str(store), h.options))
            if not isinstance(opened, Opened):
                raise RuleViolation(rule_id, f"a worker could not open the store: {opened}")
            yield worker
        finally:
            if worker.running:
                await worker.kill()


async def _prepared(h: Harness, calls: list[Call], upto: int, rule_id: str) -> Path:
    """A store holding the first ``upto`` writes, every handle on it closed."""
    store = h.new_store()
    async with _worker(h, store, rule_id) as worker:
        for call in calls[:upto]:
            reply = await worker.call(_command(call))
            if not isinstance(reply, Ok):
                raise RuleViolation(rule_id, f"{call.label} failed in a worker: {reply}")
        await worker.close()
    return store


def _copy(h: Harness, store: Path) -> Path:
    target = h.new_store()
    shutil.rmtree(target)
    shutil.copytree(store, target)
    return target


async def _send_held(
    worker: WorkerClient, store: Path, call: Call, n: int
) -> tuple[SyscallStopper, asyncio.Task[Reply], _Held]:
    """Send ``call`` to ``worker`` with the helper holding it after its ``n``-th store call."""
    try:
        stopper = await SyscallStopper.start(worker.process.pid, store, n)
    except StopperError as exc:
        raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
    await worker.send(_command(call))
    reply = asyncio.ensure_future(worker.receive())
    pending: list[asyncio.Future[Reply] | asyncio.Future[str]] = [reply, stopper.outcome]
    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if stopper.outcome.done():
        line = stopper.outcome.result()
        if line.startswith("stopped "):
            return stopper, reply, _Held(line.split(" ", 2)[2], n)
    # The write ended before its nth call: n - 1 was its last.
    await reply
    counted = await stopper.finish()
    return stopper, reply, _Held(None, counted)


def _targets(rng: random.Random, calls: list[Call]) -> list[int]:
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


async def _holds(
    h: Harness, rng: random.Random, calls: list[Call], rule_id: str
) -> AsyncIterator[tuple[int, int, Path]]:
    """(write, n, store before it) for every hold the budget allows: each write's store
    calls are counted once, then ``_PER_WRITE`` of them (or all) are drawn with the seed."""
    budget, held = h.profile.held_writes, 0
    for t in _targets(rng, calls):
        if held >= budget:
            return
        before = await _prepared(h, calls, t, rule_id)
        try:
            store = _copy(h, before)
            async with _worker(h, store, rule_id) as worker:
                _, _, reached = await _send_held(worker, store, calls[t], _NEVER)
            shutil.rmtree(store, ignore_errors=True)
            points = range(1, reached.counted + 1)
            take = min(len(points), _PER_WRITE, budget - held)
            for n in sorted(rng.sample(points, take)):
                yield t, n, before
                held += 1
        finally:
            shutil.rmtree(before, ignore_errors=True)


def _needs_holding() -> None:
    reason = stopper_unavailable()
    if reason is not None:
        raise CheckSkipped(f"cannot hold a process at a system call here: {reason}")


@check(
    "KILL-001",
    "APPEND-003",
    "DUR-002",
    replay_note="the system call a writer is killed after is exact; how many calls a "
    "write makes can vary between runs (a backend that batches by timing)",
)
async def killed_after_every_system_call(h: Harness) -> None:
    """KILL-001: a writer SIGKILLed right after any one of its store system calls leaves its write whole or absent, and holds nothing."""
    _needs_holding()
    rng = random.Random(h.seed)
    sessions, calls = plan_workload(rng, h.capabilities, 0)
    held = 0
    async for t, n, before in _holds(h, rng, calls, "KILL-001"):
        store = _copy(h, before)
        async with _worker(h, store, "KILL-001") as worker:
            stopper, reply, reached = await _send_held(worker, store, calls[t], n)
            if reached.call is None:
                continue  # this run of the write made fewer calls than counted
            await stopper.kill()
            await worker.kill()
            reply.cancel()
            with contextlib.suppress(asyncio.CancelledError, WorkerExited, WorkerHung):
                await reply
        acked = calls[t - 1].after if t else Expected({}, frozenset())
        flight = Step(calls[t].label, 0, 1, calls[t].after)
        await _judge_killed(h, store, sessions, acked, flight, reached, calls[t])
        held += 1
    h.measure(f"killed writers right after {held} different system calls")


async def _judge_killed(
    h: Harness,
    store: Path,
    sessions: tuple[str, ...],
    acked: Expected,
    flight: Step,
    reached: _Held,
    call: Call,
) -> None:
    where = f" (killed right after system call #{reached.counted} of {call.label}: {reached.call})"
    verdict = await verdict_on(h, store, sessions, acked, flight, "KILL-001")
    if verdict is not None:
        rule_id, message = verdict
        raise RuleViolation(rule_id, message + where)
    async with h.opened(store) as cp:
        try:
            head = await asyncio.wait_for(cp.head(call.session), _REPLY_TIMEOUT)
            await asyncio.wait_for(
                cp.append(call.session, [UserPrompt("after the kill")], head), _REPLY_TIMEOUT
            )
        except TimeoutError:
            raise RuleViolation(
                "KILL-001",
                f"appending to {call.session!r} after its writer was killed waited "
                f"{_REPLY_TIMEOUT:.0f}s: the dead writer still holds it" + where,
            ) from None


@check("READ-003", "APPEND-003", needs=[Capability.MULTI_PROCESS])
async def read_while_a_writer_is_held(h: Harness) -> None:
    """READ-003: a reader in another process, while a writer is held after any one of its store system calls, sees the write wholly or not at all."""
    _needs_holding()
    rng = random.Random(h.seed)
    _, calls = plan_workload(rng, h.capabilities, 0)
    held, waited = 0, 0
    async for t, n, before in _holds(h, rng, calls, "READ-003"):
        call = calls[t]
        earlier = calls[t - 1].after if t else Expected({}, frozenset())
        want = {earlier.logs.get(call.session, ()), call.after.logs.get(call.session, ())}
        store = _copy(h, before)
        async with (
            _worker(h, store, "READ-003") as reader,
            _worker(h, store, "READ-003") as writer,
        ):
            stopper, reply, reached = await _send_held(writer, store, call, n)
            if reached.call is None:
                continue
            seen = await _read_while_held(reader, call.session)
            await stopper.resume()
            done = await reply
        if not isinstance(done, Ok):
            raise RuleViolation(
                "READ-003",
                f"{call.label}, held right after its system call #{n} and let go, did not "
                f"finish: {done}",
            )
        held += 1
        if seen is None:
            waited += 1
            continue
        texts = tuple(text for _, text in seen)
        if texts not in want or [seq for seq, _ in seen] != list(range(1, len(seen) + 1)):
            raise RuleViolation(
                "READ-003",
                f"while {call.label} was held right after its system call #{n} "
                f"({reached.call}), another process read {call.session!r} as {seen}; it must "
                f"read one of {sorted(list(w) for w in want)}",
            )
    h.measure(
        f"read while writers were held right after {held} different system calls "
        f"({waited} reads waited for the writer)"
    )


async def _read_while_held(reader: WorkerClient, session: str) -> list[tuple[int, str]] | None:
    """What ``reader`` reads of ``session`` now, or None if it waits for the held writer:
    blocked on a file lock (``/proc/locks`` says so at once) or silent for a while."""
    await reader.send(Read(session))
    answer = asyncio.ensure_future(reader.receive())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _READER_PATIENCE
    while not answer.done():
        await asyncio.wait([answer], timeout=_LOCK_POLL)
        if not answer.done() and (_waits_on_a_lock(reader.process.pid) or loop.time() > deadline):
            answer.cancel()
            return None  # it waits for the writer: nothing seen, nothing wrong
    reply = answer.result()
    if isinstance(reply, Failed):
        raise RuleViolation(
            "READ-003", f"a read while a writer was held raised {reply.error}: {reply.message}"
        )
    assert isinstance(reply, Ok)
    assert isinstance(reply.value, list)
    return [(int(seq), str(text)) for seq, text in reply.value]


CHECKS = (killed_after_every_system_call, read_while_a_writer_is_held)
