"""Backend-specific tests of the SQLite backend, byte-level where it matters.

The conformance kit checks the contract; these tests check what only this
backend promises, looking at the database out-of-band through the stdlib
sqlite3 module: schema markers, page damage, a writer killed inside its
transaction, lock timeouts, group commit, codec bytes at rest, and several
processes. The kit's model-based check compares the backend with the
sequential model; these tests do not repeat it. Test names start with the
rule id they are about when there is one.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import subprocess
import sys
import threading
import zlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.backends.sqlite import (
    DATABASE_NAME,
    SCHEMA_VERSION,
    SqliteCheckpointer,
    make,
)
from checkpointspec.spec import (
    AssistantMessage,
    BackendContext,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CodecError,
    CorruptStoreError,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    StoreBusyError,
    ToolCall,
    UserPrompt,
)
from helpers import ev, read_all, run


async def opened(store: Path, **kwargs: Any) -> SqliteCheckpointer:
    return await SqliteCheckpointer(store / DATABASE_NAME, **kwargs).open()


def fingerprint(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def raw(store: Path) -> sqlite3.Connection:
    """An out-of-band connection to the store's database."""
    return sqlite3.connect(store / DATABASE_NAME, isolation_level=None)


def rows(store: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = raw(store)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def populate(store: Path, **kwargs: Any) -> None:
    cp = await opened(store, **kwargs)
    await cp.append("a", [ev(1), ev(2), ev(3)])
    await cp.append("b", [AssistantMessage("hi", (ToolCall("t1", "read", "{}"),))])
    await cp.close()


async def raises(awaitable: Awaitable[object], kind: type[Exception]) -> Exception:
    with pytest.raises(kind) as info:
        await awaitable
    return info.value


# -- codecs -------------------------------------------------------------------------


class XorCodec:
    """Hides payloads (XOR with a key byte) behind a marker; refuses anything else."""

    name = "xor"

    def encode(self, data: bytes) -> bytes:
        return b"X1" + bytes(b ^ 0x5A for b in data)

    def decode(self, data: bytes) -> bytes:
        if not data.startswith(b"X1"):
            raise ValueError("not an xor payload")
        return bytes(b ^ 0x5A for b in data[2:])


class FlakyCodec(XorCodec):
    """Fails the ``fail_encode``-th encode and every decode once ``fail_decode`` is set."""

    def __init__(self, fail_encode: int | None = None, fail_decode: bool = False) -> None:
        self.fail_encode = fail_encode
        self.fail_decode = fail_decode
        self.encodes = 0

    def encode(self, data: bytes) -> bytes:
        self.encodes += 1
        if self.encodes == self.fail_encode:
            raise RuntimeError("injected encode failure")
        return super().encode(data)

    def decode(self, data: bytes) -> bytes:
        if self.fail_decode:
            raise RuntimeError("injected decode failure")
        return super().decode(data)


class GarbageCodec(XorCodec):
    """Decodes "successfully" into bytes that are no event."""

    def decode(self, data: bytes) -> bytes:
        return b'{"type": "no such event"}'


# -- schema ---------------------------------------------------------------------------


def test_a_fresh_store_is_recognised_from_one_snapshot(tmp_path: Path) -> None:
    """The version and the table list come from one read transaction.

    Read one by one, a process creating the store between the two reads made a
    brand-new store look like a foreign database to a second process opening it.
    """
    from checkpointspec.backends.sqlite.schema import open_store

    conn = sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        open_store(conn, "FULL", 1000, str(tmp_path))
    finally:
        conn.close()
    reads = [i for i, s in enumerate(statements) if "user_version" in s or "sqlite_master" in s][:2]
    begin = max(i for i, s in enumerate(statements[: reads[0]]) if s.startswith("BEGIN"))
    commits = [i for i, s in enumerate(statements) if s == "COMMIT" and i > begin]
    assert statements[begin] == "BEGIN", statements
    assert commits, statements
    assert commits[0] > reads[1], statements


def test_processes_opening_a_new_store_together_all_succeed(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from checkpointspec.backends.sqlite import make\n"
        "from checkpointspec.spec import BackendContext\n"
        "async def main():\n"
        "    cp = await make(BackendContext(path=Path(sys.argv[1])))\n"
        "    await cp.head('s')\n"
        "    await cp.close()\n"
        "asyncio.run(main())\n"
    )
    for round_ in range(3):
        store = tmp_path / f"store-{round_}"
        store.mkdir()
        procs = [
            subprocess.Popen([sys.executable, "-c", script, str(store)], stderr=subprocess.PIPE)
            for _ in range(4)
        ]
        errors = [p.communicate()[1].decode() for p in procs]
        assert all(p.returncode == 0 for p in procs), errors


def test_schema_001_newer_store_refused_byte_identical(tmp_path: Path) -> None:
    run(populate(tmp_path))
    SqliteCheckpointer(":memory:").mark_newer_schema(tmp_path)
    before = fingerprint(tmp_path)
    assert list(before) == [DATABASE_NAME]  # the WAL was checkpointed and removed

    err = run(raises(make(BackendContext(path=tmp_path)), SchemaVersionError))

    assert isinstance(err, SchemaVersionError)
    assert (err.found, err.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
    assert fingerprint(tmp_path) == before


def test_schema_001_newer_version_still_in_the_wal_is_refused(tmp_path: Path) -> None:
    """The header of the main file says version 1; only the WAL knows better."""
    run(populate(tmp_path))
    reader = raw(tmp_path)  # stays connected, so the writer's close does not checkpoint
    reader.execute("SELECT count(*) FROM events").fetchall()
    writer = raw(tmp_path)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    writer.close()
    db, wal = tmp_path / DATABASE_NAME, tmp_path / f"{DATABASE_NAME}-wal"
    before = (db.read_bytes(), wal.read_bytes())
    try:
        err = run(raises(opened(tmp_path), SchemaVersionError))
        assert isinstance(err, SchemaVersionError)
        assert err.found == SCHEMA_VERSION + 5
        assert (db.read_bytes(), wal.read_bytes()) == before
    finally:
        reader.close()


def test_version_0_database_is_migrated_in_place(tmp_path: Path) -> None:
    conn = raw(tmp_path)  # a real, empty database file: version 0, rollback journal
    conn.executescript("CREATE TABLE scratch (x); DROP TABLE scratch;")
    conn.close()
    assert rows(tmp_path, "PRAGMA user_version") == [(0,)]

    async def use() -> int:
        async with SqliteCheckpointer(tmp_path / DATABASE_NAME) as cp:
            return await cp.append("s", [ev(1)])

    assert run(use()) == 1
    assert rows(tmp_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert rows(tmp_path, "PRAGMA journal_mode") == [("wal",)]
    tables = {
        name for (name,) in rows(tmp_path, "SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    assert tables == {"sessions", "events", "generations", "clock", "maintenance"}


def test_version_0_database_with_foreign_tables_is_refused_untouched(tmp_path: Path) -> None:
    conn = raw(tmp_path)
    conn.execute("CREATE TABLE events (anything)")
    conn.close()
    before = fingerprint(tmp_path)
    err = run(raises(opened(tmp_path), CorruptStoreError))
    assert "not a checkpoint store" in str(err)
    assert fingerprint(tmp_path) == before


# -- integrity --------------------------------------------------------------------------


def test_integ_002_corrupted_page_is_reported(tmp_path: Path) -> None:
    async def write() -> None:
        cp = await opened(tmp_path)
        await cp.append("a", [UserPrompt("x" * 300) for _ in range(40)])
        await cp.close()

    run(write())
    ((root, page_size),) = rows(
        tmp_path,
        "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master"
        " WHERE name = 'sqlite_autoindex_events_1'",
    )
    db = tmp_path / DATABASE_NAME
    data = bytearray(db.read_bytes())
    data[(root - 1) * page_size] = 0x7F  # the b-tree page type byte: no such type
    db.write_bytes(bytes(data))

    async def check() -> None:
        cp = await opened(tmp_path)
        report = await cp.check_integrity()
        assert not report.ok
        assert any("quick_check" in problem for problem in report.problems), report.problems
        await raises(read_all(cp, "a"), CorruptStoreError)
        await cp.close()

    run(check())


def test_integ_002_damage_store_hook_flips_a_checksummed_payload(tmp_path: Path) -> None:
    run(populate(tmp_path))
    what = SqliteCheckpointer(":memory:").damage_store(tmp_path)
    assert "flipped" in what

    async def check() -> None:
        cp = await opened(tmp_path)
        report = await cp.check_integrity()
        assert not report.ok
        assert "checksum" in report.detail
        damaged = [sid for sid in ("a", "b") if any(repr(sid) in p for p in report.problems)]
        assert len(damaged) == 1
        err = await raises(read_all(cp, damaged[0]), CorruptStoreError)
        assert isinstance(err, CorruptStoreError)
        assert err.session_id == damaged[0]
        (healthy,) = {"a", "b"} - set(damaged)
        assert await read_all(cp, healthy)
        await cp.close()

    run(check())


def test_integ_002_payload_that_is_no_event_is_corrupt_without_codec(tmp_path: Path) -> None:
    run(populate(tmp_path))
    conn = raw(tmp_path)
    garbage = b'{"type": "mystery"}'
    conn.execute(
        "UPDATE events SET payload = ?, crc = ? WHERE session_id = 'a' AND seq = 2",
        (garbage, zlib.crc32(garbage)),
    )
    conn.close()

    async def check() -> None:
        cp = await opened(tmp_path)
        err = await raises(read_all(cp, "a"), CorruptStoreError)
        assert isinstance(err, CorruptStoreError)
        assert "seq 2" in err.location
        assert not (await cp.check_integrity()).ok
        await cp.close()

    run(check())


def test_integ_001_healthy_store_reports_ok(tmp_path: Path) -> None:
    async def check() -> None:
        cp = await opened(tmp_path, codec=XorCodec())
        await cp.append("a", [ev(1), ev(2)])
        await cp.append("b", [ev(3)])
        await cp.truncate("a", 1)
        await cp.truncate("b", 0)
        await cp.delete("gone")
        report = await cp.check_integrity()
        assert report.ok, report.problems
        assert "2 sessions, 1 events" in report.detail
        await cp.close()

    run(check())


# -- crash and lock behaviour -------------------------------------------------------------

KILLED_WRITER = """
import asyncio, sys, threading
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.spec import UserPrompt

path, point = sys.argv[1], sys.argv[2]

def hook(reached):
    if reached == point:
        print("in-transaction", flush=True)
        threading.Event().wait()  # hold the transaction open until killed

async def main():
    cp = SqliteCheckpointer(path)
    cp.set_fault_hook(hook)
    if point.startswith("append."):
        # ~3 MB, more than SQLite's page cache: uncommitted pages spill into the WAL.
        await cp.append("victim", [UserPrompt("x" * 1000) for _ in range(3000)])
    elif point.startswith("truncate."):
        await cp.truncate("victim", 1)
    else:
        await cp.delete("victim")

asyncio.run(main())
"""


@pytest.mark.parametrize(
    "point",
    [
        "append.locked",
        "append.events_written",
        "append.before_commit",
        "truncate.before_commit",
        "delete.before_commit",
    ],
)
def test_kill_001_writer_killed_at_a_fault_point_leaves_nothing_half_done(
    tmp_path: Path, point: str
) -> None:
    """KILL-001, DUR-002: the killed write is wholly absent and its lock is released."""
    assert point in SqliteCheckpointer(":memory:").fault_points

    async def seed() -> None:
        cp = await opened(tmp_path)
        await cp.append("victim", [ev("one"), ev("two")])
        await cp.close()

    run(seed())
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path / DATABASE_NAME), point],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "in-transaction", proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()

    assert rows(tmp_path, "SELECT seq FROM events WHERE session_id = 'victim'") == [(1,), (2,)]
    assert rows(tmp_path, "SELECT head FROM sessions WHERE session_id = 'victim'") == [(2,)]
    assert rows(tmp_path, "SELECT count(*) FROM generations") == [(0,)]

    async def after() -> None:
        cp = await opened(tmp_path, busy_timeout_ms=2000)  # the lock died with the writer
        assert await cp.append("victim", [ev("three")], expected_head=2) == 3
        assert [s.event for s in await read_all(cp, "victim")] == [
            ev("one"),
            ev("two"),
            ev("three"),
        ]
        report = await cp.check_integrity()
        assert report.ok, report.problems
        await cp.close()

    run(after())


def test_dur_002_killed_batch_spilled_into_the_wal_stays_invisible(tmp_path: Path) -> None:
    """A 3 MB batch overflows SQLite's page cache into the WAL before it commits."""
    run(populate(tmp_path))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_WRITER,
            str(tmp_path / DATABASE_NAME),
            "append.events_written",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "in-transaction", proc.stderr.read() if proc.stderr else ""
        assert (tmp_path / f"{DATABASE_NAME}-wal").stat().st_size > 1_000_000
    finally:
        proc.kill()
        proc.communicate()
    assert rows(tmp_path, "SELECT count(*) FROM events WHERE session_id = 'victim'") == [(0,)]
    assert rows(tmp_path, "SELECT count(*) FROM sessions WHERE session_id = 'victim'") == [(0,)]


def test_read_003_readers_see_the_last_commit_while_a_write_is_paused(tmp_path: Path) -> None:
    run(populate(tmp_path))
    reached, release = threading.Event(), threading.Event()

    def hook(point: str) -> None:
        if point == "append.before_commit":
            reached.set()
            release.wait()  # on the writer's worker thread: the event loop runs on

    async def check() -> None:
        writer, reader = await opened(tmp_path), await opened(tmp_path)
        writer.set_fault_hook(hook)
        pending = asyncio.ensure_future(writer.append("a", [ev(4), ev(5)], expected_head=3))
        await asyncio.get_running_loop().run_in_executor(None, reached.wait)
        assert await reader.head("a") == 3
        assert [s.seq for s in await read_all(reader, "a")] == [1, 2, 3]
        release.set()
        assert await pending == 5
        assert [s.seq for s in await read_all(reader, "a")] == [1, 2, 3, 4, 5]
        await writer.close()
        await reader.close()

    run(check())


def test_busy_beyond_timeout_is_store_busy_not_conflict(tmp_path: Path) -> None:
    run(populate(tmp_path))
    blocker = raw(tmp_path)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock

    async def blocked() -> None:
        cp = await opened(tmp_path, busy_timeout_ms=50)
        for operation, attempt in (
            ("append", cp.append("a", [ev(4)], expected_head=3)),
            ("truncate", cp.truncate("a", 1)),
            ("delete", cp.delete("b")),
        ):
            err = await raises(attempt, StoreBusyError)
            assert isinstance(err, StoreBusyError)
            assert err.operation == operation
        # WAL readers are not blocked by the writer.
        assert await cp.head("a") == 3
        assert len(await read_all(cp, "b")) == 1
        blocker.execute("ROLLBACK")
        assert await cp.append("a", [ev(4)], expected_head=3) == 4
        await cp.close()

    try:
        run(blocked())
    finally:
        blocker.close()


# -- group commit -----------------------------------------------------------------------


def test_group_commit_keeps_each_requests_outcome(tmp_path: Path) -> None:
    async def check() -> None:
        cp = await opened(tmp_path)
        await cp.append("g", [ev(0)])
        await cp.truncate("g", 0)  # generation 1
        before = cp.group_commit_stats
        outcomes = await asyncio.gather(
            *(cp.append("race", [ev(f"r{i}")], expected_head=0) for i in range(5)),
            *(cp.append("free", [ev(f"f{i}"), ev(f"f{i}")]) for i in range(3)),
            cp.truncate("free", 99),
            cp.append("g", [ev("stale")], expected_generation=0),
            cp.append("g", [ev("fresh")], expected_generation=1),
            return_exceptions=True,
        )
        after = cp.group_commit_stats
        # The first request finds the handle idle and commits alone; the ten queued
        # behind it share the next transaction.
        assert (after.rounds - before.rounds, after.requests - before.requests) == (2, 11)

        race, free, (trunc, stale, fresh) = outcomes[:5], outcomes[5:8], outcomes[8:]
        assert race[0] == 1
        for err in race[1:]:
            assert isinstance(err, CheckpointConflictError)
            assert (err.expected, err.actual, err.kind) == (0, 1, "head")
        assert free == [2, 4, 6]
        assert isinstance(trunc, InvalidArgumentError)
        assert trunc.argument == "to_seq"
        assert (trunc.reason_code, trunc.rule_id) == (ReasonCode.BEYOND_HEAD, "TRUNC-002")
        assert isinstance(stale, CheckpointConflictError)
        assert (stale.expected, stale.actual, stale.kind) == (0, 1, "generation")
        assert fresh == 1
        assert [s.event for s in await read_all(cp, "race")] == [ev("r0")]
        assert [s.seq for s in await read_all(cp, "free")] == [1, 2, 3, 4, 5, 6]
        await cp.close()

    run(check())


def test_group_commit_request_failing_midway_does_not_sink_the_round(tmp_path: Path) -> None:
    run(populate(tmp_path))
    conn = raw(tmp_path)  # make "a" inconsistent: its head says 2, but seq 3 exists
    conn.execute("UPDATE sessions SET head = 2 WHERE session_id = 'a'")
    conn.close()

    async def check() -> None:
        cp = await opened(tmp_path)
        before = cp.group_commit_stats
        lead, *outcomes = await asyncio.gather(
            cp.append("lead", [ev(0)]),  # commits alone; the next three share a round
            cp.append("x", [ev("x1")]),
            cp.append("a", [ev("collides")]),
            cp.append("y", [ev("y1"), ev("y2")]),
            return_exceptions=True,
        )
        assert cp.group_commit_stats.rounds - before.rounds == 2
        assert lead == 1
        assert outcomes[0] == 1
        assert outcomes[2] == 2
        assert isinstance(outcomes[1], CorruptStoreError)
        assert outcomes[1].session_id == "a"
        assert [s.event for s in await read_all(cp, "x")] == [ev("x1")]
        assert [s.event for s in await read_all(cp, "y")] == [ev("y1"), ev("y2")]
        await cp.close()

    run(check())
    assert rows(tmp_path, "SELECT count(*), max(seq) FROM events WHERE session_id = 'a'") == [
        (3, 3)
    ]


# -- codecs -----------------------------------------------------------------------------

CANARY = "CANARY-7f3a9c-plaintext"


def test_codec_005_no_plaintext_in_database_or_wal(tmp_path: Path) -> None:
    plain_store, coded_store = tmp_path / "plain", tmp_path / "coded"
    plain_store.mkdir()
    coded_store.mkdir()

    async def write(store: Path, codec: XorCodec | None) -> dict[str, bytes]:
        cp = await opened(store, codec=codec)
        await cp.append("s", [UserPrompt(CANARY), AssistantMessage(f"re: {CANARY}")])
        await cp.truncate("s", 1)
        await cp.append("s", [UserPrompt(CANARY * 3)])
        files = {p.name: p.read_bytes() for p in store.iterdir()}  # WAL still present
        await cp.close()
        files |= {f"closed:{p.name}": p.read_bytes() for p in store.iterdir()}
        return files

    plain = run(write(plain_store, None))
    assert any(CANARY.encode() in data for data in plain.values())  # the scan can see it
    coded = run(write(coded_store, XorCodec()))
    assert f"{DATABASE_NAME}-wal" in coded
    assert not [name for name, data in coded.items() if CANARY.encode() in data]


def test_codec_002_encode_failure_writes_nothing(tmp_path: Path) -> None:
    async def check() -> None:
        codec = FlakyCodec(fail_encode=4)
        cp = await opened(tmp_path, codec=codec)
        await cp.append("s", [ev(1), ev(2)])
        err = await raises(cp.append("s", [ev(3), ev(4), ev(5)], expected_head=2), CodecError)
        assert isinstance(err, CodecError)
        assert err.direction == "encode"
        assert await cp.head("s") == 2
        assert [s.event for s in await read_all(cp, "s")] == [ev(1), ev(2)]
        await cp.close()

    run(check())
    assert rows(tmp_path, "SELECT count(*) FROM events") == [(2,)]


def test_codec_003_decode_failure_raises_and_leaves_bytes_identical(tmp_path: Path) -> None:
    async def write() -> None:
        cp = await opened(tmp_path, codec=XorCodec())
        await cp.append("s", [ev(1), ev(2)])
        await cp.close()

    run(write())
    before = fingerprint(tmp_path)

    async def check() -> None:
        cp = await opened(tmp_path, codec=FlakyCodec(fail_decode=True))
        err = await raises(read_all(cp, "s"), CodecError)
        assert isinstance(err, CodecError)
        assert (err.direction, err.seq) == ("decode", 1)
        report = await cp.check_integrity()  # reported, never repaired
        assert not report.ok
        assert await cp.head("s") == 2
        await cp.close()
        cp = await opened(tmp_path, codec=GarbageCodec())
        err = await raises(read_all(cp, "s", 1), CodecError)  # decodes, but into no event
        assert isinstance(err, CodecError)
        assert err.seq == 2
        await cp.close()

    run(check())
    assert fingerprint(tmp_path) == before


# -- several processes ------------------------------------------------------------------

OPTIMISTIC_WRITER = """
import asyncio, sys
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.spec import CheckpointConflictError, UserPrompt

async def main(path, name, count):
    conflicts = 0
    async with SqliteCheckpointer(path) as cp:
        await cp.head("shared")
        print("ready", flush=True)
        sys.stdin.readline()  # start together
        for n in range(count):
            while True:
                head = await cp.head("shared")
                try:
                    await cp.append("shared", [UserPrompt(f"{name}:{n}")], expected_head=head)
                    break
                except CheckpointConflictError as err:
                    assert err.expected == head and err.actual > head, err
                    conflicts += 1
    print(f"done {conflicts}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def test_mp_001_two_processes_with_expected_head_never_fork(tmp_path: Path) -> None:
    run(populate(tmp_path))
    count = 60
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                OPTIMISTIC_WRITER,
                str(tmp_path / DATABASE_NAME),
                name,
                str(count),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p", "q")
    ]
    try:
        for proc in procs:
            assert proc.stdout
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert out.startswith("done")

    async def check() -> list[str]:
        cp = await opened(tmp_path)
        log = await read_all(cp, "shared")
        await cp.close()
        assert [s.seq for s in log] == list(range(1, 2 * count + 1))
        return [s.event.text for s in log if isinstance(s.event, UserPrompt)]

    texts = run(check())
    for name in ("p", "q"):  # each writer's events, each exactly once, in its order
        assert [t for t in texts if t.startswith(f"{name}:")] == [
            f"{name}:{n}" for n in range(count)
        ]


# -- lifecycle, clock, options ----------------------------------------------------------


def test_close_001_operations_after_close_and_other_handles(tmp_path: Path) -> None:
    async def check() -> None:
        one = await opened(tmp_path)
        two = await opened(tmp_path)
        await one.append("s", [ev(1)])
        reader = one.read("s")  # created before close, first step after it
        await one.close()
        await one.close()
        for attempt in (
            one.append("s", [ev(2)]),
            one.head("s"),
            one.list_sessions(),
            one.delete("s"),
        ):
            await raises(attempt, CheckpointerClosedError)
        await raises(reader.__anext__(), CheckpointerClosedError)
        assert await two.append("s", [ev(2)]) == 2
        await two.close()

    run(check())


def test_list_003_mtime_never_goes_back(tmp_path: Path) -> None:
    run(populate(tmp_path))
    future = 4_000_000_000.0  # as if the wall clock had been set back since
    conn = raw(tmp_path)
    conn.execute("UPDATE clock SET last_mtime = ?", (future,))
    conn.close()

    async def check() -> None:
        cp = await opened(tmp_path)
        await cp.append("late", [ev(1)])
        listing = await cp.list_sessions()
        assert listing[0].id == "late"
        assert listing[0].mtime >= future
        assert (await cp.check_integrity()).ok
        await cp.close()

    run(check())


def test_a_memory_database_declares_neither_durable_nor_multi_process() -> None:
    capabilities = SqliteCheckpointer(":memory:").capabilities
    assert Capability.DURABLE not in capabilities
    assert Capability.MULTI_PROCESS not in capabilities
    assert Capability.TRUNCATE in capabilities


def test_memory_database_and_lazy_open() -> None:
    async def check() -> None:
        cp = SqliteCheckpointer(":memory:", codec=XorCodec())
        assert await cp.append("s", [ev(1)]) == 1
        assert [s.event for s in await read_all(cp, "s")] == [ev(1)]
        assert (await cp.check_integrity()).ok
        await cp.close()

    run(check())


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"synchronous": "sometimes"}, ReasonCode.BAD_OPTION),
        ({"busy_timeout": "soon"}, ReasonCode.BAD_OPTION),
        ({"busy_timeout": "-1"}, ReasonCode.BAD_OPTION),
        ({"colour": "blue"}, ReasonCode.UNKNOWN_OPTION),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, options: dict[str, str], code: ReasonCode) -> None:
    error = run(raises(make(BackendContext(path=tmp_path, options=options)), InvalidArgumentError))
    assert isinstance(error, InvalidArgumentError)
    assert (error.reason_code, error.rule_id) == (code, None)  # options are no rule's
    assert not (tmp_path / DATABASE_NAME).exists()


@pytest.mark.parametrize(
    ("synchronous", "durable"),
    [
        ("OFF", False),
        ("0", False),
        ("NORMAL", False),
        ("1", False),
        ("FULL", True),
        ("EXTRA", True),
    ],
)
def test_durable_is_declared_only_when_every_commit_is_fsynced(
    tmp_path: Path, synchronous: str, durable: bool
) -> None:
    # NORMAL in WAL mode may roll back a commit after a power loss, OFF may lose
    # or corrupt anything: neither may promise DUR-003.
    async def capabilities() -> frozenset[Capability]:
        cp = await make(BackendContext(path=tmp_path, options={"synchronous": synchronous}))
        try:
            return cp.capabilities
        finally:
            await cp.close()

    declared = run(capabilities())
    assert (Capability.DURABLE in declared) is durable
    others = SqliteCheckpointer.capabilities - {Capability.DURABLE}
    assert declared - {Capability.DURABLE} == others
    assert Capability.DURABLE in SqliteCheckpointer.capabilities  # other handles keep it
