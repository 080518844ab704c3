"""The compaction oracle: `compaction_boundary` (COMPACT-001, COMPACT-003).

Expected boundaries are worked out from the rule statements by hand. The
property at the end states what the boundary is for: a summary appended
through it replaces only messages it covers whole, so nothing the summarizer
did not see leaves the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

from checkpointspec.spec import (
    AssistantMessage,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    Summary,
    ToolCall,
    ToolCallLedger,
    ToolResult,
    ToolStarted,
    UserPrompt,
    compaction_boundary,
    fold_model,
)
from hypothesis import given
from hypothesis import strategies as st


def stored(events: Sequence[SessionEvent]) -> list[StoredEvent]:
    return [
        StoredEvent(seq, "s", seq - 1 or None, "2026-01-01T00:00:00+00:00", event)
        for seq, event in enumerate(events, start=1)
    ]


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage("", tuple(ToolCall(i, "edit", "{}") for i in ids))


def boundary(*events: SessionEvent) -> int | None:
    return compaction_boundary(stored(events))


# -- COMPACT-003: nothing to summarise --------------------------------------------------


def test_compact_003_an_empty_log_is_a_no_op() -> None:
    assert boundary() is None


def test_compact_003_a_log_of_invisible_events_is_a_no_op() -> None:
    assert boundary(FileSnapshot("a.txt", None), FileSnapshot("b.txt", "b")) is None


def test_compact_003_a_log_already_summarised_is_a_no_op() -> None:
    assert boundary(UserPrompt("hi"), AssistantMessage("hello"), Summary("s", 2, 10, 2)) is None


def test_compact_003_only_summaries_up_to_the_boundary_is_a_no_op() -> None:
    # Two summaries, the second covering the first; a snapshot after them is invisible.
    events = (
        UserPrompt("hi"),
        Summary("first", 1, 10, 2),
        Summary("second", 2, 4, 2),
        FileSnapshot("a.txt", None),
    )
    assert boundary(*events) is None


def test_compact_003_a_prompt_after_a_summary_is_new_work() -> None:
    assert boundary(UserPrompt("hi"), Summary("s", 1, 10, 2), UserPrompt("more")) == 3


def test_compact_003_messages_already_replaced_by_a_later_summary_are_no_work() -> None:
    # Boundary 1 (call a is open from 2 on); the summary at 3 already replaced the
    # prompt, so a summary through 1 would replace nothing.
    assert boundary(UserPrompt("hi"), calls("a"), Summary("s", 1, 10, 2)) is None


# -- COMPACT-001: the last clean seq ------------------------------------------------------


def test_compact_001_a_clean_log_is_covered_to_its_end() -> None:
    events = (UserPrompt("hi"), calls("a"), ToolResult("a", "ok"), AssistantMessage("done"))
    assert boundary(*events) == 4


def test_compact_001_an_open_tool_call_at_the_end_is_left_out() -> None:
    events = (UserPrompt("hi"), AssistantMessage("sure"), calls("a"), ToolStarted("a", "edit"))
    assert boundary(*events) == 2


def test_compact_001_a_call_opened_only_by_tool_started_counts() -> None:
    assert boundary(UserPrompt("hi"), ToolStarted("a", "edit"), FileSnapshot("x", None)) == 1


def test_compact_001_a_repair_message_closes_a_call() -> None:
    events = (UserPrompt("hi"), calls("a"), RepairMessage("interrupted", "a"))
    assert boundary(*events) == 3


def test_compact_001_calls_open_from_the_first_event_leave_nothing() -> None:
    assert boundary(calls("a"), ToolStarted("a", "edit"), RuntimeReminder("wait")) is None


def test_compact_001_the_boundary_never_splits_a_tool_results_turn() -> None:
    # Results of a and b coalesce into one turn across the invisible ToolStarted
    # events (FOLD-003). Seq 3 is clean, but a summary through it would remove
    # the whole turn (FOLD-006), b's result at 6 included, which no summary saw.
    events = (
        UserPrompt("go"),
        calls("a"),
        ToolResult("a", "result a"),
        ToolStarted("b", "edit"),
        ToolStarted("c", "edit"),
        ToolResult("b", "result b"),
    )
    assert boundary(*events) == 1
    after = fold_model(stored([*events, Summary("s", 1, 9, 1)]))
    assert [m.origin for m in after] == ["summary", "assistant", "tool_results"]
    assert after[-1].seqs == (3, 6)


# -- the property the boundary exists for -------------------------------------------------

IDS = ("a", "b", "c")


def events_strategy() -> st.SearchStrategy[list[SessionEvent]]:
    call_ids = st.sampled_from(IDS)
    event: st.SearchStrategy[SessionEvent] = st.one_of(
        st.builds(UserPrompt, st.sampled_from(["p", "q"])),
        st.builds(lambda ids: calls(*ids), st.lists(call_ids, max_size=2, unique=True).map(tuple)),
        st.builds(ToolStarted, call_ids, st.just("edit")),
        st.builds(ToolResult, call_ids, st.just("r")),
        st.builds(FileSnapshot, st.just("f"), st.none()),
        st.builds(RepairMessage, st.just("fix"), st.none() | call_ids),
        st.builds(RuntimeReminder, st.just("note")),
        st.builds(lambda n: Summary("old", n, 5, 1), st.integers(0, 12)),
    )
    return st.lists(event, max_size=12)


@given(events_strategy())
def test_compact_001_a_summary_through_the_boundary_loses_nothing_it_did_not_cover(
    events: list[SessionEvent],
) -> None:
    log = stored(events)
    through = compaction_boundary(log)
    if through is None:
        return
    ledger = ToolCallLedger()
    for item in log[:through]:
        ledger.feed(item.event)
    assert ledger.open_calls == ()
    before = fold_model(log)
    after = fold_model(stored([*events, Summary("new", through, 9, 1)]))
    kept = [m for m in before if m.seqs[-1] > through]
    assert [m for m in after if m.origin != "summary" or m.seqs != (len(log) + 1,)] == kept
    # The messages replaced are those wholly at or before the boundary, some not a summary.
    replaced = [m for m in before if m.seqs[-1] <= through]
    assert len(replaced) + len(kept) == len(before)
    assert any(m.origin != "summary" for m in replaced)
