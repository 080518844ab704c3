"""The session layer's interface: what a module must expose to be a session layer.

A session layer is what agents do with a session log on top of any
`Checkpointer`: the conversation a model sees, the points a session can go back
to, file edits made undoable, time travel that survives a crash, compaction.
``checkpointspec.reference`` is one; ``checkpointspec run BACKEND --suite
session --session-layer MODULE`` checks another against the FOLD, CKPT, SNAP,
RESTORE and COMPACT rules. The layer is `SessionLayer`: eight names, each with
the protocol of its own below, whose signatures are the reference's.

This module holds signatures only. What each name must do is in the rules
(``spec/SPEC.md``) and their pure models (`fold_model`, `checkpoints_model`,
`make_snapshot`, `plan_restore`, `compaction_boundary`); the values a layer
returns or reports are in `checkpointspec.spec.restoration` (`RestoreResult`,
`RestoreProgress`, `RecoveryOutcome`) and `checkpointspec.spec.compaction`
(`CompactionProgress`). Pure: no I/O, nothing about any implementation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Final, Protocol, TypeAlias, runtime_checkable

from .checkpoints import Checkpoint
from .compaction import CompactionProgress, Summarizer
from .conversation import Message
from .events import FileSnapshot
from .filesystem import FileSystem
from .protocol import Checkpointer
from .records import StoredEvent
from .restoration import RecoveryOutcome, RestoreProgress, RestoreResult

__all__ = [
    "SESSION_LAYER_NAMES",
    "CompactFunction",
    "FoldFunction",
    "ListCheckpointsFunction",
    "MaintenanceFunction",
    "RecoverFunction",
    "RestoreFunction",
    "SessionLayer",
    "SessionWorkspace",
    "SummarizerFactory",
    "WorkspaceArgument",
    "WorkspaceFactory",
]

SESSION_LAYER_NAMES: Final = (
    "fold",
    "list_checkpoints",
    "Workspace",
    "restore",
    "recover",
    "compact",
    "ExtractiveSummarizer",
    "maintenance",
)
"""The names a session layer exposes: the members of `SessionLayer`, in the order
its rules come in the specification."""


class FoldFunction(Protocol):
    """``fold(events)``: the conversation a model is shown for a log (FOLD rules).

    Takes the stored events in seq order and returns the folded `Message` list,
    as `fold_model` computes it.
    """

    def __call__(self, events: Iterable[StoredEvent], /) -> list[Message]: ...


class ListCheckpointsFunction(Protocol):
    """``await list_checkpoints(checkpointer, session_id)``: the points the session
    can be restored to, oldest first, as `checkpoints_model` computes them (CKPT rules)."""

    def __call__(
        self, checkpointer: Checkpointer, session_id: str, /
    ) -> Awaitable[list[Checkpoint]]: ...


@runtime_checkable
class SessionWorkspace(Protocol):
    """A workspace: files under ``root`` whose every change is recorded in the session
    log before it is made (SNAP rules).

    Paths are relative to the root and ``/``-separated; one the workspace refuses
    (absolute, ``..``, the reserved folder, a symlink leading out) raises
    `InvalidArgumentError` with reason ``unsafe_path`` before anything happens.
    """

    @property
    def root(self) -> str:
        """The absolute root directory; a restore's journal lives in its reserved folder."""
        ...

    @property
    def fs(self) -> FileSystem:
        """The file system every file of the workspace is read and written through."""
        ...

    def resolve(self, path: str) -> str:
        """``path`` as a snapshot records it: canonical, inside the root, not reserved."""
        ...

    def read(self, path: str) -> bytes | None:
        """What the file holds now; None when there is no file."""
        ...

    def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> Awaitable[FileSnapshot]:
        """Append the snapshot of the file, then replace its content (SNAP-001, SNAP-004)."""
        ...

    def delete(self, path: str, *, tool_call_id: str | None = None) -> Awaitable[FileSnapshot]:
        """Append the snapshot of the file, then delete it (SNAP-001, SNAP-004)."""
        ...


