"""The SQLite reference backend: one database file per store, shared by processes.

Capabilities: TRUNCATE, DURABLE, MULTI_PROCESS, CODEC and GENERATION. The store
is ``ctx.path / "checkpoints.db"``; `SqliteCheckpointer` also opens any other
file, or ``":memory:"`` for tests.

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
rounds, one transaction and one commit each. A write that finds the handle idle
runs its own round at once, from its own task: a lone writer pays nothing for
grouping. Writes issued while a round is in flight queue up; when the round
ends, a flush task runs everything queued as the next round. Under load, many
tasks thus share each fsync. Each request keeps its own checks and result:
conflicts are found before a request writes anything, so a conflicting request
is simply skipped; a request that fails part-way with an SQLite error rolls the
transaction back, and the round is redone without it.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Final, TypeAlias, TypeVar, cast

import aiosqlite
import msgspec

from ..spec import (
    BackendContext,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    Codec,
    CodecError,
    CorruptStoreError,
    FaultHook,
    IntegrityReport,
    InvalidArgumentError,
    SchemaVersionError,
    SessionEvent,
    SessionInfo,
    StoreBusyError,
    StoredEvent,
    check_events,
    check_optional_seq,
    check_seq,
    check_session_id,
    decode_event,
    encode_event,
)

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

DATABASE_NAME: Final = "checkpoints.db"
"""The file `make` opens inside ``ctx.path``."""

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long a writer waits for another writer's lock before `StoreBusyError`."""

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 0 -> 1: the first schema. Version 0 is an empty database.
    (
        # One row per existing session. head is the seq of its last event (0 after
        # truncate to 0); mtime is seconds since the epoch of its last change.
        """CREATE TABLE sessions (
            session_id TEXT NOT NULL PRIMARY KEY,
            head INTEGER NOT NULL CHECK (head >= 0),
            mtime REAL NOT NULL
        ) WITHOUT ROWID""",
        # A rowid table: payloads can be large, which WITHOUT ROWID b-trees handle badly.
        # crc is CRC-32 of payload exactly as stored (after the codec).
        """CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL CHECK (seq >= 1),
            ts TEXT NOT NULL,
            crc INTEGER NOT NULL,
            payload BLOB NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        # Outlives its session on purpose: a re-created session must not restart at a
        # generation a stale writer may remember (GEN-001). No row means generation 0.
        """CREATE TABLE generations (
            session_id TEXT NOT NULL PRIMARY KEY,
            generation INTEGER NOT NULL CHECK (generation >= 0)
        ) WITHOUT ROWID""",
        # The largest mtime ever handed out, so mtimes never go back even when the wall
        # clock does or the session holding the maximum is deleted (LIST-003).
        """CREATE TABLE clock (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_mtime REAL NOT NULL
        )""",
        "INSERT INTO clock (id, last_mtime) VALUES (1, 0.0)",
    ),
)
"""``MIGRATIONS[v]`` holds the statements that turn schema version v into v + 1."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The ``PRAGMA user_version`` this module writes; newer stores are refused."""

_SYNCHRONOUS: Final = {"OFF": "OFF", "NORMAL": "NORMAL", "FULL": "FULL", "EXTRA": "EXTRA"}
_SYNCHRONOUS.update({"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"})
_OPTIONS: Final = ("synchronous", "busy_timeout")
# Requests per group-commit transaction: bounds how long one round holds the lock.
_MAX_ROUND: Final = 1000
_DECODE_CHUNK: Final = 2048  # rows decoded per GC pause in read
_SCAN_PAGE: Final = 4096  # rows per hop when check_integrity scans payloads
_MAX_PROBLEMS: Final = 100

_HEAD_AND_GENERATION: Final = (
    "SELECT (SELECT head FROM sessions WHERE session_id = ?1),"
    " (SELECT generation FROM generations WHERE session_id = ?1)"
)
_INSERT_EVENT: Final = (
    "INSERT INTO events (session_id, seq, ts, crc, payload) VALUES (?, ?, ?, ?, ?)"
)
_ADVANCE_CLOCK: Final = "UPDATE clock SET last_mtime = max(last_mtime, ?)"
_UPSERT_SESSION: Final = (
    "INSERT INTO sessions (session_id, head, mtime) VALUES (?, ?, (SELECT last_mtime FROM clock))"
    " ON CONFLICT (session_id) DO UPDATE SET head = excluded.head, mtime = excluded.mtime"
)
_BUMP_GENERATION: Final = (
    "INSERT INTO generations (session_id, generation) VALUES (?, 1)"
    " ON CONFLICT (session_id) DO UPDATE SET generation = generation + 1"
)

FAULT_POINTS: Final = (
    "append.locked",
    "append.events_written",
    "append.before_commit",
    "truncate.locked",
    "truncate.before_commit",
    "delete.locked",
    "delete.before_commit",
)
"""The fault points `SqliteCheckpointer` reports (see `SqliteCheckpointer.fault_points`)."""

_T = TypeVar("_T")
_Row: TypeAlias = tuple[int, str, int, bytes]
"""An events row as read: seq, ts, crc, payload."""
_Outcome: TypeAlias = "int | Exception | None"
"""What one write request ends with: its result, or the error to raise."""


# -- the aiosqlite boundary: the only code that touches aiosqlite's internals -----------


async def _connect(database: str | Path) -> aiosqlite.Connection:
    """Open an aiosqlite connection whose worker thread is a daemon thread.

    aiosqlite starts a non-daemon thread, so a handle never closed would keep the
    interpreter from exiting. A daemon worker stopped at exit is no worse than a
    process kill, which WAL makes safe: nothing acknowledged is lost and nothing
    partial becomes visible. ``isolation_level=None``: the sqlite3 module issues
    no implicit BEGIN; every transaction here is explicit.
    """
    db = aiosqlite.connect(database, isolation_level=None)
    thread = getattr(db, "_thread", None)  # not started until awaited
    if isinstance(thread, threading.Thread):
        thread.daemon = True
    return await db


async def _call(db: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], _T]) -> _T:
    """Run ``fn(conn)`` on the connection's worker thread: one hop for a whole operation.

    aiosqlite (0.22) offers no public way to run a callable on its worker thread,
    only one hop per statement. ``Connection._execute`` queues a callable there and
    ``Connection._conn`` is the sqlite3 connection that thread owns. Only this
    function and `_connect` touch aiosqlite internals, so an upgrade breaks here.
    """
    execute = cast(Callable[..., Awaitable[object]], db._execute)
    return cast(_T, await execute(fn, db._conn))


