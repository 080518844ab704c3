"""Restore: roll a session's files and log back to just before a prompt (RESTORE rules).

`restore` is the preflight oracle `checkpointspec.spec.restoration.plan_restore`
made real. In order:

1. hold the session (`maintenance`) and recover a restore a crash left
   unfinished (`checkpointspec.reference.journal.recover_held`);
2. read the whole log, then the current content of every file the restore
   involves, through the `Workspace` and its `FileSystem` port. A path the
   workspace refuses to resolve (a symlink leading outside the root or into
   the reserved folder) is unsafe (``unsafe_path``), checked with the path's
   other problems;
3. preflight with `plan_restore`: the refusal it raises is the one raised,
   before anything is touched (RESTORE-002, RESTORE-003);
4. apply: write the intent journal (`checkpointspec.reference.journal`), put
   each file back (in place and fsynced: the journal makes a torn file
   repairable; deletions unlink), fsync the directories, truncate the log with
   ``expected_head`` — the commit point — and remove the journal.

A failure in the process (a write raising ``OSError``, a truncate conflict, the
``cancel`` event set before a file or before the truncate) puts back every file
already written from the journal's before-images and raises `RestoreError`
(``apply_failed``, ``log_changed``, ``cancelled``) chained from its cause
(RESTORE-005). A process that dies instead (SIGKILL, power loss, or any
``BaseException`` that is not an ``Exception``) leaves the journal, and the next
`recover` — which `restore` and ``Workspace.open`` run first — rolls the restore
back, or forward when the truncate had happened (RESTORE-006).

What restore can undo is what the snapshots recorded: file-tool changes. Shell
commands and other side effects are out of its reach.

What it reports and returns (`RestoreProgress`, `RestoreResult`) are the
contract's values (`checkpointspec.spec.restoration`); its signature is the
session layer's `checkpointspec.spec.RestoreFunction`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Final, cast

from ..backends.fsport import OsFileSystem
from ..spec import (
    Capability,
    CheckpointConflictError,
    Checkpointer,
    FileSnapshot,
    FileSystem,
    GenerationalCheckpointer,
    InvalidArgumentError,
    RestoreError,
    RestoreProgress,
    RestoreReason,
    RestoreResult,
    SessionLockedError,
    StoredEvent,
    UnsupportedOperationError,
    WorkspaceArgument,
    canonical_path,
    encode_event,
)
from ..spec.checkpoints import snapshot_key
from ..spec.restoration import RestorePlan, plan_restore
from .journal import (
    Journal,
    JournalFile,
    put_file,
    recover_held,
    remove_journal,
    restore_committed,
    roll_files,
    session_generation,
    write_journal,
)
from .maintenance import maintenance
from .workspace import Workspace

__all__ = ["FAULT_POINTS", "restore"]

FAULT_POINTS: Final = (
    "restore.journal_written",
    "restore.file_written",
    "restore.files_written",
    "restore.log_truncated",
    "restore.journal_removed",
)
"""The points at which `restore` calls its ``fault_hook`` (``file_written`` once per file)."""

_PATH_STAGE: Final = frozenset(
    {
        RestoreReason.UNSAFE_PATH,
        RestoreReason.SNAPSHOT_TRUNCATED,
        RestoreReason.SNAPSHOT_UNDECODABLE,
    }
)
"""Refusals of the preflight's per-path stage, which a symlink escape belongs to."""


def _locate(
    workspace: WorkspaceArgument | None,
    checkpointer: Checkpointer,
    session_id: str,
    fs: FileSystem | None,
) -> Workspace | None:
    """The workspace to restore into, on ``fs`` when given (else on its own file system).

    Another layer's workspace is taken by its root and file system: restore reads
    and resolves paths the way this layer's `Workspace` does.
    """
    if workspace is None:
        return None
    if isinstance(workspace, Workspace):
        if fs is None or fs is workspace.fs:
            return workspace
        workspace = workspace.root
    elif not isinstance(workspace, str | os.PathLike):
        fs = fs if fs is not None else workspace.fs
        workspace = workspace.root
    return Workspace(workspace, checkpointer, session_id, fs=fs)


