"""The rule an ADK session service's answer breaks, named by what went wrong.

`judge` takes the model's state before a call, the call, the answer the contract
gives and the one the service gave, and names the cause, not the operation that saw
it: an event or state value of another app, user or session whose name differs only
in case or a separator is ADKISO-001 wherever it shows, a deleted session's events
back are ADKDEL-001, a value that changed on the way back is ADKITEM-001, a state
key of the wrong scope or a delta lost is ADKSTATE-001, a stale object's append
stored is ADKSTALE-001. With it comes a shape free of the example's values (what
makes two findings one defect) and a sentence with them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from .model import APP_PREFIX, TEMP_PREFIX, USER_PREFIX, AdkState, Key, confusable, event_text

__all__ = ["Judgement", "judge"]

_OWN_RULE: Final[dict[str, str]] = {
    "create_session": "ADKCREATE-001",
    "get_session": "ADKGET-001",
    "list_sessions": "ADKLIST-001",
    "delete_session": "ADKDEL-001",
    "append_event": "ADKAPPEND-001",
}


class Judgement(msgspec.Struct, frozen=True):
    """The rule an answer breaks, the shape of the difference and a sentence saying it."""

    rule: str
    shape: str
    sentence: str


def _has_nul(value: object) -> bool:
    """Whether ``value`` holds, anywhere, a text with a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def _own(operation: str, arguments: Sequence[object]) -> str:
    if operation == "get_session" and (arguments[4] is not None or arguments[5] is not None):
        return "ADKGET-002"
    return _OWN_RULE[operation]


def _near(state: AdkState, key: Key) -> list[Key]:
    """The stored sessions whose names differ from ``key``'s only as a folding would merge."""
    return [k for k, _ in state.sessions if k != key and _names_confusable(k, key)]


def _names_confusable(one: Key, other: Key) -> bool:
    return all(a == b or confusable(a, b) for a, b in zip(one, other, strict=True))


def judge(
    state: AdkState,
    operation: str,
    arguments: Sequence[object],
    expected: object,
    actual: object,
    *,
    expected_error: str = "",
    actual_error: str = "",
    raised: str = "",
) -> Judgement:
    """The rule broken when ``operation(*arguments)``, made on a service in ``state``,
    answered ``actual`` (or raised the contract's ``actual_error``, or another exception
    ``raised``: its type and text) where the model answers ``expected`` (or raises
    ``expected_error``)."""
    own = _own(operation, arguments)
    want = f"raises {expected_error}" if expected_error else f"returns {expected!r}"
    if raised:
        said = f"raised {raised}; the contract's model {want}"
        if _has_nul(arguments):
            return Judgement(
                "ADKITEM-001",
                "a value with a NUL character refused",
                f"{said}: the call carries text with a NUL character, which JSON holds",
            )
        return Judgement(own, f"{operation} raised", said)
    got = f"raised {actual_error}" if actual_error else f"returned {actual!r}"
    said = f"{got}; the contract's model {want}"
    if operation == "list_sessions":
        return _judge_list(state, arguments, expected, actual, said)
    key: Key = (str(arguments[0]), str(arguments[1]), str(arguments[2]))
    near = _near(state, key)
    if operation == "append_event":
        return _judge_append(state, key, near, expected_error, actual_error, said)
    if operation == "delete_session":
        return Judgement(own, "delete_session returned a value or raised", said)
    if operation == "create_session":
        if expected_error:
            return Judgement(own, "create_session of an existing id did not raise", said)
        if actual_error == "AlreadyExistsError":
            if near:
                return Judgement(
                    "ADKISO-001",
                    "create_session refused an id another session's only resembles",
                    f"{said}: {near[0]!r} exists, not {key!r}",
                )
            return Judgement(own, "create_session refused a new session", said)
    if operation == "get_session":
        if expected is None:
            if state.deleted_events(key) or key in {k for k, _ in state.deleted}:
                return Judgement("ADKDEL-001", "a deleted session read back", said)
            if near:
                return Judgement(
                    "ADKISO-001",
                    "get_session returned a session of another name",
                    f"{said}: only {near[0]!r} exists",
                )
            return Judgement(own, "get_session returned a session that does not exist", said)
        if actual is None or actual_error:
            gone = [k for k, _ in state.deleted if k != key and _names_confusable(k, key)]
            if gone:
                return Judgement(
                    "ADKISO-001",
                    "deleting a session of a resembling name deleted this one",
                    f"{said}: {gone[0]!r} was deleted, not {key!r}",
                )
            return Judgement(own, "get_session lost a session", said)
    if not isinstance(expected, Mapping) or not isinstance(actual, Mapping):
        return Judgement(own, f"{operation} returned something other than a session", said)
    if operation == "get_session":
        found = _judge_events(state, key, near, arguments, expected, actual, said)
        if found is not None:
            return found
    return _judge_state(state, key, near, own, expected, actual, said)


