"""The error hierarchy of the checkpointer contract.

Every error a conforming backend raises on purpose derives from `CheckpointError`
and carries its facts as attributes, not only in its message. Each class says
what the store looks like after it was raised; the rule ids in the docstrings
point into `checkpointspec.spec.rules`.

All errors pickle with their attributes intact, so they can cross process
boundaries (the kit's worker processes, ``-n`` parallel runs).
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CheckpointConflictError",
    "CheckpointError",
    "CheckpointerClosedError",
    "CodecError",
    "CorruptStoreError",
    "InvalidArgumentError",
    "SchemaVersionError",
    "StoreBusyError",
    "UnsupportedOperationError",
]


class CheckpointError(Exception):
    """Root of every error the contract defines.

    Catch this to handle any checkpointer failure; catch a subclass to act on one.
    """


class InvalidArgumentError(CheckpointError, ValueError):
    """An argument is outside the contract (ARG-001..ARG-003, TRUNC-002).

    Raised before anything is written: the store is unchanged. ``argument`` names
    the parameter, ``reason`` says what is wrong with it.
    """

    def __init__(self, argument: str, reason: str) -> None:
        super().__init__(f"invalid {argument}: {reason}")
        self.argument = argument
        self.reason = reason

    def __reduce__(self) -> tuple[type[InvalidArgumentError], tuple[str, str]]:
        return (type(self), (self.argument, self.reason))


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
