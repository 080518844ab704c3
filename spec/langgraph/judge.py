"""Which rule of the LangGraph saver contract an answer breaks, named by what went wrong.

`rule_for` is given the model's state before a call, the call, the answer the
model gives and the answer the saver gave, and names the rule by the first thing
that differs, not by the operation that saw it: a listing that carries a wrong
channel value breaks LGCHAN-001 as a get_tuple would; a checkpoint a delete should
have removed breaks that delete's rule wherever it shows up; a checkpoint a copy,
a prune or a delete_for_runs carried (``SaverState.carried``) that reads back
otherwise breaks that operation's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from .calls import special
from .model import CheckpointKey, SaverState, TupleView

__all__ = ["difference", "rule_for"]

_WRITE_RULES = {
    "put": "LGPUT-001",
    "put_writes": "LGWRITE-001",
    "delete_thread": "LGDEL-001",
    "delete_for_runs": "LGRUNS-001",
    "copy_thread": "LGCOPY-001",
}


def rule_for(
    state: SaverState,
    operation: str,
    call: Sequence[object],
    expected: object,
    actual: object,
    *,
    answered: bool = True,
) -> str:
    """The rule broken when the saver, in the model's ``state``, answered ``call`` of
    ``operation`` with ``actual`` (``answered`` False: it raised what the contract does
    not allow) where a conforming saver answers ``expected``."""
    if operation == "prune":
        return "LGPRUNE-001" if call[1] == "keep_latest" else "LGPRUNE-002"
    if operation in _WRITE_RULES:
        return _WRITE_RULES[operation]
    if operation == "get_tuple":
        asked = call[2]
        if not answered:
            return "LGGET-002" if expected is None else _lost(state, _key(expected), "LGPUT-001")
        return _tuple_rule(
            state, cast("TupleView | None", expected), cast("TupleView | None", actual), asked
        )
    if operation == "list":
        if not answered or not isinstance(actual, list):
            return "LGLIST-005" if call[0] is None else "LGLIST-001"
        return _listing_rule(
            state, call, cast("list[TupleView]", expected), cast("list[TupleView]", actual)
        )
    raise ValueError(f"no operation {operation!r} in the LangGraph saver contract")


def _key(view: object) -> CheckpointKey:
    v = cast("Mapping[str, object]", view)
    return (str(v.get("thread_id")), str(v.get("checkpoint_ns")), str(v.get("checkpoint_id")))


def _lost(state: SaverState, key: CheckpointKey, otherwise: str) -> str:
    return state.carried.get(key, otherwise)


def _elsewhere(state: SaverState, key: CheckpointKey) -> bool:
    """Whether ``key``'s checkpoint id is held under another thread or namespace."""
    return any(other[2] == key[2] and other != key for other in state.held_keys())


def _tuple_rule(
    state: SaverState, expected: TupleView | None, actual: TupleView | None, asked: object
) -> str:
    if expected is None and actual is None:
        raise ValueError("the answers do not differ")
    if expected is None:
        key = _key(actual)
        if key in state.removed:
            return state.removed[key]
        return "LGPUT-004" if _elsewhere(state, key) else "LGGET-002"
    if actual is None:
        return _lost(state, _key(expected), "LGPUT-001")
    return _contents_rule(state, expected, actual, latest_asked=asked is None)


def _contents_rule(
    state: SaverState, expected: TupleView, actual: TupleView, *, latest_asked: bool
) -> str:
    key, got = _key(expected), _key(actual)
    if got != key:
        if got in state.removed:
            return state.removed[got]
        if got[:2] != key[:2]:
            return "LGPUT-004" if _elsewhere(state, got) or state.stored(got) else "LGGET-003"
        return "LGGET-001" if latest_asked and state.stored(got) is not None else "LGGET-003"
    rule_id = _field_rule(state, key, expected, actual)
    carried = state.carried.get(key)
    if carried == "LGCOPY-001" or (carried is not None and _lost_something(expected, actual)):
        # A copy made this checkpoint, so whatever differs is the copy's; a prune or a
        # delete_for_runs it survived only owns what it took away.
        return carried
    return rule_id


