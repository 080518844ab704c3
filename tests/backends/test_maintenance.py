"""The maintenance lock of the three reference backends, beyond the kit's MAINT checks.

What is on disk while a session is held and after (the file backend's
``.maint`` file, the SQLite backend's ``maintenance`` row and lock file, looked
at out-of-band), a holder process SIGKILLed while it holds a session (the
parent learns through a pipe that the lock is taken, never by waiting), reopen,
awkward session ids, and an SQLite store of the schema before the lock,
migrated when opened. Test names start with the rule id they are about.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.file.naming import stem_for
from checkpointspec.backends.fsport import OsFileSystem
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore
from checkpointspec.backends.sqlite import DATABASE_NAME, SCHEMA_VERSION, SqliteCheckpointer
from checkpointspec.backends.sqlite.maintenance import LOCKS_SUFFIX
from checkpointspec.conformance.engines.crash.disk import SimulatedDisk
from checkpointspec.spec import (
    Capability,
    CheckpointerClosedError,
    MaintenanceLockable,
    SessionLockedError,
    UnsupportedOperationError,
)
from helpers import ev, read_all, run

BACKENDS = ("memory", "file", "sqlite")


Opener = Callable[[], Awaitable[MaintenanceLockable]]


def opener(kind: str, store: Path) -> Opener:
    """Opens handles of backend ``kind`` on one store at ``store``."""
    shared = MemoryStore()

    async def open_handle() -> MaintenanceLockable:
        if kind == "memory":
            return MemoryCheckpointer(shared)
        if kind == "file":
            return FileCheckpointer(store, durability=Durability.PROCESS)
        return await SqliteCheckpointer(store / DATABASE_NAME, synchronous="OFF").open()

    return open_handle


def maint_file(store: Path, sid: str) -> Path:
    return store / "sessions" / f"{stem_for(sid)}.maint"


def maintenance_rows(store: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(store / DATABASE_NAME, isolation_level=None)
    try:
        return conn.execute("SELECT session_id FROM maintenance ORDER BY session_id").fetchall()
    finally:
        conn.close()


def lock_dir(store: Path) -> Path:
    return store / (DATABASE_NAME + LOCKS_SUFFIX)


# -- the lock on every backend --------------------------------------------------------------


@pytest.mark.parametrize("kind", BACKENDS)
def test_MAINT_001_other_handles_are_refused_and_write_nothing(kind: str, tmp_path: Path) -> None:
    async def go() -> None:
        open_handle = opener(kind, tmp_path)
        holder, other = await open_handle(), await open_handle()
        await holder.append("s", [ev(1), ev(2)])
        await holder.acquire_maintenance("s")
        for call in (
            lambda: other.append("s", [ev("lost")]),
            lambda: other.append("s", []),
            lambda: other.truncate("s", 0),
            lambda: other.delete("s"),
        ):
            with pytest.raises(SessionLockedError) as refused:
                await call()
            assert refused.value.session_id == "s"
        assert refused.value.operation == "delete"
        assert [s.seq for s in await read_all(other, "s")] == [1, 2]
        # The holder writes, empty appends included; other sessions are not held.
        assert await holder.append("s", []) == 2
        assert await holder.append("s", [ev(3)], expected_head=2) == 3
        assert await other.append("t", [ev("t")]) == 1
        await holder.release_maintenance("s")
        assert await other.append("s", [ev(4)]) == 4
        await holder.close()
        await other.close()

    run(go())


@pytest.mark.parametrize("kind", BACKENDS)
def test_MAINT_003_not_reentrant_and_close_gives_every_session_back(
    kind: str, tmp_path: Path
) -> None:
    async def go() -> None:
        open_handle = opener(kind, tmp_path)
        holder, other = await open_handle(), await open_handle()
        await holder.acquire_maintenance("a")
        await holder.acquire_maintenance("b")
        with pytest.raises(SessionLockedError):
            await holder.acquire_maintenance("a")
        with pytest.raises(SessionLockedError):
            await other.acquire_maintenance("b")
        await other.release_maintenance("a")  # not its lock: nothing happens
        with pytest.raises(SessionLockedError):
            await other.append("a", [ev(1)])
        assert await other.head("a") == 0  # held, but not created
        await holder.close()
        with pytest.raises(CheckpointerClosedError):
            await holder.acquire_maintenance("c")
        assert await other.append("a", [ev(1)]) == 1
        assert await other.append("b", [ev(1)]) == 1
        await other.acquire_maintenance("a")
        await other.close()

    run(go())


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_MAINT_003_a_reopened_store_is_free(kind: str, tmp_path: Path) -> None:
    async def go() -> None:
        open_handle = opener(kind, tmp_path)
        first = await open_handle()
        await first.append("s", [ev(1)])
        await first.acquire_maintenance("s")
        await first.close()
        again = await open_handle()
        await again.acquire_maintenance("s")
        assert await again.append("s", [ev(2)]) == 2
        await again.close()

    run(go())
    if kind == "file":
        assert not maint_file(tmp_path, "s").exists()
    else:
        assert maintenance_rows(tmp_path) == []
        assert list(lock_dir(tmp_path).iterdir()) == []


def test_the_memory_backend_without_maintenance_refuses_to_acquire() -> None:
    class Without(MemoryCheckpointer):
        capabilities = MemoryCheckpointer.capabilities - {Capability.MAINTENANCE}

    async def go() -> None:
        cp = Without()
        with pytest.raises(UnsupportedOperationError) as refused:
            await cp.acquire_maintenance("s")
        assert refused.value.capability == "maintenance"
        assert await cp.append("s", [ev(1)]) == 1
        await cp.close()

    run(go())


# -- what is on disk ------------------------------------------------------------------------


def meta_mark(store: Path, sid: str) -> bytes:
    """Byte 32 of the session's ``.meta`` file, read out-of-band (b"" when the file is shorter)."""
    return (store / "sessions" / f"{stem_for(sid)}.meta").read_bytes()[32:33]


