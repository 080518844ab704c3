"""The error hierarchy of the checkpointer contract.

Every error a conforming backend raises on purpose derives from `CheckpointError`
and carries its facts as attributes, not only in its message. Each class says
what the store looks like after it was raised; the rule ids in the docstrings
point into `checkpointspec.spec.rules`.

All errors pickle with their attributes intact, so they can cross process
boundaries (the kit's worker processes, ``-n`` parallel runs).

Programs decide by type and attributes, never by message wording. Each class
but `InvalidArgumentError` stands for its rules by itself (a conflict's
``kind`` and the operation tell APPEND-002, TRUNC-003 and GEN-002 apart);
`InvalidArgumentError` covers several rules, so it carries a ``reason_code``
(`ReasonCode`) and the ``rule_id`` it enforces.
"""

from __future__ import annotations

import enum
from typing import Literal

__all__ = [
    "CheckpointConflictError",
    "CheckpointError",
    "CheckpointerClosedError",
    "CodecError",
    "CompactionError",
    "CompactionReason",
    "ConnectionLostError",
    "CorruptStoreError",
    "InvalidArgumentError",
    "ReasonCode",
    "RestoreError",
    "RestoreReason",
    "SchemaVersionError",
    "SessionLockedError",
    "StoreBusyError",
    "UnsupportedOperationError",
]


class CheckpointError(Exception):
    """Root of every error the contract defines.

    Catch this to handle any checkpointer failure; catch a subclass to act on one.
    """


class ReasonCode(enum.StrEnum):
    """Why an argument was refused: the machine-readable `InvalidArgumentError.reason_code`.

    Match on this, never on the message, which is for people and may be reworded.
    The rule a refusal enforces is `InvalidArgumentError.rule_id`, because one
    reason can serve several rules (``wrong_type`` is ARG-001 for a session id and
    ARG-002 for a seq).
    """

    WRONG_TYPE = "wrong_type"
    """Not of the type the contract requires: a session id that is not a str, a
    seq that is not an int or is a bool (ARG-001, ARG-002)."""
    EMPTY = "empty"
    """An empty session id (ARG-001)."""
    TOO_LONG = "too_long"
    """A session id longer than `MAX_SESSION_ID_LENGTH` code points (ARG-001)."""
    CONTAINS_NUL = "contains_nul"
    """A session id holding the NUL character (ARG-001)."""
    NOT_UTF8 = "not_utf8"
    """A session id not encodable as UTF-8: it holds a lone surrogate (ARG-001)."""
    NEGATIVE = "negative"
    """A negative seq: since_seq, to_seq, expected_head, expected_generation (ARG-002)."""
    NOT_A_SEQUENCE = "not_a_sequence"
    """An events argument that is not a sequence, or is a str or bytes (ARG-003)."""
    NOT_AN_EVENT = "not_an_event"
    """An item of a batch that is not a `SessionEvent` (ARG-003)."""
    UNSTORABLE = "unstorable"
    """An event that cannot be serialised exactly, e.g. text holding a lone
    surrogate or a field of the wrong type (EVENT-002)."""
    TOO_LARGE = "too_large"
    """An event larger than the backend can store in one record (EVENT-002)."""
    UNSAFE_PATH = "unsafe_path"
    """A workspace path that is absolute, empty, holds NUL, climbs out with
    ``..`` or resolves through a symlink outside the workspace root (SNAP-003)."""
    NO_SUCH_FILE = "no_such_file"
    """A workspace delete of a path that does not exist (SNAP-001)."""
    NOT_A_FILE = "not_a_file"
    """A workspace path that names a directory, FIFO, socket or device (SNAP-001)."""
    BEYOND_HEAD = "beyond_head"
    """A truncate ``to_seq`` greater than the session's head (TRUNC-002)."""
    UNKNOWN_OPTION = "unknown_option"
    """A backend option (``ctx.options``) the backend does not know; no rule."""
    BAD_OPTION = "bad_option"
    """A backend option or constructor setting with a value the backend does not
    accept, of whatever kind; no rule. The codes above are for the contract's
    arguments only."""


