"""The sequential model of an ADK session service: the oracle of its contract.

A service holds sessions by (app_name, user_id, session_id), each with its events
and its state, beside state per app and per app's user. `AdkState` is that, as
plain data, and `step` is one call on it, returning the next state and the answer
a conforming service gives. State deltas apply by scope as
``InMemorySessionService`` applies them (`split_delta`).

Calls are plain data, the session's three names first:

| operation | arguments | answer |
|---|---|---|
| ``create_session`` | ``(app, user, session_id, state)`` | ``{"id", "state"}`` or raised ``AlreadyExistsError`` |
| ``get_session`` | ``(app, user, session_id, handle, num_recent_events, after)`` | ``{"events", "state"}`` or None |
| ``list_sessions`` | ``(app, user or None)`` | ``[[user, session_id], ...]`` sorted |
| ``delete_session`` | ``(app, user, session_id)`` | None |
| ``append_event`` | ``(app, user, session_id, handle, event)`` | None, or raised ``SessionNotFoundError`` / ``StaleSessionError`` |

An event is ``{"id", "author", "invocation_id", "text", "state_delta"}``; its id is
``e<N>``, N numbering the events in the order they are made, and each is stamped
with a timestamp later than the one before, so that ``after`` (an event's number, or
None) stands for ``after_timestamp`` = that event's timestamp. In an answer an event
is its canonical JSON text (`encoded`: keys sorted, temp: keys of its delta left
out) and a state is a key → value-text mapping, so that answers compare exactly.

``handle`` numbers the session objects a caller holds: ``get_session`` with a
handle keeps the object it read, ``append_event`` with that handle appends through
it (None: through an object read just before). An object read before another append
to the stored session is stale, and a persistent service refuses an append through
it (`AdkState.refuses_stale`). Nothing here imports ADK.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

__all__ = [
    "APP_PREFIX",
    "OPERATIONS",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "WRITES",
    "AdkState",
    "Key",
    "Refused",
    "StoredSession",
    "confusable",
    "encoded",
    "event_number",
    "event_text",
    "split_delta",
    "step",
]

OPERATIONS: Final[tuple[str, ...]] = (
    "create_session",
    "get_session",
    "list_sessions",
    "delete_session",
    "append_event",
)
WRITES: Final[frozenset[str]] = frozenset({"create_session", "delete_session", "append_event"})

APP_PREFIX: Final = "app:"
USER_PREFIX: Final = "user:"
TEMP_PREFIX: Final = "temp:"

Key: TypeAlias = tuple[str, str, str]
"""A session's names: (app_name, user_id, session_id)."""
Pairs: TypeAlias = tuple[tuple[str, str], ...]
"""A state: (key, value's canonical JSON text), sorted by key."""

_ENCODER = msgspec.json.Encoder(order="sorted")


def encoded(value: object) -> str:
    """``value``'s canonical JSON text: keys sorted, so that equal values are equal texts."""
    return _ENCODER.encode(value).decode()


