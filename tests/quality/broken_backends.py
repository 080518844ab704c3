"""Deliberately broken checkpointers: each has exactly one bug the kit must find.

Every class here is the in-memory reference backend (`MemoryCheckpointer`) with
one mistake put in, the kind a real backend makes: an off-by-one, a missing
check, a non-atomic loop, a key scheme that folds ids together, a capability
declared but not delivered. Most override one step of the reference (its
``_append_arguments``, ``_stamp``, ``_events_since``, ``_listed``, ``_cut`` ...)
and keep the rest; a few wrap an operation. Each docstring says the bug and the
rule the kit must report; ``violates`` holds that rule id.

The kit loads a backend by ``module:attribute``, so every class is its own
factory: ``broken_backends:IgnoresExpectedHead.make``. Handles made for the same
``ctx.path`` share one store, as the reference's do. ``BROKEN`` maps each class
name to its class. Every class here is wrong on purpose: none is an example of
how to write a backend.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import types
import unicodedata
import weakref
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self, cast

import msgspec
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import (
    MAX_SESSION_ID_LENGTH,
    AppendArguments,
    AssistantMessage,
    BackendContext,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    SchemaVersionError,
    SessionEvent,
    SessionInfo,
    SessionLockedError,
    StoredEvent,
    TruncateArguments,
    check_append_arguments,
    check_seq,
    check_session_id,
)

__all__ = ["BROKEN", "Broken"]


class Broken(MemoryCheckpointer):
    """A `MemoryCheckpointer` with one bug; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: a handle on the process-wide store of ``ctx.path``."""
        return cls(store_for(ctx.path))


@types.coroutine
def _round_trip() -> Generator[None, None, None]:
    """Hand the event loop to other tasks, as waiting for a database server would."""
    yield


# -- append -------------------------------------------------------------------------


class IgnoresExpectedHead(Broken):
    """Bug: append validates expected_head but never compares it with the head.

    A stale writer's append lands on top of a log it has not seen. Kit must report APPEND-002.
    """

    violates = "APPEND-002"

    def _append_arguments(
        self, session_id: object, events: object, expected_head: object, expected_generation: object
    ) -> AppendArguments:
        checked = super()._append_arguments(session_id, events, expected_head, expected_generation)
        return checked._replace(expected_head=None)


class ConflictReportsExpectedAsActual(Broken):
    """Bug: a head conflict echoes the caller's expected_head as ``actual``.

    The error is raised and nothing is written, but the caller cannot learn the
    head it lost to. Kit must report APPEND-002.
    """

    violates = "APPEND-002"

    def _check_expectations(
        self,
        store: MemoryStore,
        sid: str,
        expected_head: int | None,
        expected_generation: int | None,
    ) -> list[StoredEvent]:
        try:
            return super()._check_expectations(store, sid, expected_head, expected_generation)
        except CheckpointConflictError as conflict:
            if conflict.kind != "head":
                raise
            raise CheckpointConflictError(sid, conflict.expected, conflict.expected) from None


class NonAtomicBatch(Broken):
    """Bug: append stores a batch one event per call, each event checked only when its turn comes.

    A batch whose last item is not an event raises InvalidArgumentError after the
    items before it are already in the log. Kit must report APPEND-003.
    """

    violates = "APPEND-003"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if isinstance(events, str | bytes) or not isinstance(events, Sequence) or not events:
            return await super().append(
                session_id, events, expected_head, expected_generation=expected_generation
            )
        head = await super().append(
            session_id, events[:1], expected_head, expected_generation=expected_generation
        )
        for event in events[1:]:
            head = await super().append(session_id, [event])
        return head


class EmptyAppendCreatesSession(Broken):
    """Bug: an empty append registers the session (and touches its mtime) anyway.

    Kit must report APPEND-001.
    """

    violates = "APPEND-001"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )
        if len(events) == 0:
            self._store.logs.setdefault(session_id, [])
            self._store.touch(session_id)
        return head


class EmptyAppendSkipsExpectedHead(Broken):
    """Bug: append returns early for an empty batch, before comparing expected_head.

    (It skips expected_generation the same way.) Kit must report APPEND-001: an
    empty append still checks expected_head.
    """

    violates = "APPEND-001"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if isinstance(events, list | tuple) and not events:
            return await self.head(session_id)
        return await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )


class RacyExpectedHead(Broken):
    """Bug: append compares expected_head, then awaits a round trip, then writes.

    Appends racing on the same expected_head all pass the comparison before any of
    them writes, so every one of them succeeds and the log forks. Kit must report APPEND-004.
    """

    violates = "APPEND-004"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        sid, batch, want_head, want_generation = self._append_arguments(
            session_id, events, expected_head, expected_generation
        )
        self._check_expectations(self._open("append"), sid, want_head, want_generation)
        if batch:
            await _round_trip()
        return await super().append(sid, batch)


class AcceptsUnstorableEvents(Broken):
    """Bug: append never tries to serialise events, since this store keeps Python objects.

    A lone surrogate in a text is accepted, though no serialising backend could
    store it and the contract says it is refused. Kit must report EVENT-002.
    """

    violates = "EVENT-002"

    def _append_arguments(
        self, session_id: object, events: object, expected_head: object, expected_generation: object
    ) -> AppendArguments:
        # The reference also encodes every event here; this one only checks the types.
        return check_append_arguments(session_id, events, expected_head, expected_generation)


class AcceptsEventDicts(Broken):
    """Bug: append leniently converts dict items of a batch into events.

    ``[{"type": "user_prompt", "text": "x"}]`` is stored as a UserPrompt instead of
    being refused. Kit must report ARG-003.
    """

    violates = "ARG-003"

    def _append_arguments(
        self, session_id: object, events: object, expected_head: object, expected_generation: object
    ) -> AppendArguments:
        if isinstance(events, list | tuple):
            events = [_lenient(item) for item in events]
        return super()._append_arguments(session_id, events, expected_head, expected_generation)


def _lenient(item: object) -> object:
    if isinstance(item, Mapping):
        try:
            return msgspec.convert(item, SessionEvent)
        except msgspec.ValidationError:
            return item
    return item


class ReturnsFirstNewSeq(Broken):
    """Bug: append returns the seq of the batch's first event instead of the new head.

    Right for batches of one, wrong for longer ones. Kit must report SEQ-003.
    """

    violates = "SEQ-003"

    def _store_batch(
        self, store: MemoryStore, sid: str, log: list[StoredEvent], stored: list[StoredEvent]
    ) -> int:
        super()._store_batch(store, sid, log, stored)
        return stored[0].seq


# -- what a stored event carries ---------------------------------------------------------


class SeqsRestartEachBatch(Broken):
    """Bug: each batch's events are numbered from 1, as ``enumerate(batch, 1)`` would.

    The first batch of a session is right; every later one repeats seqs. Kit must
    report SEQ-001.
    """

    violates = "SEQ-001"

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        return super()._stamp(sid, 0, batch)


class FirstParentIsZero(Broken):
    """Bug: the first event's parent_seq is stored as 0 instead of None.

    As a NOT NULL DEFAULT 0 column would keep it. Kit must report SEQ-002.
    """

    violates = "SEQ-002"

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        return [
            msgspec.structs.replace(s, parent_seq=0) if s.parent_seq is None else s
            for s in super()._stamp(sid, head, batch)
        ]


class NaiveTimestamps(Broken):
    """Bug: ts is stored without its UTC offset, as a TIMESTAMP WITHOUT TIME ZONE column keeps it.

    Kit must report SEQ-004.
    """

    violates = "SEQ-004"

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        return [
            msgspec.structs.replace(s, ts=s.ts.removesuffix("+00:00"))
            for s in super()._stamp(sid, head, batch)
        ]


class DropsToolCalls(Broken):
    """Bug: an assistant message is stored without its tool_calls.

    As a row mapper written before tool calls existed would store it. Kit must
    report EVENT-001.
    """

    violates = "EVENT-001"

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        return super()._stamp(sid, head, [_without_tool_calls(event) for event in batch])


def _without_tool_calls(event: SessionEvent) -> SessionEvent:
    if isinstance(event, AssistantMessage) and event.tool_calls:
        return msgspec.structs.replace(event, tool_calls=())
    return event


class StripsText(Broken):
    """Bug: text fields are stored with surrounding whitespace stripped.

    Kit must report EVENT-001.
    """

    violates = "EVENT-001"

    def _stamp(self, sid: str, head: int, batch: Sequence[SessionEvent]) -> list[StoredEvent]:
        return super()._stamp(sid, head, [_stripped(event) for event in batch])


def _stripped(event: SessionEvent) -> SessionEvent:
    text = getattr(event, "text", None)
    if isinstance(text, str) and text != text.strip():
        return msgspec.structs.replace(event, text=text.strip())
    return event


# -- read and head ---------------------------------------------------------------------------


class InclusiveSinceSeq(Broken):
    """Bug: read(since_seq=n) starts at seq n instead of n + 1.

    Kit must report READ-001.
    """

    violates = "READ-001"

    def _events_since(self, store: MemoryStore, sid: str, since: int) -> Iterable[StoredEvent]:
        return super()._events_since(store, sid, max(since - 1, 0))


class ClampsNegativeSinceSeq(Broken):
    """Bug: read treats a negative since_seq as 0 instead of refusing it.

    Kit must report ARG-002.
    """

    violates = "ARG-002"

    def _read_arguments(self, session_id: object, since_seq: object) -> tuple[str, int]:
        if isinstance(since_seq, int) and not isinstance(since_seq, bool) and since_seq < 0:
            since_seq = 0
        return super()._read_arguments(session_id, since_seq)


class ReadTakesAnyId(Broken):
    """Bug: read does not validate the session id: an id no session can have just reads empty.

    Kit must report ARG-001: an invalid id is refused by every operation.
    """

    violates = "ARG-001"

    def _read_arguments(self, session_id: object, since_seq: object) -> tuple[str, int]:
        return cast(str, session_id), check_seq("since_seq", since_seq)


class LiveRead(Broken):
    """Bug: read walks the live log instead of a copy.

    An append made while a read is in progress shows up in that read, which then
    yields more events than the log had when the read began. Kit must report READ-003.
    """

    violates = "READ-003"

    def _events_since(self, store: MemoryStore, sid: str, since: int) -> Iterator[StoredEvent]:
        log = store.logs.get(sid, [])
        index = since
        while index < len(log):
            yield log[index]
            index += 1


class PagedRead(Broken):
    """Bug: read fetches the log in pages of 100 events, each page a fresh look at the store.

    A write between two pages leaks into the read, as with LIMIT/OFFSET queries
    outside one transaction. Kit must report READ-003, but only a log longer than
    one page can show it.
    """

    violates = "READ-003"
    page_size: ClassVar[int] = 100

    def _events_since(self, store: MemoryStore, sid: str, since: int) -> Iterator[StoredEvent]:
        offset = since
        while True:
            page = store.logs.get(sid, [])[offset : offset + self.page_size]
            yield from page
            if len(page) < self.page_size:
                return
            offset += len(page)


class AppendYieldsMidBatch(Broken):
    """Bug: append stores a batch one event at a time, handing the event loop back between two.

    A store that awaits one write per event does this: a task reading on the same
    event loop while the append is in flight sees the first events of the batch
    without the rest. Kit must report READ-003.
    """

    violates = "READ-003"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("append")
        sid, batch, want_head, want_generation = self._append_arguments(
            session_id, events, expected_head, expected_generation
        )
        self._check_writable(store, sid, "append")
        log = self._check_expectations(store, sid, want_head, want_generation)
        stored = self._stamp(sid, len(log), batch)
        head = len(log)
        for n, event in enumerate(stored):
            if n:
                await asyncio.sleep(0)  # the await of the next event's write
            head = self._store_batch(store, sid, log, [event])
            log = store.logs[sid]
        return head


class ReadCreatesSession(Broken):
    """Bug: read looks a session up with get-or-create, so reading an unknown id creates it.

    The new session is empty, and listed. Kit must report READ-002.
    """

    violates = "READ-002"

    def _events_since(self, store: MemoryStore, sid: str, since: int) -> Iterable[StoredEvent]:
        if sid not in store.logs:
            store.logs[sid] = []
            store.touch(sid)
        return super()._events_since(store, sid, since)


_high_water: weakref.WeakKeyDictionary[MemoryStore, dict[str, int]] = weakref.WeakKeyDictionary()


class HeadNeverGoesDown(Broken):
    """Bug: head is kept as a high-water mark (seqs only grow, its author thought).

    After a truncate or a delete, head still answers the highest head it has
    seen. Kit must report HEAD-001.
    """

    violates = "HEAD-001"

    def _head(self, store: MemoryStore, sid: str) -> int:
        marks = _high_water.setdefault(store, {})
        marks[sid] = max(marks.get(sid, 0), super()._head(store, sid))
        return marks[sid]


class FloatHead(Broken):
    """Bug: head answers a float (``MAX(seq)`` through a driver that hands back REAL).

    ``2.0 == 2`` holds, so every comparison of the head passes; a caller that
    slices a log or formats a seq with it breaks. Kit must report HEAD-001.
    """

    violates = "HEAD-001"

    def _head(self, store: MemoryStore, sid: str) -> int:
        return float(super()._head(store, sid))  # type: ignore[return-value]


# -- list_sessions -------------------------------------------------------------------------


class ListsOldestFirst(Broken):
    """Bug: list_sessions returns the sessions least recently modified first.

    Kit must report LIST-002.
    """

    violates = "LIST-002"

    async def list_sessions(self) -> list[SessionInfo]:
        return list(reversed(await super().list_sessions()))


class MtimeInMilliseconds(Broken):
    """Bug: list_sessions reports mtime in milliseconds since the epoch, not seconds.

    The order is right; every consumer comparing mtime with time.time() is wrong
    by a factor of 1000. Kit must report LIST-002, whose check asserts the unit.
    """

    violates = "LIST-002"

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        return [SessionInfo(info.id, info.mtime * 1000) for info in super()._listed(store)]


class ListsDeletedSessions(Broken):
    """Bug: list_sessions lists every session the store keeps a record of, deleted ones included.

    A deleted session keeps its generation (GEN-001), as a row of a sessions
    table would; the listing reads that table without asking whether the session
    still has a log. Kit must report LIST-001.
    """

    violates = "LIST-001"

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        deleted = [SessionInfo(sid, 0.0) for sid in store.generations if sid not in store.logs]
        return super()._listed(store) + deleted


class ListsNormalisedIds(Broken):
    """Bug: list_sessions returns ids in Unicode NFC form, as a file system that normalises names does.

    A session appended to as 'e\\u0301' (NFD) is listed as '\\u00e9'. Kit must
    report ID-001: ids come back exactly as given.
    """

    violates = "ID-001"

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        return [
            SessionInfo(unicodedata.normalize("NFC", info.id), info.mtime)
            for info in super()._listed(store)
        ]


# -- session ids ------------------------------------------------------------------------------


_names: weakref.WeakKeyDictionary[MemoryStore, dict[str, str]] = weakref.WeakKeyDictionary()


class _KeyedByStorageName(Broken):
    """Keeps each log under a storage name derived from its id; lists the id first stored there.

    Correct exactly when `storage_name` is injective; each subclass breaks that one way.
    """

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id

    def _name(self, session_id: str) -> str:
        # Ids outside the contract pass through untouched, so the reference refuses them.
        if not isinstance(session_id, str) or not session_id or "\x00" in session_id:
            return session_id
        return self.storage_name(session_id)

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        name = self._name(session_id)
        try:
            head = await super().append(
                name, events, expected_head, expected_generation=expected_generation
            )
        except CheckpointConflictError as conflict:
            raise CheckpointConflictError(
                session_id, conflict.expected, conflict.actual, conflict.kind
            ) from None
        if head:
            _names.setdefault(self._store, {}).setdefault(name, session_id)
        return head

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async for stored in super().read(self._name(session_id), since_seq):
            yield msgspec.structs.replace(stored, session_id=session_id)

    async def head(self, session_id: str) -> int:
        return await super().head(self._name(session_id))

    async def delete(self, session_id: str) -> None:
        name = self._name(session_id)
        await super().delete(name)
        _names.get(self._store, {}).pop(name, None)

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        name = self._name(session_id)
        try:
            return await super().truncate(
                name, to_seq, expected_head, expected_generation=expected_generation
            )
        except CheckpointConflictError as conflict:
            raise CheckpointConflictError(
                session_id, conflict.expected, conflict.actual, conflict.kind
            ) from None

    async def generation(self, session_id: str) -> int:
        return await super().generation(self._name(session_id))

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        names = _names.get(store, {})
        return [
            SessionInfo(names.get(info.id, info.id), info.mtime) for info in super()._listed(store)
        ]


class SlashFoldedIds(_KeyedByStorageName):
    """Bug: the storage name replaces '/' with '_', so 'a/b' and 'a_b' share one log.

    Kit must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id.replace("/", "_")