WorkspaceArgument: TypeAlias = "SessionWorkspace | str | os.PathLike[str]"
"""Where ``restore`` and ``recover`` find the files: a workspace, or its root directory."""


class WorkspaceFactory(Protocol):
    """``Workspace(root, checkpointer, session_id, *, snapshot_limit, fs)``, and
    ``await Workspace.open(...)`` with the same arguments, which first finishes or
    undoes a restore a crash interrupted in it (RESTORE-006).

    ``snapshot_limit`` is the size in bytes above which a snapshot keeps no content
    (SNAP-002); ``fs`` the file system (None: the real one).
    """

    def __call__(
        self,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = ...,
        fs: FileSystem | None = None,
    ) -> SessionWorkspace: ...

    def open(
        self,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = ...,
        fs: FileSystem | None = None,
    ) -> Awaitable[SessionWorkspace]: ...


class RestoreFunction(Protocol):
    """``await restore(checkpointer, session_id, seq, ...)``: files and log back to just
    before the prompt at ``seq`` (RESTORE rules).

    ``files`` / ``conversation`` choose what is restored; ``workspace`` is needed
    when a file is to be put back. ``cancel`` stops it (everything put back);
    ``progress`` receives each `RestoreProgress`; ``fs`` replaces the file system;
    ``fault_hook`` is called with the name of each point the restore passes (the
    kit kills the process there). A refusal or a failure raises `RestoreError`
    with the store and the files as they were.
    """

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        seq: int,
        /,
        *,
        workspace: WorkspaceArgument | None = None,
        files: bool = True,
        conversation: bool = True,
        cancel: asyncio.Event | None = None,
        progress: Callable[[RestoreProgress], None] | None = None,
        fs: FileSystem | None = None,
        fault_hook: Callable[[str], None] | None = None,
    ) -> Awaitable[RestoreResult]: ...


class RecoverFunction(Protocol):
    """``await recover(checkpointer, session_id, workspace, *, fs)``: finish or undo a
    restore of the session in ``workspace`` that a crash interrupted (RESTORE-006).

    Idempotent: a second call returns `RecoveryOutcome.NOTHING`.
    """

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        workspace: WorkspaceArgument,
        /,
        *,
        fs: FileSystem | None = None,
    ) -> Awaitable[RecoveryOutcome]: ...


class CompactFunction(Protocol):
    """``async for progress in compact(checkpointer, session_id, *, summarizer, ...)``:
    one `Summary` appended in place of the conversation up to the last clean
    boundary (COMPACT rules), reported as `CompactionProgress` values."""

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        /,
        *,
        summarizer: Summarizer,
        instructions: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> AsyncIterator[CompactionProgress]: ...


class SummarizerFactory(Protocol):
    """``ExtractiveSummarizer()``: a deterministic summarizer that needs no model."""

    def __call__(self) -> Summarizer: ...


class MaintenanceFunction(Protocol):
    """``async with maintenance(checkpointer, session_id)``: hold the session for a
    restore or a compaction; `SessionLockedError` when it is already held (MAINT rules)."""

    def __call__(
        self, checkpointer: Checkpointer, session_id: str, /
    ) -> AbstractAsyncContextManager[None]: ...


@runtime_checkable
class SessionLayer(Protocol):
    """A session layer: a module (or any object) exposing `SESSION_LAYER_NAMES`.

    ``checkpointspec.reference`` satisfies it; so must a module given to
    ``--session-layer``, which the kit refuses before any check runs when a name
    is missing or not callable.
    """

    @property
    def fold(self) -> FoldFunction: ...

    @property
    def list_checkpoints(self) -> ListCheckpointsFunction: ...

    @property
    def Workspace(self) -> WorkspaceFactory: ...

    @property
    def restore(self) -> RestoreFunction: ...

    @property
    def recover(self) -> RecoverFunction: ...

    @property
    def compact(self) -> CompactFunction: ...

    @property
    def ExtractiveSummarizer(self) -> SummarizerFactory: ...

    @property
    def maintenance(self) -> MaintenanceFunction: ...
