"""Property tests of the sequential model against a deliberately naive restatement.

`NaiveStore` below re-derives every answer from the rule statements with a plain
dict of lists and a recency list. It must stay independent of spec/model.py: no
model helpers, no validation functions, no logical clock. An oracle checked
against code it shares agrees with its own bugs, and a wrong model makes every
backend "conform" to the wrong thing. Only the event and error classes are
shared, because they are the vocabulary both sides speak.

Strategies draw from a few fixed ids and events so that failures shrink to short,
readable programs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from checkpointspec.spec import (
    AssistantMessage,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    InvalidArgumentError,
    ModelHandle,
    SessionEvent,
    SpecModel,
    Summary,
    ToolCall,
    ToolResult,
    UnsupportedOperationError,
    UserPrompt,
)
from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

VALID_IDS = ("a", "b", "c")
INVALID_IDS = ("", "nul\x00")
GOOD_EVENTS = (
    UserPrompt("hi"),
    UserPrompt("hi"),  # equal events must still get their own seqs
    AssistantMessage("ok", (ToolCall("t1", "ls", "{}"),)),
    ToolResult("t1", "out"),
    Summary("sum", 1, 10, 2),
)
UNSTORABLE = UserPrompt("\ud800")
NOT_AN_EVENT = "not an event"

valid_ids = st.sampled_from(VALID_IDS)
session_ids = st.sampled_from(VALID_IDS + INVALID_IDS)
good_batches = st.lists(st.sampled_from(GOOD_EVENTS), max_size=3)
batches = st.one_of(
    good_batches,
    st.lists(st.sampled_from((*GOOD_EVENTS, UNSTORABLE, NOT_AN_EVENT)), min_size=1, max_size=3),
    st.just("not a batch"),
)
seqs = st.integers(min_value=-1, max_value=5)
optional_seqs = st.none() | seqs
optional_generations = st.none() | st.integers(min_value=-1, max_value=3)


# -- the naive restatement ---------------------------------------------------------------


@dataclass(frozen=True)
class Ok:
    value: object


@dataclass(frozen=True)
class Refused:
    """An expected error: its class, exact attributes, and for InvalidArgumentError
    the arguments any of which it may name (the order among several bad arguments
    is not part of the contract)."""

    error: type[CheckpointError]
    facts: dict[str, object] = field(default_factory=dict)
    arguments: frozenset[str] = frozenset()


Expected = Ok | Refused


def conflict(sid: str, expected: int, actual: int, kind: str) -> Refused:
    facts = {"session_id": sid, "expected": expected, "actual": actual, "kind": kind}
    return Refused(CheckpointConflictError, facts)


def is_seq(value: object) -> bool:
    return type(value) is int and value >= 0


class NaiveStore:
    """The contract as a dict of lists. Handles are numbers; closed ones are remembered."""

    def __init__(self, truncate: bool, generation: bool) -> None:
        self.can_truncate = truncate
        self.can_generation = generation
        self.logs: dict[str, list[SessionEvent]] = {}  # a key exists <=> the session is listed
        self.recent: list[str] = []  # most recently modified first
        self.generations: dict[str, int] = {}
        self.closed: set[int] = set()

    def _modified(self, sid: str) -> None:
        if sid in self.recent:
            self.recent.remove(sid)
        self.recent.insert(0, sid)

    def _bump(self, sid: str) -> None:
        self.generations[sid] = self.generations.get(sid, 0) + 1

    def _expectations(self, sid: Any, head: Any, generation: Any) -> Refused | None:
        current_generation = self.generations.get(sid, 0)
        if generation is not None and generation != current_generation:
            return conflict(sid, generation, current_generation, "generation")
        current_head = len(self.logs.get(sid, []))
        if head is not None and head != current_head:
            return conflict(sid, head, current_head, "head")
        return None

    def _arguments(self, generation: object, bad: set[str]) -> Expected | None:
        """Unsupported expected_generation, then invalid arguments, in the documented order."""
        if generation is not None and not self.can_generation:
            return Refused(UnsupportedOperationError, {"capability": "generation"})
        if bad:
            return Refused(InvalidArgumentError, arguments=frozenset(bad))
        return None

    def append(self, h: int, sid: Any, batch: Any, head: Any = None, gen: Any = None) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "append"})
        bad = set()
        if sid not in VALID_IDS:
            bad.add("session_id")
        if not isinstance(batch, list) or any(e in (UNSTORABLE, NOT_AN_EVENT) for e in batch):
            bad.add("events")
        if head is not None and not is_seq(head):
            bad.add("expected_head")
        if gen is not None and not is_seq(gen):
            bad.add("expected_generation")
        refused = self._arguments(gen, bad) or self._expectations(sid, head, gen)
        if refused:
            return refused
        if batch:
            self.logs.setdefault(sid, []).extend(batch)
            self._modified(sid)
        return Ok(len(self.logs.get(sid, [])))

    def read(self, h: int, sid: Any, since: Any) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "read"})
        bad = {"session_id"} if sid not in VALID_IDS else set()
        if not is_seq(since):
            bad.add("since_seq")
        if bad:
            return Refused(InvalidArgumentError, arguments=frozenset(bad))
        log = self.logs.get(sid, [])
        return Ok(
            [
                (seq, sid, None if seq == 1 else seq - 1, event)
                for seq, event in enumerate(log, start=1)
                if seq > since
            ]
        )

    def head(self, h: int, sid: Any) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "head"})
        if sid not in VALID_IDS:
            return Refused(InvalidArgumentError, arguments=frozenset({"session_id"}))
        return Ok(len(self.logs.get(sid, [])))

    def list_sessions(self, h: int) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "list_sessions"})
        return Ok(list(self.recent))

    def delete(self, h: int, sid: Any) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "delete"})
        if sid not in VALID_IDS:
            return Refused(InvalidArgumentError, arguments=frozenset({"session_id"}))
        if sid in self.logs:
            del self.logs[sid]
            self.recent.remove(sid)
            self._bump(sid)
        return Ok(None)

    def truncate(
        self, h: int, sid: Any, to_seq: Any, head: Any = None, gen: Any = None
    ) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "truncate"})
        if not self.can_truncate:
            facts: dict[str, object] = {"operation": "truncate", "capability": "truncate"}
            return Refused(UnsupportedOperationError, facts)
        bad = set()
        if sid not in VALID_IDS:
            bad.add("session_id")
        if not is_seq(to_seq):
            bad.add("to_seq")
        if head is not None and not is_seq(head):
            bad.add("expected_head")
        if gen is not None and not is_seq(gen):
            bad.add("expected_generation")
        refused = self._arguments(gen, bad) or self._expectations(sid, head, gen)
        if refused:
            return refused
        log = self.logs.get(sid, [])
        if to_seq > len(log):
            return Refused(InvalidArgumentError, arguments=frozenset({"to_seq"}))
        if to_seq < len(log):
            self.logs[sid] = log[:to_seq]
            self._modified(sid)
            self._bump(sid)
        return Ok(to_seq)

    def generation(self, h: int, sid: Any) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "generation"})
        if not self.can_generation:
            facts: dict[str, object] = {"operation": "generation", "capability": "generation"}
            return Refused(UnsupportedOperationError, facts)
        if sid not in VALID_IDS:
            return Refused(InvalidArgumentError, arguments=frozenset({"session_id"}))
        return Ok(self.generations.get(sid, 0))

    def check_integrity(self, h: int) -> Expected:
        if h in self.closed:
            return Refused(CheckpointerClosedError, {"operation": "check_integrity"})
        return Ok(True)

    def close(self, h: int) -> Expected:
        self.closed.add(h)
        return Ok(None)


# -- comparing outcomes --------------------------------------------------------------------


def plain(value: object) -> object:
    """Model results in the naive store's vocabulary (ModelEvent -> tuple)."""
    if isinstance(value, list):
        return [
            (item.seq, item.session_id, item.parent_seq, item.event)
            if hasattr(item, "parent_seq")
            else item
            for item in value
        ]
    return value