class CaseInsensitiveIds(_KeyedByStorageName):
    """Bug: the storage name is the lower-cased id, so 'A' and 'a' share one log.

    As on a case-insensitive file system. Kit must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id.lower()


class StrippedIds(_KeyedByStorageName):
    """Bug: the storage name is the id with surrounding whitespace stripped, so 'x' and 'x ' share one log.

    As on Windows, which drops trailing spaces from file names. Kit must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id.strip() or session_id


class ColonEscapedIds(_KeyedByStorageName):
    """Bug: the storage name replaces ':', a key separator, with '_', so 'a:b' and 'a_b' share one log.

    As a Redis store that keeps ids out of its ``prefix:id`` keys' separator. Kit
    must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id.replace(":", "_")


class DotDroppedIds(_KeyedByStorageName):
    """Bug: the storage name drops every '.', so 'a.b' and 'ab' share one log.

    As a store that keeps dots out of its file names. Kit must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        return session_id.replace(".", "") or session_id


class TruncatedIds(_KeyedByStorageName):
    """Bug: the storage name is the id's first 64 characters, so ids sharing them share one log.

    As a store whose key column is ``VARCHAR(64)``. Kit must report ID-002.
    """

    violates = "ID-002"

    @staticmethod
    def storage_name(session_id: str) -> str:
        # An id past the contract's limit keeps its length, so it is still refused.
        return session_id[:64] if len(session_id) <= MAX_SESSION_ID_LENGTH else session_id


