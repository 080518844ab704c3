"""OpenAI Agents sessions as a `Contract` value, and how the kit opens them.

A session comes from the author's factory (``--openai-session MODULE:FACTORY``):
``factory(session_id, ctx)`` is called with a session id and the `BackendContext`
of the store (its directory in ``path``, the run's ``-o`` options, a server's URL
among them, in ``options``) and returns a ``Session``, an awaitable of one, or a
context manager (sync or async) yielding one. `SessionStore` is one store as the
operations see it: it opens a Session object the first time a call names its
session id and handle, and closes them all (``close()``, sync or async, when the
session has one; the factory's context left) on `SessionStore.close`.

The calls and answers are plain data (`checkpointspec.spec.openai_session.model`);
an item in an answer is its canonical JSON text, so that an item that comes back
with an integer made a float, or reordered keys, compares as what it is. Nothing
here imports the SDK.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from hypothesis import strategies as st

from ....spec import BackendContext
from ....spec.openai_session import (
    CLEARED_BY_A_CONFUSABLE_ID,
    CLEARED_BY_ANOTHER_ID,
    OPENAI_SESSION_RULES,
    WRITES,
    Judgement,
    SessionsState,
    encoded,
    judge,
    step,
)
from .contract import (
    Answer,
    Call,
    Contract,
    JSONArgs,
    Operation,
    Raised,
    RecordedCall,
    Returned,
    plain,
)
from .values import json_values, short_texts, texts

__all__ = [
    "FRESH_HANDLES",
    "HANDLES",
    "METHODS",
    "OPENAI_SESSION_CONTRACT",
    "SESSION_IDS",
    "SessionStore",
    "confirm",
    "items",
    "json_values",
    "open_sessions",
    "partial_add",
    "readback",
]

METHODS: Final[tuple[str, ...]] = ("get_items", "add_items", "pop_item", "clear_session")
"""The ``Session`` protocol's methods, every one a coroutine function."""

SESSION_IDS: Final[tuple[str, ...]] = (
    "conv-1",
    "Conv-1",
    "conv_1",
    "conv:1",
    "conv/1",
    "conv-1 ",
    "caf\u00e9",
    "cafe\u0301",
)
"""The ids the machine draws: each differs from another only in case, a separator, a
trailing space or Unicode normalisation (OASISO-001), as a store's key escaping,
case folding or trimming would merge them."""

HANDLES: Final[tuple[int, ...]] = (0, 1)
FRESH_HANDLES: Final = 1000
"""The first handle of the Session objects the kit opens for a second look (`confirm`)."""
"""The Session objects the machine opens per id: a store must answer the same through each."""


def items() -> st.SearchStrategy[dict[str, object]]:
    """One conversation item: a message, a function call and its output as the SDK
    writes them, or any JSON object."""
    return st.one_of(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(("user", "assistant", "system", "developer")),
                "content": texts,
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("function_call"),
                "call_id": short_texts,
                "name": short_texts,
                "arguments": texts,
            }
        ),
        st.fixed_dictionaries(
            {"type": st.just("function_call_output"), "call_id": short_texts, "output": texts}
        ),
        st.dictionaries(short_texts, json_values(), max_size=4),
    )


@dataclass
class SessionStore:
    """One store of sessions: ``factory(session_id, ctx)`` per session id and handle,
    opened when a call first names them, closed together."""

    factory: Callable[..., object]
    ctx: BackendContext
    opened: dict[tuple[str, int], object] = field(default_factory=dict)
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def session(self, session_id: str, handle: int = 0) -> object:
        """The Session object ``handle`` of ``session_id`` (opened on first use)."""
        key = (session_id, handle)
        if key not in self.opened:
            made = self.factory(session_id, self.ctx)
            if inspect.isawaitable(made):
                made = await made
            if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
                made = await self.stack.enter_async_context(
                    cast("contextlib.AbstractAsyncContextManager[object]", made)
                )
            elif hasattr(made, "__enter__") and hasattr(made, "__exit__"):
                made = self.stack.enter_context(
                    cast("contextlib.AbstractContextManager[object]", made)
                )
            else:
                self.stack.push_async_callback(_close, made)
            self.opened[key] = made
        return self.opened[key]

    def fresh_handle(self) -> int:
        """A handle no call has named: a Session object opened for a second look."""
        return FRESH_HANDLES + len(self.opened)

    async def close(self) -> None:
        """Close every Session object opened, newest first (`_close`), and leave the
        factory's contexts."""
        self.opened.clear()
        await self.stack.aclose()


async def _close(session: object) -> None:
    """A session's ``close()``, awaited when it is a coroutine function; nothing when it has none."""
    close = getattr(session, "close", None)
    if not callable(close):
        return
    if inspect.iscoroutinefunction(close):
        await close()
    else:
        done = close()
        if inspect.isawaitable(done):
            await done


async def open_sessions(factory: Callable[..., object], ctx: BackendContext) -> SessionStore:
    """The store at ``ctx`` as the operations see it (`Contract.opens`), with the first
    drawn id's first Session object open: what a store writes when it is first opened
    (its schema, a marker naming its tables on a server) is written now, as a
    checkpointer's store is when its handle opens, not by whichever call comes first
    (which a crash check would then charge to that call)."""
    store = SessionStore(factory, ctx)
    await store.session(SESSION_IDS[0], 0)
    return store


