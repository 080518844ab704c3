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

The sequential specification is `checkpointspec.spec.SpecModel`, the one every
other check uses: placing a call means running it on a SpecModel that holds the
configuration's log and comparing what the model returns with what the call
returned. Calls that do not change the log are asked as they are (a read, a
head) or, for a conflict, as an empty append (or a truncate to the head) with
the same expected_head, which by APPEND-001 and TRUNC-005 changes nothing and
conflicts exactly when the call did. Logs are also interned as persistent
linked lists of their markers (the same content is the same object), which
makes configurations cheap to compare; one model is moved from log to log with
its own truncate and append, and the answers are remembered per log, so a
branch costs a few events, never a copy of the log. Nothing here does I/O, and
nothing knows about backends.

The search stops after ``max_steps`` transitions or ``max_configurations``
simultaneous configurations and answers ``"undecided"`` rather than run on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import msgspec

from ....spec import (
    Capability,
    CheckpointConflictError,
    CheckpointError,
    ModelEvent,
    SpecModel,
    UserPrompt,
)

__all__ = ["LogCall", "SearchResult", "first_unexplained_observer", "search_log"]

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


_SESSION = "s"  # the search sees one session: the contract never relates two


class _Log:
    """One log, by its markers: the last one and the log before it. Interned by `_Logs`."""

    __slots__ = ("length", "marker", "parent")

    def __init__(self, length: int, marker: str, parent: _Log | None) -> None:
        self.length = length
        self.marker = marker
        self.parent = parent


class _Logs:
    """Every log the search has reached, interned so equal logs are the same `_Log`,
    and one `SpecModel` that holds whichever of them the search is looking at."""

    def __init__(self) -> None:
        self.empty = _Log(0, "", None)
        self._children: dict[tuple[int, str], _Log] = {}
        self.model = SpecModel([Capability.TRUNCATE, Capability.DELETE])
        self.at = self.empty  # the log `model` holds
        self._events: dict[str, UserPrompt] = {}
        self._observed: dict[tuple[_Log, int], bool] = {}
        self._after: dict[tuple[_Log, int], tuple[_Log, ...]] = {}

    def extend(self, node: _Log, markers: Iterable[str]) -> _Log:
        for marker in markers:
            key = (id(node), marker)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = _Log(node.length + 1, marker, node)
            node = child
        return node

    @staticmethod
    def prefix(node: _Log, length: int) -> _Log:
        while node.length > length:
            assert node.parent is not None
            node = node.parent
        return node

    @staticmethod
    def tail(node: _Log, count: int) -> tuple[str, ...]:
        """The last ``count`` markers, oldest first."""
        out: list[str] = []
        while len(out) < count and node.parent is not None:
            out.append(node.marker)
            node = node.parent
        return tuple(reversed(out))

    def event(self, marker: str) -> UserPrompt:
        """The event carrying ``marker`` (one object per marker, however often it is placed)."""
        found = self._events.get(marker)
        if found is None:
            found = self._events[marker] = UserPrompt(marker)
        return found

    def seek(self, node: _Log) -> SpecModel:
        """The model, made to hold ``node``'s log by its own truncate and append."""
        if node is self.at:
            return self.model
        common = self.prefix(self.at, node.length)
        target = self.prefix(node, common.length)
        while common is not target:
            assert common.parent is not None
            assert target.parent is not None
            common, target = common.parent, target.parent
        if common.length < self.at.length:
            self.model.truncate(_SESSION, common.length)
        missing: list[str] = []
        step = node
        while step is not common:
            assert step.parent is not None
            missing.append(step.marker)
            step = step.parent
        if missing:
            self.model.append(_SESSION, [self.event(m) for m in reversed(missing)])
        self.at = node
        return self.model

    def intern(self, before: _Log) -> _Log:
        """The `_Log` of what the model holds after one call on the log ``before``.

        A call changes a log only at its end (appends add events, truncates and
        deletes cut them), so the two share a prefix that ends where ``before``'s
        last kept event still is.
        """
        model = self.model
        node = self.prefix(before, min(before.length, model.head(_SESSION)))
        while True:
            # From the event the prefix ends with (if any) to the end of the log.
            tail = model.read(_SESSION, max(node.length - 1, 0))
            if node.length == 0 or _marker(tail[0]) == node.marker:
                break
            assert node.parent is not None
            node = node.parent
        self.at = self.extend(node, map(_marker, tail[1:] if node.length else tail))
        return self.at

    def observes(self, node: _Log, index: int, call: LogCall) -> bool:
        """Does a call that leaves the log alone return what it returned, on ``node``?"""
        key = (node, index)
        fits = self._observed.get(key)
        if fits is None:
            if len(self._observed) > _REMEMBERED:
                self._observed.clear()
            fits = self._observed[key] = _observes(self.seek(node), call)
        return fits

    def after(self, node: _Log, index: int, call: LogCall) -> tuple[_Log, ...]:
        """The logs ``call`` may leave on ``node``; () if it cannot be placed there."""
        key = (node, index)
        found = self._after.get(key)
        if found is None:
            if len(self._after) > _REMEMBERED:
                self._after.clear()
            unchanged = (node,) if call.status == "indeterminate" else ()
            applied = _applies(self.seek(node), call, self.event)
            changed = self.intern(node)
            found = self._after[key] = (*unchanged, changed) if applied else unchanged
        return found