class LockFileNamedById(Broken):
    """Bug: each session gets a lock file named by pasting its id into the store's path.

    ``f"{path}/{session_id}.lock"``: the id '../x' puts the lock file beside the
    store, outside it, where nothing ever removes it. Kit must report ID-003.
    """

    violates = "ID-003"
    directory: str = ""

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        made = super().make(ctx)
        made.directory = os.fspath(ctx.path)
        return made

    def _store_batch(
        self, store: MemoryStore, sid: str, log: list[StoredEvent], stored: list[StoredEvent]
    ) -> int:
        lock = Path(f"{self.directory}/{sid}.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.touch()
        return super()._store_batch(store, sid, log, stored)


# -- delete ------------------------------------------------------------------------------


_trash: weakref.WeakKeyDictionary[MemoryStore, dict[str, list[StoredEvent]]] = (
    weakref.WeakKeyDictionary()
)


class DeleteKeepsEvents(Broken):
    """Bug: delete moves the log to a trash, and the next append to that id restores it.

    After delete the session is gone (unlisted, head 0, reads empty), but re-appending
    brings the old events back and continues at the old head + 1. Kit must report DELETE-002.
    """

    violates = "DELETE-002"

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        log = store.logs.get(check_session_id(session_id))
        await super().delete(session_id)
        if log:
            _trash.setdefault(store, {})[session_id] = log

    def _check_expectations(
        self,
        store: MemoryStore,
        sid: str,
        expected_head: int | None,
        expected_generation: int | None,
    ) -> list[StoredEvent]:
        trashed = _trash.get(store, {})
        if sid not in store.logs and sid in trashed:
            store.logs[sid] = trashed.pop(sid)
            store.touch(sid)
        return super()._check_expectations(store, sid, expected_head, expected_generation)


class DeleteUnknownRaises(Broken):
    """Bug: deleting an id that has no session raises KeyError instead of doing nothing.

    Kit must report DELETE-001.
    """

    violates = "DELETE-001"

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        if check_session_id(session_id) not in store.logs:
            raise KeyError(session_id)
        await super().delete(session_id)


class DeleteForgetsGeneration(Broken):
    """Bug: delete removes the session's generation along with its events.

    A re-created session starts again at generation 0, which a stale writer may
    remember. Kit must report GEN-001.
    """

    violates = "GEN-001"

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)
        self._store.generations.pop(session_id, None)


