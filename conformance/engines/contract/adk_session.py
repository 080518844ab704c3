"""ADK session services as a `Contract` value, and how the kit opens them.

A service comes from the author's factory (``--adk-session-service MODULE:FACTORY``):
``factory(ctx)`` is called with the `BackendContext` of the store (its directory in
``path``, the run's ``-o`` options, a server's URL among them, in ``options``) and
returns a ``BaseSessionService``, an awaitable of one, or a context manager (sync or
async) yielding one. `ServiceHandle` is one service as the operations see it: the
session objects its callers hold, and the timestamps it stamped on events.

The calls and answers are plain data (`checkpointspec.spec.adk_session.model`). ADK
itself is imported when the first event or config is built, from the process that
runs the service: the kit keeps no dependency on it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

import msgspec
from hypothesis import strategies as st

from ....spec import BackendContext
from ....spec.adk_session import (
    ADK_SESSION_RULES,
    WRITES,
    AdkState,
    Judgement,
    Key,
    Refused,
    encoded,
    event_number,
    judge,
    split_delta,
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
from .values import json_values, texts

__all__ = [
    "ADK_SESSION_CONTRACT",
    "ADK_SESSION_CONTRACT_IN_MEMORY",
    "APPS",
    "CONTRACT_ERRORS",
    "METHODS",
    "SESSION_IDS",
    "STATE_KEYS",
    "TORN_READ",
    "USERS",
    "ServiceHandle",
    "call_service",
    "event_id",
    "open_service",
    "readback",
    "torn_read",
]

TORN_READ: Final = "get_session read state and events of different moments"
"""The shape of a `torn_read` finding."""

METHODS: Final[tuple[str, ...]] = (
    "create_session",
    "get_session",
    "list_sessions",
    "delete_session",
    "append_event",
)
"""The ``BaseSessionService`` methods the contract calls, every one a coroutine function."""

CONTRACT_ERRORS: Final[frozenset[str]] = frozenset(
    {"AlreadyExistsError", "SessionNotFoundError", "StaleSessionError"}
)
"""ADK's errors the contract names: a call raising one answers with it."""

APPS: Final[tuple[str, ...]] = ("app", "App")
USERS: Final[tuple[str, ...]] = ("u1", "U1", "u-1")
SESSION_IDS: Final[tuple[str, ...]] = ("s1", "S1", "s_1", "s:1", "caf\u00e9", "cafe\u0301")
"""The names the machine draws: each differs from another only in case, a separator or
Unicode normalisation (ADKISO-001). None has whitespace at either end: ADK's own
services strip session ids, by design."""

STATE_KEYS: Final[tuple[str, ...]] = ("k", "n", "app:k", "app:n", "user:k", "user:n", "temp:k")
"""The state keys deltas draw: a few of each scope, so that a later delta replaces an
earlier one's value."""

HANDLES: Final[tuple[int | None, ...]] = (None, None, 1, 2)
"""None: an object read just before the call; 1, 2: objects a caller holds."""

STAMP_STEP: Final = 1e-3
"""How much later than the one before each event's timestamp is at least: above the
microsecond a SQL timestamp keeps, so that no two events tie."""


@dataclass
class ServiceHandle:
    """One session service: the object the factory made, the session objects callers
    hold ((key, handle) → a ``Session``) and the timestamp stamped on each event."""

    service: object
    stack: contextlib.AsyncExitStack
    held: dict[tuple[Key, int], object] = field(default_factory=dict)
    stamps: dict[int, float] = field(default_factory=dict)
    last_stamp: float = 0.0

    def stamp(self, number: int) -> float:
        """The timestamp of event ``number``: now, or just after the last one stamped."""
        if number not in self.stamps:
            self.last_stamp = max(time.time(), self.last_stamp + STAMP_STEP)
            self.stamps[number] = self.last_stamp
        return self.stamps[number]

    def at_or_after(self, number: int) -> float:
        """An ``after_timestamp`` that keeps exactly the events numbered ``number`` or
        later: the stamp of the first event from it, or a time after every stamp."""
        later = [n for n in self.stamps if n >= number]
        return self.stamps[min(later)] if later else self.last_stamp + 1.0


