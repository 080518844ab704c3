"""The event model: what a session log stores.

`SessionEvent` is a tagged union (the ``type`` field) of every event kind an agent
session writes. Backends treat events as opaque values: whatever goes into
``append`` must come back from ``read`` equal, field for field (rule EVENT-001).

`encode_event` / `decode_event` are the canonical wire form (compact JSON through
msgspec). Backends may store events any way they like, but these are the fast,
exact path and the one the reference backends use.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from .errors import InvalidArgumentError, ReasonCode

__all__ = [
    "EVENT_TYPES",
    "AssistantMessage",
    "BackgroundCompletion",
    "FileSnapshot",
    "RepairMessage",
    "RuntimeReminder",
    "SessionEvent",
    "Summary",
    "ToolCall",
    "ToolResult",
    "ToolStarted",
    "UserPrompt",
    "decode_event",
    "encode_event",
]


class _Event(msgspec.Struct, frozen=True, tag_field="type", forbid_unknown_fields=True):
    """Common base: frozen, tagged by ``type``."""


class UserPrompt(_Event, frozen=True, tag="user_prompt"):
    """Input from the user. Each one is a checkpoint: a point `restore` can return to."""

    text: str
    blocks: tuple[str, ...] = ()
    """Extra content blocks of a block-form prompt (attachments, pasted files)."""


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool invocation requested by the assistant. ``arguments`` is opaque JSON text."""

    id: str
    name: str
    arguments: str


class AssistantMessage(_Event, frozen=True, tag="assistant_message"):
    """A model turn: its text and the tool calls it asked for."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


class ToolStarted(_Event, frozen=True, tag="tool_started"):
    """A tool call began executing. A log ending here has an unfinished tool call."""

    tool_call_id: str
    name: str


class ToolResult(_Event, frozen=True, tag="tool_result"):
    """The outcome of a tool call."""

    tool_call_id: str
    content: str
    is_error: bool = False


FileEncoding: TypeAlias = Literal["utf-8", "base64"]


class FileSnapshot(_Event, frozen=True, tag="file_snapshot"):
    """A file's content just before a tool modified it; `restore` replays these.

    ``content_before`` is None when the file did not exist. ``truncated`` marks a
    snapshot too large to keep whole: it cannot be restored. ``hash_after`` is the
    SHA-256 (hex) of the content the tool wrote, used to detect later out-of-band
    edits; None for old snapshots that did not record it.
    """

    path: str
    content_before: str | None
    truncated: bool = False
    encoding: FileEncoding = "utf-8"
    hash_after: str | None = None
    tool_call_id: str | None = None


class Summary(_Event, frozen=True, tag="summary"):
    """A compaction result replacing the conversation up to ``through_seq``."""

    text: str
    through_seq: int
    tokens_before: int
    tokens_after: int


class BackgroundCompletion(_Event, frozen=True, tag="background_completion"):
    """A background task finished; not a user checkpoint."""

    task_id: str
    content: str


class RuntimeReminder(_Event, frozen=True, tag="runtime_reminder"):
    """A message the runtime injected (not the user); not a checkpoint."""

    text: str


class RepairMessage(_Event, frozen=True, tag="repair_message"):
    """A message the runtime wrote to repair a broken conversation (e.g. a dangling tool call)."""

    text: str
    tool_call_id: str | None = None


SessionEvent: TypeAlias = (
    UserPrompt
    | AssistantMessage
    | ToolStarted
    | ToolResult
    | FileSnapshot
    | Summary
    | BackgroundCompletion
    | RuntimeReminder
    | RepairMessage
)

EVENT_TYPES: Final[tuple[type[SessionEvent], ...]] = (
    UserPrompt,
    AssistantMessage,
    ToolStarted,
    ToolResult,
    FileSnapshot,
    Summary,
    BackgroundCompletion,
    RuntimeReminder,
    RepairMessage,
)

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[SessionEvent] = msgspec.json.Decoder(SessionEvent)


def encode_event(event: SessionEvent) -> bytes:
    """Serialise one event to its canonical bytes, refusing what would not come back equal.

    Raises `InvalidArgumentError` (``reason_code`` ``unstorable``, rule EVENT-002)
    for an event that cannot be stored exactly: a string holding a lone
    surrogate, or a field of the wrong type (msgspec does not check types when a
    Struct is built, so ``UserPrompt(text=123)`` exists until it is stored).
    """
    try:
        data = _encoder.encode(event)
    except (UnicodeEncodeError, TypeError, OverflowError) as exc:
        raise _unstorable(f"event cannot be serialised: {exc}") from exc
    try:
        exact = _decoder.decode(data) == event
    except msgspec.DecodeError as exc:
        raise _unstorable(f"event cannot be serialised exactly: {exc}") from exc
    if not exact:
        raise _unstorable(f"event cannot be serialised exactly: {event!r}")
    return data


def _unstorable(reason: str) -> InvalidArgumentError:
    return InvalidArgumentError("events", reason, ReasonCode.UNSTORABLE, "EVENT-002")


def decode_event(data: bytes | memoryview) -> SessionEvent:
    """Parse bytes written by `encode_event`.

    Raises `msgspec.DecodeError` (or its subclass `msgspec.ValidationError`) on
    bytes that are not a valid event; backends translate it into the contract's
    error for their situation (`CorruptStoreError` or `CodecError`).
    """
    return _decoder.decode(data)
