"""The sequential model of an OpenAI Agents session store: the oracle of its contract.

A store holds, per session id, a list of items (JSON objects: the SDK's
``TResponseInputItem``). `SessionsState` is that, as plain data, and `step` is one
call on it, returning the next state and the answer a conforming store gives.

Calls are plain data, the session id and the Session object first:

| operation | arguments | answer |
|---|---|---|
| ``add_items`` | ``(session_id, handle, items)`` | None |
| ``get_items`` | ``(session_id, handle, limit)`` (limit None or at least 1) | the items' texts |
| ``pop_item`` | ``(session_id, handle)`` | the latest item's text, or None |
| ``clear_session`` | ``(session_id, handle)`` | None |

An item in an answer is its canonical JSON text (`encoded`: keys sorted), so that
answers compare exactly: an integer that came back as a float, or ``-0.0`` as
``0.0``, is a different answer.

``handle`` numbers the Session objects opened on one id (a second request, a
restarted worker): a conforming store answers the same through each. The state also
keeps, per Session object, the history it would answer from if it kept its own copy
(what it last read, with its own writes since applied): how the judge tells a
store answering from a stale copy (OASSHARE-001) from one losing items. Nothing here
imports the SDK.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Final, TypeAlias

import msgspec

__all__ = [
    "OPERATIONS",
    "WRITES",
    "Items",
    "SessionsState",
    "answer_on",
    "confusable",
    "encoded",
    "step",
]

OPERATIONS: Final[tuple[str, ...]] = ("add_items", "get_items", "pop_item", "clear_session")
WRITES: Final[frozenset[str]] = frozenset({"add_items", "pop_item", "clear_session"})

Items: TypeAlias = tuple[str, ...]
"""A session's items, oldest first, each as its canonical JSON text (hashable)."""

_ENCODER = msgspec.json.Encoder(order="sorted")


def encoded(item: object) -> str:
    """``item``'s canonical JSON text: keys sorted, so that equal items are equal texts."""
    return _ENCODER.encode(item).decode()


class SessionsState(msgspec.Struct, frozen=True):
    """What a conforming store holds: ``sessions`` (id → items, only non-empty ones),
    ``views`` ((id, handle) → the items that Session object would answer from if it
    kept its own copy), ``popped`` and ``cleared`` (id → items removed that way),
    ``removers`` (an item removed → the Session object that removed it) and
    ``wiped`` (id → its items a clear of another id was made over) and
    ``cleared_ids`` (every id clear_session was called on)."""

    sessions: tuple[tuple[str, Items], ...] = ()
    views: tuple[tuple[tuple[str, int], Items], ...] = ()
    popped: tuple[tuple[str, Items], ...] = ()
    cleared: tuple[tuple[str, Items], ...] = ()
    removers: tuple[tuple[str, int], ...] = ()
    wiped: tuple[tuple[str, Items], ...] = ()
    cleared_ids: tuple[str, ...] = ()

    def wiped_from(self, session_id: str) -> Items:
        """The items of ``session_id`` a clear_session of *another* id would have taken
        had it cleared every session (what a clear without its WHERE clause does)."""
        return dict(self.wiped).get(session_id, ())

    def remover(self, item: str) -> int | None:
        """The Session object that last removed ``item`` (None: none did)."""
        return dict(self.removers).get(item)

    def items(self, session_id: str) -> Items:
        """The items ``session_id`` holds, oldest first."""
        return dict(self.sessions).get(session_id, ())

    def view(self, session_id: str, handle: int) -> Items:
        """What Session object ``handle`` of ``session_id`` would answer from with a copy
        of its own (the whole history until it has made a call)."""
        return dict(self.views).get((session_id, handle), self.items(session_id))

    def popped_from(self, session_id: str) -> Items:
        """The items of ``session_id`` pop_item removed so far."""
        return dict(self.popped).get(session_id, ())

    def cleared_from(self, session_id: str) -> Items:
        """The items of ``session_id`` clear_session removed so far."""
        return dict(self.cleared).get(session_id, ())

    def elsewhere(self, session_id: str) -> frozenset[str]:
        """Every item another session holds."""
        return frozenset(i for sid, items in self.sessions if sid != session_id for i in items)

    def after(
        self,
        session_id: str,
        handle: int,
        items: Items,
        view: Items,
        popped: Items,
        cleared: Items,
        cleared_now: bool = False,
    ) -> SessionsState:
        """This state with ``session_id`` holding ``items``, Session object ``handle``'s
        copy ``view``, and ``popped`` and ``cleared`` removed."""
        sessions = dict(self.sessions) | {session_id: items}
        views = dict(self.views) | {(session_id, handle): view}
        was_popped = dict(self.popped) | {session_id: self.popped_from(session_id) + popped}
        was_cleared = dict(self.cleared) | {session_id: self.cleared_from(session_id) + cleared}
        removers = dict(self.removers) | dict.fromkeys(popped + cleared, handle)
        wiped = dict(self.wiped)
        if cleared_now:
            for other, held in self.sessions:
                if other != session_id:
                    wiped[other] = self.wiped_from(other) + held
        return SessionsState(
            _non_empty(sessions),
            tuple(sorted(views.items())),
            _non_empty(was_popped),
            _non_empty(was_cleared),
            tuple(sorted(removers.items())),
            _non_empty(wiped),
            tuple(sorted(set(self.cleared_ids) | ({session_id} if cleared_now else set()))),
        )


