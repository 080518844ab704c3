"""Implementations of the file-system port: the real disk, a forwarding base, and a
wrapper that reports faults.

The port itself (`FileSystem`, `FileStat`, and the `FileSystemPorted` opt-in)
is part of the contract and lives in `checkpointspec.spec.filesystem`, which
states the guarantees an implementation must keep. The file backend does every
byte of its store I/O through it and never calls ``os`` for that itself; it
never relies on a file's identity, and never stats a log in the steady state
(see `checkpointspec.backends.file.log`).

`OsFileSystem` is the default: the real POSIX file system.
`ForwardingFileSystem` hands every call to an inner `FileSystem`; a wrapper
subclasses it and overrides only the calls it changes. `HookedFileSystem` is
one: it reports each mutating call to a fault hook, at the points named in
`FAULT_POINTS`. `on_real_disk` tells the real disk, hooked or not, from any
other port (only there do symlinks exist).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from collections.abc import Callable

from ..spec import FileStat, FileSystem

__all__ = [
    "FAULT_POINTS",
    "ForwardingFileSystem",
    "HookedFileSystem",
    "OsFileSystem",
    "on_real_disk",
]


class OsFileSystem:
    """The real file system, through ``os`` and ``fcntl`` (POSIX only).

    ``fsync`` uses ``fdatasync`` where the platform has it: it flushes the data and
    the size, which is all a log needs, and skips the timestamps. On macOS it uses
    ``F_FULLFSYNC``, because plain ``fsync`` there does not flush the drive's cache.
    """

    _full_fsync: int | None = (
        getattr(fcntl, "F_FULLFSYNC", None) if sys.platform == "darwin" else None
    )
    _datasync = staticmethod(getattr(os, "fdatasync", os.fsync))

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        if truncate:
            flags |= os.O_TRUNC
        return os.open(path, flags, 0o644)

    def close(self, fd: int) -> None:
        os.close(fd)

    def dup(self, fd: int) -> int:
        return os.dup(fd)

    def read(self, fd: int, size: int, offset: int) -> bytes:
        data = os.pread(fd, size, offset)
        if len(data) == size or not data:
            return data
        # pread on a regular file returns short only at end of file, but nothing
        # in POSIX promises that; keep reading until EOF or the full size.
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(fd, size - got, offset + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def write(self, fd: int, data: bytes, offset: int) -> None:
        written = os.pwrite(fd, data, offset)
        if written == len(data):
            return
        view = memoryview(data)[written:]
        offset += written
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        if self._full_fsync is not None:
            fcntl.fcntl(fd, self._full_fsync)
        else:
            self._datasync(fd)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileStat((st.st_dev, st.st_ino), st.st_size)

    def fstat(self, fd: int) -> FileStat:
        st = os.fstat(fd)
        return FileStat((st.st_dev, st.st_ino), st.st_size)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def mkdir(self, path: str) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)

    def lock(self, fd: int, *, blocking: bool) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if not blocking and exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class ForwardingFileSystem:
    """A `FileSystem` that hands every call to ``inner``, unchanged.

    Subclass it to change a few calls (fail one, record one, report one to a
    hook) and keep the rest: each override calls ``super()`` to reach ``inner``,
    which stays public so that code can see what lies underneath.
    """

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        return self.inner.open(path, create=create, truncate=truncate)

    def close(self, fd: int) -> None:
        self.inner.close(fd)

    def dup(self, fd: int) -> int:
        return self.inner.dup(fd)

    def read(self, fd: int, size: int, offset: int) -> bytes:
        return self.inner.read(fd, size, offset)

    def write(self, fd: int, data: bytes, offset: int) -> None:
        self.inner.write(fd, data, offset)

    def truncate(self, fd: int, size: int) -> None:
        self.inner.truncate(fd, size)

    def fsync(self, fd: int) -> None:
        self.inner.fsync(fd)

    def fsync_dir(self, path: str) -> None:
        self.inner.fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def unlink(self, path: str) -> None:
        self.inner.unlink(path)

    def stat(self, path: str) -> FileStat | None:
        return self.inner.stat(path)

    def fstat(self, fd: int) -> FileStat:
        return self.inner.fstat(fd)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def mkdir(self, path: str) -> None:
        self.inner.mkdir(path)

    def lock(self, fd: int, *, blocking: bool) -> bool:
        return self.inner.lock(fd, blocking=blocking)

    def unlock(self, fd: int) -> None:
        self.inner.unlock(fd)


FAULT_POINTS: tuple[str, ...] = (
    "write.before",
    "write.after",
    "truncate.after",
    "fsync.before",
    "fsync.after",
    "fsync_dir.after",
    "rename.before",
    "rename.after",
    "unlink.after",
)
"""The fault points `HookedFileSystem` reports: one before or after each mutating call."""


class HookedFileSystem(ForwardingFileSystem):
    """Forwards to a `FileSystem` and reports each mutating call to a fault hook.

    This is how a backend built on the port gets `FaultInjectable` for free: the
    kit's worker processes pause or die at exactly these points, between the
    writes, fsyncs and renames the backend makes. Without a hook it only forwards.
    """

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.hook: Callable[[str], None] | None = None

    def _reach(self, point: str) -> None:
        if self.hook is not None:
            self.hook(point)

    def write(self, fd: int, data: bytes, offset: int) -> None:
        self._reach("write.before")
        super().write(fd, data, offset)
        self._reach("write.after")

    def truncate(self, fd: int, size: int) -> None:
        super().truncate(fd, size)
        self._reach("truncate.after")

    def fsync(self, fd: int) -> None:
        self._reach("fsync.before")
        super().fsync(fd)
        self._reach("fsync.after")

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        self._reach("fsync_dir.after")

    def rename(self, src: str, dst: str) -> None:
        self._reach("rename.before")
        super().rename(src, dst)
        self._reach("rename.after")

    def unlink(self, path: str) -> None:
        super().unlink(path)
        self._reach("unlink.after")


def on_real_disk(fs: FileSystem) -> bool:
    """Whether ``fs`` is the operating system's file system, through any `HookedFileSystem`:
    the one port where symlinks exist and paths may be resolved through them."""
    while isinstance(fs, HookedFileSystem):
        fs = fs.inner
    return isinstance(fs, OsFileSystem)