class _Reporter:
    """Sends `RestoreProgress` to the caller's callback, ``start`` always first."""

    def __init__(self, callback: Callable[[RestoreProgress], None] | None) -> None:
        self._callback = callback
        self.started = False

    def _send(self, report: RestoreProgress) -> None:
        if self._callback is not None:
            self._callback(report)

    def start(self, total: int) -> None:
        self.started = True
        self._send(RestoreProgress("start", 0, total))

    def step(self, completed: int, total: int, path: str) -> None:
        self._send(RestoreProgress("progress", completed, total, path))

    def done(self, total: int) -> None:
        self._send(RestoreProgress("done", total, total))

    def error(self, exc: BaseException) -> None:
        if not self.started:
            self.start(0)
        self._send(RestoreProgress("error", error=f"{type(exc).__name__}: {exc}"))


async def restore(
    checkpointer: Checkpointer,
    session_id: str,
    seq: int,
    *,
    workspace: WorkspaceArgument | None = None,
    files: bool = True,
    conversation: bool = True,
    cancel: asyncio.Event | None = None,
    progress: Callable[[RestoreProgress], None] | None = None,
    fs: FileSystem | None = None,
    fault_hook: Callable[[str], None] | None = None,
) -> RestoreResult:
    """Roll ``session_id`` back to just before the prompt at ``seq`` (see the module docstring).

    ``files`` / ``conversation`` choose what is restored (RESTORE-004). The
    workspace is needed when a file is to be put back; ``fs`` replaces the file
    system (by default the workspace's own, else the real one). ``fault_hook``
    is called with each name of `FAULT_POINTS` as it is passed (crash tests).

    Raises `RestoreError` for a refusal (nothing touched) or a failure that
    was rolled back; `UnsupportedOperationError` for a conversation restore on
    a backend without TRUNCATE; `SessionLockedError` when the session is held.
    """
    reporter = _Reporter(progress)
    try:
        return await _restore(
            checkpointer,
            session_id,
            seq,
            workspace,
            files,
            conversation,
            cancel,
            reporter,
            fs,
            fault_hook or _no_hook,
        )
    except Exception as exc:
        reporter.error(exc)
        raise


def _no_hook(point: str) -> None:
    del point


async def _restore(
    checkpointer: Checkpointer,
    session_id: str,
    seq: int,
    workspace: WorkspaceArgument | None,
    files: bool,
    conversation: bool,
    cancel: asyncio.Event | None,
    reporter: _Reporter,
    fs_arg: FileSystem | None,
    hook: Callable[[str], None],
) -> RestoreResult:
    if conversation and Capability.TRUNCATE not in checkpointer.capabilities:
        raise UnsupportedOperationError("restore", Capability.TRUNCATE.value)
    ws = _locate(workspace, checkpointer, session_id, fs_arg)
    root, fs = (ws.root, ws.fs) if ws is not None else (None, OsFileSystem())
    async with maintenance(checkpointer, session_id):
        if root is not None:
            await recover_held(checkpointer, session_id, root, fs)
        events = await _read_log(checkpointer, session_id)
        # The target and the tool-call boundary first, so that a bad seq is
        # reported as such before any file is read.
        plan_restore(session_id, events, seq, {}, files=False, conversation=conversation)
        targets: dict[str, str] = {}
        current: dict[str, bytes] | None = None
        escaped: list[str] = []
        if ws is not None and files:
            current, targets, escaped = _read_current(ws, _involved(events, seq), session_id, seq)
        plan = _preflight(session_id, events, seq, current, escaped, files, conversation)
        total = len(plan.files)
        reporter.start(total)
        if cancel is not None and cancel.is_set():
            raise RestoreError(session_id, seq, RestoreReason.CANCELLED, "cancelled before start")
        prompt = next(e for e in events if e.seq == seq)
        entries = tuple(
            JournalFile(f.path, targets[f.path], (current or {}).get(f.path), f.content)
            for f in plan.files
        )
        journal = Journal(
            session_id,
            seq,
            plan.expected_head,
            plan.keep_through is not None,
            prompt.ts,
            encode_event(prompt.event),
            entries,
            await session_generation(checkpointer, session_id),
        )
        await _apply(checkpointer, journal, plan, root, fs, cancel, reporter, hook)
        reporter.done(total)
        return RestoreResult(
            tuple(f.path for f in plan.files), plan.keep_through is not None, plan.unchecked
        )