_REMEMBERED = 100_000  # answers kept per kind before they are forgotten, to bound memory


def _marker(stored: ModelEvent) -> str:
    event = stored.event
    return event.text if isinstance(event, UserPrompt) else ""


def _observes(model: SpecModel, call: LogCall) -> bool:
    """Ask ``model`` a call that changes nothing (`_is_pure`); does it answer as the call did?"""
    try:
        if call.kind == "read":
            return tuple(map(_marker, model.read(_SESSION, call.since_seq))) == call.events
        if call.kind == "head":
            return model.head(_SESSION) == call.value
        # An append without events changes nothing (APPEND-001), nor does a truncate
        # to the head (TRUNC-005); both still check expected_head.
        if call.kind == "truncate":
            value = model.truncate(_SESSION, model.head(_SESSION), call.expected_head)
        else:
            value = model.append(_SESSION, (), call.expected_head)
    except CheckpointConflictError as conflict:
        return call.status == "conflict" and conflict.actual == call.value
    except CheckpointError:
        return False
    return call.status == "ok" and value == call.value


def _applies(model: SpecModel, call: LogCall, event: Callable[[str], UserPrompt]) -> bool:
    """Run a call that may change the log on ``model``: did it return what the call did?"""
    try:
        if call.kind == "append":
            batch = [event(marker) for marker in call.markers]
            value = model.append(_SESSION, batch, call.expected_head)
        elif call.kind == "truncate":
            value = model.truncate(_SESSION, call.to_seq, call.expected_head)
        else:
            model.delete(_SESSION)
            value = call.value
    except CheckpointError:
        return False
    return call.status == "indeterminate" or value == call.value


def _is_pure(call: LogCall) -> bool:
    """Calls that never change the log: placed eagerly, never branched on."""
    if call.status == "conflict":
        return True
    if call.status != "ok":
        return False
    return call.kind in ("read", "head") or (call.kind == "append" and not call.markers)


def search_log(
    calls: Sequence[LogCall],
    final: Sequence[str],
    *,
    max_steps: int = 1_000_000,
    max_configurations: int = 20_000,
    until: int | None = None,
) -> SearchResult:
    """Is there a linearization of ``calls`` that ends with the log ``final``?

    ``final`` is a full read taken after every call returned (or its process
    was killed); it is checked as one more call. With ``until``, the search
    stops just before the responses at that time and, if something still
    explains the history up to there, answers ``"linearizable"`` with the calls
    then in flight and the logs that explain it as ``in_flight`` and
    ``candidates``.
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

    configs: set[tuple[_Log, frozenset[int]]] = {(logs.empty, frozenset())}
    in_flight: set[int] = set()
    steps = 0

    def absorb(node: _Log, placed: frozenset[int]) -> frozenset[int]:
        # Place every in-flight pure call that fits this log now: placing it
        # later could only need the same log again.
        fitting = [
            i
            for i in in_flight
            if pure[i] and i not in placed and logs.observes(node, i, everything[i])
        ]
        return placed.union(fitting) if fitting else placed

    for at, is_response, index in timeline:
        if until is not None and (at, is_response) >= (until, 1):
            return SearchResult(
                "linearizable",
                steps,
                in_flight=tuple(sorted(in_flight)),
                candidates=_candidates(logs, configs),
            )
        if not is_response:
            in_flight.add(index)
            if pure[index]:
                configs = {(node, absorb(node, placed)) for node, placed in configs}
            continue
        survivors: set[tuple[_Log, frozenset[int]]] = set()
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
                    for after in logs.after(here, other, everything[other]):
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
            return SearchResult(
                "violation",
                steps,
                failed_at=index,
                in_flight=tuple(sorted(in_flight)),
                candidates=_candidates(logs, configs),
            )
        configs = survivors
    return SearchResult("linearizable", steps)


def _candidates(
    logs: _Logs, configs: Iterable[tuple[_Log, frozenset[int]]]
) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Up to three of the logs ``configs`` hold, shortest first, by length and last markers."""
    return tuple(sorted({(node.length, logs.tail(node, 4)) for node, _ in configs})[:3])


