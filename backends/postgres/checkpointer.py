"""The PostgreSQL reference backend: one schema per store, shared by processes and hosts.

Capabilities: DELETE, LIST, TRUNCATE, GENERATION, DURABLE, MULTI_PROCESS,
CODEC and MAINTENANCE. DURABLE holds as the server is configured:
``fsync=on`` and ``synchronous_commit=on`` (PostgreSQL's defaults) make an
acknowledged commit survive a server crash and a power loss; with
``fsync=off`` a power loss may lose or corrupt committed data, and with
``synchronous_commit=off`` the last commits may be lost, while the database
stays consistent. The backend cannot see how an operator set them up and does
not check.

Concurrency design
------------------
*One function per write.* append, truncate and delete are PL/pgSQL functions
in the store's schema (`checkpointspec.backends.postgres.schema`), each called
in its own transaction at READ COMMITTED: ``BEGIN``, the call, ``COMMIT``, each
awaited (three short round trips cost less CPU than psycopg's pipeline mode
here). Each function takes the session's write lock (an
advisory lock) first and reads the head and generation after it, so ``expected_head`` and
``expected_generation`` are checked against the state the write changes; a
stale writer on any connection, process or host gets a clean
`CheckpointConflictError`.

*Concurrent writers.* A handle keeps a `psycopg_pool.AsyncConnectionPool`
(``pool_size`` connections, default 8). Concurrent operations of one process
run on different connections at once; writes to different sessions do not
wait for each other, and their commits share the server's WAL flushes
(PostgreSQL's own group commit). Writes to one session queue on its write lock.

*Group commit.* Appends a handle is given while two of its transactions are
in flight wait and go together in the next: ``BEGIN``, one ``append_group``
call, ``COMMIT``. Each append of the group runs in its own subtransaction, so
its conflict (or any error) undoes it alone and is answered to it alone; a
group holds at most one append per session (each is checked against committed
state only) and takes the write locks in key order (no cycle between groups
of any processes). One ``COMMIT`` commits the whole group or none of it; a lost
``COMMIT`` is resolved by the request id of one applied append. A lone append
runs on its own as described above. This is what lets one process's many
writers share round trips and CPU instead of paying three round trips each.

*Transient errors.* A serialization failure, deadlock or lock timeout is
retried until ``busy_timeout`` (milliseconds, default 5000) has passed, then
raised as the retryable `StoreBusyError`; so is waiting for a free
connection. None is ever answered with a conflict.

*A lost connection.* When the connection dies during a write (server restart,
``pg_terminate_backend``, network), the server rolls back whatever did not
commit, so the write is wholly applied or wholly absent. Before its ``COMMIT``
was sent, it is absent: the write is sent again on a new connection. After,
the append finds out on a new connection: it makes sure the old server
process is gone (``pg_terminate_backend`` with a wait, in case only the
client side of the connection broke), then looks for the append's random
request id, stored on the first row of its batch. Found, the append returns
its head; absent, it is sent again. A delete is simply sent again (deleting
what is gone does nothing); a truncate, which leaves nothing to recognise it
by, raises `ConnectionLostError` (outcome unknown), as does any write whose
outcome cannot be found out before ``busy_timeout``. Reads retry.

*Writes in flight.* Each write is committed by a ``COMMIT`` the client sends
after the function returned, so the write of a process killed before that
can never commit later; and ``read`` and ``head`` first wait for the session's
write lock, so they never see a state that a dying writer's transaction may
still change (see `checkpointspec.backends.postgres.schema`).

*Reads.* ``read`` fetches the head with every row in one statement (one
snapshot, READ-003), after the wait for the write lock, in one round trip
(pipeline mode), and decodes the rows as it yields them. A whole read is held
in memory as stored bytes.

*Maintenance.* Advisory locks on a dedicated connection, released when it
dies: `checkpointspec.backends.postgres.maintenance`.

Schema and integrity
--------------------
``{schema}.version`` holds the schema version. `MIGRATIONS` lists the steps
from each version to the next; an older store is migrated in one transaction,
a newer one is refused with `SchemaVersionError` before anything is written.
Each event row carries a CRC-32 of its stored payload, so a damaged payload
raises `CorruptStoreError` instead of decoding into a wrong event;
`PostgresCheckpointer.check_integrity` runs the contract's checks in SQL and
checks every payload.

For the conformance kit the class offers `StoreHooks`. It does not offer
`FaultInjectable`: a write runs inside the server, where no hook can pause it;
the kit's kill checks kill writers at random moments instead. Power-loss
simulation (DUR-003) does not apply: durability rests on the server's WAL.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import secrets
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...spec import (
    BackendContext,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    Codec,
    CorruptStoreError,
    IntegrityReport,
    InvalidArgumentError,
    ReasonCode,
    SessionEvent,
    SessionInfo,
    SessionLockedError,
    StoreBusyError,
    StoredEvent,
    check_append_arguments,
    check_expectations,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    encode_event,
)
from ..capabilities import store_capabilities
from ..payloads import Row, open_rows, seal_payloads
from . import schema as store_schema
from . import stores
from .maintenance import Holder, write_key
from .schema import CONFLICT, DEFAULT_SCHEMA, LOCKED, MIGRATIONS, SCHEMA_VERSION, TOO_FAR, Conn

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_POOL_SIZE",
    "DSN_ENVIRONMENT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "ConnectionLostError",
    "PostgresCheckpointer",
    "ServerUnreachableError",
    "check_dsn",
    "dsn_from",
    "make",
    "store_version",
]

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long a write retries transient failures, or waits for a connection, before `StoreBusyError`."""