def confusable(one: str, other: str) -> bool:
    """Whether two different ids differ only in case, Unicode normalisation, whitespace at
    either end or a separator: what a store's key folding or escaping may merge."""

    def folded(text: str) -> str:
        plain = unicodedata.normalize("NFKC", text).casefold().strip()
        return "".join("-" if c in "-_:/%. " else c for c in plain)

    return one != other and folded(one) == folded(other)


def _non_empty(by_id: dict[str, Items]) -> tuple[tuple[str, Items], ...]:
    return tuple(sorted((k, v) for k, v in by_id.items() if v))


def answer_on(items: Items, operation: str, arguments: Sequence[object]) -> tuple[Items, object]:
    """What ``operation`` does to one session's ``items``: the items after it and its answer."""
    if operation == "add_items":
        return items + tuple(encoded(i) for i in _listed(arguments[2])), None
    if operation == "get_items":
        limit = arguments[2]
        return items, list(items if limit is None else items[-_limit(limit) :])
    if operation == "pop_item":
        return (items[:-1], items[-1]) if items else (items, None)
    if operation == "clear_session":
        return (), None
    raise ValueError(f"the session contract has no operation {operation!r}")


def step(
    state: SessionsState, operation: str, arguments: Sequence[object]
) -> tuple[SessionsState, object]:
    """One call on ``state``: the next state and the answer a conforming store gives."""
    session_id, handle = str(arguments[0]), _handle(arguments[1])
    items = state.items(session_id)
    after, answer = answer_on(items, operation, arguments)
    # A copy of its own would be what this object read, with its own writes applied.
    view = (
        after
        if operation == "get_items"
        else answer_on(state.view(session_id, handle), operation, arguments)[0]
    )
    popped = items[-1:] if operation == "pop_item" else ()
    cleared = items if operation == "clear_session" else ()
    cleared_now = operation == "clear_session"
    return state.after(session_id, handle, after, view, popped, cleared, cleared_now), answer


def _listed(items: object) -> list[object]:
    if not isinstance(items, list | tuple):
        raise TypeError(f"add_items takes a list of items, not {type(items).__name__}")
    return list(items)


def _limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"the contract draws a limit of None or at least 1, not {limit!r}")
    return limit


def _handle(handle: object) -> int:
    if not isinstance(handle, int) or isinstance(handle, bool) or handle < 0:
        raise ValueError(f"a Session object is numbered from 0, not {handle!r}")
    return handle
