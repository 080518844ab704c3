"""The factories ``checkpointspec run --langgraph`` takes for langgraph-checkpoint-postgres.

`postgres` gives the sync ``PostgresSaver``, `async_postgres` the
``AsyncPostgresSaver``, each on one connection to a PostgreSQL server whose DSN is
``$CHECKPOINTSPEC_POSTGRES_DSN`` (or ``--option dsn=...``). Run one with, from
this directory::

    CHECKPOINTSPEC_POSTGRES_DSN=postgresql://... PYTHONPATH=. \\
        checkpointspec run --langgraph postgres_recipes:postgres --profile quick

or against a throwaway server, from the repository root::

    PYTHONPATH=examples/langgraph_savers python .ci/postgres.py run -- \\
        checkpointspec run --langgraph postgres_recipes:async_postgres --profile quick

**A store is a database.** The kit names a store by a directory (``ctx.path``)
and re-opens it, also from other processes; LangGraph's savers use unqualified
table names. Each directory gets a database of its own, named by the marker
file the kit's own PostgreSQL backend names its schemas with
(``checkpointspec.backends.postgres.stores.schema_for``): a random
``cps_<24 hex digits>`` the first time, written with ``link()`` so processes
opening one new directory at once agree, the recorded name every time after. A
random name rather than a hash of the path means a directory made again at a
path used before (pytest's numbered temporary directories start again at 0) or
the same path on another host never meets an old store. A database rather than
a schema on ``search_path`` because ``setup()`` runs ``CREATE INDEX
CONCURRENTLY``, which waits for every transaction *of its database* holding an
older snapshot (a long query, a REPEATABLE READ transaction): with schemas, one
store's setup would wait on every other store's.

**setup() once at a time.** The factory calls ``setup()``, as LangGraph's docs
require before first use (unless the kit, with ``--option setup=caller`` in
``ctx.options``, runs it itself), holding a session advisory lock on the store in the
server's own database (the DSN's), so two processes opening one new directory
do not migrate it at once (they fail on each other's ``CREATE TABLE IF NOT
EXISTS`` and migration rows, and can leave an index invalid for good). The lock
lives outside the store's database: a session waiting for it there holds a
snapshot the holder's ``CREATE INDEX CONCURRENTLY`` waits for, and PostgreSQL
aborts one of them (``deadlock detected``).

**Cleaning up.** The kit drops a check's databases when the check is done with
them (`drop_databases`, attached to both factories with ``drops_stores``). Each
database created is also entered in ``checkpointspec_langgraph_stores`` (database,
host, directory) in the DSN's database; after creating one, the factory drops a few
of this host's databases whose directory no longer names them (what a killed run
left; a database still in use is left for later).

The connections are made as LangGraph's docs require (autocommit,
``row_factory=dict_row``, ``prepare_threshold=0``) and closed when the kit
leaves the context manager. They need the ``langgraph`` and ``postgres`` extras
and ``langgraph-checkpoint-postgres``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from checkpointspec.backends.postgres.stores import names_under, read_marker, schema_for
from checkpointspec.spec import BackendContext, drops_stores

if TYPE_CHECKING:
    import psycopg

DSN_VARIABLE: Final = "CHECKPOINTSPEC_POSTGRES_DSN"
"""The environment variable holding the server's DSN (the kit's PostgreSQL backend's too)."""

REGISTRY: Final = "checkpointspec_langgraph_stores"
"""The table, in the DSN's database, of the databases the factories created."""

PRUNE_AT_MOST: Final = 8
"""Stale databases dropped per store created: ``DROP DATABASE`` forces a checkpoint,
so a run pays for the previous run's stores a few at a time."""

# The connections LangGraph's docs ask for: without autocommit the saver's writes stay
# in a transaction nobody commits and setup() fails (CREATE INDEX CONCURRENTLY cannot
# run in a transaction block), without dict_row its reads fail, and prepared
# statements break behind transaction-pooling proxies.
_CONNECT: Final[dict[str, Any]] = {"autocommit": True, "prepare_threshold": 0}


def _dsn(ctx: BackendContext) -> str:
    """The server's DSN: ``--option dsn=...``, else ``$CHECKPOINTSPEC_POSTGRES_DSN``."""
    dsn = ctx.options.get("dsn") or os.environ.get(DSN_VARIABLE, "")
    if not dsn:
        raise RuntimeError(
            f"{DSN_VARIABLE} is not set: these savers need a PostgreSQL server"
            f" (set {DSN_VARIABLE}=postgresql://..., pass --option dsn=...,"
            " or run under `python .ci/postgres.py run -- ...` for a throwaway one)"
        )
    return dsn