DEFAULT_POOL_SIZE: Final = 8
"""Connections per handle: how many of its operations run on the server at once."""

DSN_ENVIRONMENT: Final = "CHECKPOINTSPEC_POSTGRES_DSN"
"""The environment variable `make` reads the DSN from when ``--option dsn=...`` is not given."""

_CONNECT_TIMEOUT: Final = 5  # seconds; the first connection of a handle fails fast
_OPTIONS: Final = ("dsn", "pool_size", "busy_timeout")
_TRANSIENT: Final = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "23505",  # unique_violation: two writers racing to create one row
        "53300",  # too_many_connections
    }
)
# Taken before a read: waits for a write of the session in flight (see "Writes in flight").
_WAIT_FOR_WRITES: Final = "SELECT pg_advisory_xact_lock_shared(%s)"
_DECODE_CHUNK: Final = 2048
_SCAN_PAGE: Final = 4096
_MAX_PROBLEMS: Final = 100
# Group commit: appends waiting while these many groups are in flight join the next.
_FLUSHERS: Final = 2
_GROUP_MAX: Final = 64

_T = TypeVar("_T")


class _Pending:
    """One append waiting for a group: its session, function arguments and answer."""

    __slots__ = ("count", "done", "params", "sid")

    def __init__(self, sid: str, params: tuple[object, ...], count: int) -> None:
        self.sid = sid
        self.params = params
        self.count = count
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def answer(self, head: int | None = None, error: BaseException | None = None) -> None:
        if self.done.done():  # the caller was cancelled: nobody is waiting
            return
        if error is not None:
            self.done.set_exception(error)
        else:
            assert head is not None
            self.done.set_result(head)


class _Attempt:
    """Whether a write's ``COMMIT`` has been sent: after that, a lost connection
    leaves its outcome to be found out."""

    __slots__ = ("committing",)

    def __init__(self) -> None:
        self.committing = False


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


class ConnectionLostError(CheckpointError):
    """The connection died while a write was in flight, and its outcome is unknown.

    ``operation`` and ``session_id`` name the write; ``detail`` says why the
    outcome could not be found out (the server stayed unreachable, or the write
    was a truncate or delete, which leave nothing to recognise them by). The
    write is wholly applied or wholly absent: read the head to know which.
    """

    def __init__(self, operation: str, session_id: str, detail: str) -> None:
        super().__init__(f"{operation} of session {session_id!r}: outcome unknown: {detail}")
        self.operation = operation
        self.session_id = session_id
        self.detail = detail
        self.outcome: Literal["unknown"] = "unknown"

    def __reduce__(self) -> tuple[type[ConnectionLostError], tuple[str, str, str]]:
        return (type(self), (self.operation, self.session_id, self.detail))


