"""Backend-specific tests of the PostgreSQL backend, against a real server.

The conformance kit checks the contract (``tox -e conformance`` runs it on
PostgreSQL); these tests check what only this backend promises, looking at the
database out-of-band through plain psycopg connections: one schema per store
directory and its clean-up, the version marker, writers on different
connections, connections terminated mid-write, advisory maintenance locks, and
the CLI's one-line refusal of a bad DSN or an unreachable server. The server
is the ``postgres_dsn`` fixture (tests/conftest.py): without one these
tests skip, naming the reason, and with ``CI=true`` they fail.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from checkpointspec.backends.postgres import (  # noqa: E402
    MARKER_NAME,
    SCHEMA_VERSION,
    PostgresCheckpointer,
    drop_store,
    make,
)
from checkpointspec.backends.postgres.appends import Appends  # noqa: E402
from checkpointspec.backends.postgres.connections import ServerConnections  # noqa: E402
from checkpointspec.backends.postgres.maintenance import advisory_key, write_key  # noqa: E402
from checkpointspec.spec import (  # noqa: E402
    BackendContext,
    CheckpointConflictError,
    CorruptStoreError,
    ExternalStorage,
    InvalidArgumentError,
    SchemaVersionError,
    SessionLockedError,
)
from helpers import ev, run  # noqa: E402


async def open_store(dsn: str, path: Path) -> PostgresCheckpointer:
    return await make(BackendContext(path=path, options={"dsn": dsn}))


async def texts(cp: PostgresCheckpointer, sid: str) -> list[str]:
    return [str(getattr(stored.event, "text", "")) async for stored in cp.read(sid)]


def query(dsn: str, text: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``text`` on a fresh connection of the test's own (out-of-band)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


def schema_exists(dsn: str, schema: str) -> bool:
    return bool(query(dsn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


# -- one schema per store -----------------------------------------------------------------


def test_each_directory_is_its_own_schema(postgres_dsn: str, tmp_path: Path) -> None:
    async def go() -> None:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        a = await open_store(postgres_dsn, tmp_path / "a")
        b = await open_store(postgres_dsn, tmp_path / "b")
        try:
            assert a.schema != b.schema
            await a.append("s", [ev(1), ev(2)])
            assert await b.head("s") == 0
            assert await b.list_sessions() == []
            again = await open_store(postgres_dsn, tmp_path / "a")
            assert again.schema == a.schema
            assert await texts(again, "s") == ["event 1", "event 2"]
            await again.close()
        finally:
            await a.close()
            await b.close()
        assert (tmp_path / "a" / MARKER_NAME).read_text().strip() == a.schema
        assert await drop_store(postgres_dsn, tmp_path / "a") == a.schema
        assert not schema_exists(postgres_dsn, a.schema)
        assert not (tmp_path / "a" / MARKER_NAME).exists()

    run(go())


def test_a_store_whose_directory_is_gone_is_dropped_by_the_next_new_store(
    postgres_dsn: str, tmp_path: Path
) -> None:
    async def go() -> None:
        old_dir, new_dir = tmp_path / "old", tmp_path / "new"
        old_dir.mkdir()
        new_dir.mkdir()
        old = await open_store(postgres_dsn, old_dir)
        await old.append("s", [ev(1)])
        await old.close()
        (old_dir / MARKER_NAME).unlink()
        old_dir.rmdir()
        assert schema_exists(postgres_dsn, old.schema)
        new = await open_store(postgres_dsn, new_dir)
        await new.close()
        assert not schema_exists(postgres_dsn, old.schema)
        assert schema_exists(postgres_dsn, new.schema)

    run(go())


def test_drop_stores_drops_every_store_under_a_directory(postgres_dsn: str, tmp_path: Path) -> None:
    async def go() -> None:
        check, other = tmp_path / "check", tmp_path / "other"
        for path in (check / "store-0", check / "store-1", other):
            path.mkdir(parents=True)
        handles = [
            await open_store(postgres_dsn, p) for p in (check / "store-0", check / "store-1", other)
        ]
        for cp in handles:
            await cp.append("s", [ev(1)])
            await cp.close()
        first, second, kept = handles
        assert isinstance(first, ExternalStorage)
        dropped = await first.drop_stores(check)  # on a closed handle, as the kit calls it
        assert sorted(dropped) == sorted([first.schema, second.schema])
        assert not schema_exists(postgres_dsn, first.schema)
        assert not schema_exists(postgres_dsn, second.schema)
        assert schema_exists(postgres_dsn, kept.schema)

    run(go())


def test_the_kit_leaves_no_store_behind(postgres_dsn: str) -> None:
    def schemas() -> set[str]:
        rows = query(postgres_dsn, "SELECT nspname FROM pg_namespace")
        return {row[0] for row in rows}

    before = schemas()
    report = run_kit(
        plan_run(
            "postgres",
            profile="quick",
            seed=1,
            only=["APPEND-002::", "HANDLE-001::"],
            options={"dsn": postgres_dsn},
        )
    )
    assert report.exit_status == 0
    assert schemas() <= before  # each check's stores dropped when it ended


# -- schema version ------------------------------------------------------------------------


def test_schema_001_newer_store_is_refused_untouched(postgres_dsn: str, tmp_path: Path) -> None:
    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        await cp.append("s", [ev(1)])
        await cp.close()
        cp.mark_newer_schema(tmp_path)
        s = cp.schema
        before = query(postgres_dsn, f"SELECT * FROM {s}.version") + query(
            postgres_dsn, f"SELECT session_id, seq, payload FROM {s}.events ORDER BY 1, 2"
        )
        with pytest.raises(SchemaVersionError) as refused:
            await open_store(postgres_dsn, tmp_path)
        assert (refused.value.found, refused.value.supported) == (
            SCHEMA_VERSION + 1,
            SCHEMA_VERSION,
        )
        after = query(postgres_dsn, f"SELECT * FROM {s}.version") + query(
            postgres_dsn, f"SELECT session_id, seq, payload FROM {s}.events ORDER BY 1, 2"
        )
        assert after == before

    run(go())


def test_a_version_1_store_is_migrated_and_keeps_its_events(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before group commit (version 1, no append_group) is brought
    to the current version on open, and a group then commits on it."""
    sizes = _count_groups(monkeypatch)

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        await cp.append("s0", [ev("old")])
        await cp.close()
        s = cp.schema
        query(postgres_dsn, f"DROP FUNCTION {s}.append_group")
        query(postgres_dsn, f"UPDATE {s}.version SET version = 1")
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            assert query(postgres_dsn, f"SELECT version FROM {s}.version") == [(SCHEMA_VERSION,)]
            assert await asyncio.gather(cp.append("s0", [ev("new")]), cp.append("s1", [ev(1)])) == [
                2,
                1,
            ]
            assert await texts(cp, "s0") == ["event old", "event new"]
        finally:
            await cp.close()
        assert sizes == [2]

    run(go())


