"""The fold: what a model sees of a session log (rules FOLD-001 to FOLD-006).

`fold_model` is the oracle: a direct transcription of the rules, written for
clarity, not speed. ``checkpointspec.reference.fold`` is the implementation
agents use; the kit compares the two on every log it generates.

A folded conversation is a list of `Message` values. Every message has a role
(``user`` or ``assistant``), an ``origin`` saying which kind of event it came
from, its content ``blocks`` and the ``seqs`` of the events folded into it. The
rules, in the order the fold applies them to each event:

- a `UserPrompt` becomes a user message of its own (origin ``prompt``): its text,
  then one text block per extra block of a block-form prompt (FOLD-001);
- an `AssistantMessage` becomes an assistant message (origin ``assistant``): its
  text (left out when empty), then one `ToolUseBlock` per tool call (FOLD-002);
- a `ToolResult` becomes a `ToolResultBlock`, added to the last message when
  that is a tool-results message and starting one (a user message of origin
  ``tool_results``) otherwise: results with only invisible events between them
  share one turn, in log order (FOLD-003);
- a `FileSnapshot` or `ToolStarted` is invisible: it adds nothing and does not
  separate tool results (FOLD-004);
- a `RuntimeReminder` becomes a user message of its own (origin ``reminder``); a
  `BackgroundCompletion` one of origin ``background`` whose ``ref`` is the task
  id; a `RepairMessage` for a tool call becomes an error `ToolResultBlock` for
  that call (so a dangling call gets its answer, coalescing like a result), and
  one without a tool call id a user message of origin ``repair`` (FOLD-005);
- a `Summary` at seq *s* covers every event with seq up to ``through_seq``
  (capped at *s* - 1: a summary never covers itself or what follows it). Every
  message holding a covered event is removed, and one user message of origin
  ``summary`` with the summary's text takes the place of the first one removed,
  or the front when none was (FOLD-006). Because messages before the first
  removed one hold no covered event, the summary lands where the covered
  conversation began.

Nothing else merges: two user messages may follow each other (a summary and a
prompt, a prompt and a reminder); the fold does not invent alternation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

import msgspec

from .events import (
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    Summary,
    ToolResult,
    ToolStarted,
    UserPrompt,
)
from .records import StoredEvent

__all__ = [
    "FOLD_RULE_OF_ORIGIN",
    "Block",
    "Message",
    "MessageOrigin",
    "TextBlock",
    "ToolCallLedger",
    "ToolResultBlock",
    "ToolUseBlock",
    "estimate_tokens",
    "fold_model",
    "summary_coverage",
]

Role: TypeAlias = Literal["user", "assistant"]
MessageOrigin: TypeAlias = Literal[
    "prompt", "assistant", "tool_results", "reminder", "background", "repair", "summary"
]

FOLD_RULE_OF_ORIGIN: Final[Mapping[MessageOrigin, str]] = MappingProxyType(
    {
        "prompt": "FOLD-001",
        "assistant": "FOLD-002",
        "tool_results": "FOLD-003",
        "reminder": "FOLD-005",
        "background": "FOLD-005",
        "repair": "FOLD-005",
        "summary": "FOLD-006",
    }
)
"""The rule that says how a message of each origin is folded: a message folded wrong
breaks the rule of its origin."""


class TextBlock(msgspec.Struct, frozen=True, tag="text"):
    """Plain text."""

    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag="tool_use"):
    """A tool call the assistant asked for; ``arguments`` is its opaque JSON text."""

    id: str
    name: str
    arguments: str


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result"):
    """The answer to the tool call ``tool_call_id``."""

    tool_call_id: str
    content: str
    is_error: bool = False


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock


class Message(msgspec.Struct, frozen=True):
    """One turn of the folded conversation.

    ``seqs`` are the seqs of the events folded into it, ascending (a summary
    message holds the summary's own seq). ``ref`` is the task id of a
    background completion and None otherwise.
    """

    role: Role
    origin: MessageOrigin
    blocks: tuple[Block, ...]
    seqs: tuple[int, ...]
    ref: str | None = None


def summary_coverage(summary: Summary, seq: int) -> int:
    """The last seq a summary stored at ``seq`` covers: ``through_seq``, capped at ``seq - 1``."""
    return max(0, min(summary.through_seq, seq - 1))


def fold_model(events: Iterable[StoredEvent]) -> list[Message]:
    """The conversation of a log, by the FOLD rules; ``events`` in seq order."""
    messages: list[Message] = []
    for stored in events:
        seq, event = stored.seq, stored.event
        if isinstance(event, UserPrompt):
            blocks = (TextBlock(event.text), *(TextBlock(b) for b in event.blocks))
            messages.append(Message("user", "prompt", blocks, (seq,)))
        elif isinstance(event, AssistantMessage):
            text = (TextBlock(event.text),) if event.text else ()
            uses = tuple(ToolUseBlock(c.id, c.name, c.arguments) for c in event.tool_calls)
            messages.append(Message("assistant", "assistant", (*text, *uses), (seq,)))
        elif isinstance(event, ToolResult):
            _add_result(
                messages, ToolResultBlock(event.tool_call_id, event.content, event.is_error), seq
            )
        elif isinstance(event, RepairMessage):
            if event.tool_call_id is not None:
                _add_result(messages, ToolResultBlock(event.tool_call_id, event.text, True), seq)
            else:
                messages.append(Message("user", "repair", (TextBlock(event.text),), (seq,)))
        elif isinstance(event, RuntimeReminder):
            messages.append(Message("user", "reminder", (TextBlock(event.text),), (seq,)))
        elif isinstance(event, BackgroundCompletion):
            messages.append(
                Message("user", "background", (TextBlock(event.content),), (seq,), event.task_id)
            )
        elif isinstance(event, Summary):
            covered = summary_coverage(event, seq)
            summary = Message("user", "summary", (TextBlock(event.text),), (seq,))
            hit = [any(s <= covered for s in m.seqs) for m in messages]
            position = hit.index(True) if True in hit else 0
            messages = [m for m, h in zip(messages, hit, strict=True) if not h]
            messages.insert(position, summary)
        else:
            assert isinstance(event, FileSnapshot | ToolStarted)
    return messages


def _add_result(messages: list[Message], block: ToolResultBlock, seq: int) -> None:
    last = messages[-1] if messages else None
    if last is not None and last.origin == "tool_results":
        messages[-1] = Message("user", "tool_results", (*last.blocks, block), (*last.seqs, seq))
    else:
        messages.append(Message("user", "tool_results", (block,), (seq,)))


def estimate_tokens(messages: Iterable[Message]) -> int:
    """A model-independent token estimate: one token per four characters, rounded up.

    Compaction labels counts from this function ``estimated``; a summarizer
    that can count with its model's tokenizer reports ``measured`` ones.
    """
    chars = 0
    for message in messages:
        for block in message.blocks:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolUseBlock):
                chars += len(block.name) + len(block.arguments)
            else:
                chars += len(block.content)
    return -(-chars // 4)


class ToolCallLedger:
    """Which tool calls of a log are still waiting for their answer, event by event.

    A call is opened by an `AssistantMessage` that asks for it or a
    `ToolStarted` naming it, and finished by a `ToolResult` or a `RepairMessage`
    naming it. A seq where nothing is open is a *clean boundary*: a restore may
    cut the log there (RESTORE-003) and a compaction may summarise up to it
    (COMPACT-001).
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[str, None] = {}

    def feed(self, event: object) -> None:
        """Account for the next event of the log."""
        if isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                self._open[call.id] = None
        elif isinstance(event, ToolStarted):
            self._open[event.tool_call_id] = None
        elif isinstance(event, ToolResult | RepairMessage) and event.tool_call_id is not None:
            self._open.pop(event.tool_call_id, None)

    @property
    def open_calls(self) -> tuple[str, ...]:
        """The ids of the calls still open, in the order they were opened."""
        return tuple(self._open)