# -- errors ---------------------------------------------------------------------------


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _translate(
    exc: sqlite3.Error, operation: str, started: float, where: str, session_id: str | None = None
) -> Exception:
    """The contract's error for an SQLite error, or the SQLite error itself.

    Busy and locked become `StoreBusyError`, damage (corrupt, not a database,
    constraint) `CorruptStoreError`. Anything else (disk full, I/O error) has no
    contract error and propagates as the `sqlite3.Error` it is.
    """
    code = _primary_code(exc)
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreBusyError(operation, time.monotonic() - started)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CONSTRAINT):
        return CorruptStoreError(session_id, where, str(exc))
    return exc


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while bulk rows or events are built.

    Those objects form no cycles; the collector would only rescan them again and
    again (1.4-2x slower on large reads). Counted, because the worker thread and
    the event loop thread may pause it at the same time.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _rollback(conn: sqlite3.Connection) -> None:
    """End a transaction without keeping anything: after an error, or to end a read.

    SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR ...),
    hence the check. Reads end with ROLLBACK rather than COMMIT: there is nothing
    to keep, and COMMIT can fail on a damaged file where ROLLBACK does not.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _check_expectations(
    session_id: str,
    head: int,
    generation: int,
    expected_head: int | None,
    expected_generation: int | None,
) -> None:
    # The generation first, as the model does: a stale writer learns the log was
    # rewritten rather than that its head merely moved.
    if expected_generation is not None and expected_generation != generation:
        raise CheckpointConflictError(session_id, expected_generation, generation, "generation")
    if expected_head is not None and expected_head != head:
        raise CheckpointConflictError(session_id, expected_head, head)


# -- opening and migrating ------------------------------------------------------------


def _header_user_version(path: Path) -> int | None:
    """``user_version`` from the database header (bytes 60..63), or None if unreadable.

    Reading the header directly lets a newer store be refused without SQLite
    opening it at all: no -wal or -shm file is created, nothing is touched.
    """
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except FileNotFoundError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    return int.from_bytes(header[60:64], "big", signed=True)


def _open_store(
    conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int, where: str
) -> None:
    """Configure a fresh connection and bring the schema to `SCHEMA_VERSION`.

    Nothing is written before the version is known to be ours or older, and a
    version-0 database that already holds tables is refused untouched.
    """
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    if found == 0:
        foreign = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
        if foreign:
            raise CorruptStoreError(
                None, where, f"schema version 0 but already holds {foreign}: not a checkpoint store"
            )
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if found < SCHEMA_VERSION:
        _migrate(conn)


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply the missing `MIGRATIONS` steps in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have migrated meanwhile.
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(found, SCHEMA_VERSION)
        for step in MIGRATIONS[found:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


# -- write requests, run together in one transaction -----------------------------------


class _RoundState:
    """What the writes of one round share: the round's ts and the fault hook."""

    __slots__ = ("hook", "ts")

    def __init__(self, hook: FaultHook | None) -> None:
        self.hook = hook
        self.ts = ""

    def stamp(self, conn: sqlite3.Connection) -> str:
        """Advance the store clock (once per round) and return the round's ts.

        mtime is ``max(now, the store clock)``: written to the clock row here and
        read back by the statements that set a session's mtime.
        """
        if not self.ts:
            now = time.time()
            if conn.execute(_ADVANCE_CLOCK, (now,)).rowcount != 1:
                raise CorruptStoreError(None, "clock", "the clock row is missing")
            self.ts = datetime.fromtimestamp(now, UTC).isoformat()
        return self.ts

    def reached(self, point: str) -> None:
        if self.hook is not None:
            self.hook(point)


