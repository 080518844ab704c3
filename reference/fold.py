"""The fold: the conversation a model sees of a session log (FOLD-001..006), fast.

`fold` returns exactly what `checkpointspec.spec.fold_model`, the oracle,
returns for the same events; the kit compares the two on every log it
generates. The oracle rebuilds a message for every coalesced tool result and
scans all messages once per summary; this module keeps the open tool-results
turn as two plain lists and builds its `Message` once, dispatches on the
event's exact class, and keeps beside the messages the smallest seq each one
holds, so that a summary finds what it covers by comparing ints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from ..spec import (
    EVENT_TYPES,
    AssistantMessage,
    BackgroundCompletion,
    Block,
    FileSnapshot,
    Message,
    RepairMessage,
    RuntimeReminder,
    StoredEvent,
    Summary,
    TextBlock,
    ToolResult,
    ToolResultBlock,
    ToolStarted,
    ToolUseBlock,
    UserPrompt,
)

__all__ = ["fold"]

_KNOWN: Final = frozenset(EVENT_TYPES)


def event_kind(cls: type) -> type:
    """The event class ``cls`` is or derives from; TypeError for a class that is no event.

    Events are nearly always of their exact class, which callers test first.
    """
    for known in EVENT_TYPES:
        if issubclass(cls, known):
            return known
    raise TypeError(f"a session event, not {cls.__name__}")


def fold(events: Iterable[StoredEvent]) -> list[Message]:
    """The conversation of a log, by the FOLD rules; ``events`` in seq order.

    Equal to `checkpointspec.spec.fold_model` on every log. One pass; each
    summary costs one comparison per message still in the conversation.
    Raises TypeError for an event that is not a `SessionEvent`.
    """
    messages: list[Message] = []
    lows: list[int] = []  # lows[i]: the smallest seq messages[i] holds
    # The open tool-results turn, always the last message when it has blocks.
    results: list[Block] = []
    result_seqs: list[int] = []
    for stored in events:
        # Typed Any: the class test below is the narrowing, and cast() costs a call.
        event: Any = stored.event
        cls = type(event)
        if cls not in _KNOWN:
            cls = event_kind(cls)
        if cls is FileSnapshot or cls is ToolStarted:
            continue  # FOLD-004: invisible, and no separator between results
        if cls is ToolResult:  # FOLD-003
            results.append(ToolResultBlock(event.tool_call_id, event.content, event.is_error))
            result_seqs.append(stored.seq)
            continue
        if cls is RepairMessage and event.tool_call_id is not None:  # FOLD-005
            results.append(ToolResultBlock(event.tool_call_id, event.text, True))
            result_seqs.append(stored.seq)
            continue
        if result_seqs:
            messages.append(Message("user", "tool_results", tuple(results), tuple(result_seqs)))
            lows.append(result_seqs[0])
            results, result_seqs = [], []
        seq = stored.seq
        if cls is AssistantMessage:  # FOLD-002
            calls = event.tool_calls
            if calls:
                uses = [ToolUseBlock(c.id, c.name, c.arguments) for c in calls]
                blocks: tuple[Block, ...] = (
                    (TextBlock(event.text), *uses) if event.text else tuple(uses)
                )
            else:
                blocks = (TextBlock(event.text),) if event.text else ()
            messages.append(Message("assistant", "assistant", blocks, (seq,)))
        elif cls is UserPrompt:  # FOLD-001
            text = TextBlock(event.text)
            extra = event.blocks
            blocks = (text, *map(TextBlock, extra)) if extra else (text,)
            messages.append(Message("user", "prompt", blocks, (seq,)))
        elif cls is RepairMessage:  # FOLD-005, naming no tool call
            messages.append(Message("user", "repair", (TextBlock(event.text),), (seq,)))
        elif cls is RuntimeReminder:
            messages.append(Message("user", "reminder", (TextBlock(event.text),), (seq,)))
        elif cls is BackgroundCompletion:
            messages.append(
                Message("user", "background", (TextBlock(event.content),), (seq,), event.task_id)
            )
        else:
            assert cls is Summary
            _summarise(messages, lows, event, seq)
            if messages and messages[-1].origin == "tool_results":
                # What the summary left at the end is still an open turn (FOLD-003).
                reopened = messages.pop()
                lows.pop()
                results, result_seqs = list(reopened.blocks), list(reopened.seqs)
            continue
        lows.append(seq)
    if result_seqs:
        messages.append(Message("user", "tool_results", tuple(results), tuple(result_seqs)))
    return messages


def _summarise(messages: list[Message], lows: list[int], summary: Summary, seq: int) -> None:
    """FOLD-006: drop every message holding a seq the summary covers; it takes the first's place."""
    covered = max(0, min(summary.through_seq, seq - 1))
    message = Message("user", "summary", (TextBlock(summary.text),), (seq,))
    first = next((i for i, low in enumerate(lows) if low <= covered), None)
    if first is None:
        messages.insert(0, message)
        lows.insert(0, seq)
        return
    # Everything before ``first`` is kept by definition; filter only the rest.
    tail = [i for i in range(first + 1, len(lows)) if lows[i] > covered]
    messages[first:] = [message, *(messages[i] for i in tail)]
    lows[first:] = [seq, *(lows[i] for i in tail)]
