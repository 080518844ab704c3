"""Checks for appending: sequence numbers, round-trips, empty and stale appends, atomicity."""

from __future__ import annotations

from functools import partial

from hypothesis import strategies as st

from ...spec import (
    AssistantMessage,
    CheckpointConflictError,
    Checkpointer,
    InvalidArgumentError,
    SessionEvent,
    ToolCall,
    UserPrompt,
)
from ..harness import Harness, read_all
from ..outcomes import check_ts
from ..registry import check
from ..strategies import events
from ._support import expect, expect_error, run_property, snapshot, unchanged

__all__: list[str] = []


@check("SEQ-001", "SEQ-003")
async def seqs_are_contiguous_across_batches(h: Harness) -> None:
    """SEQ-001: seqs run 1, 2, 3, ... across batches of different sizes."""
    cp = await h.open()
    head = 0
    for size in (1, 3, 2, 5):
        head = await cp.append("s", [h.prompt(f"{head + i}") for i in range(size)])
    seqs = [s.seq for s in await read_all(cp, "s")]
    expect(seqs == list(range(1, 12)), "SEQ-001", f"seqs after batches of 1, 3, 2, 5: {seqs}")
    expect(head == 11, "SEQ-003", f"append returned head {head}; the log has 11 events")


@check("SEQ-002")
async def parent_links_point_back(h: Harness) -> None:
    """SEQ-002: parent_seq is None for seq 1 and seq - 1 after it."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    await cp.append("s", [h.prompt("c")])
    parents = [(s.seq, s.parent_seq) for s in await read_all(cp, "s")]
    expect(parents == [(1, None), (2, 1), (3, 2)], "SEQ-002", f"(seq, parent_seq) pairs: {parents}")


@check("SEQ-003")
async def append_returns_the_new_head(h: Harness) -> None:
    """SEQ-003: append returns the seq of the log's last event."""
    cp = await h.open()
    returned = [await cp.append("s", [h.prompt(str(i))] * size) for i, size in enumerate((2, 1, 4))]
    expect(returned == [2, 3, 7], "SEQ-003", f"heads returned for batches of 2, 1, 4: {returned}")
    expect(await cp.head("s") == 7, "SEQ-003", "head() disagrees with the value append returned")


@check("SEQ-004")
async def stored_events_carry_id_and_utc_time(h: Harness) -> None:
    """SEQ-004: every stored event carries its session id and a UTC ISO 8601 ts."""
    cp = await h.open()
    await cp.append("sess/1", [h.prompt("a"), h.prompt("b")])
    for stored in await read_all(cp, "sess/1"):
        expect(
            stored.session_id == "sess/1",
            "SEQ-004",
            f"seq {stored.seq} carries session_id {stored.session_id!r}",
        )
        check_ts(stored, "read('sess/1')")


@check("EVENT-001")
def every_event_kind_round_trips(h: Harness) -> None:
    """EVENT-001: any batch of any event kinds reads back equal, field for field."""

    async def body(cp: Checkpointer, batch: list[SessionEvent]) -> None:
        await cp.append("s", batch)
        back = [s.event for s in await read_all(cp, "s")]
        expect(back == batch, "EVENT-001", f"appended {batch!r}; read back {back!r}")
        kinds = [type(e).__name__ for e in back]
        expect(
            kinds == [type(e).__name__ for e in batch], "EVENT-001", f"event kinds changed: {kinds}"
        )

    run_property(h, st.lists(events(), min_size=1, max_size=4), body)


@check("EVENT-002", "APPEND-003")
async def unstorable_event_is_refused_whole(h: Harness) -> None:
    """EVENT-002: a batch holding an unstorable event (lone surrogate, wrongly typed field) is refused whole."""
    cp = await h.open()
    await cp.append("s", [h.prompt("kept")])
    before = await snapshot(cp, ["s"])
    wrongly_typed = AssistantMessage(text=42)  # type: ignore[arg-type]
    for bad_event in (AssistantMessage("lone \ud800 surrogate"), wrongly_typed):
        bad: list[SessionEvent] = [h.prompt("fine"), bad_event]
        await expect_error(
            partial(cp.append, "s", bad),
            InvalidArgumentError,
            "EVENT-002",
            f"append of a batch holding {bad_event!r}",
        )
        await unchanged(cp, before, "APPEND-003", "a refused batch")


@check("APPEND-001")
async def empty_append_writes_nothing(h: Harness) -> None:
    """APPEND-001: an empty batch returns the head, creates nothing, still checks expected_head."""
    cp = await h.open()
    expect(
        await cp.append("new", []) == 0,
        "APPEND-001",
        "empty append to an unknown session did not return 0",
    )
    listed = [i.id for i in await cp.list_sessions()]
    expect("new" not in listed, "APPEND-001", f"empty append created a session: listed {listed}")
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    mtime = {i.id: i.mtime for i in await cp.list_sessions()}["s"]
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
    after = {i.id: i.mtime for i in await cp.list_sessions()}["s"]
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
