"""The PostgreSQL backend's tables and functions, and everything that knows them directly.

Schema versions and their migrations, opening (creating, migrating or refusing)
a store, the integrity checks, and the out-of-band operations the conformance
kit asks for (`mark_newer_schema`, `damage_store`). No handle state, no codec.

A store is one PostgreSQL schema (a namespace inside the database; ``{s}``
below). Layout (version 1): ``version`` holds the schema version in one row;
``sessions`` one row per existing session (head, mtime); ``events`` one row per
event, keyed by (session_id, seq), with the payload as stored (after the codec),
its CRC-32 and, on the first row of each appended batch, the append's random
request id (what lets a writer whose connection died find out whether its
append committed); ``generations`` the generation of every session id ever
deleted or truncated. The writes are PL/pgSQL functions in the same schema, so
each write is one statement and one transaction.
Version 2 adds ``append_group``: several appends in one call, for group commit.

Why the functions are correct under concurrent writers at READ COMMITTED: each
first takes the session's *write lock*, a transaction-level advisory lock on
a key hashed from (schema, session id), held until the transaction ends; it
serialises every writer of the session, in any process or host, also two
writers creating the same session (truncate and delete lock the session's row
as well). A writer that waited for the lock reads the head and generation in
a *later* statement, and at READ COMMITTED every statement of a
volatile function takes a new snapshot, which includes everything the writer
it waited for committed. So ``expected_head`` and ``expected_generation`` are
compared with the state the write is about to change, and a stale writer gets
a clean conflict, never a fork or a lost update.

Writes in flight: the client commits each write with a separate ``COMMIT``
after the function returned, so a client that dies before sending it (a killed
process) can never have its write committed later. Until the server has
noticed the death and rolled back, the write lock stays held; ``read`` and
``head`` take it shared first, so they wait for that outcome instead of
reading a state that a dying writer may still change.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from ...spec import CorruptStoreError, SchemaVersionError
from .maintenance import advisory_key

__all__ = [
    "CONFLICT",
    "DEFAULT_SCHEMA",
    "LOCKED",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TOO_FAR",
    "Conn",
    "check_schema_name",
    "damage_store",
    "mark_newer_schema",
    "open_store",
    "stored_version",
    "structure_problems",
]

DEFAULT_SCHEMA: Final = "checkpointspec"
"""The schema a handle uses when none is named (the operator store ``postgres:DSN``)."""

# SQLSTATEs the functions raise: class "CP" is not used by PostgreSQL.
CONFLICT: Final = "CP001"
"""An expectation failed; the message is ``"<kind> <expected> <actual>"``."""
LOCKED: Final = "CP002"
"""Another handle holds the session's maintenance lock."""
TOO_FAR: Final = "CP003"
"""truncate beyond the head; the message is the head."""

Conn: TypeAlias = psycopg.AsyncConnection[TupleRow]
"""An async connection returning tuples, as the backend opens them."""

_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_BUMP_GENERATION: Final = """
    INSERT INTO {s}.generations AS g (session_id, generation) VALUES (p_session, 1)
        ON CONFLICT (session_id) DO UPDATE SET generation = g.generation + 1;"""

_MAINTENANCE_CHECK: Final = """
    -- Another handle's maintenance lock is an exclusive advisory lock on the key: a
    -- shared try fails at once while it is held (MAINT-001), and is released at commit.
    IF p_lock_key IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared(p_lock_key) THEN
        RAISE EXCEPTION 'session held for maintenance' USING ERRCODE = 'CP002';
    END IF;
    -- The session's write lock, held until the transaction ends: readers wait for it
    -- (see "Writes in flight" in the module docstring), even for a session not created yet.
    PERFORM pg_advisory_xact_lock(p_write_key);"""

_EXPECTATIONS: Final = """
    IF p_expected_generation IS NOT NULL AND p_expected_generation <> v_generation THEN
        RAISE EXCEPTION 'generation % %', p_expected_generation, v_generation
            USING ERRCODE = 'CP001';
    END IF;
    IF p_expected_head IS NOT NULL AND p_expected_head <> v_head THEN
        RAISE EXCEPTION 'head % %', p_expected_head, v_head USING ERRCODE = 'CP001';
    END IF;"""

