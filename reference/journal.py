"""The restore intent journal: what a restore is about to do, durable before it does it.

A restore changes several workspace files and then truncates the log. A crash
in between would leave a mix, so before touching the first file `restore`
writes one journal per session under ``<workspace root>/.checkpointspec/``
holding everything needed to finish or undo the restore without the process
that started it:

- the session, the target ``seq`` and the head the preflight saw;
- the target prompt as stored (its ``ts`` and encoded event) and, on a backend
  with GENERATION, the session's generation. The truncate is the commit point:
  while that prompt is still at ``seq`` (or the generation has not moved) the
  restore did not commit and is rolled back; once it is gone, it did and is
  rolled forward;
- whether the log was to be truncated at all (a files-only restore has no
  commit point and is always rolled back);
- per file: where it lives, its before-image (content, or absent) and its
  after-image.

The file is written to a temporary name, fsynced, renamed into place and its
directory fsynced, so after any crash it is either absent or whole. It carries
a SHA-256 of its body all the same: a journal that fails it was damaged after
the fact, and `read_journal` raises `JournalCorruptError` instead of guessing
which way to go.

Recovery lives here too, beside the format it reads: `recover` (which
``Workspace.open`` and `restore` run first) finds the journal a killed restore
left, asks the log whether the restore committed (`restore_committed`) and
brings every file to the matching side (`roll_files`). It needs the session
log for that one question and nothing else of restore's.

Every byte goes through a `checkpointspec.spec.FileSystem`, so the kit's
power-loss disk can run it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
from collections.abc import Sequence
from typing import Final, cast

import msgspec

from ..backends.fsport import OsFileSystem, on_real_disk
from ..spec import (
    RESERVED_DIR,
    Capability,
    Checkpointer,
    CorruptStoreError,
    FileSystem,
    GenerationalCheckpointer,
    RecoveryOutcome,
    WorkspaceArgument,
    check_session_id,
    encode_event,
)
from .maintenance import maintenance

__all__ = [
    "Journal",
    "JournalCorruptError",
    "JournalFile",
    "decode_journal",
    "encode_journal",
    "ensure_dir",
    "journal_path",
    "overwrite_file",
    "put_file",
    "read_file",
    "read_journal",
    "recover",
    "recover_held",
    "remove_journal",
    "restore_committed",
    "roll_files",
    "session_generation",
    "temp_path",
    "workspace_root",
    "write_file",
    "write_journal",
]

_MAGIC: Final = b"checkpointspec restore journal 1\n"
_DIGEST_LEN: Final = 64
_CHUNK: Final = 1 << 20


class JournalCorruptError(CorruptStoreError):
    """A restore journal is damaged (bad magic or checksum, undecodable body).

    Nothing was changed: recovery stops rather than guess whether to roll the
    restore back or forward. ``location`` is the journal's path.
    """


class JournalFile(msgspec.Struct, frozen=True):
    """One file a restore changes.

    ``path`` is the snapshot's canonical path (what the result reports),
    ``target`` the file's path relative to the workspace root after resolving
    symlinks inside the root (what is written). None for an image means no file.
    """

    path: str
    target: str
    before: bytes | None
    after: bytes | None


class Journal(msgspec.Struct, frozen=True):
    """The intent of one restore; see the module docstring."""

    session_id: str
    seq: int
    expected_head: int
    conversation: bool
    prompt_ts: str
    prompt_event: bytes
    files: tuple[JournalFile, ...]
    generation: int | None = None
    """The session's generation before the restore, on a backend with GENERATION."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Journal)


def journal_path(root: str, session_id: str) -> str:
    """Where the journal of ``session_id`` lives under the workspace ``root``.

    The name is a hash of the session id: any id maps to a safe file name, and
    distinct ids to distinct names.
    """
    name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(root, RESERVED_DIR, f"restore-{name}.journal")


def temp_path(path: str) -> str:
    """The temporary name a file is written under before it is renamed to ``path``.

    Fixed per path (the session is held while restoring), so recovery can find
    and remove one a crash left behind.
    """
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.checkpointspec-tmp")


def encode_journal(journal: Journal) -> bytes:
    """The journal's bytes: magic line, SHA-256 of the body in hex, newline, msgpack body."""
    body = _encoder.encode(journal)
    return _MAGIC + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n" + body