async def _read_log(checkpointer: Checkpointer, session_id: str) -> list[StoredEvent]:
    return [stored async for stored in checkpointer.read(session_id)]


def _involved(events: Sequence[StoredEvent], seq: int) -> list[str]:
    """The paths a restore to ``seq`` would touch (snapshotted after it), as the oracle keys them."""
    return sorted(
        {
            snapshot_key(stored.event.path)
            for stored in events
            if stored.seq > seq and isinstance(stored.event, FileSnapshot)
        }
    )


def _read_current(
    ws: Workspace, paths: Sequence[str], session_id: str, seq: int
) -> tuple[dict[str, bytes], dict[str, str], list[str]]:
    """The content of each involved file, where each is written, and the paths that escape.

    A path the oracle finds unsafe by its spelling is left to the oracle. The
    others go through `Workspace.resolve`, as a tool's write would: one it
    refuses (a symlink leading outside the root or into the reserved folder) is
    unsafe; otherwise the file is read, and later written, where the symlinks
    lead. Raises `RestoreError` when a file cannot be read, and for a directory
    or other non-file where the file was (nothing is touched yet).
    """
    current: dict[str, bytes] = {}
    targets: dict[str, str] = {}
    escaped: list[str] = []
    for path in paths:
        try:
            canonical_path(path)
        except InvalidArgumentError:
            continue
        try:
            rel = ws.resolve(path)
        except InvalidArgumentError:
            escaped.append(path)
            continue
        targets[path] = rel
        try:
            content = ws.read(rel)
        except NotADirectoryError:
            content = None  # a parent is a file now: there is no file at this path
        except InvalidArgumentError as exc:
            raise RestoreError(
                session_id, seq, RestoreReason.OUT_OF_BAND_CHANGE, exc.reason, path
            ) from exc
        except OSError as exc:
            raise RestoreError(
                session_id, seq, RestoreReason.APPLY_FAILED, f"cannot read the file: {exc}", path
            ) from exc
        if content is not None:
            current[path] = content
    return current, targets, escaped


def _preflight(
    session_id: str,
    events: Sequence[StoredEvent],
    seq: int,
    current: dict[str, bytes] | None,
    escaped: list[str],
    files: bool,
    conversation: bool,
) -> RestorePlan:
    """`plan_restore`, with symlink escapes refused as its per-path stage would refuse them."""

    def unsafe(path: str) -> RestoreError:
        return RestoreError(
            session_id,
            seq,
            RestoreReason.UNSAFE_PATH,
            "the path resolves outside the workspace or into its reserved folder",
            path,
        )

    try:
        plan = plan_restore(
            session_id, events, seq, current, files=files, conversation=conversation
        )
    except RestoreError as refused:
        if escaped and (
            refused.reason_code is RestoreReason.OUT_OF_BAND_CHANGE
            or (refused.reason_code in _PATH_STAGE and escaped[0] <= (refused.path or ""))
        ):
            raise unsafe(escaped[0]) from None
        raise
    if escaped:
        raise unsafe(escaped[0])
    return plan


