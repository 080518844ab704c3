"""The factories ``checkpointspec run --openai-session`` takes for the OpenAI Agents SDK's sessions.

Each gets a session id and the `BackendContext` of a store (its directory in
``ctx.path``) and returns the SDK's Session for that id on that store; the kit
calls it once per Session object it wants (two per id, in several processes), and
closes each when the store is done with. Run one with, from the repository root::

    PYTHONPATH=. checkpointspec run --openai-session examples.openai_sessions.recipes:sqlite

They need the ``openai-agents`` extra (``pip install 'checkpointspec[openai-agents]'``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from agents import SQLiteSession
from agents.extensions.memory import AsyncSQLiteSession, SQLAlchemySession
from checkpointspec.spec import BackendContext, drops_stores

# The SDK is imported with the module, not in each factory: the kit's worker processes
# are forked from one that imported this module, so the SDK's import is paid once.
# The kit takes whatever a factory returns (a session, an awaitable, a context manager),
# so these are typed ``object``: the SDK is not installed where the kit is type-checked.


def sqlite(session_id: str, ctx: BackendContext) -> object:
    """``agents.SQLiteSession`` on a file of the store."""
    return SQLiteSession(session_id, ctx.path / "sessions.db")


def async_sqlite(session_id: str, ctx: BackendContext) -> object:
    """``agents.extensions.memory.AsyncSQLiteSession`` (aiosqlite) on a file of the store."""
    return AsyncSQLiteSession(session_id, ctx.path / "sessions.db")


@contextlib.asynccontextmanager
async def sqlalchemy_sqlite(session_id: str, ctx: BackendContext) -> AsyncIterator[object]:
    """``agents.extensions.memory.SQLAlchemySession`` on a SQLite file of the store
    (``sqlite+aiosqlite``), its engine disposed when the kit is done with it."""
    session = SQLAlchemySession.from_url(
        session_id, url=f"sqlite+aiosqlite:///{ctx.path / 'sessions.db'}", create_tables=True
    )
    try:
        yield session
    finally:
        await session.engine.dispose()


async def drop_tables(ctx: BackendContext) -> list[str]:
    """Drop the tables of every store under ``ctx.path``; return them. The kit calls it
    when a check is done with its stores (`checkpointspec.spec.DropsStores`), so a run
    leaves nothing on the server."""
    import psycopg
    from checkpointspec.backends.postgres.checkpointer import dsn_from
    from checkpointspec.backends.postgres.stores import names_under
    from psycopg import sql

    prefixes = names_under(ctx.path)
    tables = [f"{prefix}_{kind}" for prefix in prefixes for kind in ("messages", "sessions")]
    if tables:
        async with await psycopg.AsyncConnection.connect(
            dsn_from(ctx.options), autocommit=True
        ) as c:
            await c.execute(
                sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for t in tables)
                )
            )
    return tables


@drops_stores(drop_tables)
@contextlib.asynccontextmanager
async def sqlalchemy_postgres(session_id: str, ctx: BackendContext) -> AsyncIterator[object]:
    """``SQLAlchemySession`` on a PostgreSQL server (``postgresql+asyncpg``): the server
    from ``--option dsn=...``, else ``$CHECKPOINTSPEC_POSTGRES_DSN``.

    **A store is a pair of tables.** The kit names a store by a directory and re-opens
    it, also from other processes; SQLAlchemySession takes its tables' names, so each
    directory gets tables of its own, named by the marker file the kit's PostgreSQL
    backend names its schemas with (``schema_for``: a random ``cps_<24 hex digits>``
    the first time, the recorded name after). The kit drops a check's tables when it is
    done with them (`drop_tables`); a run killed before that leaves them on the server."""
    from checkpointspec.backends.postgres.checkpointer import dsn_from
    from checkpointspec.backends.postgres.stores import schema_for

    dsn = dsn_from(ctx.options)
    prefix = schema_for(ctx.path)
    session = SQLAlchemySession.from_url(
        session_id,
        url=dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        create_tables=True,
        sessions_table=f"{prefix}_sessions",
        messages_table=f"{prefix}_messages",
    )
    try:
        yield session
    finally:
        await session.engine.dispose()