# -- truncate ----------------------------------------------------------------------------


class TruncateKeepsOneMore(Broken):
    """Bug: truncate(to_seq) keeps events 1..to_seq + 1 (an inclusive slice end).

    It still returns to_seq. Kit must report TRUNC-001.
    """

    violates = "TRUNC-001"

    def _cut(self, store: MemoryStore, sid: str, log: list[StoredEvent], to_seq: int) -> None:
        if to_seq + 1 < len(log):
            super()._cut(store, sid, log, to_seq + 1)


class TruncateClampsToHead(Broken):
    """Bug: truncate with to_seq beyond the head truncates to the head instead of refusing.

    Kit must report TRUNC-002.
    """

    violates = "TRUNC-002"

    def _truncate_target(self, sid: str, to_seq: int, head: int) -> int:
        return min(to_seq, head)


class TruncateIgnoresExpectedHead(Broken):
    """Bug: truncate validates expected_head but never compares it with the head.

    Kit must report TRUNC-003.
    """

    violates = "TRUNC-003"

    def _truncate_arguments(
        self, session_id: object, to_seq: object, expected_head: object, expected_generation: object
    ) -> TruncateArguments:
        checked = super()._truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        return checked._replace(expected_head=None)


class PhantomSessionOnTruncate(Broken):
    """Bug: truncate makes sure the session's log exists, creating it for an unknown id.

    Truncating an unknown session to 0 leaves an empty session listed. Kit must report TRUNC-004.
    """

    violates = "TRUNC-004"

    def _truncate_target(self, sid: str, to_seq: int, head: int) -> int:
        target = super()._truncate_target(sid, to_seq, head)
        if sid not in self._store.logs:
            self._store.logs[sid] = []
            self._store.touch(sid)
        return target