def decode_journal(data: bytes, location: str) -> Journal:
    """Parse `encode_journal`'s bytes; `JournalCorruptError` when they are damaged."""

    def corrupt(detail: str) -> JournalCorruptError:
        return JournalCorruptError(None, location, detail)

    if not data.startswith(_MAGIC):
        raise corrupt("not a restore journal (bad magic line)")
    start = len(_MAGIC)
    digest, newline = data[start : start + _DIGEST_LEN], data[start + _DIGEST_LEN : start + 65]
    body = data[start + _DIGEST_LEN + 1 :]
    if newline != b"\n" or hashlib.sha256(body).hexdigest().encode("ascii") != digest:
        raise corrupt("checksum mismatch")
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise corrupt(f"undecodable body: {exc}") from None


def read_file(fs: FileSystem, path: str) -> bytes | None:
    """The whole content of ``path``, or None when there is no file."""
    if fs.stat(path) is None:
        return None
    try:
        fd = fs.open(path)
    except FileNotFoundError:
        return None
    try:
        parts = []
        offset = 0
        while chunk := fs.read(fd, _CHUNK, offset):
            parts.append(chunk)
            offset += len(chunk)
        return b"".join(parts)
    finally:
        fs.close(fd)


def write_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Write ``data`` to the temporary name of ``path``, fsync it and rename it over ``path``.

    The directory is not fsynced here: callers fsync each directory once after
    a batch of renames.
    """
    tmp = temp_path(path)
    fd = fs.open(tmp, create=True, truncate=True)
    try:
        if data:
            fs.write(fd, data, 0)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)


def overwrite_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Write ``data`` over ``path`` in place (creating it if needed) and fsync it.

    Not atomic by itself: a restore writes workspace files this way only once
    its journal is durable, and recovery repairs a torn file from the journal's
    images. Writing in place keeps the file's inode, mode and hard links, and
    costs what a tool's own write costs. The directory is not fsynced here.
    """
    fd = fs.open(path, create=True, truncate=True)
    try:
        if data:
            fs.write(fd, data, 0)
        fs.fsync(fd)
    finally:
        fs.close(fd)


def ensure_dir(fs: FileSystem, root: str, rel_dir: str) -> None:
    """Create ``rel_dir`` under ``root`` with its missing parents, each made durable."""
    missing = []
    here = rel_dir
    while here and fs.stat(os.path.join(root, here)) is None:
        missing.append(here)
        here = posixpath.dirname(here)
    for rel in reversed(missing):
        fs.mkdir(os.path.join(root, rel))
        fs.fsync_dir(os.path.join(root, posixpath.dirname(rel)))


def write_journal(fs: FileSystem, root: str, journal: Journal) -> None:
    """Make ``journal`` durable under ``root`` (temporary file, fsync, rename, fsync dir)."""
    ensure_dir(fs, root, RESERVED_DIR)
    path = journal_path(root, journal.session_id)
    write_file(fs, path, encode_journal(journal))
    fs.fsync_dir(os.path.dirname(path))


def read_journal(fs: FileSystem, root: str, session_id: str) -> Journal | None:
    """The pending journal of ``session_id``, or None; `JournalCorruptError` when damaged.

    A temporary journal left by a crash before its rename was never in effect
    and is removed.
    """
    path = journal_path(root, session_id)
    tmp = temp_path(path)
    if fs.stat(tmp) is not None:
        fs.unlink(tmp)
        fs.fsync_dir(os.path.dirname(path))
    data = read_file(fs, path)
    if data is None:
        return None
    journal = decode_journal(data, path)
    if journal.session_id != session_id:
        raise JournalCorruptError(
            session_id, path, f"journal is for session {journal.session_id!r}"
        )
    return journal


def remove_journal(fs: FileSystem, root: str, session_id: str) -> None:
    """Remove the journal of ``session_id`` (and a temporary one) durably, if there is one.

    From then on the restore is over.
    """
    path = journal_path(root, session_id)
    removed = False
    for name in (temp_path(path), path):
        if fs.stat(name) is not None:
            fs.unlink(name)
            removed = True
    if removed:
        fs.fsync_dir(os.path.dirname(path))


# -- recovery ------------------------------------------------------------------------------


