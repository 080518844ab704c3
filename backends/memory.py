"""The in-memory reference backend.

Every handle made for the same path shares one store for the life of the
process, so the kit can open several handles and "reopen" a store; nothing
survives the process (no DURABLE), and no other process can see it (no
MULTI_PROCESS). Operations never await between checking and writing, which makes
each of them atomic under any number of concurrent asyncio tasks.

The maintenance lock (MAINTENANCE) lives in the store too, so every handle on
it sees who holds a session; a handle's locks end with its ``close``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ..spec import (
    AppendArguments,
    BackendContext,
    Capability,
    CheckpointerClosedError,
    IntegrityReport,
    SessionEvent,
    SessionInfo,
    SessionLockedError,
    StoredEvent,
    TruncateArguments,
    UnsupportedOperationError,
    check_append_arguments,
    check_expectations,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
    encode_event,
)
from .capabilities import store_capabilities

__all__ = ["MemoryCheckpointer", "MemoryStore", "make"]


class MemoryStore:
    """The state behind one or more `MemoryCheckpointer` handles."""

    def __init__(self) -> None:
        self.logs: dict[str, list[StoredEvent]] = {}
        self.mtimes: dict[str, float] = {}
        self.generations: dict[str, int] = {}
        self.last_mtime = 0.0
        self.holders: dict[str, MemoryCheckpointer] = {}
        """The handle holding each session's maintenance lock (MAINT-001)."""

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

    Capabilities: DELETE, LIST, TRUNCATE, GENERATION and MAINTENANCE.

    Each operation is a short run of steps, one method each with a one-line
    docstring: validate the arguments, compare the expectations with the state,
    stamp the events, store them. A variant of this backend overrides the one
    step it does differently and keeps the rest; the project's deliberately
    broken backends (``tests/quality``) are built that way. No step awaits, so
    every operation stays atomic under concurrent tasks.
    """

    # One process's memory, events kept as objects: nothing survives, nothing is shared
    # and no payload passes through a codec.
    capabilities: frozenset[Capability] = store_capabilities(
        durable=False, shared=False, codec=False
    )

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()
        self._closed = False

    # -- steps shared by the operations ------------------------------------------------
    def _open(self, operation: str) -> MemoryStore:
        """The store, unless this handle is closed (CLOSE-001)."""
        if self._closed:
            raise CheckpointerClosedError(operation)
        return self._store

    def _require(self, capability: Capability, operation: str) -> None:
        """Refuse an operation whose capability is not declared (CAP-001)."""
        if capability not in self.capabilities:
            raise UnsupportedOperationError(operation, capability.value)

    def _check_expectations(
        self,
        store: MemoryStore,
        sid: str,
        expected_head: int | None,
        expected_generation: int | None,
    ) -> list[StoredEvent]:
        """Compare the expectations with the session's state; return its log (APPEND-002, GEN-002)."""
        log = store.logs.get(sid, [])
        check_expectations(
            sid, len(log), store.generations.get(sid, 0), expected_head, expected_generation
        )
        return log

    def _check_writable(self, store: MemoryStore, sid: str, operation: str) -> None:
        """Refuse a write to a session another handle holds; the holder writes (MAINT-001, MAINT-002)."""
        holder = store.holders.get(sid)
        if holder is not None and holder is not self:
            raise SessionLockedError(sid, operation)

    # -- append ----------------------------------------------------------------------------
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
        sid, batch, want_head, want_generation = self._append_arguments(
            session_id, events, expected_head, expected_generation
        )
        self._check_writable(store, sid, "append")
        log = self._check_expectations(store, sid, want_head, want_generation)
        if not batch:
            return len(log)
        return self._store_batch(store, sid, log, self._stamp(sid, len(log), batch))

    def _append_arguments(
        self,
        session_id: object,
        events: object,
        expected_head: object,
        expected_generation: object,
    ) -> AppendArguments:
        """Validate append's arguments; refuse events that would not be stored exactly (ARG-*, EVENT-002)."""
        arguments = check_append_arguments(session_id, events, expected_head, expected_generation)
        for event in arguments.events:
            encode_event(event)
        return arguments

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        """The batch as stored events: seqs from head + 1, parent links, one UTC time (SEQ-*)."""
        ts = datetime.now(UTC).isoformat()
        stored = []
        for seq, event in enumerate(batch, head + 1):
            stored.append(StoredEvent(seq, sid, seq - 1 if seq > 1 else None, ts, event))
        return stored

    def _store_batch(
        self, store: MemoryStore, sid: str, log: list[StoredEvent], stored: list[StoredEvent]
    ) -> int:
        """Add stamped events to the session's ``log`` (new or not), set its mtime; the new head."""
        log = store.logs.setdefault(sid, log)
        log.extend(stored)
        store.touch(sid)
        return len(log)

    # -- read and head -----------------------------------------------------------------------
    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        store = self._open("read")
        sid, since = self._read_arguments(session_id, since_seq)
        for stored in self._events_since(store, sid, since):
            yield stored

    def _read_arguments(self, session_id: object, since_seq: object) -> tuple[str, int]:
        """Validate the arguments of read (ARG-001, ARG-002)."""
        return check_session_id(session_id), check_seq("since_seq", since_seq)

    def _events_since(self, store: MemoryStore, sid: str, since: int) -> Iterable[StoredEvent]:
        """The session's events after ``since``, copied: later writes cannot leak in (READ-003)."""
        return store.logs.get(sid, [])[since:]

    async def head(self, session_id: str) -> int:
        store = self._open("head")
        return self._head(store, check_session_id(session_id))

    def _head(self, store: MemoryStore, sid: str) -> int:
        """The seq of the session's last event; 0 when it has none (HEAD-001)."""
        return len(store.logs.get(sid, ()))

    # -- list and delete -----------------------------------------------------------------------
    async def list_sessions(self) -> list[SessionInfo]:
        store = self._open("list_sessions")
        self._require(Capability.LIST, "list_sessions")
        infos = self._listed(store)
        infos.sort(key=lambda info: info.id)
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        """Every session that has a log, with its mtime, in no particular order (LIST-001)."""
        return [SessionInfo(sid, store.mtimes[sid]) for sid in store.logs]

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        self._require(Capability.DELETE, "delete")
        sid = check_session_id(session_id)
        self._check_writable(store, sid, "delete")
        if store.logs.pop(sid, None) is not None:
            del store.mtimes[sid]
            store.generations[sid] = store.generations.get(sid, 0) + 1

    # -- truncate and generation ---------------------------------------------------------------
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
        sid, to_seq, want_head, want_generation = self._truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        self._check_writable(store, sid, "truncate")
        log = self._check_expectations(store, sid, want_head, want_generation)
        target = self._truncate_target(sid, to_seq, len(log))
        if target < len(log):
            self._cut(store, sid, log, target)
        return target

    def _truncate_arguments(
        self,
        session_id: object,
        to_seq: object,
        expected_head: object,
        expected_generation: object,
    ) -> TruncateArguments:
        """Validate every argument of truncate (ARG-001, ARG-002)."""
        return check_truncate_arguments(session_id, to_seq, expected_head, expected_generation)

    def _truncate_target(self, sid: str, to_seq: int, head: int) -> int:
        """The seq to keep events up to: ``to_seq``, refused beyond the head (TRUNC-002)."""
        check_truncate_bound(sid, to_seq, head)
        return to_seq

    def _cut(self, store: MemoryStore, sid: str, log: list[StoredEvent], to_seq: int) -> None:
        """Remove the events after ``to_seq``; mtime and generation move (TRUNC-001, GEN-001)."""
        del log[to_seq:]
        store.touch(sid)
        store.generations[sid] = store.generations.get(sid, 0) + 1

    async def generation(self, session_id: str) -> int:
        store = self._open("generation")
        self._require(Capability.GENERATION, "generation")
        return store.generations.get(check_session_id(session_id), 0)

    # -- maintenance -----------------------------------------------------------------------------
    async def acquire_maintenance(self, session_id: str) -> None:
        """Hold ``session_id`` alone; `SessionLockedError` if any handle holds it (MAINT-003)."""
        store = self._open("acquire_maintenance")
        self._require(Capability.MAINTENANCE, "acquire_maintenance")
        sid = check_session_id(session_id)
        self._take(store, sid)

    def _take(self, store: MemoryStore, sid: str) -> None:
        """Record this handle as the session's holder, unless one is recorded, this one included (MAINT-003)."""
        if sid in store.holders:
            raise SessionLockedError(sid, "acquire_maintenance")
        store.holders[sid] = self

    async def release_maintenance(self, session_id: str) -> None:
        """Give the session back; nothing happens unless this handle holds it (MAINT-003)."""
        store = self._open("release_maintenance")
        self._require(Capability.MAINTENANCE, "release_maintenance")
        self._give_back(store, check_session_id(session_id))

    def _give_back(self, store: MemoryStore, sid: str) -> None:
        """Forget this handle as the session's holder, if it is."""
        if store.holders.get(sid) is self:
            del store.holders[sid]

    # -- integrity and close ---------------------------------------------------------------
    async def check_integrity(self) -> IntegrityReport:
        store = self._open("check_integrity")
        problems = self._problems(store)
        detail = f"{len(store.logs)} sessions checked" if not problems else "; ".join(problems)
        return IntegrityReport(ok=not problems, detail=detail, problems=tuple(problems))

    def _problems(self, store: MemoryStore) -> list[str]:
        """What is wrong with the store: any event whose seq is not its position (INTEG-002)."""
        return [
            f"session {sid!r}: event at index {index} has seq {stored.seq}"
            for sid, log in store.logs.items()
            for index, stored in enumerate(log)
            if stored.seq != index + 1
        ]

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._release_all(self._store)

    def _release_all(self, store: MemoryStore) -> None:
        """Give back every session this handle holds: close ends its locks (MAINT-003)."""
        for sid in [sid for sid, holder in store.holders.items() if holder is self]:
            self._give_back(store, sid)


def make(ctx: BackendContext) -> MemoryCheckpointer:
    """Factory for the kit: handles made with the same ``ctx.path`` share one store.

    A configured ``ctx.codec`` is ignored: this backend stores no bytes and does
    not declare CODEC.
    """
    return MemoryCheckpointer(store_for(ctx.path))
