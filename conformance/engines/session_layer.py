"""The session layer the kit checks on top of a backend: loaded by name, typed, noted.

The session suite verifies the FOLD, CKPT, SNAP, RESTORE and COMPACT rules. Those
rules are about the session layer (fold, checkpoint listing, the workspace,
restore, compaction) *running on the backend under test*, so the kit needs both.
The backend comes from the factory as always; the session layer is a module
exposing the names of ``checkpointspec.reference`` (`SESSION_NAMES`), by default
that package itself. ``--session-layer MODULE`` picks another one, and
``MODULE:OBJECT`` an object inside a module whose attributes are those names (a
class, a namespace): that is how the project's own tests feed the kit
deliberately broken session layers.

`load_session_layer` imports the module and looks every name up at once, so a
missing piece is one usage error before any check runs (`SessionLayerError`, a
`BackendLoadError`). Nothing is imported until a run selects a session check:
the storage suite works whatever state the session layer is in.

Like backend handles (`checkpointspec.conformance.engines.provenance`), every
function of the layer notes the exceptions that escape it: an exception the
layer raised is evidence against what is being checked, not an error of the
kit, and fails the rule of the check that met it. Expected errors
(`RestoreError`, `InvalidArgumentError` ...) pass through unchanged for the
checks to catch. The workspace class is wrapped by a subclass, so that the
layer's own ``isinstance(workspace, Workspace)`` still holds.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final, Protocol, TypeVar, cast

import msgspec

from ...backends.registry import BackendLoadError, import_object
from ...spec import (
    Checkpoint,
    Checkpointer,
    CompactionProgress,
    FileSnapshot,
    FileSystem,
    Message,
    StoredEvent,
    Summarizer,
)
from .provenance import blame_backend

__all__ = [
    "DEFAULT_SESSION_LAYER",
    "SESSION_NAMES",
    "CompactFn",
    "FoldFn",
    "ListCheckpointsFn",
    "MaintenanceFn",
    "RecoverFn",
    "RestoreFn",
    "RestoreProgressView",
    "RestoreResultView",
    "SessionLayer",
    "SessionLayerError",
    "SessionWorkspace",
    "SummarizerFactory",
    "WorkspaceClass",
    "load_session_layer",
]

DEFAULT_SESSION_LAYER: Final = "checkpointspec.reference"
"""The session layer a run checks unless ``--session-layer`` names another."""

SESSION_NAMES: Final = (
    "fold",
    "list_checkpoints",
    "Workspace",
    "restore",
    "recover",
    "compact",
    "ExtractiveSummarizer",
    "maintenance",
)
"""What a session layer exposes: the public names of ``checkpointspec.reference``."""

T = TypeVar("T")


class SessionLayerError(BackendLoadError):
    """The session layer cannot be loaded: its module does not import, or lacks a name.
    A usage error (exit status 2), like a backend that cannot be loaded."""


# -- the shapes of the layer's names ----------------------------------------------------
# The reference's own types are not imported: the kit checks any layer with these
# shapes, and a layer under test must not be able to pass by sharing the kit's code.


class FoldFn(Protocol):
    """``fold(events)``: the conversation of a log (FOLD rules)."""

    def __call__(self, events: Iterable[StoredEvent], /) -> list[Message]: ...


class ListCheckpointsFn(Protocol):
    """``await list_checkpoints(checkpointer, session_id)`` (CKPT rules)."""

    def __call__(
        self, checkpointer: Checkpointer, session_id: str, /
    ) -> Awaitable[list[Checkpoint]]: ...


class SessionWorkspace(Protocol):
    """A workspace: files under a root whose every change is snapshotted first (SNAP rules)."""

    def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> Awaitable[FileSnapshot]: ...

    def delete(self, path: str, *, tool_call_id: str | None = None) -> Awaitable[FileSnapshot]: ...

    def read(self, path: str) -> bytes | None: ...

    def resolve(self, path: str) -> str: ...


class WorkspaceClass(Protocol):
    """``Workspace(root, checkpointer, session_id, *, snapshot_limit, fs)`` and its ``open``."""

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


class RestoreProgressView(Protocol):
    """What the kit reads of a restore progress report."""

    @property
    def phase(self) -> str: ...
    @property
    def completed(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def path(self) -> str | None: ...


class RestoreResultView(Protocol):
    """What the kit reads of a restore's result."""

    @property
    def restored_files(self) -> tuple[str, ...]: ...
    @property
    def conversation_restored(self) -> bool: ...
    @property
    def unchecked_files(self) -> tuple[str, ...]: ...


