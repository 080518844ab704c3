"""Workspace on real temporary directories, over the memory and file backends (SNAP-001..004).

Each refusal is checked out-of-band: the log is read back through the
checkpointer and the directory tree is listed with the standard library, so a
refusal that still recorded or wrote something fails.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.fsport import HookedFileSystem, OsFileSystem
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.conformance.engines.crash.disk import SimulatedDisk
from checkpointspec.reference import workspace as workspace_module
from checkpointspec.reference.workspace import RESERVED_DIR, Workspace
from checkpointspec.spec import (
    ABSENT_HASH,
    CheckpointConflictError,
    Checkpointer,
    CheckpointerClosedError,
    FileSnapshot,
    InvalidArgumentError,
    ReasonCode,
    SessionEvent,
    SessionLockedError,
    StoredEvent,
    UserPrompt,
)

T = TypeVar("T")
SID = "s"

BACKENDS: dict[str, Callable[[Path], Checkpointer]] = {
    "memory": lambda tmp: MemoryCheckpointer(),
    "file": lambda tmp: FileCheckpointer(tmp / "store"),
}

Body = Callable[[Checkpointer, Workspace, Path], Awaitable[T]]


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Callable[[Path], Checkpointer]:
    return BACKENDS[request.param]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def run(
    backend: Callable[[Path], Checkpointer],
    root: Path,
    body: Body[T],
    **kw: Any,
) -> T:
    async def main() -> T:
        cp = backend(root.parent)
        try:
            return await body(cp, Workspace(root, cp, SID, **kw), root)
        finally:
            await cp.close()

    return asyncio.run(main())


async def log(cp: Checkpointer) -> list[SessionEvent]:
    return [stored.event async for stored in cp.read(SID)]


def tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path``: files with their bytes, directories and links as None."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = full.relative_to(path).as_posix()
            found[rel] = None if full.is_symlink() or full.is_dir() else full.read_bytes()
    return found


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- SNAP-001: the snapshot is recorded, then the file changes ---------------------------


def test_snap_001_create_records_absent_then_writes(backend: Any, root: Path) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        snap = await ws.write("notes.txt", "hello", tool_call_id="call-1")
        assert snap == FileSnapshot(
            "notes.txt", None, hash_after=sha(b"hello"), tool_call_id="call-1"
        )
        assert await log(cp) == [snap]
        assert (root / "notes.txt").read_bytes() == b"hello"
        assert tree(root) == {"notes.txt": b"hello"}, "no temporary file is left behind"

    run(backend, root, body)


def test_snap_001_overwrite_records_the_text_before(backend: Any, root: Path) -> None:
    (root / "a.txt").write_text("old é")

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        snap = await ws.write("a.txt", b"new")
        assert snap.content_before == "old é"
        assert snap.encoding == "utf-8"
        assert not snap.truncated
        assert snap.hash_after == sha(b"new")
        assert snap.tool_call_id is None
        assert await log(cp) == [snap]
        assert (root / "a.txt").read_bytes() == b"new"

    run(backend, root, body)


def test_snap_001_binary_content_is_kept_as_base64(backend: Any, root: Path) -> None:
    binary = bytes(range(256))
    (root / "blob.bin").write_bytes(binary)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        snap = await ws.write("blob.bin", b"\xff\xfe")
        assert snap.encoding == "base64"
        assert snap.content_before is not None
        assert base64.b64decode(snap.content_before) == binary
        assert (root / "blob.bin").read_bytes() == b"\xff\xfe"

    run(backend, root, body)


def test_snap_001_paths_are_recorded_canonical_and_parents_created(
    backend: Any, root: Path
) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        snap = await ws.write("./deep//er/./file.txt", "x")
        assert snap.path == "deep/er/file.txt"
        assert (root / "deep" / "er" / "file.txt").read_text() == "x"
        assert ws.read("deep/er/file.txt") == b"x"

    run(backend, root, body)


def test_snap_001_delete_records_the_content_and_removes_the_file(backend: Any, root: Path) -> None:
    (root / "gone.txt").write_text("bye")

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        snap = await ws.delete("gone.txt", tool_call_id="c")
        assert snap == FileSnapshot("gone.txt", "bye", hash_after=ABSENT_HASH, tool_call_id="c")
        assert await log(cp) == [snap]
        assert not (root / "gone.txt").exists()
        assert ws.read("gone.txt") is None

    run(backend, root, body)


def test_snap_001_deleting_a_missing_file_is_refused(backend: Any, root: Path) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        with pytest.raises(InvalidArgumentError) as refused:
            await ws.delete("never.txt")
        assert refused.value.reason_code is ReasonCode.NO_SUCH_FILE
        assert refused.value.rule_id == "SNAP-001"
        assert await log(cp) == []
        assert tree(root) == {}

    run(backend, root, body)


@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_snap_001_a_directory_or_a_fifo_is_not_a_file(backend: Any, root: Path, kind: str) -> None:
    if kind == "dir":
        (root / kind).mkdir()
    else:
        os.mkfifo(root / kind)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        for attempt in (ws.write(kind, "x"), ws.delete(kind)):
            with pytest.raises(InvalidArgumentError) as refused:
                await attempt
            assert refused.value.reason_code is ReasonCode.NOT_A_FILE
        with pytest.raises(InvalidArgumentError):
            ws.read(kind)
        assert await log(cp) == []

    run(backend, root, body)
    assert sorted(os.listdir(root)) == [kind]

    run(backend, root, body)


def test_snap_001_snapshots_follow_the_log_of_earlier_events(backend: Any, root: Path) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        await cp.append(SID, [UserPrompt("go")])
        first = await ws.write("f", "1")
        second = await ws.write("f", "2")
        third = await ws.delete("f")
        assert await log(cp) == [UserPrompt("go"), first, second, third]
        assert [first.content_before, second.content_before, third.content_before] == [
            None,
            "1",
            "2",
        ]

    run(backend, root, body)


def test_snap_001_an_executable_stays_executable(backend: Any, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        await ws.write("run.sh", "#!/bin/sh\necho hi\n")
        assert script.stat().st_mode & 0o777 == 0o755

    run(backend, root, body)


# -- SNAP-002: oversized content ---------------------------------------------------------


def test_snap_002_oversized_content_is_truncated_and_the_write_goes_ahead(
    backend: Any, root: Path
) -> None:
    (root / "big.txt").write_bytes(b"12345")
    (root / "small.txt").write_bytes(b"1234")

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        big = await ws.write("big.txt", "after")
        small = await ws.write("small.txt", "after")
        assert (big.truncated, big.content_before) == (True, "")
        assert big.hash_after == sha(b"after")
        assert (small.truncated, small.content_before) == (False, "1234")
        assert (root / "big.txt").read_bytes() == b"after"

    run(backend, root, body, snapshot_limit=4)


# -- SNAP-003: refused paths, nothing recorded, nothing written ---------------------------

UNSAFE = [
    "/etc/passwd",
    "../outside.txt",
    "a/../../outside.txt",
    "a/../b",
    "nul\x00byte",
    "",
    ".",
    "./",
    f"{RESERVED_DIR}/journal",
    f"{RESERVED_DIR}",
    ".CheckpointSpec/journal",
    "escape/outside.txt",
    "escape-file",
    "into-reserved/x",
    "parent-link/file",
]


def _plant_links(root: Path) -> Path:
    """Symlinks leaving the root (to a directory, to a file) and one into the reserved folder."""
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "outside.txt").write_text("untouchable")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape-file").symlink_to(outside / "outside.txt")
    (root / RESERVED_DIR).mkdir()
    (root / "into-reserved").symlink_to(RESERVED_DIR, target_is_directory=True)
    (root / "parent-link").symlink_to("..", target_is_directory=True)
    return outside


@pytest.mark.parametrize("path", UNSAFE)
@pytest.mark.parametrize("operation", ["write", "delete", "read", "resolve"])
def test_snap_003_unsafe_paths_are_refused_with_nothing_recorded_or_written(
    backend: Any, root: Path, path: str, operation: str
) -> None:
    outside = _plant_links(root)
    before_root, before_outside = tree(root), tree(outside)

    async def attempt(ws: Workspace) -> object:
        if operation == "write":
            return await ws.write(path, "payload")
        if operation == "delete":
            return await ws.delete(path)
        return ws.read(path) if operation == "read" else ws.resolve(path)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        with pytest.raises(InvalidArgumentError) as refused:
            await attempt(ws)
        assert refused.value.reason_code is ReasonCode.UNSAFE_PATH
        assert refused.value.rule_id == "SNAP-003"
        assert await log(cp) == []

    run(backend, root, body)
    assert tree(root) == before_root
    assert tree(outside) == before_outside


def test_snap_003_a_non_str_path_is_refused(backend: Any, root: Path) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        with pytest.raises(InvalidArgumentError) as refused:
            await ws.write(b"bytes-path", "x")  # type: ignore[arg-type]
        assert refused.value.reason_code is ReasonCode.UNSAFE_PATH
        assert await log(cp) == []

    run(backend, root, body)


def test_snap_003_a_symlink_inside_the_root_is_followed_and_the_target_recorded(
    backend: Any, root: Path
) -> None:
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("before")
    (root / "alias").symlink_to("real", target_is_directory=True)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        assert ws.resolve("alias/f.txt") == "real/f.txt"
        snap = await ws.write("alias/f.txt", "after")
        assert (snap.path, snap.content_before) == ("real/f.txt", "before")
        assert (root / "real" / "f.txt").read_text() == "after"
        assert (root / "alias").is_symlink(), "the link itself is not replaced"

    run(backend, root, body)


def test_snap_003_a_root_reached_through_a_symlink_is_not_an_escape(
    backend: Any, tmp_path: Path
) -> None:
    real = tmp_path / "real-root"
    real.mkdir()
    link = tmp_path / "ws"
    link.symlink_to(real, target_is_directory=True)

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        await ws.write("f", "x")
        assert (real / "f").read_text() == "x"

    run(backend, link, body)


# -- SNAP-004: no snapshot, no change ----------------------------------------------------


def test_snap_004_a_closed_checkpointer_leaves_the_file_untouched(backend: Any, root: Path) -> None:
    (root / "f.txt").write_text("kept")

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        await cp.close()
        with pytest.raises(CheckpointerClosedError):
            await ws.write("f.txt", "lost")
        with pytest.raises(CheckpointerClosedError):
            await ws.write("new.txt", "lost")
        with pytest.raises(CheckpointerClosedError):
            await ws.delete("f.txt")

    run(backend, root, body)
    assert tree(root) == {"f.txt": b"kept"}


class Refusing:
    """A checkpointer whose appends fail the way a concurrent writer or a lock makes them."""

    def __init__(self, inner: Checkpointer, failure: str) -> None:
        self._inner = inner
        self._failure = failure
        self.capabilities = inner.capabilities

    async def append(
        self, session_id: str, events: Sequence[SessionEvent], expected_head: int | None = None
    ) -> int:
        if self._failure == "locked":
            raise SessionLockedError(session_id, "append")
        # A writer that believed the log empty: the prompt appended below makes it stale.
        return await self._inner.append(session_id, events, expected_head=0)

    def read(self, session_id: str, since_seq: int = 0) -> Any:
        return self._inner.read(session_id, since_seq)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize(
    ("failure", "error"), [("conflict", CheckpointConflictError), ("locked", SessionLockedError)]
)
def test_snap_004_a_refused_append_leaves_the_file_untouched(
    backend: Any, root: Path, failure: str, error: type[Exception]
) -> None:
    (root / "f.txt").write_text("kept")

    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        await cp.append(SID, [UserPrompt("go")])
        wrapped = Workspace(root, Refusing(cp, failure), SID)  # type: ignore[arg-type]
        with pytest.raises(error):
            await wrapped.write("f.txt", "lost")
        with pytest.raises(error):
            await wrapped.write("sub/new.txt", "lost")
        with pytest.raises(error):
            await wrapped.delete("f.txt")
        assert await log(cp) == [UserPrompt("go")]

    run(backend, root, body)
    assert tree(root) == {"f.txt": b"kept"}


# -- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("content", [None, 3, ["x"], "\udc80"])
def test_content_neither_bytes_nor_utf8_text_is_refused(
    backend: Any, root: Path, content: object
) -> None:
    async def body(cp: Checkpointer, ws: Workspace, root: Path) -> None:
        with pytest.raises(InvalidArgumentError) as refused:
            await ws.write("f", content)  # type: ignore[arg-type]
        assert refused.value.argument == "content"
        assert await log(cp) == []

    run(backend, root, body)
    assert tree(root) == {}


def test_bad_constructor_arguments_are_refused(root: Path) -> None:
    cp = MemoryCheckpointer()
    with pytest.raises(InvalidArgumentError):
        Workspace(root, cp, "")
    with pytest.raises(InvalidArgumentError):
        Workspace(root, cp, SID, snapshot_limit=-1)
    with pytest.raises(InvalidArgumentError):
        Workspace(root, cp, SID, snapshot_limit=True)


# -- the file-system port ----------------------------------------------------------------


def test_every_change_goes_through_the_port(tmp_path: Path) -> None:
    """On a simulated disk nothing reaches the real directory, and the rename is made durable."""
    disk = SimulatedDisk(tmp_path / "ws")

    async def main() -> list[FileSnapshot]:
        cp = MemoryCheckpointer()
        ws = Workspace(tmp_path / "ws", cp, SID, fs=disk)
        snaps = [await ws.write("d/f.txt", "one"), await ws.write("d/f.txt", "two")]
        assert ws.read("d/f.txt") == b"two"
        snaps.append(await ws.delete("d/f.txt"))
        assert ws.read("d/f.txt") is None
        return snaps

    snaps = asyncio.run(main())
    assert [s.content_before for s in snaps] == [None, "one", "two"]
    assert not (tmp_path / "ws").exists()
    kinds = [op.kind for op in disk.ops]
    assert kinds.count("rename") == 2
    assert kinds[-2:] == ["unlink", "fsync_dir"]
    rename = kinds.index("rename")
    assert "fsync" in kinds[:rename], "the temporary file is fsynced before its rename"
    assert kinds[rename + 1] == "fsync_dir", "the rename is made durable"


def test_a_hooked_real_file_system_still_checks_symlinks(root: Path) -> None:
    outside = _plant_links(root)
    ws = Workspace(root, MemoryCheckpointer(), SID, fs=HookedFileSystem(OsFileSystem()))
    with pytest.raises(InvalidArgumentError):
        ws.resolve("escape/outside.txt")
    assert tree(outside) == {"outside.txt": b"untouchable"}


# -- open: recover first ------------------------------------------------------------------


def test_open_runs_recover_on_the_new_workspace(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[object, ...]] = []

    async def recover(
        checkpointer: Checkpointer, session_id: str, workspace: object, *, fs: object = None
    ) -> str:
        calls.append((checkpointer, session_id, workspace, fs))
        return "nothing"

    monkeypatch.setattr(workspace_module, "recover", recover)
    cp = MemoryCheckpointer()
    disk = SimulatedDisk(root)
    ws = asyncio.run(Workspace.open(root, cp, SID, snapshot_limit=7, fs=disk))
    assert isinstance(ws, Workspace)
    assert ws.snapshot_limit == 7
    assert calls == [(cp, SID, ws, disk)]


def test_open_with_nothing_to_recover_changes_nothing(backend: Any, root: Path) -> None:
    (root / "f.txt").write_text("kept")

    async def main() -> list[StoredEvent]:
        cp = backend(root.parent)
        try:
            await cp.append(SID, [UserPrompt("go")])
            ws = await Workspace.open(root, cp, SID)
            assert ws.read("f.txt") == b"kept"
            return [e async for e in cp.read(SID)]
        finally:
            await cp.close()

    assert [e.event for e in asyncio.run(main())] == [UserPrompt("go")]
    assert tree(root) == {"f.txt": b"kept"}
