"""The SQLite reference backend: one database file per store, shared by processes.

Capabilities: DELETE, LIST, TRUNCATE, MULTI_PROCESS, CODEC, GENERATION and
MAINTENANCE, and DURABLE only with ``synchronous=FULL`` (the default) or
``EXTRA``. The store is ``ctx.path / "checkpoints.db"``; `SqliteCheckpointer`
also opens any other file, or ``":memory:"`` for tests.

*Why not DURABLE below FULL.* DURABLE promises that an acknowledged write
survives a power loss (DUR-003), not only a killed process. In WAL mode,
``synchronous=NORMAL`` fsyncs the WAL only at checkpoints, so SQLite's own
documentation says a committed transaction "might roll back following a power
loss or system crash" (the database stays consistent, but the commit is gone);
``synchronous=OFF`` never fsyncs, and a power loss may even corrupt the
database. Both keep acknowledged writes across a process kill, but a handle
opened with either does not declare DURABLE, as the file backend does not in its
``process`` mode.

Concurrency design
------------------
*WAL, one writer at a time.* The database runs in ``journal_mode=WAL``: readers
never block the writer and see the last committed state, and SQLite admits one
writer at a time across all processes on the host. ``synchronous=FULL`` (the
default) fsyncs the WAL on every commit, so an acknowledged write survives a
process kill and a power loss.

*BEGIN IMMEDIATE.* Every write transaction takes the write lock up front. A
competing writer waits in SQLite's busy handler (``busy_timeout``) and then
reads a fresh head inside its own transaction, so ``expected_head`` and
``expected_generation`` are checked against the state it is about to change and
a stale writer gets a clean `CheckpointConflictError`. A deferred transaction
that upgrades from read to write could instead fail with SQLITE_BUSY_SNAPSHOT,
which no timeout fixes. A lock held past the timeout is `StoreBusyError`, never
a made-up conflict.

*Group commit.* An fsync per transaction caps one writer at a few thousand
commits a second. The writes of one handle (append, truncate, delete) run in
rounds, one transaction and one commit each, through the queue the database
backends share (`checkpointspec.backends.group_commit`). A write that finds
the handle idle runs its own round at once, from its own task: a lone writer
pays nothing for grouping. Writes issued while a round is in flight queue up;
when the round ends, a task of the queue runs everything queued (up to 1000)
as the next round. Under load, many tasks thus share each fsync. Each request
keeps its own checks and result: conflicts are found before a request writes
anything, so a conflicting request is simply skipped; a request that fails
part-way with an SQLite error rolls the transaction back, and the round is
redone without it (`checkpointspec.backends.sqlite.worker.run_round`).

*One thread hop per operation.* aiosqlite runs a worker thread per connection
and hands each call to it through a queue; awaiting every statement separately
costs a hop (tens of microseconds) each, and several hops per append cost
2.5-4x. Here every operation is one synchronous function run on the worker
thread as a whole (`_call`): a write round, a read snapshot, a head lookup each
cost one hop. Codec calls and event encoding/decoding run on the event loop
thread, so a codec is never called from two threads.

*Reads.* ``read`` fetches the session's rows and its head in one read
transaction, a consistent snapshot (READ-003), and decodes them as it yields.
A whole read is held in memory as stored bytes; see `SqliteCheckpointer.read`.

*Maintenance.* A handle holds a session with a row of the ``maintenance``
table and the flock of a lock file beside the database
(``checkpoints.db.locks/``), both taken in one write transaction; writers read
the row in the statement that reads the head, inside their own transaction, and
tell a dead holder's row by its free flock.
`checkpointspec.backends.sqlite.maintenance` explains it.

Schema and integrity
--------------------
``PRAGMA user_version`` marks the schema version. `MIGRATIONS` lists the steps
from each version to the next (version 0 is an empty database); an older
database is migrated in one transaction, a newer one is refused with
`SchemaVersionError` before SQLite even opens it. Each event row carries a
CRC-32 of its stored payload, so a damaged payload raises `CorruptStoreError`
instead of decoding into a wrong event; `SqliteCheckpointer.check_integrity`
runs ``PRAGMA quick_check`` and the contract's own checks.

For the conformance kit the class also offers `StoreHooks` and
`FaultInjectable`. Power-loss simulation (DUR-003) is not offered: SQLite does its
own file I/O, which the stdlib sqlite3 module cannot route through a simulated
disk; durability rests on SQLite's WAL with ``synchronous=FULL``.

Modules: this one holds the handle (event loop side: validation, codec, group
commit, decoding); `checkpointspec.backends.sqlite.worker` what runs on the
worker thread; `checkpointspec.backends.sqlite.schema` the database layout,
migrations, integrity checks and the out-of-band hooks.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Final, TypeVar, cast

import aiosqlite

from ...spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    CheckpointError,
    Codec,
    FaultHook,
    IntegrityReport,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    check_append_arguments,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    encode_event,
)
from ..capabilities import store_capabilities
from ..group_commit import GroupCommitQueue, GroupCommitStats
from ..payloads import Row, open_rows, seal_payloads, stored_events
from . import maintenance, schema, worker
from .maintenance import Holder
from .schema import DATABASE_NAME, MIGRATIONS, SCHEMA_VERSION
from .worker import FAULT_POINTS, Append, Delete, Truncate, Write, call

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "FAULT_POINTS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "GroupCommitStats",
    "SqliteCheckpointer",
    "make",
]

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long a writer waits for another writer's lock before `StoreBusyError`."""

