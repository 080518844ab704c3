"""Deliberately broken checkpointers: each has exactly one bug the kit must find.

Every class here is the in-memory reference backend (`MemoryCheckpointer`) with
one mistake put in, the kind a real backend makes: an off-by-one, a missing
check, a non-atomic loop, a key scheme that folds ids together. Its docstring
says the bug and the rule the kit must report; ``violates`` holds that rule id.

The kit loads a backend by ``module:function``, so each class has a module-level
factory ``make_<name>(ctx)``; ``BROKEN`` maps every name to its class. Handles
made for the same ``ctx.path`` share one store, as the reference's do. Every
class here is wrong on purpose: none is an example of how to write a backend.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import AsyncIterator, Generator, Mapping, Sequence
from datetime import UTC, datetime
from typing import ClassVar, cast

import msgspec
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import (
    EVENT_TYPES,
    AssistantMessage,
    BackendContext,
    CheckpointConflictError,
    CheckpointerClosedError,
    IntegrityReport,
    InvalidArgumentError,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    check_events,
    check_optional_seq,
    check_seq,
    check_session_id,
    encode_event,
)

__all__ = ["BROKEN", "Broken"]


class Broken(MemoryCheckpointer):
    """A `MemoryCheckpointer` with one bug; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]


def _is_seq(value: object) -> bool:
    """True when ``value`` is a seq argument inside the contract (ARG-002)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        self._open("append")
        check_optional_seq("expected_head", expected_head)
        return await super().append(
            session_id, events, None, expected_generation=expected_generation
        )


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
    """Bug: append stores a batch item by item, validating each item only when it gets to it.

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
        store = self._open("append")
        sid = check_session_id(session_id)
        if isinstance(events, str | bytes | bytearray) or not isinstance(events, Sequence):
            raise InvalidArgumentError(
                "events", f"must be a sequence of events, not {type(events).__name__}"
            )
        want_head = check_optional_seq("expected_head", expected_head)
        want_generation = check_optional_seq("expected_generation", expected_generation)
        head = len(self._check_expectations(store, sid, want_head, want_generation))
        for index, event in enumerate(events):
            if not isinstance(event, EVENT_TYPES):
                raise InvalidArgumentError(
                    "events", f"item {index} is {type(event).__name__}, not a SessionEvent"
                )
            head = await super().append(sid, [event])
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
        if (
            isinstance(events, Sequence)
            and not isinstance(events, str | bytes)
            and len(events) == 0
        ):
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
        store = self._open("append")
        sid = check_session_id(session_id)
        batch = check_events(events)
        for event in batch:
            encode_event(event)
        want_head = check_optional_seq("expected_head", expected_head)
        want_generation = check_optional_seq("expected_generation", expected_generation)
        log = self._check_expectations(store, sid, want_head, want_generation)
        if not batch:
            return len(log)
        await _round_trip()
        return await super().append(sid, batch)


class AcceptsUnstorableEvents(Broken):
    """Bug: append never tries to serialise events, since this store keeps Python objects.

    A lone surrogate in a text is accepted, though no serialising backend could
    store it and the contract says it is refused. Kit must report EVENT-002.
    """

    violates = "EVENT-002"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("append")
        sid = check_session_id(session_id)
        batch = check_events(events)
        want_head = check_optional_seq("expected_head", expected_head)
        want_generation = check_optional_seq("expected_generation", expected_generation)
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


class AcceptsEventDicts(Broken):
    """Bug: append leniently converts dict items of a batch into events.

    ``[{"type": "user_prompt", "text": "x"}]`` is stored as a UserPrompt instead of
    being refused. Kit must report ARG-003.
    """

    violates = "ARG-003"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if isinstance(events, list | tuple):
            events = cast(list[SessionEvent], [_lenient(item) for item in events])
        return await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )


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
        return head - len(events) + 1 if len(events) > 1 else head


# -- read -----------------------------------------------------------------------------


class InclusiveSinceSeq(Broken):
    """Bug: read(since_seq=n) starts at seq n instead of n + 1.

    Kit must report READ-001.
    """

    violates = "READ-001"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        start = since_seq - 1 if _is_seq(since_seq) and since_seq > 0 else since_seq
        async for stored in super().read(session_id, start):
            yield stored


class ClampsNegativeSinceSeq(Broken):
    """Bug: read treats a negative since_seq as 0 instead of refusing it.

    Kit must report ARG-002.
    """

    violates = "ARG-002"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        if isinstance(since_seq, int) and not isinstance(since_seq, bool) and since_seq < 0:
            since_seq = 0
        async for stored in super().read(session_id, since_seq):
            yield stored


