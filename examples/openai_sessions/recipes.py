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
import os
from collections.abc import AsyncIterator

from agents import SQLiteSession
from agents.extensions.memory import AsyncSQLiteSession, SQLAlchemySession
from checkpointspec.spec import BackendContext

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


DSN_VARIABLE = "CHECKPOINTSPEC_POSTGRES_DSN"
"""The environment variable holding the PostgreSQL server's DSN (the kit's own backend's too)."""


@contextlib.asynccontextmanager
async def sqlalchemy_postgres(session_id: str, ctx: BackendContext) -> AsyncIterator[object]:
    """``SQLAlchemySession`` on a PostgreSQL server (``postgresql+asyncpg``): the server
    from ``--option dsn=...``, else ``$CHECKPOINTSPEC_POSTGRES_DSN``.

    **A store is a pair of tables.** The kit names a store by a directory and re-opens
    it, also from other processes; SQLAlchemySession takes its tables' names, so each
    directory gets tables of its own, named by the marker file the kit's PostgreSQL
    backend names its schemas with (``schema_for``: a random ``cps_<24 hex digits>``
    the first time, the recorded name after). The tables stay on the server: run it on
    a throwaway one (``python .ci/postgres.py run -- ...``)."""
    from checkpointspec.backends.postgres.stores import schema_for

    dsn = ctx.options.get("dsn") or os.environ.get(DSN_VARIABLE, "")
    if not dsn:
        raise RuntimeError(
            f"{DSN_VARIABLE} is not set: this session needs a PostgreSQL server"
            f" (set it, pass --option dsn=..., or run under `python .ci/postgres.py run -- ...`)"
        )
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