def split_delta(
    delta: Mapping[str, object],
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """A state delta by scope, as ``InMemorySessionService`` splits it: its app: keys,
    its user: keys (prefixes removed) and its session keys; temp: keys are in none."""
    app: dict[str, str] = {}
    user: dict[str, str] = {}
    session: dict[str, str] = {}
    for key, value in delta.items():
        if key.startswith(APP_PREFIX):
            app[key.removeprefix(APP_PREFIX)] = encoded(value)
        elif key.startswith(USER_PREFIX):
            user[key.removeprefix(USER_PREFIX)] = encoded(value)
        elif not key.startswith(TEMP_PREFIX):
            session[key] = encoded(value)
    return app, user, session


def event_text(event: Mapping[str, object]) -> str:
    """An event as an answer holds it: its canonical JSON text, temp: keys of its state
    delta left out (a service trims them before it stores the event)."""
    delta = _mapping(event.get("state_delta") or {})
    kept = {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}
    return encoded(
        {
            "id": event["id"],
            "author": event["author"],
            "invocation_id": event["invocation_id"],
            "text": event["text"],
            "state_delta": kept,
        }
    )


def event_number(event_id: str) -> int:
    """The N of an event id ``e<N>``: the order the events were made in."""
    if not event_id.startswith("e") or not event_id[1:].isdigit():
        raise ValueError(f"the contract's event ids are e<N>, not {event_id!r}")
    return int(event_id[1:])


class StoredSession(msgspec.Struct, frozen=True):
    """One stored session: its own state, its events' texts in append order, and the
    revision its last write made (what a session object read from it holds)."""

    state: Pairs = ()
    events: tuple[str, ...] = ()
    revision: int = 0


class AdkState(msgspec.Struct, frozen=True):
    """What a conforming service holds: ``sessions`` by key, ``app_state`` by app,
    ``user_state`` by (app, user), ``held`` (a caller's session object, (key, handle) →
    the revision it was read at), ``clock`` (the last revision made), ``deleted`` (key →
    the events its deleted sessions had, for the judge) and ``refuses_stale`` (whether
    an append through a stale object is refused: a persistent service's promise)."""

    refuses_stale: bool = True
    sessions: tuple[tuple[Key, StoredSession], ...] = ()
    app_state: tuple[tuple[str, Pairs], ...] = ()
    user_state: tuple[tuple[tuple[str, str], Pairs], ...] = ()
    held: tuple[tuple[tuple[Key, int], int], ...] = ()
    clock: int = 0
    deleted: tuple[tuple[Key, tuple[str, ...]], ...] = ()

    def session(self, key: Key) -> StoredSession | None:
        """The stored session ``key`` names; None when there is none."""
        return dict(self.sessions).get(key)

    def merged_state(self, key: Key) -> dict[str, str]:
        """What a session's state reads as: its own keys, its app's under app: and its
        user's under user:."""
        app, user, _ = key
        stored = self.session(key)
        merged = dict(stored.state if stored is not None else ())
        merged |= {APP_PREFIX + k: v for k, v in dict(self.app_state).get(app, ())}
        merged |= {USER_PREFIX + k: v for k, v in dict(self.user_state).get((app, user), ())}
        return merged

    def deleted_events(self, key: Key) -> tuple[str, ...]:
        """The events sessions of ``key`` had when they were deleted."""
        return dict(self.deleted).get(key, ())

    def is_stale(self, key: Key, handle: int) -> bool:
        """Whether the object ``handle`` holds of ``key`` was read before the stored
        session's last write (False when it holds none: it reads one first)."""
        held = dict(self.held).get((key, handle))
        stored = self.session(key)
        return held is not None and stored is not None and held < stored.revision

    def with_session(self, key: Key, stored: StoredSession | None) -> AdkState:
        sessions = dict(self.sessions)
        if stored is None:
            sessions.pop(key, None)
        else:
            sessions[key] = stored
        return msgspec.structs.replace(self, sessions=tuple(sorted(sessions.items())))

    def with_scopes(
        self, app: str, user: str, app_delta: dict[str, str], user_delta: dict[str, str]
    ) -> AdkState:
        apps = dict(self.app_state)
        users = dict(self.user_state)
        if app_delta:
            apps[app] = _pairs(dict(apps.get(app, ())) | app_delta)
        if user_delta:
            users[(app, user)] = _pairs(dict(users.get((app, user), ())) | user_delta)
        return msgspec.structs.replace(
            self, app_state=tuple(sorted(apps.items())), user_state=tuple(sorted(users.items()))
        )

    def holding(self, key: Key, handle: object, revision: int) -> AdkState:
        if handle is None:
            return self
        held = dict(self.held) | {(key, _handle(handle)): revision}
        return msgspec.structs.replace(self, held=tuple(sorted(held.items())))


def confusable(one: str, other: str) -> bool:
    """Whether two different names differ only in case, Unicode normalisation, whitespace
    at either end or a separator: what a service's key folding or escaping may merge."""

    def folded(text: str) -> str:
        plain = unicodedata.normalize("NFKC", text).casefold().strip()
        return "".join("-" if c in "-_:/%. " else c for c in plain)

    return one != other and folded(one) == folded(other)


def _pairs(state: Mapping[str, str]) -> Pairs:
    return tuple(sorted(state.items()))


def _mapping(value: object) -> dict[str, object]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"a state is an object of string keys, not {value!r}")
    return dict(value)