class LiveRead(Broken):
    """Bug: read walks the live log instead of a copy.

    An append made while a read is in progress shows up in that read, which then
    yields more events than the log had when the read began. Kit must report READ-003.
    """

    violates = "READ-003"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        store = self._open("read")
        sid = check_session_id(session_id)
        index = check_seq("since_seq", since_seq)
        log = store.logs.get(sid, [])
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

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        store = self._open("read")
        sid = check_session_id(session_id)
        offset = check_seq("since_seq", since_seq)
        while True:
            page = store.logs.get(sid, [])[offset : offset + self.page_size]
            for stored in page:
                yield stored
            if len(page) < self.page_size:
                return
            offset += len(page)


class FirstParentIsZero(Broken):
    """Bug: the first event's parent_seq comes back as 0 instead of None.

    As a NOT NULL DEFAULT 0 column would return it. Kit must report SEQ-002.
    """

    violates = "SEQ-002"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async for stored in super().read(session_id, since_seq):
            yield (
                msgspec.structs.replace(stored, parent_seq=0)
                if stored.parent_seq is None
                else stored
            )


class NaiveTimestamps(Broken):
    """Bug: ts comes back without its UTC offset, as a TIMESTAMP WITHOUT TIME ZONE column.

    Kit must report SEQ-004.
    """

    violates = "SEQ-004"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async for stored in super().read(session_id, since_seq):
            yield msgspec.structs.replace(stored, ts=stored.ts.removesuffix("+00:00"))


class DropsToolCalls(Broken):
    """Bug: an assistant message comes back without its tool_calls.

    As a row mapper that was written before tool calls existed would return it.
    Kit must report EVENT-001.
    """

    violates = "EVENT-001"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async for stored in super().read(session_id, since_seq):
            event = stored.event
            if isinstance(event, AssistantMessage) and event.tool_calls:
                stored = msgspec.structs.replace(
                    stored, event=msgspec.structs.replace(event, tool_calls=())
                )
            yield stored


class StripsText(Broken):
    """Bug: text fields come back with surrounding whitespace stripped.

    Kit must report EVENT-001.
    """

    violates = "EVENT-001"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async for stored in super().read(session_id, since_seq):
            text = getattr(stored.event, "text", None)
            if isinstance(text, str) and text != text.strip():
                event = msgspec.structs.replace(stored.event, text=text.strip())
                stored = msgspec.structs.replace(stored, event=event)
            yield stored


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

    async def list_sessions(self) -> list[SessionInfo]:
        return [SessionInfo(info.id, info.mtime * 1000) for info in await super().list_sessions()]


# -- session ids --------------------------------------------------------------------------


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

    async def list_sessions(self) -> list[SessionInfo]:
        names = _names.get(self._store, {})
        infos = [
            SessionInfo(names.get(info.id, info.id), info.mtime)
            for info in await super().list_sessions()
        ]
        infos.sort(key=lambda info: info.id)
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos


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

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("append")
        trashed = _trash.get(store, {})
        if isinstance(session_id, str) and session_id not in store.logs and session_id in trashed:
            store.logs[session_id] = trashed.pop(session_id)
            store.touch(session_id)
        return await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )


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

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await self.head(session_id)
        keep = to_seq + 1 if _is_seq(to_seq) and to_seq < head else to_seq
        await super().truncate(
            session_id, keep, expected_head, expected_generation=expected_generation
        )
        return to_seq


class TruncateClampsToHead(Broken):
    """Bug: truncate with to_seq beyond the head truncates to the head instead of refusing.

    Kit must report TRUNC-002.
    """

    violates = "TRUNC-002"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await self.head(session_id)
        target = head if _is_seq(to_seq) and to_seq > head else to_seq
        return await super().truncate(
            session_id, target, expected_head, expected_generation=expected_generation
        )


class TruncateIgnoresExpectedHead(Broken):
    """Bug: truncate validates expected_head but never compares it with the head.

    Kit must report TRUNC-003.
    """

    violates = "TRUNC-003"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        self._open("truncate")
        check_optional_seq("expected_head", expected_head)
        return await super().truncate(
            session_id, to_seq, None, expected_generation=expected_generation
        )


class PhantomSessionOnTruncate(Broken):
    """Bug: truncate makes sure the session's log exists, creating it for an unknown id.

    Truncating an unknown session to 0 leaves an empty session listed. Kit must report TRUNC-004.
    """

    violates = "TRUNC-004"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        result = await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )
        if session_id not in self._store.logs:
            self._store.logs[session_id] = []
            self._store.touch(session_id)
        return result