_NOW: Final = "extract(epoch FROM clock_timestamp())"

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 0 -> 1: the first schema. Version 0 is a schema that does not exist yet.
    (
        "CREATE SCHEMA IF NOT EXISTS {s}",
        """CREATE TABLE {s}.version (
            id integer PRIMARY KEY CHECK (id = 1),
            version integer NOT NULL
        )""",
        """CREATE TABLE {s}.sessions (
            session_id text PRIMARY KEY,
            head bigint NOT NULL CHECK (head >= 0),
            mtime double precision NOT NULL
        )""",
        # crc is CRC-32 of payload exactly as stored; request is set on a batch's first row.
        """CREATE TABLE {s}.events (
            session_id text NOT NULL,
            seq bigint NOT NULL CHECK (seq >= 1),
            ts text NOT NULL,
            crc bigint NOT NULL,
            payload bytea NOT NULL,
            request bytea,
            PRIMARY KEY (session_id, seq)
        )""",
        # Outlives its session on purpose: a re-created session must not restart at a
        # generation a stale writer may remember (GEN-001). No row means generation 0.
        """CREATE TABLE {s}.generations (
            session_id text PRIMARY KEY,
            generation bigint NOT NULL CHECK (generation >= 0)
        )""",
        """CREATE FUNCTION {s}.append(
            p_session text, p_payloads bytea[], p_crcs bigint[], p_ts text,
            p_expected_head bigint, p_expected_generation bigint,
            p_lock_key bigint, p_write_key bigint, p_request bytea
        ) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            v_head bigint;
            v_generation bigint;
        BEGIN"""
        + _MAINTENANCE_CHECK
        + """
            -- New statements: snapshots taken after the lock (see the module docstring).
            SELECT coalesce((SELECT head FROM {s}.sessions WHERE session_id = p_session), 0),
                   coalesce((SELECT generation FROM {s}.generations
                             WHERE session_id = p_session), 0)
                INTO v_head, v_generation;"""
        + _EXPECTATIONS
        + """
            INSERT INTO {s}.events (session_id, seq, ts, crc, payload, request)
                SELECT p_session, v_head + i, p_ts, p_crcs[i], p_payloads[i],
                       CASE WHEN i = 1 THEN p_request END
                FROM generate_subscripts(p_payloads, 1) AS i;
            -- No other writer of the session runs (the write lock): update, else insert.
            UPDATE {s}.sessions SET head = v_head + cardinality(p_payloads),
                mtime = greatest(mtime, """
        + _NOW
        + """)
                WHERE session_id = p_session;
            IF NOT FOUND THEN
                INSERT INTO {s}.sessions (session_id, head, mtime)
                    VALUES (p_session, cardinality(p_payloads), """
        + _NOW
        + """);
            END IF;
            RETURN v_head + cardinality(p_payloads);
        END $fn$""",
        """CREATE FUNCTION {s}.truncate(
            p_session text, p_to bigint, p_expected_head bigint,
            p_expected_generation bigint, p_lock_key bigint, p_write_key bigint
        ) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            v_head bigint;
            v_generation bigint;
        BEGIN"""
        + _MAINTENANCE_CHECK
        + """
            SELECT head INTO v_head FROM {s}.sessions WHERE session_id = p_session FOR UPDATE;
            IF NOT FOUND THEN
                v_head := 0;  -- an unknown session: nothing to lock, nothing to change
            END IF;
            SELECT coalesce(max(generation), 0) INTO v_generation
                FROM {s}.generations WHERE session_id = p_session;"""
        + _EXPECTATIONS
        + """
            IF p_to > v_head THEN
                RAISE EXCEPTION '%', v_head USING ERRCODE = 'CP003';
            END IF;
            IF p_to = v_head THEN
                RETURN p_to;  -- truncating to the head changes nothing, not even mtime
            END IF;
            DELETE FROM {s}.events WHERE session_id = p_session AND seq > p_to;
            UPDATE {s}.sessions SET head = p_to, mtime = greatest(mtime, """
        + _NOW
        + """)
                WHERE session_id = p_session;"""
        + _BUMP_GENERATION
        + """
            RETURN p_to;
        END $fn$""",
        """CREATE FUNCTION {s}.delete(p_session text, p_lock_key bigint, p_write_key bigint)
        RETURNS boolean LANGUAGE plpgsql AS $fn$
        BEGIN"""
        + _MAINTENANCE_CHECK
        + """
            DELETE FROM {s}.sessions WHERE session_id = p_session;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            DELETE FROM {s}.events WHERE session_id = p_session;"""
        + _BUMP_GENERATION
        + """
            RETURN true;
        END $fn$""",
    ),
    # 1 -> 2: group commit. Several appends (of distinct sessions) in one call and
    # one transaction; each runs in its own subtransaction (the EXCEPTION block), so
    # one append's conflict or error undoes that append alone and is answered to it
    # alone, as (sqlstate, message), while the others stay in the transaction.
    (
        """CREATE FUNCTION {s}.append_group(
            p_sessions text[], p_counts integer[], p_payloads bytea[], p_crcs bigint[],
            p_ts text[], p_expected_heads bigint[], p_expected_generations bigint[],
            p_lock_keys bigint[], p_write_keys bigint[], p_requests bytea[],
            OUT o_heads bigint[], OUT o_states text[], OUT o_messages text[]
        ) LANGUAGE plpgsql AS $fn$
        DECLARE
            v_first integer := 1;
            v_last integer;
            v_state text;
            v_message text;
        BEGIN
            o_heads := array_fill(NULL::bigint, ARRAY[cardinality(p_sessions)]);
            o_states := array_fill(NULL::text, ARRAY[cardinality(p_sessions)]);
            o_messages := array_fill(NULL::text, ARRAY[cardinality(p_sessions)]);
            FOR i IN 1 .. cardinality(p_sessions) LOOP
                v_last := v_first + p_counts[i] - 1;
                BEGIN
                    o_heads[i] := {s}.append(
                        p_sessions[i], p_payloads[v_first:v_last], p_crcs[v_first:v_last],
                        p_ts[i], p_expected_heads[i], p_expected_generations[i],
                        p_lock_keys[i], p_write_keys[i], p_requests[i]);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
                                            v_message = MESSAGE_TEXT;
                    o_states[i] := v_state;
                    o_messages[i] := v_message;
                END;
                v_first := v_last + 1;
            END LOOP;
        END $fn$""",
    ),
)
"""``MIGRATIONS[v]`` holds the statements that turn schema version v into v + 1."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version this module writes into ``{s}.version``; newer stores are refused."""


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain lower-case PostgreSQL identifier; ValueError otherwise.

    Plain names need no quoting anywhere, also not inside the functions' bodies.
    """
    if not _NAME.fullmatch(name) or name.startswith("pg_"):
        raise ValueError(
            f"schema {name!r} is not a plain identifier: lower-case letters, digits and _, "
            "at most 63, not starting with a digit or pg_"
        )
    return name


def _statement(text: str, schema: str) -> sql.Composed:
    return sql.SQL(text).format(s=sql.Identifier(schema))


# -- opening and migrating -----------------------------------------------------------------


def _lock_key_for_schema(schema: str) -> int:
    return advisory_key(schema, "")  # no session id is empty, so no session shares the key


async def stored_version(conn: Conn, schema: str) -> int:
    """The version recorded in ``schema``, 0 if the schema or its version table is missing.

    Reads only. A schema that exists but holds no version table is 0 too; the
    caller decides whether that is a foreign schema.
    """
    cur = await conn.execute(
        "SELECT to_regclass(format('%%I.version', %s::text)) IS NOT NULL", (schema,)
    )
    row = await cur.fetchone()
    if row is None or not row[0]:
        return 0
    cur = await conn.execute(_statement("SELECT version FROM {s}.version WHERE id = 1", schema))
    found = await cur.fetchone()
    if found is None:
        raise CorruptStoreError(None, f"schema {schema}", "the version table holds no row")
    return int(found[0])


async def _foreign_tables(conn: Conn, schema: str) -> list[str]:
    cur = await conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1",
        (schema,),
    )
    return [str(row[0]) for row in await cur.fetchall()]


async def open_store(
    conn: Conn,
    schema: str,
    *,
    create: bool,
    on_create: Callable[[Conn], Awaitable[None]] | None = None,
) -> bool:
    """Bring ``schema`` to `SCHEMA_VERSION`; return whether this call created the store.

    ``conn`` is in autocommit mode. A newer version raises `SchemaVersionError`
    before anything is written; a schema at version 0 that already holds tables
    is refused (`CorruptStoreError`) rather than adopted. Creation and migration
    run in one transaction under an advisory lock on the schema's name, so two
    processes opening a new store at once create it once. With ``create`` False
    a missing store raises `CorruptStoreError` and nothing is created.
    ``on_create(conn)`` runs inside the creating transaction.
    """
    found = await stored_version(conn, schema)
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    if found == SCHEMA_VERSION:
        return False
    if found == 0:
        foreign = await _foreign_tables(conn, schema)
        if foreign:
            raise CorruptStoreError(
                None, f"schema {schema}", f"version 0 but holds {foreign}: not a checkpoint store"
            )
        if not create:
            raise CorruptStoreError(None, f"schema {schema}", "no checkpoint store there")
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key_for_schema(schema),))
        # Read again under the lock: another process may have created or migrated it.
        again = await stored_version(conn, schema)
        if again > SCHEMA_VERSION:
            raise SchemaVersionError(again, SCHEMA_VERSION)
        statements = [statement for step in MIGRATIONS[again:] for statement in step]
        statements.append(
            "INSERT INTO {s}.version (id, version) VALUES (1, {v})"
            if again == 0
            else "UPDATE {s}.version SET version = {v} WHERE id = 1"
        )
        # One round trip: without parameters, several statements go as one simple query.
        await conn.execute(
            sql.SQL(";\n").join(
                sql.SQL(text).format(s=sql.Identifier(schema), v=sql.Literal(SCHEMA_VERSION))
                for text in statements
            )
        )
        if again == 0 and on_create is not None:
            await on_create(conn)
    return found == 0


# -- integrity ------------------------------------------------------------------------------

_CHECKS: Final = (
    (
        "heads",
        # seq is unique per session, so count == head, min == 1 and max == head mean
        # exactly the seqs 1..head.
        "SELECT format('session %L: head is %s but it has %s event rows, seqs %s..%s',"
        " s.session_id, s.head, count(e.seq), min(e.seq), max(e.seq))"
        " FROM {s}.sessions AS s LEFT JOIN {s}.events AS e USING (session_id)"
        " GROUP BY s.session_id, s.head"
        " HAVING count(e.seq) <> s.head"
        " OR (count(e.seq) > 0 AND (min(e.seq) <> 1 OR max(e.seq) <> s.head))"
        " ORDER BY s.session_id",
    ),
    (
        "orphans",
        "SELECT format('session %L: %s event rows but no session row', e.session_id, count(*))"
        " FROM {s}.events AS e LEFT JOIN {s}.sessions AS s USING (session_id)"
        " WHERE s.session_id IS NULL GROUP BY e.session_id ORDER BY e.session_id",
    ),
    (
        "generations",
        "SELECT format('session %L: generation %s is negative', session_id, generation)"
        " FROM {s}.generations WHERE generation < 0 ORDER BY session_id",
    ),
    (
        "mtimes",
        "SELECT format('session %L: mtime %s is in the future', session_id, mtime)"
        " FROM {s}.sessions WHERE mtime > extract(epoch FROM clock_timestamp()) + 60"
        " ORDER BY session_id",
    ),
)


async def structure_problems(conn: Conn, schema: str) -> tuple[list[str], int, int]:
    """The contract's checks in SQL, from one snapshot: problems, sessions, events.

    Checked: the version, that each session's events are exactly seqs
    ``1..head``, that no event lacks its session, that generations are not
    negative and no mtime is far in the future. Payloads are checked by the
    caller, which knows the codec.
    """
    problems: list[str] = []
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        version = await stored_version(conn, schema)
        if version != SCHEMA_VERSION:
            problems.append(f"schema version is {version}, not {SCHEMA_VERSION}")
        for _name, text in _CHECKS:
            cur = await conn.execute(_statement(text, schema))
            problems += [str(row[0]) for row in await cur.fetchall()]
        cur = await conn.execute(
            _statement(
                "SELECT (SELECT count(*) FROM {s}.sessions), (SELECT count(*) FROM {s}.events)",
                schema,
            )
        )
        counts = await cur.fetchone()
    assert counts is not None
    return problems, int(counts[0]), int(counts[1])


# -- out-of-band operations for the conformance kit (StoreHooks) ----------------------------


def mark_newer_schema(dsn: str, schema: str) -> None:
    """Set the version of the closed store ``schema`` to `SCHEMA_VERSION` + 1."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            _statement("UPDATE {s}.version SET version = %s WHERE id = 1", schema),
            (SCHEMA_VERSION + 1,),
        )


def damage_store(dsn: str, schema: str) -> str:
    """Flip one bit inside the largest stored payload of ``schema``, keeping its checksum."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            _statement(
                "SELECT session_id, seq, payload FROM {s}.events"
                " ORDER BY length(payload) DESC, session_id, seq LIMIT 1",
                schema,
            )
        ).fetchone()
        if row is None:
            raise ValueError(f"schema {schema} holds no event to damage")
        sid, seq, payload = str(row[0]), int(row[1]), bytes(row[2])
        damaged = bytearray(payload)
        damaged[len(damaged) // 2] ^= 0x01
        conn.execute(
            _statement(
                "UPDATE {s}.events SET payload = %s WHERE session_id = %s AND seq = %s", schema
            ),
            (bytes(damaged), sid, seq),
        )
    return f"flipped one bit of the payload of session {sid!r} seq {seq} in schema {schema} (checksum kept)"
