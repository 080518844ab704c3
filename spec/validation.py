"""Argument and expectation checks shared by the model and every backend.

The ``check_*`` functions return the value when it is inside the contract and
raise `InvalidArgumentError` otherwise, naming the argument, the reason
(``reason_code``, a `ReasonCode`) and the rule (``rule_id``); backends call them
before touching storage, so a bad call changes nothing (ARG-001..ARG-003).
`check_append_arguments` and `check_truncate_arguments` are the whole argument
prologue of those operations. `check_expectations` and `check_truncate_bound`
compare the arguments with the state read under the backend's lock: they raise
`CheckpointConflictError` (APPEND-002, TRUNC-003, GEN-002) and the bound error
of TRUNC-002 exactly as `SpecModel` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from .errors import CheckpointConflictError, InvalidArgumentError, ReasonCode
from .events import EVENT_TYPES, SessionEvent

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "AppendArguments",
    "TruncateArguments",
    "check_append_arguments",
    "check_events",
    "check_expectations",
    "check_optional_seq",
    "check_seq",
    "check_session_id",
    "check_truncate_arguments",
    "check_truncate_bound",
]

MAX_SESSION_ID_LENGTH: Final = 256
"""Session ids are at most this many characters (code points)."""


def check_session_id(session_id: object) -> str:
    """A session id is a non-empty str of at most 256 code points, without NUL,
    encodable as UTF-8 (no lone surrogates). Anything else in it is opaque (ARG-001)."""
    if not isinstance(session_id, str):
        raise _bad_session_id(
            f"must be str, not {type(session_id).__name__}", ReasonCode.WRONG_TYPE
        )
    if not session_id:
        raise _bad_session_id("must not be empty", ReasonCode.EMPTY)
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise _bad_session_id(
            f"has {len(session_id)} characters; the limit is {MAX_SESSION_ID_LENGTH}",
            ReasonCode.TOO_LONG,
        )
    if "\x00" in session_id:
        raise _bad_session_id("must not contain NUL", ReasonCode.CONTAINS_NUL)
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad_session_id("must be encodable as UTF-8", ReasonCode.NOT_UTF8) from exc
    return session_id


def _bad_session_id(reason: str, code: ReasonCode) -> InvalidArgumentError:
    return InvalidArgumentError("session_id", reason, code, "ARG-001")


def check_seq(name: str, value: object) -> int:
    """A seq argument is an int (not bool) and not negative (ARG-002)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(
            name, f"must be int, not {type(value).__name__}", ReasonCode.WRONG_TYPE, "ARG-002"
        )
    if value < 0:
        raise InvalidArgumentError(
            name, f"must not be negative (got {value})", ReasonCode.NEGATIVE, "ARG-002"
        )
    return value


def check_optional_seq(name: str, value: object) -> int | None:
    """Like `check_seq`, but None is allowed (``expected_head``, ``expected_generation``)."""
    return None if value is None else check_seq(name, value)


def check_events(events: object) -> tuple[SessionEvent, ...]:
    """``events`` is a sequence (not str, bytes or a mapping) of SessionEvent values (ARG-003)."""
    if isinstance(events, str | bytes | bytearray) or not isinstance(events, Sequence):
        raise InvalidArgumentError(
            "events",
            f"must be a sequence of events, not {type(events).__name__}",
            ReasonCode.NOT_A_SEQUENCE,
            "ARG-003",
        )
    batch = tuple(events)
    for index, event in enumerate(batch):
        if not isinstance(event, EVENT_TYPES):
            raise InvalidArgumentError(
                "events",
                f"item {index} is {type(event).__name__}, not a SessionEvent",
                ReasonCode.NOT_AN_EVENT,
                "ARG-003",
            )
    return batch


class AppendArguments(NamedTuple):
    """The arguments of an ``append`` call, validated."""

    session_id: str
    events: tuple[SessionEvent, ...]
    expected_head: int | None
    expected_generation: int | None


def check_append_arguments(
    session_id: object, events: object, expected_head: object, expected_generation: object
) -> AppendArguments:
    """Validate every argument of ``append`` in the contract's order (ARG-001..ARG-003)."""
    return AppendArguments(
        check_session_id(session_id),
        check_events(events),
        check_optional_seq("expected_head", expected_head),
        check_optional_seq("expected_generation", expected_generation),
    )


class TruncateArguments(NamedTuple):
    """The arguments of a ``truncate`` call, validated."""

    session_id: str
    to_seq: int
    expected_head: int | None
    expected_generation: int | None


def check_truncate_arguments(
    session_id: object, to_seq: object, expected_head: object, expected_generation: object
) -> TruncateArguments:
    """Validate every argument of ``truncate`` in the contract's order (ARG-001, ARG-002)."""
    return TruncateArguments(
        check_session_id(session_id),
        check_seq("to_seq", to_seq),
        check_optional_seq("expected_head", expected_head),
        check_optional_seq("expected_generation", expected_generation),
    )


def check_expectations(
    session_id: str,
    head: int,
    generation: int,
    expected_head: int | None,
    expected_generation: int | None,
) -> None:
    """Raise `CheckpointConflictError` unless the expectations match the session's state.

    Call it with the head and generation read under the lock that the write
    then holds. The generation is compared first (kind ``"generation"``,
    GEN-002), then the head (APPEND-002, TRUNC-003); None expects anything.
    """
    if expected_generation is not None and expected_generation != generation:
        raise CheckpointConflictError(
            session_id, expected_generation, generation, kind="generation"
        )
    if expected_head is not None and expected_head != head:
        raise CheckpointConflictError(session_id, expected_head, head)


def check_truncate_bound(session_id: str, to_seq: int, head: int) -> None:
    """Raise `InvalidArgumentError` for ``to_seq`` beyond the session's head (TRUNC-002)."""
    if to_seq > head:
        raise InvalidArgumentError(
            "to_seq",
            f"{to_seq} is beyond the head {head} of session {session_id!r}",
            ReasonCode.BEYOND_HEAD,
            "TRUNC-002",
        )
