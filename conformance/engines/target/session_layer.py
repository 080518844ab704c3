"""The session layer the kit checks on top of a backend: loaded by name, checked, noted.

The session suite verifies the FOLD, CKPT, SNAP, RESTORE and COMPACT rules. Those
rules are about the session layer (fold, checkpoint listing, the workspace,
restore, compaction) *running on the backend under test*, so the kit needs both.
The backend comes from the factory as always; the session layer is anything
satisfying the contract's `checkpointspec.spec.SessionLayer` (the names of
`checkpointspec.spec.SESSION_LAYER_NAMES`), by default ``checkpointspec.reference``
itself. ``--session-layer MODULE`` picks another module, and ``MODULE:OBJECT`` an
object inside a module whose attributes are those names (a class, a namespace):
that is how the project's own tests feed the kit deliberately broken session layers.

`load_session_layer` imports the module and looks every name up at once, so a
missing or uncallable piece is one usage error before any check runs
(`SessionLayerError`, a `BackendLoadError`). Nothing is imported until a run
selects a session check: the storage suite works whatever state the session
layer is in. The kit types the layer by the contract's protocols only: a layer
under test must not be able to pass by sharing the kit's code.

Like backend handles (`checkpointspec.conformance.engines.target.provenance`), every
function of the layer notes the exceptions that escape it: an exception the
layer raised is evidence against what is being checked, not an error of the
kit, and fails the rule of the check that met it. Expected errors
(`RestoreError`, `InvalidArgumentError` ...) pass through unchanged for the
checks to catch. The workspace class is wrapped by a subclass, so that the
layer's own ``isinstance(workspace, Workspace)`` still holds.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final, TypeVar, cast

import msgspec

from ....backends.registry import BackendLoadError, import_object
from ....spec import (
    SESSION_LAYER_NAMES,
    CompactFunction,
    FoldFunction,
    ListCheckpointsFunction,
    MaintenanceFunction,
    RecoverFunction,
    RestoreFunction,
    SummarizerFactory,
    WorkspaceFactory,
)
from .provenance import blame_session_layer

__all__ = [
    "DEFAULT_SESSION_LAYER",
    "LoadedSessionLayer",
    "SessionLayerError",
    "load_session_layer",
]

DEFAULT_SESSION_LAYER: Final = "checkpointspec.reference"
"""The session layer a run checks unless ``--session-layer`` names another."""

T = TypeVar("T")


class SessionLayerError(BackendLoadError):
    """The session layer cannot be loaded: its module does not import, or lacks a name.
    A usage error (exit status 2), like a backend that cannot be loaded."""


class LoadedSessionLayer(msgspec.Struct, frozen=True):
    """A loaded session layer, a `checkpointspec.spec.SessionLayer`: ``target`` is what
    was loaded (a worker process loads it again by that name); every other field is
    the layer's name of the same spelling, wrapped so that the exceptions it raises
    are noted as the layer's."""

    target: str
    fold: FoldFunction
    list_checkpoints: ListCheckpointsFunction
    Workspace: WorkspaceFactory
    restore: RestoreFunction
    recover: RecoverFunction
    compact: CompactFunction
    ExtractiveSummarizer: SummarizerFactory
    maintenance: MaintenanceFunction


# -- loading -----------------------------------------------------------------------------


