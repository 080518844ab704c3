"""The fast fold equals the oracle `fold_model` on every log (FOLD-001..006)."""

from __future__ import annotations

import pytest
from checkpointspec.reference.fold import fold
from checkpointspec.spec import (
    AssistantMessage,
    Message,
    RepairMessage,
    SessionEvent,
    StoredEvent,
    Summary,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolStarted,
    UserPrompt,
    fold_model,
)
from hypothesis import example, given, settings
from session_logs import logs, stored

RESULT_THEN_SUMMARY = stored(
    [
        AssistantMessage("", (ToolCall("c1", "tool", "{}"),)),
        ToolResult("c1", "one"),
        Summary("s", 1, 0, 0),
        ToolResult("c2", "two"),
    ]
)
"""A summary leaving a tool-results turn last: the next result still joins it."""

SUMMARIES_OUT_OF_ORDER = stored(
    [
        UserPrompt("p1"),
        AssistantMessage("a2"),
        Summary("s3", 1, 0, 0),
        UserPrompt("p4"),
        Summary("s5", 2, 0, 0),
        Summary("s6", 99, 0, 0),
        RepairMessage("r7"),
        Summary("s8", 0, 0, 0),
    ]
)
"""through_seq below, beyond and at zero: a summary's own seq decides whether it is covered."""


@settings(max_examples=300)
@given(logs(storable=False))
@example(RESULT_THEN_SUMMARY)
@example(SUMMARIES_OUT_OF_ORDER)
def test_fold_equals_the_oracle(log: list[StoredEvent]) -> None:
    """FOLD-001..006: the reference fold and fold_model agree on generated logs."""
    assert fold(log) == fold_model(log)


def test_fold_006_a_summary_leaving_tool_results_last_keeps_them_open() -> None:
    assert fold(RESULT_THEN_SUMMARY) == [
        Message("user", "summary", (TextBlock("s"),), (3,)),
        Message(
            "user",
            "tool_results",
            (ToolResultBlock("c1", "one"), ToolResultBlock("c2", "two")),
            (2, 4),
        ),
    ]


def test_fold_003_results_coalesce_across_invisible_events_and_repairs() -> None:
    log = stored(
        [
            ToolResult("c1", "one"),
            ToolStarted("c2", "tool"),
            RepairMessage("lost", "c2"),
            ToolResult("c3", "three", is_error=True),
            RepairMessage("free-standing"),
            ToolResult("c4", "four"),
        ]
    )
    assert fold(log) == [
        Message(
            "user",
            "tool_results",
            (
                ToolResultBlock("c1", "one"),
                ToolResultBlock("c2", "lost", True),
                ToolResultBlock("c3", "three", True),
            ),
            (1, 3, 4),
        ),
        Message("user", "repair", (TextBlock("free-standing"),), (5,)),
        Message("user", "tool_results", (ToolResultBlock("c4", "four"),), (6,)),
    ]


def test_fold_reads_an_iterator_once() -> None:
    log = stored([UserPrompt("p", ("b1", "b2")), AssistantMessage("")])
    assert fold(iter(log)) == fold_model(log)


def test_fold_accepts_subclasses_of_the_event_kinds() -> None:
    class Prompt(UserPrompt, frozen=True):
        pass

    log = stored([Prompt("sub")])
    assert fold(log) == [Message("user", "prompt", (TextBlock("sub"),), (1,))]


def test_fold_refuses_what_is_not_an_event() -> None:
    log = [StoredEvent(1, "s", None, "ts", object())]  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fold(log)


@pytest.mark.parametrize("through", [-5, 0, 1, 2, 3, 4, 50])
def test_fold_006_every_through_seq_around_the_summary(through: int) -> None:
    batch: list[SessionEvent] = [
        UserPrompt("p1"),
        ToolResult("c", "r2"),
        Summary("s3", through, 0, 0),
        UserPrompt("p4"),
    ]
    log = stored(batch)
    assert fold(log) == fold_model(log)
