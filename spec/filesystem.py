"""The file-system port: the contract between a file-based backend and the disk it writes to.

A backend that does all its store I/O through a `FileSystem` (and never calls
``os`` for it itself) can be handed another implementation: one that records
calls, fails at a chosen step, or keeps a volatile and a durable image of each
file to simulate power loss. Implementing `FileSystemPorted` is how a backend
offers that to the conformance kit, which then checks DUR-003 against every
state a power loss may leave the disk in.

This module only defines the types, beside the other opt-ins (`StoreHooks`,
`FaultInjectable` in `checkpointspec.spec.protocol`). Implementations live
elsewhere: the real POSIX file system is
`checkpointspec.backends.fsport.OsFileSystem`, the kit's power-loss disk is
`checkpointspec.conformance.engines.crash.disk.SimulatedDisk`.

Paths are ``str`` and file descriptors are ``int``, but an implementation may
hand out any ints it likes as descriptors, as long as it accepts them back.
Semantics an implementation must keep, because a backend's correctness rests on them:

* ``write`` either writes all of ``data`` or raises; bytes written before the
  error may remain (the backend cuts them off itself).
* ``fsync`` makes the file's data and size durable; ``fsync_dir`` makes the
  directory's entries (files created, renamed or removed in it) durable.
* ``rename`` atomically replaces ``dst``; open descriptors of the old ``dst``
  keep reading the old content.
* ``lock`` is an exclusive advisory lock owned by the *open file description*:
  two descriptors opened separately exclude each other, even in one process, and
  closing an unrelated descriptor of the same file does not release it (BSD
  ``flock`` semantics, not POSIX ``lockf``).
* ``stat``/``fstat`` report the file's size. Their identity (device, inode)
  is for tests and diagnostics: a backend should not rely on it.
* ``truncate`` to a larger size extends the file with bytes that read as zero.
* Errors are the ``OSError`` subclasses ``os`` would raise (`FileNotFoundError`
  for a missing file, and so on).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from .protocol import Checkpointer

__all__ = ["FileStat", "FileSystem", "FileSystemPorted", "ScratchFiles"]


class FileStat(msgspec.Struct, frozen=True):
    """What a backend needs to know about a file: which one it is, and how long."""

    identity: tuple[int, int]
    """(device, inode) or any pair that is unique while the file is open."""
    size: int
    """The file's length in bytes."""


class FileSystem(Protocol):
    """The I/O operations of a file-based backend. See the module docstring for the guarantees."""

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        """Open ``path`` for reading and writing; FileNotFoundError if it is missing and not ``create``."""
        ...

    def close(self, fd: int) -> None:
        """Close a descriptor (releasing its lock if it holds one)."""
        ...

    def dup(self, fd: int) -> int:
        """A second descriptor for the same open file description."""
        ...

    def read(self, fd: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``; fewer only at end of file."""
        ...

    def write(self, fd: int, data: bytes, offset: int) -> None:
        """Write all of ``data`` at ``offset`` or raise."""
        ...

    def truncate(self, fd: int, size: int) -> None:
        """Cut the file to ``size`` bytes, or extend it to ``size`` with bytes that read as zero."""
        ...

    def fsync(self, fd: int) -> None:
        """Make the file's data and size durable."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the entries of the directory ``path`` durable."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` by ``src``."""
        ...

    def unlink(self, path: str) -> None:
        """Remove a file; FileNotFoundError if it is missing."""
        ...

    def stat(self, path: str) -> FileStat | None:
        """Identity and size of ``path``, or None if it does not exist."""
        ...

    def fstat(self, fd: int) -> FileStat:
        """Identity and size of an open file."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names in a directory, in no particular order."""
        ...

    def mkdir(self, path: str) -> None:
        """Create a directory; do nothing if it exists."""
        ...

    def lock(self, fd: int, *, blocking: bool) -> bool:
        """Take the exclusive lock of ``fd``'s open file description.

        Returns False instead of waiting when ``blocking`` is False and another
        description holds it.
        """
        ...

    def unlock(self, fd: int) -> None:
        """Release the lock taken by `lock`."""
        ...


@runtime_checkable
class FileSystemPorted(Protocol):
    """Opt-in for the power-loss check (DUR-003): a backend whose I/O goes through a `FileSystem`.

    ``on_filesystem(fs)`` returns a *new* handle on this handle's store path that
    does every read, write, fsync, rename and lock through ``fs`` and nothing
    through ``os``, sharing no descriptors, caches or locks with this handle.
    It must work on a closed handle: the kit opens a handle through the factory,
    closes it (so that the store's files are complete), copies those files into
    a simulated disk and passes that. It then drives the new handle and, for
    each crash state, writes the state into a new directory and reopens it
    through the backend's factory on the real file system. Without this protocol
    DUR-003 is skipped with that reason.
    """

    def on_filesystem(self, fs: FileSystem) -> Checkpointer:
        """A new handle on the same store path doing all its I/O through ``fs``."""
        ...


@runtime_checkable
class ScratchFiles(Protocol):
    """Declares store files whose content a backend never relies on after a crash.

    The kit's traced crash checks see what a process writes with system calls,
    not what it writes through a shared writable ``mmap``. A backend that maps a
    store file that way is not judged (the check is skipped, naming the file)
    unless the file is declared here: a file the backend rebuilds on open, so
    that whatever a crash leaves in it cannot matter. SQLite's WAL index
    (``-shm``) is the example: shared memory that the first connection after a
    crash rebuilds from the WAL.
    """

    def scratch_files(self) -> dict[str, str]:
        """Glob patterns of such files, relative to the store directory, each with its reason."""
        ...
