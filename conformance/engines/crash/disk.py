"""Power-loss simulation: an in-memory `FileSystem` that records what a backend asks of the disk.

`SimulatedDisk` implements the contract's file-system port
(`checkpointspec.spec.FileSystem`) in memory and records every
mutating operation as an `Op`: create (``open`` with ``create`` of a missing
file), ``write``, ``truncate`` (also ``open`` with ``truncate`` of a non-empty
file), ``rename``, ``unlink``, ``mkdir``, ``fsync`` and ``fsync_dir``, each with
the inode it affects. `SimulatedDisk.crash_plan` turns the recording into every
state the disk may be left in by a power loss after any of those operations
(`checkpointspec.conformance.engines.crash.states` states the rules), and each
`CrashState` can be written into a real directory or loaded into a fresh disk.

A backend opts in to the DUR-003 check by implementing `checkpointspec.spec.FileSystemPorted`.

What the simulation keeps of the port's guarantees: writes are all-or-nothing
while the power is on; ``rename`` atomically replaces its destination and open
descriptors of the old file keep reading it; identities are unique per file;
``lock`` is a BSD ``flock`` owned by the open file description (descriptors
from two ``open`` calls exclude each other, a ``dup`` shares the lock, and it is
released when the last descriptor of its description closes). A blocking
``lock`` waits for another thread to release it, as ``flock`` would.

What it leaves out: permissions, timestamps, hard links, renaming directories,
and anything outside its root. Paths outside the root raise `PermissionError`,
so a backend that writes elsewhere is caught rather than silently unsimulated.
Directories above the root exist and cannot be changed.
"""

from __future__ import annotations

import errno
import os
import posixpath
import threading
from pathlib import Path
from typing import Final

from ....spec import FileStat, FileSystem
from .states import CrashPlan, CrashSpec, CrashState, Image, Op, Tear, append_op, tears

__all__ = [
    "CrashPlan",
    "CrashSpec",
    "CrashState",
    "Op",
    "SimulatedDisk",
    "Tear",
    "tears",
]

_DEVICE: Final = 0x51D
"""The device number of every identity the simulated disk hands out."""


class _Description:
    """An open file description: what ``open`` creates and ``dup`` shares."""

    __slots__ = ("ino", "path", "refs")

    def __init__(self, ino: int, path: str) -> None:
        self.ino = ino
        self.path = path
        self.refs = 1


def _error(kind: type[OSError], code: int, path: str) -> OSError:
    return kind(code, os.strerror(code), path)


