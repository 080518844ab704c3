"""ADK's DatabaseSessionService on PostgreSQL with one server setting changed, for the
suite's server checks: commits answered before PostgreSQL has written them to its WAL
(``synchronous_commit = off``), which a killed server or its host's power cut loses.
Needs the ``dsn`` option (the kit's own server, for the server checks)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
from checkpointspec.backends.postgres.stores import names_under, schema_for
from checkpointspec.spec import BackendContext, drops_stores
from google.adk.sessions.database_session_service import DatabaseSessionService


async def _drop_schemas(ctx: BackendContext) -> list[str]:
    """The schemas of the stores under ``ctx.path`` dropped: the run leaves none behind."""
    names = names_under(ctx.path)
    connection = await asyncpg.connect(ctx.options["dsn"])
    try:
        for name in names:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await connection.close()
    return names


@drops_stores(_drop_schemas)
@contextlib.asynccontextmanager
async def asynchronous_commit(ctx: BackendContext) -> AsyncIterator[object]:
    """The recipe of examples/adk_sessions with ``synchronous_commit = off``."""
    dsn, schema = ctx.options["dsn"], schema_for(ctx.path)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await connection.close()
    settings = {"search_path": schema, "synchronous_commit": "off"}
    async with DatabaseSessionService(
        dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        connect_args={"server_settings": settings},
    ) as service:
        yield service
