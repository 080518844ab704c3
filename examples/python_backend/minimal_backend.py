"""A minimal, complete checkpointer: one dict of lists per store, in this process's memory.

The worked example of docs/backend-authors.md. It declares TRUNCATE, DELETE and
LIST and nothing else: it keeps nothing on disk (no DURABLE), no other process
can see it (no MULTI_PROCESS), it stores no bytes (no CODEC), and it keeps no
generation counter (no GENERATION) or maintenance lock (no MAINTENANCE).

Run the kit against it from the repository root:

    checkpointspec run examples.python_backend.minimal_backend:make --profile quick
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from checkpointspec.spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    IntegrityReport,
    InvalidArgumentError,
    ReasonCode,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    UnsupportedOperationError,
    check_append_arguments,
    check_expectations,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
    encode_event,
)

__all__ = ["DictStore", "MinimalCheckpointer", "make"]


class DictStore:
    """One store: a list of stored events and a modification time per session id."""

    def __init__(self) -> None:
        self.logs: dict[str, list[StoredEvent]] = {}
        self.mtimes: dict[str, float] = {}
        self.last_mtime = 0.0

    def touch(self, session_id: str) -> None:
        """Stamp a modification; mtimes never go backwards, even if the clock does (LIST-003)."""
        self.last_mtime = max(time.time(), self.last_mtime)
        self.mtimes[session_id] = self.last_mtime


# Every handle made for the same path must see the same store (HANDLE-001), so the
# stores live in a process-wide table keyed by the resolved path.
_stores: dict[Path, DictStore] = {}
_stores_lock = threading.Lock()


def _store_for(path: Path) -> DictStore:
    with _stores_lock:
        return _stores.setdefault(path.resolve(), DictStore())


class MinimalCheckpointer:
    """A handle on a `DictStore`.

    No method awaits between reading the state and writing it, so every
    operation is atomic under any number of concurrent asyncio tasks
    (APPEND-003, APPEND-004).
    """

    capabilities: frozenset[Capability] = frozenset(
        {Capability.TRUNCATE, Capability.DELETE, Capability.LIST}
    )

    def __init__(self, store: DictStore) -> None:
        self._store = store
        self._closed = False

    def _open(self, operation: str) -> DictStore:
        """Step 1 of every operation: refuse a closed handle (CLOSE-001)."""
        if self._closed:
            raise CheckpointerClosedError(operation)
        return self._store

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("append")
        if expected_generation is not None:  # only GENERATION backends accept it (CAP-001)
            raise UnsupportedOperationError("append", Capability.GENERATION.value)
        sid, batch, want_head, _ = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        for event in batch:  # refuse the whole batch if one event would not come back equal
            encode_event(event)  # (EVENT-002)
        log = store.logs.get(sid, [])
        check_expectations(sid, len(log), 0, want_head, None)  # APPEND-002
        if not batch:  # APPEND-001: an empty batch writes nothing, creates no session
            return len(log)
        ts = datetime.now(UTC).isoformat()
        head = len(log)
        stamped = [
            StoredEvent(seq, sid, seq - 1 if seq > 1 else None, ts, event)
            for seq, event in enumerate(batch, head + 1)
        ]
        store.logs.setdefault(sid, log).extend(stamped)
        store.touch(sid)
        return head + len(stamped)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        store = self._open("read")
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        # A slice is a copy: later writes cannot leak into this read (READ-003).
        for stored in store.logs.get(sid, [])[since:]:
            yield stored

    async def head(self, session_id: str) -> int:
        store = self._open("head")
        return len(store.logs.get(check_session_id(session_id), ()))

    async def list_sessions(self) -> list[SessionInfo]:
        store = self._open("list_sessions")
        infos = [SessionInfo(sid, store.mtimes[sid]) for sid in store.logs]
        infos.sort(key=lambda info: info.id)  # ties by id ascending ...
        infos.sort(key=lambda info: info.mtime, reverse=True)  # ... newest first (LIST-002)
        return infos

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        sid = check_session_id(session_id)
        if store.logs.pop(sid, None) is not None:
            del store.mtimes[sid]

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("truncate")
        if expected_generation is not None:
            raise UnsupportedOperationError("truncate", Capability.GENERATION.value)
        sid, target, want_head, _ = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        log = store.logs.get(sid, [])
        check_expectations(sid, len(log), 0, want_head, None)  # TRUNC-003
        check_truncate_bound(sid, target, len(log))  # TRUNC-002
        if target < len(log):  # TRUNC-005: truncating to the head changes nothing
            del log[target:]
            store.touch(sid)
        return target

    async def check_integrity(self) -> IntegrityReport:
        store = self._open("check_integrity")
        problems = [
            f"session {sid!r}: event at index {index} has seq {stored.seq}"
            for sid, log in store.logs.items()
            for index, stored in enumerate(log)
            if stored.seq != index + 1
        ]
        detail = "; ".join(problems) or f"{len(store.logs)} sessions checked"
        return IntegrityReport(ok=not problems, detail=detail, problems=tuple(problems))

    async def close(self) -> None:
        self._closed = True  # idempotent; the store lives on for other handles


def make(ctx: BackendContext) -> MinimalCheckpointer:
    """The factory: a new handle on the store at ``ctx.path``.

    This backend takes no options; ``ctx.codec`` is ignored because it does not
    declare CODEC.
    """
    for key in ctx.options:
        raise InvalidArgumentError("options", f"unknown option {key!r}", ReasonCode.UNKNOWN_OPTION)
    return MinimalCheckpointer(_store_for(ctx.path))