def _judge_append(
    state: AdkState,
    key: Key,
    near: list[Key],
    expected_error: str,
    actual_error: str,
    said: str,
) -> Judgement:
    if expected_error == "StaleSessionError":
        return Judgement(
            "ADKSTALE-001",
            "an append through a stale session object was stored",
            f"{said}: the object was read before another append to the session",
        )
    if expected_error == "SessionNotFoundError":
        if key in {k for k, _ in state.deleted}:
            return Judgement("ADKDEL-001", "a deleted session took an append", said)
        if near:
            return Judgement(
                "ADKISO-001",
                "an append to a missing session went to a session of another name",
                f"{said}: only {near[0]!r} exists",
            )
        return Judgement("ADKAPPEND-001", "an append to a missing session was stored", said)
    if actual_error == "StaleSessionError":
        return Judgement(
            "ADKAPPEND-001",
            "append_event refused a current session object as stale",
            f"{said}: no append was made since the object was read",
        )
    return Judgement("ADKAPPEND-001", "append_event refused an append to an existing session", said)


def _judge_list(
    state: AdkState, arguments: Sequence[object], expected: object, actual: object, said: str
) -> Judgement:
    if not isinstance(actual, list) or not isinstance(expected, list):
        return Judgement(
            "ADKLIST-001", "list_sessions returned something other than sessions", said
        )
    app, user = str(arguments[0]), arguments[1]
    extra = [e for e in actual if e not in expected]
    stored = {k for k, _ in state.sessions}
    for entry in extra:
        if not isinstance(entry, list) or len(entry) != 2:
            break
        named: Key = (app, str(entry[0]), str(entry[1]))
        if named in {k for k, _ in state.deleted} and named not in stored:
            return Judgement(
                "ADKDEL-001", "a deleted session listed", f"{said}: {entry!r} was deleted"
            )
        if user is not None and entry[0] != user and not confusable(str(entry[0]), str(user)):
            return Judgement(
                "ADKLIST-001",
                "list_sessions listed sessions of another user",
                f"{said}: {entry!r} is a session of user {entry[0]!r}",
            )
        if any(_names_confusable(k, named) for k in stored):
            return Judgement(
                "ADKISO-001",
                "list_sessions listed a session of another app or user",
                f"{said}: {entry!r} is not a session of this app and user",
            )
    if sorted(map(str, actual)) == sorted(map(str, expected)) and len(actual) == len(expected):
        return Judgement("ADKLIST-001", "list_sessions listed sessions more than once", said)
    return Judgement("ADKLIST-001", "list_sessions left out or added sessions", said)


def _judge_events(
    state: AdkState,
    key: Key,
    near: list[Key],
    arguments: Sequence[object],
    expected: Mapping[str, object],
    actual: Mapping[str, object],
    said: str,
) -> Judgement | None:
    want, got = expected.get("events"), actual.get("events")
    if want == got:
        return None
    if not isinstance(got, list) or not isinstance(want, list):
        return Judgement("ADKGET-001", "get_session returned events that are not events", said)
    extra = Counter(map(str, got)) - Counter(map(str, want))
    stored = state.session(key)
    own_events = set(stored.events) if stored is not None else set()
    elsewhere = {e for k, s in state.sessions if k != key for e in s.events}
    for event in extra:
        if _without_temp(event) in set(want) - set(got):
            return Judgement(
                "ADKSTATE-001",
                "an event was stored with its temp: keys",
                f"{said}: {event} keeps temp: keys, which are never stored",
            )
        if event in state.deleted_events(key) and event not in own_events:
            return Judgement(
                "ADKDEL-001",
                "an event of a deleted session came back",
                f"{said}: {event} was the deleted session's",
            )
        if event in elsewhere:
            return Judgement(
                "ADKISO-001",
                "an event of another session returned",
                f"{said}: {event} is another session's",
            )
        if event not in own_events:
            return Judgement(
                "ADKITEM-001", "an event came back changed", f"{said}: {event} was never appended"
            )
    filtered = arguments[4] is not None or arguments[5] is not None
    rule = "ADKGET-002" if filtered else "ADKGET-001"
    if sorted(map(str, got)) == sorted(map(str, want)):
        return Judgement(rule, "get_session returned the events in another order", said)
    if filtered and stored is not None and list(stored.events) == got:
        return Judgement(rule, "get_session ignored its filter", said)
    if len(got) > len(want):
        return Judgement(rule, "get_session returned events more than once or too many", said)
    return Judgement(rule, "get_session left out events the session holds", said)


