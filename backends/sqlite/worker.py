"""The work the SQLite backend hands to its connection's worker thread.

Every function here that takes a ``sqlite3.Connection`` runs on that thread and
does one whole operation: a write round, a read snapshot, a lookup. That keeps an
operation to one thread hop (see `checkpointspec.backends.sqlite`). Nothing here
touches asyncio, a codec or a handle's state; results and errors come back as
values the event loop side hands to its callers. `connect` and `call` are the
bridge, and the only code that touches aiosqlite's internals.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeAlias, TypeVar, cast

import aiosqlite

from ...spec import (
    CheckpointError,
    CorruptStoreError,
    FaultHook,
    SessionInfo,
    StoreBusyError,
    check_expectations,
    check_truncate_bound,
)
from ..payloads import Row, gc_paused
from .maintenance import Holder, check_writable
from .schema import primary_code, rollback

__all__ = [
    "FAULT_POINTS",
    "Append",
    "Delete",
    "Row",
    "Truncate",
    "Write",
    "WriteOutcome",
    "call",
    "connect",
    "list_sessions",
    "read_expectations",
    "read_log",
    "read_one",
    "run_round",
    "translate",
]

_HEAD_AND_GENERATION: Final = (
    "SELECT (SELECT head FROM sessions WHERE session_id = ?1),"
    " (SELECT generation FROM generations WHERE session_id = ?1),"
    " (SELECT token FROM maintenance WHERE session_id = ?1)"
)
"""The head, the generation and the maintenance holder's token of a session, in one statement."""
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
"""The fault points `SqliteCheckpointer` reports (see its ``fault_points``)."""

_T = TypeVar("_T")
WriteOutcome: TypeAlias = "int | Exception | None"
"""What one write request ends with: its result, or the error to raise."""


# -- the aiosqlite boundary: the only code that touches aiosqlite's internals -----------


async def connect(database: str | Path) -> aiosqlite.Connection:
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


def call(db: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], _T]) -> Awaitable[_T]:
    """Run ``fn(conn)`` on the connection's worker thread: one hop for a whole operation.

    aiosqlite (0.22) offers no public way to run a callable on its worker thread,
    only one hop per statement. ``Connection._execute`` queues a callable there and
    ``Connection._conn`` is the sqlite3 connection that thread owns. Only this
    function and `connect` touch aiosqlite internals, so an upgrade breaks here.
    """
    execute = cast(Callable[..., Awaitable[_T]], db._execute)
    return execute(fn, db._conn)


# -- errors ---------------------------------------------------------------------------


def translate(
    exc: sqlite3.Error, operation: str, started: float, where: str, session_id: str | None = None
) -> Exception:
    """The contract's error for an SQLite error, or the SQLite error itself.

    Busy and locked become `StoreBusyError`, damage (corrupt, not a database,
    constraint) `CorruptStoreError`. Anything else (disk full, I/O error) has no
    contract error and propagates as the `sqlite3.Error` it is.
    """
    code = primary_code(exc)
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreBusyError(operation, time.monotonic() - started)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CONSTRAINT):
        return CorruptStoreError(session_id, where, str(exc))
    return exc


# -- write requests, run together in one transaction -----------------------------------


class _RoundState:
    """What the writes of one round share: the round's ts, the fault hook and the handle's `Holder`."""

    __slots__ = ("holder", "hook", "ts")

    def __init__(self, hook: FaultHook | None, holder: Holder) -> None:
        self.hook = hook
        self.holder = holder
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
        """Report a fault point to the hook, if one is installed."""
        if self.hook is not None:
            self.hook(point)


class Append:
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
        """Inside the round's transaction: check, insert, move the head; the new head."""
        sid = self.session_id
        state.reached("append.locked")
        head, generation, token = conn.execute(_HEAD_AND_GENERATION, (sid,)).fetchone()
        if token is not None:  # held by some handle: rare, and checked only then
            check_writable(conn, state.holder, sid, token, "append")
        head = head or 0
        check_expectations(sid, head, generation or 0, self.expected_head, self.expected_generation)
        if not self.payloads:
            return head  # an empty append to a session held elsewhere: checked, nothing to write
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