class TruncateToZeroDeletes(Broken):
    """Bug: truncating a session to 0 removes the session instead of leaving it listed, empty.

    Kit must report TRUNC-005.
    """

    violates = "TRUNC-005"

    def _cut(self, store: MemoryStore, sid: str, log: list[StoredEvent], to_seq: int) -> None:
        super()._cut(store, sid, log, to_seq)
        if to_seq == 0:
            del store.logs[sid]
            del store.mtimes[sid]


class TruncateKeepsGeneration(Broken):
    """Bug: a truncate that removes events leaves the generation where it was.

    Kit must report GEN-001.
    """

    violates = "GEN-001"

    def _cut(self, store: MemoryStore, sid: str, log: list[StoredEvent], to_seq: int) -> None:
        before = store.generations.get(sid, 0)
        super()._cut(store, sid, log, to_seq)
        store.generations[sid] = before


class IgnoresExpectedGeneration(Broken):
    """Bug: append validates expected_generation but never compares it.

    A writer that remembers the head from before a truncate-and-reappend gets
    through. Kit must report GEN-002.
    """

    violates = "GEN-002"

    def _append_arguments(
        self, session_id: object, events: object, expected_head: object, expected_generation: object
    ) -> AppendArguments:
        checked = super()._append_arguments(session_id, events, expected_head, expected_generation)
        return checked._replace(expected_generation=None)


