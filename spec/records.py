"""The values the contract returns: stored events, session listings, integrity reports."""

from __future__ import annotations

import msgspec

from .events import SessionEvent

__all__ = ["IntegrityReport", "SessionInfo", "StoredEvent"]


class StoredEvent(msgspec.Struct, frozen=True):
    """An event as the log holds it.

    ``seq`` counts from 1 without gaps (SEQ-001); ``parent_seq`` is ``seq - 1``, or
    None for the first event (SEQ-002); ``ts`` is when the backend accepted the
    append, an ISO 8601 timestamp with a UTC offset (SEQ-004).
    """

    seq: int
    session_id: str
    parent_seq: int | None
    ts: str
    event: SessionEvent


class SessionInfo(msgspec.Struct, frozen=True):
    """One session in `Checkpointer.list_sessions`: its id and last modification time.

    ``mtime`` is seconds since the epoch of the last append or truncate (LIST-003).
    """

    id: str
    mtime: float


class IntegrityReport(msgspec.Struct, frozen=True):
    """The result of `Checkpointer.check_integrity` (INTEG-001, INTEG-002).

    ``ok`` is False when anything is wrong; ``detail`` is a one-paragraph summary;
    ``problems`` lists each finding precisely (session, record, what); ``repairs``
    lists what the backend repaired on its own since it was opened (for example a
    torn final record cut off), which does not make ``ok`` False.
    """

    ok: bool
    detail: str
    problems: tuple[str, ...] = ()
    repairs: tuple[str, ...] = ()