class RecordingFS(OsFileSystem):
    """The real file system, noting every path opened."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        self.opened.append(path)
        return super().open(path, create=create, truncate=truncate)


def test_the_file_backend_marks_a_held_session_in_its_meta_file(tmp_path: Path) -> None:
    async def go() -> None:
        cp = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        await cp.append("s", [ev(1)])
        assert meta_mark(tmp_path, "s") in (b"", b"\0")
        await cp.acquire_maintenance("s")
        assert meta_mark(tmp_path, "s") == b"\1"
        await cp.append("s", [ev(2)])
        assert await cp.generation("s") == 0  # the mark is no generation change
        await cp.release_maintenance("s")
        assert meta_mark(tmp_path, "s") == b"\0"
        await cp.close()

    run(go())


def test_taking_a_dead_holders_lock_does_not_hide_a_truncate_from_the_cached_view(
    tmp_path: Path,
) -> None:
    # The mark shares the .meta file with the generation: reading it to take the
    # lock must not stand in for the refresh that notices another handle's truncate.
    async def go() -> None:
        holder = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        other = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        await holder.append("s", [ev(1), ev(2), ev(3)])
        assert await other.truncate("s", 1) == 1
        # A holder that died right after marking the session: the mark, no .maint file.
        meta = tmp_path / "sessions" / f"{stem_for('s')}.meta"
        with meta.open("r+b") as file:
            file.seek(32)
            file.write(b"\1")
        await holder.acquire_maintenance("s")
        assert await holder.append("s", [ev("after")], expected_head=1) == 2
        assert [s.seq for s in await read_all(other, "s")] == [1, 2]
        await holder.release_maintenance("s")
        assert meta_mark(tmp_path, "s") == b"\0"
        assert await other.append("s", [ev(3)], expected_head=2) == 3
        await holder.close()
        await other.close()

    run(go())


def test_an_append_to_a_session_nobody_holds_never_looks_for_a_maint_file(tmp_path: Path) -> None:
    fs = RecordingFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, durability=Durability.PROCESS, fs=fs)
        other = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        await cp.append("s", [ev(1)])
        await other.acquire_maintenance("s")
        await other.release_maintenance("s")  # held once: the mark is back to 0
        fs.opened.clear()
        for n in range(2, 6):
            await cp.append("s", [ev(n)])
        await cp.truncate("s", 4)
        assert not [path for path in fs.opened if path.endswith(".maint")]
        await cp.close()
        await other.close()

    run(go())


class FailingUnlinkFS(OsFileSystem):
    """The real file system, except that removing a ``.maint`` file fails."""

    def unlink(self, path: str) -> None:
        if path.endswith(".maint"):
            raise PermissionError(path)
        super().unlink(path)


def test_a_file_handle_whose_release_fails_still_closes_and_drops_its_lock(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        holder = FileCheckpointer(tmp_path, durability=Durability.PROCESS, fs=FailingUnlinkFS())
        other = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        await holder.acquire_maintenance("s")
        with pytest.raises(PermissionError):
            await holder.close()
        with pytest.raises(CheckpointerClosedError):
            await holder.append("s", [ev(1)])
        assert maint_file(tmp_path, "s").exists()  # left behind, but no longer locked
        assert await other.append("s", [ev(1)]) == 1
        assert not maint_file(tmp_path, "s").exists()
        await other.close()

    run(go())


def test_the_file_backend_holds_sessions_through_its_file_system_port(tmp_path: Path) -> None:
    # Restores run on the simulated disk too (power-loss checks): the lock must
    # go through the port like every other file operation.
    FileCheckpointer(tmp_path)  # creates the store's marker and directory
    disk = SimulatedDisk.load(tmp_path)

    async def go() -> None:
        holder = FileCheckpointer(tmp_path, fs=disk)
        other = FileCheckpointer(tmp_path, fs=disk)
        await holder.append("s", [ev(1)])
        await holder.acquire_maintenance("s")
        on_disk = disk.listdir(str(tmp_path / "sessions"))
        assert f"{stem_for('s')}.maint" in on_disk
        assert not maint_file(tmp_path, "s").exists()  # only the port saw it
        with pytest.raises(SessionLockedError):
            await other.append("s", [ev(2)])
        await holder.release_maintenance("s")
        assert await other.append("s", [ev(2)]) == 2
        await holder.close()
        await other.close()

    run(go())


def test_the_file_backend_keeps_the_lock_in_a_maint_file_that_is_no_session(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        cp = FileCheckpointer(tmp_path, durability=Durability.PROCESS)
        await cp.append("s", [ev(1)])
        await cp.acquire_maintenance("s")
        await cp.acquire_maintenance("never written")
        assert maint_file(tmp_path, "s").exists()
        assert maint_file(tmp_path, "never written").exists()
        assert [info.id for info in await cp.list_sessions()] == ["s"]
        report = await cp.check_integrity()
        assert report.ok, report.detail
        assert "held for maintenance" in report.detail
        await cp.release_maintenance("s")
        assert not maint_file(tmp_path, "s").exists()
        await cp.close()
        assert not maint_file(tmp_path, "never written").exists()

    run(go())


@pytest.mark.parametrize("sid", ["a/b", "a_b", "../x", "/abs", "CON", "x" * 256, "é"])
def test_awkward_ids_are_held_apart_and_inside_the_store(sid: str, tmp_path: Path) -> None:
    async def go() -> None:
        for kind in ("file", "sqlite"):
            store = tmp_path / kind
            store.mkdir()
            open_handle = opener(kind, store)
            holder, other = await open_handle(), await open_handle()
            await holder.acquire_maintenance(sid)
            with pytest.raises(SessionLockedError):
                await other.append(sid, [ev(1)])
            assert await other.append("n" + sid[1:], [ev(1)]) == 1  # a neighbour is not held
            inside = {p.resolve() for p in store.rglob("*")}
            assert all(str(p).startswith(str(store.resolve())) for p in inside)
            await holder.close()
            await other.close()

    run(go())


def test_sqlite_keeps_a_row_and_a_locked_file_while_held(tmp_path: Path) -> None:
    async def go() -> None:
        cp = await SqliteCheckpointer(tmp_path / DATABASE_NAME).open()
        await cp.acquire_maintenance("s")
        assert maintenance_rows(tmp_path) == [("s",)]
        (lock,) = lock_dir(tmp_path).iterdir()
        assert lock.name == hashlib.sha256(b"s").hexdigest() + ".lock"
        fd = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the holder keeps its flock
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        await cp.release_maintenance("s")
        assert maintenance_rows(tmp_path) == []
        assert list(lock_dir(tmp_path).iterdir()) == []
        await cp.close()

    run(go())


def test_sqlite_in_memory_holds_sessions_without_lock_files(tmp_path: Path) -> None:
    async def go() -> None:
        cp = await SqliteCheckpointer(":memory:").open()
        assert Capability.MAINTENANCE in cp.capabilities
        await cp.acquire_maintenance("s")
        with pytest.raises(SessionLockedError):
            await cp.acquire_maintenance("s")
        assert await cp.append("s", [ev(1)]) == 1
        await cp.release_maintenance("s")
        await cp.acquire_maintenance("s")
        await cp.close()

    run(go())


def test_sqlite_store_of_schema_1_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    async def populate() -> None:
        cp = await SqliteCheckpointer(tmp_path / DATABASE_NAME).open()
        await cp.append("s", [ev(1), ev(2)])
        await cp.close()

    run(populate())
    # Back to the schema before the lock, as a store written by the previous release.
    conn = sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None)
    conn.execute("DROP TABLE maintenance")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert SCHEMA_VERSION == 2

    async def reopen() -> None:
        cp = await SqliteCheckpointer(tmp_path / DATABASE_NAME).open()
        assert [s.seq for s in await read_all(cp, "s")] == [1, 2]
        await cp.acquire_maintenance("s")
        assert await cp.append("s", [ev(3)]) == 3
        assert (await cp.check_integrity()).ok
        await cp.close()

    run(reopen())
    conn = sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    finally:
        conn.close()


# -- a holder process killed while it holds the session ------------------------------------

_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from checkpointspec.backends.file import FileCheckpointer
    from checkpointspec.backends.sqlite import DATABASE_NAME, SqliteCheckpointer
    from checkpointspec.spec import UserPrompt

    async def main(kind, path):
        if kind == "file":
            cp = FileCheckpointer(Path(path))
        else:
            cp = await SqliteCheckpointer(Path(path) / DATABASE_NAME).open()
        await cp.acquire_maintenance("s")
        await cp.append("s", [UserPrompt("by the holder")])
        print("held", flush=True)
        sys.stdin.readline()  # hold until killed

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_MAINT_004_a_killed_holder_leaves_a_stale_lock_the_next_writer_clears(
    kind: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, kind, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "held", holder.stderr.read() if holder.stderr else line

        async def while_held() -> None:
            cp = await opener(kind, tmp_path)()
            with pytest.raises(SessionLockedError):
                await cp.append("s", [ev("refused")])
            with pytest.raises(SessionLockedError):
                await cp.acquire_maintenance("s")
            assert [s.seq for s in await read_all(cp, "s")] == [1]
            await cp.close()

        run(while_held())
    finally:
        holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout, holder.stderr):
            if pipe is not None:
                pipe.close()
    # The dead holder's lock is still recorded on disk ...
    if kind == "file":
        assert maint_file(tmp_path, "s").exists()
    else:
        assert maintenance_rows(tmp_path) == [("s",)]

    async def after_death() -> None:
        cp = await opener(kind, tmp_path)()
        assert await cp.append("s", [ev("after")]) == 2
        await cp.acquire_maintenance("s")
        await cp.release_maintenance("s")
        await cp.close()

    run(after_death())
    # ... until the next writer finds its lock free and removes it.
    if kind == "file":
        assert not maint_file(tmp_path, "s").exists()
    else:
        assert maintenance_rows(tmp_path) == []
        assert list(lock_dir(tmp_path).iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_MAINT_004_a_dead_holders_lock_is_taken_over_by_acquire(kind: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, kind, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()

    async def go() -> None:
        open_handle = opener(kind, tmp_path)
        first, second = await open_handle(), await open_handle()
        await first.acquire_maintenance("s")  # no write came first: acquire clears it
        with pytest.raises(SessionLockedError):
            await second.append("s", [ev("refused")])
        assert await first.append("s", [ev(2)]) == 2
        await first.close()
        assert await second.append("s", [ev(3)]) == 3
        await second.close()

    run(go())
