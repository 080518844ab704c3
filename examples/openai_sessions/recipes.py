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