async def _apply(
    checkpointer: Checkpointer,
    journal: Journal,
    plan: RestorePlan,
    root: str | None,
    fs: FileSystem,
    cancel: asyncio.Event | None,
    reporter: _Reporter,
    hook: Callable[[str], None],
) -> None:
    session_id, seq = journal.session_id, journal.seq
    entries = journal.files
    total = len(entries)
    truncating = False
    writing: str | None = None  # the workspace path being written, for the error
    try:
        if entries:
            assert root is not None
            write_journal(fs, root, journal)
            hook("restore.journal_written")
        dirs: set[str] = set()
        for done, entry in enumerate(entries, start=1):
            # The file writes block; yielding to the loop before each one lets
            # another task (a Ctrl-C handler, a UI) set ``cancel`` in between.
            await asyncio.sleep(0)
            _check_cancel(cancel, session_id, seq, f"after {done - 1} of {total} files")
            assert root is not None
            writing = entry.path
            dirs.add(put_file(fs, root, entry.target, entry.after))
            writing = None
            hook("restore.file_written")
            reporter.step(done, total, entry.path)
        for directory in sorted(dirs):
            fs.fsync_dir(directory)
        if entries:
            hook("restore.files_written")
        if plan.keep_through is not None:
            _check_cancel(cancel, session_id, seq, "before the log was truncated")
            truncating = True
            if journal.generation is not None:
                # The generation catches what expected_head cannot: a log cut and
                # refilled to the same head since the preflight (TRUNC-006).
                await cast(GenerationalCheckpointer, checkpointer).truncate(
                    session_id,
                    plan.keep_through,
                    plan.expected_head,
                    expected_generation=journal.generation,
                )
            else:
                await checkpointer.truncate(session_id, plan.keep_through, plan.expected_head)
            truncating = False
            hook("restore.log_truncated")
    except Exception as exc:
        # After any other failure of the truncate, whether it happened is unknown: the log says.
        unsure = truncating and not isinstance(exc, CheckpointConflictError | SessionLockedError)
        if unsure and await restore_committed(checkpointer, journal):
            _finish(fs, root, journal, hook, forward=True)
            return
        _undo(fs, root, journal, exc)
        raise _failure(session_id, seq, exc, writing) from exc
    if entries:
        assert root is not None
        remove_journal(fs, root, session_id)
        hook("restore.journal_removed")


def _check_cancel(cancel: asyncio.Event | None, session_id: str, seq: int, when: str) -> None:
    if cancel is not None and cancel.is_set():
        raise RestoreError(session_id, seq, RestoreReason.CANCELLED, f"cancelled {when}")


def _failure(session_id: str, seq: int, exc: Exception, path: str | None) -> Exception:
    """The error an in-process failure is reported as, once everything is put back;
    ``path`` is the file being written when it happened, if any."""
    if isinstance(exc, RestoreError):
        return exc  # a cancellation: already the error to raise
    if isinstance(exc, CheckpointConflictError | SessionLockedError):
        return RestoreError(
            session_id,
            seq,
            RestoreReason.LOG_CHANGED,
            f"the log changed while restoring; every file was put back ({exc})",
        )
    if isinstance(exc, OSError):
        return RestoreError(
            session_id,
            seq,
            RestoreReason.APPLY_FAILED,
            f"writing the files back failed; every file was put back ({exc})",
            path,
        )
    return exc


def _undo(fs: FileSystem, root: str | None, journal: Journal, cause: Exception) -> None:
    """Put every file back as it was and drop the journal; on failure keep it for `recover`."""
    if not journal.files:
        return
    assert root is not None
    try:
        roll_files(fs, root, journal.files, forward=False)
        remove_journal(fs, root, journal.session_id)
    except OSError as exc:
        exc.add_note(
            f"while undoing a failed restore ({type(cause).__name__}: {cause}); the journal "
            "is kept and the next recover() or restore() finishes putting the files back"
        )
        raise exc from cause


def _finish(
    fs: FileSystem,
    root: str | None,
    journal: Journal,
    hook: Callable[[str], None],
    *,
    forward: bool,
) -> None:
    if journal.files:
        assert root is not None
        roll_files(fs, root, journal.files, forward=forward)
        remove_journal(fs, root, journal.session_id)
        hook("restore.journal_removed")