class _Append:
    """Append pre-encoded payloads. Checks before it writes, so a conflict writes nothing."""

    __slots__ = ("expected_generation", "expected_head", "payloads", "session_id")
    operation = "append"

    def __init__(
        self,
        session_id: str,
        payloads: list[bytes],
        expected_head: int | None,
        expected_generation: int | None,
    ) -> None:
        self.session_id = session_id
        self.payloads = payloads
        self.expected_head = expected_head
        self.expected_generation = expected_generation

    def apply(self, conn: sqlite3.Connection, state: _RoundState) -> int:
        sid = self.session_id
        state.reached("append.locked")
        head, generation = conn.execute(_HEAD_AND_GENERATION, (sid,)).fetchone()
        head = head or 0
        _check_expectations(
            sid, head, generation or 0, self.expected_head, self.expected_generation
        )
        ts = state.stamp(conn)
        payloads = self.payloads
        if len(payloads) == 1:  # the common case, without executemany's overhead
            conn.execute(_INSERT_EVENT, (sid, head + 1, ts, zlib.crc32(payloads[0]), payloads[0]))
        else:
            conn.executemany(
                _INSERT_EVENT,
                [
                    (sid, seq, ts, zlib.crc32(payload), payload)
                    for seq, payload in enumerate(payloads, head + 1)
                ],
            )
        state.reached("append.events_written")
        head += len(payloads)
        conn.execute(_UPSERT_SESSION, (sid, head))
        return head