class _Undecided(Exception):
    """A search of `first_unexplained_observer` ran out of its steps."""


def first_unexplained_observer(
    calls: Sequence[LogCall],
    final: Sequence[str],
    *,
    max_steps: int = 1_000_000,
    max_configurations: int = 20_000,
    suspects: int = 24,
) -> SearchResult | None:
    """For a history `search_log` found no order for: the call that only looked at the
    log (a read, a head, a conflict) whose answer is the one at fault.

    The search fails at the first response no configuration survives, which is not
    always the call at fault: a head answered from a stale cache may fit a wrong
    order of the writes in flight, and the search then fails at a later read that
    the right order explains. Calls that change nothing only add constraints, so
    with the writes (and the final log) explained on their own, the observers taken
    in invocation order explain everything up to one of them and nothing from it
    on; a bisection finds that one. It contradicts some answer before it, or is
    wrong itself: of it and the ``suspects`` observers invoked just before it, those
    whose answer left out lets the rest up to it be explained are the suspects.
    The one to blame is the suspect whose answer left out lets the whole history be
    explained (the others' answers agree with one order of the writes and it does
    not); between suspects alike, the one invoked first, as a stale answer is wrong
    when it is given and the answers after it see the log as it is.

    The answer is a ``"violation"`` whose ``failed_at`` is that call's index in
    ``calls``, with the calls in flight and the logs that explained the rest when it
    returned. None when the writes alone have no order (the fault is theirs: the
    search's own answer stands) or when the searches, which share ``max_steps``,
    stopped undecided.
    """
    pure = [_is_pure(call) for call in calls]
    writes = [i for i, is_pure in enumerate(pure) if not is_pure]
    observers = sorted(
        (i for i, is_pure in enumerate(pure) if is_pure), key=lambda i: (calls[i].invoked, i)
    )
    steps = 0

    def search(chosen: Iterable[int], until: int | None = None) -> tuple[list[int], SearchResult]:
        # Every search shares the one budget of steps: undecided ends the whole blame.
        nonlocal steps
        indices = sorted(chosen)
        result = search_log(
            [calls[i] for i in indices],
            final,
            max_steps=max_steps - steps,
            max_configurations=max_configurations,
            until=until,
        )
        steps += result.steps
        if result.verdict == "undecided":
            raise _Undecided
        return indices, result

    def explained(chosen: Iterable[int]) -> bool:
        return search(chosen)[1].verdict == "linearizable"

    try:
        if not observers or not explained(writes):
            return None
        fits, breaks = 0, len(observers)  # observers[:fits] are explained, [:breaks] not
        while breaks - fits > 1:
            middle = (fits + breaks) // 2
            if explained([*writes, *observers[:middle]]):
                fits = middle
            else:
                breaks = middle
        upto = [*writes, *observers[:breaks]]
        suspected = [
            p
            for p in range(max(0, fits - suspects), fits)
            if explained(i for i in upto if i != observers[p])
        ] + [fits]
        if len(suspected) > 1:
            everything = [*writes, *observers]
            alone = [p for p in suspected if explained(i for i in everything if i != observers[p])]
            suspected = alone or suspected
        at_fault = observers[suspected[0]]
        indices, before = search(
            (i for i in upto if i != at_fault), until=calls[at_fault].completed
        )
    except _Undecided:
        return None
    if before.verdict != "linearizable":
        return None
    return SearchResult(
        "violation",
        steps,
        failed_at=at_fault,
        in_flight=tuple(indices[i] for i in before.in_flight if i < len(indices)),
        candidates=before.candidates,
    )
