"""The SQLite backend's database layout, and everything that knows it directly.

Schema versions and their migrations, opening a connection on a store, the
integrity checks, and the out-of-band operations the conformance kit asks for
(`mark_newer_schema`, `damage_store`). Plain sqlite3 on whatever thread calls
it: no asyncio, no knowledge of handles or group commit.

Layout (version 2): ``sessions`` holds one row per existing session (head, mtime);
``events`` one row per event, keyed by (session_id, seq), with the payload as
stored (after the codec) and its CRC-32; ``generations`` the generation of every
session id ever deleted or truncated; ``clock`` the largest mtime handed out;
``maintenance`` (since version 2) one row per session held for maintenance (see
`checkpointspec.backends.sqlite.maintenance`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from ...spec import CorruptStoreError, SchemaVersionError

__all__ = [
    "DATABASE_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "damage_store",
    "header_user_version",
    "is_damage",
    "mark_newer_schema",
    "open_store",
    "payload_page",
    "primary_code",
    "rollback",
    "structure_problems",
]

DATABASE_NAME: Final = "checkpoints.db"
"""The file a store keeps inside its directory (``ctx.path``)."""

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 0 -> 1: the first schema. Version 0 is an empty database.
    (
        # One row per existing session. head is the seq of its last event (0 after
        # truncate to 0); mtime is seconds since the epoch of its last change.
        """CREATE TABLE sessions (
            session_id TEXT NOT NULL PRIMARY KEY,
            head INTEGER NOT NULL CHECK (head >= 0),
            mtime REAL NOT NULL
        ) WITHOUT ROWID""",
        # A rowid table: payloads can be large, which WITHOUT ROWID b-trees handle badly.
        # crc is CRC-32 of payload exactly as stored (after the codec).
        """CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL CHECK (seq >= 1),
            ts TEXT NOT NULL,
            crc INTEGER NOT NULL,
            payload BLOB NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        # Outlives its session on purpose: a re-created session must not restart at a
        # generation a stale writer may remember (GEN-001). No row means generation 0.
        """CREATE TABLE generations (
            session_id TEXT NOT NULL PRIMARY KEY,
            generation INTEGER NOT NULL CHECK (generation >= 0)
        ) WITHOUT ROWID""",
        # The largest mtime ever handed out, so mtimes never go back even when the wall
        # clock does or the session holding the maximum is deleted (LIST-003).
        """CREATE TABLE clock (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_mtime REAL NOT NULL
        )""",
        "INSERT INTO clock (id, last_mtime) VALUES (1, 0.0)",
    ),
    # 1 -> 2: the maintenance lock (MAINTENANCE).
    (
        # One row per session a handle holds: its random token. A row is believed
        # only while the holder keeps its lock file's flock (MAINT-004).
        """CREATE TABLE maintenance (
            session_id TEXT NOT NULL PRIMARY KEY,
            token TEXT NOT NULL
        ) WITHOUT ROWID""",
    ),
)
"""``MIGRATIONS[v]`` holds the statements that turn schema version v into v + 1."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The ``PRAGMA user_version`` this module writes; newer stores are refused."""


# -- errors and transactions -----------------------------------------------------------


def primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``exc`` (SQLITE_BUSY, SQLITE_CORRUPT ...), if known."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file itself is damaged (corrupt, or not a database)."""
    return primary_code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def rollback(conn: sqlite3.Connection) -> None:
    """End a transaction without keeping anything: after an error, or to end a read.

    SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR ...),
    hence the check. Reads end with ROLLBACK rather than COMMIT: there is nothing
    to keep, and COMMIT can fail on a damaged file where ROLLBACK does not.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


# -- opening and migrating ------------------------------------------------------------


def header_user_version(path: Path) -> int | None:
    """``user_version`` from the database header (bytes 60..63), or None if unreadable.

    Reading the header directly lets a newer store be refused without SQLite
    opening it at all: no -wal or -shm file is created, nothing is touched.
    """
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except FileNotFoundError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    return int.from_bytes(header[60:64], "big", signed=True)


def open_store(
    conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int, where: str
) -> None:
    """Configure a fresh connection and bring the schema to `SCHEMA_VERSION`.

    Nothing is written before the version is known to be ours or older, and a
    version-0 database that already holds tables is refused untouched. A database
    damaged so that SQLite hands back text that is not UTF-8 is `CorruptStoreError`.
    """
    try:
        _open_store(conn, synchronous, busy_timeout_ms, where)
    except UnicodeDecodeError as exc:
        # Python's sqlite3 decodes some results (a pragma's) itself, outside DatabaseError.
        raise CorruptStoreError(None, where, f"the database returned garbled text: {exc}") from exc


def _open_store(
    conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int, where: str
) -> None:
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    # The version and the table list are read in one transaction, so they come from
    # one snapshot: read one by one, a process creating the store between the two
    # reads would make a new store look like a foreign database.
    conn.execute("BEGIN")
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        foreign = (
            [row[0] for row in conn.execute("SELECT name FROM sqlite_master")] if found == 0 else []
        )
    finally:
        conn.execute("COMMIT")
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    if foreign:
        raise CorruptStoreError(
            None, where, f"schema version 0 but already holds {foreign}: not a checkpoint store"
        )
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if found < SCHEMA_VERSION:
        _migrate(conn)


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply the missing `MIGRATIONS` steps in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have migrated meanwhile.
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(found, SCHEMA_VERSION)
        for step in MIGRATIONS[found:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


# -- integrity ------------------------------------------------------------------------


def _quick_check(conn: sqlite3.Connection) -> list[str]:
    lines = [row[0] for row in conn.execute("PRAGMA quick_check")]
    return [] if lines == ["ok"] else [f"sqlite quick_check: {line}" for line in lines]


def _check_version(conn: sqlite3.Connection) -> list[str]:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return (
        [] if version == SCHEMA_VERSION else [f"schema version is {version}, not {SCHEMA_VERSION}"]
    )


def _check_heads(conn: sqlite3.Connection) -> list[str]:
    # seq is unique per session, so count == head, min == 1 and max == head mean
    # exactly the seqs 1..head.
    return [
        f"session {sid!r}: head is {head} but it has {count} event rows, seqs {low}..{high}"
        for sid, head, count, low, high in conn.execute(
            "SELECT s.session_id, s.head, count(e.seq), min(e.seq), max(e.seq)"
            " FROM sessions AS s LEFT JOIN events AS e USING (session_id)"
            " GROUP BY s.session_id"
        )
        if count != head or (count and (low != 1 or high != head))
    ]


def _check_orphans(conn: sqlite3.Connection) -> list[str]:
    return [
        f"session {sid!r}: {count} event rows but no session row"
        for sid, count in conn.execute(
            "SELECT session_id, count(*) FROM events"
            " WHERE session_id NOT IN (SELECT session_id FROM sessions) GROUP BY session_id"
        )
    ]


def _check_clock(conn: sqlite3.Connection) -> list[str]:
    row = conn.execute("SELECT last_mtime FROM clock").fetchone()
    if row is None:
        return ["the clock row is missing"]
    return [
        f"session {sid!r}: mtime {mtime} is after the store clock {row[0]}"
        for sid, mtime in conn.execute(
            "SELECT session_id, mtime FROM sessions WHERE mtime > ?", (row[0],)
        )
    ]


_STRUCTURE_CHECKS: Final = (
    _quick_check,
    _check_version,
    _check_heads,
    _check_orphans,
    _check_clock,
)
"""Run in this order by `structure_problems`; each returns its problems."""


def structure_problems(conn: sqlite3.Connection) -> tuple[list[str], int, int]:
    """`_STRUCTURE_CHECKS` in one read transaction: problems, sessions, events.

    A check that SQLite cannot even run on a damaged file is itself a problem;
    the remaining checks still run.
    """
    problems: list[str] = []
    sessions = events = 0
    conn.execute("BEGIN")
    try:
        for check in _STRUCTURE_CHECKS:
            try:
                problems += check(conn)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                problems.append(f"{check.__name__.lstrip('_')} could not run: {exc}")
        try:
            sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            # Only the summary line loses its counts: the damage is already a problem.
            if not is_damage(exc):
                raise
    finally:
        rollback(conn)
    return problems, sessions, events


def payload_page(
    conn: sqlite3.Connection, after: tuple[str, int], limit: int
) -> list[tuple[str, int, int, bytes]]:
    """Up to ``limit`` events rows (session_id, seq, crc, payload) after key ``after``."""
    return conn.execute(
        "SELECT session_id, seq, crc, payload FROM events WHERE (session_id, seq) > (?, ?)"
        " ORDER BY session_id, seq LIMIT ?",
        (*after, limit),
    ).fetchall()


# -- out-of-band operations for the conformance kit (StoreHooks) -------------------------


def mark_newer_schema(store: Path) -> None:
    """Set ``user_version`` of the closed store in directory ``store`` to `SCHEMA_VERSION` + 1."""
    conn = sqlite3.connect(Path(store) / DATABASE_NAME, isolation_level=None)
    try:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    finally:
        conn.close()  # the last connection checkpoints the WAL into the file header


def damage_store(store: Path) -> str:
    """Flip one bit inside the largest stored payload of the closed store in ``store``.

    The row's checksum no longer matches: ``check_integrity`` reports it and a
    read of that session raises `CorruptStoreError`. The bit is flipped in the
    file's bytes when the payload lies in one piece there (after a checkpoint has
    moved everything into the main file), else through SQL. Returns what it did.
    """
    database = Path(store) / DATABASE_NAME
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = conn.execute(
            "SELECT session_id, seq, payload FROM events ORDER BY length(payload) DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise ValueError(f"{database} holds no event to damage")
        sid, seq, payload = row
        data = database.read_bytes()
        offset = data.find(payload)
        in_file = offset >= 0 and data.find(payload, offset + 1) < 0
        if not in_file:
            damaged = bytearray(payload)
            damaged[len(damaged) // 2] ^= 0x01
            conn.execute(
                "UPDATE events SET payload = ? WHERE session_id = ? AND seq = ?",
                (bytes(damaged), sid, seq),
            )
    finally:
        conn.close()
    if not in_file:
        return f"flipped one bit of the payload of session {sid!r} seq {seq} (SQL update, old checksum kept)"
    position = offset + len(payload) // 2
    with database.open("r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x01]))
    return f"flipped one bit of the payload of session {sid!r} seq {seq} (file offset {position})"