class InvalidArgumentError(CheckpointError, ValueError):
    """An argument is outside the contract (ARG-001..ARG-003, EVENT-002, TRUNC-002).

    Raised before anything is written: the store is unchanged. ``argument`` names
    the parameter and ``reason`` says in words what is wrong with it;
    ``reason_code`` says it for programs (an `ReasonCode`) and ``rule_id``
    names the catalog rule the refusal enforces. The contract's own checks
    (`checkpointspec.spec.validation`, `checkpointspec.spec.events.encode_event`)
    always set both: ARG-001 for a session id, ARG-002 for a seq, ARG-003 for a
    batch, EVENT-002 for an event that cannot be stored, TRUNC-002 for a
    ``to_seq`` beyond the head. Either is None when the raiser gave none, and
    ``rule_id`` is None for a refusal no rule asks for (a backend's own options).
    """

    def __init__(
        self,
        argument: str,
        reason: str,
        reason_code: ReasonCode | None = None,
        rule_id: str | None = None,
    ) -> None:
        super().__init__(f"invalid {argument}: {reason}")
        self.argument = argument
        self.reason = reason
        self.reason_code = reason_code
        self.rule_id = rule_id

    def __reduce__(
        self,
    ) -> tuple[type[InvalidArgumentError], tuple[str, str, ReasonCode | None, str | None]]:
        return (type(self), (self.argument, self.reason, self.reason_code, self.rule_id))


ConflictKind = Literal["head", "generation"]


class CheckpointConflictError(CheckpointError):
    """Optimistic concurrency failed: the log moved on (APPEND-002, TRUNC-003, GEN-002).

    ``expected`` is what the caller passed, ``actual`` the value the store had when
    it checked; ``kind`` says whether the head or the generation differed. Nothing
    was written. Re-read the log and retry.
    """

    def __init__(
        self, session_id: str, expected: int, actual: int, kind: ConflictKind = "head"
    ) -> None:
        super().__init__(f"session {session_id!r}: expected {kind} {expected}, but it is {actual}")
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        self.kind: ConflictKind = kind

    def __reduce__(
        self,
    ) -> tuple[type[CheckpointConflictError], tuple[str, int, int, ConflictKind]]:
        return (type(self), (self.session_id, self.expected, self.actual, self.kind))


class UnsupportedOperationError(CheckpointError):
    """The backend does not declare the capability this operation needs (CAP-001).

    Nothing was changed. ``operation`` is the method name, ``capability`` the
    capability value (e.g. ``"truncate"``) it would need.
    """

    def __init__(self, operation: str, capability: str) -> None:
        super().__init__(
            f"{operation} needs the {capability!r} capability, which this backend lacks"
        )
        self.operation = operation
        self.capability = capability

    def __reduce__(self) -> tuple[type[UnsupportedOperationError], tuple[str, str]]:
        return (type(self), (self.operation, self.capability))


