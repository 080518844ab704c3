"""The sequential model of the contract: the oracle for every model-based check.

Everything that decides the right answer to an operation lives here, and nothing
else does. The model performs no I/O and knows nothing about any backend: it
holds the logs as plain Python lists and applies each operation atomically, one
at a time, in the order the rules in `checkpointspec.spec.rules` define. A
backend conforms when, for every sequential history, it returns what the model
returns and raises what the model raises.

What the model cannot know it does not predict: timestamps (``ts``) and wall
clock ``mtime``. Instead it keeps a logical modification clock, so callers can
check that a backend's ``mtime`` order agrees with the order of modifications.

``SpecModel`` is one store; ``SpecModel.handle()`` opens a `ModelHandle` on it,
the model's counterpart of one backend handle, with the same method names.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .capabilities import Capability
from .errors import (
    CheckpointerClosedError,
    UnsupportedOperationError,
)
from .events import SessionEvent, encode_event
from .validation import (
    check_append_arguments,
    check_expectations,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
)

__all__ = ["ModelEvent", "ModelHandle", "SpecModel"]


class ModelEvent(msgspec.Struct, frozen=True):
    """A stored event as the model predicts it: everything but the timestamp."""

    seq: int
    session_id: str
    parent_seq: int | None
    event: SessionEvent


class SpecModel:
    """One store's state, and the rules that change it.

    ``capabilities`` decides which optional operations succeed: without
    TRUNCATE, truncate raises `UnsupportedOperationError`; without DELETE,
    delete does, and without LIST, ``list_sessions``; without GENERATION, so do
    ``generation`` and any ``expected_generation`` argument.
    """

    def __init__(self, capabilities: Iterable[Capability] = ()) -> None:
        self.capabilities = frozenset(capabilities)
        self._logs: dict[str, list[ModelEvent]] = {}
        self._modified_at: dict[str, int] = {}
        # Generations outlive their session on purpose: a re-created session must
        # not restart at a generation a stale writer may remember (GEN-001).
        self._generations: dict[str, int] = {}
        self._clock = 0

    def handle(self) -> ModelHandle:
        """Open a new handle on this store."""
        return ModelHandle(self)

    def copy(self) -> SpecModel:
        """An independent copy of the store's state, for exploring "what if" outcomes."""
        clone = SpecModel(self.capabilities)
        clone._logs = {sid: list(log) for sid, log in self._logs.items()}
        clone._modified_at = dict(self._modified_at)
        clone._generations = dict(self._generations)
        clone._clock = self._clock
        return clone

    # -- queries used by checks (no validation, no handle) -----------------------
    def log(self, session_id: str) -> list[ModelEvent]:
        """A copy of the session's log (empty if unknown)."""
        return list(self._logs.get(session_id, ()))

    def session_ids(self) -> list[str]:
        """Existing sessions, most recently modified first (LIST-001, LIST-002)."""
        return sorted(self._logs, key=lambda sid: -self._modified_at[sid])

    def modified_at(self, session_id: str) -> int:
        """The logical time of the session's last modification (LIST-003)."""
        return self._modified_at[session_id]

    # -- transitions -------------------------------------------------------------
    def _touch(self, session_id: str) -> None:
        self._clock += 1
        self._modified_at[session_id] = self._clock

    def _require(self, capability: Capability, operation: str) -> None:
        if capability not in self.capabilities:
            raise UnsupportedOperationError(operation, capability.value)

    def append(
        self,
        session_id: object,
        events: object,
        expected_head: object = None,
        expected_generation: object = None,
    ) -> int:
        if expected_generation is not None:
            self._require(Capability.GENERATION, "append")
        sid, batch, want_head, want_generation = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        for event in batch:
            encode_event(event)  # EVENT-002: refuse what cannot be stored exactly
        log = self._logs.get(sid)
        check_expectations(
            sid, len(log or ()), self._generations.get(sid, 0), want_head, want_generation
        )
        if not batch:
            return 0 if log is None else len(log)
        if log is None:
            log = self._logs[sid] = []
        for event in batch:
            seq = len(log) + 1
            log.append(ModelEvent(seq, sid, seq - 1 if seq > 1 else None, event))
        self._touch(sid)
        return len(log)

    def read(self, session_id: object, since_seq: object = 0) -> list[ModelEvent]:
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        return list(self._logs.get(sid, ())[since:])

    def head(self, session_id: object) -> int:
        sid = check_session_id(session_id)
        return len(self._logs.get(sid, ()))

    def delete(self, session_id: object) -> None:
        self._require(Capability.DELETE, "delete")
        sid = check_session_id(session_id)
        if sid in self._logs:
            del self._logs[sid]
            del self._modified_at[sid]
            self._generations[sid] = self._generations.get(sid, 0) + 1

    def truncate(
        self,
        session_id: object,
        to_seq: object,
        expected_head: object = None,
        expected_generation: object = None,
    ) -> int:
        self._require(Capability.TRUNCATE, "truncate")
        if expected_generation is not None:
            self._require(Capability.GENERATION, "truncate")
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        log = self._logs.get(sid, [])
        check_expectations(sid, len(log), self._generations.get(sid, 0), want_head, want_generation)
        check_truncate_bound(sid, target, len(log))
        if target < len(log):
            del log[target:]
            self._touch(sid)
            self._generations[sid] = self._generations.get(sid, 0) + 1
        return target

    def generation(self, session_id: object) -> int:
        self._require(Capability.GENERATION, "generation")
        sid = check_session_id(session_id)
        return self._generations.get(sid, 0)


class ModelHandle:
    """One handle on a `SpecModel`: the same operations as a Checkpointer, synchronous.

    A closed handle raises `CheckpointerClosedError` from every operation but
    ``close`` (CLOSE-001); the store and its other handles are unaffected (CLOSE-002).
    """

    def __init__(self, store: SpecModel) -> None:
        self.store = store
        self.closed = False

    def _open(self, operation: str) -> SpecModel:
        if self.closed:
            raise CheckpointerClosedError(operation)
        return self.store

    def append(
        self,
        session_id: object,
        events: object,
        expected_head: object = None,
        expected_generation: object = None,
    ) -> int:
        return self._open("append").append(session_id, events, expected_head, expected_generation)

    def read(self, session_id: object, since_seq: object = 0) -> list[ModelEvent]:
        return self._open("read").read(session_id, since_seq)

    def head(self, session_id: object) -> int:
        return self._open("head").head(session_id)

    def list_sessions(self) -> list[str]:
        store = self._open("list_sessions")
        store._require(Capability.LIST, "list_sessions")
        return store.session_ids()

    def delete(self, session_id: object) -> None:
        self._open("delete").delete(session_id)

    def truncate(
        self,
        session_id: object,
        to_seq: object,
        expected_head: object = None,
        expected_generation: object = None,
    ) -> int:
        return self._open("truncate").truncate(
            session_id, to_seq, expected_head, expected_generation
        )

    def generation(self, session_id: object) -> int:
        return self._open("generation").generation(session_id)

    def check_integrity(self) -> bool:
        self._open("check_integrity")
        return True

    def close(self) -> None:
        self.closed = True