class RestoreFn(Protocol):
    """``await restore(checkpointer, session_id, seq, ...)`` (RESTORE rules)."""

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        seq: int,
        *,
        workspace: SessionWorkspace | str | os.PathLike[str] | None = None,
        files: bool = True,
        conversation: bool = True,
        cancel: asyncio.Event | None = None,
        progress: Callable[[RestoreProgressView], None] | None = None,
        fs: FileSystem | None = None,
        fault_hook: Callable[[str], None] | None = None,
    ) -> Awaitable[RestoreResultView]: ...


class RecoverFn(Protocol):
    """``await recover(checkpointer, session_id, workspace, *, fs)``: finish or undo a cut restore."""

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        workspace: SessionWorkspace | str | os.PathLike[str],
        *,
        fs: FileSystem | None = None,
    ) -> Awaitable[str]: ...


class CompactFn(Protocol):
    """``async for progress in compact(checkpointer, session_id, ...)`` (COMPACT rules)."""

    def __call__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        *,
        summarizer: Summarizer,
        instructions: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> AsyncIterator[CompactionProgress]: ...


class SummarizerFactory(Protocol):
    """``ExtractiveSummarizer()``: a deterministic, offline summarizer."""

    def __call__(self) -> Summarizer: ...


class MaintenanceFn(Protocol):
    """``async with maintenance(checkpointer, session_id)``: hold a session."""

    def __call__(
        self, checkpointer: Checkpointer, session_id: str, /
    ) -> AbstractAsyncContextManager[None]: ...


class SessionLayer(msgspec.Struct, frozen=True):
    """A loaded session layer: ``target`` is what was loaded (a worker process loads it
    again by that name); every other field is the layer's name of the same spelling,
    wrapped so that the exceptions it raises are noted as the layer's."""

    target: str
    fold: FoldFn
    list_checkpoints: ListCheckpointsFn
    Workspace: WorkspaceClass
    restore: RestoreFn
    recover: RecoverFn
    compact: CompactFn
    ExtractiveSummarizer: SummarizerFactory
    maintenance: MaintenanceFn


# -- loading -----------------------------------------------------------------------------


def load_session_layer(target: str = DEFAULT_SESSION_LAYER) -> SessionLayer:
    """Import ``target`` (``MODULE`` or ``MODULE:OBJECT``) and look up every name of
    `SESSION_NAMES` on it. Raises `SessionLayerError` with one line naming the module,
    the import error or the missing names."""
    module_name = target.partition(":")[0]
    if not module_name:
        raise SessionLayerError(
            f"session layer {target!r}: name a module (MODULE or MODULE:OBJECT)"
        )
    try:
        source = import_object(target)
    except BackendLoadError as exc:  # the module does not import, or lacks the object
        raise SessionLayerError(f"session layer: {exc}") from exc
    missing = [name for name in SESSION_NAMES if not hasattr(source, name)]
    if missing:
        raise SessionLayerError(
            f"session layer {target!r} lacks {', '.join(missing)} "
            f"(a session layer exposes {', '.join(SESSION_NAMES)})"
        )
    found = {name: getattr(source, name) for name in SESSION_NAMES}
    uncallable = [name for name, value in found.items() if not callable(value)]
    if uncallable:
        raise SessionLayerError(
            f"session layer {target!r}: {', '.join(uncallable)} is not callable"
        )
    return SessionLayer(
        target=target,
        fold=cast(FoldFn, _noted(found["fold"], "fold")),
        list_checkpoints=cast(
            ListCheckpointsFn, _noted(found["list_checkpoints"], "list_checkpoints")
        ),
        Workspace=_noted_workspace(found["Workspace"]),
        restore=cast(RestoreFn, _noted(found["restore"], "restore")),
        recover=cast(RecoverFn, _noted(found["recover"], "recover")),
        compact=cast(CompactFn, _noted(found["compact"], "compact")),
        ExtractiveSummarizer=cast(
            SummarizerFactory, _noted(found["ExtractiveSummarizer"], "ExtractiveSummarizer")
        ),
        maintenance=cast(MaintenanceFn, _noted_maintenance(found["maintenance"])),
    )