def _is_connection_lost(exc: psycopg.Error) -> bool:
    state = exc.sqlstate or ""
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return True
    return isinstance(exc, psycopg.OperationalError) and not state


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    # Decoded events form no cycles; the collector would only rescan them (1.4-2x slower).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class PostgresCheckpointer:
    """A conforming checkpointer on one PostgreSQL schema.

    ``PostgresCheckpointer(dsn, schema=...)`` makes an unopened handle; it opens
    on ``await handle.open()`` or ``async with``. ``dsn`` is a libpq connection
    string or URL; ``schema`` a plain lower-case identifier, the store's
    namespace in the database (created on open unless ``create`` is False).
    ``codec`` transforms every stored payload; ``pool_size`` is how many
    connections the handle keeps; ``busy_timeout_ms`` how long transient
    failures are retried before `StoreBusyError`. ``directory`` is the kit's
    store directory (`make` passes ``ctx.path``): a store created is then
    registered under it, and the stores of this host whose directories are gone
    are dropped (`checkpointspec.backends.postgres.stores`).

    Also implements `StoreHooks` for the conformance kit.
    """

    # DURABLE as the server is deployed by default (fsync and synchronous_commit on),
    # which the backend cannot see; every handle of every host shares the store.
    capabilities: frozenset[Capability] = store_capabilities(durable=True, shared=True)

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        codec: Codec | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        create: bool = True,
        directory: Path | None = None,
    ) -> None:
        check_dsn(dsn)
        try:
            store_schema.check_schema_name(schema)
        except ValueError as exc:
            raise InvalidArgumentError("schema", str(exc), ReasonCode.BAD_OPTION) from None
        for name, value, low in (
            ("pool_size", pool_size, 1),
            ("busy_timeout_ms", busy_timeout_ms, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgumentError(name, f"must be an int >= {low}", ReasonCode.BAD_OPTION)
        self._dsn = dsn
        self._schema = schema
        self._codec = codec
        self._pool_size = pool_size
        self._busy = busy_timeout_ms / 1000
        self._create = create
        self._directory = directory
        self._created = False
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]] | None = None
        self._closed = False
        self._holder = Holder(dsn, schema, busy_timeout_ms, _CONNECT_TIMEOUT)
        self._waiting: list[_Pending] = []
        self._flushers = 0
        self._tasks: set[asyncio.Task[None]] = set()
        s = sql.Identifier(schema)
        self._sql_append = sql.SQL("SELECT {}.append(%s, %s, %s, %s, %s, %s, %s, %s, %s)").format(s)
        self._sql_group = sql.SQL(
            "SELECT * FROM {}.append_group(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        ).format(s)
        self._sql_truncate = sql.SQL("SELECT {}.truncate(%s, %s, %s, %s, %s, %s)").format(s)
        self._sql_delete = sql.SQL("SELECT {}.delete(%s, %s, %s)").format(s)
        self._sql_state = sql.SQL(
            "SELECT coalesce((SELECT head FROM {s}.sessions WHERE session_id = %(s)s), 0),"
            " coalesce((SELECT generation FROM {s}.generations WHERE session_id = %(s)s), 0),"
            " %(k)s::bigint IS NULL OR pg_try_advisory_xact_lock_shared(%(k)s::bigint)"
        ).format(s=s)
        self._sql_head = sql.SQL("SELECT head FROM {}.sessions WHERE session_id = %s").format(s)
        self._sql_generation = sql.SQL(
            "SELECT generation FROM {}.generations WHERE session_id = %s"
        ).format(s)
        # One statement, one snapshot (READ-003): the head comes with every row, and a
        # session with no rows after since_seq still yields one row carrying its head.
        self._sql_rows = sql.SQL(
            "SELECT s.head, e.seq, e.ts, e.crc, e.payload FROM {s}.sessions AS s"
            " LEFT JOIN {s}.events AS e ON e.session_id = s.session_id AND e.seq > %(since)s"
            " WHERE s.session_id = %(s)s ORDER BY e.seq"
        ).format(s=s)
        self._sql_list = sql.SQL(
            'SELECT session_id, mtime FROM {}.sessions ORDER BY mtime DESC, session_id COLLATE "C"'
        ).format(s)
        self._sql_find = sql.SQL(
            "SELECT seq FROM {}.events WHERE session_id = %s AND request = %s"
            " ORDER BY seq DESC LIMIT 1"
        ).format(s)
        self._sql_page = sql.SQL(
            "SELECT session_id, seq, crc, payload FROM {}.events"
            " WHERE (session_id, seq) > (%s, %s) ORDER BY session_id, seq LIMIT %s"
        ).format(s)

    @property
    def schema(self) -> str:
        """The PostgreSQL schema that holds this store."""
        return self._schema

    @property
    def created(self) -> bool:
        """Whether opening this handle created the store."""
        return self._created

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> PostgresCheckpointer:
        """Connect, create or migrate the store, and start the pool; returns the handle.

        Raises `SchemaVersionError` for a store written by a newer schema, changing
        nothing; `ServerUnreachableError` when the server cannot be reached or
        refuses the connection (the message says why).
        """
        if self._closed:
            raise CheckpointerClosedError("open")
        if self._pool is not None:
            return self
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            )
        except psycopg.Error as exc:
            raise ServerUnreachableError(_first_line(exc)) from None
        directory = self._directory

        async def register(conn: Conn) -> None:
            if directory is not None:
                await stores.register(conn, self._schema, directory)

        async with conn:
            self._created = await store_schema.open_store(
                conn, self._schema, create=self._create, on_create=register
            )
            if self._created and directory is not None:
                await stores.prune_stores(conn)
        pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._pool_size,
            # application_name lets an operator (and the tests) tell a store's connections.
            kwargs={
                "autocommit": True,
                "connect_timeout": _CONNECT_TIMEOUT,
                "application_name": f"checkpointspec {self._schema}",
            },
            timeout=max(self._busy, 0.001),
            open=False,
            name=f"checkpointspec-{self._schema}",
        )
        await pool.open(wait=False)
        self._pool = pool
        return self

    async def __aenter__(self) -> PostgresCheckpointer:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the maintenance locks and the pool's connections.

        Idempotent; every later operation raises `CheckpointerClosedError`. Other
        handles on the same store are unaffected. Operations in flight finish first.
        """
        if self._closed:
            return
        while self._tasks:  # appends already submitted are sent and answered first
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._closed = True
        try:
            await self._holder.close()
        finally:
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()

    def _check_open(self, operation: str) -> AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]:
        pool = self._pool
        if self._closed or pool is None:
            raise CheckpointerClosedError(operation)
        return pool

    # -- running statements -----------------------------------------------------------

    async def _run(
        self,
        operation: str,
        session_id: str | None,
        work: Callable[[Conn], Awaitable[_T]],
        *,
        maybe_applied: Callable[[], bool] = lambda: False,
        resolve: Callable[[int], Awaitable[_T | None]] | None = None,
    ) -> _T:
        """Run ``work`` on a pooled connection, retrying what is transient.

        When the connection dies, ``maybe_applied()`` says whether the write may
        have committed (its ``COMMIT`` was sent). If not, ``work`` simply runs
        again on a new connection. If so, ``resolve(pid)`` (append) is called on
        a new connection, ``pid`` being the server process of the dead one: it
        returns the write's result when the write is found applied, or None to
        send it again; without ``resolve`` the outcome is unknown and
        `ConnectionLostError` is raised.
        """
        pool = self._check_open(operation)
        started = time.monotonic()
        lost_pid: int | None = None
        while True:
            try:
                if lost_pid is not None and maybe_applied():
                    if resolve is None:
                        raise ConnectionLostError(
                            operation,
                            session_id or "",
                            "the connection died while the write was committing",
                        )
                    found = await resolve(lost_pid)
                    if found is not None:
                        return found
                lost_pid = None
                async with pool.connection() as conn:
                    pid = conn.info.backend_pid
                    try:
                        return await work(conn)
                    except psycopg.Error as exc:
                        if _is_connection_lost(exc) or conn.broken:
                            lost_pid = pid
                        raise
            except PoolTimeout as exc:
                raise StoreBusyError(operation, time.monotonic() - started) from exc
            except psycopg.Error as exc:
                translated = self._translate(exc, operation, session_id)
                if translated is not None:
                    raise translated from exc
                lost = lost_pid is not None or _is_connection_lost(exc)
                if not lost and (exc.sqlstate or "") not in _TRANSIENT:
                    raise
                if self._closed:
                    raise CheckpointerClosedError(operation) from exc
                waited = time.monotonic() - started
                if waited >= self._busy:
                    if lost and maybe_applied():
                        raise ConnectionLostError(
                            operation,
                            session_id or "",
                            f"the server stayed unreachable for {waited:.1f}s: {_first_line(exc)}",
                        ) from exc
                    raise StoreBusyError(operation, waited) from exc
                if lost:
                    await self._flush_dead(pool)
                    # Reconnecting at once would fail the same way while a server restarts.
                    await asyncio.sleep(min(0.05, self._busy / 20))

    async def _transact(
        self, conn: Conn, query: sql.Composed, params: Sequence[object], attempt: _Attempt
    ) -> object:
        """Run one write function in its own transaction and commit it; return its value.

        ``COMMIT`` is sent only once the function has returned: a client that dies before that point
        leaves nothing the server could commit (see `schema`). ``attempt`` records
        whether the ``COMMIT`` was sent.
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
        await self._commit(conn, attempt)
        return row[0]

    async def _commit(self, conn: Conn, attempt: _Attempt) -> None:
        """Send ``COMMIT``, first recording that the outcome may now be applied."""
        attempt.committing = True
        await conn.execute("COMMIT")

    async def _flush_dead(
        self, pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]
    ) -> None:
        # After a server restart every idle connection is dead: replace them all now
        # rather than meeting them one failed operation at a time.
        with contextlib.suppress(Exception):
            await pool.check()

    def _translate(
        self, exc: psycopg.Error, operation: str, session_id: str | None
    ) -> CheckpointError | None:
        """The contract error a function raised (conflict, locked, beyond head), if any."""
        return self._translate_state(
            exc.sqlstate, exc.diag.message_primary or "", operation, session_id
        )

    def _translate_state(
        self, state: str | None, message: str, operation: str, session_id: str | None
    ) -> CheckpointError | None:
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
        return None

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

    # -- payloads -------------------------------------------------------------------

    def _encode(self, session_id: str, payloads: list[bytes]) -> list[bytes]:
        return seal_payloads(session_id, payloads, self._codec)

    def _decode(self, session_id: str, rows: Sequence[Row], first_seq: int) -> list[StoredEvent]:
        return open_rows(session_id, rows, first_seq, self._codec)

    # -- the contract ---------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Append ``events`` atomically and return the new head (see `Checkpointer.append`).

        One transaction, possibly shared with the handle's other appends waiting
        meanwhile (group commit, see the module docstring); each append's outcome
        is its own. A stale ``expected_head`` or ``expected_generation`` raises
        `CheckpointConflictError`; transient server
        errors past the busy timeout raise `StoreBusyError`; a connection lost
        mid-append is resolved (see the module docstring).
        """
        self._check_open("append")
        sid, batch, want_head, want_generation = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        payloads = [encode_event(event) for event in batch]  # EVENT-002 before the store
        key = self._holder.lock_key(sid)
        wkey = write_key(self._schema, sid)
        if not batch:
            return await self._empty_append(sid, want_head, want_generation, key)
        payloads = self._encode(sid, payloads)
        crcs = [zlib.crc32(payload) for payload in payloads]
        request = secrets.token_bytes(16)
        ts = datetime.now(UTC).isoformat()
        params = (sid, payloads, crcs, ts, want_head, want_generation, key, wkey, request)
        pending = _Pending(sid, params, len(payloads))
        self._waiting.append(pending)
        if self._flushers < _FLUSHERS:
            self._flushers += 1
            task = asyncio.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await pending.done

    # -- group commit ---------------------------------------------------------------

    async def _drain(self) -> None:
        """Send the waiting appends in groups until none is left.

        Runs as a task of its own, so a cancelled caller never leaves the other
        appends of its group unanswered.
        """
        try:
            while self._waiting:
                await self._send_group(self._take_group())
        finally:
            self._flushers -= 1

    def _take_group(self) -> list[_Pending]:
        """Up to `_GROUP_MAX` waiting appends, at most one per session, in write-lock order.

        One per session keeps each append's expectations checked against committed
        state only; the write-lock order (the same in every process) keeps two
        groups from waiting for each other's locks.
        """
        group: list[_Pending] = []
        rest: list[_Pending] = []
        sessions: set[str] = set()
        for pending in self._waiting:
            if len(group) < _GROUP_MAX and pending.sid not in sessions:
                sessions.add(pending.sid)
                group.append(pending)
            else:
                rest.append(pending)
        self._waiting = rest
        group.sort(key=lambda pending: cast(int, pending.params[7]))
        return group

    async def _send_group(self, group: list[_Pending]) -> None:
        if len(group) == 1:
            await self._send_alone(group[0])
            return
        try:
            results = await self._append_group(group)
        except Exception as exc:
            for pending in group:
                pending.answer(error=exc)
            return
        for pending, (head, state, message) in zip(group, results, strict=True):
            if state is None:
                assert head is not None
                pending.answer(int(head))
                continue
            error = self._translate_state(state, message or "", "append", pending.sid)
            if error is not None:
                pending.answer(error=error)
            else:  # transient or unexpected: alone, it retries or raises the real error
                await self._send_alone(pending)

    async def _send_alone(self, pending: _Pending) -> None:
        try:
            pending.answer(await self._append_one(pending))
        except Exception as exc:
            pending.answer(error=exc)

    async def _append_one(self, pending: _Pending) -> int:
        """One append in its own transaction (see the module docstring)."""
        sid, params = pending.sid, pending.params
        request = params[8]
        attempt = _Attempt()

        async def send(conn: Conn) -> int:
            return int(cast(int, await self._transact(conn, self._sql_append, params, attempt)))

        async def resolve(pid: int) -> int | None:
            pool = self._check_open("append")
            async with pool.connection() as conn:
                await self._ensure_gone(conn, pid)
                cur = await conn.execute(self._sql_find, (sid, request))
                row = await cur.fetchone()
            return None if row is None else int(row[0]) + pending.count - 1

        return await self._run(
            "append", sid, send, maybe_applied=lambda: attempt.committing, resolve=resolve
        )

    async def _append_group(
        self, group: list[_Pending]
    ) -> list[tuple[int | None, str | None, str | None]]:
        """Several appends of distinct sessions in one transaction: per append, its new
        head or the (sqlstate, message) of its own failure, which undid it alone."""
        columns: list[list[object]] = [[] for _ in range(10)]
        sessions, counts, payloads, crcs, stamps, heads, generations, keys, wkeys, requests = (
            columns
        )
        for pending in group:
            sid, batch, batch_crcs, ts, want_head, want_generation, key, wkey, request = (
                pending.params
            )
            sessions.append(sid)
            counts.append(pending.count)
            payloads.extend(cast(list[bytes], batch))
            crcs.extend(cast(list[int], batch_crcs))
            stamps.append(ts)
            heads.append(want_head)
            generations.append(want_generation)
            keys.append(key)
            wkeys.append(wkey)
            requests.append(request)
        attempt = _Attempt()
        results: list[tuple[int | None, str | None, str | None]] = []

        async def send(conn: Conn) -> list[tuple[int | None, str | None, str | None]]:
            attempt.committing = False
            try:
                await conn.execute("BEGIN")
                cur = await conn.execute(self._sql_group, columns)
                row = await cur.fetchone()
            except BaseException:
                if not conn.broken and not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
                raise
            assert row is not None
            results[:] = list(zip(row[0], row[1], row[2], strict=True))
            await self._commit(conn, attempt)
            return results

        async def resolve(pid: int) -> list[tuple[int | None, str | None, str | None]] | None:
            # The group committed wholly or not at all: one applied append tells.
            applied = [i for i, (_, state, _) in enumerate(results) if state is None]
            if not applied:
                return results  # nothing to commit; each failure stands as answered
            pool = self._check_open("append")
            async with pool.connection() as conn:
                await self._ensure_gone(conn, pid)
                cur = await conn.execute(
                    self._sql_find, (sessions[applied[0]], requests[applied[0]])
                )
                row = await cur.fetchone()
            return None if row is None else results

        return await self._run(
            "append", None, send, maybe_applied=lambda: attempt.committing, resolve=resolve
        )

    async def _empty_append(
        self, sid: str, want_head: int | None, want_generation: int | None, key: int | None
    ) -> int:
        async def check(conn: Conn) -> tuple[int, int, bool]:
            cur = await conn.execute(self._sql_state, {"s": sid, "k": key})
            row = await cur.fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), bool(row[2])

        head, generation, writable = await self._run("append", sid, check)
        if not writable:
            raise SessionLockedError(sid, "append")
        check_expectations(sid, head, generation, want_head, want_generation)
        return head

    async def _read_rows(self, sid: str, since: int) -> tuple[int, list[Row]]:
        wkey = write_key(self._schema, sid)

        async def fetch(conn: Conn) -> tuple[int, list[Row]]:
            cur = conn.cursor(binary=True)
            async with conn.pipeline():
                await conn.execute(_WAIT_FOR_WRITES, (wkey,))
                await cur.execute(self._sql_rows, {"s": sid, "since": since})
            with _gc_paused():
                found = await cur.fetchall()
                if not found:
                    return 0, []
                rows: list[Row] = [row[1:] for row in found if row[1] is not None]
            return int(found[0][0]), rows

        return await self._run("read", sid, fetch)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        """Yield the events with seq > ``since_seq`` from one snapshot of the log.

        A payload whose checksum does not match, or that is not a valid event,
        raises `CorruptStoreError`; a codec failure raises `CodecError`. Nothing is
        skipped or rewritten.
        """
        self._check_open("read")
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        head, rows = await self._read_rows(sid, since)
        if len(rows) != max(head - since, 0):
            raise CorruptStoreError(
                sid, "events", f"head is {head} but {len(rows)} events follow seq {since}"
            )
        for start in range(0, len(rows), _DECODE_CHUNK):
            with _gc_paused():
                chunk = self._decode(sid, rows[start : start + _DECODE_CHUNK], since + start + 1)
            for stored in chunk:
                yield stored

    async def _one(self, operation: str, query: sql.Composed, sid: str) -> int:
        wkey = write_key(self._schema, sid)

        async def fetch(conn: Conn) -> int:
            async with conn.pipeline():
                await conn.execute(_WAIT_FOR_WRITES, (wkey,))
                cur = await conn.execute(query, (sid,))
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(operation, sid, fetch)

    async def head(self, session_id: str) -> int:
        """The seq of the session's last event; 0 if it has none or is unknown."""
        self._check_open("head")
        return await self._one("head", self._sql_head, check_session_id(session_id))

    async def generation(self, session_id: str) -> int:
        """The session id's generation: 0, then one more per delete or shortening truncate."""
        self._check_open("generation")
        return await self._one("generation", self._sql_generation, check_session_id(session_id))

    async def list_sessions(self) -> list[SessionInfo]:
        """Every existing session, most recently modified first; ties by id ascending.

        Ids compare by code point (``COLLATE "C"``), as Python compares them.
        """
        self._check_open("list_sessions")

        async def fetch(conn: Conn) -> list[SessionInfo]:
            cur = await conn.execute(self._sql_list)
            return [SessionInfo(str(sid), float(mtime)) for sid, mtime in await cur.fetchall()]

        return await self._run("list_sessions", None, fetch)

    async def delete(self, session_id: str) -> None:
        """Remove a session and its events in one transaction; unknown ids do nothing.

        After a lost connection the delete is sent again: deleting what is gone
        does nothing, and the generation only grows when a session existed.
        """
        self._check_open("delete")
        sid = check_session_id(session_id)
        params = (sid, self._holder.lock_key(sid), write_key(self._schema, sid))
        attempt = _Attempt()

        async def send(conn: Conn) -> None:
            await self._transact(conn, self._sql_delete, params, attempt)

        # Sent again even after a lost COMMIT: deleting what is gone does nothing.
        await self._run("delete", sid, send)

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Keep events ``1..to_seq`` and return ``to_seq``, in one transaction.

        ``to_seq`` beyond the head raises `InvalidArgumentError`; truncating to the
        head changes nothing (not even mtime); truncating to 0 keeps the session
        listed, empty; an unknown session is not created. A connection lost
        while the truncate was committing raises `ConnectionLostError`: sending it
        again could cut events appended meanwhile.
        """
        self._check_open("truncate")
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        params = (
            sid,
            target,
            want_head,
            want_generation,
            self._holder.lock_key(sid),
            write_key(self._schema, sid),
        )
        attempt = _Attempt()

        async def send(conn: Conn) -> int:
            return int(cast(int, await self._transact(conn, self._sql_truncate, params, attempt)))

        return await self._run("truncate", sid, send, maybe_applied=lambda: attempt.committing)

    async def check_integrity(self) -> IntegrityReport:
        """Run the contract's checks in SQL and check every payload; change nothing.

        Checked: the schema version, that each session's events are exactly seqs
        ``1..head``, that no event lacks its session, that generations are not
        negative, that no mtime is far in the future, and that every payload
        matches its checksum and decodes (through the codec) into an event.
        Problems are reported, never raised or repaired.
        """
        self._check_open("check_integrity")

        async def structure(conn: Conn) -> tuple[list[str], int, int]:
            return await store_schema.structure_problems(conn, self._schema)

        problems, sessions, events = await self._run("check_integrity", None, structure)
        problems += await self._payload_problems()
        shown = problems[:_MAX_PROBLEMS]
        if len(problems) > _MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - _MAX_PROBLEMS} more problems")
        where = f"schema {self._schema}"
        if problems:
            detail = f"{len(problems)} problems in {where}; first: {problems[0]}"
        else:
            detail = f"{where}: {sessions} sessions, {events} events checked"
        return IntegrityReport(ok=not problems, detail=detail, problems=tuple(shown))

    async def _payload_problems(self) -> list[str]:
        # Paged by key, so a large store is never held in memory at once; each row is
        # checked on its own, so pages from different moments report no false problems.
        problems: list[str] = []
        after = ("", 0)
        while True:

            async def page(conn: Conn, after: tuple[str, int] = after) -> list[tuple[str, Row]]:
                cur = conn.cursor(binary=True)
                await cur.execute(self._sql_page, (*after, _SCAN_PAGE))
                return [
                    (str(r[0]), (int(r[1]), "", int(r[2]), bytes(r[3])))
                    for r in await cur.fetchall()
                ]

            rows = await self._run("check_integrity", None, page)
            for sid, row in rows:
                try:
                    self._decode(sid, [row], row[0])
                except CheckpointError as err:
                    problems.append(str(err))
            if len(rows) < _SCAN_PAGE:
                return problems
            after = (rows[-1][0], rows[-1][1][0])

    # -- maintenance ------------------------------------------------------------------

    async def acquire_maintenance(self, session_id: str) -> None:
        """Hold ``session_id``: only this handle may write to it until it releases it or closes.

        The session need not exist. Raises `SessionLockedError` when any handle, in
        any process or host, this one included, holds it. The lock is an advisory
        lock on a connection of this handle's own: it ends when that connection
        does, so a dead holder never blocks a session.
        """
        self._check_open("acquire_maintenance")
        sid = check_session_id(session_id)
        try:
            await self._holder.acquire(sid)
        except psycopg.Error as exc:
            raise StoreBusyError("acquire_maintenance", 0.0) from exc

    async def release_maintenance(self, session_id: str) -> None:
        """Give ``session_id`` back to every writer. Does nothing unless this handle holds it."""
        self._check_open("release_maintenance")
        sid = check_session_id(session_id)
        with contextlib.suppress(psycopg.OperationalError):  # a dead connection released it
            await self._holder.release(sid)

    # -- ExternalStorage ---------------------------------------------------------------

    async def drop_stores(self, directory: Path) -> list[str]:
        """Drop the stores whose directories lie under ``directory`` (their schemas and
        registry rows), every handle on them closed; return the schemas dropped.

        The kit calls it when a check is over, so its stores do not outlive it; a
        store this misses (a killed run) is dropped by the next factory call's
        `stores.prune_stores` once its directory is gone.
        """
        dropped = []
        for marker in sorted(Path(directory).rglob(stores.MARKER_NAME)):
            schema = await stores.drop_store(self._dsn, marker.parent)
            if schema is not None:
                dropped.append(schema)
        return dropped

    # -- StoreHooks -----------------------------------------------------------------

    def mark_newer_schema(self, path: Path) -> None:
        """Mark the closed store of directory ``path`` as written by `SCHEMA_VERSION` + 1.

        The next open refuses it with `SchemaVersionError` and changes nothing.
        """
        store_schema.mark_newer_schema(self._dsn, self._schema_of(path))

    def damage_store(self, path: Path) -> str:
        """Flip one bit inside a stored payload of the closed store of ``path``; say which.

        The event's checksum no longer matches: `check_integrity` reports it and a
        read of that session raises `CorruptStoreError`.
        """
        return store_schema.damage_store(self._dsn, self._schema_of(path))

    def _schema_of(self, path: Path) -> str:
        found = stores.read_marker(Path(path))
        return self._schema if found is None else found


# -- factory --------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgumentError(
            "options", f"{name}={raw!r} is not an int", ReasonCode.BAD_OPTION
        ) from None


def check_dsn(dsn: str) -> str:
    """``dsn`` if libpq can parse it; `InvalidArgumentError` (``bad_option``) otherwise."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgumentError(
            "dsn", f"not a PostgreSQL connection string: {_first_line(exc)}", ReasonCode.BAD_OPTION
        ) from None
    return dsn