# -- the calls ------------------------------------------------------------------------------


async def call_session(store: SessionStore, operation: str, arguments: JSONArgs) -> object:
    """Make the call ``arguments`` (layout of `checkpointspec.spec.openai_session.model`)
    on the session it names; its answer with every item as its canonical JSON text."""
    session_id, handle = str(arguments[0]), cast("int", arguments[1])
    session = await store.session(session_id, handle)
    if operation == "add_items":
        await session.add_items(copy.deepcopy(list(cast("Sequence[object]", arguments[2]))))  # type: ignore[attr-defined]
        return None
    if operation == "get_items":
        limit = arguments[2]
        got = await (session.get_items(limit) if limit is not None else session.get_items())  # type: ignore[attr-defined]
        return [encoded(item) for item in got]
    if operation == "pop_item":
        popped = await session.pop_item()  # type: ignore[attr-defined]
        return None if popped is None else encoded(popped)
    if operation == "clear_session":
        await session.clear_session()  # type: ignore[attr-defined]
        return None
    raise ValueError(f"the session contract has no operation {operation!r}")


def _step(state: SessionsState, call: Call) -> tuple[SessionsState, Answer]:
    after, answer = step(state, call.operation, call.arguments)
    return after, Returned(plain(answer))


def _judge(state: SessionsState, call: Call, expected: Answer, actual: Answer | None) -> str:
    return _judgement(state, call, expected, actual, "a value no item is").rule


def _judgement(
    state: SessionsState, call: Call, expected: Answer, actual: Answer | None, raised: str
) -> Judgement:
    want = expected.value if isinstance(expected, Returned) else None
    if actual is None or isinstance(actual, Raised):
        text = raised or (actual.error if isinstance(actual, Raised) else "an exception")
        return judge(state, call.operation, call.arguments, want, None, raised=text)
    return judge(state, call.operation, call.arguments, want, actual.value)


def _describe(
    state: SessionsState, call: Call, expected: Answer, actual: Answer | None, raised: str
) -> tuple[str, str]:
    found = _judgement(state, call, expected, actual, raised)
    return found.shape, found.sentence


def partial_add(history: Sequence[RecordedCall]) -> tuple[str, str, str] | None:
    """An add_items of several items that the history's last whole read of its session
    shows in part or torn apart (OASADD-002), or None.

    An item counts as kept when that read has it or a pop returned it; a pop that never
    answered may have removed one more. The items of one add_items that were kept must
    be there in the order given and next to each other: an add is one step. Only a
    history whose items are all different is judged (the kit's programs are)."""
    reads: dict[str, list[str]] = {}
    for recorded in history:
        call, answer = recorded.call, recorded.answer
        if (
            call.operation == "get_items"
            and call.arguments[2] is None
            and isinstance(answer, Returned)
        ):
            reads[str(call.arguments[0])] = list(cast("list[str]", answer.value))
    for recorded in history:
        call = recorded.call
        if call.operation != "add_items" or len(cast("list[object]", call.arguments[2])) < 2:
            continue
        session_id = str(call.arguments[0])
        if session_id not in reads:
            continue
        wanted = [encoded(item) for item in cast("list[object]", call.arguments[2])]
        read = reads[session_id]
        popped = {
            r.answer.value
            for r in history
            if r.call.operation == "pop_item"
            and r.call.arguments[0] == session_id
            and isinstance(r.answer, Returned)
        }
        unanswered_pops = sum(
            1
            for r in history
            if r.call.operation == "pop_item"
            and r.call.arguments[0] == session_id
            and r.answer is None
        )
        kept = [item for item in wanted if item in read or item in popped]
        missing = len(wanted) - len(kept)
        shown = f"add_items{call.arguments[2]!r} on {session_id!r}"
        if kept and missing > unanswered_pops:
            return (
                "OASADD-002",
                "an add_items kept in part",
                f"{recorded}, and the session then read {len(kept)} of its {len(wanted)} items: "
                f"{shown} was kept in part",
            )
        in_read = [item for item in wanted if item in read]
        if in_read:
            start = read.index(in_read[0])
            if read[start : start + len(in_read)] != in_read:
                return (
                    "OASADD-002",
                    "the items of an add_items torn apart",
                    f"{recorded}, and the session then read {read!r}: the items of {shown} "
                    "are not next to each other in the order given",
                )
    return None


WIPES: Final = {CLEARED_BY_A_CONFUSABLE_ID: "OASISO-001", CLEARED_BY_ANOTHER_ID: "OASCLEAR-001"}
"""The two causes of items gone after a clear of another id, which one answer cannot
tell apart, by their rule: the ids merged, or a clear that takes every session."""


