"""The factories ``checkpointspec run --langgraph`` takes for LangGraph's own savers.

Each gets the `BackendContext` of a fresh store (its directory in ``ctx.path``) and
returns the saver, or the context manager LangGraph's own ``from_conn_string``
gives (the kit enters it and leaves it when the store is done with, which closes
the connection). Run one with, from the repository root::

    PYTHONPATH=. checkpointspec run --langgraph examples.langgraph_savers.recipes:sqlite

They need the ``langgraph`` extra (``pip install 'checkpointspec[langgraph]'``).
"""

from __future__ import annotations

from checkpointspec.spec import BackendContext

# The kit takes whatever a factory returns (a saver, an awaitable, a context manager),
# so these are typed ``object``: LangGraph is not installed where the kit is type-checked.


def in_memory(ctx: BackendContext) -> object:
    """``langgraph-checkpoint``'s InMemorySaver: one process, nothing on disk."""
    from langgraph.checkpoint.memory import InMemorySaver

    return InMemorySaver()


def sqlite(ctx: BackendContext) -> object:
    """``langgraph-checkpoint-sqlite``'s SqliteSaver (sync only) on a file of the store."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver.from_conn_string(str(ctx.path / "checkpoints.sqlite"))


def async_sqlite(ctx: BackendContext) -> object:
    """``langgraph-checkpoint-sqlite``'s AsyncSqliteSaver on a file of the store."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    return AsyncSqliteSaver.from_conn_string(str(ctx.path / "checkpoints.sqlite"))