class CheckpointerClosedError(CheckpointError):
    """An operation was called on a closed handle (CLOSE-001). Nothing was changed."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation} called on a closed checkpointer")
        self.operation = operation

    def __reduce__(self) -> tuple[type[CheckpointerClosedError], tuple[str]]:
        return (type(self), (self.operation,))


class CodecError(CheckpointError):
    """The configured codec failed to encode or decode a payload (CODEC-002, CODEC-003).

    On encode (``direction == "encode"``) nothing was written. On decode the store
    is left byte-identical: the payload is neither skipped, repaired nor rewritten,
    and never returned as plaintext. ``seq`` is the failing event's seq when known.
    """

    def __init__(
        self,
        session_id: str,
        direction: Literal["encode", "decode"],
        detail: str,
        seq: int | None = None,
    ) -> None:
        where = f"session {session_id!r}" + (f" seq {seq}" if seq is not None else "")
        super().__init__(f"{direction} failed for {where}: {detail}")
        self.session_id = session_id
        self.direction: Literal["encode", "decode"] = direction
        self.detail = detail
        self.seq = seq

    def __reduce__(
        self,
    ) -> tuple[type[CodecError], tuple[str, Literal["encode", "decode"], str, int | None]]:
        return (type(self), (self.session_id, self.direction, self.detail, self.seq))


class CorruptStoreError(CheckpointError):
    """Stored data is damaged in a way the backend must not repair (INTEG-002).

    ``session_id`` is None when the damage is not tied to one session;
    ``location`` names the record, page or file. Nothing was changed.
    """

    def __init__(self, session_id: str | None, location: str, detail: str) -> None:
        where = f"session {session_id!r} " if session_id is not None else ""
        super().__init__(f"corrupt store: {where}at {location}: {detail}")
        self.session_id = session_id
        self.location = location
        self.detail = detail

    def __reduce__(self) -> tuple[type[CorruptStoreError], tuple[str | None, str, str]]:
        return (type(self), (self.session_id, self.location, self.detail))


class SchemaVersionError(CheckpointError):
    """The store was written by a newer, incompatible format (SCHEMA-001).

    Raised on open, before anything is written: the store is byte-identical.
    """

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"store has schema version {found}; this backend supports up to {supported}"
        )
        self.found = found
        self.supported = supported

    def __reduce__(self) -> tuple[type[SchemaVersionError], tuple[int, int]]:
        return (type(self), (self.found, self.supported))


class StoreBusyError(CheckpointError):
    """The store stayed locked by another writer past the backend's timeout.

    Retryable, and distinct from a conflict: nothing was written and the caller's
    view of the head may still be right.
    """

    def __init__(self, operation: str, waited_seconds: float) -> None:
        super().__init__(f"{operation}: store still busy after {waited_seconds:.3f}s")
        self.operation = operation
        self.waited_seconds = waited_seconds

    def __reduce__(self) -> tuple[type[StoreBusyError], tuple[str, float]]:
        return (type(self), (self.operation, self.waited_seconds))


class ConnectionLostError(CheckpointError):
    """The connection to the server died while a write was in flight: outcome unknown.

    Raised by a backend whose store lives on a server (NET-001) when it cannot
    find out whether the write took effect: the server stayed unreachable, or the
    write leaves nothing to recognise it by. ``operation`` and ``session_id`` name
    the write; ``detail`` says why the outcome is unknown. The write is wholly
    applied or wholly absent, never in part, and never applied later: read the
    head to know which. A write that certainly did not happen raises a contract
    error that says so (`StoreBusyError`) instead.
    """

    def __init__(self, operation: str, session_id: str, detail: str) -> None:
        super().__init__(f"{operation} of session {session_id!r}: outcome unknown: {detail}")
        self.operation = operation
        self.session_id = session_id
        self.detail = detail
        self.outcome: Literal["unknown"] = "unknown"

    def __reduce__(self) -> tuple[type[ConnectionLostError], tuple[str, str, str]]:
        return (type(self), (self.operation, self.session_id, self.detail))


class SessionLockedError(CheckpointError):
    """Another handle holds the session's maintenance lock (MAINT-001, MAINT-003).

    Raised by a write (append, truncate, delete) or by `acquire_maintenance`
    while a restore or compaction holds the session through some other handle,
    in this process or another. Nothing was written. Retry once the maintenance
    is over; a lock whose holder process died is released by the backend
    (MAINT-004), so it never blocks a session for good.
    """

    def __init__(self, session_id: str, operation: str) -> None:
        super().__init__(f"{operation}: session {session_id!r} is held by a restore or compaction")
        self.session_id = session_id
        self.operation = operation

    def __reduce__(self) -> tuple[type[SessionLockedError], tuple[str, str]]:
        return (type(self), (self.session_id, self.operation))


class RestoreReason(enum.StrEnum):
    """Why a restore was refused or undone: the machine-readable `RestoreError.reason_code`."""

    UNKNOWN_SESSION = "unknown_session"
    """The session has no events (RESTORE-002)."""
    NOT_A_CHECKPOINT = "not_a_checkpoint"
    """The seq is not that of a user prompt in the log (RESTORE-002)."""
    UNFINISHED_TOOL_CALL = "unfinished_tool_call"
    """The log before the checkpoint holds a tool call without its result: cut
    there, the conversation would end inside a tool call (RESTORE-003)."""
    WORKSPACE_REQUIRED = "workspace_required"
    """Files are to be restored but no workspace was given (RESTORE-003)."""
    UNSAFE_PATH = "unsafe_path"
    """A snapshot's path is absolute, climbs out with ``..`` or resolves through
    a symlink outside the workspace (RESTORE-003)."""
    SNAPSHOT_TRUNCATED = "snapshot_truncated"
    """The snapshot a file would come back from was too large and kept only in
    part (RESTORE-003)."""
    SNAPSHOT_UNDECODABLE = "snapshot_undecodable"
    """The snapshot's content does not decode in its declared encoding (RESTORE-003)."""
    OUT_OF_BAND_CHANGE = "out_of_band_change"
    """The file no longer holds what the last tool wrote to it: someone changed
    it outside the session, and restoring would destroy that (RESTORE-003)."""
    CANCELLED = "cancelled"
    """The caller cancelled; everything was left or put back as it was (RESTORE-005)."""
    APPLY_FAILED = "apply_failed"
    """Writing a file back failed (disk full, permission denied); the files
    already written were put back (RESTORE-005)."""
    LOG_CHANGED = "log_changed"
    """The log moved on while restoring (a truncate conflict); the files were
    put back (RESTORE-005)."""