async def _whose_clear(store: SessionStore, found: Judgement) -> tuple[str, str, str] | None:
    """Tell `WIPES` apart by trying both on ids no call uses: a clear of an unlike id
    that empties another session is OASCLEAR-001's, a clear of an id differing only
    in case that does is OASISO-001's; None when neither does (the items went some
    other way, a Session object's stale copy among them)."""
    witness = [{"role": "user", "content": "witness"}]
    trials = (
        (CLEARED_BY_ANOTHER_ID, WITNESS_IDS[1]),
        (CLEARED_BY_A_CONFUSABLE_ID, WITNESS_IDS[0].upper()),
    )
    for shape, cleared in trials:
        await call_session(store, "add_items", (WITNESS_IDS[0], store.fresh_handle(), witness))
        await call_session(store, "clear_session", (cleared, store.fresh_handle()))
        left = await call_session(store, "get_items", (WITNESS_IDS[0], store.fresh_handle(), None))
        if not left:
            said = f"{found.sentence}; clear_session({cleared!r}) emptied {WITNESS_IDS[0]!r} too"
            return WIPES[shape], shape, said
        await call_session(store, "clear_session", (WITNESS_IDS[0], store.fresh_handle()))
    return None


WITNESS_IDS: Final = ("checkpointspec-witness-a1", "zz-unrelated-9")
"""Two ids unlike each other and every drawn one, for the second look at a clear."""


async def confirm(
    store: SessionStore,
    state: SessionsState,
    call: Call,
    expected: Answer,
    actual: Answer | None,
    raised: str,
) -> tuple[str, str, str] | None:
    """Before an answer is put down to a Session object's stale copy (OASSHARE-001), a
    fresh Session object of the id is asked: the same read, or after a pop what the
    session holds. Unless it answers as the model does, the store itself answers so,
    and the answer is judged as the store's."""
    found = _judgement(state, call, expected, actual, raised)
    want = expected.value if isinstance(expected, Returned) else None
    got = actual.value if isinstance(actual, Returned) else None
    store_s = judge(state, call.operation, call.arguments, want, got, raised=raised, views=False)
    if store_s.shape in WIPES:
        try:
            told = await _whose_clear(store, store_s)
        except Exception:  # a store that cannot take the second look is judged on the first
            told = None
        if told is not None or found.rule == "OASSHARE-001":
            return told
    if found.rule != "OASSHARE-001" or actual is None:
        return None
    session_id, _, *rest = call.arguments
    if call.operation == "pop_item":
        # The pop has changed the store already: what a fresh object reads is compared
        # with what the pop should have left, not asked to pop again.
        fresh = Call("get_items", (session_id, store.fresh_handle(), None))
        should_hold = list(step(state, call.operation, call.arguments)[0].items(str(session_id)))
        agree: Answer = Returned(plain(should_hold))
    else:
        fresh = Call(call.operation, (session_id, store.fresh_handle(), *rest))
        agree = expected
    try:
        again = Returned(plain(await call_session(store, fresh.operation, fresh.arguments)))
    except Exception:  # the store's failure to answer at all is no second opinion
        return None
    if again == agree:
        return None
    return (
        store_s.rule,
        store_s.shape,
        f"{store_s.sentence} (a fresh Session object of the id answered the same)",
    )


def readback(calls: Sequence[Call]) -> tuple[Call, ...]:
    """The reads that observe everything ``calls`` may have changed: every session they
    name, read whole through a fresh Session object."""
    touched = dict.fromkeys(str(c.arguments[0]) for c in calls)
    return tuple(Call("get_items", (sid, 0, None)) for sid in touched)


def _operation(
    name: str, arguments: st.SearchStrategy[JSONArgs], weight: int
) -> Operation[SessionStore]:
    async def call(store: SessionStore, args: JSONArgs) -> object:
        return await call_session(store, name, args)

    return Operation(name, arguments, call, writes=name in WRITES, weight=weight)


_ids = st.sampled_from(("conv-1",) * 4 + SESSION_IDS[1:])
_handles = st.sampled_from(HANDLES)


async def _close_store(store: SessionStore) -> None:
    await store.close()


def _key(call: Call) -> str:
    return str(call.arguments[0])


OPENAI_SESSION_CONTRACT: Final[Contract[SessionStore, SessionsState]] = Contract(
    name="openai-session",
    rules=OPENAI_SESSION_RULES,
    initial=SessionsState,
    step=_step,
    operations=(
        _operation(
            "add_items",
            st.tuples(_ids, _handles, st.lists(items(), max_size=3)).map(tuple),
            weight=3,
        ),
        _operation(
            "get_items",
            st.tuples(_ids, _handles, st.none() | st.integers(1, 4)).map(tuple),
            weight=2,
        ),
        _operation("pop_item", st.tuples(_ids, _handles).map(tuple), weight=2),
        _operation("clear_session", st.tuples(_ids, _handles).map(tuple), weight=1),
    ),
    judge=_judge,
    error_name=lambda exc: None,  # the protocol defines no error: every raise is a failure
    close=_close_store,
    key=_key,
    readback=readback,
    history_cause=partial_add,
    confirm=confirm,
    opens=open_sessions,
    describe=_describe,
)
"""The OpenAI Agents session contract: what the model-based machine, the history
checker and the crash engines judge a store by. Every call names its session, so a
history is judged one session at a time."""