_SYNCHRONOUS: Final = {
    **{level: level for level in ("OFF", "NORMAL", "FULL", "EXTRA")},
    **{"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"},
}
_OPTIONS: Final = ("synchronous", "busy_timeout")
# Requests per group-commit transaction: bounds how long one round holds the lock.
_MAX_ROUND: Final = 1000
_SCAN_PAGE: Final = 4096  # rows per hop when check_integrity scans payloads
_MAX_PROBLEMS: Final = 100

_T = TypeVar("_T")


class SqliteCheckpointer:
    """A conforming checkpointer on one SQLite database file.

    ``SqliteCheckpointer(database)`` makes an unopened handle; it opens on
    ``await handle.open()``, on ``async with``, or lazily on its first operation.
    ``database`` is a file path or ``":memory:"`` (a private store for tests: no
    durability, no other handles). ``codec`` transforms every stored payload;
    ``synchronous`` is SQLite's setting (FULL: every commit is fsynced; NORMAL
    and OFF keep acknowledged writes across a process kill but not a power loss,
    so with them the handle does not declare DURABLE);
    ``busy_timeout_ms`` is how long a write waits for another writer's lock
    before raising `StoreBusyError`.

    Also implements `StoreHooks` (out-of-band damage and schema marking) and
    `FaultInjectable` (named points inside writes) for the conformance kit.
    """

    capabilities: frozenset[Capability] = store_capabilities(durable=True, shared=True)
    """The declared set of a database file with ``synchronous=FULL`` (the default); a
    handle's own says its settings'."""

    def __init__(
        self,
        database: str | os.PathLike[str],
        *,
        codec: Codec | None = None,
        synchronous: str = "FULL",
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> None:
        level = _SYNCHRONOUS.get(str(synchronous).upper())
        if level is None:
            raise InvalidArgumentError(
                "synchronous",
                f"{synchronous!r} is not one of OFF, NORMAL, FULL, EXTRA",
                ReasonCode.BAD_OPTION,
            )
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise InvalidArgumentError(
                "busy_timeout_ms", "must be an int (milliseconds)", ReasonCode.BAD_OPTION
            )
        if busy_timeout_ms < 0:
            raise InvalidArgumentError(
                "busy_timeout_ms", "must not be negative", ReasonCode.BAD_OPTION
            )
        self._database = database if database == ":memory:" else Path(database)
        self._where = str(database)
        self._codec = codec
        self._synchronous = level
        # A private database in this process: nothing survives close, no other handle sees
        # it. Below FULL a commit may roll back after a power loss: see "Why not DURABLE
        # below FULL".
        in_memory = database == ":memory:"
        self.capabilities = store_capabilities(
            durable=not in_memory and level in ("FULL", "EXTRA"), shared=not in_memory
        )
        self._busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        # One connection, so one round at a time; a lone writer runs its round itself.
        self._writes: GroupCommitQueue[Write, int | None] = GroupCommitQueue(
            self._run_round, max_group=_MAX_ROUND, caller_runs_when_idle=True
        )
        self._fault_hook: FaultHook | None = None
        self._holder = Holder(self._database if isinstance(self._database, Path) else None)

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> SqliteCheckpointer:
        """Open the database now (idempotent); returns the handle.

        Raises `SchemaVersionError` for a store written by a newer schema, leaving
        it byte-identical; migrates an older one in one transaction.
        """
        await self._connection("open")
        return self

    async def __aenter__(self) -> SqliteCheckpointer:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _connection(self, operation: str) -> aiosqlite.Connection:
        db = self._db
        if db is None:
            async with self._open_lock:
                if self._db is None and not self._closed:
                    self._db = await self._connect()
            db = self._db
        if self._closed or db is None:
            raise CheckpointerClosedError(operation)
        return db

    async def _connect(self) -> aiosqlite.Connection:
        if isinstance(self._database, Path):
            found = schema.header_user_version(self._database)
            if found is not None and found > SCHEMA_VERSION:
                raise SchemaVersionError(found, SCHEMA_VERSION)
        db = await worker.connect(self._database)
        started = time.monotonic()
        try:
            await call(
                db,
                partial(
                    schema.open_store,
                    synchronous=self._synchronous,
                    busy_timeout_ms=self._busy_timeout_ms,
                    where=self._where,
                ),
            )
        except BaseException as exc:
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise worker.translate(exc, "open", started, self._where) from exc
            raise
        return db

    async def close(self) -> None:
        """Finish the writes already queued, then release the connection.

        Idempotent; every later operation raises `CheckpointerClosedError`. Other
        handles on the same store are unaffected.
        """
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._closing)

    async def _shutdown(self) -> None:
        async with self._open_lock:  # an open in progress completes first
            pass
        await self._writes.drained()  # writes accepted before close still complete
        db, self._db = self._db, None
        if db is not None:
            try:
                if self._holder.held:
                    await call(db, partial(maintenance.release_all, holder=self._holder))
            finally:
                await db.close()

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise CheckpointerClosedError(operation)

    @property
    def group_commit_stats(self) -> GroupCommitStats:
        """How many write rounds this handle ran, for how many write requests."""
        return self._writes.stats

    async def _query(
        self, operation: str, fn: Callable[[sqlite3.Connection], _T], session_id: str | None = None
    ) -> _T:
        """Run a read-only ``fn`` on the worker thread, translating SQLite errors."""
        db = self._db
        if db is None or self._closed:
            db = await self._connection(operation)
        started = time.monotonic()
        try:
            return await call(db, fn)
        except sqlite3.Error as exc:
            err = worker.translate(exc, operation, started, self._where, session_id)
            if err is exc:
                raise
            raise err from exc

    # -- group commit ---------------------------------------------------------------

    async def _write(self, operation: str, write: Write) -> int | None:
        """Run ``write`` in the next round of the handle's group commit; its result."""
        if self._db is None or self._closed:
            await self._connection(operation)
        return await self._writes.submit(write)

    def _run_round(self, writes: list[Write]) -> Awaitable[list[worker.WriteOutcome]]:
        """One round: ``writes`` in one transaction on the worker thread (one hop)."""
        db = self._db
        assert db is not None  # opened by `_write`; close waits for the rounds to end
        return call(
            db,
            partial(
                worker.run_round,
                writes=writes,
                where=self._where,
                hook=self._fault_hook,
                holder=self._holder,
            ),
        )

    # -- payloads -------------------------------------------------------------------

    def _encode(self, session_id: str, payloads: list[bytes]) -> list[bytes]:
        return seal_payloads(session_id, payloads, self._codec)

    def _decode(self, session_id: str, rows: Sequence[Row], first_seq: int) -> list[StoredEvent]:
        return open_rows(session_id, rows, first_seq, self._codec)

    # -- the contract ---------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Append ``events`` atomically and return the new head (see `Checkpointer.append`).

        Arguments are checked before the store is touched; a failing codec raises
        `CodecError` and writes nothing; a stale ``expected_head`` or
        ``expected_generation`` raises `CheckpointConflictError`; a lock held by
        another writer past the busy timeout raises `StoreBusyError`. Concurrent
        appends on one handle share a transaction (group commit).
        """
        self._check_open("append")
        sid, batch, want_head, want_generation = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        payloads = [encode_event(event) for event in batch]  # EVENT-002 before the store
        if not batch:
            check = partial(
                worker.read_expectations,
                session_id=sid,
                expected_head=want_head,
                expected_generation=want_generation,
                holder=self._holder,
            )
            found = await self._query("append", check, sid)
            if found is not None:
                return found
        payloads = self._encode(sid, payloads)
        head = await self._write("append", Append(sid, payloads, want_head, want_generation))
        return cast(int, head)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        """Yield the events with seq > ``since_seq`` from one snapshot of the log.

        The rows are fetched in one read transaction (one thread hop) and decoded
        as they are yielded. A payload whose checksum does not match, or that is
        not a valid event, raises `CorruptStoreError`; a codec failure raises
        `CodecError`. Nothing is skipped or rewritten. The snapshot's stored bytes
        are held in memory until the iteration ends.
        """
        self._check_open("read")
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        head, rows = await self._query(
            "read", partial(worker.read_log, session_id=sid, since_seq=since), sid
        )
        for stored in stored_events(sid, head, since, rows, self._codec):
            yield stored

    async def head(self, session_id: str) -> int:
        """The seq of the session's last event; 0 if it has none or is unknown."""
        self._check_open("head")
        sid = check_session_id(session_id)
        sql = "SELECT head FROM sessions WHERE session_id = ?"
        return await self._query("head", partial(worker.read_one, sql=sql, session_id=sid), sid)

    async def generation(self, session_id: str) -> int:
        """The session id's generation: 0, then one more per delete or shortening truncate."""
        self._check_open("generation")
        sid = check_session_id(session_id)
        sql = "SELECT generation FROM generations WHERE session_id = ?"
        return await self._query(
            "generation", partial(worker.read_one, sql=sql, session_id=sid), sid
        )

    async def list_sessions(self) -> list[SessionInfo]:
        """Every existing session, most recently modified first; ties by id ascending."""
        self._check_open("list_sessions")
        return await self._query("list_sessions", worker.list_sessions)

    async def delete(self, session_id: str) -> None:
        """Remove a session and its events in one transaction; unknown ids do nothing."""
        self._check_open("delete")
        sid = check_session_id(session_id)
        await self._write("delete", Delete(sid))

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Keep events ``1..to_seq`` and return ``to_seq``, in one transaction.

        ``to_seq`` beyond the head raises `InvalidArgumentError`; truncating to the
        head changes nothing (not even mtime); truncating to 0 keeps the session
        listed, empty; an unknown session is not created.
        """
        self._check_open("truncate")
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        result = await self._write("truncate", Truncate(sid, target, want_head, want_generation))
        return cast(int, result)

    async def check_integrity(self) -> IntegrityReport:
        """Run ``PRAGMA quick_check`` and the contract's checks; change nothing.

        Checked: SQLite's page structure, the schema version, that each session's
        events are exactly seqs ``1..head``, that no event lacks its session, that
        no mtime is ahead of the store clock, and that every payload matches its
        checksum and decodes (through the codec) into an event. Problems are
        reported, never raised or repaired.
        """
        self._check_open("check_integrity")
        problems, sessions, events = await self._query("check_integrity", schema.structure_problems)
        problems += await self._payload_problems(await self._connection("check_integrity"))
        shown = problems[:_MAX_PROBLEMS]
        if len(problems) > _MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - _MAX_PROBLEMS} more problems")
        if problems:
            detail = f"{len(problems)} problems in {self._where}; first: {problems[0]}"
        else:
            detail = f"{self._where}: quick_check ok, {sessions} sessions, {events} events checked"
        return IntegrityReport(ok=not problems, detail=detail, problems=tuple(shown))

    async def _payload_problems(self, db: aiosqlite.Connection) -> list[str]:
        # Paged, so a large store is never held in memory at once; each row is checked
        # on its own, so pages taken at different moments cannot report false problems.
        problems: list[str] = []
        after = ("", 0)
        while True:
            try:
                page = await call(db, partial(schema.payload_page, after=after, limit=_SCAN_PAGE))
            except sqlite3.DatabaseError as exc:
                if not schema.is_damage(exc):
                    raise
                problems.append(f"payload scan stopped after {after}: {exc}")
                return problems
            for sid, seq, crc, payload in page:
                try:
                    self._decode(sid, [(seq, "", crc, payload)], seq)
                except CheckpointError as err:
                    problems.append(str(err))
            if len(page) < _SCAN_PAGE:
                return problems
            after = (page[-1][0], page[-1][1])

    # -- maintenance ------------------------------------------------------------------

    async def acquire_maintenance(self, session_id: str) -> None:
        """Hold ``session_id``: only this handle may write to it until it releases it or closes.

        The session need not exist. Raises `SessionLockedError` when any handle, in
        any process, this one included, holds it; clears the lock of a holder
        whose process died. A busy store past the timeout is `StoreBusyError`.
        """
        self._check_open("acquire_maintenance")
        sid = check_session_id(session_id)
        await self._maintenance(
            "acquire_maintenance",
            partial(maintenance.acquire, holder=self._holder, session_id=sid),
            sid,
        )

    async def release_maintenance(self, session_id: str) -> None:
        """Give ``session_id`` back to every writer. Does nothing unless this handle holds it."""
        self._check_open("release_maintenance")
        sid = check_session_id(session_id)
        if sid not in self._holder.held:
            return
        await self._maintenance(
            "release_maintenance",
            partial(maintenance.release, holder=self._holder, session_id=sid),
            sid,
        )

    async def _maintenance(
        self, operation: str, fn: Callable[[sqlite3.Connection], None], session_id: str
    ) -> None:
        """Run a maintenance transaction on the worker thread, translating SQLite errors."""
        db = self._db
        if db is None or self._closed:
            db = await self._connection(operation)
        started = time.monotonic()
        try:
            await call(db, fn)
        except sqlite3.Error as exc:
            err = worker.translate(exc, operation, started, self._where, session_id)
            if err is exc:
                raise
            raise err from exc

    # -- FaultInjectable -------------------------------------------------------------

    @property
    def fault_points(self) -> tuple[str, ...]:
        """The points inside writes where an installed fault hook is called.

        ``*.locked``: the write lock is held and nothing of this request is
        written; ``append.events_written``: the events rows are in, the session
        row not yet; ``*.before_commit``: everything is written, not committed.
        """
        return FAULT_POINTS

    def set_fault_hook(self, hook: FaultHook | None) -> None:
        """Call ``hook(point)`` at each fault point, on the worker thread; None removes it.

        The write carries on when the hook returns; while it blocks, the write
        lock stays held, as it would in a stalled or dying process.
        """
        self._fault_hook = hook

    # -- ScratchFiles ---------------------------------------------------------------

    def scratch_files(self) -> dict[str, str]:
        """The WAL index, which SQLite maps shared and writable and never relies on after a crash."""
        return {
            "*-shm": "SQLite's WAL index: shared memory that the first connection after a "
            "crash rebuilds from the WAL (https://sqlite.org/walformat.html#the_wal_index_file)",
        }

    # -- StoreHooks -----------------------------------------------------------------

    def mark_newer_schema(self, path: Path) -> None:
        """Set ``user_version`` of the closed store at ``path`` to `SCHEMA_VERSION` + 1.

        ``path`` is the store's directory (``ctx.path``). The next open refuses it
        with `SchemaVersionError` and leaves it byte-identical.
        """
        schema.mark_newer_schema(path)

    def damage_store(self, path: Path) -> str:
        """Flip one bit inside a stored payload of the closed store at ``path``; say which.

        The event's checksum no longer matches: `check_integrity` reports it and a
        read of that session raises `CorruptStoreError`.
        """
        return schema.damage_store(path)


# -- factory --------------------------------------------------------------------------


def _parse_options(options: Mapping[str, str]) -> tuple[str, int]:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InvalidArgumentError(
            "options", f"unknown {unknown}; known: {list(_OPTIONS)}", ReasonCode.UNKNOWN_OPTION
        )
    synchronous = options.get("synchronous", "FULL")
    raw_timeout = options.get("busy_timeout", str(DEFAULT_BUSY_TIMEOUT_MS))
    try:
        busy_timeout = int(raw_timeout)
    except ValueError:
        raise InvalidArgumentError(
            "options", f"busy_timeout={raw_timeout!r} is not an int", ReasonCode.BAD_OPTION
        ) from None
    return synchronous, busy_timeout


async def make(ctx: BackendContext) -> SqliteCheckpointer:
    """Factory for the kit: open ``ctx.path / "checkpoints.db"``, creating it if needed.

    ``ctx.codec`` is applied to every payload. ``ctx.options`` may set
    ``synchronous`` (OFF, NORMAL, FULL, EXTRA; default FULL) and ``busy_timeout``
    (milliseconds; default 5000). Raises `SchemaVersionError` for a newer store.
    """
    synchronous, busy_timeout = _parse_options(ctx.options)
    handle = SqliteCheckpointer(
        Path(ctx.path) / DATABASE_NAME,
        codec=ctx.codec,
        synchronous=synchronous,
        busy_timeout_ms=busy_timeout,
    )
    return await handle.open()