def _handle(handle: object) -> int:
    if not isinstance(handle, int) or isinstance(handle, bool) or handle < 0:
        raise ValueError(f"a session object is numbered from 0, not {handle!r}")
    return handle


def _key(arguments: Sequence[object]) -> Key:
    return str(arguments[0]), str(arguments[1]), str(arguments[2])


class Refused(msgspec.Struct, frozen=True):
    """The contract's error a call raises: its ADK class name."""

    error: str


def step(state: AdkState, operation: str, arguments: Sequence[object]) -> tuple[AdkState, object]:
    """One call on ``state``: the next state and the answer a conforming service gives
    (a `Refused` for the contract's errors)."""
    if operation == "list_sessions":
        app, user = str(arguments[0]), arguments[1]
        listed = sorted(
            [u, s] for (a, u, s), _ in state.sessions if a == app and (user is None or u == user)
        )
        return state, listed
    key = _key(arguments)
    stored = state.session(key)
    if operation == "create_session":
        if stored is not None:
            return state, Refused("AlreadyExistsError")
        app_delta, user_delta, own = split_delta(_mapping(arguments[3] or {}))
        revision = state.clock + 1
        after = state.with_scopes(key[0], key[1], app_delta, user_delta)
        after = after.with_session(key, StoredSession(_pairs(own), (), revision))
        after = msgspec.structs.replace(after, clock=revision)
        return after, {"id": key[2], "state": after.merged_state(key)}
    if operation == "get_session":
        if stored is None:
            return state, None
        handle, recent, after_n = arguments[3], arguments[4], arguments[5]
        events = list(stored.events)
        if recent is not None:
            events = events[-_count(recent) :] if _count(recent) else []
        if after_n is not None:
            events = [e for e in events if _number_of_text(e) >= _count(after_n)]
        answer = {"events": events, "state": state.merged_state(key)}
        return state.holding(key, handle, stored.revision), answer
    if operation == "delete_session":
        if stored is None:
            return state, None
        deleted = dict(state.deleted) | {key: state.deleted_events(key) + stored.events}
        after = state.with_session(key, None)
        return msgspec.structs.replace(after, deleted=tuple(sorted(deleted.items()))), None
    if operation == "append_event":
        handle, event = arguments[3], _mapping(arguments[4])
        if stored is None:
            return state, Refused("SessionNotFoundError")
        if handle is not None and state.refuses_stale and state.is_stale(key, _handle(handle)):
            return state, Refused("StaleSessionError")
        app_delta, user_delta, own = split_delta(_mapping(event.get("state_delta") or {}))
        revision = state.clock + 1
        after = state.with_scopes(key[0], key[1], app_delta, user_delta)
        after = after.with_session(
            key,
            StoredSession(
                _pairs(dict(stored.state) | own), (*stored.events, event_text(event)), revision
            ),
        )
        after = msgspec.structs.replace(after, clock=revision).holding(key, handle, revision)
        return after, None
    raise ValueError(f"the ADK session contract has no operation {operation!r}")


def _number_of_text(text: str) -> int:
    decoded = msgspec.json.decode(text)
    return event_number(str(decoded["id"]))


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"the contract draws a count of None or at least 0, not {value!r}")
    return value