class TruncateTakesAFirstGenerationForOne(Broken):
    """Bug: truncate compares ``expected_generation`` with 1 where the session's
    generation is 0 (a store defaulting a missing generation to 1), so the current
    generation of a session nothing was removed from is refused.

    Only a truncate with that generation shows it; the conflict carries a generation
    ``generation()`` never answers. Kit must report GEN-001 (a wrong generation), from
    GEN-002's check, which makes that truncate.
    """

    violates = "GEN-001"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if expected_generation is not None and await self.generation(session_id) == 0:
            if expected_generation != 1:
                raise CheckpointConflictError(session_id, expected_generation, 1, "generation")
            expected_generation = 0
        return await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )


class TruncatesWithoutDeclaring(Broken):
    """Bug: TRUNCATE is not declared (its author took truncate for an extra), yet truncate truncates.

    The capability guard never refuses anything. Kit must report CAP-001: an
    undeclared operation raises UnsupportedOperationError and changes nothing.
    """

    violates = "CAP-001"
    capabilities = Broken.capabilities - {Capability.TRUNCATE}

    def _require(self, capability: Capability, operation: str) -> None:
        return None


# -- handles, close -----------------------------------------------------------------------


class ClosedHandleWorks(Broken):
    """Bug: close does nothing, so a closed handle keeps reading and writing.

    Kit must report CLOSE-001.
    """

    violates = "CLOSE-001"

    async def close(self) -> None:
        return None