def test_a_foreign_schema_is_refused_not_adopted(postgres_dsn: str) -> None:
    query(postgres_dsn, "DROP SCHEMA IF EXISTS foreign_app CASCADE")
    query(postgres_dsn, "CREATE SCHEMA foreign_app; CREATE TABLE foreign_app.users (id int)")
    try:

        async def go() -> None:
            with pytest.raises(CorruptStoreError, match="not a checkpoint store"):
                await PostgresCheckpointer(postgres_dsn, schema="foreign_app").open()

        run(go())
        assert query(
            postgres_dsn,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'foreign_app'",
        ) == [("users",)]
    finally:
        query(postgres_dsn, "DROP SCHEMA foreign_app CASCADE")


def test_an_operator_store_is_not_created_when_create_is_false(postgres_dsn: str) -> None:
    async def go() -> None:
        with pytest.raises(CorruptStoreError, match="no checkpoint store"):
            await PostgresCheckpointer(postgres_dsn, schema="cps_nothing_here", create=False).open()

    run(go())
    assert not schema_exists(postgres_dsn, "cps_nothing_here")


# -- integrity -----------------------------------------------------------------------------


def test_integ_002_a_flipped_payload_bit_is_reported_and_refused(
    postgres_dsn: str, tmp_path: Path
) -> None:
    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        await cp.append("s", [ev("x" * 100)])
        await cp.close()
        what = cp.damage_store(tmp_path)
        assert "seq 1" in what
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            report = await cp.check_integrity()
            assert not report.ok
            assert "checksum" in report.problems[0]
            with pytest.raises(CorruptStoreError):
                await texts(cp, "s")
        finally:
            await cp.close()

    run(go())


def test_integrity_reports_a_gap_in_seqs(postgres_dsn: str, tmp_path: Path) -> None:
    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        await cp.append("s", [ev(1), ev(2), ev(3)])
        query(postgres_dsn, f"DELETE FROM {cp.schema}.events WHERE seq = 2")
        try:
            report = await cp.check_integrity()
        finally:
            await cp.close()
        assert not report.ok
        assert any("head is 3 but it has 2 event rows" in p for p in report.problems)

    run(go())


