"""Which exceptions the backend raised: every handle the kit opens notes them.

A verdict must never be the kit's own bug in disguise. `open_checkpointer` hands
out every backend handle wrapped in a `BackendHandle`, which forwards each call
to the backend's object unchanged and, when an exception escapes that call,
notes on it who raised it and from which operation, a `RaisedBy` value
(`raised_by`). The session layer's functions are noted the same way, as the
layer's (`checkpointspec.conformance.engines.target.session_layer`). The runner
reads the note: an exception the backend or the layer raised is evidence about
them, and anything else that escapes a check is an error of the kit itself.

Only the note is added. Arguments, values, exceptions and their types pass
through as they are, so a check that expects an error still catches it; an
answer of a type the contract does not allow (None where a head is due, a read
yielding something that is no `StoredEvent`) becomes a `RuleViolation` of the
rule that defines the answer (`checkpointspec.conformance.engines.contract.answers`), so
that no check trips over it with an error of its own. The
backend class's other public members (``generation``, the `StoreHooks` and
`FaultInjectable` methods, ``on_filesystem`` ...) are forwarded too, and are
defined on the wrapper's class so that runtime protocol checks see them; a
handle such a method returns comes back wrapped as well.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from typing import Literal, NamedTuple, TypeVar, cast

from ....backends.registry import open_backend
from ....spec import (
    BackendContext,
    BackendFactory,
    Capability,
    Checkpointer,
    IntegrityReport,
    ModelHandle,
    SessionInfo,
    StoredEvent,
)
from ..contract.answers import check_answer, check_read_item
from ..contract.violations import RuleViolation
from .witness import Pending, Witness

__all__ = [
    "BackendHandle",
    "RaisedBy",
    "Raiser",
    "backend_operation",
    "blame_backend",
    "blame_session_layer",
    "open_checkpointer",
    "raised_by",
]

T = TypeVar("T")

Raiser = Literal["backend", "session layer"]
"""Who raised an exception the kit noted: the backend, or the session layer on it."""


class RaisedBy(NamedTuple):
    """Who raised a noted exception (``raiser``) and from which ``operation``
    (``append``, ``Workspace.open``, ``append in a worker process`` ...)."""

    raiser: Raiser
    operation: str


_NOTE = "_checkpointspec_raised_by"


def _note(error: BaseException, raised: RaisedBy) -> None:
    """Note ``raised`` on ``error`` (the first note stays)."""
    if raised_by(error) is None:
        with contextlib.suppress(AttributeError, TypeError):
            setattr(error, _NOTE, raised)


def blame_backend(error: BaseException, operation: str) -> None:
    """Note on ``error`` that the backend raised it from ``operation`` (the first note stays)."""
    _note(error, RaisedBy("backend", operation))


def blame_session_layer(error: BaseException, operation: str) -> None:
    """Note on ``error`` that the session layer raised it from ``operation`` (the first
    note stays)."""
    _note(error, RaisedBy("session layer", operation))


def raised_by(error: BaseException) -> RaisedBy | None:
    """Who raised ``error`` and from which operation; None if neither the backend nor the
    session layer did (the kit raised it)."""
    noted = getattr(error, _NOTE, None)
    return noted if isinstance(noted, RaisedBy) else None


def backend_operation(error: BaseException) -> str | None:
    """The operation of the backend (or of the session layer on it) that raised ``error``,
    or None if neither raised it."""
    noted = raised_by(error)
    return noted.operation if noted is not None else None


class _Watched:
    """A handle's place in its check's `Witness`: the store it is open on, and its model."""

    __slots__ = ("handle", "store", "witness")

    def __init__(self, witness: Witness, store: str, handle: ModelHandle) -> None:
        self.witness = witness
        self.store = store
        self.handle = handle

    def begin(
        self, operation: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> Pending | None:
        return self.witness.begin(self.store, self.handle, operation, args, kwargs)


class _BackendIterator(AsyncIterator[T]):
    """The iterator a backend's ``read`` returned, with its exceptions noted, and what it
    yielded told to the check's witness when it ends."""

    def __init__(
        self,
        source: AsyncIterable[T],
        operation: str,
        witness: Witness | None = None,
        pending: Pending | None = None,
    ) -> None:
        self._source = source
        self._iterator: AsyncIterator[T] | None = None
        self._operation = operation
        self._witness = witness
        self._pending = pending
        self._yielded: list[T] = []

    def _end(self, outcome: Literal["returned", "raised", "abandoned"], value: object) -> None:
        if self._witness is not None and self._pending is not None:
            pending, self._pending = self._pending, None
            self._witness.end(pending, outcome, value)

    def __aiter__(self) -> _BackendIterator[T]:
        return self

    async def __anext__(self) -> T:
        try:
            if self._iterator is None:
                self._iterator = aiter(self._source)
            item = await anext(self._iterator)
        except StopAsyncIteration:
            self._end("returned", self._yielded)
            raise
        except Exception as exc:
            self._end("raised", exc)
            blame_backend(exc, self._operation)
            raise
        except BaseException:
            self._end("abandoned", None)
            raise
        if self._pending is not None:
            self._yielded.append(item)
        if self._operation == "read":
            check_read_item(item)
        return item

    async def aclose(self) -> None:
        self._end("abandoned", None)
        close = getattr(self._iterator or self._source, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as exc:
                blame_backend(exc, self._operation)
                raise


class BackendHandle:
    """A backend handle as the kit holds it: every call forwarded, every escaping
    exception noted with the operation that raised it. Make one with `wrap`."""

    def __init__(self, target: Checkpointer) -> None:
        self._target = target
        self._watched: _Watched | None = None

    @staticmethod
    def wrap(handle: Checkpointer) -> Checkpointer:
        """``handle`` wrapped (once) in the `BackendHandle` class for its type."""
        if isinstance(handle, BackendHandle):
            return handle
        wrapper: Checkpointer = _handle_class(type(handle))(handle)
        return wrapper

    def watch(
        self,
        witness: Witness,
        store: str,
        *,
        own_codec: bool = False,
        fresh: bool = True,
        coded: bool = False,
    ) -> None:
        """Tell ``witness`` of every call through this handle, open on ``store`` (its path;
        ``fresh``: empty when the check first opened it)."""
        opened = witness.opened(store, own_codec=own_codec, fresh=fresh, coded=coded)
        self._watched = _Watched(witness, store, opened)

    @property
    def backend_object(self) -> Checkpointer:
        """The backend's own handle object."""
        return self._target

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._target.capabilities

    def _end(
        self,
        pending: Pending | None,
        outcome: Literal["returned", "raised", "abandoned"],
        value: object = None,
    ) -> None:
        if pending is not None and self._watched is not None:
            self._watched.witness.end(pending, outcome, value)

    def _call(self, operation: str, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        pending = self._watched.begin(operation, args, kwargs) if self._watched else None
        try:
            method: Callable[..., object] = getattr(self._target, operation)
            result = method(*args, **kwargs)
        except Exception as exc:
            self._end(pending, "raised", exc)
            blame_backend(exc, operation)
            raise
        except BaseException:
            self._end(pending, "abandoned")
            raise
        if inspect.isawaitable(result):
            return self._settle(operation, result, pending)
        if isinstance(result, AsyncIterator):
            witness = self._watched.witness if self._watched else None
            return _BackendIterator(result, operation, witness, pending)
        self._end(pending, "abandoned" if operation == "read" else "returned", result)
        check_answer(operation, result)
        return self._handle_or(result)

    async def _settle(
        self, operation: str, awaitable: Awaitable[object], pending: Pending | None
    ) -> object:
        try:
            result = await awaitable
        except Exception as exc:
            self._end(pending, "raised", exc)
            blame_backend(exc, operation)
            raise
        except BaseException:
            self._end(pending, "abandoned")
            raise
        self._end(pending, "returned", result)
        check_answer(operation, result)
        return self._handle_or(result)

    def _handle_or(self, result: object) -> object:
        if result is self._target:
            return self
        if not isinstance(result, BackendHandle) and isinstance(result, Checkpointer):
            return BackendHandle.wrap(result)
        return result

    async def _await(self, operation: str, *args: object, **kwargs: object) -> object:
        result = self._call(operation, args, kwargs)
        return await result if inspect.isawaitable(result) else result

    # -- the protocol --------------------------------------------------------------------
    async def append(self, *args: object, **kwargs: object) -> int:
        return cast(int, await self._await("append", *args, **kwargs))

    def read(self, *args: object, **kwargs: object) -> AsyncIterator[StoredEvent]:
        result = self._call("read", args, kwargs)
        if isinstance(result, _BackendIterator):
            return cast(AsyncIterator[StoredEvent], result)
        # Not an iterator: iterating it raises, and that is the backend's doing.
        return _BackendIterator(cast(AsyncIterable[StoredEvent], result), "read")

    async def head(self, *args: object, **kwargs: object) -> int:
        return cast(int, await self._await("head", *args, **kwargs))

    async def read_logs(self, session_ids: Sequence[str]) -> list[list[StoredEvent] | Exception]:
        """Every event of each of ``session_ids``, or the exception its read raised: the
        reads made in turn, nothing else in between, each told to the witness as a
        ``read`` of its own. The backend's object makes them with a ``read_logs`` of its
        own where it has one (a stdio child that declared ``pipelined`` gets them in one
        write); otherwise they are read one after another through this handle. A read
        answered by the very exception of the read before it was not made (that read
        broke the conversation): the witness is told of none such."""
        own: _ReadLogs | None = getattr(self._target, "read_logs", None)
        if own is None:
            return [await _read_or_error(self, session_id) for session_id in session_ids]
        answers = await own(session_ids)
        outcomes: list[list[StoredEvent] | Exception] = []
        for session_id, answer in zip(session_ids, answers, strict=True):
            if isinstance(answer, Exception) and outcomes and answer is outcomes[-1]:
                outcomes.append(answer)  # not made: the read before it broke the conversation
                continue
            pending = self._watched.begin("read", (session_id,), {}) if self._watched else None
            if isinstance(answer, Exception):
                self._end(pending, "raised", answer)
                blame_backend(answer, "read")
                outcomes.append(answer)
                continue
            try:
                for item in answer:
                    check_read_item(item)
            except RuleViolation as wrong:
                self._end(pending, "abandoned")
                outcomes.append(wrong)
                continue
            self._end(pending, "returned", answer)
            outcomes.append(answer)
        return outcomes

    async def list_sessions(self) -> list[SessionInfo]:
        return cast(list[SessionInfo], await self._await("list_sessions"))

    async def delete(self, *args: object, **kwargs: object) -> None:
        await self._await("delete", *args, **kwargs)

    async def truncate(self, *args: object, **kwargs: object) -> int:
        return cast(int, await self._await("truncate", *args, **kwargs))

    async def check_integrity(self) -> IntegrityReport:
        return cast(IntegrityReport, await self._await("check_integrity"))

    async def close(self) -> None:
        await self._await("close")

    # -- everything else the backend's object has ---------------------------------------
    def __getattr__(self, name: str) -> object:
        # Only attributes the wrapper's class does not forward get here: instance
        # attributes of the backend's object.
        if name.startswith("__") or name == "_target":
            raise AttributeError(name)
        value: object = getattr(self._target, name)
        if callable(value) and not isinstance(value, type):

            def forward(*args: object, **kwargs: object) -> object:
                return self._call(name, args, kwargs)

            return forward
        return value

    def __repr__(self) -> str:
        return repr(self._target)


_ReadLogs = Callable[[Sequence[str]], Awaitable[list[list[StoredEvent] | Exception]]]
"""A backend object's own ``read_logs`` (`BackendHandle.read_logs`)."""


async def _read_or_error(handle: BackendHandle, session_id: str) -> list[StoredEvent] | Exception:
    """Everything ``handle.read(session_id)`` yields, or the exception it raised."""
    try:
        return [stored async for stored in handle.read(session_id)]
    except Exception as exc:
        return exc


def _forwarding_method(name: str) -> Callable[..., object]:
    def method(self: BackendHandle, *args: object, **kwargs: object) -> object:
        return self._call(name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def _forwarding_property(name: str) -> property:
    def get(self: BackendHandle) -> object:
        return getattr(self._target, name)

    return property(get)


@functools.cache
def _handle_class(backend_class: type) -> type[BackendHandle]:
    """A `BackendHandle` subclass that forwards the public members ``backend_class`` adds."""
    namespace: dict[str, object] = {}
    for name in dir(backend_class):
        if name.startswith("_") or hasattr(BackendHandle, name):
            continue
        member = getattr(backend_class, name, None)
        if callable(member) and not isinstance(member, type):
            namespace[name] = _forwarding_method(name)
        else:
            namespace[name] = _forwarding_property(name)
    if not namespace:
        return BackendHandle
    return type(f"BackendHandle[{backend_class.__qualname__}]", (BackendHandle,), namespace)


async def open_checkpointer(
    factory: BackendFactory,
    ctx: BackendContext,
    witness: Witness | None = None,
    *,
    own_codec: bool = False,
    fresh: bool = True,
) -> Checkpointer:
    """Open a handle through the factory (`open_backend`) and return it as a
    `BackendHandle`, which notes every exception the backend raises; so does this
    function for the factory's own. With a ``witness``, every call through the handle
    is judged against the model of the store at ``ctx.path`` (``own_codec``: the
    handle has a codec of the check's own, which the model does not know; ``fresh``:
    the store was empty before this handle opened it).

    Raises `NotACheckpointerError` (noted as the factory's) when the factory's
    result lacks a member of the `Checkpointer` protocol, naming them.
    """
    try:
        opened = await open_backend(factory, ctx)
    except Exception as exc:
        blame_backend(exc, "factory")
        raise
    handle = BackendHandle.wrap(opened)
    if witness is not None and isinstance(handle, BackendHandle):
        handle.watch(
            witness, str(ctx.path), own_codec=own_codec, fresh=fresh, coded=ctx.codec is not None
        )
    return handle