class Truncate:
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
        """Inside the round's transaction: check, then cut; ``to_seq``, or the error."""
        sid, target = self.session_id, self.to_seq
        state.reached("truncate.locked")
        head, generation, token = conn.execute(_HEAD_AND_GENERATION, (sid,)).fetchone()
        if token is not None:
            check_writable(conn, state.holder, sid, token, "truncate")
        head = head or 0
        check_expectations(sid, head, generation or 0, self.expected_head, self.expected_generation)
        check_truncate_bound(sid, target, head)
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


class Delete:
    """Remove a session and its events; bump its generation if it existed."""

    __slots__ = ("session_id",)
    operation = "delete"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def apply(self, conn: sqlite3.Connection, state: _RoundState) -> None:
        """Inside the round's transaction: delete, if the session exists."""
        sid = self.session_id
        state.reached("delete.locked")
        held = conn.execute("SELECT token FROM maintenance WHERE session_id = ?", (sid,)).fetchone()
        if held is not None:
            check_writable(conn, state.holder, sid, held[0], "delete")
        if conn.execute("DELETE FROM sessions WHERE session_id = ?", (sid,)).rowcount:
            conn.execute("DELETE FROM events WHERE session_id = ?", (sid,))
            conn.execute(_BUMP_GENERATION, (sid,))


Write: TypeAlias = Append | Truncate | Delete


def run_round(
    conn: sqlite3.Connection,
    writes: Sequence[Write],
    where: str,
    hook: FaultHook | None,
    holder: Holder,
) -> list[WriteOutcome]:
    """Run every write in one transaction and commit once; one outcome per write.

    Runs on the worker thread. Requests see each other's effects in order, so of
    two appends with the same ``expected_head`` the second conflicts. A
    `CheckpointError` from a request is raised before it writes anything, so it
    is just that request's outcome. An SQLite error inside a request rolls the
    whole transaction back; that request fails and the rest run again.
    """
    outcomes: list[WriteOutcome] = [None] * len(writes)
    remaining = list(range(len(writes)))
    while remaining:
        started = time.monotonic()
        failed: tuple[int, sqlite3.Error] | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            state = _RoundState(hook, holder)
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
            rollback(conn)
        except sqlite3.Error as exc:
            # BEGIN (busy), the clock or COMMIT failed: nothing of this round is in effect.
            rollback(conn)
            for index in remaining:
                write = writes[index]
                outcomes[index] = translate(exc, write.operation, started, where, write.session_id)
            return outcomes
        except BaseException:
            rollback(conn)
            raise
        index, error = failed
        write = writes[index]
        outcomes[index] = translate(error, write.operation, started, where, write.session_id)
        remaining.remove(index)
    return outcomes


# -- reads (each one function on the worker thread) --------------------------------------


def read_expectations(
    conn: sqlite3.Connection,
    session_id: str,
    expected_head: int | None,
    expected_generation: int | None,
    holder: Holder,
) -> int | None:
    """The head, after checking expectations: an empty append, which writes nothing.

    None when another handle's maintenance row is found: only a write
    transaction may tell a live holder from a dead one, so the caller runs the
    empty append as a write.
    """
    head, generation, token = conn.execute(_HEAD_AND_GENERATION, (session_id,)).fetchone()
    if token is not None and token != holder.token:
        return None
    check_expectations(session_id, head or 0, generation or 0, expected_head, expected_generation)
    return int(head or 0)


def read_log(conn: sqlite3.Connection, session_id: str, since_seq: int) -> tuple[int, list[Row]]:
    """The session's head and its rows after ``since_seq``, from one read transaction."""
    conn.execute("BEGIN")
    try:
        row = conn.execute(
            "SELECT head FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        with gc_paused():
            rows = conn.execute(
                "SELECT seq, ts, crc, payload FROM events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq",
                (session_id, since_seq),
            ).fetchall()
    finally:
        rollback(conn)
    return (row[0] if row else 0), rows


def read_one(conn: sqlite3.Connection, sql: str, session_id: str) -> int:
    """The one integer ``sql`` selects for ``session_id``; 0 when there is no row."""
    row = conn.execute(sql, (session_id,)).fetchone()
    return int(row[0]) if row else 0


def list_sessions(conn: sqlite3.Connection) -> list[SessionInfo]:
    """Every session row, most recently modified first, ties by id ascending."""
    # BINARY collation orders UTF-8 bytes, which is code point order: Python's str order.
    return [
        SessionInfo(sid, mtime)
        for sid, mtime in conn.execute(
            "SELECT session_id, mtime FROM sessions ORDER BY mtime DESC, session_id ASC"
        )
    ]
