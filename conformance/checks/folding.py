"""Checks of the FOLD rules: the conversation the session layer folds out of a stored log.

Each check appends a log made for its rule to the backend, reads it back, folds
it with the session layer (`Harness.session`) and compares the result with the
spec's oracle (`fold_model`) and with the conversation the rule's statement
gives for that log, written out by hand. The read-back matters: the fold sees
the events as the backend returns them (seqs, order), as an agent would.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...spec import (
    FOLD_RULE_OF_ORIGIN,
    AssistantMessage,
    BackgroundCompletion,
    Checkpointer,
    FileSnapshot,
    Message,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    Summary,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolStarted,
    ToolUseBlock,
    UserPrompt,
    fold_model,
)
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
from ..engines.search.properties import run_property
from ._session import append_log, same, session_logs
from .base import check

__all__ = ["CHECKS"]


def _call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "edit", f'{{"id": "{call_id}"}}')


def _use(call_id: str) -> ToolUseBlock:
    return ToolUseBlock(call_id, "edit", f'{{"id": "{call_id}"}}')


def _text(*texts: str) -> tuple[TextBlock, ...]:
    return tuple(TextBlock(t) for t in texts)


async def _folds_to(
    h: Harness,
    rule_id: str,
    session_id: str,
    events: Sequence[SessionEvent],
    expected: list[Message],
) -> None:
    """Store ``events``, fold what the backend returns, and hold the fold to the model
    and to ``expected`` (the rule's answer for this log)."""
    # The oracle must say what the rule says; if not, the kit is wrong, not the layer.
    cp = await h.open()
    log = await append_log(cp, session_id, events)
    model = fold_model(log)
    assert model == expected, f"fold_model disagrees with {rule_id}'s example: {model!r}"
    folded = h.session.fold(log)
    same(rule_id, f"fold of session {session_id!r}", list(folded), expected)


@check("FOLD-001")
async def prompts_are_user_turns_of_their_own(h: Harness) -> None:
    """FOLD-001: each prompt folds to one user message (origin prompt); blocks follow its text."""
    await _folds_to(
        h,
        "FOLD-001",
        "prompts",
        [
            UserPrompt("hello"),
            UserPrompt("with blocks", blocks=("first block", "second block")),
            UserPrompt("again"),
        ],
        [
            Message("user", "prompt", _text("hello"), (1,)),
            Message("user", "prompt", _text("with blocks", "first block", "second block"), (2,)),
            Message("user", "prompt", _text("again"), (3,)),
        ],
    )


@check("FOLD-002")
async def assistant_messages_keep_their_tool_calls(h: Harness) -> None:
    """FOLD-002: an assistant message folds to its text (dropped when empty), then its tool calls."""
    await _folds_to(
        h,
        "FOLD-002",
        "assistant",
        [
            UserPrompt("go"),
            AssistantMessage("", tool_calls=(_call("a"), _call("b"))),
            ToolResult("a", "ok a"),
            ToolResult("b", "ok b"),
            AssistantMessage("text only"),
            AssistantMessage("text and a call", tool_calls=(_call("c"),)),
            ToolResult("c", "ok c"),
        ],
        [
            Message("user", "prompt", _text("go"), (1,)),
            Message("assistant", "assistant", (_use("a"), _use("b")), (2,)),
            Message(
                "user",
                "tool_results",
                (ToolResultBlock("a", "ok a"), ToolResultBlock("b", "ok b")),
                (3, 4),
            ),
            Message("assistant", "assistant", _text("text only"), (5,)),
            Message("assistant", "assistant", (TextBlock("text and a call"), _use("c")), (6,)),
            Message("user", "tool_results", (ToolResultBlock("c", "ok c"),), (7,)),
        ],
    )


@check("FOLD-003")
async def consecutive_tool_results_share_one_turn(h: Harness) -> None:
    """FOLD-003: consecutive tool results are coalesced into one user message, in log order."""
    await _folds_to(
        h,
        "FOLD-003",
        "results",
        [
            UserPrompt("run three tools"),
            AssistantMessage("running", tool_calls=(_call("a"), _call("b"), _call("c"))),
            ToolResult("b", "b first"),
            ToolResult("a", "a failed", is_error=True),
            ToolResult("c", "c last"),
            AssistantMessage("one more", tool_calls=(_call("d"),)),
            ToolResult("d", "d alone"),
        ],
        [
            Message("user", "prompt", _text("run three tools"), (1,)),
            Message(
                "assistant",
                "assistant",
                (TextBlock("running"), _use("a"), _use("b"), _use("c")),
                (2,),
            ),
            Message(
                "user",
                "tool_results",
                (
                    ToolResultBlock("b", "b first"),
                    ToolResultBlock("a", "a failed", is_error=True),
                    ToolResultBlock("c", "c last"),
                ),
                (3, 4, 5),
            ),
            Message("assistant", "assistant", (TextBlock("one more"), _use("d")), (6,)),
            Message("user", "tool_results", (ToolResultBlock("d", "d alone"),), (7,)),
        ],
    )


@check("FOLD-004")
async def snapshots_and_tool_starts_are_invisible(h: Harness) -> None:
    """FOLD-004: snapshots and tool starts add nothing and do not separate tool results."""
    await _folds_to(
        h,
        "FOLD-004",
        "invisible",
        [
            FileSnapshot("early.txt", None, hash_after="absent"),
            UserPrompt("edit two files"),
            AssistantMessage("", tool_calls=(_call("a"), _call("b"))),
            ToolStarted("a", "edit"),
            FileSnapshot("a.txt", "old a", hash_after="0" * 64, tool_call_id="a"),
            ToolResult("a", "edited a"),
            ToolStarted("b", "edit"),
            FileSnapshot("b.txt", None, hash_after="1" * 64, tool_call_id="b"),
            ToolResult("b", "edited b"),
            ToolStarted("late", "edit"),
        ],
        [
            Message("user", "prompt", _text("edit two files"), (2,)),
            Message("assistant", "assistant", (_use("a"), _use("b")), (3,)),
            Message(
                "user",
                "tool_results",
                (ToolResultBlock("a", "edited a"), ToolResultBlock("b", "edited b")),
                (6, 9),
            ),
        ],
    )


@check("FOLD-005")
async def reminders_repairs_and_background_completions(h: Harness) -> None:
    """FOLD-005: reminders, background completions and repairs fold as the rule says."""
    await _folds_to(
        h,
        "FOLD-005",
        "runtime",
        [
            UserPrompt("start"),
            RuntimeReminder("remember the style guide"),
            BackgroundCompletion("task-7", "the build finished"),
            AssistantMessage("", tool_calls=(_call("x"),)),
            RepairMessage("interrupted before it answered", tool_call_id="x"),
            RepairMessage("the conversation was repaired"),
            AssistantMessage("two calls", tool_calls=(_call("y"), _call("z"))),
            ToolResult("y", "y done"),
            RepairMessage("z was lost", tool_call_id="z"),
        ],
        [
            Message("user", "prompt", _text("start"), (1,)),
            Message("user", "reminder", _text("remember the style guide"), (2,)),
            Message("user", "background", _text("the build finished"), (3,), "task-7"),
            Message("assistant", "assistant", (_use("x"),), (4,)),
            Message(
                "user",
                "tool_results",
                (ToolResultBlock("x", "interrupted before it answered", is_error=True),),
                (5,),
            ),
            Message("user", "repair", _text("the conversation was repaired"), (6,)),
            Message("assistant", "assistant", (TextBlock("two calls"), _use("y"), _use("z")), (7,)),
            Message(
                "user",
                "tool_results",
                (ToolResultBlock("y", "y done"), ToolResultBlock("z", "z was lost", is_error=True)),
                (8, 9),
            ),
        ],
    )


@check("FOLD-006")
async def a_summary_replaces_what_it_covers(h: Harness) -> None:
    """FOLD-006: a summary removes every message holding a covered event and takes the first one's place."""
    await _folds_to(
        h,
        "FOLD-006",
        "summary",
        [
            UserPrompt("one"),
            AssistantMessage("", tool_calls=(_call("a"), _call("b"))),
            ToolResult("a", "a done"),
            ToolResult("b", "b done"),
            UserPrompt("two"),
            # Covers 1..3: the tool-results message (3, 4) holds seq 3, so it goes whole.
            Summary("what happened so far", through_seq=3, tokens_before=40, tokens_after=5),
            UserPrompt("three"),
        ],
        [
            Message("user", "summary", _text("what happened so far"), (6,)),
            Message("user", "prompt", _text("two"), (5,)),
            Message("user", "prompt", _text("three"), (7,)),
        ],
    )
    # A through_seq beyond the summary's own seq covers only what precedes it; a
    # later summary replaces the earlier one with everything else it covers.
    await _folds_to(
        h,
        "FOLD-006",
        "summaries",
        [
            UserPrompt("one"),
            AssistantMessage("answer"),
            Summary("first", through_seq=99, tokens_before=10, tokens_after=2),
            UserPrompt("two"),
            AssistantMessage("answer two"),
            Summary("second", through_seq=4, tokens_before=12, tokens_after=3),
            AssistantMessage("after"),
        ],
        [
            Message("user", "summary", _text("second"), (6,)),
            Message("assistant", "assistant", _text("answer two"), (5,)),
            Message("assistant", "assistant", _text("after"), (7,)),
        ],
    )


def _blame(
    got: list[Message], expected: list[Message], invisible: frozenset[int]
) -> tuple[str, str]:
    """The rule a wrong fold breaks, judged by the first message where it goes wrong
    (tool results split around an invisible event, at ``invisible`` seqs, break
    FOLD-004), and a sentence saying where."""
    index = next(
        (i for i, (g, e) in enumerate(zip(got, expected, strict=False)) if g != e),
        min(len(got), len(expected)),
    )
    wanted = expected[index] if index < len(expected) else None
    made = got[index] if index < len(got) else None
    shown = wanted if wanted is not None else made
    where = f"message {index}: got {made!r}, expected {wanted!r}"
    if shown is None:
        return "FOLD-001", where
    if shown.origin == "tool_results" and any(
        min(shown.seqs) < seq < max(shown.seqs) for seq in invisible
    ):
        return "FOLD-004", where
    return FOLD_RULE_OF_ORIGIN[shown.origin], where


@check("FOLD-001", "FOLD-002", "FOLD-003", "FOLD-004", "FOLD-005", "FOLD-006", kind="property")
def generated_logs_fold_as_the_model(h: Harness) -> None:
    """FOLD-001: logs of every event kind in any order fold as fold_model says (every FOLD rule)."""

    async def body(cp: Checkpointer, events: list[SessionEvent]) -> None:
        log = await append_log(cp, "generated", events)
        folded = list(h.session.fold(log))
        expected = fold_model(log)
        if folded != expected:
            invisible = frozenset(
                e.seq for e in log if isinstance(e.event, FileSnapshot | ToolStarted)
            )
            rule_id, where = _blame(folded, expected, invisible)
            raise RuleViolation(rule_id, f"the fold of a generated log differs at {where}")

    run_property(h, session_logs(), body)


CHECKS = (
    prompts_are_user_turns_of_their_own,
    assistant_messages_keep_their_tool_calls,
    consecutive_tool_results_share_one_turn,
    snapshots_and_tool_starts_are_invisible,
    reminders_repairs_and_background_completions,
    a_summary_replaces_what_it_covers,
    generated_logs_fold_as_the_model,
)