def _without_temp(event: str) -> str:
    """An event's text with the temp: keys of its state delta left out."""
    try:
        decoded = msgspec.json.decode(event)
    except msgspec.DecodeError:
        return event
    if not isinstance(decoded, dict) or not isinstance(decoded.get("state_delta"), dict):
        return event
    return event_text(decoded)


def _judge_state(
    state: AdkState,
    key: Key,
    near: list[Key],
    own: str,
    expected: Mapping[str, object],
    actual: Mapping[str, object],
    said: str,
) -> Judgement:
    want, got = expected.get("state"), actual.get("state")
    if want == got:
        if expected.get("id") != actual.get("id"):
            return Judgement(own, "create_session returned another id", said)
        return Judgement(own, f"{own} answered otherwise", said)
    if not isinstance(want, Mapping) or not isinstance(got, Mapping):
        return Judgement(own, "a session's state is not an object", said)
    for name in sorted(set(want) | set(got), key=str):
        if want.get(name) == got.get(name):
            continue
        scope = _scope(str(name))
        shown = f"{said}: state[{name!r}] is {got.get(name)!r}, not {want.get(name)!r}"
        if name in got and _from_resembling(state, key, str(name), got[name]):
            return Judgement(
                "ADKISO-001", f"a {scope} state value of another name's read back", shown
            )
        if str(name).startswith(TEMP_PREFIX):
            return Judgement("ADKSTATE-001", "a temp: key was stored", shown)
        if name in want and name in got and _loosely_equal(want[name], got[name]):
            return Judgement("ADKITEM-001", "a state value came back changed", shown)
        if name not in got:
            return Judgement("ADKSTATE-001", f"a {scope} state key set is missing", shown)
        if name not in want:
            return Judgement(
                "ADKSTATE-001", f"a {scope} state key no delta of its scope set", shown
            )
        return Judgement("ADKSTATE-001", f"a {scope} state key holds another value", shown)
    return Judgement(own, "the state differs", said)


def _scope(name: str) -> str:
    if name.startswith(APP_PREFIX):
        return "app"
    if name.startswith(USER_PREFIX):
        return "user"
    return "session"


def _from_resembling(state: AdkState, key: Key, name: str, value: object) -> bool:
    """Whether ``value`` of state ``name`` is what an app, user or session whose name
    resembles ``key``'s holds there (and this one does not)."""
    app, user, _ = key
    if name.startswith(APP_PREFIX):
        bare = name.removeprefix(APP_PREFIX)
        return any(
            confusable(a, app) and dict(pairs).get(bare) == value for a, pairs in state.app_state
        )
    if name.startswith(USER_PREFIX):
        bare = name.removeprefix(USER_PREFIX)
        return any(
            a == app and confusable(u, user) and dict(pairs).get(bare) == value
            for (a, u), pairs in state.user_state
        )
    return any(
        _names_confusable(k, key) and k != key and dict(s.state).get(name) == value
        for k, s in state.sessions
    )


def _loosely_equal(want: object, got: object) -> bool:
    """Whether two value texts are one value changed by its encoding (`_changed_form`)."""
    try:
        a, b = msgspec.json.decode(str(want)), msgspec.json.decode(str(got))
    except msgspec.DecodeError:
        return False
    return _changed_form(a, b)


def _changed_form(a: object, b: object) -> bool:
    """Whether ``b`` is ``a`` changed by an encoding, at any depth: equal as Python values
    (1 and 1.0, -0.0 and 0), numbers a rounding apart (a float kept as a decimal reads
    back an integer of its digits), a string cut or stripped, or a string of the value;
    lists item by item, objects key by key."""
    if a == b or _numbers_close(a, b):
        return True
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip() or a.startswith(b) or b.startswith(a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_changed_form(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_changed_form(a[k], b[k]) for k in a)
    return isinstance(b, str) and b == str(a)


def _numbers_close(a: object, b: object) -> bool:
    """Whether two numbers differ by no more than a rounding of their last digits."""
    numbers = (int, float)
    if not isinstance(a, numbers) or not isinstance(b, numbers):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return abs(float(a) - float(b)) <= 1e-12 * max(abs(float(a)), abs(float(b)))
