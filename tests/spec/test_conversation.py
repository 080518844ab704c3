"""Unit tests of the fold oracle (`fold_model`) and its helpers, rule by rule (FOLD-001..006).

Expected conversations are worked out from the rule statements in spec/rules.py,
never copied from a run of the model. Test names start with the rule id they check.
"""

from __future__ import annotations

from checkpointspec.spec import (
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    Message,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    Summary,
    TextBlock,
    ToolCall,
    ToolCallLedger,
    ToolResult,
    ToolResultBlock,
    ToolStarted,
    ToolUseBlock,
    UserPrompt,
    estimate_tokens,
    fold_model,
    summary_coverage,
)


def log(*events: SessionEvent) -> list[StoredEvent]:
    return [
        StoredEvent(seq, "s", seq - 1 or None, "2026-01-01T00:00:00+00:00", event)
        for seq, event in enumerate(events, start=1)
    ]


def text(origin: str, body: str, *seqs: int, role: str = "user") -> Message:
    return Message(role, origin, (TextBlock(body),), seqs)  # type: ignore[arg-type]


def results(*pairs: tuple[ToolResultBlock, int]) -> Message:
    return Message(
        "user", "tool_results", tuple(b for b, _ in pairs), tuple(seq for _, seq in pairs)
    )


def test_an_empty_log_folds_to_nothing() -> None:
    assert fold_model([]) == []


# -- FOLD-001 ------------------------------------------------------------------------------


def test_fold_001_a_prompt_is_a_user_turn_of_its_own() -> None:
    assert fold_model(log(UserPrompt("one"), UserPrompt("two"))) == [
        text("prompt", "one", 1),
        text("prompt", "two", 2),
    ]


def test_fold_001_a_block_form_prompt_keeps_its_blocks_in_order() -> None:
    assert fold_model(log(UserPrompt("see", ("file a", "file b")))) == [
        Message(
            "user",
            "prompt",
            (TextBlock("see"), TextBlock("file a"), TextBlock("file b")),
            (1,),
        )
    ]


# -- FOLD-002 ------------------------------------------------------------------------------


def test_fold_002_an_assistant_message_keeps_its_tool_calls() -> None:
    calls = (ToolCall("c1", "read", '{"p": 1}'), ToolCall("c2", "write", "{}"))
    assert fold_model(log(AssistantMessage("doing it", calls))) == [
        Message(
            "assistant",
            "assistant",
            (
                TextBlock("doing it"),
                ToolUseBlock("c1", "read", '{"p": 1}'),
                ToolUseBlock("c2", "write", "{}"),
            ),
            (1,),
        )
    ]


def test_fold_002_empty_text_is_left_out() -> None:
    assert fold_model(log(AssistantMessage("", (ToolCall("c", "t", "{}"),)))) == [
        Message("assistant", "assistant", (ToolUseBlock("c", "t", "{}"),), (1,))
    ]
    assert fold_model(log(AssistantMessage(""))) == [Message("assistant", "assistant", (), (1,))]


# -- FOLD-003 and FOLD-004 -------------------------------------------------------------------