class _Truncate:
    """Cut a log back to ``to_seq``; a no-op (no write, mtime kept) when nothing is removed."""

    __slots__ = ("expected_generation", "expected_head", "session_id", "to_seq")
    operation = "truncate"

    def __init__(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None,
        expected_generation: int | None,
    ) -> None:
        self.session_id = session_id
        self.to_seq = to_seq
        self.expected_head = expected_head
        self.expected_generation = expected_generation

    def apply(self, conn: sqlite3.Connection, state: _RoundState) -> int:
        sid, target = self.session_id, self.to_seq
        state.reached("truncate.locked")
        head, generation = conn.execute(_HEAD_AND_GENERATION, (sid,)).fetchone()
        head = head or 0
        _check_expectations(
            sid, head, generation or 0, self.expected_head, self.expected_generation
        )
        if target > head:
            raise InvalidArgumentError(
                "to_seq", f"{target} is beyond the head {head} of session {sid!r}"
            )
        if target < head:
            # target < head implies the session exists: an unknown one has head 0, so
            # no phantom session is ever created (TRUNC-004).
            state.stamp(conn)
            conn.execute("DELETE FROM events WHERE session_id = ? AND seq > ?", (sid, target))
            conn.execute(
                "UPDATE sessions SET head = ?, mtime = (SELECT last_mtime FROM clock)"
                " WHERE session_id = ?",
                (target, sid),
            )
            conn.execute(_BUMP_GENERATION, (sid,))
        return target


class _Delete:
    """Remove a session and its events; bump its generation if it existed."""

    __slots__ = ("session_id",)
    operation = "delete"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def apply(self, conn: sqlite3.Connection, state: _RoundState) -> None:
        sid = self.session_id
        state.reached("delete.locked")
        if conn.execute("DELETE FROM sessions WHERE session_id = ?", (sid,)).rowcount:
            conn.execute("DELETE FROM events WHERE session_id = ?", (sid,))
            conn.execute(_BUMP_GENERATION, (sid,))


_Write: TypeAlias = _Append | _Truncate | _Delete


def _run_round(
    conn: sqlite3.Connection, writes: Sequence[_Write], where: str, hook: FaultHook | None
) -> list[_Outcome]:
    """Run every write in one transaction and commit once; one outcome per write.

    Runs on the worker thread. Requests see each other's effects in order, so of
    two appends with the same ``expected_head`` the second conflicts. A
    `CheckpointError` from a request is raised before it writes anything, so it
    is just that request's outcome. An SQLite error inside a request rolls the
    whole transaction back; that request fails and the rest run again.
    """
    outcomes: list[_Outcome] = [None] * len(writes)
    remaining = list(range(len(writes)))
    while remaining:
        started = time.monotonic()
        failed: tuple[int, sqlite3.Error] | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            state = _RoundState(hook)
            for index in remaining:
                try:
                    outcomes[index] = writes[index].apply(conn, state)
                except CheckpointError as err:
                    outcomes[index] = err
                except sqlite3.Error as exc:
                    failed = (index, exc)
                    break
            if failed is None:
                for index in remaining:
                    state.reached(f"{writes[index].operation}.before_commit")
                conn.execute("COMMIT")
                return outcomes
            _rollback(conn)
        except sqlite3.Error as exc:
            # BEGIN (busy), the clock or COMMIT failed: nothing of this round is in effect.
            _rollback(conn)
            for index in remaining:
                write = writes[index]
                outcomes[index] = _translate(exc, write.operation, started, where, write.session_id)
            return outcomes
        except BaseException:
            _rollback(conn)
            raise
        index, error = failed
        write = writes[index]
        outcomes[index] = _translate(error, write.operation, started, where, write.session_id)
        remaining.remove(index)
    return outcomes


# -- reads (each one function on the worker thread) --------------------------------------


def _read_expectations(
    conn: sqlite3.Connection,
    session_id: str,
    expected_head: int | None,
    expected_generation: int | None,
) -> int:
    """The head, after checking expectations: an empty append, which writes nothing."""
    head, generation = conn.execute(_HEAD_AND_GENERATION, (session_id,)).fetchone()
    _check_expectations(session_id, head or 0, generation or 0, expected_head, expected_generation)
    return int(head or 0)