# -- concurrent writers --------------------------------------------------------------------


def test_writers_on_different_connections_form_one_chain(postgres_dsn: str, tmp_path: Path) -> None:
    """Four handles (four pools) race with expected_head: no fork, no lost update."""

    async def go() -> None:
        handles = [await open_store(postgres_dsn, tmp_path) for _ in range(4)]
        successes: list[tuple[int, str]] = []
        conflicts: list[CheckpointConflictError] = []

        async def writer(k: int, cp: PostgresCheckpointer) -> None:
            for i in range(15):
                head = await cp.head("s")
                try:
                    new = await cp.append("s", [ev(f"{k}.{i}")], expected_head=head)
                except CheckpointConflictError as exc:
                    conflicts.append(exc)
                else:
                    assert new == head + 1
                    successes.append((new, f"event {k}.{i}"))

        try:
            await asyncio.gather(*(writer(k, cp) for k, cp in enumerate(handles)))
            log = [(stored.seq, stored.event) async for stored in handles[0].read("s")]
        finally:
            for cp in handles:
                await cp.close()
        assert [seq for seq, _ in log] == list(range(1, len(successes) + 1))
        assert sorted(successes) == [(seq, getattr(e, "text", "")) for seq, e in log]
        assert len(successes) + len(conflicts) == 60
        # A conflict names a head that was really there, past the one expected.
        assert all(c.actual > c.expected for c in conflicts)

    run(go())


def test_unconditional_appends_from_many_tasks_lose_nothing(
    postgres_dsn: str, tmp_path: Path
) -> None:
    async def go() -> None:
        a = await open_store(postgres_dsn, tmp_path)
        b = await open_store(postgres_dsn, tmp_path)
        try:
            await asyncio.gather(
                *(cp.append("s", [ev(f"{n}a"), ev(f"{n}b")]) for n in range(20) for cp in (a, b))
            )
            got = await texts(a, "s")
        finally:
            await a.close()
            await b.close()
        assert len(got) == 80
        # Each batch stays together (APPEND-003): its two events are neighbours.
        for i in range(0, 80, 2):
            assert got[i].endswith("a")
            assert got[i + 1] == got[i][:-1] + "b"

    run(go())


# -- lost connections ----------------------------------------------------------------------


async def _wait_until_blocked(dsn: str, key: int) -> int:
    """The pid of the server process waiting for advisory lock ``key``, once it waits."""
    hi, lo = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for _ in range(10_000):
            cur = await conn.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s::bigint::oid AND objid = %s::bigint::oid",
                (hi, lo),
            )
            row = await cur.fetchone()
            if row is not None:
                return int(row[0])
    raise AssertionError("the append never waited for the lock")


def test_terminated_mid_append_is_absent_then_sent_again_on_a_new_connection(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """pg_terminate_backend while the append waits inside its transaction: the server
    rolls it back, the handle reconnects and sends it again, and the batch lands once."""

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        await cp.append("s", [ev(0)])
        key = write_key(cp.schema, "s")
        blocker = await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True)
        try:
            await blocker.execute("SELECT pg_advisory_lock(%s)", (key,))
            pending = asyncio.ensure_future(cp.append("s", [ev(1), ev(2)]))
            pid = await _wait_until_blocked(postgres_dsn, key)
            await blocker.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await blocker.execute("SELECT pg_advisory_unlock(%s)", (key,))
            assert await pending == 3
            assert await texts(cp, "s") == ["event 0", "event 1", "event 2"]
        finally:
            await blocker.close()
            await cp.close()

    run(go())


