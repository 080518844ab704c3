"""The in-memory reference backend.

Every handle made for the same path shares one store for the life of the
process, so the kit can open several handles and "reopen" a store; nothing
survives the process (no DURABLE), and no other process can see it (no
MULTI_PROCESS). Operations never await between checking and writing, which makes
each of them atomic under any number of concurrent asyncio tasks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ..spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    IntegrityReport,
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

__all__ = ["MemoryCheckpointer", "MemoryStore", "make"]


class MemoryStore:
    """The state behind one or more `MemoryCheckpointer` handles."""

    def __init__(self) -> None:
        self.logs: dict[str, list[StoredEvent]] = {}
        self.mtimes: dict[str, float] = {}
        self.generations: dict[str, int] = {}
        self.last_mtime = 0.0

    def touch(self, session_id: str) -> None:
        # mtimes never go backwards within a store, even if the wall clock does (LIST-003).
        self.last_mtime = max(time.time(), self.last_mtime)
        self.mtimes[session_id] = self.last_mtime


_stores: dict[str, MemoryStore] = {}
_stores_lock = threading.Lock()


def store_for(path: Path | str) -> MemoryStore:
    """The process-wide store for ``path``, created on first use."""
    key = str(Path(path).resolve())
    with _stores_lock:
        return _stores.setdefault(key, MemoryStore())


class MemoryCheckpointer:
    """A conforming checkpointer that keeps everything in this process's memory.

    Capabilities: TRUNCATE and GENERATION.
    """

    capabilities: frozenset[Capability] = frozenset(
        {Capability.DELETE, Capability.LIST, Capability.TRUNCATE, Capability.GENERATION}
    )

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()
        self._closed = False

    def _open(self, operation: str) -> MemoryStore:
        if self._closed:
            raise CheckpointerClosedError(operation)
        return self._store

    def _require(self, capability: Capability, operation: str) -> None:
        if capability not in self.capabilities:
            raise UnsupportedOperationError(operation, capability.value)

    @staticmethod
    def _check_expectations(
        store: MemoryStore, sid: str, expected_head: int | None, expected_generation: int | None
    ) -> list[StoredEvent]:
        log = store.logs.get(sid, [])
        check_expectations(
            sid, len(log), store.generations.get(sid, 0), expected_head, expected_generation
        )
        return log

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("append")
        if expected_generation is not None:
            self._require(Capability.GENERATION, "append")
        sid, batch, want_head, want_generation = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        for event in batch:
            encode_event(event)
        log = self._check_expectations(store, sid, want_head, want_generation)
        if not batch:
            return len(log)
        log = store.logs.setdefault(sid, log)
        ts = datetime.now(UTC).isoformat()
        for event in batch:
            seq = len(log) + 1
            log.append(StoredEvent(seq, sid, seq - 1 if seq > 1 else None, ts, event))
        store.touch(sid)
        return len(log)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        store = self._open("read")
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        # Slicing copies the list: later writes cannot leak into this iteration (READ-003).
        snapshot = store.logs.get(sid, [])[since:]
        for stored in snapshot:
            yield stored

    async def head(self, session_id: str) -> int:
        store = self._open("head")
        return len(store.logs.get(check_session_id(session_id), ()))

    async def list_sessions(self) -> list[SessionInfo]:
        store = self._open("list_sessions")
        infos = [SessionInfo(sid, store.mtimes[sid]) for sid in store.logs]
        infos.sort(key=lambda info: info.id)
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        sid = check_session_id(session_id)
        if store.logs.pop(sid, None) is not None:
            del store.mtimes[sid]
            store.generations[sid] = store.generations.get(sid, 0) + 1

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("truncate")
        self._require(Capability.TRUNCATE, "truncate")
        if expected_generation is not None:
            self._require(Capability.GENERATION, "truncate")
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        log = self._check_expectations(store, sid, want_head, want_generation)
        check_truncate_bound(sid, target, len(log))
        if target < len(log):
            del log[target:]
            store.touch(sid)
            store.generations[sid] = store.generations.get(sid, 0) + 1
        return target

    async def generation(self, session_id: str) -> int:
        store = self._open("generation")
        self._require(Capability.GENERATION, "generation")
        return store.generations.get(check_session_id(session_id), 0)

    async def check_integrity(self) -> IntegrityReport:
        store = self._open("check_integrity")
        problems = [
            f"session {sid!r}: event at index {index} has seq {stored.seq}"
            for sid, log in store.logs.items()
            for index, stored in enumerate(log)
            if stored.seq != index + 1
        ]
        detail = f"{len(store.logs)} sessions checked" if not problems else "; ".join(problems)
        return IntegrityReport(ok=not problems, detail=detail, problems=tuple(problems))

    async def close(self) -> None:
        self._closed = True


def make(ctx: BackendContext) -> MemoryCheckpointer:
    """Factory for the kit: handles made with the same ``ctx.path`` share one store.

    A configured ``ctx.codec`` is ignored: this backend stores no bytes and does
    not declare CODEC.
    """
    return MemoryCheckpointer(store_for(ctx.path))
