"""The rule an OpenAI Agents session's answer breaks, named by what went wrong.

`judge` takes the model's state before a call, the call, the answer the contract
gives and the one the store gave, and names the cause, not the operation that saw
it: an item another session holds is OASISO-001 wherever it shows, an item pop_item
removed that is still there is OASPOP-001, content that changed on the way back is
OASITEM-001, an answer a Session object's own stale copy gives is OASSHARE-001.
With it comes a shape free of the example's values (what makes two findings one
defect) and a sentence with them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

import msgspec

from .model import SessionsState, answer_on, confusable

__all__ = ["CLEARED_BY_ANOTHER_ID", "CLEARED_BY_A_CONFUSABLE_ID", "Judgement", "judge"]

_OWN_RULE: Final[dict[str, str]] = {
    "add_items": "OASADD-001",
    "get_items": "OASGET-001",
    "pop_item": "OASPOP-001",
    "clear_session": "OASCLEAR-001",
}


CLEARED_BY_A_CONFUSABLE_ID: Final = "a clear_session of a confusable id took this session's items"
CLEARED_BY_ANOTHER_ID: Final = "another session's clear_session took this session's items"
"""The shapes of items gone after a clear of another id: the ids merged, or a clear that
takes every session. One answer cannot tell them apart; a second look at the store can."""


class Judgement(msgspec.Struct, frozen=True):
    """The rule an answer breaks, the shape of the difference and a sentence saying it."""

    rule: str
    shape: str
    sentence: str


def _rule_of_operation(operation: str, arguments: Sequence[object]) -> str:
    if operation == "get_items" and arguments[2] is not None:
        return "OASGET-002"
    return _OWN_RULE[operation]


def judge(
    state: SessionsState,
    operation: str,
    arguments: Sequence[object],
    expected: object,
    actual: object,
    *,
    raised: str = "",
    views: bool = True,
) -> Judgement:
    """The rule broken when ``operation(*arguments)``, made on a store in ``state``,
    answered ``actual`` (or raised ``raised``: an error's type and text, "" when it
    answered) where the contract's model answers ``expected``. With ``views`` false
    the answer is not put down to a Session object's own copy (a fresh object of the
    id answered the same: the store itself answers so)."""
    session_id, handle = str(arguments[0]), int(str(arguments[1]))
    own = _rule_of_operation(operation, arguments)
    if raised:
        said = f"raised {raised}; the contract's model returns {expected!r}"
        return Judgement(own, f"{operation} raised", said)
    said = f"returned {actual!r}; the contract's model returns {expected!r}"
    if operation in ("add_items", "clear_session"):
        return Judgement(own, f"{operation} returned a value", said)
    returned = _returned_items(operation, actual)
    if returned is None:
        return Judgement(own, f"{operation} returned something other than items", said)
    held = state.items(session_id)
    extra = Counter(returned) - Counter(held)  # what the answer has more of than the session
    # A Session object answering from a copy of its own shows items removed through
    # another object: removal is the cause only when this object removed the item, or
    # when no such copy gives the answer.
    view = state.view(session_id, handle)
    stale = views and view != held and answer_on(view, operation, arguments)[1] == actual
    for removed, rule, how in (
        (state.popped_from(session_id), "OASPOP-001", "pop_item removed"),
        (state.cleared_from(session_id), "OASCLEAR-001", "clear_session removed"),
    ):
        back = [t for t in extra if t in removed and (not stale or state.remover(t) == handle)]
        if back:
            return Judgement(
                rule,
                f"an item {how} returned",
                f"{said}: {back[0]} was removed by {how.split()[0]}",
            )
    if stale:
        return Judgement(
            "OASSHARE-001",
            f"{operation} answered from the Session object's own copy",
            f"{said}: what this Session object would answer from a copy of its own, "
            "missing what another Session object of the id changed",
        )
    once_here = set(state.popped_from(session_id)) | set(state.cleared_from(session_id))
    foreign = [t for t in extra if t in state.elsewhere(session_id) and t not in once_here]
    if foreign:
        return Judgement(
            "OASISO-001",
            "an item of another session returned",
            f"{said}: {foreign[0]} is another session's",
        )
    changed = [t for t in extra if t not in once_here]
    if changed:
        return Judgement(
            "OASITEM-001", "an item came back changed", f"{said}: {changed[0]} was never added"
        )
    wiped = state.wiped_from(session_id)
    survivors = tuple(t for t in held if t not in wiped)
    if wiped and answer_on(survivors, operation, arguments)[1] == actual:
        merged = [sid for sid in state.cleared_ids if confusable(sid, session_id)]
        if merged:
            return Judgement(
                "OASISO-001",
                CLEARED_BY_A_CONFUSABLE_ID,
                f"{said}: as if clear_session of {merged[0]!r} had cleared this session too",
            )
        return Judgement(
            "OASCLEAR-001",
            CLEARED_BY_ANOTHER_ID,
            f"{said}: as if a clear_session of another id had removed this session's items",
        )
    return Judgement(own, _shape_among_own(held, operation, arguments, returned), said)


def _returned_items(operation: str, actual: object) -> list[str] | None:
    """The items' texts an answer holds; None when it holds no items."""
    if operation == "pop_item":
        return [] if actual is None else [actual] if isinstance(actual, str) else None
    if not isinstance(actual, list) or not all(isinstance(i, str) for i in actual):
        return None
    return list(actual)


def _shape_among_own(
    items: tuple[str, ...], operation: str, arguments: Sequence[object], returned: list[str]
) -> str:
    """How an answer made only of the session's own items differs from the model's."""
    if operation == "pop_item":
        return (
            "pop_item returned None from a session with items"
            if not returned
            else "pop_item returned an item other than the latest"
        )
    limit = arguments[2]
    wanted = list(items if limit is None else items[-int(str(limit)) :])
    if sorted(returned) == sorted(wanted):
        return "get_items returned the items in another order"
    if limit is not None and returned == list(items[: len(returned)]):
        return "get_items(limit) returned the oldest items"
    if len(returned) > len(wanted) or len(set(returned)) < len(returned):
        return f"{operation} returned items more than once or too many"
    return f"{operation} left out items the session holds"