def load_session_layer(target: str = DEFAULT_SESSION_LAYER) -> LoadedSessionLayer:
    """Import ``target`` (``MODULE`` or ``MODULE:OBJECT``) and look up every name of
    `SESSION_LAYER_NAMES` on it, and ``Workspace.open``. Raises `SessionLayerError`
    with one line naming the module, the import error, the missing names or those
    that are not callable."""
    module_name = target.partition(":")[0]
    if not module_name:
        raise SessionLayerError(
            f"session layer {target!r}: name a module (MODULE or MODULE:OBJECT)"
        )
    try:
        source = import_object(target)
    except BackendLoadError as exc:  # the module does not import, or lacks the object
        raise SessionLayerError(f"session layer: {exc}") from exc
    found = _members(source)
    missing = [name for name, value in found.items() if value is _MISSING]
    if missing:
        raise SessionLayerError(
            f"session layer {target!r} lacks {', '.join(missing)} "
            f"(a session layer exposes {', '.join(SESSION_LAYER_NAMES)})"
        )
    uncallable = [name for name, value in found.items() if not callable(value)]
    if uncallable:
        raise SessionLayerError(
            f"session layer {target!r}: {', '.join(uncallable)} is not callable"
        )
    named = cast(dict[str, Callable[..., object]], found)
    return LoadedSessionLayer(
        target=target,
        fold=cast(FoldFunction, _noted(named["fold"], "fold")),
        list_checkpoints=cast(
            ListCheckpointsFunction, _noted(named["list_checkpoints"], "list_checkpoints")
        ),
        Workspace=_noted_workspace(named["Workspace"]),
        restore=cast(RestoreFunction, _noted(named["restore"], "restore")),
        recover=cast(RecoverFunction, _noted(named["recover"], "recover")),
        compact=cast(CompactFunction, _noted(named["compact"], "compact")),
        ExtractiveSummarizer=cast(
            SummarizerFactory, _noted(named["ExtractiveSummarizer"], "ExtractiveSummarizer")
        ),
        maintenance=cast(MaintenanceFunction, _noted_maintenance(named["maintenance"])),
    )


_MISSING: Final = object()


def _members(source: object) -> dict[str, object]:
    """Every member of the `checkpointspec.spec.SessionLayer` protocol the kit calls, as
    ``source`` has it (`_MISSING` when it lacks one): its names, and ``Workspace.open``
    when it has a ``Workspace``."""
    found = {name: getattr(source, name, _MISSING) for name in SESSION_LAYER_NAMES}
    if found["Workspace"] is not _MISSING:
        found["Workspace.open"] = getattr(found["Workspace"], "open", _MISSING)
    return found


# -- noting what the layer raised --------------------------------------------------------


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
            blame_session_layer(exc, self._operation)
            raise

    async def aclose(self) -> None:
        close = getattr(self._source, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as exc:
                blame_session_layer(exc, self._operation)
                raise


async def _settle(awaitable: Awaitable[T], operation: str) -> T:
    try:
        return await awaitable
    except Exception as exc:
        blame_session_layer(exc, operation)
        raise


def _noted(function: Callable[..., object], operation: str) -> Callable[..., object]:
    """``function`` with every exception escaping it (or what it returns) noted as the
    layer's, raised from ``operation``."""

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            blame_session_layer(exc, operation)
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
            blame_session_layer(exc, "maintenance")
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
                blame_session_layer(raised, "maintenance")
            raise


def _noted_maintenance(function: Callable[..., object]) -> Callable[..., object]:
    operation = "maintenance"

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            inner = function(*args, **kwargs)
        except Exception as exc:
            blame_session_layer(exc, operation)
            raise
        if not isinstance(inner, AbstractAsyncContextManager):
            # A layer's maintenance that is no async context manager is the layer's bug;
            # raising here notes it like any other.
            error = TypeError(
                f"maintenance returned {type(inner).__name__}, not an async context manager"
            )
            blame_session_layer(error, operation)
            raise error
        return _NotedContext(cast(AbstractAsyncContextManager[None], inner))

    return call


_WORKSPACE_METHODS = ("write", "delete", "read", "resolve")


def _noted_workspace(found: object) -> WorkspaceFactory:
    """The layer's ``Workspace`` as a subclass whose constructor, ``open`` and methods
    note their exceptions. Anything that is not a class is wrapped as a function."""
    if not isinstance(found, type):
        return cast(WorkspaceFactory, _noted(cast(Callable[..., object], found), "Workspace"))
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
    return cast(WorkspaceFactory, wrapped)