def dsn_from(options: Mapping[str, str]) -> str:
    """The DSN: ``options["dsn"]``, else ``$CHECKPOINTSPEC_POSTGRES_DSN``; else an error."""
    dsn = options.get("dsn") or os.environ.get(DSN_ENVIRONMENT, "")
    if not dsn:
        raise InvalidArgumentError(
            "dsn",
            f"no PostgreSQL DSN: pass --option dsn=postgresql://... or set {DSN_ENVIRONMENT}",
            ReasonCode.BAD_OPTION,
        )
    return dsn


async def store_version(dsn: str, schema: str = DEFAULT_SCHEMA) -> int:
    """The schema version of the store ``schema`` at ``dsn``; 0 when there is none.

    Reads only. Raises `InvalidArgumentError` for a malformed DSN and
    `ServerUnreachableError` when the server cannot be reached.
    """
    check_dsn(dsn)
    store_schema.check_schema_name(schema)
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
        )
    except psycopg.Error as exc:
        raise ServerUnreachableError(_first_line(exc)) from None
    async with conn:
        return await store_schema.stored_version(conn, schema)


async def make(ctx: BackendContext) -> PostgresCheckpointer:
    """Factory for the kit: open the store of directory ``ctx.path``, creating it if needed.

    The store is its own schema, named in ``ctx.path / "postgres-store.txt"``
    (see `checkpointspec.backends.postgres.stores`). ``ctx.options`` may set
    ``dsn`` (else ``$CHECKPOINTSPEC_POSTGRES_DSN``), ``pool_size`` (default 8)
    and ``busy_timeout`` (milliseconds, default 5000). ``ctx.codec`` is applied
    to every payload. After creating a store the factory drops the stores of
    this host whose directories are gone (`stores.prune_stores`). Raises
    `SchemaVersionError` for a newer store, `InvalidArgumentError` for a
    missing or malformed DSN, `ServerUnreachableError` when the server cannot
    be reached.
    """
    options = dict(ctx.options)
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InvalidArgumentError(
            "options", f"unknown {unknown}; known: {list(_OPTIONS)}", ReasonCode.UNKNOWN_OPTION
        )
    dsn = dsn_from(options)
    pool_size = _int_option(options, "pool_size", DEFAULT_POOL_SIZE)
    busy_timeout = _int_option(options, "busy_timeout", DEFAULT_BUSY_TIMEOUT_MS)
    directory = Path(ctx.path)
    check_dsn(dsn)  # before a marker file is written
    handle = PostgresCheckpointer(
        dsn,
        schema=stores.schema_for(directory),
        codec=ctx.codec,
        pool_size=pool_size,
        busy_timeout_ms=busy_timeout,
        directory=directory,
    )
    return await handle.open()