def test_a_commit_whose_reply_is_lost_is_found_not_repeated(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies after COMMIT was sent and executed: the append finds its
    request id on a new connection and returns its head instead of appending twice."""
    original = ServerConnections.transact
    lost: list[int] = []

    async def commit_then_die(self: ServerConnections, conn: Any, *args: Any) -> Any:
        result = await original(self, conn, *args)
        if not lost:
            lost.append(conn.info.backend_pid)
            await conn.close()  # the reply "never came"
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    monkeypatch.setattr(ServerConnections, "transact", commit_then_die)

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            assert await cp.append("s", [ev(1), ev(2)]) == 2
            assert await texts(cp, "s") == ["event 1", "event 2"]
        finally:
            await cp.close()

    run(go())
    assert lost


def test_every_connection_terminated_then_the_handle_reconnects(
    postgres_dsn: str, tmp_path: Path
) -> None:
    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            await asyncio.gather(*(cp.append(f"s{n}", [ev(n)]) for n in range(8)))
            ended = query(
                postgres_dsn,
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (f"checkpointspec {cp.schema}",),
            )
            assert ended
            assert all(ok for (ok,) in ended)
            assert await cp.append("s0", [ev("after")]) == 2
            assert await cp.head("s7") == 1
        finally:
            await cp.close()

    run(go())


# -- group commit --------------------------------------------------------------------------


def _count_groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every group sent as one transaction from now on."""
    sizes: list[int] = []
    original = Appends._send_group

    async def counted(self: Appends, group: Any) -> Any:
        sizes.append(len(group))
        return await original(self, group)

    monkeypatch.setattr(Appends, "_send_group", counted)
    return sizes


def test_a_group_answers_each_append_alone(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent appends of one handle share a transaction; a stale expected_head
    or expected_generation fails that append alone, with its exact conflict."""
    sizes = _count_groups(monkeypatch)

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            for n in range(6):
                await cp.append(f"s{n}", [ev(f"{n}.0")])
            stale = {1: 0, 3: 7}  # session -> a wrong expected head
            results = await asyncio.gather(
                *(
                    cp.append(
                        f"s{n}",
                        [ev(f"{n}.1"), ev(f"{n}.2")],
                        expected_head=stale.get(n, 1) if n != 5 else None,
                        expected_generation=1 if n == 5 else None,
                    )
                    for n in range(6)
                ),
                return_exceptions=True,
            )
            logs = [await texts(cp, f"s{n}") for n in range(6)]
        finally:
            await cp.close()
        assert sizes == [6]
        for n in (0, 2, 4):
            assert results[n] == 3
            assert logs[n] == [f"event {n}.0", f"event {n}.1", f"event {n}.2"]
        for n, expected, actual, kind in (
            (1, 0, 1, "head"),
            (3, 7, 1, "head"),
            (5, 1, 0, "generation"),
        ):
            error = results[n]
            assert isinstance(error, CheckpointConflictError)
            assert (error.expected, error.actual, error.kind) == (expected, actual, kind)
            assert logs[n] == [f"event {n}.0"]

    run(go())


def test_a_group_terminated_before_commit_is_sent_again_whole(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pg_terminate_backend while a group waits for one session's write lock: the
    server rolls the whole group back, and it is sent again and lands once."""
    sizes = _count_groups(monkeypatch)

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        key = write_key(cp.schema, "s0")
        blocker = await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True)
        try:
            await blocker.execute("SELECT pg_advisory_lock(%s)", (key,))
            pending = asyncio.gather(*(cp.append(f"s{n}", [ev(n)]) for n in range(3)))
            pid = await _wait_until_blocked(postgres_dsn, key)
            await blocker.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await blocker.execute("SELECT pg_advisory_unlock(%s)", (key,))
            assert await pending == [1, 1, 1]
            assert [await texts(cp, f"s{n}") for n in range(3)] == [
                [f"event {n}"] for n in range(3)
            ]
        finally:
            await blocker.close()
            await cp.close()
        assert sizes == [3]

    run(go())


def test_a_group_whose_commit_reply_is_lost_is_found_not_repeated(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies after a group's COMMIT executed: one request id found on a
    new connection answers the whole group, conflicts included, without resending."""
    sizes = _count_groups(monkeypatch)
    original = ServerConnections.commit
    lost: list[int] = []

    async def commit_then_die(self: ServerConnections, conn: Any, attempt: Any) -> None:
        await original(self, conn, attempt)
        if not lost:
            lost.append(conn.info.backend_pid)
            await conn.close()  # the reply "never came"
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        try:
            monkeypatch.setattr(ServerConnections, "commit", commit_then_die)
            results = await asyncio.gather(
                cp.append("a", [ev(1), ev(2)]),
                cp.append("b", [ev(3)]),
                cp.append("c", [ev(4)], expected_head=2),
                return_exceptions=True,
            )
            assert results[:2] == [2, 1]
            assert isinstance(results[2], CheckpointConflictError)
            assert (results[2].expected, results[2].actual) == (2, 0)
            assert await texts(cp, "a") == ["event 1", "event 2"]
            assert await texts(cp, "b") == ["event 3"]
            assert await cp.head("c") == 0
        finally:
            await cp.close()
        assert lost
        assert sizes == [3]

    run(go())


_GROUP_CHILD = """
import asyncio, sys
from checkpointspec.backends.postgres import PostgresCheckpointer
from checkpointspec.spec import UserPrompt

async def main(dsn, schema, sessions):
    async with PostgresCheckpointer(dsn, schema=schema, create=False) as cp:
        await asyncio.gather(*(cp.append(s, [UserPrompt(s)]) for s in sessions))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
"""


def test_a_killed_writers_group_is_never_visible(postgres_dsn: str, tmp_path: Path) -> None:
    """KILL-001 for a group: a process killed while its group waits for the last
    write lock (the other appends already run) never has any of it committed."""

    async def go() -> None:
        cp = await open_store(postgres_dsn, tmp_path)
        sessions = ["a", "b", "c"]
        last = max(sessions, key=lambda sid: write_key(cp.schema, sid))  # locked last
        key = write_key(cp.schema, last)
        blocker = await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True)
        await blocker.execute("SELECT pg_advisory_lock(%s)", (key,))
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _GROUP_CHILD, postgres_dsn, cp.schema, *sessions
        )
        try:
            pid = await _wait_until_blocked(postgres_dsn, key)
            # The other two appends have run in that transaction: it holds their write locks.
            held = query(
                postgres_dsn,
                "SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype = 'advisory'"
                " AND granted AND mode = 'ExclusiveLock'",
                (pid,),
            )
            assert held == [(2,)]
            events = f"SELECT count(*) FROM {cp.schema}.events"
            assert query(postgres_dsn, events) == [(0,)]
            child.kill()
            await child.wait()
            await blocker.execute("SELECT pg_advisory_unlock(%s)", (key,))
            # head waits for each session's write lock: for the dead group's outcome.
            assert [await cp.head(sid) for sid in sessions] == [0, 0, 0]
            assert query(postgres_dsn, events) == [(0,)]
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
            await blocker.close()
            await cp.close()

    run(go())


# -- maintenance lock ----------------------------------------------------------------------


def test_maint_004_the_lock_dies_with_the_holders_connection(
    postgres_dsn: str, tmp_path: Path
) -> None:
    async def go() -> None:
        holder = await open_store(postgres_dsn, tmp_path)
        other = await open_store(postgres_dsn, tmp_path)
        try:
            await holder.acquire_maintenance("s")
            with pytest.raises(SessionLockedError):
                await other.append("s", [ev(1)])
            with pytest.raises(SessionLockedError):
                await other.acquire_maintenance("s")
            assert await holder.append("s", [ev(1)]) == 1
            # The holder's process "dies": its server process ends, and the lock with it.
            key = advisory_key(holder.schema, "s")
            ended = query(
                postgres_dsn,
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory'"
                " AND mode = 'ExclusiveLock' AND granted"
                " AND classid = %s::bigint::oid AND objid = %s::bigint::oid",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
            )
            assert ended == [(True,)]
            assert await other.append("s", [ev(2)]) == 2
            await other.acquire_maintenance("s")
        finally:
            await holder.close()
            await other.close()

    run(go())


# -- bad DSNs and unreachable servers ---------------------------------------------------------


def test_a_malformed_dsn_is_a_bad_option(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        run(make(BackendContext(path=tmp_path, options={"dsn": "not a dsn"})))
    assert refused.value.argument == "dsn"
    assert not (tmp_path / MARKER_NAME).exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CHECKPOINTSPEC_POSTGRES_DSN"}
    return subprocess.run(
        [sys.executable, "-m", "checkpointspec.conformance.frontends.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("dsn", "phrase"),
    [
        ("not a dsn", "not a PostgreSQL connection string"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot connect to PostgreSQL"),
        ("", "no PostgreSQL DSN"),
    ],
)
def test_cli_refuses_a_bad_or_unreachable_dsn_in_one_line(dsn: str, phrase: str) -> None:
    options = ["--option", f"dsn={dsn}"] if dsn else []
    done = _cli("run", "postgres", *options, "--profile", "quick", "--quiet")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert phrase in lines[0]


def test_operator_store_postgres_dsn_lists_sessions_and_creates_nothing(postgres_dsn: str) -> None:
    query(postgres_dsn, "DROP SCHEMA IF EXISTS checkpointspec CASCADE")
    missing = _cli("sessions", f"postgres:{postgres_dsn}")
    assert missing.returncode == 2
    assert "no store in schema checkpointspec" in missing.stderr
    assert not schema_exists(postgres_dsn, "checkpointspec")

    async def fill() -> None:
        cp = await PostgresCheckpointer(postgres_dsn).open()
        await cp.append("operator-session", [ev(1)])
        await cp.close()

    run(fill())
    try:
        listed = _cli("sessions", f"postgres:{postgres_dsn}")
        assert listed.returncode == 0, listed.stderr
        assert "operator-session" in listed.stdout
    finally:
        query(postgres_dsn, "DROP SCHEMA checkpointspec CASCADE")