def workspace_root(root: str | os.PathLike[str], fs: FileSystem) -> str:
    """The absolute root of a workspace as journals and workspaces name it: on the real
    disk resolved through symlinks (a root under a symlinked /tmp is still inside itself)."""
    given = os.path.abspath(os.fspath(root))
    return os.path.realpath(given) if on_real_disk(fs) else given


def put_file(fs: FileSystem, root: str, target: str, content: bytes | None) -> str:
    """Make ``target`` (relative to ``root``) hold ``content``, None meaning no file, written
    in place and fsynced; returns the directory to fsync once the batch is written."""
    full = os.path.join(root, target)
    if content is None:
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(full)
    else:
        ensure_dir(fs, root, posixpath.dirname(target))
        overwrite_file(fs, full, content)
    return os.path.dirname(full)


def roll_files(fs: FileSystem, root: str, entries: Sequence[JournalFile], *, forward: bool) -> None:
    """Bring every file to its after-image (``forward``) or before-image; idempotent.

    Files already right are left alone; any other (a torn write included) is rewritten.
    """
    dirs: set[str] = set()
    for entry in entries:
        full = os.path.join(root, entry.target)
        want = entry.after if forward else entry.before
        try:
            now = read_file(fs, full)
        except NotADirectoryError:
            now = None
        if now != want:
            dirs.add(put_file(fs, root, entry.target, want))
    for directory in sorted(dirs):
        fs.fsync_dir(directory)


async def session_generation(checkpointer: Checkpointer, session_id: str) -> int | None:
    """The session's generation on a backend that declares GENERATION, else None."""
    if Capability.GENERATION not in checkpointer.capabilities:
        return None
    return await cast(GenerationalCheckpointer, checkpointer).generation(session_id)


async def restore_committed(checkpointer: Checkpointer, journal: Journal) -> bool:
    """Whether the journal's restore truncated the log: the target prompt is no longer
    at its seq as stored (same ``ts``, same event).

    With generations, an unchanged generation settles it first: every truncate
    moves it. A moved one proves nothing by itself: a backend may bump it before
    its truncate is durable (the file backend does), so the log is asked then too.
    """
    if not journal.conversation:
        return False
    if (
        journal.generation is not None
        and await session_generation(checkpointer, journal.session_id) == journal.generation
    ):
        return False
    if await checkpointer.head(journal.session_id) < journal.seq:
        return True
    events = checkpointer.read(journal.session_id, journal.seq - 1)
    try:
        first = await anext(aiter(events), None)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if first is None or first.seq != journal.seq or first.ts != journal.prompt_ts:
        return True
    return encode_event(first.event) != journal.prompt_event


async def recover(
    checkpointer: Checkpointer,
    session_id: str,
    workspace: WorkspaceArgument,
    *,
    fs: FileSystem | None = None,
) -> RecoveryOutcome:
    """Finish or undo a restore of ``session_id`` in ``workspace`` that a crash interrupted.

    ``workspace`` is a workspace or its root directory; ``fs`` replaces its file
    system (by default the workspace's own, else the real one). Holds the
    session while it works. A restore whose truncate had happened is rolled
    forward (files brought to the restored state); any other is rolled back
    (files as before it). Idempotent: a second call finds nothing. Raises
    `JournalCorruptError` for a damaged journal, changing nothing, and
    `InvalidArgumentError` for a bad session id.
    """
    check_session_id(session_id)
    if isinstance(workspace, str | os.PathLike):
        given, files = workspace, fs if fs is not None else OsFileSystem()
    else:
        given, files = workspace.root, fs if fs is not None else workspace.fs
    root = workspace_root(given, files)
    async with maintenance(checkpointer, session_id):
        return await recover_held(checkpointer, session_id, root, files)


async def recover_held(
    checkpointer: Checkpointer, session_id: str, root: str, fs: FileSystem
) -> RecoveryOutcome:
    """`recover` for a caller that already holds the session (`restore`), with the
    workspace's root and file system."""
    journal = read_journal(fs, root, session_id)
    if journal is None:
        return RecoveryOutcome.NOTHING
    forward = await restore_committed(checkpointer, journal)
    roll_files(fs, root, journal.files, forward=forward)
    remove_journal(fs, root, session_id)
    return RecoveryOutcome.ROLLED_FORWARD if forward else RecoveryOutcome.ROLLED_BACK