def test_fold_003_consecutive_results_share_one_user_turn() -> None:
    folded = fold_model(
        log(
            AssistantMessage("", (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"))),
            ToolResult("a", "ra"),
            ToolResult("b", "rb", is_error=True),
        )
    )
    assert folded[1:] == [
        results((ToolResultBlock("a", "ra"), 2), (ToolResultBlock("b", "rb", True), 3))
    ]


def test_fold_003_a_visible_event_separates_results() -> None:
    assert fold_model(
        log(ToolResult("a", "ra"), RuntimeReminder("note"), ToolResult("b", "rb"))
    ) == [
        results((ToolResultBlock("a", "ra"), 1)),
        text("reminder", "note", 2),
        results((ToolResultBlock("b", "rb"), 3)),
    ]


def test_fold_004_snapshots_and_tool_starts_are_invisible_and_do_not_separate() -> None:
    assert fold_model(
        log(
            ToolStarted("a", "t"),
            ToolResult("a", "ra"),
            FileSnapshot("f", None),
            ToolStarted("b", "t"),
            ToolResult("b", "rb"),
        )
    ) == [results((ToolResultBlock("a", "ra"), 2), (ToolResultBlock("b", "rb"), 5))]


def test_fold_004_a_log_of_invisible_events_folds_to_nothing() -> None:
    assert fold_model(log(FileSnapshot("f", "x"), ToolStarted("a", "t"))) == []


# -- FOLD-005 ------------------------------------------------------------------------------


def test_fold_005_reminders_and_background_completions() -> None:
    assert fold_model(log(RuntimeReminder("r"), BackgroundCompletion("task-7", "done"))) == [
        text("reminder", "r", 1),
        Message("user", "background", (TextBlock("done"),), (2,), "task-7"),
    ]


def test_fold_005_a_repair_for_a_call_is_an_error_result_that_coalesces() -> None:
    assert fold_model(log(ToolResult("a", "ra"), RepairMessage("interrupted", "b"))) == [
        results((ToolResultBlock("a", "ra"), 1), (ToolResultBlock("b", "interrupted", True), 2))
    ]


def test_fold_005_a_repair_for_no_call_is_a_user_message() -> None:
    assert fold_model(log(ToolResult("a", "ra"), RepairMessage("fixed"))) == [
        results((ToolResultBlock("a", "ra"), 1)),
        text("repair", "fixed", 2),
    ]


# -- FOLD-006 ------------------------------------------------------------------------------


def test_fold_006_a_summary_replaces_what_it_covers_in_place() -> None:
    assert fold_model(
        log(UserPrompt("p1"), AssistantMessage("a2"), Summary("sum", 2, 100, 10), UserPrompt("p4"))
    ) == [text("summary", "sum", 3), text("prompt", "p4", 4)]


def test_fold_006_a_summary_covering_nothing_goes_to_the_front() -> None:
    assert fold_model(log(UserPrompt("p1"), Summary("sum", 0, 1, 1))) == [
        text("summary", "sum", 2),
        text("prompt", "p1", 1),
    ]


def test_fold_006_through_seq_beyond_the_summary_is_capped_before_it() -> None:
    assert summary_coverage(Summary("s", 99, 0, 0), 3) == 2
    assert summary_coverage(Summary("s", -4, 0, 0), 3) == 0
    assert fold_model(log(UserPrompt("p1"), Summary("sum", 99, 0, 0))) == [
        text("summary", "sum", 2)
    ]


def test_fold_006_a_partly_covered_tool_results_turn_is_removed_whole() -> None:
    assert fold_model(
        log(ToolResult("a", "ra"), ToolResult("b", "rb"), Summary("sum", 1, 0, 0))
    ) == [text("summary", "sum", 3)]


def test_fold_006_the_summary_lands_where_the_covered_conversation_began() -> None:
    # s3 covers p1 and goes to the front; s5 covers a2 only: s3 (seq 3) stays
    # first, and s5 takes a2's place after it.
    assert fold_model(
        log(
            UserPrompt("p1"),
            AssistantMessage("a2"),
            Summary("s3", 1, 0, 0),
            UserPrompt("p4"),
            Summary("s5", 2, 0, 0),
        )
    ) == [text("summary", "s3", 3), text("summary", "s5", 5), text("prompt", "p4", 4)]


def test_fold_006_a_later_summary_covers_an_earlier_one() -> None:
    assert fold_model(log(UserPrompt("p1"), Summary("s2", 1, 0, 0), Summary("s3", 2, 0, 0))) == [
        text("summary", "s3", 3)
    ]


def test_fold_006_results_after_a_summary_join_an_uncovered_results_turn() -> None:
    assert fold_model(
        log(
            AssistantMessage("a1"),
            ToolResult("c", "r2"),
            Summary("sum", 1, 0, 0),
            ToolResult("d", "r4"),
        )
    ) == [
        text("summary", "sum", 3),
        results((ToolResultBlock("c", "r2"), 2), (ToolResultBlock("d", "r4"), 4)),
    ]


# -- helpers ---------------------------------------------------------------------------------


def test_estimate_tokens_counts_four_characters_a_token_rounded_up() -> None:
    messages = [
        text("prompt", "abcde", 1),  # 5
        Message("assistant", "assistant", (ToolUseBlock("c", "ab", "{}"),), (2,)),  # 4
        results((ToolResultBlock("c", "xyz"), 3)),  # 3
    ]
    assert estimate_tokens(messages) == 3
    assert estimate_tokens([]) == 0


def test_the_ledger_opens_calls_and_closes_them_with_results_and_repairs() -> None:
    ledger = ToolCallLedger()
    ledger.feed(AssistantMessage("", (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"))))
    ledger.feed(ToolStarted("c", "t"))
    assert ledger.open_calls == ("a", "b", "c")
    ledger.feed(ToolResult("b", "done"))
    ledger.feed(RepairMessage("gone", "a"))
    ledger.feed(RepairMessage("unrelated"))
    ledger.feed(ToolResult("never-opened", "x"))
    assert ledger.open_calls == ("c",)
