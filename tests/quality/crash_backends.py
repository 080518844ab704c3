"""Backends with one crash-safety bug each, on the real file system: only a traced crash check sees them.

None of them offers the simulated disk (`FileSystemPorted`): their I/O goes to
the operating system, as a third-party backend's does, and the traced checks
(`checkpointspec.conformance.checks.durability_traced`) must find the bug from the system
calls alone. ``violates`` names the rule each must be rejected with. The kit
loads them by ``crash_backends:CLASS.make`` in its worker processes
(``tests/quality/conftest.py`` puts this folder on the path).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Self, cast

from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.file.log import SessionLog
from checkpointspec.backends.fsport import HookedFileSystem, OsFileSystem
from checkpointspec.backends.sqlite import DATABASE_NAME, SqliteCheckpointer
from checkpointspec.spec import BackendContext, Capability, FileSystem, SessionEvent

__all__ = [
    "BatchInTwoUnsyncedPieces",
    "MapsADeclaredIndex",
    "MapsAnIndex",
    "NoDirectorySyncOnDisk",
    "RenamesBeforeSync",
    "SqliteEventPerCommit",
    "SqliteNormalClaimsDurable",
    "SqliteOffClaimsDurable",
]


class _OnDisk(FileCheckpointer):
    """The file backend on a port of the real file system; ``port`` wraps it with the bug."""

    violates: ClassVar[str]

    @classmethod
    def port(cls, fs: FileSystem) -> FileSystem:
        return fs

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: a handle on ``ctx.path`` doing its I/O through the buggy port."""
        return cls(ctx.path, codec=ctx.codec, fs=cls.port(OsFileSystem()))

    def on_filesystem(self, fs: FileSystem) -> FileCheckpointer:
        raise NotImplementedError("only the traced checks judge these backends")


class _SkipsDirectorySync(HookedFileSystem):
    def fsync_dir(self, path: str) -> None:
        return None


class NoDirectorySyncOnDisk(_OnDisk):
    """Bug: never fsyncs a directory, so a new log renamed into place may vanish with its events."""

    violates = "DUR-003"

    @classmethod
    def port(cls, fs: FileSystem) -> FileSystem:
        return _SkipsDirectorySync(fs)


class _RenamesFirst(HookedFileSystem):
    """Holds back the fsync of a temporary file until it has been renamed into place."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self._paths: dict[int, str] = {}
        self._held: set[str] = set()

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        fd = super().open(path, create=create, truncate=truncate)
        self._paths[fd] = path
        return fd

    def fsync(self, fd: int) -> None:
        path = self._paths.get(fd, "")
        if path.endswith(".tmp"):
            self._held.add(path)
            return
        super().fsync(fd)

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        if src in self._held:
            self._held.discard(src)
            fd = self.inner.open(dst)
            try:
                self.inner.fsync(fd)
            finally:
                self.inner.close(fd)

    def close(self, fd: int) -> None:
        self._paths.pop(fd, None)
        super().close(fd)


class RenamesBeforeSync(_OnDisk):
    """Bug: renames a new log over the old name before its data is fsynced.

    A power loss after the rename but before the fsync leaves a log whose name is
    durable and whose content is not: an empty or partial file where the
    acknowledged truncate's result should be.
    """

    violates = "DUR-003"

    @classmethod
    def port(cls, fs: FileSystem) -> FileSystem:
        return _RenamesFirst(fs)


class BatchInTwoUnsyncedPieces(_OnDisk):
    """Bug: an append to an existing log writes its batch as two records, then one fsync.

    Each record is whole and valid on its own, so a kill between the two writes
    leaves the first half of the batch in the log (APPEND-003), and a power loss
    may keep either half without the other.
    """

    violates = "APPEND-003"

    def _write(self, log: SessionLog, payloads: list[bytes]) -> None:
        if log.log_fd is None or len(payloads) < 2:
            super()._write(log, payloads)
            return
        half = len(payloads) // 2
        fsync = self._fs.fsync
        # The first piece is written without its fsync; the second's covers both.
        self._fs.fsync = lambda fd: None  # type: ignore[method-assign]
        try:
            super()._write(log, payloads[:half])
        finally:
            self._fs.fsync = fsync  # type: ignore[method-assign]
        super()._write(log, payloads[half:])


class SqliteNormalClaimsDurable(SqliteCheckpointer):
    """Bug: runs SQLite's WAL with ``synchronous=NORMAL`` and still declares DURABLE.

    NORMAL fsyncs the WAL only at checkpoints: a commit is acknowledged before it
    is durable, and a power loss rolls it back.
    """

    violates: ClassVar[str] = "DUR-003"
    synchronous: ClassVar[str] = "NORMAL"

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: ``checkpoints.db`` in ``ctx.path`` with the class's setting."""
        handle = cls(Path(ctx.path) / DATABASE_NAME, codec=ctx.codec, synchronous=cls.synchronous)
        handle.capabilities = handle.capabilities | {Capability.DURABLE}
        return cast(Self, await handle.open())


class SqliteOffClaimsDurable(SqliteNormalClaimsDurable):
    """Bug: runs SQLite's WAL with ``synchronous=OFF`` and still declares DURABLE: no
    commit is ever fsynced."""

    synchronous: ClassVar[str] = "OFF"


class SqliteEventPerCommit(SqliteCheckpointer):
    """Bug: appends a batch one event per transaction, as a saver that commits each write does.

    Between two commits the log holds part of the batch: a reader in another
    process sees it (READ-003), and a writer killed there leaves it (KILL-001,
    APPEND-003).
    """

    violates: ClassVar[str] = "READ-003"

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: ``checkpoints.db`` in ``ctx.path``."""
        return cast(Self, await cls(Path(ctx.path) / DATABASE_NAME, codec=ctx.codec).open())

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await super().append(
            session_id, list(events[:1]), expected_head, expected_generation=expected_generation
        )
        for event in events[1:]:
            head = await super().append(session_id, [event])
        return head


class MapsAnIndex(_OnDisk):
    """Not a bug, a blind spot: after each append it writes the head into ``index.map``
    through a shared writable mapping, which no system-call trace sees. The traced
    checks must say so (skip, naming the file) instead of passing it."""

    violates = ""

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )
        fd = os.open(Path(self._root) / "index.map", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, mmap.PAGESIZE)
            with mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_WRITE) as index:
                index[:8] = head.to_bytes(8, "little")
        finally:
            os.close(fd)
        return head


class MapsADeclaredIndex(MapsAnIndex):
    """`MapsAnIndex` declaring the mapped file with `ScratchFiles`: judged, and passing."""

    def scratch_files(self) -> dict[str, str]:
        return {"index.map": "a cache of the heads, never read after a crash"}
