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

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Self, cast

import aiosqlite
from checkpointspec.backends.sqlite import DATABASE_NAME, SqliteCheckpointer
from checkpointspec.spec import BackendContext, CheckpointConflictError, SessionEvent

__all__ = ["RACY", "CheckThenAppend", "PreparesBeforeVersionCheck", "Racy", "StaleHead"]


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


RACY: dict[str, type[Racy]] = {
    cls.__name__: cls for cls in (CheckThenAppend, StaleHead, PreparesBeforeVersionCheck)
}
"""Every racy backend by class name; its factory is ``racy_backends:<name>.make``."""
