"""How the PostgreSQL backend talks to the server: connections, retries and errors.

This module owns everything between an operation and the driver: the handle's
connection pool (`ServerConnections`), running a piece of work on a pooled
connection with retries, committing a write so that a killed client never has
it committed later, translating driver errors into the contract's errors, and
finding out whether a write whose connection died during ``COMMIT`` was
applied. It knows no operation of the contract; `checkpointspec.backends.postgres.checkpointer`
and `checkpointspec.backends.postgres.appends` hand it their statements.

*Concurrent writers.* A handle keeps a `psycopg_pool.AsyncConnectionPool`
(``pool_size`` connections, default 8). Concurrent operations of one process
run on different connections at once; writes to different sessions do not
wait for each other, and their commits share the server's WAL flushes
(PostgreSQL's own group commit). Writes to one session queue on its write lock.

*One function per write.* Every write is a call of one PL/pgSQL function of
the store's schema, in its own transaction at READ COMMITTED: ``BEGIN``, the
call, ``COMMIT``, each awaited (three short round trips cost less CPU than
psycopg's pipeline mode here). ``COMMIT`` is sent only after the call returned
(`ServerConnections.transact`), so the write of a process killed before that
can never commit later.

*Transient errors.* A serialization failure, deadlock, lock timeout, too many
connections or a race to create a row is retried until ``busy_timeout``
(milliseconds, default 5000) has passed, then raised as the retryable
`StoreBusyError`; so is waiting for a free connection. None is ever answered
with a conflict.

*A lost connection.* When the connection dies during a write (server restart,
``pg_terminate_backend``, network), the server rolls back whatever did not
commit, so the write is wholly applied or wholly absent. Before its ``COMMIT``
was sent, it is absent: the write is sent again on a new connection. After, an
append finds out on a new connection (`ServerConnections.find_request`): it
makes sure the old server process is gone (``pg_terminate_backend`` with a
wait, in case only the client side of the connection broke), then looks for
the append's random request id, stored on the first row of its batch. Found,
the append returns its head; absent, it is sent again. A delete is simply sent
again (deleting what is gone does nothing); a truncate, which leaves nothing to
recognise it by, raises `ConnectionLostError` (outcome unknown), as does any
write whose outcome cannot be found out before ``busy_timeout``. Reads retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar

import msgspec
import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...spec import (
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    ConnectionLostError,
    CorruptStoreError,
    InvalidArgumentError,
    ReasonCode,
    SessionLockedError,
    StoreBusyError,
)
from .schema import CONFLICT, LOCKED, TOO_FAR, Conn

__all__ = [
    "CONNECT_TIMEOUT",
    "DAMAGED_FILES",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_POOL_SIZE",
    "CommitAttempt",
    "ConnectionLostError",
    "LostConnection",
    "ServerConnections",
    "ServerUnreachableError",
    "check_dsn",
    "connect",
    "first_line",
]

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long a write retries transient failures, or waits for a connection, before `StoreBusyError`."""

DEFAULT_POOL_SIZE: Final = 8
"""Connections per handle: how many of its operations run on the server at once."""

CONNECT_TIMEOUT: Final = 5
"""Seconds a new connection may take: the first connection of a handle fails fast."""

_TRANSIENT: Final = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "23505",  # unique_violation: two writers racing to create one row
        "53300",  # too_many_connections
    }
)

_T = TypeVar("_T")


class ServerUnreachableError(CheckpointError):
    """Opening a handle failed: the server cannot be reached or refused the connection.

    ``reason`` is libpq's first line (refused, unknown host, authentication
    failed, no such database ...). Nothing was created.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot connect to PostgreSQL: {reason}")
        self.reason = reason

    def __reduce__(self) -> tuple[type[ServerUnreachableError], tuple[str]]:
        return (type(self), (self.reason,))


class LostConnection(msgspec.Struct, frozen=True):
    """A connection that died under a write: its server process and the server it was on."""

    pid: int
    host: str
    port: int


class CommitAttempt:
    """One try of a write: whether its ``COMMIT`` has been sent, and the row its call
    returned. After ``COMMIT`` was sent, a lost connection leaves the outcome to be
    found out, and ``row`` is what the write answers if it is found applied."""

    __slots__ = ("committing", "row")

    def __init__(self) -> None:
        self.committing = False
        self.row: tuple[object, ...] = ()


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (libpq's are long), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_dsn(dsn: str) -> str:
    """``dsn`` if libpq can parse it; `InvalidArgumentError` (``bad_option``) otherwise."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgumentError(
            "dsn", f"not a PostgreSQL connection string: {first_line(exc)}", ReasonCode.BAD_OPTION
        ) from None
    return dsn