def _lost_something(expected: TupleView, actual: TupleView) -> bool:
    """Whether ``actual`` lacks a channel value or a pending write ``expected`` has."""
    values, want_values = actual.get("channel_values"), expected["channel_values"]
    writes, want_writes = actual.get("pending_writes"), expected["pending_writes"]
    return (
        not isinstance(values, dict)
        or bool(set(cast("dict[str, object]", want_values)) - set(values))
        or not isinstance(writes, list)
        or len(writes) < len(cast("list[object]", want_writes))
    )


def _field_rule(
    state: SaverState, key: CheckpointKey, expected: TupleView, actual: TupleView
) -> str:
    """The rule of the first field in which two tuples of one checkpoint differ."""
    if any(actual.get(f) != expected[f] for f in ("id", "v", "ts")):
        return "LGGET-003"
    if (
        actual.get("channel_versions") != expected["channel_versions"]
        or actual.get("versions_seen") != expected["versions_seen"]
    ):
        return "LGCHAN-002"
    if actual.get("channel_values") != expected["channel_values"]:
        got_values = actual.get("channel_values")
        extra = isinstance(got_values, dict) and set(got_values) - set(
            cast("dict[str, object]", expected["channel_values"])
        )
        return "LGCHAN-002" if extra else "LGCHAN-001"
    if actual.get("metadata") != expected["metadata"]:
        return "LGPUT-002"
    if actual.get("parent") != expected["parent"]:
        return "LGPUT-003"
    if actual.get("pending_writes") != expected["pending_writes"]:
        return _writes_rule(state, key, expected, actual)
    raise ValueError("the tuples do not differ")


def _writes_rule(
    state: SaverState, key: CheckpointKey, expected: TupleView, actual: TupleView
) -> str:
    want = [
        tuple(cast("list[object]", w)) for w in cast("list[object]", expected["pending_writes"])
    ]
    got_raw = actual.get("pending_writes")
    got = [tuple(cast("list[object]", w)) for w in got_raw] if isinstance(got_raw, list) else []
    if any(w not in want and _written_elsewhere(state, key, w) for w in got):
        return "LGWRITE-004"
    for task in sorted({str(w[0]) for w in want + got}):
        mine = [w for w in got if w[0] == task]
        theirs = [w for w in want if w[0] == task]
        if sorted(map(repr, mine)) == sorted(map(repr, theirs)):
            continue
        if len(mine) < len(theirs):
            return "LGWRITE-001"  # a write lost
        differing = [w for w in mine if w not in theirs] + [w for w in theirs if w not in mine]
        # A write kept in place of another, or kept twice: which rule says whose stays.
        return "LGWRITE-003" if any(special(str(w[1])) for w in differing) else "LGWRITE-002"
    return "LGWRITE-001"  # the same writes in another order


def _written_elsewhere(state: SaverState, key: CheckpointKey, write: tuple[object, ...]) -> bool:
    for other, held in state.writes.items():
        if other != key and any((w.task_id, w.channel, w.value) == write for w in held.values()):
            return True
    return False


