"""The workspace: how a file-writing tool changes a file so that a restore can undo it.

A tool never writes a workspace file itself; it calls `Workspace.write` or
`Workspace.delete`, which, in this order (SNAP-001):

1. resolve the path: canonical (`checkpointspec.spec.canonical_path`), not in
   the reserved `RESERVED_DIR` folder, and on the real file system not passing
   through a symlink that leaves the root (SNAP-003);
2. read what the file holds now (None when it does not exist);
3. append a `FileSnapshot` of it to the session log (SNAP-002 caps its size);
4. only then change the file: a temporary file in the same directory, fsynced,
   renamed over the old one, the directory fsynced.

If the append fails — a conflict, a locked session, a closed handle, a storage
error — the error propagates and the file is untouched (SNAP-004): a change the
log does not know about could never be undone. The converse can happen: the
snapshot is recorded and the process dies before the rename. The file then
still holds the snapshot's ``content_before``, which restore accepts as "what
the session left there".

All file I/O goes through a `checkpointspec.spec.FileSystem`, so the kit's
power-loss simulator can run a workspace too. Symlinks exist only on the real
file system (`OsFileSystem`); with any other port, paths are taken as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat
from typing import Final, Self

from ..backends.fsport import OsFileSystem, on_real_disk
from ..spec import (
    DEFAULT_SNAPSHOT_LIMIT,
    RESERVED_DIR,
    Checkpointer,
    FileSnapshot,
    FileSystem,
    InvalidArgumentError,
    ReasonCode,
    canonical_path,
    check_session_id,
    make_snapshot,
)
from .journal import recover, workspace_root

__all__ = ["RESERVED_DIR", "Workspace"]

_READ_CHUNK: Final = 1 << 20


def _unsafe(path: object, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError("path", f"{path!r} {reason}", ReasonCode.UNSAFE_PATH, "SNAP-003")


def _not_a_file(path: str, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "path", f"{path!r} is {what}, not a file", ReasonCode.NOT_A_FILE, "SNAP-001"
    )


class Workspace:
    """A directory whose file changes are recorded in a session log before they happen.

    ``root`` is the workspace directory, ``checkpointer`` and ``session_id`` the
    log the snapshots go to. Content larger than ``snapshot_limit`` bytes is
    recorded as truncated (it cannot be restored; the write goes ahead).
    ``fs`` is the file system (default: the real one).

    Paths given to every method are relative to ``root``, ``/``-separated.
    Refused with `InvalidArgumentError` (reason ``unsafe_path``, SNAP-003) before
    anything is recorded or written: an absolute path, a ``..`` component, NUL,
    an empty path, a path in `RESERVED_DIR`, and a path whose resolution passes
    through a symlink leaving the root. A symlink staying inside the root is
    followed, and the snapshot names the file it leads to, so that a restore
    puts back that file rather than replacing the link.

    Mutations of one `Workspace` are serialised, so each snapshot's
    ``content_before`` is what the file held when its change was made.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = DEFAULT_SNAPSHOT_LIMIT,
        fs: FileSystem | None = None,
    ) -> None:
        if isinstance(snapshot_limit, bool) or not isinstance(snapshot_limit, int):
            raise InvalidArgumentError(
                "snapshot_limit", f"an int, not {type(snapshot_limit).__name__}"
            )
        if snapshot_limit < 0:
            raise InvalidArgumentError("snapshot_limit", f"{snapshot_limit} is negative")
        self._fs: FileSystem = fs if fs is not None else OsFileSystem()
        self._real = on_real_disk(self._fs)
        # On the real disk the root is compared with resolved paths, so it is resolved too
        # (a root under a symlinked /tmp must not look like an escape).
        self._root = workspace_root(root, self._fs)
        self._checkpointer = checkpointer
        self._session_id = check_session_id(session_id)
        self._snapshot_limit = snapshot_limit
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = DEFAULT_SNAPSHOT_LIMIT,
        fs: FileSystem | None = None,
    ) -> Self:
        """A workspace ready for use: an interrupted restore of it is finished or undone first.

        Runs ``checkpointspec.reference.journal.recover`` on the new workspace
        (with its file system), so files and log are both from before or both
        from after any restore that was killed half way (RESTORE-006). Takes the
        keyword arguments of `Workspace`.
        """
        workspace = cls(root, checkpointer, session_id, snapshot_limit=snapshot_limit, fs=fs)
        await recover(checkpointer, workspace.session_id, workspace, fs=workspace.fs)
        return workspace

    # -- what it is ----------------------------------------------------------------------
    @property
    def root(self) -> str:
        """The absolute root directory (resolved, on the real file system)."""
        return self._root

    @property
    def checkpointer(self) -> Checkpointer:
        """The log snapshots are appended to."""
        return self._checkpointer

    @property
    def session_id(self) -> str:
        """The session snapshots are appended to."""
        return self._session_id

    @property
    def snapshot_limit(self) -> int:
        """The size in bytes above which a snapshot keeps no content (SNAP-002)."""
        return self._snapshot_limit

    @property
    def fs(self) -> FileSystem:
        """The file system every file of the workspace is read and written through."""
        return self._fs

    # -- paths ----------------------------------------------------------------------------
    def resolve(self, path: str) -> str:
        """``path`` as a snapshot records it: canonical, inside the root, not reserved.

        Raises `InvalidArgumentError` (``unsafe_path``, SNAP-003) for a path the
        workspace refuses (see the class docstring). Symlinks inside the root
        are followed, so the result names the file itself.
        """
        relative = canonical_path(path)  # refuses the reserved folder itself
        if not self._real:
            return relative
        # realpath resolves every symlink along the way, chains and relative targets
        # included, the way open() would; what it yields must still be under the root.
        resolved = os.path.realpath(os.path.join(self._root, *relative.split("/")))
        if resolved == self._root or not resolved.startswith(self._root.rstrip("/") + "/"):
            raise _unsafe(path, "resolves through a symlink to outside the workspace root")
        inner = os.path.relpath(resolved, self._root).replace(os.sep, "/")
        if inner.split("/", 1)[0].casefold() == RESERVED_DIR:
            raise _unsafe(path, f"resolves through a symlink into {RESERVED_DIR}/")
        return inner

    def full_path(self, path: str) -> str:
        """The file-system path of a workspace path (resolved and checked as by `resolve`)."""
        return self._join(self.resolve(path))

    def _join(self, relative: str) -> str:
        return os.path.join(self._root, *relative.split("/"))

    # -- reading --------------------------------------------------------------------------
    def read(self, path: str) -> bytes | None:
        """What the file holds now, or None when it does not exist.

        Raises `InvalidArgumentError` for a refused path, and for a directory or
        (on the real disk) a FIFO, socket or device (reason ``no_such_file``: it
        is not a file a tool can write or delete).
        """
        relative = self.resolve(path)
        return self._read(relative, path)

    def _read(self, relative: str, path: str) -> bytes | None:
        fs = self._fs
        full = self._join(relative)
        if self._real:
            # A FIFO would block the read and a device has no content to snapshot; the
            # port cannot tell them from files, so the real disk is asked directly.
            try:
                mode = os.stat(full).st_mode
            except FileNotFoundError:
                return None
            if stat.S_ISDIR(mode):
                raise _not_a_file(path, "a directory")
            if not stat.S_ISREG(mode):
                raise _not_a_file(path, "not a regular file")
        try:
            fd = fs.open(full)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise _not_a_file(path, "a directory") from None
        try:
            # Read until end of file rather than trusting the size: the file may grow.
            parts = []
            offset = 0
            size = max(fs.fstat(fd).size, 1)
            while True:
                chunk = fs.read(fd, max(size - offset, _READ_CHUNK), offset)
                if not chunk:
                    break
                parts.append(chunk)
                offset += len(chunk)
        finally:
            fs.close(fd)
        return b"".join(parts)

    # -- changing -------------------------------------------------------------------------
    async def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> FileSnapshot:
        """Record the file's current content, then replace it by ``content`` (SNAP-001).

        A str is written as UTF-8. Parent directories are created as needed.
        Returns the snapshot appended. Raises `InvalidArgumentError` for a
        refused path or content that is neither bytes nor encodable text, and
        whatever the append raises (`CheckpointConflictError`,
        `SessionLockedError`, `CheckpointerClosedError`, a storage error); in
        all those cases nothing was recorded and the file is unchanged.
        """
        after = _content_bytes(content)
        _check_tool_call_id(tool_call_id)
        async with self._lock:
            relative = self.resolve(path)
            before = self._read(relative, path)
            snapshot = make_snapshot(
                relative, before, after, limit=self._snapshot_limit, tool_call_id=tool_call_id
            )
            await self._checkpointer.append(self._session_id, [snapshot])
            self._replace(relative, after)
        return snapshot

    async def delete(self, path: str, *, tool_call_id: str | None = None) -> FileSnapshot:
        """Record the file's current content, then delete it (SNAP-001).

        Deleting a missing file raises `InvalidArgumentError` (``no_such_file``)
        and records nothing. Errors otherwise as for `write`.
        """
        _check_tool_call_id(tool_call_id)
        async with self._lock:
            relative = self.resolve(path)
            before = self._read(relative, path)
            if before is None:
                raise InvalidArgumentError(
                    "path", f"{path!r} does not exist", ReasonCode.NO_SUCH_FILE, "SNAP-001"
                )
            snapshot = make_snapshot(
                relative, before, None, limit=self._snapshot_limit, tool_call_id=tool_call_id
            )
            await self._checkpointer.append(self._session_id, [snapshot])
            full = self._join(relative)
            self._fs.unlink(full)
            self._fs.fsync_dir(os.path.dirname(full))
        return snapshot

    def _replace(self, relative: str, data: bytes) -> None:
        """Write ``data`` to the file atomically and durably."""
        fs = self._fs
        full = self._join(relative)
        directory, name = os.path.split(full)
        self._make_parents(directory)
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        fd = fs.open(tmp, create=True, truncate=True)
        try:
            try:
                if data:
                    fs.write(fd, data, 0)
                fs.fsync(fd)
            finally:
                fs.close(fd)
            if self._real:
                _copy_mode(full, tmp)
            fs.rename(tmp, full)
        except BaseException:
            with contextlib.suppress(OSError):  # the original error is the one to report
                fs.unlink(tmp)
            raise
        fs.fsync_dir(directory)

    def _make_parents(self, directory: str) -> None:
        """Create ``directory`` and its missing ancestors, each made durable in its parent."""
        fs = self._fs
        missing = []
        current = directory
        while current != self._root and fs.stat(current) is None:
            missing.append(current)
            current = os.path.dirname(current)
        for created in reversed(missing):
            fs.mkdir(created)
            fs.fsync_dir(os.path.dirname(created))


def _content_bytes(content: object) -> bytes:
    if isinstance(content, str):
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                "content", f"text not encodable as UTF-8: {exc}", ReasonCode.UNSTORABLE
            ) from None
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content)
    raise InvalidArgumentError(
        "content", f"bytes or str, not {type(content).__name__}", ReasonCode.WRONG_TYPE
    )


def _check_tool_call_id(tool_call_id: object) -> None:
    if tool_call_id is not None and not isinstance(tool_call_id, str):
        raise InvalidArgumentError(
            "tool_call_id",
            f"a str or None, not {type(tool_call_id).__name__}",
            ReasonCode.WRONG_TYPE,
        )


def _copy_mode(original: str, replacement: str) -> None:
    """Give the replacement the permission bits of the file it replaces (an executable stays one).

    Permissions are not part of the file-system port, so this runs on the real
    disk only; a file that did not exist keeps the mode it was created with.
    """
    try:
        mode = os.stat(original).st_mode
    except FileNotFoundError:
        return
    os.chmod(replacement, mode & 0o7777)