async def connect(dsn: str) -> Conn:
    """One autocommit connection outside any pool, for opening and inspecting a store.

    Raises `ServerUnreachableError` (libpq's first line) when the server cannot be
    reached or refuses the connection.
    """
    try:
        return await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        )
    except psycopg.Error as exc:
        raise ServerUnreachableError(first_line(exc)) from None


DAMAGED_FILES: Final = ("XX001", "XX002")
"""SQLSTATEs data_corrupted and index_corrupted: the server found its own files damaged."""


def _is_connection_lost(exc: psycopg.Error) -> bool:
    state = exc.sqlstate or ""
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return True
    return isinstance(exc, psycopg.OperationalError) and not state


class ServerConnections:
    """One handle's connections to the store ``schema`` at ``dsn``, and how work runs on them.

    Nothing connects until `open` starts the pool. ``closed`` is the handle's own
    closed flag: once set, every operation raises `CheckpointerClosedError`.
    """

    def __init__(self, dsn: str, schema: str, pool_size: int, busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self._schema = schema
        self._pool_size = pool_size
        self._busy = busy_timeout_ms / 1000
        self._pool: AsyncConnectionPool[Conn] | None = None
        self.closed = False
        self._sql_find = sql.SQL(
            "SELECT seq FROM {}.events WHERE session_id = %s AND request = %s"
            " ORDER BY seq DESC LIMIT 1"
        ).format(sql.Identifier(schema))

    @property
    def opened(self) -> bool:
        """Whether `open` has started the pool."""
        return self._pool is not None

    async def open(self) -> None:
        """Start the pool (its connections open in the background)."""
        pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._pool_size,
            # application_name lets an operator (and the tests) tell a store's connections.
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT,
                "application_name": f"checkpointspec {self._schema}",
            },
            timeout=max(self._busy, 0.001),
            open=False,
            name=f"checkpointspec-{self._schema}",
        )
        await pool.open(wait=False)
        self._pool = pool

    async def close(self) -> None:
        """Refuse further work and close the pool's connections. Idempotent."""
        self.closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def pool(self, operation: str) -> AsyncConnectionPool[Conn]:
        """The pool, unless the handle is closed or not open (`CheckpointerClosedError`)."""
        pool = self._pool
        if self.closed or pool is None:
            raise CheckpointerClosedError(operation)
        return pool

    # -- running work -----------------------------------------------------------------

    async def run(
        self,
        operation: str,
        session_id: str | None,
        work: Callable[[Conn], Awaitable[_T]],
        *,
        maybe_applied: Callable[[], bool] = lambda: False,
        resolve: Callable[[LostConnection], Awaitable[_T | None]] | None = None,
    ) -> _T:
        """Run ``work`` on a pooled connection, retrying what is transient.

        When the connection dies, ``maybe_applied()`` says whether the write may
        have committed (its ``COMMIT`` was sent). If not, ``work`` simply runs
        again on a new connection. If so, ``resolve(lost)`` (append) is called on
        a new connection, ``lost`` naming the server process of the dead one: it
        returns the write's result when the write is found applied, or None to
        send it again; without ``resolve`` the outcome is unknown and
        `ConnectionLostError` is raised. A contract error a write function raised
        (conflict, locked, beyond the head) is translated and raised at once.
        """
        pool = self.pool(operation)
        started = time.monotonic()
        dead: LostConnection | None = None
        while True:
            try:
                if dead is not None and maybe_applied():
                    if resolve is None:
                        raise ConnectionLostError(
                            operation,
                            session_id or "",
                            "the connection died while the write was committing",
                        )
                    found = await resolve(dead)
                    if found is not None:
                        return found
                dead = None
                async with pool.connection() as conn:
                    this = LostConnection(conn.info.backend_pid, conn.info.host, conn.info.port)
                    try:
                        return await work(conn)
                    except psycopg.Error as exc:
                        if _is_connection_lost(exc) or conn.broken:
                            dead = this
                        raise
            except PoolTimeout as exc:
                raise StoreBusyError(operation, time.monotonic() - started) from exc
            except psycopg.Error as exc:
                translated = self.translate(exc, operation, session_id)
                if translated is not None:
                    raise translated from exc
                lost = dead is not None or _is_connection_lost(exc)
                if not lost and (exc.sqlstate or "") not in _TRANSIENT:
                    raise
                if self.closed:
                    raise CheckpointerClosedError(operation) from exc
                waited = time.monotonic() - started
                if waited >= self._busy:
                    if lost and maybe_applied():
                        raise ConnectionLostError(
                            operation,
                            session_id or "",
                            f"the server stayed unreachable for {waited:.1f}s: {first_line(exc)}",
                        ) from exc
                    raise StoreBusyError(operation, waited) from exc
                if lost:
                    await self._flush_dead(pool)
                    # Reconnecting at once would fail the same way while a server restarts.
                    await asyncio.sleep(min(0.05, self._busy / 20))

    async def transact(
        self, conn: Conn, query: sql.Composed, params: Sequence[object], attempt: CommitAttempt
    ) -> tuple[object, ...]:
        """Run one write function in its own transaction and commit it; return its row.

        ``COMMIT`` is sent only once the function has returned: a client that dies
        before that point leaves nothing the server could commit (see
        `checkpointspec.backends.postgres.schema`). ``attempt`` records whether the
        ``COMMIT`` was sent, and the row.
        """
        attempt.committing = False
        try:
            await conn.execute("BEGIN")
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
        except BaseException:
            if not conn.broken and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            raise
        assert row is not None
        attempt.row = row
        await self.commit(conn, attempt)
        return row

    async def commit(self, conn: Conn, attempt: CommitAttempt) -> None:
        """Send ``COMMIT``, first recording that the outcome may now be applied."""
        attempt.committing = True
        await conn.execute("COMMIT")

    async def find_request(
        self, lost: LostConnection, session_id: str, request: bytes
    ) -> int | None:
        """After a lost ``COMMIT``: the seq of the first event of the append ``request``
        of ``session_id``, or None when it was not applied.

        Runs on a new connection, once server process ``lost.pid`` (the dead
        connection's) is sure to have ended, so the answer cannot change later.
        When the new connection reached another server (libpq took the next host
        of the DSN: a standby promoted after the primary was lost), that server
        holds the write only if it was replicated before the loss, and nothing the
        lost server does can change it: there is no process to end.
        """
        async with self.pool("append").connection() as conn:
            if (conn.info.host, conn.info.port) == (lost.host, lost.port):
                await self._ensure_gone(conn, lost.pid)
            cur = await conn.execute(self._sql_find, (session_id, request))
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def _ensure_gone(self, conn: Conn, pid: int) -> None:
        """Make sure server process ``pid`` (a connection that died on us) has ended.

        Usually it ended with the connection; if only the client side broke, it
        might still commit later, so it is terminated and waited for.
        """
        # A role may not end another role's process; our own connections share our
        # role, so a refusal means the pid was reused: the process we care about is gone.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            await conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = %s",
                (pid,),
            )

    async def _flush_dead(self, pool: AsyncConnectionPool[Conn]) -> None:
        # After a server restart every idle connection is dead: replace them all now
        # rather than meeting them one failed operation at a time.
        with contextlib.suppress(Exception):
            await pool.check()

    # -- errors -----------------------------------------------------------------------

    def translate(
        self, exc: psycopg.Error, operation: str, session_id: str | None
    ) -> CheckpointError | None:
        """The contract error a write function raised (conflict, locked, beyond head), if any."""
        return self.translate_state(
            exc.sqlstate, exc.diag.message_primary or "", operation, session_id
        )

    def translate_state(
        self, state: str | None, message: str, operation: str, session_id: str | None
    ) -> CheckpointError | None:
        """The contract error for a write function's SQLSTATE and message, if it is one.

        Also used for the per-append failures a group call reports as values.
        """
        sid = session_id or ""
        if state == CONFLICT:
            kind, expected, actual = message.split()
            return CheckpointConflictError(
                sid, int(expected), int(actual), "generation" if kind == "generation" else "head"
            )
        if state == LOCKED:
            return SessionLockedError(sid, operation)
        if state == TOO_FAR:
            return InvalidArgumentError(
                "to_seq",
                f"is beyond the head ({message})",
                ReasonCode.BEYOND_HEAD,
                "TRUNC-002",
            )
        if state == "3F000" or state == "42P01" or state == "42883":  # schema, table, function
            return CorruptStoreError(
                session_id, f"schema {self._schema}", f"the store is gone or damaged: {message}"
            )
        if state in DAMAGED_FILES:
            # A page that fails the server's own verification, e.g. a table's new page
            # left torn by a power loss: the store is damaged, not the request wrong.
            return CorruptStoreError(
                session_id, f"schema {self._schema}", f"the server's files are damaged: {message}"
            )
        return None