class RestoreError(CheckpointError):
    """A restore was refused, or failed and was undone: files and log are as they were.

    ``reason_code`` (a `RestoreReason`) says why for programs, ``path`` names
    the workspace file concerned (None when none is), ``detail`` says it in
    words. Refusals come from the preflight, before anything is touched
    (RESTORE-002, RESTORE-003); ``cancelled``, ``apply_failed`` and
    ``log_changed`` come after a partial apply that was rolled back (RESTORE-005).
    """

    def __init__(
        self,
        session_id: str,
        seq: int,
        reason_code: RestoreReason,
        detail: str,
        path: str | None = None,
    ) -> None:
        where = f" ({path})" if path is not None else ""
        super().__init__(
            f"restore of session {session_id!r} to seq {seq}: {reason_code.value}{where}: {detail}"
        )
        self.session_id = session_id
        self.seq = seq
        self.reason_code = reason_code
        self.detail = detail
        self.path = path

    def __reduce__(
        self,
    ) -> tuple[type[RestoreError], tuple[str, int, RestoreReason, str, str | None]]:
        return (
            type(self),
            (self.session_id, self.seq, self.reason_code, self.detail, self.path),
        )


class CompactionReason(enum.StrEnum):
    """Why a compaction refused to go on: the machine-readable `CompactionError.reason_code`."""

    UNKNOWN_SESSION = "unknown_session"
    """The session has no events: there is no conversation to compact (COMPACT-003)."""
    BAD_SUMMARY = "bad_summary"
    """The summarizer returned something that is not a str."""


class CompactionError(CheckpointError):
    """A compaction could not go on; nothing was written.

    ``reason_code`` (a `CompactionReason`) says why for programs, ``detail``
    in words. Failures of the backend or of the summarizer are raised as they
    are, not wrapped in this.
    """

    def __init__(self, session_id: str, reason_code: CompactionReason, detail: str) -> None:
        super().__init__(f"compaction of session {session_id!r}: {reason_code.value}: {detail}")
        self.session_id = session_id
        self.reason_code = reason_code
        self.detail = detail

    def __reduce__(
        self,
    ) -> tuple[type[CompactionError], tuple[str, CompactionReason, str]]:
        return (type(self), (self.session_id, self.reason_code, self.detail))
