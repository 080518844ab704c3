"""Checks of the MAINT rules: a session held for restore or compaction shuts every other writer out.

The in-process checks open several handles on one store: one holds a session
(``acquire_maintenance``), the others try to write to it, read it, write
elsewhere and acquire it too. The cross-process check (MAINT-004) uses the
kit's workers (`checkpointspec.conformance.engines.processes.client`): a worker
process acquires a session and acknowledges it, the parent is refused, the
worker is SIGKILLed, and the parent must then write and acquire.

A refused write must be refused at once: a backend that waits for the lock
instead would hang here, so each refused call runs under a generous guard
(`_REFUSAL_GUARD`) that turns a hang into a verdict, not a timing measurement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from ...backends.stdio.messages import AcquireMaintenance, Append, ReleaseMaintenance
from ...spec import (
    Capability,
    Checkpointer,
    MaintenanceLockable,
    SessionLockedError,
)
from ..engines.contract.outcomes import Err, run_backend
from ..engines.contract.violations import RuleViolation, expect
from ..engines.processes.client import (
    UNSENT,
    Failed,
    Succeeded,
    WorkerClient,
    WorkerHung,
    backend_error,
    marker_prompts,
)
from ..engines.run.harness import Harness, read_all
from ._support import append_five, opened_workers, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]

_REFUSAL_GUARD: Final = 30.0
"""Seconds a call that must be refused at once may take before it counts as waiting."""


def _lockable(cp: Checkpointer, rule_id: str) -> MaintenanceLockable:
    """The handle as a `MaintenanceLockable`; a backend declaring MAINTENANCE must be one."""
    if not isinstance(cp, MaintenanceLockable):
        raise RuleViolation(
            rule_id,
            "the backend declares MAINTENANCE but its handle has no "
            "acquire_maintenance / release_maintenance",
        )
    return cp


async def _refused(
    call: Callable[[], Awaitable[object]], session_id: str, rule_id: str, description: str
) -> None:
    """Fail ``rule_id`` unless ``call`` raises `SessionLockedError` for ``session_id`` at once."""
    try:
        outcome = await asyncio.wait_for(run_backend(call), _REFUSAL_GUARD)
    except TimeoutError:
        raise RuleViolation(
            rule_id,
            f"{description} did not return within {_REFUSAL_GUARD:.0f}s: it waits for "
            "the maintenance lock instead of raising SessionLockedError at once",
        ) from None
    if not isinstance(outcome, Err):
        raise RuleViolation(
            rule_id, f"{description} returned {outcome.value!r}; expected SessionLockedError"
        )
    error = outcome.error
    expect(
        isinstance(error, SessionLockedError),
        rule_id,
        f"{description} raised {type(error).__name__}: {error}; expected SessionLockedError",
    )
    assert isinstance(error, SessionLockedError)
    expect(
        error.session_id == session_id,
        rule_id,
        f"{description} raised SessionLockedError for session {error.session_id!r}; "
        f"expected {session_id!r}",
    )


async def _succeeds(
    call: Callable[[], Awaitable[object]], rule_id: str, description: str
) -> object:
    """Fail ``rule_id`` unless ``call`` returns; its value."""
    outcome = await run_backend(call)
    if isinstance(outcome, Err):
        raise RuleViolation(
            rule_id,
            f"{description} raised {type(outcome.error).__name__}: {outcome.error}; "
            "expected it to succeed",
        )
    return outcome.value


async def _writes_refused(h: Harness, cp: Checkpointer, session_id: str, who: str) -> None:
    """Every write ``cp`` offers on ``session_id`` is refused (MAINT-001)."""
    await _refused(
        lambda: cp.append(session_id, [h.prompt(f"refused {who}")]),
        session_id,
        "MAINT-001",
        f"append through {who}",
    )
    if h.has(Capability.TRUNCATE):
        await _refused(
            lambda: cp.truncate(session_id, 0),
            session_id,
            "MAINT-001",
            f"truncate through {who}",
        )
    if h.has(Capability.DELETE):
        await _refused(
            lambda: cp.delete(session_id), session_id, "MAINT-001", f"delete through {who}"
        )


@check("MAINT-001")
async def other_handles_are_refused(h: Harness) -> None:
    """MAINT-001: while a handle holds a session, append, truncate and delete through any other handle raise SessionLockedError and write nothing."""
    holder, other = await h.open(), await h.open()
    await append_five(holder, h)
    await _lockable(holder, "MAINT-001").acquire_maintenance("s")
    before = await snapshot(other, ["s"])
    await _writes_refused(h, other, "s", "a handle opened before the lock was taken")
    # The lock belongs to the store, not to the handles that saw it being taken.
    late = await h.open()
    await _writes_refused(h, late, "s", "a handle opened after the lock was taken")
    await unchanged(other, before, "MAINT-001", "a write refused by the maintenance lock")
    # A session that does not exist can be held too, and is not created by a refused write.
    await _lockable(holder, "MAINT-001").acquire_maintenance("new")
    await _writes_refused(h, other, "new", "another handle, on a held session with no events")
    expect(
        await other.head("new") == 0,
        "MAINT-001",
        "a refused append to a held, empty session stored events",
    )


@check("MAINT-002")
async def holder_writes_and_everyone_reads(h: Harness) -> None:
    """MAINT-002: the holder writes as usual, every handle reads, and other sessions are written as usual."""
    holder, other = await h.open(), await h.open()
    await append_five(holder, h)
    await append_five(other, h, "t")
    await _lockable(holder, "MAINT-002").acquire_maintenance("s")
    head = await _succeeds(
        lambda: holder.append("s", [h.prompt("held 6")], expected_head=5),
        "MAINT-002",
        "the holder's append to the session it holds",
    )
    expect(head == 6, "MAINT-002", f"the holder's append returned {head!r}; expected 6")
    if h.has(Capability.TRUNCATE):
        cut = await _succeeds(
            lambda: holder.truncate("s", 3, expected_head=6),
            "MAINT-002",
            "the holder's truncate of the session it holds",
        )
        expect(cut == 3, "MAINT-002", f"the holder's truncate returned {cut!r}; expected 3")
        await _succeeds(
            lambda: holder.append("s", [h.prompt("held 4")]),
            "MAINT-002",
            "the holder's append after its truncate",
        )
    mine = [(s.seq, s.event) for s in await read_all(holder, "s")]
    theirs = await _succeeds(
        lambda: read_all(other, "s"), "MAINT-002", "a read of a held session through another handle"
    )
    assert isinstance(theirs, list)
    expect(
        [(s.seq, s.event) for s in theirs] == mine,
        "MAINT-002",
        "another handle reads a held session differently from its holder",
    )
    expect(
        await other.head("s") == len(mine),
        "MAINT-002",
        "another handle's head of a held session is not the holder's",
    )
    head_t = await _succeeds(
        lambda: other.append("t", [h.prompt("t 6")], expected_head=5),
        "MAINT-002",
        "an append to another session through another handle",
    )
    expect(head_t == 6, "MAINT-002", f"an append to another session returned {head_t!r}")
    if h.has(Capability.DELETE):
        await _succeeds(
            lambda: other.delete("t"),
            "MAINT-002",
            "a delete of another session through another handle",
        )
        await _succeeds(
            lambda: holder.delete("s"), "MAINT-002", "the holder's delete of the session it holds"
        )
        expect(await other.head("s") == 0, "MAINT-002", "the holder's delete did not take effect")


@check("MAINT-003")
async def one_holder_until_release_or_close(h: Harness) -> None:
    """MAINT-003: acquiring a held session fails through every handle, the holder's too; release and close give it back."""
    first = _lockable(await h.open(), "MAINT-003")
    second = _lockable(await h.open(), "MAINT-003")
    await append_five(first, h)
    await first.acquire_maintenance("s")
    await _refused(
        lambda: first.acquire_maintenance("s"),
        "s",
        "MAINT-003",
        "acquire_maintenance by the handle that holds the session (the lock is not reentrant)",
    )
    await _refused(
        lambda: second.acquire_maintenance("s"),
        "s",
        "MAINT-003",
        "acquire_maintenance of a held session through another handle",
    )
    # The refused acquires took nothing: the first handle still holds the session.
    await _refused(
        lambda: second.append("s", [h.prompt("still held")]),
        "s",
        "MAINT-003",
        "append through another handle after refused acquires (the holder must still hold it)",
    )
    # A release by a handle that does not hold the session does nothing.
    await _succeeds(
        lambda: second.release_maintenance("s"),
        "MAINT-003",
        "release_maintenance by a handle that does not hold the session",
    )
    await _refused(
        lambda: second.append("s", [h.prompt("released by the wrong handle")]),
        "s",
        "MAINT-003",
        "append after a release by a handle that does not hold the session",
    )
    await first.release_maintenance("s")
    await _succeeds(
        lambda: second.append("s", [h.prompt("after release")]),
        "MAINT-003",
        "append through another handle after the holder's release",
    )
    await _succeeds(
        lambda: second.acquire_maintenance("s"),
        "MAINT-003",
        "acquire_maintenance through another handle after the holder's release",
    )
    await _refused(
        lambda: first.acquire_maintenance("s"),
        "s",
        "MAINT-003",
        "acquire_maintenance by the former holder while another handle holds the session",
    )
    await second.close()
    third = _lockable(await h.open(), "MAINT-003")
    await _succeeds(
        lambda: first.append("s", [h.prompt("after close")]),
        "MAINT-003",
        "append after the holding handle was closed",
    )
    await _succeeds(
        lambda: third.acquire_maintenance("s"),
        "MAINT-003",
        "acquire_maintenance after the holding handle was closed",
    )
    await third.release_maintenance("s")
    await _succeeds(
        lambda: first.acquire_maintenance("s"),
        "MAINT-003",
        "acquire_maintenance after release, by the first holder again",
    )


