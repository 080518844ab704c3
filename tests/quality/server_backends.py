"""PostgreSQL backends with one bug each that only shows between the backend and its server.

Each is the reference PostgreSQL backend (`checkpointspec.backends.postgres`)
with one thing changed, and must be rejected by the kit's server checks with
the rule in ``violates``; the reference backend passes the same checks
(``tests/backends/test_postgres_server_checks.py``). They need a server: the
DSN comes in the kit's options, as for the reference backend.
"""

from __future__ import annotations

from typing import ClassVar

from checkpointspec.backends.postgres import PostgresCheckpointer
from checkpointspec.backends.postgres import make as make_postgres
from checkpointspec.backends.postgres.connections import LostConnection
from checkpointspec.spec import BackendContext, Capability

__all__ = ["SERVER", "AsynchronousStandbyClaimsReplicated", "ResendsAfterLostCommit", "Server"]


class Server:
    """A broken PostgreSQL backend: ``make`` is its factory, ``violates`` its rule."""

    violates: ClassVar[str]


class AsynchronousStandbyClaimsReplicated(Server):
    """Bug: declares REPLICATED while its standby replicates asynchronously, so the primary
    acknowledges commits the standby may never receive; a failover loses them. The kit
    must report DUR-004."""

    violates = "DUR-004"

    @classmethod
    async def make(cls, ctx: BackendContext) -> PostgresCheckpointer:
        options = {**ctx.options, "replication": "asynchronous"}
        handle = await make_postgres(BackendContext(ctx.path, ctx.codec, options))
        handle.capabilities = handle.capabilities | {Capability.REPLICATED}
        return handle


class ResendsAfterLostCommit(Server):
    """Bug: when the connection dies during an append's COMMIT it sends the append again
    without looking for its request id, so an append the server had committed is applied
    twice. The kit must report NET-001."""

    violates = "NET-001"

    @classmethod
    async def make(cls, ctx: BackendContext) -> PostgresCheckpointer:
        handle = await make_postgres(ctx)

        async def never_found(lost: LostConnection, session_id: str, request: bytes) -> None:
            return None

        handle._server.find_request = never_found  # type: ignore[method-assign]
        return handle


SERVER: dict[str, type[Server]] = {
    cls.__name__: cls for cls in (AsynchronousStandbyClaimsReplicated, ResendsAfterLostCommit)
}
"""Every backend of this module, by class name."""