class TruncateToZeroDeletes(Broken):
    """Bug: truncating a session to 0 removes the session instead of leaving it listed, empty.

    Kit must report TRUNC-005.
    """

    violates = "TRUNC-005"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        result = await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )
        if result == 0 and session_id in self._store.logs:
            del self._store.logs[session_id]
            del self._store.mtimes[session_id]
        return result


class TruncateKeepsGeneration(Broken):
    """Bug: a truncate that removes events leaves the generation where it was.

    Kit must report GEN-001.
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
        before = await self.generation(session_id)
        result = await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )
        self._store.generations[session_id] = before
        return result


class IgnoresExpectedGeneration(Broken):
    """Bug: append validates expected_generation but never compares it.

    A writer that remembers the head from before a truncate-and-reappend gets
    through. Kit must report GEN-002.
    """

    violates = "GEN-002"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        self._open("append")
        check_optional_seq("expected_generation", expected_generation)
        return await super().append(session_id, events, expected_head)


# -- handles, close, integrity -----------------------------------------------------------


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


class IntegrityFlagsDeletedSessions(Broken):
    """Bug: check_integrity reports a generation with no log as an orphan.

    Every delete leaves such a generation on purpose (GEN-001), so a healthy
    store that had a session deleted is reported damaged. Kit must report INTEG-001.
    """

    violates = "INTEG-001"

    async def check_integrity(self) -> IntegrityReport:
        report = await super().check_integrity()
        orphans = tuple(
            f"session {sid!r}: generation without events"
            for sid in self._store.generations
            if sid not in self._store.logs
        )
        if not orphans:
            return report
        return IntegrityReport(
            ok=False, detail="; ".join(orphans), problems=report.problems + orphans
        )


# -- factories ---------------------------------------------------------------------------


def _shared(cls: type[Broken], ctx: BackendContext) -> Broken:
    return cls(store_for(ctx.path))


def make_ignores_expected_head(ctx: BackendContext) -> Broken:
    return _shared(IgnoresExpectedHead, ctx)


def make_conflict_reports_expected_as_actual(ctx: BackendContext) -> Broken:
    return _shared(ConflictReportsExpectedAsActual, ctx)


def make_non_atomic_batch(ctx: BackendContext) -> Broken:
    return _shared(NonAtomicBatch, ctx)


def make_empty_append_creates_session(ctx: BackendContext) -> Broken:
    return _shared(EmptyAppendCreatesSession, ctx)


def make_empty_append_skips_expected_head(ctx: BackendContext) -> Broken:
    return _shared(EmptyAppendSkipsExpectedHead, ctx)


def make_racy_expected_head(ctx: BackendContext) -> Broken:
    return _shared(RacyExpectedHead, ctx)


def make_accepts_unstorable_events(ctx: BackendContext) -> Broken:
    return _shared(AcceptsUnstorableEvents, ctx)


def make_accepts_event_dicts(ctx: BackendContext) -> Broken:
    return _shared(AcceptsEventDicts, ctx)


def make_returns_first_new_seq(ctx: BackendContext) -> Broken:
    return _shared(ReturnsFirstNewSeq, ctx)


def make_inclusive_since_seq(ctx: BackendContext) -> Broken:
    return _shared(InclusiveSinceSeq, ctx)


def make_clamps_negative_since_seq(ctx: BackendContext) -> Broken:
    return _shared(ClampsNegativeSinceSeq, ctx)


def make_live_read(ctx: BackendContext) -> Broken:
    return _shared(LiveRead, ctx)


def make_paged_read(ctx: BackendContext) -> Broken:
    return _shared(PagedRead, ctx)


def make_first_parent_is_zero(ctx: BackendContext) -> Broken:
    return _shared(FirstParentIsZero, ctx)


def make_naive_timestamps(ctx: BackendContext) -> Broken:
    return _shared(NaiveTimestamps, ctx)


def make_drops_tool_calls(ctx: BackendContext) -> Broken:
    return _shared(DropsToolCalls, ctx)


def make_strips_text(ctx: BackendContext) -> Broken:
    return _shared(StripsText, ctx)


def make_lists_oldest_first(ctx: BackendContext) -> Broken:
    return _shared(ListsOldestFirst, ctx)


def make_mtime_in_milliseconds(ctx: BackendContext) -> Broken:
    return _shared(MtimeInMilliseconds, ctx)


def make_slash_folded_ids(ctx: BackendContext) -> Broken:
    return _shared(SlashFoldedIds, ctx)


def make_case_insensitive_ids(ctx: BackendContext) -> Broken:
    return _shared(CaseInsensitiveIds, ctx)


def make_stripped_ids(ctx: BackendContext) -> Broken:
    return _shared(StrippedIds, ctx)


def make_delete_keeps_events(ctx: BackendContext) -> Broken:
    return _shared(DeleteKeepsEvents, ctx)


def make_delete_unknown_raises(ctx: BackendContext) -> Broken:
    return _shared(DeleteUnknownRaises, ctx)


def make_delete_forgets_generation(ctx: BackendContext) -> Broken:
    return _shared(DeleteForgetsGeneration, ctx)


def make_truncate_keeps_one_more(ctx: BackendContext) -> Broken:
    return _shared(TruncateKeepsOneMore, ctx)


def make_truncate_clamps_to_head(ctx: BackendContext) -> Broken:
    return _shared(TruncateClampsToHead, ctx)


def make_truncate_ignores_expected_head(ctx: BackendContext) -> Broken:
    return _shared(TruncateIgnoresExpectedHead, ctx)


def make_phantom_session_on_truncate(ctx: BackendContext) -> Broken:
    return _shared(PhantomSessionOnTruncate, ctx)


def make_truncate_to_zero_deletes(ctx: BackendContext) -> Broken:
    return _shared(TruncateToZeroDeletes, ctx)


def make_truncate_keeps_generation(ctx: BackendContext) -> Broken:
    return _shared(TruncateKeepsGeneration, ctx)


def make_ignores_expected_generation(ctx: BackendContext) -> Broken:
    return _shared(IgnoresExpectedGeneration, ctx)


def make_closed_handle_works(ctx: BackendContext) -> Broken:
    return _shared(ClosedHandleWorks, ctx)


def make_close_shuts_the_store(ctx: BackendContext) -> Broken:
    return _shared(CloseShutsTheStore, ctx)


def make_store_per_handle(ctx: BackendContext) -> Broken:
    return StorePerHandle()


def make_integrity_flags_deleted_sessions(ctx: BackendContext) -> Broken:
    return _shared(IntegrityFlagsDeletedSessions, ctx)


BROKEN: dict[str, type[Broken]] = {
    "ignores_expected_head": IgnoresExpectedHead,
    "conflict_reports_expected_as_actual": ConflictReportsExpectedAsActual,
    "non_atomic_batch": NonAtomicBatch,
    "empty_append_creates_session": EmptyAppendCreatesSession,
    "empty_append_skips_expected_head": EmptyAppendSkipsExpectedHead,
    "racy_expected_head": RacyExpectedHead,
    "accepts_unstorable_events": AcceptsUnstorableEvents,
    "accepts_event_dicts": AcceptsEventDicts,
    "returns_first_new_seq": ReturnsFirstNewSeq,
    "inclusive_since_seq": InclusiveSinceSeq,
    "clamps_negative_since_seq": ClampsNegativeSinceSeq,
    "live_read": LiveRead,
    "paged_read": PagedRead,
    "first_parent_is_zero": FirstParentIsZero,
    "naive_timestamps": NaiveTimestamps,
    "drops_tool_calls": DropsToolCalls,
    "strips_text": StripsText,
    "lists_oldest_first": ListsOldestFirst,
    "mtime_in_milliseconds": MtimeInMilliseconds,
    "slash_folded_ids": SlashFoldedIds,
    "case_insensitive_ids": CaseInsensitiveIds,
    "stripped_ids": StrippedIds,
    "delete_keeps_events": DeleteKeepsEvents,
    "delete_unknown_raises": DeleteUnknownRaises,
    "delete_forgets_generation": DeleteForgetsGeneration,
    "truncate_keeps_one_more": TruncateKeepsOneMore,
    "truncate_clamps_to_head": TruncateClampsToHead,
    "truncate_ignores_expected_head": TruncateIgnoresExpectedHead,
    "phantom_session_on_truncate": PhantomSessionOnTruncate,
    "truncate_to_zero_deletes": TruncateToZeroDeletes,
    "truncate_keeps_generation": TruncateKeepsGeneration,
    "ignores_expected_generation": IgnoresExpectedGeneration,
    "closed_handle_works": ClosedHandleWorks,
    "close_shuts_the_store": CloseShutsTheStore,
    "store_per_handle": StorePerHandle,
    "integrity_flags_deleted_sessions": IntegrityFlagsDeletedSessions,
}
"""Every broken backend by name; its factory is ``broken_backends:make_<name>``."""