def matches(actual: object, expected: Expected) -> bool:
    if isinstance(expected, Ok):
        return not isinstance(actual, BaseException) and plain(actual) == expected.value
    if type(actual) is not expected.error:
        return False
    if any(getattr(actual, name) != value for name, value in expected.facts.items()):
        return False
    return not expected.arguments or getattr(actual, "argument", None) in expected.arguments


def run(operation: Callable[[], object]) -> object:
    """The model's result, or the CheckpointError it raised."""
    try:
        return operation()
    except CheckpointError as exc:
        return exc


# -- the state machine ---------------------------------------------------------------------


class ModelAgainstNaive(RuleBasedStateMachine):
    """Drives SpecModel and NaiveStore with the same calls through several handles."""

    handles = Bundle("handles")

    @initialize(
        target=handles,
        capabilities=st.sets(st.sampled_from([Capability.TRUNCATE, Capability.GENERATION])),
    )
    def open_store(self, capabilities: set[Capability]) -> object:
        self.model = SpecModel({*capabilities, Capability.DELETE, Capability.LIST})
        self.open_handles: list[ModelHandle] = [self.model.handle(), self.model.handle()]
        self.naive = NaiveStore(
            Capability.TRUNCATE in capabilities, Capability.GENERATION in capabilities
        )
        self.last_generations: dict[str, int] = {}
        return multiple(0, 1)

    def state(self) -> tuple[object, ...]:
        """The store as seen from outside, for "a failing call changes nothing"."""
        generations = (
            {sid: self.model.generation(sid) for sid in VALID_IDS}
            if Capability.GENERATION in self.model.capabilities
            else None
        )
        listed = self.model.session_ids()
        return (
            {sid: self.model.log(sid) for sid in VALID_IDS},
            listed,
            {sid: self.model.modified_at(sid) for sid in listed},
            generations,
        )

    def check(self, h: int, method: str, *args: object) -> None:
        before = self.state()
        expected = getattr(self.naive, method)(h, *args)
        actual = run(lambda: getattr(self.open_handles[h], method)(*args))
        note(f"handle {h}: {method}{args!r} -> {actual!r}")
        assert matches(actual, expected), f"model gave {actual!r}, naive expects {expected!r}"
        if isinstance(actual, BaseException):
            assert self.state() == before, "a failing call changed the store"

    @rule(target=handles)
    def open_handle(self) -> int:
        self.open_handles.append(self.model.handle())
        return len(self.open_handles) - 1

    # Rules with arbitrary arguments reach every error path; the rules after them
    # use valid arguments (and expectations that hold) so that runs get deep enough
    # to truncate, delete and re-append with several sessions alive.

    @rule(h=handles, sid=session_ids, batch=batches, head=optional_seqs, gen=optional_generations)
    def append(self, h: int, sid: str, batch: object, head: int | None, gen: int | None) -> None:
        self.check(h, "append", sid, batch, head, gen)

    @rule(h=handles, sid=session_ids, to_seq=seqs, head=optional_seqs, gen=optional_generations)
    def truncate(self, h: int, sid: str, to_seq: int, head: int | None, gen: int | None) -> None:
        self.check(h, "truncate", sid, to_seq, head, gen)

    @rule(
        h=handles,
        method=st.sampled_from(["read", "head", "delete", "generation"]),
        sid=session_ids,
    )
    def any_session_id(self, h: int, method: str, sid: str) -> None:
        self.check(h, method, sid, *([0] if method == "read" else []))

    @rule(h=handles, sid=valid_ids, batch=good_batches)
    def append_plain(self, h: int, sid: str, batch: list[SessionEvent]) -> None:
        self.check(h, "append", sid, batch)

    @rule(h=handles, sid=valid_ids, batch=good_batches)
    def append_expecting_the_current_state(
        self, h: int, sid: str, batch: list[SessionEvent]
    ) -> None:
        head = len(self.naive.logs.get(sid, []))
        generation = self.naive.generations.get(sid, 0) if self.naive.can_generation else None
        self.check(h, "append", sid, batch, head, generation)

    @rule(h=handles, sid=valid_ids, back=st.integers(min_value=0, max_value=3))
    def truncate_back_from_the_head(self, h: int, sid: str, back: int) -> None:
        self.check(h, "truncate", sid, max(len(self.naive.logs.get(sid, [])) - back, 0))

    @rule(h=handles, sid=valid_ids, since=seqs)
    def read(self, h: int, sid: str, since: int) -> None:
        self.check(h, "read", sid, since)

    @rule(h=handles, sid=valid_ids)
    def head(self, h: int, sid: str) -> None:
        self.check(h, "head", sid)

    @rule(h=handles)
    def list_sessions(self, h: int) -> None:
        self.check(h, "list_sessions")

    @rule(h=handles, sid=valid_ids)
    def delete(self, h: int, sid: str) -> None:
        self.check(h, "delete", sid)

    @rule(h=handles, sid=valid_ids)
    def generation(self, h: int, sid: str) -> None:
        self.check(h, "generation", sid)

    @rule(h=handles)
    def check_integrity(self, h: int) -> None:
        self.check(h, "check_integrity")

    @rule(h=handles)
    def close(self, h: int) -> None:
        self.check(h, "close")

    @invariant()
    def logs_are_contiguous_linked_and_equal_to_the_naive_logs(self) -> None:
        reader = self.model.handle()
        for sid in VALID_IDS:
            log = self.model.log(sid)
            n = len(log)
            assert [stored.seq for stored in log] == list(range(1, n + 1))  # SEQ-001
            assert [stored.parent_seq for stored in log] == [None, *range(1, n)][:n]  # SEQ-002
            assert all(stored.session_id == sid for stored in log)
            assert reader.head(sid) == len(reader.read(sid)) == n  # HEAD-001
            assert [stored.event for stored in log] == self.naive.logs.get(sid, [])

    @invariant()
    def listing_is_exactly_the_existing_sessions_by_recency(self) -> None:
        listed = self.model.session_ids()
        assert len(set(listed)) == len(listed)
        # Existing: holds events, or was truncated to 0 and not deleted since (LIST-001, TRUNC-005).
        assert set(listed) == set(self.naive.logs)
        assert {sid for sid in VALID_IDS if self.model.log(sid)} <= set(listed)
        assert listed == self.naive.recent  # LIST-002
        clocks = [self.model.modified_at(sid) for sid in listed]
        assert clocks == sorted(clocks, reverse=True)

    @invariant()
    def generations_never_decrease(self) -> None:
        if Capability.GENERATION not in self.model.capabilities:
            return
        for sid in VALID_IDS:
            current = self.model.generation(sid)
            assert current >= self.last_generations.get(sid, 0)  # GEN-001
            # The naive store steps by 1, the smallest step GEN-001 allows; the model
            # takes the same step (pinned in test_model.py).
            assert current == self.naive.generations.get(sid, 0)
            self.last_generations[sid] = current