def _read_log(conn: sqlite3.Connection, session_id: str, since_seq: int) -> tuple[int, list[_Row]]:
    """The session's head and its rows after ``since_seq``, from one read transaction."""
    conn.execute("BEGIN")
    try:
        row = conn.execute(
            "SELECT head FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        with _gc_paused():
            rows = conn.execute(
                "SELECT seq, ts, crc, payload FROM events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq",
                (session_id, since_seq),
            ).fetchall()
    finally:
        _rollback(conn)
    return (row[0] if row else 0), rows


def _read_one(conn: sqlite3.Connection, sql: str, session_id: str) -> int:
    row = conn.execute(sql, (session_id,)).fetchone()
    return int(row[0]) if row else 0


def _list_sessions(conn: sqlite3.Connection) -> list[SessionInfo]:
    # BINARY collation orders UTF-8 bytes, which is code point order: Python's str order.
    return [
        SessionInfo(sid, mtime)
        for sid, mtime in conn.execute(
            "SELECT session_id, mtime FROM sessions ORDER BY mtime DESC, session_id ASC"
        )
    ]


def _quick_check(conn: sqlite3.Connection) -> list[str]:
    lines = [row[0] for row in conn.execute("PRAGMA quick_check")]
    return [] if lines == ["ok"] else [f"sqlite quick_check: {line}" for line in lines]


def _check_version(conn: sqlite3.Connection) -> list[str]:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return (
        [] if version == SCHEMA_VERSION else [f"schema version is {version}, not {SCHEMA_VERSION}"]
    )


def _check_heads(conn: sqlite3.Connection) -> list[str]:
    # seq is unique per session, so count == head, min == 1 and max == head mean
    # exactly the seqs 1..head.
    return [
        f"session {sid!r}: head is {head} but it has {count} event rows, seqs {low}..{high}"
        for sid, head, count, low, high in conn.execute(
            "SELECT s.session_id, s.head, count(e.seq), min(e.seq), max(e.seq)"
            " FROM sessions AS s LEFT JOIN events AS e USING (session_id)"
            " GROUP BY s.session_id"
        )
        if count != head or (count and (low != 1 or high != head))
    ]


def _check_orphans(conn: sqlite3.Connection) -> list[str]:
    return [
        f"session {sid!r}: {count} event rows but no session row"
        for sid, count in conn.execute(
            "SELECT session_id, count(*) FROM events"
            " WHERE session_id NOT IN (SELECT session_id FROM sessions) GROUP BY session_id"
        )
    ]


def _check_clock(conn: sqlite3.Connection) -> list[str]:
    row = conn.execute("SELECT last_mtime FROM clock").fetchone()
    if row is None:
        return ["the clock row is missing"]
    return [
        f"session {sid!r}: mtime {mtime} is after the store clock {row[0]}"
        for sid, mtime in conn.execute(
            "SELECT session_id, mtime FROM sessions WHERE mtime > ?", (row[0],)
        )
    ]


_STRUCTURE_CHECKS: Final = (
    _quick_check,
    _check_version,
    _check_heads,
    _check_orphans,
    _check_clock,
)
"""Run in this order by `_structure_problems`; each returns its problems."""


def _is_damage(exc: sqlite3.Error) -> bool:
    return _primary_code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _structure_problems(conn: sqlite3.Connection) -> tuple[list[str], int, int]:
    """`_STRUCTURE_CHECKS` in one read transaction: problems, sessions, events.

    A check that SQLite cannot even run on a damaged file is itself a problem;
    the remaining checks still run.
    """
    problems: list[str] = []
    sessions = events = 0
    conn.execute("BEGIN")
    try:
        for check in _STRUCTURE_CHECKS:
            try:
                problems += check(conn)
            except sqlite3.DatabaseError as exc:
                if not _is_damage(exc):
                    raise
                problems.append(f"{check.__name__.lstrip('_')} could not run: {exc}")
        try:
            sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            # Only the summary line loses its counts: the damage is already a problem.
            if not _is_damage(exc):
                raise
    finally:
        _rollback(conn)
    return problems, sessions, events


def _payload_page(
    conn: sqlite3.Connection, after: tuple[str, int], limit: int
) -> list[tuple[str, int, int, bytes]]:
    return conn.execute(
        "SELECT session_id, seq, crc, payload FROM events WHERE (session_id, seq) > (?, ?)"
        " ORDER BY session_id, seq LIMIT ?",
        (*after, limit),
    ).fetchall()


# -- the checkpointer -----------------------------------------------------------------


class GroupCommitStats(msgspec.Struct, frozen=True):
    """How a handle's writes were grouped: ``requests`` writes in ``rounds``.

    A round is one write transaction, unless a request in it failed part-way and
    the round was redone without it; ``requests / rounds`` is the group-commit factor.
    """

    rounds: int
    requests: int


class SqliteCheckpointer:
    """A conforming checkpointer on one SQLite database file.

    ``SqliteCheckpointer(database)`` makes an unopened handle; it opens on
    ``await handle.open()``, on ``async with``, or lazily on its first operation.
    ``database`` is a file path or ``":memory:"`` (a private store for tests: no
    durability, no other handles). ``codec`` transforms every stored payload;
    ``synchronous`` is SQLite's setting (FULL: every commit is fsynced; NORMAL
    keeps acknowledged writes across a process kill but not a power loss);
    ``busy_timeout_ms`` is how long a write waits for another writer's lock
    before raising `StoreBusyError`.

    Also implements `StoreHooks` (out-of-band damage and schema marking) and
    `FaultInjectable` (named points inside writes) for the conformance kit.
    """

    capabilities: frozenset[Capability] = frozenset(
        {
            Capability.TRUNCATE,
            Capability.DURABLE,
            Capability.MULTI_PROCESS,
            Capability.CODEC,
            Capability.GENERATION,
        }
    )

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
                "synchronous", f"{synchronous!r} is not one of OFF, NORMAL, FULL, EXTRA"
            )
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise InvalidArgumentError("busy_timeout_ms", "must be an int (milliseconds)")
        if busy_timeout_ms < 0:
            raise InvalidArgumentError("busy_timeout_ms", "must not be negative")
        self._database = database if database == ":memory:" else Path(database)
        self._where = str(database)
        self._codec = codec
        self._synchronous = level
        self._busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self._pending: list[tuple[_Write, asyncio.Future[int | None]]] = []
        self._flusher: asyncio.Task[None] | None = None  # holds the running flush task
        self._idle = asyncio.Event()  # set: no write round in flight
        self._idle.set()
        self._rounds = 0
        self._requests = 0
        self._fault_hook: FaultHook | None = None

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
            found = _header_user_version(self._database)
            if found is not None and found > SCHEMA_VERSION:
                raise SchemaVersionError(found, SCHEMA_VERSION)
        db = await _connect(self._database)
        started = time.monotonic()
        try:
            await _call(
                db,
                partial(
                    _open_store,
                    synchronous=self._synchronous,
                    busy_timeout_ms=self._busy_timeout_ms,
                    where=self._where,
                ),
            )
        except BaseException as exc:
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise _translate(exc, "open", started, self._where) from exc
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
        await self._idle.wait()  # writes accepted before close still complete
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise CheckpointerClosedError(operation)

    @property
    def group_commit_stats(self) -> GroupCommitStats:
        """How many write rounds this handle ran, for how many write requests."""
        return GroupCommitStats(self._rounds, self._requests)

    async def _query(
        self, operation: str, fn: Callable[[sqlite3.Connection], _T], session_id: str | None = None
    ) -> _T:
        """Run a read-only ``fn`` on the worker thread, translating SQLite errors."""
        db = await self._connection(operation)
        started = time.monotonic()
        try:
            return await _call(db, fn)
        except sqlite3.Error as exc:
            err = _translate(exc, operation, started, self._where, session_id)
            if err is exc:
                raise
            raise err from exc

    # -- group commit ---------------------------------------------------------------

    async def _write(self, operation: str, write: _Write) -> int | None:
        db = await self._connection(operation)
        if not self._idle.is_set():
            # A round is in flight: join the next one.
            future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
            self._pending.append((write, future))
            return await future
        # Idle: this request is a round of its own, run by its caller directly (one
        # hop, no extra task). Writes arriving meanwhile queue up for the flusher.
        self._idle.clear()
        try:
            (outcome,) = await _call(
                db, partial(_run_round, writes=[write], where=self._where, hook=self._fault_hook)
            )
        finally:
            self._rounds += 1
            self._requests += 1
            self._next_round(db)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _next_round(self, db: aiosqlite.Connection) -> None:
        """After a round: hand what queued up meanwhile to a flusher, or become idle."""
        if self._pending:
            # A task of its own, so that a caller cancelled while it waits cannot
            # strand the other requests of its round.
            self._flusher = asyncio.ensure_future(self._flush(db))
        else:
            self._idle.set()

    async def _flush(self, db: aiosqlite.Connection) -> None:
        """Commit the queued writes, all of them (up to `_MAX_ROUND`) in one round."""
        round_ = self._pending[:_MAX_ROUND]
        del self._pending[:_MAX_ROUND]
        writes = [write for write, _ in round_]
        try:
            outcomes = await _call(
                db, partial(_run_round, writes=writes, where=self._where, hook=self._fault_hook)
            )
        except Exception as exc:
            outcomes = [exc] * len(round_)
        finally:
            self._rounds += 1
            self._requests += len(round_)
            self._flusher = None
            self._next_round(db)
        for (_, future), outcome in zip(round_, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    # -- payloads -------------------------------------------------------------------

    def _encode(self, session_id: str, payloads: list[bytes]) -> list[bytes]:
        """Pass encoded events through the codec; any failure is `CodecError`."""
        codec = self._codec
        if codec is None:
            return payloads
        try:
            return [codec.encode(payload) for payload in payloads]
        except Exception as exc:
            raise CodecError(session_id, "encode", f"{codec.name}: {exc!r}") from exc

    def _decode(self, session_id: str, rows: Sequence[_Row], first_seq: int) -> list[StoredEvent]:
        """Check and decode rows that must hold seqs ``first_seq, first_seq + 1, ...``."""
        codec = self._codec
        decoded: list[StoredEvent] = []
        append = decoded.append
        seq = first_seq
        for stored_seq, ts, crc, payload in rows:
            if stored_seq != seq:
                raise CorruptStoreError(
                    session_id, f"events seq {seq}", f"found seq {stored_seq} where {seq} belongs"
                )
            if zlib.crc32(payload) != crc:
                raise CorruptStoreError(
                    session_id, f"events seq {seq}", "payload does not match its checksum"
                )
            if codec is not None:
                try:
                    payload = codec.decode(payload)
                except Exception as exc:
                    raise CodecError(session_id, "decode", f"{codec.name}: {exc!r}", seq) from exc
            try:
                event = decode_event(payload)
            except msgspec.DecodeError as exc:
                if codec is not None:
                    raise CodecError(
                        session_id, "decode", f"{codec.name} returned no valid event: {exc}", seq
                    ) from exc
                raise CorruptStoreError(session_id, f"events seq {seq}", str(exc)) from exc
            append(StoredEvent(seq, session_id, seq - 1 if seq > 1 else None, ts, event))
            seq += 1
        return decoded

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
        sid = check_session_id(session_id)
        batch = check_events(events)
        payloads = [encode_event(event) for event in batch]  # EVENT-002 before anything else
        want_head = check_optional_seq("expected_head", expected_head)
        want_generation = check_optional_seq("expected_generation", expected_generation)
        if not batch:
            check = partial(
                _read_expectations,
                session_id=sid,
                expected_head=want_head,
                expected_generation=want_generation,
            )
            return await self._query("append", check, sid)
        payloads = self._encode(sid, payloads)
        head = await self._write("append", _Append(sid, payloads, want_head, want_generation))
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
            "read", partial(_read_log, session_id=sid, since_seq=since), sid
        )
        if len(rows) != max(head - since, 0):
            raise CorruptStoreError(
                sid, "events", f"head is {head} but {len(rows)} events follow seq {since}"
            )
        for start in range(0, len(rows), _DECODE_CHUNK):
            with _gc_paused():
                chunk = self._decode(sid, rows[start : start + _DECODE_CHUNK], since + start + 1)
            for stored in chunk:
                yield stored

    async def head(self, session_id: str) -> int:
        """The seq of the session's last event; 0 if it has none or is unknown."""
        self._check_open("head")
        sid = check_session_id(session_id)
        sql = "SELECT head FROM sessions WHERE session_id = ?"
        return await self._query("head", partial(_read_one, sql=sql, session_id=sid), sid)

    async def generation(self, session_id: str) -> int:
        """The session id's generation: 0, then one more per delete or shortening truncate."""
        self._check_open("generation")
        sid = check_session_id(session_id)
        sql = "SELECT generation FROM generations WHERE session_id = ?"
        return await self._query("generation", partial(_read_one, sql=sql, session_id=sid), sid)

    async def list_sessions(self) -> list[SessionInfo]:
        """Every existing session, most recently modified first; ties by id ascending."""
        self._check_open("list_sessions")
        return await self._query("list_sessions", _list_sessions)

    async def delete(self, session_id: str) -> None:
        """Remove a session and its events in one transaction; unknown ids do nothing."""
        self._check_open("delete")
        sid = check_session_id(session_id)
        await self._write("delete", _Delete(sid))

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
        sid = check_session_id(session_id)
        target = check_seq("to_seq", to_seq)
        want_head = check_optional_seq("expected_head", expected_head)
        want_generation = check_optional_seq("expected_generation", expected_generation)
        result = await self._write("truncate", _Truncate(sid, target, want_head, want_generation))
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
        problems, sessions, events = await self._query("check_integrity", _structure_problems)
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
                page = await _call(db, partial(_payload_page, after=after, limit=_SCAN_PAGE))
            except sqlite3.DatabaseError as exc:
                if not _is_damage(exc):
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

    # -- StoreHooks -----------------------------------------------------------------

    def mark_newer_schema(self, path: Path) -> None:
        """Set ``user_version`` of the closed store at ``path`` to `SCHEMA_VERSION` + 1."""
        conn = sqlite3.connect(Path(path) / DATABASE_NAME, isolation_level=None)
        try:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        finally:
            conn.close()  # the last connection checkpoints the WAL into the file header

    def damage_store(self, path: Path) -> str:
        """Flip one bit inside a stored payload of the closed store at ``path``.

        The row's checksum no longer matches, which `check_integrity` reports and
        ``read`` raises as `CorruptStoreError`. The bit is flipped in the file's
        bytes when the payload lies in one piece there, else through SQL.
        """
        database = Path(path) / DATABASE_NAME
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all content into the main file
            row = conn.execute(
                "SELECT session_id, seq, payload FROM events ORDER BY length(payload) DESC LIMIT 1"
            ).fetchone()
            if row is None:
                raise ValueError(f"{database} holds no event to damage")
            sid, seq, payload = row
            data = database.read_bytes()
            offset = data.find(payload)
            in_file = offset >= 0 and data.find(payload, offset + 1) < 0
            if not in_file:
                damaged = bytearray(payload)
                damaged[len(damaged) // 2] ^= 0x01
                conn.execute(
                    "UPDATE events SET payload = ? WHERE session_id = ? AND seq = ?",
                    (bytes(damaged), sid, seq),
                )
        finally:
            conn.close()
        if in_file:
            with database.open("r+b") as file:
                file.seek(offset + len(payload) // 2)
                byte = file.read(1)[0]
                file.seek(offset + len(payload) // 2)
                file.write(bytes([byte ^ 0x01]))
            how = f"file offset {offset + len(payload) // 2}"
        else:
            how = "an SQL update that kept the old checksum"
        return f"flipped one bit of the payload of session {sid!r} seq {seq} ({how})"


# -- factory --------------------------------------------------------------------------


def _parse_options(options: Mapping[str, str]) -> tuple[str, int]:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InvalidArgumentError("options", f"unknown {unknown}; known: {list(_OPTIONS)}")
    synchronous = options.get("synchronous", "FULL")
    raw_timeout = options.get("busy_timeout", str(DEFAULT_BUSY_TIMEOUT_MS))
    try:
        busy_timeout = int(raw_timeout)
    except ValueError:
        raise InvalidArgumentError(
            "options", f"busy_timeout={raw_timeout!r} is not an int"
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
