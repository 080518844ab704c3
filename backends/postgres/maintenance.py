"""The PostgreSQL backend's maintenance lock: advisory locks on a connection of the holder's own.

A handle holds a session (MAINTENANCE) with a session-level *exclusive*
advisory lock on the session's key (`advisory_key`), taken on a dedicated
connection that the handle opens on its first ``acquire_maintenance`` and keeps
until it closes. PostgreSQL releases a session-level advisory lock when the
connection that holds it ends, so the death of the holder's process (or
host) releases it (MAINT-004): nothing is recorded in a table, nothing needs
clearing.

Every write of another handle runs ``pg_try_advisory_xact_lock_shared`` on the
key inside its own transaction, before it reads the head (see the functions in
`checkpointspec.backends.postgres.schema`): while the exclusive lock is held
the try fails at once and the write raises `SessionLockedError` (MAINT-001);
otherwise the shared lock lasts until the write commits. The holder's own
writes skip the check (MAINT-002): the handle knows which sessions it holds.

``acquire`` first tries the exclusive lock without waiting. When that fails, it
looks in ``pg_locks``: another holder's exclusive lock means
`SessionLockedError` (MAINT-003); shared locks only (writes in flight) mean it
waits for them, up to the handle's busy timeout (then `StoreBusyError`).

Keys are 64-bit hashes of (schema, session id); two sessions whose keys
collide (odds 2^-64 per pair) would share a lock, which refuses writes that
could have gone ahead but never lets one through that should not.
"""

from __future__ import annotations

import hashlib
import time
from typing import Final

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

from ...spec import SessionLockedError, StoreBusyError

__all__ = ["Holder", "advisory_key", "write_key"]

_EXCLUSIVE_HELD: Final = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND mode = 'ExclusiveLock' AND database = (SELECT oid FROM pg_database"
    " WHERE datname = current_database()) AND classid = %s::bigint::oid"
    " AND objid = %s::bigint::oid AND objsubid = 1)"
)


def advisory_key(schema: str, session_id: str) -> int:
    """The signed 64-bit advisory-lock key of ``session_id`` in the store ``schema``."""
    digest = hashlib.blake2b(
        schema.encode() + b"\x00" + session_id.encode("utf-8"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def write_key(schema: str, session_id: str) -> int:
    """The key of ``session_id``'s write lock, distinct from its maintenance key.

    Writers hold it exclusively until they commit; readers take it shared.
    """
    return advisory_key(schema, session_id + "\x00write")  # ids hold no NUL: no clash


class Holder:
    """One handle's maintenance locks: its dedicated connection and the sessions it holds."""

    def __init__(self, dsn: str, schema: str, busy_timeout_ms: int, connect_timeout: int) -> None:
        self._dsn = dsn
        self._schema = schema
        self._busy_timeout_ms = busy_timeout_ms
        self._connect_timeout = connect_timeout
        self._conn: psycopg.AsyncConnection[TupleRow] | None = None
        self.held: set[str] = set()

    def key(self, session_id: str) -> int:
        """The advisory-lock key of ``session_id`` in this handle's store."""
        return advisory_key(self._schema, session_id)

    def lock_key(self, session_id: str) -> int | None:
        """What a write passes as ``p_lock_key``: None when this handle holds the session."""
        return None if session_id in self.held else self.key(session_id)

    async def _connection(self) -> psycopg.AsyncConnection[TupleRow]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            # A dead connection took its locks with it: nothing is held any more.
            self.held.clear()
            conn = self._conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=self._connect_timeout
            )
        return conn

    async def acquire(self, session_id: str) -> None:
        """Hold ``session_id``; `SessionLockedError` if any handle holds it (this one too)."""
        if session_id in self.held:
            raise SessionLockedError(session_id, "acquire_maintenance")
        conn = await self._connection()
        key = self.key(session_id)
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
        row = await cur.fetchone()
        if row is None or not row[0]:
            cur = await conn.execute(_EXCLUSIVE_HELD, ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF))
            held = await cur.fetchone()
            if held is not None and held[0]:
                raise SessionLockedError(session_id, "acquire_maintenance")
            # Only writes in flight hold the key (shared, until they commit): wait for them.
            started = time.monotonic()
            try:
                await conn.execute(f"SET lock_timeout = {int(self._busy_timeout_ms)}")
                await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            except pg_errors.LockNotAvailable as exc:
                raise StoreBusyError("acquire_maintenance", time.monotonic() - started) from exc
            finally:
                if not conn.broken:
                    await conn.execute("SET lock_timeout = 0")
        self.held.add(session_id)

    async def release(self, session_id: str) -> None:
        """Give ``session_id`` back; nothing happens unless this handle holds it."""
        if session_id not in self.held:
            return
        self.held.discard(session_id)
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return  # the lock went with the connection
        await conn.execute("SELECT pg_advisory_unlock(%s)", (self.key(session_id),))

    async def close(self) -> None:
        """Release everything by ending the dedicated connection."""
        self.held.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
