"""The PostgreSQL backend's handle: the contract's operations on one schema of a server.

`PostgresCheckpointer` validates arguments, encodes and decodes payloads, and
runs each operation as statements of the store's schema; `make` is the kit's
factory. What it hands on: connections, retries, error translation and lost
connections are `checkpointspec.backends.postgres.connections`; appends, alone
or grouped in one transaction, `checkpointspec.backends.postgres.appends`; the
tables, write functions, migrations and integrity checks
`checkpointspec.backends.postgres.schema`; the maintenance lock
`checkpointspec.backends.postgres.maintenance`; which schema a kit directory
names `checkpointspec.backends.postgres.stores`. docs/postgres.md is the
reference for operators.

Capabilities: DELETE, LIST, TRUNCATE, GENERATION, DURABLE, MULTI_PROCESS,
CODEC and MAINTENANCE. DURABLE holds as the server is configured:
``fsync=on`` and ``synchronous_commit=on`` (PostgreSQL's defaults) make an
acknowledged commit survive a server crash and a power loss; with
``fsync=off`` a power loss may lose or corrupt committed data, and with
``synchronous_commit=off`` the last commits may be lost, while the database
stays consistent. The backend cannot see how an operator set them up and does
not check.

*Writes.* append, truncate and delete are PL/pgSQL functions of the schema,
each called in its own transaction. Each takes the session's write lock (an
advisory lock) first and reads the head and generation after it, so
``expected_head`` and ``expected_generation`` are checked against the state the
write changes; a stale writer on any connection, process or host gets a clean
`CheckpointConflictError`.

*Writes in flight.* Each write is committed by a ``COMMIT`` the client sends
after the function returned, so the write of a process killed before that
can never commit later; and ``read`` and ``head`` first wait for the session's
write lock, so they never see a state that a dying writer's transaction may
still change (see `checkpointspec.backends.postgres.schema`).

*Reads.* ``read`` fetches the head with every row in one statement (one
snapshot, READ-003), after the wait for the write lock, in one round trip
(pipeline mode), and decodes the rows as it yields them. A whole read is held
in memory as stored bytes.

*Schema and integrity.* ``{schema}.version`` holds the schema version.
`MIGRATIONS` lists the steps from each version to the next; an older store is
migrated in one transaction, a newer one is refused with `SchemaVersionError`
before anything is written. Each event row carries a CRC-32 of its stored
payload, so a damaged payload raises `CorruptStoreError` instead of decoding
into a wrong event; `PostgresCheckpointer.check_integrity` runs the contract's
checks in SQL and checks every payload.

For the conformance kit the class offers `StoreHooks`. It does not offer
`FaultInjectable`: a write runs inside the server, where no hook can pause it;
the kit's kill checks kill writers at random moments instead. Power-loss
simulation (DUR-003) does not apply: durability rests on the server's WAL.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Final, TypeVar, cast

import psycopg
from psycopg import sql

from ...spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    CheckpointError,
    Codec,
    CorruptStoreError,
    IntegrityReport,
    InvalidArgumentError,
    ReasonCode,
    ServerAddress,
    ServerControl,
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
from ..payloads import Row, gc_paused, open_rows, seal_payloads, stored_events
from . import cluster, stores
from . import schema as store_schema
from .appends import AppendRequest, Appends
from .connections import (
    CONNECT_TIMEOUT,
    DAMAGED_FILES,
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_POOL_SIZE,
    CommitAttempt,
    ConnectionLostError,
    ServerConnections,
    ServerUnreachableError,
    check_dsn,
    connect,
)
from .maintenance import Holder, write_key
from .replication import PostgresPair, Replication, dsn_via, server_address
from .schema import DEFAULT_SCHEMA, MIGRATIONS, SCHEMA_VERSION, Conn

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
    "open_store",
    "store_version",
]

DSN_ENVIRONMENT: Final = "CHECKPOINTSPEC_POSTGRES_DSN"
"""The environment variable `make` reads the DSN from when ``--option dsn=...`` is not given."""

_OPTIONS: Final = ("dsn", "pool_size", "busy_timeout", "replication")
# Taken before a read: waits for a write of the session in flight (see "Writes in flight").
_WAIT_FOR_WRITES: Final = "SELECT pg_advisory_xact_lock_shared(%s)"
_SCAN_PAGE: Final = 4096
_MAX_PROBLEMS: Final = 100


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
    are dropped (`checkpointspec.backends.postgres.stores`). ``replication``
    says how the deployment replicates to a standby: ``"synchronous"`` (a commit
    waits until the standby has flushed it) declares REPLICATED; ``None`` (no
    standby) and ``"asynchronous"`` do not. The backend does not check the
    server's settings: see docs/postgres.md, *Replication and failover*.

    Also implements, for the conformance kit, `StoreHooks`, `ServerRouted` (the
    kit's proxy in front of the server: NET-001) and `Replicated` (a throwaway
    primary and standby of this ``replication`` for DUR-004).
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
        replication: Replication | None = None,
    ) -> None:
        check_dsn(dsn)
        if replication not in (None, "synchronous", "asynchronous"):
            raise InvalidArgumentError(
                "replication",
                f"{replication!r} is neither 'synchronous' nor 'asynchronous'",
                ReasonCode.BAD_OPTION,
            )
        self.replication: Replication | None = replication
        if replication == "synchronous":
            # Only a commit the standby has flushed is acknowledged: it outlives the primary.
            self.capabilities = self.capabilities | {Capability.REPLICATED}
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
        self._create = create
        self._directory = directory
        self._created = False
        self._server = ServerConnections(dsn, schema, pool_size, busy_timeout_ms)
        self._appends = Appends(self._server, schema)
        self._holder = Holder(dsn, schema, busy_timeout_ms, CONNECT_TIMEOUT)
        s = sql.Identifier(schema)
        self._sql_truncate = sql.SQL("SELECT {}.truncate(%s, %s, %s, %s, %s, %s)").format(s)
        self._sql_delete = sql.SQL("SELECT {}.delete(%s, %s, %s)").format(s)
        self._sql_state = sql.SQL(
            "SELECT coalesce((SELECT head FROM {s}.sessions WHERE session_id = %(s)s), 0),"
            " coalesce((SELECT generation FROM {s}.generations WHERE session_id = %(s)s), 0),"
            " %(k)s::bigint IS NULL OR pg_try_advisory_xact_lock_shared(%(k)s::bigint)"
        ).format(s=s)
        self._sql_wait_for_writes = _WAIT_FOR_WRITES
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
        if self._server.closed:
            raise CheckpointerClosedError("open")
        if self._server.opened:
            return self
        conn = await connect(self._dsn)
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
        await self._server.open()
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
        if self._server.closed:
            return
        await self._appends.drained()  # appends already submitted are sent and answered first
        self._server.closed = True
        try:
            await self._holder.close()
        finally:
            await self._server.close()

    def _check_open(self, operation: str) -> None:
        self._server.pool(operation)

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
        meanwhile (group commit, see `checkpointspec.backends.postgres.appends`);
        each append's outcome is its own. A stale ``expected_head`` or
        ``expected_generation`` raises `CheckpointConflictError`; transient server
        errors past the busy timeout raise `StoreBusyError`; a connection lost
        mid-append is resolved by the append's request id (see
        `checkpointspec.backends.postgres.connections`).
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
        return await self._appends.append(
            AppendRequest(sid, payloads, crcs, ts, want_head, want_generation, key, wkey, request)
        )

    async def _empty_append(
        self, sid: str, want_head: int | None, want_generation: int | None, key: int | None
    ) -> int:
        async def check(conn: Conn) -> tuple[int, int, bool]:
            cur = await conn.execute(self._sql_state, {"s": sid, "k": key})
            row = await cur.fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), bool(row[2])

        head, generation, writable = await self._server.run("append", sid, check)
        if not writable:
            raise SessionLockedError(sid, "append")
        check_expectations(sid, head, generation, want_head, want_generation)
        return head

    async def _read_rows(self, sid: str, since: int) -> tuple[int, list[Row]]:
        wkey = write_key(self._schema, sid)

        async def fetch(conn: Conn) -> tuple[int, list[Row]]:
            cur = conn.cursor(binary=True)
            async with conn.pipeline():
                await conn.execute(self._sql_wait_for_writes, (wkey,))
                await cur.execute(self._sql_rows, {"s": sid, "since": since})
            with gc_paused():
                found = await cur.fetchall()
                if not found:
                    return 0, []
                rows: list[Row] = [row[1:] for row in found if row[1] is not None]
            return int(found[0][0]), rows

        return await self._server.run("read", sid, fetch)

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
        for stored in stored_events(sid, head, since, rows, self._codec):
            yield stored

    async def _one(self, operation: str, query: sql.Composed, sid: str) -> int:
        wkey = write_key(self._schema, sid)

        async def fetch(conn: Conn) -> int:
            async with conn.pipeline():
                await conn.execute(self._sql_wait_for_writes, (wkey,))
                cur = await conn.execute(query, (sid,))
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._server.run(operation, sid, fetch)

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

        return await self._server.run("list_sessions", None, fetch)

    async def delete(self, session_id: str) -> None:
        """Remove a session and its events in one transaction; unknown ids do nothing.

        After a lost connection the delete is sent again: deleting what is gone
        does nothing, and the generation only grows when a session existed.
        """
        self._check_open("delete")
        sid = check_session_id(session_id)
        params = (sid, self._holder.lock_key(sid), write_key(self._schema, sid))
        attempt = CommitAttempt()

        async def send(conn: Conn) -> None:
            await self._server.transact(conn, self._sql_delete, params, attempt)

        # Sent again even after a lost COMMIT: deleting what is gone does nothing.
        await self._server.run("delete", sid, send)

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
        attempt = CommitAttempt()

        async def send(conn: Conn) -> int:
            row = await self._server.transact(conn, self._sql_truncate, params, attempt)
            return int(cast(int, row[0]))

        return await self._server.run(
            "truncate", sid, send, maybe_applied=lambda: attempt.committing
        )

    async def check_integrity(self) -> IntegrityReport:
        """Run the contract's checks in SQL and check every payload; change nothing.

        Checked: the schema version, that each session's events are exactly seqs
        ``1..head``, that no event lacks its session, that generations are not
        negative, that no mtime is far in the future, and that every payload
        matches its checksum and decodes (through the codec) into an event.
        Problems are reported, never raised or repaired; so is a page of the store's
        tables that the server itself finds damaged (after a power loss tore it).
        """
        self._check_open("check_integrity")

        async def structure(conn: Conn) -> tuple[list[str], int, int]:
            return await store_schema.structure_problems(conn, self._schema)

        try:
            problems, sessions, events = await self._server.run("check_integrity", None, structure)
            problems += await self._payload_problems()
        except CorruptStoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, psycopg.Error) or cause.sqlstate not in DAMAGED_FILES:
                raise
            # The server cannot read the store's files: that is the report, not an error.
            return IntegrityReport(
                ok=False, detail=f"schema {self._schema}: {exc}", problems=(str(exc),)
            )
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

            rows = await self._server.run("check_integrity", None, page)
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

    # -- ServerLaunching ---------------------------------------------------------------

    server_settings: ClassVar[tuple[str, ...]] = cluster.KIT_SETTINGS
    """The settings of the servers `launch_server` starts: those the DURABLE claim rests
    on (``fsync=on``, ``synchronous_commit=on``), see docs/postgres.md."""

    def launch_server(self) -> ServerControl:
        """A new throwaway cluster with `server_settings`, started, for the kit's server
        crash checks (`checkpointspec.spec.ServerLaunching`); works on a closed handle.

        Raises `cluster.ClusterError` when ``initdb`` is not installed or the cluster
        does not start.
        """
        return cluster.make_cluster(self.server_settings)

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

    # -- the kit's server checks (ServerRouted, Replicated) -----------------------------

    def server_address(self) -> ServerAddress | None:
        """The host and port of the DSN; None for a unix socket or a list of hosts."""
        return server_address(self._dsn)

    def options_via(self, options: Mapping[str, str], address: ServerAddress) -> dict[str, str]:
        """The kit's factory options with the DSN's host and port replaced by ``address``."""
        return {**options, "dsn": dsn_via(self._dsn, address)}

    async def start_failover_pair(self, directory: Path) -> PostgresPair:
        """A throwaway primary on this machine, replicating as ``replication`` says (default
        synchronous), whose standby the kit starts, and which it kills and promotes (DUR-004)."""
        return await PostgresPair.start(directory, self.replication or "synchronous")

    def _schema_of(self, path: Path) -> str:
        found = stores.read_marker(Path(path))
        return self._schema if found is None else found


# -- factory --------------------------------------------------------------------------


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgumentError(
            "options", f"{name}={raw!r} is not an int", ReasonCode.BAD_OPTION
        ) from None


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
    async with await connect(dsn) as conn:
        return await store_schema.stored_version(conn, schema)


async def make(
    ctx: BackendContext, checkpointer: type[PostgresCheckpointer] = PostgresCheckpointer
) -> PostgresCheckpointer:
    """Factory for the kit: open the store of directory ``ctx.path``, creating it if needed.

    The store is its own schema, named in ``ctx.path / "postgres-store.txt"``
    (see `checkpointspec.backends.postgres.stores`). ``ctx.options`` may set
    ``dsn`` (else ``$CHECKPOINTSPEC_POSTGRES_DSN``), ``pool_size`` (default 8)
    ``busy_timeout`` (milliseconds, default 5000) and ``replication``
    (``synchronous`` or ``asynchronous``: the deployment has a standby
    replicating so; ``synchronous`` declares REPLICATED). ``ctx.codec`` is applied
    to every payload. After creating a store the factory drops the stores of
    this host whose directories are gone (`stores.prune_stores`). Raises
    `SchemaVersionError` for a newer store, `InvalidArgumentError` for a
    missing or malformed DSN, `ServerUnreachableError` when the server cannot
    be reached. ``checkpointer`` is the class opened (a subclass of
    `PostgresCheckpointer` taking the same arguments, `open_store`).
    """
    return await open_store(checkpointer, ctx)


_Handle = TypeVar("_Handle", bound=PostgresCheckpointer)


async def open_store(kind: type[_Handle], ctx: BackendContext) -> _Handle:
    """`make` for a subclass ``kind`` of `PostgresCheckpointer`: a handle of that class."""
    options = dict(ctx.options)
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InvalidArgumentError(
            "options", f"unknown {unknown}; known: {list(_OPTIONS)}", ReasonCode.UNKNOWN_OPTION
        )
    dsn = dsn_from(options)
    pool_size = _int_option(options, "pool_size", DEFAULT_POOL_SIZE)
    busy_timeout = _int_option(options, "busy_timeout", DEFAULT_BUSY_TIMEOUT_MS)
    mode = options.get("replication") or None
    if mode not in (None, "synchronous", "asynchronous"):
        raise InvalidArgumentError(
            "options",
            f"replication={mode!r} is neither 'synchronous' nor 'asynchronous'",
            ReasonCode.BAD_OPTION,
        )
    directory = Path(ctx.path)
    check_dsn(dsn)  # before a marker file is written
    handle = kind(
        dsn,
        schema=stores.schema_for(directory),
        codec=ctx.codec,
        pool_size=pool_size,
        busy_timeout_ms=busy_timeout,
        directory=directory,
        replication=cast("Replication | None", mode),
    )
    await handle.open()
    return handle