async def adapt_service(made: object) -> ServiceHandle:
    """What a factory returned, made a `ServiceHandle`: awaited if it is awaitable,
    entered if it is a context manager (left on `close_service`), closed by its
    ``close()`` otherwise."""
    stack = contextlib.AsyncExitStack()
    if inspect.isawaitable(made):
        made = await made
    if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
        made = await stack.enter_async_context(
            cast("contextlib.AbstractAsyncContextManager[object]", made)
        )
    elif hasattr(made, "__enter__") and hasattr(made, "__exit__"):
        made = stack.enter_context(cast("contextlib.AbstractContextManager[object]", made))
    else:
        stack.push_async_callback(_close, made)
    return ServiceHandle(made, stack)


async def open_service(factory: Callable[..., object], ctx: BackendContext) -> ServiceHandle:
    """The service ``factory`` makes for ``ctx``, as `adapt_service` makes it."""
    return await adapt_service(factory(ctx))


async def _close(service: object) -> None:
    close = getattr(service, "close", None)
    if not callable(close):
        return
    done = close()
    if inspect.isawaitable(done):
        await done


async def close_service(handle: ServiceHandle) -> None:
    """Drop the held session objects and close the service."""
    handle.held.clear()
    await handle.stack.aclose()


# -- the calls ------------------------------------------------------------------------------


def _state_answer(state: Mapping[str, object]) -> dict[str, str]:
    return {str(k): encoded(v) for k, v in state.items()}


def _event_answer(event: object) -> str:
    """A stored event as the contract's answer holds it: what the kit gave it, read
    back from ADK's ``Event`` (its whole state delta, temp: keys included)."""
    content = getattr(event, "content", None)
    parts = getattr(content, "parts", None) or []
    text = "".join(getattr(p, "text", None) or "" for p in parts) if parts else None
    actions = getattr(event, "actions", None)
    delta = getattr(actions, "state_delta", None) or {}
    return encoded(
        {
            "id": getattr(event, "id", None),
            "author": getattr(event, "author", None),
            "invocation_id": getattr(event, "invocation_id", None),
            "text": text,
            "state_delta": dict(delta),
        }
    )


def _adk_event(handle: ServiceHandle, event: Mapping[str, object]) -> object:
    from google.adk.events import Event, EventActions  # the service's own classes
    from google.genai import types

    author = str(event["author"])
    return Event(
        id=str(event["id"]),
        author=author,
        invocation_id=str(event["invocation_id"]),
        timestamp=handle.stamp(event_number(str(event["id"]))),
        content=types.Content(
            role="user" if author == "user" else "model",
            parts=[types.Part(text=str(event["text"]))],
        ),
        actions=EventActions(
            state_delta=copy.deepcopy(dict(cast("Mapping[str, object]", event["state_delta"])))
        ),
    )


