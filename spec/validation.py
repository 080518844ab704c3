"""Argument validation shared by the model and the reference backends.

Each function returns the value when it is inside the contract and raises
`InvalidArgumentError` (naming the argument) otherwise. Backends call these
before touching storage, so a bad call changes nothing (ARG-001..ARG-003).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .errors import InvalidArgumentError
from .events import EVENT_TYPES, SessionEvent

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "check_events",
    "check_optional_seq",
    "check_seq",
    "check_session_id",
]

MAX_SESSION_ID_LENGTH: Final = 256
"""Session ids are at most this many characters (code points)."""


def check_session_id(session_id: object) -> str:
    """A session id is a non-empty str of at most 256 code points, without NUL,
    encodable as UTF-8 (no lone surrogates). Anything else in it is opaque (ARG-001)."""
    if not isinstance(session_id, str):
        raise InvalidArgumentError("session_id", f"must be str, not {type(session_id).__name__}")
    if not session_id:
        raise InvalidArgumentError("session_id", "must not be empty")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise InvalidArgumentError(
            "session_id", f"has {len(session_id)} characters; the limit is {MAX_SESSION_ID_LENGTH}"
        )
    if "\x00" in session_id:
        raise InvalidArgumentError("session_id", "must not contain NUL")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError("session_id", "must be encodable as UTF-8") from exc
    return session_id


def check_seq(name: str, value: object) -> int:
    """A seq argument is an int (not bool) and not negative (ARG-002)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(name, f"must be int, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(name, f"must not be negative (got {value})")
    return value


def check_optional_seq(name: str, value: object) -> int | None:
    """Like `check_seq`, but None is allowed (``expected_head``, ``expected_generation``)."""
    return None if value is None else check_seq(name, value)


def check_events(events: object) -> tuple[SessionEvent, ...]:
    """``events`` is a sequence (not str, bytes or a mapping) of SessionEvent values (ARG-003)."""
    if isinstance(events, str | bytes | bytearray) or not isinstance(events, Sequence):
        raise InvalidArgumentError(
            "events", f"must be a sequence of events, not {type(events).__name__}"
        )
    batch = tuple(events)
    for index, event in enumerate(batch):
        if not isinstance(event, EVENT_TYPES):
            raise InvalidArgumentError(
                "events", f"item {index} is {type(event).__name__}, not a SessionEvent"
            )
    return batch
