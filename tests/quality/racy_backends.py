"""SQLite backends with one bug each: a race only contention shows, or a newer store touched.

Each is the SQLite reference backend with one mistake: most only contention
shows (the free-running stress check's targets); one prepares a database before
it reads the version and so changes a store it then refuses. ``violates`` names
the rule the kit must report. The kit loads them by
``module:attribute`` in its worker processes, which import this module by name
(``tests/quality/conftest.py`` puts this folder on the path): every class is its
own factory, ``racy_backends:CheckThenAppend.make``. Nothing here is correct on
purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar, Self, cast

import aiosqlite
from checkpointspec.backends.sqlite import DATABASE_NAME, SqliteCheckpointer
from checkpointspec.backends.sqlite import worker as sqlite_worker
from checkpointspec.spec import (
    BackendContext,
    CheckpointConflictError,
    SessionEvent,
    check_expectations,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
)

__all__ = [
    "RACY",
    "CheckThenAppend",
    "DeleteInTwoTransactions",
    "PreparesBeforeVersionCheck",
    "Racy",
    "StaleHead",
    "TruncateInTwoTransactions",
]


class Racy(SqliteCheckpointer):
    """A `SqliteCheckpointer` with one race; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: the database ``checkpoints.db`` in ``ctx.path``, opened."""
        return cast(Self, await cls(Path(ctx.path) / DATABASE_NAME).open())


class CheckThenAppend(Racy):
    """Bug: checks ``expected_head`` with a separate ``head`` call, then appends unguarded.

    Another writer can append between the two calls, so an append succeeds from a
    head that is no longer current. Kit must report APPEND-004 (it may also show
    as APPEND-002 or SEQ-003 in a history of several processes).
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
        if expected_head is not None:
            head = await self.head(session_id)
            if head != expected_head:
                raise CheckpointConflictError(session_id, expected_head, head)
        return await super().append(session_id, events, None)


class StaleHead(Racy):
    """Bug: every fifth ``head`` call is answered from the previous answer, as a naive cache would.

    Kit must report HEAD-001.
    """

    violates = "HEAD-001"

    _calls: dict[str, int]
    _last: dict[str, int]

    async def head(self, session_id: str) -> int:
        calls: dict[str, int] = self.__dict__.setdefault("_calls", {})
        last: dict[str, int] = self.__dict__.setdefault("_last", {})
        calls[session_id] = calls.get(session_id, 0) + 1
        if calls[session_id] % 5 == 0 and session_id in last:
            return last[session_id]
        last[session_id] = await super().head(session_id)
        return last[session_id]


class PreparesBeforeVersionCheck(Racy):
    """Bug: opening an existing database first switches it to WAL and makes sure an index
    table exists (``CREATE TABLE IF NOT EXISTS``), and only then reads its version.

    A store written by a newer format is refused with SchemaVersionError, but not
    untouched: the table is already in it. The reference's own hooks cannot tell
    (a version bump only), and a handle opened on that store before the hook runs
    would have prepared it already. Kit must report SCHEMA-001.
    """

    violates = "SCHEMA-001"

    async def _connect(self) -> aiosqlite.Connection:
        database = Path(self._database)
        if database.exists():
            conn = sqlite3.connect(database, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("CREATE TABLE IF NOT EXISTS search_index (session_id TEXT, text TEXT)")
            finally:
                conn.close()
        return await super()._connect()


ROUND_TRIP = 0.002
"""Seconds between the two transactions of `DeleteInTwoTransactions`."""


class DeleteInTwoTransactions(Racy):
    """Bug: delete removes the session's events in one transaction and its row in a second.

    An append from another process between the two still finds the session's
    head, and stores its events after it; the second transaction then drops the
    row, so the session reads as head 0 with events at seqs beyond it, and the
    next appends run into those seqs. Kit must report MP-001 (the stress run's
    history, or the reads that fail on the store the race left).
    """

    violates = "MP-001"

    async def delete(self, session_id: str) -> None:
        sid = check_session_id(session_id)
        await self._query("delete", partial(_delete_events, session_id=sid), sid)
        # The round trip a database server adds between two statements; SQLite's
        # in-process one is so short that the race would show on some runs only.
        await asyncio.sleep(ROUND_TRIP)
        await self._query("delete", partial(_delete_session_row, session_id=sid), sid)


def _delete_events(conn: sqlite3.Connection, session_id: str) -> None:
    with _transaction(conn):
        conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))


def _delete_session_row(conn: sqlite3.Connection, session_id: str) -> None:
    with _transaction(conn):
        if conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount:
            conn.execute(
                "INSERT INTO generations (session_id, generation) VALUES (?, 1)"
                " ON CONFLICT (session_id) DO UPDATE SET generation = generation + 1",
                (session_id,),
            )


class TruncateInTwoTransactions(Racy):
    """Bug: truncate cuts the events in one transaction and moves the head in a second.

    A writer killed between the two (the commanded machine pauses it at the
    second's ``truncate.locked`` and kills it) leaves a head above the events
    that are left: the truncate neither wholly done nor undone, and reads fail
    on the mismatch. Kit must report KILL-001.
    """

    violates = "KILL-001"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        cut = partial(
            _cut_events,
            session_id=sid,
            to_seq=target,
            expected_head=want_head,
            expected_generation=want_generation,
        )
        await self._query("truncate", cut, sid)
        # The events are gone; the reference's own truncate now moves the head.
        move = sqlite_worker.Truncate(sid, target, None, None)
        return cast(int, await self._write("truncate", move))


def _cut_events(
    conn: sqlite3.Connection,
    session_id: str,
    to_seq: int,
    expected_head: int | None,
    expected_generation: int | None,
) -> None:
    with _transaction(conn):
        head, generation = conn.execute(
            "SELECT (SELECT head FROM sessions WHERE session_id = ?1),"
            " (SELECT generation FROM generations WHERE session_id = ?1)",
            (session_id,),
        ).fetchone()
        check_expectations(
            session_id, head or 0, generation or 0, expected_head, expected_generation
        )
        check_truncate_bound(session_id, to_seq, head or 0)
        conn.execute("DELETE FROM events WHERE session_id = ? AND seq > ?", (session_id, to_seq))


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction of its own, committed when the block ends."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


RACY: dict[str, type[Racy]] = {
    cls.__name__: cls
    for cls in (
        CheckThenAppend,
        StaleHead,
        PreparesBeforeVersionCheck,
        DeleteInTwoTransactions,
        TruncateInTwoTransactions,
    )
}
"""Every racy backend by class name; its factory is ``racy_backends:<name>.make``."""