def _listing_rule(
    state: SaverState, call: Sequence[object], expected: list[TupleView], actual: list[TupleView]
) -> str:
    thread, ns, _cid, filter_, before, limit = call[:6]
    want = [_key(v) for v in expected]
    got = [_key(v) for v in actual if isinstance(v, dict)]
    unlimited = state.listing(
        cast("str | None", thread),
        cast("str | None", ns),
        cast("str | None", _cid),
        cast("Mapping[str, object] | None", filter_),
        cast("str | None", before),
        None,
    )
    for key in got:
        if key in want:
            continue
        if key in state.removed:
            return state.removed[key]
        stored = state.stored(key)
        if (
            stored is None
            or (thread is not None and key[0] != thread)
            or (ns is not None and key[1] != ns)
        ):
            return "LGPUT-004" if stored is not None or _elsewhere(state, key) else "LGLIST-001"
        if filter_ and any(
            stored.metadata.get(k) != v for k, v in cast("Mapping[str, object]", filter_).items()
        ):
            return "LGLIST-002"
        if before is not None and key[2] >= str(before):
            return "LGLIST-003"
        if limit is not None and key in {_key(v) for v in unlimited}:
            return "LGLIST-004"
        return "LGLIST-001"
    if len(got) != len(set(got)):
        return "LGLIST-001"  # a checkpoint listed twice
    missing = [key for key in want if key not in got]
    if missing:
        if limit is not None and len(got) < len(want):
            return "LGLIST-004"
        carried = state.carried.get(missing[0])
        if carried:
            return carried
        if filter_:
            return "LGLIST-002"
        if before is not None:
            return "LGLIST-003"
        return "LGLIST-005" if thread is None else "LGLIST-001"
    if got != want:
        return "LGLIST-001"  # the same checkpoints in another order
    for want_view, got_view in zip(expected, actual, strict=True):
        if want_view != got_view:
            return _contents_rule(state, want_view, got_view, latest_asked=False)
    raise ValueError("the listings do not differ")


_FIELDS = (
    "checkpoint_id",
    "thread_id",
    "checkpoint_ns",
    "id",
    "v",
    "ts",
    "channel_versions",
    "versions_seen",
    "channel_values",
    "metadata",
    "parent",
    "pending_writes",
)


def _short(value: object, most: int = 240) -> str:
    text = repr(value)
    return text if len(text) <= most else text[: most - 1] + "…"


def _name(key: CheckpointKey) -> str:
    thread, ns, cid = key
    return f"{thread}/{ns or '-'}/{cid[:8]}"


def _field_difference(expected: TupleView, actual: Mapping[str, object]) -> tuple[str, str]:
    for field in _FIELDS:
        if actual.get(field) != expected.get(field):
            return (
                f"its {field} differs",
                f"checkpoint {_name(_key(expected))}: {field} {_short(actual.get(field))}, "
                f"the contract's {_short(expected.get(field))}",
            )
    return ("its fields differ", f"checkpoint {_name(_key(expected))}: {_short(actual)}")


def difference(
    operation: str, expected: object, actual: object, *, raised: str = ""
) -> tuple[str, str]:
    """What differs between the saver's answer and the model's, as a shape (the same
    for the same defect whatever the example's values: what makes findings one
    defect) and a sentence with the values, short enough to read in a report.
    ``raised`` names the exception the saver raised instead of answering."""
    if raised:
        return (f"{operation} raised {raised.split(':')[0]}", f"raised {raised}")
    if operation == "get_tuple":
        if expected is None:
            return (
                "a checkpoint where none is held",
                f"returned checkpoint {_name(_key(actual))}; the contract: None",
            )
        if actual is None:
            return (
                "None for a held checkpoint",
                f"returned None; the contract: checkpoint {_name(_key(expected))}",
            )
        return _field_difference(cast("TupleView", expected), cast("Mapping[str, object]", actual))
    if operation == "list":
        want = [_key(v) for v in cast("list[TupleView]", expected)]
        if not isinstance(actual, list):
            return ("list answered no listing", f"returned {_short(actual)}")
        got = [_key(v) for v in actual if isinstance(v, dict)]
        listed = f"listed {', '.join(map(_name, got)) or 'nothing'}; the contract lists {', '.join(map(_name, want)) or 'nothing'}"
        if set(got) - set(want):
            return ("a checkpoint listed that should not be", listed)
        if set(want) - set(got):
            return ("a checkpoint missing from the listing", listed)
        if got != want:
            return ("the listing in another order or with repeats", listed)
        for want_view, got_view in zip(cast("list[TupleView]", expected), actual, strict=True):
            if want_view != got_view:
                return _field_difference(want_view, cast("Mapping[str, object]", got_view))
    return (
        f"{operation} answered otherwise",
        f"returned {_short(actual)}; the contract: {_short(expected)}",
    )