_shut: weakref.WeakSet[MemoryStore] = weakref.WeakSet()


class CloseShutsTheStore(Broken):
    """Bug: close shuts the store down for every handle, not just this one.

    As closing a connection pool that all handles share. Kit must report CLOSE-002.
    """

    violates = "CLOSE-002"

    def _open(self, operation: str) -> MemoryStore:
        if self._store in _shut:
            raise CheckpointerClosedError(operation)
        return super()._open(operation)

    async def close(self) -> None:
        await super().close()
        _shut.add(self._store)


class StorePerHandle(Broken):
    """Bug: the factory ignores ctx.path and gives every handle a store of its own.

    Kit must report HANDLE-001.
    """

    violates = "HANDLE-001"

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        return cls()


# -- maintenance ---------------------------------------------------------------------------


class AppendIgnoresMaintenance(Broken):
    """Bug: append never looks at the maintenance lock; truncate and delete do.

    A writer appending while a restore holds the session is let through, and its
    event ends up under the restore's truncate. Kit must report MAINT-001.
    """

    violates = "MAINT-001"

    def _check_writable(self, store: MemoryStore, sid: str, operation: str) -> None:
        if operation != "append":
            super()._check_writable(store, sid, operation)


class HolderLockedOut(Broken):
    """Bug: a held session refuses every writer, its holder too.

    The lock is checked for being held, not for who holds it, so a restore or
    compaction cannot write the session it holds. Kit must report MAINT-002.
    """

    violates = "MAINT-002"

    def _check_writable(self, store: MemoryStore, sid: str, operation: str) -> None:
        if sid in store.holders:
            raise SessionLockedError(sid, operation)


class AcquireTakesOver(Broken):
    """Bug: acquire_maintenance of a held session succeeds and makes the caller its holder.

    Two restores of one session both believe they hold it, and the first is
    silently shut out of its own work. Kit must report MAINT-003.
    """

    violates = "MAINT-003"

    def _take(self, store: MemoryStore, sid: str) -> None:
        store.holders[sid] = self


class CloseKeepsLocks(Broken):
    """Bug: close forgets to give back the sessions the handle holds.

    A restore that ends by closing its handle leaves its session locked for as
    long as the process lives. Kit must report MAINT-003.
    """

    violates = "MAINT-003"

    def _release_all(self, store: MemoryStore) -> None:
        return None


# -- capabilities a memory store cannot deliver ----------------------------------------------


_live: dict[str, tuple[MemoryStore, int]] = {}
"""Stores of `ForgetsOnLastClose` by path, with the number of handles open on each."""