def _append(marker: str) -> Append:
    """A worker's append of one event to session ``s``."""
    return Append(UNSENT, "s", marker_prompts([marker]))


async def _worker_call(
    worker: WorkerClient, request: AcquireMaintenance | ReleaseMaintenance | Append, what: str
) -> Succeeded | Failed:
    """One request's final reply; anything else fails MAINT-004 (the kit's worker answers
    these), and so does no reply in time: a write to a held session is refused, not
    made to wait, and nothing else here waits."""
    try:
        reply = await worker.call(request)
    except WorkerHung as hung:
        raise RuleViolation("MAINT-004", f"the worker did not answer {what}: {hung}") from None
    if not isinstance(reply, Succeeded | Failed):
        raise RuleViolation("MAINT-004", f"the worker answered {what} with {reply}")
    return reply


@check("MAINT-004", needs=(Capability.MULTI_PROCESS,))
async def dead_holder_frees_the_lock(h: Harness) -> None:
    """MAINT-004: the lock shuts out writers in other processes, and a SIGKILLed holder's lock is released."""
    cp = _lockable(await h.open(), "MAINT-004")
    await append_five(cp, h)
    async with opened_workers(h, 2, "MAINT-004") as (holder, writer):
        # The worker acknowledges only once it holds the lock: no race with the parent.
        reply = await _worker_call(holder, AcquireMaintenance(UNSENT, "s"), "acquire_maintenance")
        expect(
            isinstance(reply, Succeeded),
            "MAINT-004",
            f"a worker process could not acquire a free session: {reply}",
        )
        before = await snapshot(cp, ["s"])
        await _refused(
            lambda: cp.append("s", [h.prompt("parent while held")]),
            "s",
            "MAINT-004",
            "append in this process while another process holds the session",
        )
        await _refused(
            lambda: cp.acquire_maintenance("s"),
            "s",
            "MAINT-004",
            "acquire_maintenance in this process while another process holds the session",
        )
        await unchanged(cp, before, "MAINT-004", "an append refused across processes")
        # The holder process writes, and a third process is refused.
        reply = await _worker_call(holder, _append("holder 6"), "the holder's append")
        if not (isinstance(reply, Succeeded) and reply.value == 6):
            raise RuleViolation.or_crash(
                "MAINT-004",
                f"the holding process's append answered {reply}; expected head 6",
                "append",
                backend_error(reply),
            )
        reply = await _worker_call(writer, _append("third process"), "an append")
        expect(
            isinstance(reply, Failed) and reply.error == "SessionLockedError",
            "MAINT-004",
            f"an append from a third process while the session is held answered {reply}; "
            "expected SessionLockedError",
        )
        await holder.kill()
        # The holder is gone: its lock must be too.
        head = await _succeeds(
            lambda: cp.append("s", [h.prompt("after the holder died")]),
            "MAINT-004",
            "append after the holding process was killed",
        )
        expect(head == 7, "MAINT-004", f"append after the holder died returned {head!r}")
        await _succeeds(
            lambda: cp.acquire_maintenance("s"),
            "MAINT-004",
            "acquire_maintenance after the holding process was killed",
        )
        # And the lock this process now holds shuts the other process out.
        reply = await _worker_call(writer, _append("while the parent holds"), "an append")
        expect(
            isinstance(reply, Failed) and reply.error == "SessionLockedError",
            "MAINT-004",
            f"an append from another process while this process holds the session "
            f"answered {reply}; expected SessionLockedError",
        )
        await cp.release_maintenance("s")
        reply = await _worker_call(writer, _append("after release"), "an append")
        expect(
            isinstance(reply, Succeeded),
            "MAINT-004",
            f"an append from another process after the release answered {reply}",
        )
        reply = await _worker_call(writer, AcquireMaintenance(UNSENT, "s"), "acquire_maintenance")
        expect(isinstance(reply, Succeeded), "MAINT-004", f"a later acquire answered {reply}")
        reply = await _worker_call(writer, ReleaseMaintenance(UNSENT, "s"), "release_maintenance")
        expect(isinstance(reply, Succeeded), "MAINT-004", f"a release answered {reply}")
    log = await read_all(cp, "s")
    expect(
        [s.seq for s in log] == list(range(1, 9)),
        "MAINT-004",
        f"after the run the session holds seqs {[s.seq for s in log]}; expected 1..8",
    )


CHECKS = (
    other_handles_are_refused,
    holder_writes_and_everyone_reads,
    one_holder_until_release_or_close,
    dead_holder_frees_the_lock,
)