async def call_service(handle: ServiceHandle, operation: str, arguments: JSONArgs) -> object:
    """Make the call ``arguments`` (layout of `checkpointspec.spec.adk_session.model`) on
    the service; its answer as plain data."""
    service = handle.service
    if operation == "list_sessions":
        app, user = str(arguments[0]), arguments[1]
        listed = await service.list_sessions(app_name=app, user_id=user)  # type: ignore[attr-defined]
        return sorted([str(s.user_id), str(s.id)] for s in listed.sessions)
    key: Key = (str(arguments[0]), str(arguments[1]), str(arguments[2]))
    names = {"app_name": key[0], "user_id": key[1]}
    if operation == "create_session":
        made = await service.create_session(  # type: ignore[attr-defined]
            **names, session_id=key[2], state=copy.deepcopy(arguments[3])
        )
        return {"id": str(made.id), "state": _state_answer(made.state)}
    if operation == "get_session":
        from google.adk.sessions.base_session_service import GetSessionConfig

        handle_no, recent, after = arguments[3], arguments[4], arguments[5]
        config = None
        if recent is not None or after is not None:
            config = GetSessionConfig(
                num_recent_events=cast("int | None", recent),
                after_timestamp=None if after is None else handle.at_or_after(cast("int", after)),
            )
        got = await service.get_session(**names, session_id=key[2], config=config)  # type: ignore[attr-defined]
        if got is None:
            return None
        if handle_no is not None:
            handle.held[(key, cast("int", handle_no))] = got
        return {
            "events": [_event_answer(e) for e in got.events],
            "state": _state_answer(got.state),
        }
    if operation == "delete_session":
        await service.delete_session(**names, session_id=key[2])  # type: ignore[attr-defined]
        return None
    if operation == "append_event":
        handle_no, event = arguments[3], cast("Mapping[str, object]", arguments[4])
        session = handle.held.get((key, cast("int", handle_no))) if handle_no is not None else None
        if session is None:
            session = await service.get_session(**names, session_id=key[2])  # type: ignore[attr-defined]
            if session is not None and handle_no is not None:
                handle.held[(key, cast("int", handle_no))] = session  # read for this append
        if session is None:  # appended through an object of a session that is not stored
            from google.adk.sessions import Session

            session = Session(app_name=key[0], user_id=key[1], id=key[2], last_update_time=0.0)
        await service.append_event(session, _adk_event(handle, event))  # type: ignore[attr-defined]
        return None
    raise ValueError(f"the ADK session contract has no operation {operation!r}")


def _step(state: AdkState, call: Call) -> tuple[AdkState, Answer]:
    after, answer = step(state, call.operation, call.arguments)
    if isinstance(answer, Refused):
        return after, Raised(answer.error)
    return after, Returned(plain(answer))


def _judgement(
    state: AdkState, call: Call, expected: Answer, actual: Answer | None, raised: str
) -> Judgement:
    want = expected.value if isinstance(expected, Returned) else None
    want_error = expected.error if isinstance(expected, Raised) else ""
    if actual is None:
        return judge(
            state,
            call.operation,
            call.arguments,
            want,
            None,
            expected_error=want_error,
            raised=raised or "an exception the contract does not name",
        )
    got = actual.value if isinstance(actual, Returned) else None
    got_error = actual.error if isinstance(actual, Raised) else ""
    return judge(
        state,
        call.operation,
        call.arguments,
        want,
        got,
        expected_error=want_error,
        actual_error=got_error,
    )


def _judge(state: AdkState, call: Call, expected: Answer, actual: Answer | None) -> str:
    return _judgement(state, call, expected, actual, "").rule


def _describe(
    state: AdkState, call: Call, expected: Answer, actual: Answer | None, raised: str
) -> tuple[str, str]:
    found = _judgement(state, call, expected, actual, raised)
    return found.shape, found.sentence


WITNESS_USERS: Final = ("checkpointspec-witness-a1", "zz-unrelated-9")
"""Two users unlike each other and every drawn one, for the second look at a list."""


async def confirm(
    handle: ServiceHandle,
    state: AdkState,
    call: Call,
    expected: Answer,
    actual: Answer | None,
    raised: str,
) -> tuple[str, str, str] | None:
    """Before a list answer is put down to names folded together (ADKISO-001), the
    service is asked to list the sessions of a user unlike any with a session: one
    that lists a session of another such user ignores its user_id, which is
    ADKLIST-001's, not a folding of resembling names."""
    found = _judgement(state, call, expected, actual, raised)
    if call.operation != "list_sessions" or found.rule != "ADKISO-001" or call.arguments[1] is None:
        return None
    app = str(call.arguments[0])
    witness = (app, WITNESS_USERS[0], "witness")
    try:
        if state.session(witness) is None:
            await call_service(handle, "create_session", (*witness, {}))
        listed = await call_service(handle, "list_sessions", (app, WITNESS_USERS[1]))
        await call_service(handle, "delete_session", witness)
    except Exception:  # a service that cannot take the second look is judged on the first
        return None
    if not listed:
        return None
    return (
        "ADKLIST-001",
        "list_sessions listed sessions of another user",
        f"{found.sentence}; list_sessions({app!r}, {WITNESS_USERS[1]!r}) then listed {listed!r}, "
        f"a session of {WITNESS_USERS[0]!r}: the user_id asked for is not what is listed",
    )


