"""The factories ``checkpointspec run --adk-session-service`` takes for Google ADK's services.

Each gets the `BackendContext` of a store (its directory in ``ctx.path``) and returns
ADK's session service on that store; the kit calls it once per service it wants (one
per store, one per worker process) and closes each when done with it. Run one with,
from the repository root::

    PYTHONPATH=. checkpointspec run --adk-session-service examples.adk_sessions.recipes:sqlite --declare durable,multi_process

They need the ``adk`` extra (``pip install 'checkpointspec[adk]'``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from checkpointspec.spec import BackendContext, drops_stores
from google.adk.events import Event  # noqa: F401  (imported once, before workers fork)
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

# ADK is imported with the module, not in each factory: the kit's worker processes are
# forked from one that imported this module, so ADK's import is paid once. The kit takes
# whatever a factory returns (a service, an awaitable, a context manager), so these are
# typed ``object``: ADK is not installed where the kit is type-checked.


def in_memory(ctx: BackendContext) -> object:
    """``InMemorySessionService``: one per store, so its data lives in this process only."""
    return InMemorySessionService()


def sqlite(ctx: BackendContext) -> object:
    """``SqliteSessionService`` (aiosqlite) on a file of the store."""
    return SqliteSessionService(str(ctx.path / "sessions.db"))


@contextlib.asynccontextmanager
async def database_sqlite(ctx: BackendContext) -> AsyncIterator[object]:
    """``DatabaseSessionService`` (SQLAlchemy) on a SQLite file of the store
    (``sqlite+aiosqlite``), its engine disposed when the kit is done with it."""
    async with DatabaseSessionService(f"sqlite+aiosqlite:///{ctx.path / 'sessions.db'}") as service:
        yield service


async def drop_schemas(ctx: BackendContext) -> list[str]:
    """Drop the schema of every store under ``ctx.path``; return them. The kit calls it
    when a check is done with its stores (`checkpointspec.spec.DropsStores`), so a run
    leaves nothing on the server."""
    import psycopg
    from checkpointspec.backends.postgres.checkpointer import dsn_from
    from checkpointspec.backends.postgres.stores import names_under
    from psycopg import sql

    schemas = names_under(ctx.path)
    if schemas:
        async with await psycopg.AsyncConnection.connect(
            dsn_from(ctx.options), autocommit=True
        ) as c:
            for schema in schemas:
                await c.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    return schemas


@drops_stores(drop_schemas)
@contextlib.asynccontextmanager
async def database_postgres(ctx: BackendContext) -> AsyncIterator[object]:
    """``DatabaseSessionService`` on a PostgreSQL server (``postgresql+asyncpg``): the
    server from ``--option dsn=...``, else ``$CHECKPOINTSPEC_POSTGRES_DSN``.

    **A store is a schema.** The kit names a store by a directory and re-opens it, also
    from other processes; ADK's tables have fixed names, so each directory gets a schema
    of its own (named by the marker file the kit's PostgreSQL backend names its schemas
    with, ``schema_for``) and the service's connections put it first on their
    ``search_path``. The kit drops a check's schemas when it is done with them
    (`drop_schemas`); a run killed before that leaves its schemas on the server."""
    import asyncpg
    from checkpointspec.backends.postgres.checkpointer import dsn_from
    from checkpointspec.backends.postgres.stores import schema_for

    dsn = dsn_from(ctx.options)
    schema = schema_for(ctx.path)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await connection.close()
    async with DatabaseSessionService(
        dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        connect_args={"server_settings": {"search_path": schema}},
    ) as service:
        yield service
