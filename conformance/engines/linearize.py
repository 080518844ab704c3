"""A bounded linearizability search over one session's log: the history checker's fallback.

`checkpointspec.conformance.engines.history` decides most histories in near linear time
by recovering the order of the log from its unique events. When it cannot — a
truncate or delete that overlaps other calls, a truncate whose outcome is unknown
— it hands the session's calls to `search_log`, which asks the plain question of
linearizability: is there one order of the calls, consistent with real time
(a call that returned before another was invoked comes first), in which every
call returns what a sequential log would have returned?

The search is the just-in-time variant of Wing & Gong's algorithm (Lowe, *Testing
for linearizability*, 2017): it walks the calls' invocations and responses in
time order and keeps every *configuration* — a possible log plus the set of
in-flight calls already placed — that explains the history so far. A call is
placed only when its response forces it, so configurations stay few when every
event is unique: a wrong order dies at the next returned head or read. Calls
that do not change the log (reads, heads, conflicts) are placed as soon as they
fit, which never loses a solution, so they add no branching. A call with no
response, or one that raised an error other than a conflict, may have taken
effect or not: both configurations are kept until something observes the
difference.

The sequential specification here is deliberately small and separate from
`checkpointspec.spec.SpecModel`: the search copies the log at every branch, so
logs are persistent linked lists whose nodes are interned — the same content is
the same object, which makes configurations cheap to compare. Nothing here does
I/O, and nothing knows about backends.

The search stops after ``max_steps`` transitions or ``max_configurations``
simultaneous configurations and answers ``"undecided"`` rather than run on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

__all__ = ["LogCall", "SearchResult", "search_log"]

CallKind = Literal["append", "read", "head", "truncate", "delete"]
CallStatus = Literal["ok", "conflict", "indeterminate"]


class LogCall(msgspec.Struct, frozen=True):
    """One call on one session's log, as the search sees it.

    ``status`` is ``"ok"`` (``value`` is the returned head, ``events`` the
    markers a read returned), ``"conflict"`` (``value`` is the reported actual
    head) or ``"indeterminate"`` (no response, or an error other than a
    conflict: the call may or may not have taken effect). ``completed`` is None
    when the call never returned.
    """

    kind: CallKind
    invoked: int
    completed: int | None
    status: CallStatus
    markers: tuple[str, ...] = ()
    expected_head: int | None = None
    since_seq: int = 0
    to_seq: int = 0
    value: int = 0
    events: tuple[str, ...] = ()


class SearchResult(msgspec.Struct, frozen=True):
    """What the search found.

    For ``"violation"``: ``failed_at`` is the index of the call at whose response
    no configuration was left (``len(calls)`` means the final read),
    ``in_flight`` the calls invoked but not yet returned at that moment, and
    ``candidates`` up to three logs that explained everything before it, each as
    (length, its last few markers).
    """

    verdict: Literal["linearizable", "violation", "undecided"]
    steps: int
    failed_at: int | None = None
    in_flight: tuple[int, ...] = ()
    candidates: tuple[tuple[int, tuple[str, ...]], ...] = ()


class _Node:
    """One log: its last marker and the log before it. Interned by `_Logs`."""

    __slots__ = ("length", "marker", "parent")

    def __init__(self, length: int, marker: str, parent: _Node | None) -> None:
        self.length = length
        self.marker = marker
        self.parent = parent


class _Logs:
    """Every log the search has built, interned so equal logs are the same node."""

    def __init__(self) -> None:
        self.empty = _Node(0, "", None)
        self._children: dict[tuple[int, str], _Node] = {}

    def extend(self, node: _Node, markers: Iterable[str]) -> _Node:
        for marker in markers:
            key = (id(node), marker)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = _Node(node.length + 1, marker, node)
            node = child
        return node

    @staticmethod
    def prefix(node: _Node, length: int) -> _Node:
        while node.length > length:
            assert node.parent is not None
            node = node.parent
        return node

    @staticmethod
    def tail(node: _Node, count: int) -> tuple[str, ...]:
        """The last ``count`` markers, oldest first."""
        out: list[str] = []
        while len(out) < count and node.parent is not None:
            out.append(node.marker)
            node = node.parent
        return tuple(reversed(out))


def _reads_as(node: _Node, call: LogCall) -> bool:
    """Would a read since ``call.since_seq`` of this log return ``call.events``?"""
    want = call.events
    if not want:
        return node.length <= call.since_seq
    if node.length - call.since_seq != len(want):
        return False
    for marker in reversed(want):
        if node.marker != marker:
            return False
        assert node.parent is not None
        node = node.parent
    return True


def _is_pure(call: LogCall) -> bool:
    """Calls that never change the log: placed eagerly, never branched on."""
    if call.status == "conflict":
        return True
    if call.status != "ok":
        return False
    return call.kind in ("read", "head") or (call.kind == "append" and not call.markers)


def _fits(node: _Node, call: LogCall) -> bool:
    """Does a pure call return what it returned when placed on this log?"""
    if call.status == "conflict":
        return (
            call.expected_head is not None
            and node.length != call.expected_head
            and node.length == call.value
        )
    if call.kind == "read":
        return _reads_as(node, call)
    if call.kind == "append" and (
        call.expected_head is not None and call.expected_head != node.length
    ):
        return False
    return node.length == call.value


def _successors(logs: _Logs, node: _Node, call: LogCall) -> tuple[_Node, ...]:
    """The logs after placing a call that may change the log; () if it cannot go here."""
    may_skip = call.status == "indeterminate"
    unchanged = (node,) if may_skip else ()
    if call.kind == "delete":
        return (*unchanged, logs.empty)
    if call.expected_head is not None and call.expected_head != node.length:
        return unchanged
    if call.kind == "append":
        after = logs.extend(node, call.markers)
        if may_skip:
            return (node, after)
        return (after,) if after.length == call.value else ()
    # truncate
    if call.to_seq > node.length or (not may_skip and call.value != call.to_seq):
        return unchanged
    return (*unchanged, logs.prefix(node, call.to_seq))


def search_log(
    calls: Sequence[LogCall],
    final: Sequence[str],
    *,
    max_steps: int = 1_000_000,
    max_configurations: int = 20_000,
) -> SearchResult:
    """Is there a linearization of ``calls`` that ends with the log ``final``?

    ``final`` is a full read taken after every call returned (or its process
    was killed); it is checked as one more call.
    """
    logs = _Logs()
    last = max((max(c.invoked, c.completed or c.invoked) for c in calls), default=0)
    everything = [*calls, LogCall("read", last + 1, last + 2, "ok", events=tuple(final))]
    pure = [_is_pure(c) for c in everything]
    timeline: list[tuple[int, int, int]] = []
    for index, call in enumerate(everything):
        timeline.append((call.invoked, 0, index))
        # No response: the call may take effect at any time until the end, or never.
        timeline.append((call.completed if call.completed is not None else last + 3, 1, index))
    # At equal times invocations come first, so touching calls count as concurrent.
    timeline.sort()

    configs: set[tuple[_Node, frozenset[int]]] = {(logs.empty, frozenset())}
    in_flight: set[int] = set()
    steps = 0

    def absorb(node: _Node, placed: frozenset[int]) -> frozenset[int]:
        # Place every in-flight pure call that fits this log now: placing it
        # later could only need the same log again.
        fitting = [
            i for i in in_flight if pure[i] and i not in placed and _fits(node, everything[i])
        ]
        return placed.union(fitting) if fitting else placed

    for _, is_response, index in timeline:
        if not is_response:
            in_flight.add(index)
            if pure[index]:
                configs = {(node, absorb(node, placed)) for node, placed in configs}
            continue
        survivors: set[tuple[_Node, frozenset[int]]] = set()
        for node, placed in configs:
            if index in placed:
                survivors.add((node, placed - {index}))
                continue
            # Place other in-flight calls, in any order, until this one fits.
            stack = [(node, placed)]
            seen = {(node, placed)}
            while stack:
                here, done = stack.pop()
                for other in in_flight:
                    if other in done or pure[other]:
                        continue
                    for after in _successors(logs, here, everything[other]):
                        steps += 1
                        now = done | {other}
                        if after is not here:
                            now = absorb(after, now)
                        if index in now:
                            survivors.add((after, now - {index}))
                        elif (after, now) not in seen:
                            seen.add((after, now))
                            stack.append((after, now))
                if steps > max_steps or len(survivors) > max_configurations:
                    return SearchResult("undecided", steps)
        in_flight.discard(index)
        if not survivors:
            candidates = sorted({(n.length, logs.tail(n, 4)) for n, _ in configs})[:3]
            return SearchResult(
                "violation",
                steps,
                failed_at=index,
                in_flight=tuple(sorted(in_flight)),
                candidates=tuple(candidates),
            )
        configs = survivors
    return SearchResult("linearizable", steps)