def _error_name(exc: BaseException) -> str | None:
    name = type(exc).__name__
    return name if name in CONTRACT_ERRORS else None


def event_id(number: int) -> str:
    """The id of the event numbered ``number``: zero-padded, so that ids sort as numbers
    (a service breaking a timestamp tie by id then still keeps append order)."""
    return f"e{number:06d}"


def _prepare(state: AdkState, call: Call) -> Call:
    """A drawn append's event numbered by the model: its id is the revision the append
    would make, so that ids grow in the order events are made."""
    if call.operation != "append_event":
        return call
    *names, handle_no, draft = call.arguments
    event = dict(cast("Mapping[str, object]", draft)) | {"id": event_id(state.clock + 1)}
    return Call(call.operation, (*names, handle_no, event))


def readback(calls: Sequence[Call]) -> tuple[Call, ...]:
    """The reads that observe everything ``calls`` may have changed: every session they
    name read whole, and the list of each app."""
    keys = dict.fromkeys(
        (str(c.arguments[0]), str(c.arguments[1]), str(c.arguments[2]))
        for c in calls
        if c.operation != "list_sessions"
    )
    apps = dict.fromkeys(str(c.arguments[0]) for c in calls)
    return tuple(Call("get_session", (*key, None, None, None)) for key in keys) + tuple(
        Call("list_sessions", (app, None)) for app in apps
    )


def torn_read(history: Sequence[RecordedCall]) -> tuple[str, str] | None:
    """A get_session whose state and events are of different moments, which no order of
    the calls gives, as a shape and a sentence; None when there is none. Either way round:
    its session keys are what the session's created state and only some first of the
    events it returned make of them (state read before an append its events show), or
    its app: or user: state holds a value only an append it did not return set (state
    read after an append its events do not show; a service reading the session row, its
    events and the app and user state in separate statements can do both). Judged only
    for sessions created once and never deleted in the history. Asked after racing
    appends are ruled out: appends stored through stale objects read back in timestamp
    order, not the order they were stored in, which can look the same."""
    created: dict[tuple[str, str, str], dict[str, object]] = {}
    changed: set[tuple[str, str, str]] = set()
    stored: dict[tuple[str, str, str], list[Mapping[str, object]]] = {}
    setters: Counter[tuple[str, str]] = Counter()  # how many calls set a scoped key to a value
    for recorded in history:
        call = recorded.call
        if call.operation not in ("create_session", "delete_session", "append_event"):
            continue
        key = (str(call.arguments[0]), str(call.arguments[1]), str(call.arguments[2]))
        if call.operation == "append_event":
            made = cast("Mapping[str, object]", call.arguments[4])
            setters.update(_scoped(cast("Mapping[str, object]", made.get("state_delta") or {})))
            if isinstance(recorded.answer, Returned):
                stored.setdefault(key, []).append(made)
            continue
        if call.operation == "delete_session":
            changed.add(key)
            continue
        given = dict(cast("Mapping[str, object] | None", call.arguments[3]) or {})
        if key in created:
            changed.add(key)
        elif isinstance(recorded.answer, Returned):
            created[key] = given
        setters.update(_scoped(given))
    for recorded in history:
        call, answer = recorded.call, recorded.answer
        if call.operation != "get_session" or call.arguments[4:6] != (None, None):
            continue
        key = (str(call.arguments[0]), str(call.arguments[1]), str(call.arguments[2]))
        if key not in created or key in changed or not isinstance(answer, Returned):
            continue
        read = cast("Mapping[str, object] | None", answer.value)
        if read is None:
            continue
        folds = [split_delta(created[key])[2]]  # the session keys after each event read
        returned: set[object] = set()
        for text in cast("list[str]", read["events"]):
            decoded = cast("dict[str, dict[str, object]]", msgspec.json.decode(text))
            folds.append(folds[-1] | split_delta(decoded["state_delta"])[2])
            returned.add(decoded.get("id"))
        state = cast("Mapping[str, str]", read["state"])
        shown = {k: v for k, v in state.items() if not k.startswith(("app:", "user:", "temp:"))}
        if shown != folds[-1] and shown in folds[:-1]:
            return (
                TORN_READ,
                f"{recorded}: its state's session keys are {shown!r}, what the session held "
                f"before the last {len(folds) - 1 - folds.index(shown)} of the events this "
                f"same read returned, which make them {folds[-1]!r}",
            )
        for made in stored.get(key, []):
            if made.get("id") in returned:
                continue
            delta = cast("Mapping[str, object]", made.get("state_delta") or {})
            for scoped in _scoped(delta):
                if setters[scoped] == 1 and state.get(scoped[0]) == scoped[1]:
                    return (
                        TORN_READ,
                        f"{recorded}: its state has {scoped[0]}={scoped[1]!r}, which only the "
                        f"stored append of event {made.get('id')!r} set, and this same read "
                        "did not return that event",
                    )
    return None


