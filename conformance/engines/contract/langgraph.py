"""LangGraph checkpoint savers as a `Contract` value, and how the kit opens one.

A saver comes from the author's factory (``--langgraph MODULE:FACTORY``): it is
called with the `BackendContext` of a fresh store (its directory in ``path``, the
run's ``-o`` options in ``options``) and returns a saver, an awaitable of one, or a
context manager (sync or async) yielding one, as LangGraph's own
``from_conn_string`` constructors do. `open_saver` makes that a `SaverHandle`,
which also says which twins the saver offers (``async``: ``aput``, ``alist``, ...;
``sync``: ``put``, ``list``, ...) and which extended operations it implements.

An operation counts as implemented as LangGraph's own conformance suite counts
it: its method is overridden from ``BaseCheckpointSaver`` (a saver that does not
derive from it is taken at its word: a method it has is implemented). A twin
whose ``get_tuple`` raises NotImplementedError (a sync-only saver's async
methods) is not offered at all.

The calls and answers are plain data (`checkpointspec.spec.langgraph.calls`);
this module turns them into the saver's calls and its ``CheckpointTuple`` into a
`TupleView`. Nothing here imports LangGraph.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, cast

from hypothesis import strategies as st

from ....spec import BackendContext
from ....spec.langgraph import (
    LANGGRAPH_RULES,
    OPERATIONS,
    READS,
    SaverState,
    TupleView,
    apply,
    difference,
    group_order,
    prepare,
    rule_for,
)
from ....spec.langgraph.model import tagged
from .contract import Answer, Call, Contract, JSONArgs, Operation, Returned, plain

__all__ = [
    "CHANNELS",
    "LANGGRAPH_CONTRACT",
    "NAMESPACES",
    "THREADS",
    "VALUES",
    "SaverHandle",
    "Twin",
    "adapt_saver",
    "call_saver",
    "langgraph_contract",
    "offered_operations",
    "offers_of",
    "open_saver",
    "readback",
    "view_of_tuple",
]

Twin = Literal["async", "sync"]

THREADS: Final[tuple[str, ...]] = ("thread-1", "thread-2", "thread-3")
NAMESPACES: Final[tuple[str, ...]] = ("", "child:1")
CHANNELS: Final[tuple[str, ...]] = ("messages", "count", "payload", "scratch")
TASKS: Final[tuple[str, ...]] = ("task-a", "task-b")
RUN_IDS: Final[tuple[str, ...]] = ("run-1", "run-2", "run-3")
SOURCES: Final[tuple[str, ...]] = ("input", "loop", "update", "fork")

_ASYNC_NAMES: Final[Mapping[str, str]] = {op: f"a{op}" for op in OPERATIONS}


def _base_method(cls: type, name: str) -> object | None:
    """``BaseCheckpointSaver``'s own ``name``, found in ``cls``'s ancestry by name, so
    that LangGraph need not be importable here."""
    for ancestor in cls.__mro__:
        if ancestor.__name__ == "BaseCheckpointSaver":
            return ancestor.__dict__.get(name)
    return None


def _implemented(saver: object, name: str) -> bool:
    impl = getattr(type(saver), name, None)
    return impl is not None and impl is not _base_method(type(saver), name)


def offered_operations(saver: object, twin: Twin) -> frozenset[str]:
    """The operations ``saver`` implements through ``twin`` (overridden from
    ``BaseCheckpointSaver``, as LangGraph's conformance suite detects them)."""
    return frozenset(
        op for op in OPERATIONS if _implemented(saver, _ASYNC_NAMES[op] if twin == "async" else op)
    )


@dataclass
class SaverHandle:
    """An open saver, with what it offers and how to close it."""

    saver: object
    twins: tuple[Twin, ...]
    """The twins offered (each with a working ``get_tuple``), async first."""
    operations: dict[Twin, frozenset[str]]
    """Per twin, the operations it implements."""
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def offers(self, operation: str) -> bool:
        """Whether any offered twin implements ``operation``."""
        return any(operation in self.operations[t] for t in self.twins)

    def twins_of(self, operation: str) -> tuple[Twin, ...]:
        """The offered twins implementing ``operation``."""
        return tuple(t for t in self.twins if operation in self.operations[t])

    async def close(self) -> None:
        """Leave the factory's context (a connection closed), if it gave one."""
        await self.stack.aclose()


async def open_saver(
    factory: Callable[[BackendContext], object],
    ctx: BackendContext,
    twins: Sequence[Twin] | None = None,
) -> SaverHandle:
    """The saver ``factory`` makes for ``ctx``, entered if it is a context manager, with
    the twins it offers found by asking each for a checkpoint no thread holds (or
    ``twins``, known already: a saver whose store is not set up cannot be asked)."""
    return await adapt_saver(factory(ctx), twins)


async def adapt_saver(made: object, known: Sequence[Twin] | None = None) -> SaverHandle:
    """What a factory returned, made a `SaverHandle`: awaited if it is awaitable,
    entered if it is a context manager (left on `SaverHandle.close`); its twins are
    ``known`` or found by asking each."""
    stack = contextlib.AsyncExitStack()
    if inspect.isawaitable(made):
        made = await made
    if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
        made = await stack.enter_async_context(
            cast("contextlib.AbstractAsyncContextManager[object]", made)
        )
    elif hasattr(made, "__enter__") and hasattr(made, "__exit__") and not hasattr(made, "aput"):
        made = stack.enter_context(cast("contextlib.AbstractContextManager[object]", made))
    operations: dict[Twin, frozenset[str]] = {
        "async": offered_operations(made, "async"),
        "sync": offered_operations(made, "sync"),
    }
    if known is not None:
        return SaverHandle(made, tuple(known), operations, stack)
    twins: list[Twin] = []
    probe = {"configurable": {"thread_id": "probe-thread", "checkpoint_ns": ""}}
    for twin in ("async", "sync"):
        if "get_tuple" not in operations[twin]:
            continue
        try:
            if twin == "async":
                await made.aget_tuple(probe)  # type: ignore[attr-defined]
            else:
                await asyncio.to_thread(made.get_tuple, probe)  # type: ignore[attr-defined]
        except NotImplementedError:
            continue
        twins.append(twin)
    return SaverHandle(made, tuple(twins), operations, stack)


# -- the calls ------------------------------------------------------------------------------


def _config(thread: object, ns: object, checkpoint_id: object = None) -> dict[str, object]:
    configurable: dict[str, object] = {"thread_id": thread}
    if ns is not None:
        configurable["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _configurable(config: object) -> Mapping[str, object]:
    if isinstance(config, Mapping):
        inner = config.get("configurable")
        if isinstance(inner, Mapping):
            return inner
    return {}


def view_of_tuple(found: object) -> TupleView:
    """A saver's ``CheckpointTuple`` as plain data (`checkpointspec.spec.langgraph.TupleView`)."""
    config = _configurable(getattr(found, "config", None))
    checkpoint = cast("Mapping[str, object]", getattr(found, "checkpoint", None) or {})
    parent = _configurable(getattr(found, "parent_config", None))
    writes = getattr(found, "pending_writes", None)
    return {
        "thread_id": config.get("thread_id"),
        "checkpoint_ns": config.get("checkpoint_ns"),
        "checkpoint_id": config.get("checkpoint_id"),
        "id": checkpoint.get("id"),
        "v": checkpoint.get("v"),
        "ts": checkpoint.get("ts"),
        "channel_values": tagged(checkpoint.get("channel_values")),
        "channel_versions": checkpoint.get("channel_versions"),
        "versions_seen": checkpoint.get("versions_seen"),
        "metadata": tagged(getattr(found, "metadata", None)),
        "parent": (
            [parent.get("thread_id"), parent.get("checkpoint_ns"), parent.get("checkpoint_id")]
            if parent.get("checkpoint_id")
            else None
        ),
        "pending_writes": (
            [[w[0], w[1], tagged(w[2])] for w in writes] if writes is not None else None
        ),
    }


async def _invoke(
    handle: SaverHandle, operation: str, twin: object, *args: object, **kwargs: object
) -> object:
    saver = handle.saver
    if twin == "async" and operation in handle.operations["async"]:
        method = getattr(saver, _ASYNC_NAMES[operation])
        if operation == "list":
            return [item async for item in method(*args, **kwargs)]
        return await method(*args, **kwargs)
    method = getattr(saver, operation)
    if operation == "list":
        return await asyncio.to_thread(lambda: list(method(*args, **kwargs)))
    return await asyncio.to_thread(method, *args, **kwargs)


async def call_saver(handle: SaverHandle, operation: str, arguments: JSONArgs) -> object:
    """Make the call ``arguments`` (layout of `checkpointspec.spec.langgraph.calls`)
    on the saver; its answer as plain data."""
    *args, twin = arguments
    if operation == "put":
        thread, ns, parent, checkpoint, metadata, new_versions = args
        returned = await _invoke(
            handle,
            "put",
            twin,
            _config(thread, ns, parent),
            copy.deepcopy(checkpoint),
            copy.deepcopy(metadata),
            dict(cast("Mapping[str, str]", new_versions)),
        )
        named = _configurable(returned)
        return {k: named.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
    if operation == "put_writes":
        thread, ns, cid, writes, task_id, path = args
        pairs = [(str(c), copy.deepcopy(v)) for c, v in cast("Sequence[Sequence[object]]", writes)]
        await _invoke(handle, "put_writes", twin, _config(thread, ns, cid), pairs, task_id, path)
        return None
    if operation == "get_tuple":
        thread, ns, cid = args
        found = await _invoke(handle, "get_tuple", twin, _config(thread, ns, cid))
        return None if found is None else view_of_tuple(found)
    if operation == "list":
        thread, ns, cid, filter_, before, limit = args
        config = _config(thread, ns, cid) if thread is not None else None
        before_config = _config(thread, ns, before) if before is not None else None
        if before_config is not None and thread is None:
            before_config = {"configurable": {"checkpoint_id": before}}
        found = await _invoke(
            handle, "list", twin, config, filter=filter_, before=before_config, limit=limit
        )
        return group_order([view_of_tuple(t) for t in cast("list[object]", found)])
    if operation == "delete_thread":
        await _invoke(handle, "delete_thread", twin, args[0])
    elif operation == "delete_for_runs":
        await _invoke(handle, "delete_for_runs", twin, list(cast("Sequence[str]", args[0])))
    elif operation == "copy_thread":
        await _invoke(handle, "copy_thread", twin, args[0], args[1])
    elif operation == "prune":
        await _invoke(handle, "prune", twin, list(cast("Sequence[str]", args[0])), strategy=args[1])
    else:
        raise ValueError(f"no operation {operation!r} in the LangGraph saver contract")
    return None


# -- what the model-based machine draws -------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
    st.binary(max_size=12),
)
VALUES: Final = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(CHANNELS), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Channel and write values: what LangGraph's serializer round-trips (JSON's kinds and bytes)."""

METADATA: Final = st.fixed_dictionaries(
    {
        "source": st.sampled_from(SOURCES),
        "step": st.integers(-1, 4),
        "run_id": st.sampled_from((RUN_IDS[0], RUN_IDS[0], RUN_IDS[1])),
    },
    optional={"note": _TEXT, "parents": st.dictionaries(st.sampled_from(TASKS), _TEXT, max_size=2)},
)
"""Metadata as a graph writes it. Never ``writes``, a key LangGraph's metadata no longer
has: the SQLite and in-memory savers keep it, the PostgreSQL ones drop it on purpose
(``get_serializable_checkpoint_metadata``), and the docs do not say which is right."""
FILTERS: Final = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "source": st.sampled_from(SOURCES),
            "step": st.integers(-1, 4),
            "run_id": st.sampled_from(RUN_IDS),
        },
    ),
)
_WHICH = st.sampled_from((-1, -1, 0, 1, 2))
"""Which checkpoint of a namespace a call names: an index into its ids, oldest first,
mostly the latest (-1), as a graph writes to and reads its current checkpoint."""


def _writes() -> st.SearchStrategy[list[list[object]]]:
    regular = st.lists(
        st.tuples(st.sampled_from(CHANNELS), VALUES).map(list), min_size=1, max_size=3
    )
    special = st.lists(
        st.tuples(
            st.sampled_from(("__error__", "__interrupt__", "__scheduled__", "__resume__")), VALUES
        ).map(list),
        min_size=1,
        max_size=2,
    )
    # A call mixes no special channel with regular ones: LangGraph's own savers differ there.
    return st.one_of(regular, special)


def _intents(operation: str) -> st.SearchStrategy[tuple[object, ...]]:
    # Most calls go to one thread's root namespace, so that checkpoints pile up there
    # between the calls that remove them; the removing calls mostly aim elsewhere.
    threads = st.sampled_from((THREADS[0], THREADS[0], THREADS[0], THREADS[0], THREADS[1]))
    namespaces = st.sampled_from((NAMESPACES[0], NAMESPACES[0], NAMESPACES[0], NAMESPACES[1]))
    removed_threads = st.sampled_from((THREADS[1], THREADS[2], THREADS[2], THREADS[0]))
    if operation == "put":
        return st.tuples(
            threads,
            namespaces,
            st.sampled_from(("latest", "latest", "none")),
            st.dictionaries(st.sampled_from(CHANNELS), VALUES, max_size=3),
            st.lists(st.sampled_from(CHANNELS), max_size=1, unique=True),
            st.lists(st.sampled_from(CHANNELS), max_size=1, unique=True),
            METADATA,
        )
    if operation == "put_writes":
        return st.tuples(threads, namespaces, _WHICH, _writes(), st.sampled_from(TASKS))
    if operation == "get_tuple":
        return st.tuples(threads, namespaces, st.one_of(st.none(), _WHICH, st.just("unknown")))
    if operation == "list":
        return st.tuples(
            st.one_of(threads, st.none()),
            st.one_of(namespaces, st.none()),
            st.one_of(st.none(), st.none(), _WHICH),
            FILTERS,
            st.one_of(st.none(), _WHICH),
            st.one_of(st.none(), st.integers(0, 3)),
        )
    if operation == "delete_thread":
        return st.tuples(removed_threads)
    if operation == "delete_for_runs":
        removed_runs = st.sampled_from((RUN_IDS[2], RUN_IDS[1], RUN_IDS[0]))
        return st.tuples(st.lists(removed_runs, max_size=2, unique=True))
    if operation == "copy_thread":
        return st.tuples(threads, st.sampled_from((THREADS[2], THREADS[1])))
    if operation == "prune":
        return st.tuples(
            st.lists(removed_threads, max_size=2, unique=True),
            st.sampled_from(("keep_latest", "delete")),
        )
    raise ValueError(f"no operation {operation!r} in the LangGraph saver contract")


_WEIGHTS: Final[Mapping[str, int]] = {"put": 4, "put_writes": 3, "get_tuple": 2, "list": 2}
"""How often the machine picks each operation against one removal: a graph puts and
writes far more often than it deletes, and a removal empties what the reads judge."""


def _operation(name: str, twins: Sequence[Twin]) -> Operation[SaverHandle]:
    async def call(handle: SaverHandle, arguments: JSONArgs) -> object:
        return await call_saver(handle, name, arguments)

    drawn = st.tuples(_intents(name), st.sampled_from(tuple(twins))).map(lambda p: (*p[0], p[1]))
    return Operation(name, drawn, call, writes=name not in READS, weight=_WEIGHTS.get(name, 1))


def _step(state: SaverState, call: Call) -> tuple[SaverState, Answer]:
    after, value = apply(state, call.operation, call.arguments)
    return after, Returned(plain(value))


def _prepare(state: SaverState, call: Call) -> Call | None:
    made = prepare(state, call.operation, call.arguments)
    return None if made is None else Call(call.operation, made)


def _judge(state: SaverState, call: Call, expected: Answer, actual: Answer | None) -> str:
    return rule_for(
        state,
        call.operation,
        call.arguments[:-1],
        expected.value if isinstance(expected, Returned) else None,
        actual.value if isinstance(actual, Returned) else None,
        answered=isinstance(actual, Returned),
    )


def _describe(
    state: SaverState, call: Call, expected: Answer, actual: Answer | None, raised: str
) -> tuple[str, str]:
    return difference(
        call.operation,
        expected.value if isinstance(expected, Returned) else None,
        actual.value if isinstance(actual, Returned) else None,
        raised=raised,
    )


async def _close(handle: SaverHandle) -> None:
    await handle.close()


def langgraph_contract(
    handle_offers: Mapping[str, Sequence[Twin]],
) -> Contract[SaverHandle, SaverState]:
    """The contract of a saver offering each operation through the twins named in
    ``handle_offers`` (an operation not named, or named with no twin, is left out:
    an extended operation the saver does not implement)."""
    operations = tuple(
        _operation(name, handle_offers[name]) for name in OPERATIONS if handle_offers.get(name)
    )
    return Contract(
        name="langgraph_saver",
        rules=LANGGRAPH_RULES,
        initial=SaverState,
        step=_step,
        operations=operations,
        judge=_judge,
        error_name=lambda exc: None,
        close=_close,
        describe=_describe,
        prepare=_prepare,
        readback=readback,
        adapt=adapt_saver,
    )


def readback(calls: Sequence[Call]) -> tuple[Call, ...]:
    """The reads that see everything ``calls`` may have changed: each thread's listing
    across namespaces and each namespace's latest, through the twin the calls used."""
    twin = calls[0].arguments[-1] if calls else "async"
    touched = sorted(
        {
            (str(c.arguments[0]), str(c.arguments[1]))
            for c in calls
            if c.operation in ("put", "put_writes")
        }
    )
    threads = sorted({thread for thread, _ in touched})
    return (
        *(Call("list", (thread, None, None, None, None, None, twin)) for thread in threads),
        *(Call("get_tuple", (thread, ns, None, twin)) for thread, ns in touched),
    )


LANGGRAPH_CONTRACT: Final = langgraph_contract({op: ("async", "sync") for op in OPERATIONS})
"""The contract with every operation through either twin: what a worker process loads
(``checkpointspec.conformance.engines.contract.langgraph:LANGGRAPH_CONTRACT``) to make
a program's calls, each through the twin it names, and what the crash checks judge."""


def offers_of(handle: SaverHandle) -> dict[str, tuple[Twin, ...]]:
    """Per operation, the twins ``handle`` offers it through."""
    return {op: handle.twins_of(op) for op in OPERATIONS}
