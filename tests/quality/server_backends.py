"""PostgreSQL backends with one bug each: what only a client killed at a round trip shows.

Each is the PostgreSQL reference backend with one mistake; ``violates`` names
the rule the kit must report. The kit loads them by ``module:attribute`` in its
worker processes (``tests/quality/conftest.py`` puts this folder on the path):
every class is its own factory, ``server_backends:CommitSentWithTheCall.make``,
and reads the server's DSN from ``--option dsn=`` or
``$CHECKPOINTSPEC_POSTGRES_DSN`` as the reference does. Nothing here is correct
on purpose.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Self, cast

import psycopg
from checkpointspec.backends.postgres import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_POOL_SIZE,
    PostgresCheckpointer,
)
from checkpointspec.backends.postgres import make as postgres_make
from checkpointspec.backends.postgres.appends import Appends
from checkpointspec.backends.postgres.connections import CommitAttempt, ServerConnections
from checkpointspec.backends.postgres.schema import Conn
from checkpointspec.spec import BackendContext
from psycopg import sql

__all__ = ["SERVER", "CommitSentWithTheCall", "ServerBroken"]

_NO_WAIT: Final = "SELECT %s::bigint"
"""A read's wait for the session's writes in flight, made a no-op."""


class ServerBroken(PostgresCheckpointer):
    """A `PostgresCheckpointer` with one bug; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: the reference's (`checkpointspec.backends.postgres.make`) opening this class."""
        return cast(Self, await postgres_make(ctx, cls))


class _CommitSentWithTheCall(ServerConnections):
    async def transact(
        self, conn: Conn, query: sql.Composed, params: Sequence[object], attempt: CommitAttempt
    ) -> tuple[object, ...]:
        # The bug: BEGIN, the call and COMMIT leave in one pipeline, before the call
        # has returned; the server commits what it got even if this process dies.
        attempt.committing = True
        try:
            async with conn.pipeline():
                await conn.execute("BEGIN")
                cur = await conn.execute(query, params)
                await conn.execute("COMMIT")
        except BaseException:
            if not conn.broken and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            raise
        row = await cur.fetchone()
        assert row is not None
        attempt.row = row
        return row


class CommitSentWithTheCall(ServerBroken):
    """Bug: sends ``COMMIT`` with the write instead of after it returned, and reads
    do not wait for a session's writes in flight.

    A writer killed while its write waits on the server (behind another writer
    of the session) has its write committed by the server afterwards: a reader
    that read the session after the writer died, without that write, sees it
    appear later. Alone, either half is harmless: the reference backend avoided
    this by doing neither (docs/postgres.md, "Killed writers"). The kit must
    report KILL-001.
    """

    violates = "KILL-001"

    def __init__(self, dsn: str, **settings: Any) -> None:
        super().__init__(dsn, **settings)
        pool_size = settings.get("pool_size", DEFAULT_POOL_SIZE)
        busy_timeout_ms = settings.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS)
        schema = self.schema
        self._server = _CommitSentWithTheCall(dsn, schema, pool_size, busy_timeout_ms)
        self._appends = Appends(self._server, schema)
        self._sql_wait_for_writes = _NO_WAIT


SERVER: dict[str, type[ServerBroken]] = {"CommitSentWithTheCall": CommitSentWithTheCall}
"""Every broken server backend by class name; its factory is ``server_backends:<name>.make``."""
