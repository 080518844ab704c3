"""Which PostgreSQL schema holds the store of a directory, and removing stores nobody can reach.

The kit names a store by a directory (``ctx.path``); a PostgreSQL store is a
schema. `schema_for` maps one to the other through a marker file in the
directory, ``postgres-store.txt``, which holds the schema's name: a fresh,
random ``cps_<24 hex digits>`` the first time the directory is used (written
atomically, so several processes opening the same new directory agree on
one name), the recorded name every time after. A random name rather than a
hash of the path means that two hosts using the same path on one server, or a
directory deleted and made again, never meet an old store.

Every store the factory creates is also entered in a registry table,
``checkpointspec_registry.stores`` (schema, host, directory). A store whose
directory is gone, or no longer names it, cannot be opened by the factory any
more; `prune_stores` drops such schemas, for the current host only. The
factory runs it after creating a store, so a test run cleans up after the
previous ones without the kit knowing anything about PostgreSQL, and
`drop_store` drops one store at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from pathlib import Path
from typing import Final

import psycopg
from psycopg import sql

from .maintenance import advisory_key
from .schema import Conn, check_schema_name

__all__ = [
    "MARKER_NAME",
    "REGISTRY_SCHEMA",
    "drop_store",
    "names_under",
    "prune_stores",
    "read_marker",
    "register",
    "schema_for",
]

MARKER_NAME: Final = "postgres-store.txt"
"""The file inside ``ctx.path`` that names the store's schema."""

REGISTRY_SCHEMA: Final = "checkpointspec_registry"
"""Where the factory records the stores it created (schema, host, directory)."""

_REGISTRY_KEY: Final = advisory_key(REGISTRY_SCHEMA, "")


def read_marker(directory: Path) -> str | None:
    """The schema named by ``directory``'s marker file, or None when it has none."""
    try:
        text = (directory / MARKER_NAME).read_text(encoding="ascii").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return check_schema_name(text)


def names_under(directory: Path) -> list[str]:
    """The names the store directories under ``directory`` record, sorted: what a check's
    stores are called on the server (a schema here; a recipe for a framework's store may
    name tables or a database by them)."""
    return sorted({n for m in directory.rglob(MARKER_NAME) if (n := read_marker(m.parent))})


def schema_for(directory: Path) -> str:
    """The schema of the store in ``directory``, naming a new one if it has none yet."""
    found = read_marker(directory)
    if found is not None:
        return found
    name = f"cps_{secrets.token_hex(12)}"
    scratch = directory / f".{MARKER_NAME}.{secrets.token_hex(4)}"
    scratch.write_text(name + "\n", encoding="ascii")
    try:
        # link() fails if the marker exists: of two processes naming the store at
        # once, one wins and the other reads the winner's name.
        os.link(scratch, directory / MARKER_NAME)
    except FileExistsError:
        pass
    finally:
        scratch.unlink()
    found = read_marker(directory)
    assert found is not None
    return found


async def _ensure_registry(conn: Conn) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_REGISTRY_KEY,))
    await conn.execute(
        sql.SQL(
            "CREATE SCHEMA IF NOT EXISTS {r};"
            " CREATE TABLE IF NOT EXISTS {r}.stores ("
            " schema_name text PRIMARY KEY, host text NOT NULL, directory text NOT NULL,"
            " created timestamptz NOT NULL DEFAULT now())"
        ).format(r=sql.Identifier(REGISTRY_SCHEMA))
    )


async def register(conn: Conn, schema: str, directory: Path) -> None:
    """Record that ``schema`` is the store of ``directory`` on this host.

    Run it inside the transaction that creates the store.
    """
    await _ensure_registry(conn)
    await conn.execute(
        sql.SQL(
            "INSERT INTO {r}.stores (schema_name, host, directory) VALUES (%s, %s, %s)"
            " ON CONFLICT (schema_name) DO NOTHING"
        ).format(r=sql.Identifier(REGISTRY_SCHEMA)),
        (schema, socket.gethostname(), os.fspath(directory.resolve())),
    )


async def _drop(conn: Conn, schemas: list[str]) -> None:
    """Drop ``schemas`` and their registry rows in one transaction."""
    async with conn.transaction():
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(schema) for schema in schemas)
            )
        )
        await conn.execute(
            sql.SQL("DELETE FROM {r}.stores WHERE schema_name = ANY(%s)").format(
                r=sql.Identifier(REGISTRY_SCHEMA)
            ),
            (schemas,),
        )


async def prune_stores(conn: Conn) -> list[str]:
    """Drop every registered store of this host whose directory no longer names it.

    Returns the schemas dropped. A store still being created is safe: its
    marker file is written before its schema and registry row exist. A store
    some connection still uses is skipped (lock_timeout), not waited for.
    """
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{REGISTRY_SCHEMA}.stores",))
    row = await cur.fetchone()
    if row is None or not row[0]:
        return []
    cur = await conn.execute(
        sql.SQL("SELECT schema_name, directory FROM {r}.stores WHERE host = %s").format(
            r=sql.Identifier(REGISTRY_SCHEMA)
        ),
        (socket.gethostname(),),
    )
    stale: list[str] = []
    for schema, directory in await cur.fetchall():
        try:
            current = read_marker(Path(directory))
        except (OSError, ValueError):
            current = None
        if current != schema:
            stale.append(str(schema))
    if not stale:
        return []
    dropped: list[str] = []
    await conn.execute("SET lock_timeout = 1000")
    try:
        try:
            await _drop(conn, stale)  # one commit for all, the usual case
            dropped = stale
        except psycopg.errors.LockNotAvailable:
            for schema in stale:  # one of them is in use: drop the others
                with contextlib.suppress(psycopg.errors.LockNotAvailable):
                    await _drop(conn, [schema])
                    dropped.append(schema)
    finally:
        if not conn.broken:
            await conn.execute("SET lock_timeout = 0")
    return dropped


async def drop_store(dsn: str, directory: Path) -> str | None:
    """Drop the store of ``directory`` (its schema and registry row) and remove its marker.

    Returns the schema dropped, or None when the directory names no store.
    Every handle on the store must be closed.
    """
    schema = read_marker(directory)
    if schema is None:
        return None
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{REGISTRY_SCHEMA}.stores",)
        )
        row = await cur.fetchone()
        if row is not None and row[0]:
            await _drop(conn, [schema])
        else:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {s} CASCADE").format(s=sql.Identifier(schema))
            )
    (directory / MARKER_NAME).unlink(missing_ok=True)
    return schema