ModelAgainstNaive.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None
)
TestModelAgainstNaive = ModelAgainstNaive.TestCase


# -- targeted properties --------------------------------------------------------------------


@given(st.lists(good_batches, max_size=8))
def test_seq_001_any_sequence_of_batches_gives_contiguous_seqs(
    batch_list: list[list[SessionEvent]],
) -> None:
    h = SpecModel().handle()
    heads = [h.append("s", batch) for batch in batch_list]
    expected_heads, total = [], 0
    for batch in batch_list:
        total += len(batch)
        expected_heads.append(total)
    assert heads == expected_heads  # SEQ-003, empty batches included (APPEND-001)
    log = h.read("s")
    assert [stored.seq for stored in log] == list(range(1, total + 1))
    assert [stored.event for stored in log] == [e for batch in batch_list for e in batch]


@given(st.lists(st.sampled_from(GOOD_EVENTS), max_size=8), st.data())
def test_trunc_001_truncate_keeps_exactly_the_prefix(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    h = SpecModel({Capability.TRUNCATE}).handle()
    h.append("s", events)
    before = h.read("s")
    to_seq = data.draw(st.integers(min_value=0, max_value=len(events)), label="to_seq")
    assert h.truncate("s", to_seq) == to_seq
    assert h.read("s") == before[:to_seq]
    assert h.head("s") == to_seq


@given(st.lists(st.sampled_from(GOOD_EVENTS), max_size=6), st.integers(min_value=0, max_value=8))
def test_read_001_read_since_yields_exactly_the_later_seqs(
    events: list[SessionEvent], since: int
) -> None:
    h = SpecModel().handle()
    h.append("s", events)
    everything = h.read("s")
    assert h.read("s", since) == [stored for stored in everything if stored.seq > since]