class SimulatedDisk:
    """An in-memory `FileSystem` rooted at ``root`` that records its mutating operations.

    It starts with ``root`` as an empty directory, or, from `load`, as a copy of
    a real directory tree. That starting image is durable; everything after it is
    recorded in `ops` and judged by `crash_plan`.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = posixpath.normpath(os.path.abspath(os.fspath(root)))
        self._names: dict[str, int] = {}
        self._dirs: dict[str, int] = {"": 1}
        self._data: dict[int, bytearray] = {}
        self._fds: dict[int, _Description] = {}
        self._locks: dict[int, _Description] = {}
        self._ops: list[Op] = []
        self._next_fd = 3
        self._next_ino = 2
        self._cond = threading.Condition()
        self._base = self._image()

    @classmethod
    def load(cls, root: Path | str) -> SimulatedDisk:
        """A disk whose durable starting image is a copy of the real directory tree at ``root``."""
        disk = cls(root)
        for dirpath, dirnames, filenames in os.walk(disk.root):
            here = os.path.relpath(dirpath, disk.root).replace(os.sep, "/")
            here = "" if here == "." else here
            for name in dirnames:
                disk._dirs[posixpath.join(here, name)] = disk._new_ino()
            for name in filenames:
                ino = disk._new_ino()
                disk._names[posixpath.join(here, name)] = ino
                disk._data[ino] = bytearray(Path(dirpath, name).read_bytes())
        disk._base = disk._image()
        return disk

    @classmethod
    def from_state(cls, root: Path | str, state: CrashState) -> SimulatedDisk:
        """A disk (rooted at ``root``) holding a crash state durably, e.g. to reopen it simulated."""
        disk = cls(root)
        for rel in sorted(state.dirs):
            if rel:
                disk._dirs[rel] = disk._new_ino()
        for rel, data in state.files.items():
            ino = disk._new_ino()
            disk._names[rel] = ino
            disk._data[ino] = bytearray(data)
        disk._base = disk._image()
        return disk

    # -- the recording --------------------------------------------------------------------
    @property
    def ops(self) -> tuple[Op, ...]:
        """Every recorded operation, in the order issued."""
        with self._cond:
            return tuple(self._ops)

    @property
    def op_count(self) -> int:
        """How many operations are recorded: a crash point, once the caller has its answer."""
        with self._cond:
            return len(self._ops)

    def image(self) -> Image:
        """What the disk holds now, as if every operation had reached it."""
        with self._cond:
            return self._image()

    def crash_plan(self) -> CrashPlan:
        """The crash states of everything recorded so far."""
        with self._cond:
            return CrashPlan(self._base, self._ops)

    def _image(self) -> Image:
        data = {ino: bytes(buf) for ino, buf in self._data.items() if ino in self._names.values()}
        return Image(dict(self._names), data, frozenset(self._dirs))

    def _new_ino(self) -> int:
        self._next_ino += 1
        return self._next_ino

    # -- paths ----------------------------------------------------------------------------
    def _rel(self, path: str) -> str | None:
        """``path`` relative to the root; None for a directory above the root."""
        full = posixpath.normpath(os.path.abspath(os.fspath(path)))
        if full == self.root:
            return ""
        if full.startswith(self.root + "/"):
            return full[len(self.root) + 1 :]
        if self.root.startswith(full.rstrip("/") + "/"):
            return None
        raise _error(PermissionError, errno.EACCES, f"{path} (outside the simulated {self.root})")

    def _file(self, path: str) -> str:
        rel = self._rel(path)
        if rel is None or rel in self._dirs:
            raise _error(IsADirectoryError, errno.EISDIR, path)
        return rel

    def _parent(self, rel: str, path: str) -> None:
        parent = posixpath.dirname(rel)
        if parent not in self._dirs:
            kind = NotADirectoryError if parent in self._names else FileNotFoundError
            raise _error(kind, errno.ENOTDIR if parent in self._names else errno.ENOENT, path)

    def _name_of(self, desc: _Description) -> str:
        """The file's name now (for the record's readers), else the one it was opened by."""
        if self._names.get(desc.path) == desc.ino:
            return desc.path
        return next((n for n, i in self._names.items() if i == desc.ino), desc.path)

    def _desc(self, fd: int) -> _Description:
        desc = self._fds.get(fd)
        if desc is None:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), fd)
        return desc

    # -- FileSystem -----------------------------------------------------------------------
    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        with self._cond:
            rel = self._file(path)
            ino = self._names.get(rel)
            if ino is None:
                if not create:
                    raise _error(FileNotFoundError, errno.ENOENT, path)
                self._parent(rel, path)
                ino = self._new_ino()
                self._names[rel] = ino
                self._data[ino] = bytearray()
                append_op(self._ops, "create", rel, ino=ino)
            elif truncate and self._data[ino]:
                self._data[ino].clear()
                append_op(self._ops, "truncate", rel, ino=ino, offset=0)
            fd = self._next_fd
            self._next_fd += 1
            self._fds[fd] = _Description(ino, rel)
            return fd

    def close(self, fd: int) -> None:
        with self._cond:
            desc = self._desc(fd)
            del self._fds[fd]
            desc.refs -= 1
            if desc.refs == 0 and self._locks.get(desc.ino) is desc:
                del self._locks[desc.ino]
                self._cond.notify_all()

    def dup(self, fd: int) -> int:
        with self._cond:
            desc = self._desc(fd)
            desc.refs += 1
            new = self._next_fd
            self._next_fd += 1
            self._fds[new] = desc
            return new

    def read(self, fd: int, size: int, offset: int) -> bytes:
        with self._cond:
            return bytes(self._data[self._desc(fd).ino][offset : offset + size])

    def write(self, fd: int, data: bytes, offset: int) -> None:
        with self._cond:
            desc = self._desc(fd)
            buf = self._data[desc.ino]
            chunk = bytes(data)
            if offset > len(buf):
                buf.extend(bytes(offset - len(buf)))
            buf[offset : offset + len(chunk)] = chunk
            append_op(
                self._ops, "write", self._name_of(desc), ino=desc.ino, offset=offset, data=chunk
            )

    def truncate(self, fd: int, size: int) -> None:
        with self._cond:
            desc = self._desc(fd)
            buf = self._data[desc.ino]
            if size < len(buf):
                del buf[size:]
            else:
                buf.extend(bytes(size - len(buf)))
            append_op(self._ops, "truncate", self._name_of(desc), ino=desc.ino, offset=size)

    def fsync(self, fd: int) -> None:
        with self._cond:
            desc = self._desc(fd)
            append_op(self._ops, "fsync", self._name_of(desc), ino=desc.ino)

    def fsync_dir(self, path: str) -> None:
        with self._cond:
            rel = self._rel(path)
            if rel is None:
                return  # above the root: nothing there ever changes
            if rel not in self._dirs:
                raise _error(FileNotFoundError, errno.ENOENT, path)
            append_op(self._ops, "fsync_dir", rel)

    def rename(self, src: str, dst: str) -> None:
        with self._cond:
            old, new = self._file(src), self._file(dst)
            ino = self._names.get(old)
            if ino is None:
                raise _error(FileNotFoundError, errno.ENOENT, src)
            self._parent(new, dst)
            if old == new:
                return
            del self._names[old]
            self._names[new] = ino
            append_op(self._ops, "rename", old, ino=ino, dst=new)

    def unlink(self, path: str) -> None:
        with self._cond:
            rel = self._file(path)
            ino = self._names.pop(rel, None)
            if ino is None:
                raise _error(FileNotFoundError, errno.ENOENT, path)
            append_op(self._ops, "unlink", rel, ino=ino)

    def stat(self, path: str) -> FileStat | None:
        with self._cond:
            rel = self._rel(path)
            if rel is None:
                return FileStat((_DEVICE, 0), 0)
            if rel in self._dirs:
                return FileStat((_DEVICE, self._dirs[rel]), 0)
            ino = self._names.get(rel)
            return None if ino is None else FileStat((_DEVICE, ino), len(self._data[ino]))

    def fstat(self, fd: int) -> FileStat:
        with self._cond:
            ino = self._desc(fd).ino
            return FileStat((_DEVICE, ino), len(self._data[ino]))

    def listdir(self, path: str) -> list[str]:
        with self._cond:
            rel = self._rel(path)
            if rel is None:
                full = posixpath.normpath(os.path.abspath(path))
                return [self.root[len(full) :].lstrip("/").split("/")[0]]
            if rel not in self._dirs:
                kind = NotADirectoryError if rel in self._names else FileNotFoundError
                raise _error(kind, errno.ENOTDIR if rel in self._names else errno.ENOENT, path)
            entries = [*self._names, *self._dirs]
            return [posixpath.basename(e) for e in entries if e and posixpath.dirname(e) == rel]

    def mkdir(self, path: str) -> None:
        with self._cond:
            rel = self._rel(path)
            # Like OsFileSystem.mkdir: an existing name, of whatever kind, is left alone.
            if rel is None or rel in self._dirs or rel in self._names:
                return
            self._parent(rel, path)
            self._dirs[rel] = self._new_ino()
            append_op(self._ops, "mkdir", rel)

    def lock(self, fd: int, *, blocking: bool) -> bool:
        with self._cond:
            desc = self._desc(fd)
            while True:
                holder = self._locks.get(desc.ino)
                if holder is None or holder is desc:
                    self._locks[desc.ino] = desc
                    return True
                if not blocking:
                    return False
                self._cond.wait()

    def unlock(self, fd: int) -> None:
        with self._cond:
            desc = self._desc(fd)
            if self._locks.get(desc.ino) is desc:
                del self._locks[desc.ino]
                self._cond.notify_all()


def _conforms(disk: SimulatedDisk) -> FileSystem:
    # mypy proves here, once, that SimulatedDisk structurally implements the port.
    return disk