def _scoped(delta: Mapping[str, object]) -> list[tuple[str, str]]:
    """The app: and user: keys of a state delta with their values as a read shows them."""
    return [(k, encoded(v)) for k, v in delta.items() if k.startswith(("app:", "user:"))]


def _key(call: Call) -> str:
    # list_sessions reads every session of an app: a history is judged an app at a time.
    return str(call.arguments[0])


def _operation(
    name: str, arguments: st.SearchStrategy[JSONArgs], weight: int
) -> Operation[ServiceHandle]:
    async def call(handle: ServiceHandle, args: JSONArgs) -> object:
        return await call_service(handle, name, args)

    return Operation(name, arguments, call, writes=name in WRITES, weight=weight)


def deltas() -> st.SearchStrategy[dict[str, object]]:
    """A state delta: a few keys of every scope (`STATE_KEYS`), any JSON values."""
    return st.dictionaries(st.sampled_from(STATE_KEYS), json_values(), max_size=3)


_apps = st.sampled_from(("app",) * 3 + APPS[1:])
_users = st.sampled_from(("u1",) * 3 + USERS[1:])
_ids = st.sampled_from(("s1",) * 3 + SESSION_IDS[1:])
_handles = st.sampled_from(HANDLES)
_drafts = st.fixed_dictionaries(
    {
        "author": st.sampled_from(("user", "agent")),
        "invocation_id": st.sampled_from(("inv-1", "inv-2")),
        "text": texts,
        "state_delta": deltas(),
    }
)

ADK_SESSION_CONTRACT: Final[Contract[ServiceHandle, AdkState]] = Contract(
    name="adk-session",
    rules=ADK_SESSION_RULES,
    initial=AdkState,
    step=_step,
    operations=(
        _operation("create_session", st.tuples(_apps, _users, _ids, deltas()).map(tuple), weight=2),
        _operation(
            "get_session",
            st.tuples(
                _apps,
                _users,
                _ids,
                _handles,
                st.none() | st.none() | st.integers(0, 3),
                st.none() | st.none() | st.integers(0, 12),
            ).map(tuple),
            weight=2,
        ),
        _operation("list_sessions", st.tuples(_apps, st.none() | _users).map(tuple), weight=1),
        _operation("delete_session", st.tuples(_apps, _users, _ids).map(tuple), weight=1),
        _operation(
            "append_event", st.tuples(_apps, _users, _ids, _handles, _drafts).map(tuple), weight=4
        ),
    ),
    judge=_judge,
    error_name=_error_name,
    close=close_service,
    key=_key,
    readback=readback,
    adapt=adapt_service,
    describe=_describe,
    prepare=_prepare,
    confirm=confirm,
)
"""The contract of a persistent ADK session service (declared durable): an append
through a stale session object is refused. What the model-based machine, the history
checker and the crash engines judge a service by; a history is judged an app at a time."""

ADK_SESSION_CONTRACT_IN_MEMORY: Final[Contract[ServiceHandle, AdkState]] = dataclasses.replace(
    ADK_SESSION_CONTRACT,
    name="adk-session-in-memory",
    initial=lambda: AdkState(refuses_stale=False),
)
"""The same contract for a service not declared durable: an append through a stale
object is stored, as ``InMemorySessionService`` stores it."""
