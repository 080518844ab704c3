"""Checks of the APPEND rules: empty appends, expected heads, atomic batches, racing appends on several handles."""

from __future__ import annotations

import asyncio
from functools import partial

from ...spec import (
    AssistantMessage,
    Capability,
    CheckpointConflictError,
    Checkpointer,
    InvalidArgumentError,
    SessionEvent,
    ToolCall,
    UserPrompt,
)
from ..engines.contract.outcomes import Err, Ok, run_backend
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness, read_all
from ._support import (
    check_whole_batches,
    expect,
    expect_error,
    listed_mtime,
    snapshot,
    unchanged,
)
from .base import check

__all__ = ["CHECKS"]


@check("APPEND-001")
async def empty_append_writes_nothing(h: Harness) -> None:
    """APPEND-001: an empty batch returns the head, creates nothing, still checks expected_head."""
    cp = await h.open()
    expect(
        await cp.append("new", []) == 0,
        "APPEND-001",
        "empty append to an unknown session did not return 0",
    )
    # Without LIST, whether a session exists and its mtime cannot be observed.
    listing = h.has(Capability.LIST)
    if listing:
        listed = [i.id for i in await cp.list_sessions()]
        expect(
            "new" not in listed, "APPEND-001", f"empty append created a session: listed {listed}"
        )
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    mtime = await listed_mtime(cp, "s", "appending to it") if listing else 0.0
    expect(
        await cp.append("s", []) == 2,
        "APPEND-001",
        "empty append did not return the current head 2",
    )
    expect(
        await cp.append("s", [], expected_head=2) == 2,
        "APPEND-001",
        "empty append with the right expected_head",
    )
    error = await expect_error(
        lambda: cp.append("s", [], expected_head=1),
        CheckpointConflictError,
        "APPEND-001",
        "empty append with expected_head=1",
    )
    expect(
        error.actual == 2, "APPEND-001", f"conflict reported actual={error.actual}; the head is 2"
    )
    if listing:
        after = await listed_mtime(cp, "s", "empty appends to it")
        expect(after == mtime, "APPEND-001", f"empty append changed mtime {mtime} -> {after}")


@check("APPEND-002")
async def stale_expected_head_conflicts(h: Harness) -> None:
    """APPEND-002: a stale expected_head raises CheckpointConflictError with the facts; nothing is written."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    before = await snapshot(cp, ["s"])
    for stale in (0, 1, 3, 100):
        error = await expect_error(
            partial(cp.append, "s", [h.prompt("lost")], expected_head=stale),
            CheckpointConflictError,
            "APPEND-002",
            f"append with expected_head={stale} at head 2",
        )
        facts = (error.session_id, error.expected, error.actual)
        expect(
            facts == ("s", stale, 2),
            "APPEND-002",
            f"conflict facts (session_id, expected, actual) = {facts}; expected ('s', {stale}, 2)",
        )
        await unchanged(cp, before, "APPEND-002", f"a conflicting append (expected_head={stale})")
    new_head = await cp.append("s", [h.prompt("c")], expected_head=2)
    expect(new_head == 3, "APPEND-002", f"append with the right expected_head returned {new_head}")
    unknown = await expect_error(
        lambda: cp.append("nobody", [h.prompt("x")], expected_head=1),
        CheckpointConflictError,
        "APPEND-002",
        "append to an unknown session with expected_head=1",
    )
    expect(
        unknown.actual == 0,
        "APPEND-002",
        f"unknown session reported actual={unknown.actual}; expected 0",
    )


@check("APPEND-003")
async def refused_batch_leaves_no_trace(h: Harness) -> None:
    """APPEND-003: a batch refused for a bad item (at its end) writes none of its events."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    before = await snapshot(cp, ["s", "other"])
    # Deliberately outside the contract: the last item is not an event.
    batch: list[SessionEvent] = [h.prompt("b"), h.prompt("c"), UserPrompt("d"), "x"]  # type: ignore[list-item]
    for sid in ("s", "other"):
        await expect_error(
            partial(cp.append, sid, batch),
            InvalidArgumentError,
            "APPEND-003",
            f"append of a batch ending in a str to {sid!r}",
        )
    await unchanged(cp, before, "APPEND-003", "a refused batch")
    tool = AssistantMessage("t", tool_calls=(ToolCall("1", "edit", "{}"),))
    head = await cp.append("s", [tool, h.prompt("e")])
    expect(
        head == 3, "APPEND-003", f"a good batch after refused ones returned head {head}; expected 3"
    )