# -- noting what the layer raised --------------------------------------------------------


def _operation(name: str) -> str:
    return f"session layer {name}"


class _NotedIterator(AsyncIterator[T]):
    """An async iterator (compact's progress stream) whose exceptions are noted."""

    def __init__(self, source: AsyncIterator[T], operation: str) -> None:
        self._source = source
        self._operation = operation

    def __aiter__(self) -> _NotedIterator[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await anext(self._source)
        except StopAsyncIteration:
            raise
        except Exception as exc:
            blame_backend(exc, self._operation)
            raise

    async def aclose(self) -> None:
        close = getattr(self._source, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as exc:
                blame_backend(exc, self._operation)
                raise


async def _settle(awaitable: Awaitable[T], operation: str) -> T:
    try:
        return await awaitable
    except Exception as exc:
        blame_backend(exc, operation)
        raise


def _noted(function: Callable[..., object], name: str) -> Callable[..., object]:
    """``function`` with every exception escaping it (or what it returns) noted."""
    operation = _operation(name)

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            blame_backend(exc, operation)
            raise
        if inspect.isawaitable(result):
            return _settle(result, operation)
        if isinstance(result, AsyncIterator):
            return _NotedIterator(result, operation)
        return result

    return call


class _NotedContext(AbstractAsyncContextManager[None]):
    """The layer's ``maintenance`` context: entering and leaving it are the layer's
    operations; an exception of the block passes through without a note."""

    def __init__(self, inner: AbstractAsyncContextManager[None]) -> None:
        self._inner = inner

    async def __aenter__(self) -> None:
        try:
            await self._inner.__aenter__()
        except Exception as exc:
            blame_backend(exc, _operation("maintenance"))
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return await self._inner.__aexit__(exc_type, exc, tb)
        except Exception as raised:
            if raised is not exc:
                blame_backend(raised, _operation("maintenance"))
            raise


def _noted_maintenance(function: Callable[..., object]) -> Callable[..., object]:
    operation = _operation("maintenance")

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            inner = function(*args, **kwargs)
        except Exception as exc:
            blame_backend(exc, operation)
            raise
        if not isinstance(inner, AbstractAsyncContextManager):
            # A layer's maintenance that is no async context manager is the layer's bug;
            # raising here notes it like any other.
            error = TypeError(
                f"maintenance returned {type(inner).__name__}, not an async context manager"
            )
            blame_backend(error, operation)
            raise error
        return _NotedContext(cast(AbstractAsyncContextManager[None], inner))

    return call


_WORKSPACE_METHODS = ("write", "delete", "read", "resolve")


def _noted_workspace(found: object) -> WorkspaceClass:
    """The layer's ``Workspace`` as a subclass whose constructor, ``open`` and methods
    note their exceptions. Anything that is not a class is wrapped as a function."""
    if not isinstance(found, type):
        return cast(WorkspaceClass, _noted(cast(Callable[..., object], found), "Workspace"))
    namespace: dict[str, object] = {"__doc__": found.__doc__, "__module__": found.__module__}
    for name in ("__init__", *_WORKSPACE_METHODS):
        original = getattr(found, name, None)
        if callable(original):
            namespace[name] = _noted(original, f"Workspace.{name.strip('_')}")
    static_open = inspect.getattr_static(found, "open", None)
    if isinstance(static_open, classmethod):
        opener = cast(Callable[..., object], static_open.__func__)
        noted_open = _noted(opener, "Workspace.open")
        namespace["open"] = classmethod(noted_open)
    wrapped = type(found.__name__, (found,), namespace)
    return cast(WorkspaceClass, wrapped)
