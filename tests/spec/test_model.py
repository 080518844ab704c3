"""Unit tests of the sequential model (`SpecModel`, `ModelHandle`), rule by rule.

The model is the oracle every backend is compared against, so each transition and
each error path is pinned here. Expected values are worked out from the rule
statements in spec/rules.py and the docstrings in spec/protocol.py, never copied
from a run of the model. Test names start with the rule id they check.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from checkpointspec.spec import (
    AssistantMessage,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    InvalidArgumentError,
    ModelEvent,
    ModelHandle,
    SessionEvent,
    SpecModel,
    ToolCall,
    ToolResult,
    UnsupportedOperationError,
    UserPrompt,
)
from helpers import ev

ALL = frozenset(Capability)
NO_TRUNCATE = ALL - {Capability.TRUNCATE}
NO_GENERATION = ALL - {Capability.GENERATION}
NO_DELETE = ALL - {Capability.DELETE}
NO_LIST = ALL - {Capability.LIST}
IDS = ("a", "b", "c", "ghost")
"""Every session id the snapshot looks at; "ghost" is never written."""


def populated(capabilities: frozenset[Capability] = ALL) -> SpecModel:
    """A store in a known state, built from the transitions tested below.

    a: events 1..3 (generation 0); c: appended, then deleted (generation 1);
    b: one event, the most recently modified session. Built with every
    capability, then narrowed to ``capabilities``.
    """
    store = SpecModel(ALL)
    h = store.handle()
    h.append("a", [ev(1), ev(2), ev(3)])
    h.append("c", [ev(4)])
    h.delete("c")
    h.append("b", [ev(5)])
    store.capabilities = capabilities
    return store


def snapshot(store: SpecModel) -> dict[str, Any]:
    """Everything a caller can observe about the store: logs, listing, clocks, generations."""
    listed = store.session_ids()
    state: dict[str, Any] = {
        "logs": {sid: store.log(sid) for sid in IDS},
        "listed": listed,
        "modified_at": {sid: store.modified_at(sid) for sid in listed},
    }
    if Capability.GENERATION in store.capabilities:
        state["generations"] = {sid: store.generation(sid) for sid in IDS}
    return state


def facts(err: BaseException, names: dict[str, object]) -> dict[str, object]:
    return {name: getattr(err, name) for name in names}


def conflict(err: CheckpointConflictError) -> tuple[str, int, int, str]:
    return (err.session_id, err.expected, err.actual, err.kind)


class Call(NamedTuple):
    """One operation on a handle, printable as a test id."""

    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]

    def __call__(self, handle: ModelHandle) -> object:
        return getattr(handle, self.method)(*self.args, **self.kwargs)


def call(method: str, *args: object, **kwargs: object) -> Call:
    return Call(method, args, kwargs)


# -- sequence numbers -----------------------------------------------------------------


def test_seq_001_seqs_start_at_1_and_continue_across_batches() -> None:
    h = SpecModel().handle()
    h.append("s", [ev(1), ev(2)])
    h.append("s", [ev(3)])
    h.append("s", [ev(4), ev(5), ev(6)])
    assert [stored.seq for stored in h.read("s")] == [1, 2, 3, 4, 5, 6]


def test_seq_002_parent_seq_is_previous_seq_and_none_for_the_first() -> None:
    h = SpecModel().handle()
    h.append("s", [ev(1), ev(2)])
    h.append("s", [ev(3)])
    assert [stored.parent_seq for stored in h.read("s")] == [None, 1, 2]


def test_seq_003_append_returns_the_new_head() -> None:
    h = SpecModel().handle()
    assert h.append("s", [ev(1), ev(2)]) == 2
    assert h.append("s", [ev(3)]) == 3
    assert h.append("t", [ev(4)]) == 1


def test_seq_004_stored_events_carry_session_id_and_the_event_itself() -> None:
    h = SpecModel().handle()
    batch: list[SessionEvent] = [
        ev(1),
        AssistantMessage("", (ToolCall("t1", "ls", "{}"),)),
        ToolResult("t1", ""),
    ]
    h.append("s", batch)
    assert h.read("s") == [
        ModelEvent(1, "s", None, batch[0]),
        ModelEvent(2, "s", 1, batch[1]),
        ModelEvent(3, "s", 2, batch[2]),
    ]


def test_id_002_sessions_have_independent_logs() -> None:
    h = SpecModel().handle()
    h.append("a/b", [ev(1), ev(2)])
    assert h.append("a_b", [ev(3)]) == 1
    assert h.append("A/b", [ev(4)]) == 1
    assert h.append("a/b", [ev(5)]) == 3
    assert [s.event for s in h.read("a/b")] == [ev(1), ev(2), ev(5)]
    assert [s.event for s in h.read("a_b")] == [ev(3)]
    assert [s.event for s in h.read("A/b")] == [ev(4)]


# -- read / head ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("since_seq", "expected_seqs"),
    [(0, [1, 2, 3]), (1, [2, 3]), (2, [3]), (3, []), (4, []), (1000, [])],
)
def test_read_001_since_seq_is_exclusive(since_seq: int, expected_seqs: list[int]) -> None:
    h = populated().handle()
    assert [stored.seq for stored in h.read("a", since_seq)] == expected_seqs


def test_read_002_unknown_session_reads_empty_and_is_not_created() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    assert h.read("ghost") == []
    assert h.read("ghost", 5) == []
    assert h.head("ghost") == 0
    assert snapshot(store) == before


def test_read_and_log_return_copies_the_caller_cannot_change() -> None:
    store = populated()
    h = store.handle()
    h.read("a").clear()
    store.log("a").clear()
    assert h.head("a") == 3
    assert len(store.log("a")) == 3


def test_head_001_head_is_last_seq_and_0_when_unknown_deleted_or_truncated_to_0() -> None:
    store = populated()
    h = store.handle()
    assert h.head("a") == 3
    assert h.head("b") == 1
    assert h.head("c") == 0  # deleted
    assert h.head("ghost") == 0  # never written
    h.truncate("a", 0)
    assert h.head("a") == 0


# -- empty appends ---------------------------------------------------------------------


@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
def test_append_001_empty_batch_on_unknown_session_returns_0_and_creates_nothing(
    empty: list[object] | tuple[object, ...],
) -> None:
    store = populated()
    before = snapshot(store)
    assert store.handle().append("ghost", empty) == 0
    assert store.handle().append("c", empty) == 0  # deleted
    assert snapshot(store) == before


def test_append_001_empty_batch_on_existing_session_returns_head_and_leaves_mtime() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    assert h.append("a", []) == 3
    assert h.append("a", [], expected_head=3) == 3
    # "a" is older than "b"; an empty append must not move it to the front.
    assert snapshot(store) == before


def test_append_001_empty_batch_still_checks_expected_head() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    with pytest.raises(CheckpointConflictError) as info:
        h.append("a", [], expected_head=2)
    assert conflict(info.value) == ("a", 2, 3, "head")
    with pytest.raises(CheckpointConflictError) as info:
        h.append("ghost", [], expected_head=1)
    assert (info.value.expected, info.value.actual) == (1, 0)
    assert snapshot(store) == before


def test_append_001_empty_batch_still_checks_expected_generation() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    with pytest.raises(CheckpointConflictError) as info:
        h.append("c", [], expected_generation=0)
    assert (info.value.kind, info.value.expected, info.value.actual) == ("generation", 0, 1)
    assert h.append("c", [], expected_generation=1) == 0
    assert snapshot(store) == before


# -- conflicts -------------------------------------------------------------------------


def test_append_002_stale_expected_head_conflicts_with_the_head_it_saw() -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(CheckpointConflictError) as info:
        store.handle().append("a", [ev(9)], expected_head=2)
    assert conflict(info.value) == ("a", 2, 3, "head")
    assert snapshot(store) == before


def test_append_002_expected_head_on_unknown_session_is_compared_with_0() -> None:
    store = populated()
    h = store.handle()
    with pytest.raises(CheckpointConflictError) as info:
        h.append("ghost", [ev(9)], expected_head=1)
    assert (info.value.expected, info.value.actual) == (1, 0)
    assert "ghost" not in store.session_ids()
    assert h.append("ghost", [ev(9)], expected_head=0) == 1


def test_append_002_matching_expected_head_appends() -> None:
    h = populated().handle()
    assert h.append("a", [ev(9)], expected_head=3) == 4
    assert h.read("a", 3) == [ModelEvent(4, "a", 3, ev(9))]


def test_handle_001_conflicts_are_detected_across_handles() -> None:
    store = SpecModel()
    first, second = store.handle(), store.handle()
    first.append("s", [ev(1)], expected_head=0)
    with pytest.raises(CheckpointConflictError) as info:
        second.append("s", [ev(2)], expected_head=0)
    assert info.value.actual == 1
    assert [s.event for s in second.read("s")] == [ev(1)]


def test_gen_002_stale_expected_generation_conflicts_and_writes_nothing() -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(CheckpointConflictError) as info:
        store.handle().append("c", [ev(9)], expected_generation=0)
    assert conflict(info.value) == ("c", 0, 1, "generation")
    assert snapshot(store) == before


def test_gen_002_matching_expected_generation_appends() -> None:
    store = populated()
    h = store.handle()
    assert h.append("c", [ev(9)], expected_head=0, expected_generation=1) == 1
    assert h.append("a", [ev(9)], expected_generation=0) == 4


@pytest.mark.parametrize(
    "stale",
    [
        call("append", "c", [ev(9)], expected_head=5, expected_generation=0),
        call("truncate", "a", 1, expected_head=2, expected_generation=1),
    ],
    ids=["append", "truncate"],
)
def test_gen_002_generation_is_checked_before_head(stale: Call) -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(CheckpointConflictError) as info:
        stale(store.handle())
    assert info.value.kind == "generation"
    assert snapshot(store) == before


# -- truncate --------------------------------------------------------------------------


def test_trunc_001_keeps_exactly_the_prefix_and_returns_to_seq() -> None:
    store = populated()
    h = store.handle()
    prefix = store.log("a")[:2]
    assert h.truncate("a", 2) == 2
    assert h.read("a") == prefix
    assert h.head("a") == 2


def test_trunc_001_next_append_continues_at_to_seq_plus_1() -> None:
    h = populated().handle()
    h.truncate("a", 1)
    assert h.append("a", [ev(7), ev(8)]) == 3
    assert h.read("a", 1) == [ModelEvent(2, "a", 1, ev(7)), ModelEvent(3, "a", 2, ev(8))]


def test_trunc_001_truncate_that_removes_events_is_a_modification() -> None:
    store = populated()
    h = store.handle()
    assert store.session_ids() == ["b", "a"]
    old_generation = store.generation("a")
    h.truncate("a", 2)
    assert store.session_ids() == ["a", "b"]
    assert store.modified_at("a") > store.modified_at("b")
    assert store.generation("a") > old_generation


def test_trunc_002_to_seq_beyond_the_head_is_refused() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    for sid, to_seq in [("a", 4), ("b", 2), ("c", 1), ("ghost", 1)]:
        with pytest.raises(InvalidArgumentError) as info:
            h.truncate(sid, to_seq)
        assert info.value.argument == "to_seq"
    assert snapshot(store) == before


def test_trunc_003_stale_expected_head_conflicts() -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(CheckpointConflictError) as info:
        store.handle().truncate("a", 1, expected_head=2)
    assert conflict(info.value) == ("a", 2, 3, "head")
    assert snapshot(store) == before


def test_trunc_003_matching_expected_head_truncates() -> None:
    h = populated().handle()
    assert h.truncate("a", 1, expected_head=3) == 1
    assert h.head("a") == 1


def test_trunc_003_conflict_is_checked_before_the_to_seq_bound() -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(CheckpointConflictError):
        store.handle().truncate("a", 9, expected_head=2)
    assert snapshot(store) == before


@pytest.mark.parametrize("sid", ["ghost", "c"], ids=["never-written", "deleted"])
def test_trunc_004_truncating_an_unknown_session_to_0_creates_nothing(sid: str) -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    assert h.truncate(sid, 0) == 0
    assert h.truncate(sid, 0, expected_head=0) == 0
    assert sid not in store.session_ids()
    # Nothing was removed, so the generation stays where it was (GEN-001).
    assert snapshot(store) == before


def test_trunc_005_truncating_to_the_head_changes_nothing() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    assert h.truncate("a", 3) == 3
    assert h.truncate("b", 1, expected_head=1) == 1
    # Same logs, same order (a stays behind b), same mtimes, same generations.
    assert snapshot(store) == before


def test_trunc_005_truncating_to_0_keeps_the_session_listed_and_empty() -> None:
    store = populated()
    h = store.handle()
    old_generation = store.generation("a")
    assert h.truncate("a", 0) == 0
    assert h.read("a") == []
    assert h.head("a") == 0
    assert h.list_sessions() == ["a", "b"]
    assert store.generation("a") > old_generation


def test_trunc_005_truncating_an_empty_listed_session_to_0_again_changes_nothing() -> None:
    store = populated()
    h = store.handle()
    h.truncate("a", 0)
    h.append("b", [ev(9)])
    before = snapshot(store)
    assert h.truncate("a", 0) == 0
    assert snapshot(store) == before


def test_trunc_001_append_after_truncate_to_0_restarts_at_seq_1() -> None:
    h = populated().handle()
    h.truncate("a", 0)
    assert h.append("a", [ev(9)]) == 1
    assert h.read("a") == [ModelEvent(1, "a", None, ev(9))]


# -- delete ----------------------------------------------------------------------------


def test_delete_001_delete_removes_everything() -> None:
    store = populated()
    h = store.handle()
    h.delete("a")
    assert h.list_sessions() == ["b"]
    assert h.head("a") == 0
    assert h.read("a") == []
    with pytest.raises(KeyError):
        store.modified_at("a")


def test_delete_001_deleting_an_unknown_session_does_nothing() -> None:
    store = populated()
    before = snapshot(store)
    h = store.handle()
    h.delete("ghost")
    h.delete("c")  # already deleted: its generation must not grow again
    assert snapshot(store) == before


def test_delete_002_reappend_restarts_at_1_and_old_events_never_reappear() -> None:
    h = populated().handle()
    h.delete("a")
    assert h.append("a", [ev(9)]) == 1
    assert h.read("a") == [ModelEvent(1, "a", None, ev(9))]
    assert h.list_sessions() == ["a", "b"]


def test_gen_001_generation_starts_at_0_and_append_leaves_it_alone() -> None:
    store = SpecModel(ALL)
    h = store.handle()
    assert h.generation("s") == 0
    h.append("s", [ev(1), ev(2)])
    h.append("s", [], expected_head=2)
    assert h.generation("s") == 0


def test_gen_001_delete_bumps_the_generation_only_when_the_session_existed() -> None:
    store = populated()
    h = store.handle()
    assert h.generation("ghost") == 0
    h.delete("ghost")
    assert h.generation("ghost") == 0
    before = h.generation("a")
    h.delete("a")
    after = h.generation("a")
    assert after > before
    h.delete("a")
    assert h.generation("a") == after


def test_gen_001_delete_of_a_session_truncated_to_0_bumps_the_generation() -> None:
    h = populated().handle()
    h.truncate("a", 0)
    before = h.generation("a")
    h.delete("a")
    assert "a" not in h.list_sessions()
    assert h.generation("a") > before


def test_gen_001_generation_survives_delete_and_reappend() -> None:
    h = populated().handle()
    h.delete("a")
    deleted = h.generation("a")
    assert deleted > 0
    h.append("a", [ev(9)])
    assert h.generation("a") == deleted
    h.truncate("a", 0)
    truncated = h.generation("a")
    assert truncated > deleted
    h.delete("a")
    assert h.generation("a") > truncated


def test_gen_001_truncate_that_removes_nothing_leaves_the_generation() -> None:
    h = populated().handle()
    h.truncate("a", 3)
    h.truncate("ghost", 0)
    assert (h.generation("a"), h.generation("ghost")) == (0, 0)


def test_gen_001_generations_step_by_exactly_one() -> None:
    h = SpecModel(ALL).handle()
    h.append("s", [ev(1), ev(2), ev(3)])
    h.truncate("s", 2)
    assert h.generation("s") == 1
    h.truncate("s", 0)
    assert h.generation("s") == 2
    h.delete("s")
    assert h.generation("s") == 3


# -- capabilities ----------------------------------------------------------------------


def test_cap_001_core_operations_need_no_capability() -> None:
    h = SpecModel().handle()
    assert h.append("s", [ev(1)], expected_head=0) == 1
    assert h.read("s") == [ModelEvent(1, "s", None, ev(1))]
    assert h.head("s") == 1
    assert h.check_integrity() is True


# -- listing ---------------------------------------------------------------------------


def test_list_002_most_recently_modified_first() -> None:
    store = SpecModel(ALL)
    h = store.handle()
    h.append("a", [ev(1), ev(2)])
    h.append("b", [ev(3)])
    h.append("c", [ev(4)])
    assert h.list_sessions() == ["c", "b", "a"]
    h.append("a", [ev(5)])
    assert h.list_sessions() == ["a", "c", "b"]
    h.truncate("b", 0)
    assert h.list_sessions() == ["b", "a", "c"]
    h.truncate("c", 1)  # to the head: not a modification
    h.read("c")
    h.head("c")
    h.append("c", [])
    h.delete("ghost")
    assert h.list_sessions() == ["b", "a", "c"]
    h.delete("a")
    assert h.list_sessions() == ["b", "c"]


def test_list_003_modified_at_grows_with_every_modification() -> None:
    store = SpecModel(ALL)
    h = store.handle()
    h.append("a", [ev(1), ev(2)])
    first = store.modified_at("a")
    h.append("b", [ev(3)])
    second = store.modified_at("b")
    h.append("a", [ev(4)])
    third = store.modified_at("a")
    h.truncate("b", 0)
    fourth = store.modified_at("b")
    assert first < second < third < fourth


def test_list_001_each_existing_session_listed_exactly_once() -> None:
    store = SpecModel(ALL)
    h = store.handle()
    for sid in ["x", "y", "x", "z", "y", "x"]:
        h.append(sid, [ev(1)])
    assert sorted(h.list_sessions()) == ["x", "y", "z"]


# -- handles and close -----------------------------------------------------------------


def test_handle_001_handles_on_one_store_share_one_log() -> None:
    store = SpecModel(ALL)
    first, second = store.handle(), store.handle()
    assert first is not second
    first.append("s", [ev(1)])
    second.append("s", [ev(2)])
    assert first.read("s") == second.read("s") == store.log("s")
    assert [s.event for s in first.read("s")] == [ev(1), ev(2)]
    second.truncate("s", 1)
    assert first.head("s") == 1
    second.delete("s")
    assert first.list_sessions() == []
    assert first.generation("s") == second.generation("s") == store.generation("s")


CLOSED_CALLS = [
    call("append", "a", [ev(9)]),
    call("append", "a", []),
    call("append", "", "not events", expected_head=-1),
    call("append", "c", [ev(9)], expected_generation=0),
    call("read", "a"),
    call("read", "a", -1),
    call("head", "a"),
    call("head", None),
    call("list_sessions"),
    call("delete", "a"),
    call("delete", ""),
    call("truncate", "a", 1),
    call("truncate", "a", 99, expected_head=2),
    call("generation", "a"),
    call("check_integrity"),
]


@pytest.mark.parametrize("capabilities", [ALL, frozenset()], ids=["all-caps", "no-caps"])
@pytest.mark.parametrize("operation", CLOSED_CALLS, ids=repr)
def test_close_001_every_operation_on_a_closed_handle_raises_closed(
    operation: Call, capabilities: frozenset[Capability]
) -> None:
    # Closed is checked first: before capabilities, arguments and conflicts.
    store = populated(capabilities)
    h = store.handle()
    h.close()
    before = snapshot(store)
    with pytest.raises(CheckpointerClosedError) as info:
        operation(h)
    assert info.value.operation == operation.method
    assert snapshot(store) == before


def test_close_001_close_is_idempotent() -> None:
    store = populated()
    h = store.handle()
    before = snapshot(store)
    h.close()
    h.close()
    assert h.closed is True
    with pytest.raises(CheckpointerClosedError):
        h.head("a")
    assert snapshot(store) == before


def test_close_002_closing_one_handle_leaves_the_others_working() -> None:
    store = SpecModel(ALL)
    first, second = store.handle(), store.handle()
    first.append("s", [ev(1)])
    first.close()
    assert second.closed is False
    assert [s.event for s in second.read("s")] == [ev(1)]
    assert second.append("s", [ev(2)], expected_head=1) == 2
    assert second.check_integrity() is True
    assert store.handle().head("s") == 2


# -- every failing call leaves the store unchanged ---------------------------------------

BAD_SESSION_IDS = [
    pytest.param("", id="empty"),
    pytest.param("a\x00", id="nul"),
    pytest.param("x" * 257, id="257-chars"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(b"a", id="bytes"),
    pytest.param(None, id="none"),
    pytest.param(1, id="int"),
]

SESSION_ID_CALLS = {
    "append": lambda sid: call("append", sid, [ev(9)]),
    "append-empty": lambda sid: call("append", sid, []),
    "read": lambda sid: call("read", sid),
    "head": lambda sid: call("head", sid),
    "delete": lambda sid: call("delete", sid),
    "truncate": lambda sid: call("truncate", sid, 0),
    "generation": lambda sid: call("generation", sid),
}


@pytest.mark.parametrize("operation", list(SESSION_ID_CALLS))
@pytest.mark.parametrize("session_id", BAD_SESSION_IDS)
def test_arg_001_bad_session_ids_are_refused_by_every_operation(
    operation: str, session_id: object
) -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError) as info:
        SESSION_ID_CALLS[operation](session_id)(store.handle())
    assert info.value.argument == "session_id"
    assert snapshot(store) == before


BAD_SEQS = [
    pytest.param(-1, id="negative"),
    pytest.param(True, id="true"),
    pytest.param(False, id="false"),
    pytest.param(1.0, id="float"),
    pytest.param("1", id="str"),
]

SEQ_CALLS = {
    "since_seq": lambda v: call("read", "a", v),
    "to_seq": lambda v: call("truncate", "a", v),
    "expected_head": lambda v: call("append", "a", [ev(9)], expected_head=v),
    "expected_generation": lambda v: call("append", "a", [ev(9)], expected_generation=v),
}
TRUNCATE_SEQ_CALLS = {
    "expected_head": lambda v: call("truncate", "a", 1, expected_head=v),
    "expected_generation": lambda v: call("truncate", "a", 1, expected_generation=v),
}


@pytest.mark.parametrize(
    ("argument", "make_call"),
    [*SEQ_CALLS.items(), *TRUNCATE_SEQ_CALLS.items()],
    ids=[*SEQ_CALLS, *(f"truncate-{name}" for name in TRUNCATE_SEQ_CALLS)],
)
@pytest.mark.parametrize("value", BAD_SEQS)
def test_arg_002_bad_seq_arguments_are_refused(
    argument: str, make_call: Any, value: object
) -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError) as info:
        make_call(value)(store.handle())
    assert info.value.argument == argument
    assert snapshot(store) == before


@pytest.mark.parametrize("argument", ["since_seq", "to_seq"])
def test_arg_002_none_is_not_a_seq_where_one_is_required(argument: str) -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError) as info:
        SEQ_CALLS[argument](None)(store.handle())
    assert info.value.argument == argument
    assert snapshot(store) == before


BAD_BATCHES = [
    pytest.param("text", id="str"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(bytearray(b"x"), id="bytearray"),
    pytest.param({"type": "user_prompt", "text": "x"}, id="dict"),
    pytest.param(iter([UserPrompt("x")]), id="iterator"),
    pytest.param(None, id="none"),
    pytest.param(ev(1), id="bare-event"),
    pytest.param([ev(1), "not an event"], id="str-item"),
    pytest.param([ev(1), ToolCall("t", "n", "{}")], id="toolcall-item"),
    pytest.param([ev(1), UserPrompt("\ud800")], id="unstorable-event"),
]


@pytest.mark.parametrize("events", BAD_BATCHES)
@pytest.mark.parametrize("sid", ["a", "ghost"])
def test_arg_003_bad_batches_are_refused_whole(sid: str, events: object) -> None:
    store = populated()
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError) as info:
        store.handle().append(sid, events)
    assert info.value.argument == "events"
    assert snapshot(store) == before


def _unsupported(operation: str, capability: str) -> dict[str, object]:
    return {"operation": operation, "capability": capability}


FAILING_CALLS = [
    # CAP-001: undeclared capabilities refuse loudly.
    pytest.param(
        NO_TRUNCATE,
        call("truncate", "a", 1),
        UnsupportedOperationError,
        _unsupported("truncate", "truncate"),
        id="CAP-001 truncate",
    ),
    pytest.param(
        NO_TRUNCATE,
        call("truncate", "a", 3),
        UnsupportedOperationError,
        _unsupported("truncate", "truncate"),
        id="CAP-001 truncate to head",
    ),
    pytest.param(
        NO_TRUNCATE,
        call("truncate", "ghost", 0),
        UnsupportedOperationError,
        _unsupported("truncate", "truncate"),
        id="CAP-001 truncate unknown",
    ),
    pytest.param(
        NO_DELETE,
        call("delete", "a"),
        UnsupportedOperationError,
        _unsupported("delete", "delete"),
        id="CAP-001 delete",
    ),
    pytest.param(
        NO_DELETE,
        call("delete", ""),
        UnsupportedOperationError,
        _unsupported("delete", "delete"),
        id="CAP-001 delete before arguments",
    ),
    pytest.param(
        NO_LIST,
        call("list_sessions"),
        UnsupportedOperationError,
        _unsupported("list_sessions", "list"),
        id="CAP-001 list_sessions",
    ),
    pytest.param(
        NO_GENERATION,
        call("generation", "a"),
        UnsupportedOperationError,
        _unsupported("generation", "generation"),
        id="CAP-001 generation",
    ),
    pytest.param(
        NO_GENERATION,
        call("append", "a", [ev(9)], expected_generation=0),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="CAP-001 append expected_generation",
    ),
    pytest.param(
        NO_GENERATION,
        call("append", "a", [], expected_generation=0),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="CAP-001 empty append expected_generation",
    ),
    pytest.param(
        NO_GENERATION,
        call("truncate", "a", 1, expected_generation=0),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="CAP-001 truncate expected_generation",
    ),
    # The documented order: closed, unsupported, invalid argument, conflict, to_seq bound.
    pytest.param(
        NO_TRUNCATE,
        call("truncate", "", -1, expected_head="x"),
        UnsupportedOperationError,
        _unsupported("truncate", "truncate"),
        id="order unsupported truncate before invalid arguments",
    ),
    pytest.param(
        NO_GENERATION,
        call("generation", ""),
        UnsupportedOperationError,
        _unsupported("generation", "generation"),
        id="order unsupported generation before invalid session id",
    ),
    pytest.param(
        NO_GENERATION,
        call("append", "", [ev(9)], expected_generation=0),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="order unsupported expected_generation before invalid session id",
    ),
    pytest.param(
        NO_GENERATION,
        call("append", "a", [ev(9)], expected_generation=-1),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="order unsupported expected_generation before its own value",
    ),
    pytest.param(
        NO_GENERATION,
        call("truncate", "a", -1, expected_generation=0),
        UnsupportedOperationError,
        {"capability": "generation"},
        id="order unsupported truncate expected_generation before invalid to_seq",
    ),
    pytest.param(
        ALL,
        call("append", "a", ["x"], expected_head=0),
        InvalidArgumentError,
        {"argument": "events"},
        id="order invalid batch before stale head",
    ),
    pytest.param(
        ALL,
        call("truncate", "a", -1, expected_head=0),
        InvalidArgumentError,
        {"argument": "to_seq"},
        id="order invalid to_seq before stale head",
    ),
    pytest.param(
        ALL,
        call("append", "c", [ev(9)], expected_head=5, expected_generation=0),
        CheckpointConflictError,
        {"kind": "generation", "expected": 0, "actual": 1},
        id="order stale generation before stale head",
    ),
    pytest.param(
        ALL,
        call("truncate", "a", 9, expected_head=2),
        CheckpointConflictError,
        {"kind": "head", "expected": 2, "actual": 3},
        id="order stale head before to_seq beyond head",
    ),
    pytest.param(
        ALL,
        call("truncate", "ghost", 1, expected_head=0),
        InvalidArgumentError,
        {"argument": "to_seq"},
        id="TRUNC-002 unknown session beyond head",
    ),
]


@pytest.mark.parametrize(("capabilities", "operation", "error", "expected_facts"), FAILING_CALLS)
def test_failing_calls_raise_the_documented_error_and_change_nothing(
    capabilities: frozenset[Capability],
    operation: Call,
    error: type[CheckpointError],
    expected_facts: dict[str, object],
) -> None:
    store = populated(capabilities)
    before = snapshot(store)
    with pytest.raises(error) as info:
        operation(store.handle())
    assert type(info.value) is error
    assert facts(info.value, expected_facts) == expected_facts
    assert snapshot(store) == before


def test_unsupported_operation_names_the_method_it_refused() -> None:
    # UnsupportedOperationError.operation "is the method name"; for the
    # expected_generation argument the model names the method and the argument.
    h = populated(NO_GENERATION).handle()
    with pytest.raises(UnsupportedOperationError) as append_info:
        h.append("a", [ev(9)], expected_generation=0)
    assert append_info.value.operation == "append"
    with pytest.raises(UnsupportedOperationError) as truncate_info:
        h.truncate("a", 1, expected_generation=0)
    assert truncate_info.value.operation == "truncate"


def test_expected_generation_none_needs_no_generation_capability() -> None:
    h = populated(NO_GENERATION).handle()
    assert h.append("a", [ev(9)], expected_generation=None) == 4
    assert h.truncate("a", 1, expected_generation=None) == 1


def test_copy_is_independent_of_the_original() -> None:
    original = SpecModel(ALL)
    original.append("s", [ev(1)])
    clone = original.copy()
    clone.append("s", [ev(2)])
    clone.truncate("t", 0)
    clone.delete("s")
    assert original.head("s") == 1
    assert original.generation("s") == 0
    assert clone.head("s") == 0
    assert clone.generation("s") == 1