@check(
    "APPEND-004",
    replay_note="six appends race through three handles; which one wins depends on how "
    "the backend's threads or locks schedule them",
)
async def racing_appends_never_fork(h: Harness) -> None:
    """APPEND-004: of appends racing on one expected_head, exactly one wins; without it, all land whole."""
    handles = [await h.open() for _ in range(3)]
    for round_ in range(10):
        head = await handles[0].head("s")
        contenders = [
            (cp, [h.prompt(f"r{round_} w{n} a"), h.prompt(f"r{round_} w{n} b")])
            for n, cp in enumerate(handles * 2)
        ]
        outcomes = await asyncio.gather(
            *(run_backend(partial(cp.append, "s", b, head)) for cp, b in contenders)
        )
        winners = [o for o in outcomes if isinstance(o, Ok)]
        others = [o.error for o in outcomes if isinstance(o, Err)]
        if len(winners) > 1:
            await _taking_turns(h, handles, f"s-turns-{round_}")
        if not winners and others:
            # Every append raised: an error that is not a conflict is append's own.
            raise RuleViolation.or_crash(
                "APPEND-004",
                f"round {round_}: 0 of {len(outcomes)} appends with expected_head={head} "
                f"succeeded: {others[0]!r}",
                "append",
                type(others[0]).__name__,
            )
        expect(
            len(winners) == 1,
            "APPEND-004",
            f"round {round_}: {len(winners)} of {len(outcomes)} appends with expected_head={head} succeeded",
        )
        for error in others:
            expect(
                isinstance(error, CheckpointConflictError),
                "APPEND-004",
                f"round {round_}: a loser raised {error!r}",
            )
    free = [[h.prompt(f"free {n} {i}") for i in range(3)] for n in range(8)]
    await asyncio.gather(*(handles[n % 3].append("t", batch) for n, batch in enumerate(free)))
    check_whole_batches(
        await read_all(handles[0], "t"), [[e.text for e in b] for b in free], "APPEND-004"
    )


async def _taking_turns(h: Harness, handles: list[Checkpointer], sid: str) -> None:
    """After racing appends on one expected head all succeeded: the same appends one
    at a time, every handle having read the head first. If they still succeed no race
    is needed to show the defect, and the rule is the one taking turns breaks: the
    handle that wrote accepting its own stale head is APPEND-002, another handle
    accepting it HANDLE-001 (a handle blind to another's acknowledged write)."""
    for cp in handles:
        await cp.head(sid)
    first = handles[0]
    await first.append(sid, [h.prompt(f"{sid} w0")], 0)
    again = await run_backend(partial(first.append, sid, [h.prompt(f"{sid} w0 again")], 0))
    if isinstance(again, Ok):
        raise RuleViolation(
            "APPEND-002",
            f"append({sid!r}, 1 event, expected_head=0) through handle 0 returned "
            f"{again.value} after the same handle's append from head 0 had returned 1; "
            "expected CheckpointConflictError",
            call=f"append({sid!r}, [...], 0)",
            expected="raises CheckpointConflictError",
            got=f"returned {again.value}",
            shape="append did not raise CheckpointConflictError (head conflict)",
        )
    for n, cp in enumerate(handles[1:], start=1):
        other = await run_backend(partial(cp.append, sid, [h.prompt(f"{sid} w{n}")], 0))
        if isinstance(other, Ok):
            raise RuleViolation(
                "HANDLE-001",
                f"handles taking turns, each having read head 0 of {sid!r}: after handle 0's "
                f"append from head 0, handle {n}'s append with expected_head=0 returned "
                f"{other.value}; expected CheckpointConflictError (no race is needed)",
                call=f"handle {n}: append({sid!r}, [...], 0)",
                expected="raises CheckpointConflictError",
                got=f"returned {other.value}",
                shape="a handle does not see another handle's writes",
            )


CHECKS = (
    empty_append_writes_nothing,
    stale_expected_head_conflicts,
    refused_batch_leaves_no_trace,
    racing_appends_never_fork,
)