def _lock_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of the store ``name``."""
    digest = hashlib.blake2b(b"langgraph-store\x00" + name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _Claim:
    """The store of one directory, created if missing and held until `release`.

    Blocking calls only: the async factory runs them in a thread, so both factories
    share one way of creating, locking and pruning stores.
    """

    def __init__(self, ctx: BackendContext) -> None:
        self._dsn = _dsn(ctx)
        self._directory = Path(ctx.path)
        self.name = schema_for(self._directory)  # a name for a database as well
        self._admin: psycopg.Connection[Any] | None = None
        self._created = False

    def acquire(self) -> str:
        """Lock the store (creating its database if missing); return its conninfo."""
        import psycopg
        from psycopg import sql

        admin = psycopg.Connection.connect(self._dsn, autocommit=True)
        try:
            admin.execute("SELECT pg_advisory_lock(%s)", (_lock_key(self.name),))
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.name,)
            ).fetchone()
            if exists is None:
                self._register(admin)  # before the database: a crash leaves no orphan
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
                self._created = True
        except BaseException:
            admin.close()
            raise
        self._admin = admin
        return psycopg.conninfo.make_conninfo(self._dsn, dbname=self.name)

    def release(self) -> None:
        """Unlock the store; after creating one, drop a few stale ones."""
        admin, self._admin = self._admin, None
        if admin is None:
            return
        with admin:
            admin.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(self.name),))
            if self._created:
                _prune(admin)

    def _register(self, admin: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        with admin.transaction():
            # One creator of the table at a time: concurrent CREATE TABLE IF NOT
            # EXISTS can fail on the catalogue's unique index.
            admin.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(REGISTRY),))
            admin.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {r} (datname text PRIMARY KEY,"
                    " host text NOT NULL, directory text NOT NULL,"
                    " created timestamptz NOT NULL DEFAULT now())"
                ).format(r=sql.Identifier(REGISTRY))
            )
            admin.execute(
                sql.SQL(
                    "INSERT INTO {r} (datname, host, directory) VALUES (%s, %s, %s)"
                    " ON CONFLICT (datname) DO NOTHING"
                ).format(r=sql.Identifier(REGISTRY)),
                (self.name, socket.gethostname(), os.fspath(self._directory.resolve())),
            )


def _prune(admin: psycopg.Connection[Any]) -> list[str]:
    """Drop up to `PRUNE_AT_MOST` databases of this host whose directory no longer names
    them; return them. One in use is skipped (PostgreSQL refuses to drop it)."""
    import psycopg
    from psycopg import sql

    rows = admin.execute(
        sql.SQL("SELECT datname, directory FROM {r} WHERE host = %s ORDER BY created").format(
            r=sql.Identifier(REGISTRY)
        ),
        (socket.gethostname(),),
    ).fetchall()
    dropped: list[str] = []
    for name, directory in rows:
        if len(dropped) >= PRUNE_AT_MOST:
            break
        try:
            current = read_marker(Path(directory))
        except (OSError, ValueError):
            current = None
        if current == name:
            continue
        try:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        except psycopg.errors.ObjectInUse:
            continue
        admin.execute(
            sql.SQL("DELETE FROM {r} WHERE datname = %s").format(r=sql.Identifier(REGISTRY)),
            (name,),
        )
        dropped.append(name)
    return dropped


def _drop_databases(ctx: BackendContext) -> list[str]:
    """Drop the database of every store under ``ctx.path`` and its registry row; return them.

    The kit calls it (through `drop_databases`) when a check is done with its stores,
    every connection to them closed; ``WITH (FORCE)`` ends one a killed worker left."""
    import psycopg
    from psycopg import sql

    names = names_under(Path(ctx.path))
    if not names:
        return []
    with psycopg.Connection.connect(_dsn(ctx), autocommit=True) as admin:
        for name in names:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            with contextlib.suppress(psycopg.errors.UndefinedTable):  # no store registered yet
                admin.execute(
                    sql.SQL("DELETE FROM {r} WHERE datname = %s").format(
                        r=sql.Identifier(REGISTRY)
                    ),
                    (name,),
                )
    return names


async def drop_databases(ctx: BackendContext) -> list[str]:
    """The stores' databases under ``ctx.path`` dropped (`checkpointspec.spec.DropsStores`),
    so a run leaves nothing on the server."""
    import asyncio

    return await asyncio.to_thread(_drop_databases, ctx)


# The kit takes whatever a factory returns (a saver, an awaitable, a context manager);
# the savers are typed ``object``: LangGraph is not installed where the kit is type-checked.


@drops_stores(drop_databases)
@contextlib.contextmanager
def postgres(ctx: BackendContext) -> Iterator[object]:
    """``langgraph-checkpoint-postgres``'s PostgresSaver on the store's own database."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    claim = _Claim(ctx)
    try:
        conn = Connection.connect(claim.acquire(), row_factory=dict_row, **_CONNECT)
        try:
            saver = PostgresSaver(conn)
            if ctx.options.get("setup") != "caller":  # the kit runs it itself (LGSETUP-002)
                saver.setup()
        except BaseException:
            conn.close()
            raise
    finally:
        claim.release()
    with conn:
        yield saver


@drops_stores(drop_databases)
@contextlib.asynccontextmanager
async def async_postgres(ctx: BackendContext) -> AsyncIterator[object]:
    """``langgraph-checkpoint-postgres``'s AsyncPostgresSaver on the store's own database."""
    import asyncio

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    claim = _Claim(ctx)
    try:
        conninfo = await asyncio.to_thread(claim.acquire)
        conn = await AsyncConnection.connect(conninfo, row_factory=dict_row, **_CONNECT)
        try:
            saver = AsyncPostgresSaver(conn)
            if ctx.options.get("setup") != "caller":  # the kit runs it itself (LGSETUP-002)
                await saver.setup()
        except BaseException:
            await conn.close()
            raise
    finally:
        await asyncio.to_thread(claim.release)
    async with conn:
        yield saver
