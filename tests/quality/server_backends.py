"""PostgreSQL backends with one bug each: what only shows between a backend and its server.

Each is the PostgreSQL reference backend (`checkpointspec.backends.postgres`) with
one mistake; ``violates`` names the rule the kit must report. They need a server:
the DSN comes in the kit's options (``--option dsn=``) or
``$CHECKPOINTSPEC_POSTGRES_DSN``, as for the reference backend. The kit loads them by
``module:attribute`` in its worker processes (``tests/quality/conftest.py`` puts
this folder on the path): each class's ``make`` is its factory,
``server_backends:CommitSentWithTheCall.make``. Those a client killed at a round
trip shows run in tests/quality/test_kit_catches_server_bugs.py; those that declare
DURABLE on servers launched with a setting that breaks it (the backend's code is
correct, its claim is not: `PostgresCheckpointer.launch_server`, the kit's server
crash checks) in tests/quality/test_kit_catches_server_crash_bugs.py; those the kit's
fault proxy and failover pair show in tests/backends/test_postgres_server_checks.py,
beside the reference backend passing the same checks. Nothing here is correct on
purpose, but for ``ConnectsInTheFactory``: the reference backend whose one
connection is opened in the factory, before the kit's fault proxy is armed.
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
from checkpointspec.backends.postgres.cluster import KIT_SETTINGS, with_settings
from checkpointspec.backends.postgres.connections import (
    CommitAttempt,
    LostConnection,
    ServerConnections,
)
from checkpointspec.backends.postgres.schema import Conn
from checkpointspec.spec import BackendContext, Capability
from psycopg import sql

__all__ = [
    "SERVER",
    "AsynchronousStandbyClaimsReplicated",
    "CommitSentWithTheCall",
    "FsyncOff",
    "ResendsAfterLostCommit",
    "Server",
    "ServerBroken",
    "SynchronousCommitOff",
]

_NO_WAIT: Final = "SELECT %s::bigint"
"""A read's wait for the session's writes in flight, made a no-op."""


class Server:
    """A broken PostgreSQL backend: ``make`` is its factory, ``violates`` its rule."""

    violates: ClassVar[str]


class ServerBroken(PostgresCheckpointer, Server):
    """A `PostgresCheckpointer` subclass with one bug; ``violates`` is the rule the kit must report."""

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


class AsynchronousStandbyClaimsReplicated(Server):
    """Bug: declares REPLICATED while its standby replicates asynchronously, so the primary
    acknowledges commits the standby may never receive; a failover loses them. The kit
    must report DUR-004."""

    violates = "DUR-004"

    @classmethod
    async def make(cls, ctx: BackendContext) -> PostgresCheckpointer:
        options = {**ctx.options, "replication": "asynchronous"}
        handle = await postgres_make(BackendContext(ctx.path, ctx.codec, options))
        handle.capabilities = handle.capabilities | {Capability.REPLICATED}
        return handle


class ResendsAfterLostCommit(Server):
    """Bug: when the connection dies during an append's COMMIT it sends the append again
    without looking for its request id, so an append the server had committed is applied
    twice. The kit must report NET-001."""

    violates = "NET-001"

    @classmethod
    async def make(cls, ctx: BackendContext) -> PostgresCheckpointer:
        handle = await postgres_make(ctx)

        async def never_found(lost: LostConnection, session_id: str, request: bytes) -> None:
            return None

        handle._server.find_request = never_found  # type: ignore[method-assign]
        return handle


class ConnectsInTheFactory:
    """Not a bug: the reference backend with one pooled connection (``pool_size=1``),
    opened in the factory and reused by every call, so it exists before the kit's
    fault proxy is armed. NET-001 must cut it all the same, and pass."""

    @classmethod
    async def make(cls, ctx: BackendContext) -> PostgresCheckpointer:
        options = {**ctx.options, "pool_size": "1"}
        handle = await postgres_make(BackendContext(ctx.path, ctx.codec, options))
        await handle._server.pool("open").wait()
        return handle


class SynchronousCommitOff(ServerBroken):
    """Bug: declares DURABLE on a server with ``synchronous_commit=off``, which
    acknowledges a commit before its log is written: a server killed right after
    the acknowledgement loses it. The kit must report DUR-002."""

    violates = "DUR-002"
    server_settings = with_settings(KIT_SETTINGS, "synchronous_commit=off")


class FsyncOff(ServerBroken):
    """Bug: declares DURABLE on a server with ``fsync=off``, which writes its log but
    never syncs it: a killed server loses nothing (the page cache keeps it), a power
    cut loses acknowledged commits. The kit must report DUR-003."""

    violates = "DUR-003"
    server_settings = with_settings(KIT_SETTINGS, "fsync=off")


SERVER: dict[str, type[Server]] = {
    cls.__name__: cls
    for cls in (
        CommitSentWithTheCall,
        SynchronousCommitOff,
        FsyncOff,
        AsynchronousStandbyClaimsReplicated,
        ResendsAfterLostCommit,
    )
}
"""Every broken server backend by class name; its factory is ``server_backends:<name>.make``."""