class ForgetsOnLastClose(Broken):
    """Bug: declares DURABLE, but the store lives only while some handle on it is open.

    Like an in-memory SQLite database shared by its connections: closing the last
    handle drops everything, so reopening the path finds an empty store. Kit must
    report DUR-001.
    """

    violates = "DUR-001"
    capabilities = Broken.capabilities | {Capability.DURABLE}
    key: str = ""

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        key = str(Path(ctx.path).resolve())
        store, handles = _live.get(key, (MemoryStore(), 0))
        _live[key] = (store, handles + 1)
        made = cls(store)
        made.key = key
        return made

    async def close(self) -> None:
        if not self._closed:
            store, handles = _live[self.key]
            if handles > 1:
                _live[self.key] = (store, handles - 1)
            else:
                del _live[self.key]
        await super().close()


class DurableInProcessMemory(Broken):
    """Bug: declares DURABLE because closing and reopening in one process keeps everything.

    Nothing reaches storage: when the process dies, its acknowledged appends die
    with it. Kit must report DUR-002 (a killed writer's acknowledged batches are gone).
    """

    violates = "DUR-002"
    capabilities = Broken.capabilities | {Capability.DURABLE}


class SharedOnlyInProcess(Broken):
    """Bug: declares MULTI_PROCESS because every handle shares one store, but only within a process.

    Writers in other processes each get a store of their own: none sees the
    others' appends, and all are acknowledged at the same heads. Kit must report MP-001.
    """

    violates = "MP-001"
    capabilities = Broken.capabilities | {Capability.MULTI_PROCESS}


# -- integrity -----------------------------------------------------------------------------


class IntegrityFlagsDeletedSessions(Broken):
    """Bug: check_integrity reports a generation with no log as an orphan.

    Every delete leaves such a generation on purpose (GEN-001), so a healthy
    store that had a session deleted is reported damaged. Kit must report INTEG-001.
    """

    violates = "INTEG-001"

    def _problems(self, store: MemoryStore) -> list[str]:
        orphans = [
            f"session {sid!r}: generation without events"
            for sid in store.generations
            if sid not in store.logs
        ]
        return super()._problems(store) + orphans


_newer: weakref.WeakSet[MemoryStore] = weakref.WeakSet()
"""Stores `_Hooked.mark_newer_schema` marked as written by a newer format."""


class _Hooked(Broken):
    """A `Broken` that also offers `StoreHooks`, so that the kit judges INTEG-002 and SCHEMA-001.

    The damage it can do to a memory store, and promises to detect, is an event
    whose seq disagrees with its position (the reference's ``_problems`` finds
    it). A store marked newer is refused by the factory.
    """

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        if store_for(ctx.path) in _newer:
            raise SchemaVersionError(2, 1)
        return super().make(ctx)

    def mark_newer_schema(self, path: Path) -> None:
        """Mark the store at ``path`` as written by format 2; this one reads format 1."""
        _newer.add(store_for(path))

    def damage_store(self, path: Path) -> str:
        """Flip the lowest bit of the seq of event 1 of the first session with two or more."""
        logs = store_for(path).logs
        sid = next(sid for sid, log in logs.items() if len(log) >= 2)
        first = logs[sid][0]
        logs[sid][0] = msgspec.structs.replace(first, seq=first.seq ^ 1)
        return f"the seq of event 1 of session {sid!r} is now {first.seq ^ 1}"


class IntegrityChecksOrderOnly(_Hooked):
    """Bug: check_integrity checks that each session's seqs increase, not that they run 1, 2, 3.

    A seq damaged from 1 to 0 still increases: the damaged store is reported ok.
    Kit must report INTEG-002.
    """

    violates = "INTEG-002"

    def _problems(self, store: MemoryStore) -> list[str]:
        return [
            f"session {sid!r}: seq {later.seq} follows seq {earlier.seq}"
            for sid, log in store.logs.items()
            for earlier, later in itertools.pairwise(log)
            if later.seq <= earlier.seq
        ]


BROKEN: dict[str, type[Broken]] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, Broken) and hasattr(value, "violates")
}
"""Every broken backend by class name; its factory is ``broken_backends:<name>.make``."""
