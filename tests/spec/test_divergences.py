"""The table of divergences: a divergence's rule depends on the divergence alone (spec/divergences.py)."""

from __future__ import annotations

import pytest
from checkpointspec.spec import (
    CheckpointConflictError,
    CheckpointerClosedError,
    InvalidArgumentError,
    ModelEvent,
    ReasonCode,
    SessionLockedError,
    StoredEvent,
    UnsupportedOperationError,
    UserPrompt,
)
from checkpointspec.spec.divergences import (
    TO_HEAD_CHANGED,
    UNCOMPARED_TRUNCATE,
    WRONG_GENERATION,
    Context,
    crash,
    crash_named,
    evidence_of,
    in_context,
    of_answer,
    of_error,
    of_listing,
    of_read,
    same_fold,
)

TS = "2026-01-01T00:00:00+00:00"


def _model(*texts: str, sid: str = "s") -> list[ModelEvent]:
    return [
        ModelEvent(n, sid, n - 1 if n > 1 else None, UserPrompt(t))
        for n, t in enumerate(texts, start=1)
    ]


def _stored(events: list[ModelEvent], *, renumber: int = 0) -> list[StoredEvent]:
    return [
        StoredEvent(
            seq=e.seq + renumber,
            session_id=e.session_id,
            parent_seq=e.parent_seq,
            ts=TS,
            event=e.event,
        )
        for e in events
    ]


def test_a_read_yielding_the_event_at_since_seq_is_read_001() -> None:
    log = _model("a", "b", "c", "d")
    divergence = of_read(2, _stored(log[1:]), log[2:])
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == (
        "READ-001",
        "read yielded an event at or before since_seq",
    )
    assert (divergence.expected, divergence.got) == ("seqs [3, 4]", "seqs [2, 3, 4]")


def test_seqs_numbered_from_zero_are_seq_001() -> None:
    log = _model("a", "b")
    divergence = of_read(0, _stored(log, renumber=-1), log)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == ("SEQ-001", "a log's seqs do not start at 1")


def test_the_logs_seqs_out_of_order_are_read_001() -> None:
    log = _model("a", "b", "c")
    divergence = of_read(0, list(reversed(_stored(log))), log)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == ("READ-001", "read yielded seqs out of order")


def test_seqs_out_of_order_that_are_not_the_logs_are_judged_by_their_numbering() -> None:
    # A batch numbered from head ^ 1: seq 1, then seq 0 where 2 was due. That the read
    # lists them as stored, out of order, is not the read's fault.
    log = _model("a", "b")
    stored = _stored(log)
    stored[1] = StoredEvent(0, "s", None, TS, UserPrompt("b"))
    divergence = of_read(0, stored, log)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == ("SEQ-001", "a log's seqs do not start at 1")
    assert divergence.got == "seqs [1, 0]"


def test_content_changed_on_the_way_back_is_event_001() -> None:
    log = _model("a ", "b")
    stripped = _stored(_model("a", "b"))
    divergence = of_read(0, stripped, log)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == ("EVENT-001", "an event changed on the way back")


def test_an_event_that_must_not_be_there_is_named_by_its_origin() -> None:
    log = _model("a")
    intruding = _stored(_model("a", "x"))
    divergence = of_read(0, intruding, log, intruder=lambda e: "ID-002")
    assert divergence is not None
    assert divergence.rule == "ID-002"


def test_a_short_read_is_read_001_whatever_check_made_it() -> None:
    log = _model("a", "b", "c")
    divergence = of_read(0, _stored(log[:2]), log)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == (
        "READ-001",
        "read yielded fewer events than the log holds",
    )


def test_the_same_read_is_no_divergence() -> None:
    log = _model("a", "b")
    assert of_read(0, _stored(log), log) is None


@pytest.mark.parametrize(
    ("operation", "expected", "rule"),
    [
        ("append", CheckpointConflictError("s", 1, 2), "APPEND-002"),
        ("truncate", CheckpointConflictError("s", 1, 2), "TRUNC-003"),
        ("append", CheckpointConflictError("s", 1, 2, kind="generation"), "GEN-002"),
        ("head", CheckpointerClosedError("head"), "CLOSE-001"),
        ("delete", UnsupportedOperationError("delete", "delete"), "CAP-001"),
    ],
)
def test_a_refusal_not_made_is_the_rule_requiring_it(
    operation: str, expected: BaseException, rule: str
) -> None:
    divergence = of_error(operation, expected, None)
    assert divergence is not None
    assert divergence.rule == rule


@pytest.mark.parametrize(
    ("operation", "got", "rule"),
    [
        ("append", CheckpointConflictError("s", 1, 1), "APPEND-002"),
        ("head", CheckpointerClosedError("head"), "CLOSE-002"),
        ("truncate", SessionLockedError("s", "truncate"), "MAINT-003"),
        ("delete", UnsupportedOperationError("delete", "delete"), "DELETE-001"),
        ("append", InvalidArgumentError("session_id", "no"), "ID-001"),
        ("append", InvalidArgumentError("events", "no"), "EVENT-001"),
        ("read", OSError("disk"), "READ-001"),
    ],
)
def test_a_refusal_of_a_valid_call_is_named_by_what_it_refused(
    operation: str, got: BaseException, rule: str
) -> None:
    divergence = of_error(operation, None, got)
    assert divergence is not None
    assert divergence.rule == rule


def test_a_conflict_with_other_facts_is_a_divergence() -> None:
    divergence = of_error(
        "append", CheckpointConflictError("s", 1, 2), CheckpointConflictError("s", 1, 3)
    )
    assert divergence is not None
    assert divergence.shape == "append's conflict carries other facts"


def test_answers_are_named_by_their_operation() -> None:
    assert of_answer("append", 3, 3) is None
    head = of_answer("head", 3, 2)
    assert head is not None
    assert (head.rule, head.shape) == ("HEAD-001", "head returned less than the model")
    appended = of_answer("append", 3, 0)
    assert appended is not None
    assert (appended.rule, appended.shape) == ("SEQ-003", "append returned 0")


def test_a_listed_session_is_named_by_what_created_it() -> None:
    assert of_listing(["a", "b"], ["b", "a"]) is None
    created = of_listing(["a", "e"], ["a"], made={"e": ("APPEND-001", "an empty append")})
    assert created is not None
    assert created.rule == "APPEND-001"
    missing = of_listing(["a"], ["a", "b"])
    assert missing is not None
    assert (missing.rule, missing.shape) == (
        "LIST-001",
        "list_sessions left out a session that holds events",
    )


def test_a_session_listed_under_a_folded_id_is_the_empty_append_that_made_it() -> None:
    """An empty append to ``a/b`` that a store both keeps and files as ``a_b``: two
    defects, the listing showing both at once. It is the append's (APPEND-001), the
    folding the other explanation (ID-001), not a third defect of the listing."""
    empty = {"a/b": ("APPEND-001", "an empty append created a session")}
    folded = of_listing(["a_b"], [], made=empty)
    assert folded is not None
    assert (folded.rule, folded.shape) == ("APPEND-001", "an empty append created a session")
    assert folded.otherwise == ("ID-001", "list_sessions listed an id other than as given")
    # An id no store folds into the appended one is a session nothing made.
    phantom = of_listing(["zz"], [], made=empty)
    assert phantom is not None
    assert (phantom.rule, phantom.shape) == (
        "LIST-001",
        "list_sessions listed a session that was never written",
    )
    # A read of an unknown session that made nothing is no empty append.
    read = of_listing(["a_b"], [], made={"a/b": ("READ-002", "read created it")})
    assert read is not None
    assert read.rule == "LIST-001"


def test_ids_a_store_may_take_for_one_fold_alike() -> None:
    assert same_fold("a/b", "a_b")
    assert same_fold("A", "a")
    assert same_fold("caf\u00e9", "cafe\u0301")  # NFC and NFD
    assert not same_fold("a/b", "ab")
    assert not same_fold("s1", "s2")


def test_a_generation_conflict_with_a_wrong_generation_is_gen_001() -> None:
    """The store refused the right expectation, but with a generation of its own: the
    generation is wrong (GEN-001), not the conflict's facts (GEN-002)."""
    due = CheckpointConflictError("s", 0, 1, kind="generation")
    got = CheckpointConflictError("s", 0, 2, kind="generation")
    divergence = of_error("append", due, got)
    assert divergence is not None
    assert (divergence.rule, divergence.shape) == (
        "GEN-001",
        "a conflict shows a generation other than the model's",
    )


def test_a_crash_is_named_by_its_operation_whatever_was_due() -> None:
    """An error outside the contract is the operation's crash, the same in every check,
    whether the call should have succeeded or conflicted; where an argument was invalid
    it is that argument's refusal missing, and on a closed handle the
    CheckpointerClosedError that was due (CLOSE-001)."""
    due = CheckpointConflictError("s", 3, 2)
    crashed = of_error("truncate", due, TypeError("float"))
    assert crashed is not None
    assert (crashed.rule, crashed.shape) == ("TRUNC-001", "truncate raised TypeError")
    invalid = of_error("read", InvalidArgumentError("session_id", "empty"), TypeError("x"))
    assert invalid is not None
    assert invalid.shape == "read did not raise InvalidArgumentError for session_id"
    closed = of_error("append", CheckpointerClosedError("append"), TypeError("not open"))
    assert closed is not None
    assert closed.rule == "CLOSE-001"


def test_a_crash_known_by_its_error_name_has_the_crash_s_name() -> None:
    """Evidence that knows only the class name of what was raised (a worker's last
    line, a recorded history) names the same crash `crash` does, as `of_error` names
    any error where success was due; the contract's refusals, and calls that are no
    operation of the contract, are not crashes."""
    assert crash_named("delete", "TypeError") == crash("delete", TypeError())
    assert crash_named("append", "CorruptStoreError") == (
        "SEQ-003",
        "append raised CorruptStoreError",
    )
    assert crash_named("delete", "CheckpointConflictError") is None
    assert crash_named("read", "InvalidArgumentError") is None
    assert crash_named("open", "TypeError") is None


def test_a_cause_inferred_from_the_calls_before_keeps_what_the_answer_is_alone() -> None:
    log = _model("a")
    plain = of_read(0, [], log)
    assert plain is not None
    assert plain.otherwise is None
    blind = in_context(plain, Context(unseen_writer="open"))
    assert (blind.rule, blind.otherwise) == ("HANDLE-001", ("READ-001", plain.shape))
    lost = in_context(plain, Context(unseen_writer="closed"))
    assert (lost.rule, lost.otherwise) == ("DUR-001", ("READ-001", plain.shape))
    # A cause the calls show for certain is no inference.
    assert in_context(plain, Context(empty_batch=True)).otherwise is None


def test_a_stale_generation_let_through_keeps_a_wrong_generation_as_the_other_explanation() -> None:
    due = CheckpointConflictError("s", 1, 0, kind="generation")
    accepted = of_error("append", due, None)
    # Let through to the head's check, which refuses on its own count.
    judged_head = of_error("append", due, CheckpointConflictError("s", 0, 1))
    for divergence in (accepted, judged_head):
        assert divergence is not None
        assert divergence.rule == "GEN-002"
        assert (
            divergence.shape == "append did not raise CheckpointConflictError (generation conflict)"
        )
        assert divergence.otherwise == (
            "GEN-001",
            "a conflict shows a generation other than the model's",
        )


def test_a_wrong_generation_answer_shows_what_a_conflict_with_one_shows() -> None:
    # A stale expected_generation let through is GEN-001's when the store's generation
    # is seen wrong plainly: by a conflict naming it, or by generation() itself.
    wrong = of_answer("generation", 1, 0)
    assert wrong is not None
    shows = evidence_of("GEN-001", WRONG_GENERATION)
    assert (wrong.rule, wrong.shape) in shows
    assert ("GEN-001", WRONG_GENERATION) in shows
    # A truncate to the head seen acting moved the generation too: its rule explains it.
    assert ("TRUNC-005", TO_HEAD_CHANGED) in shows
    only = evidence_of("TRUNC-001", "truncated events remain")
    assert only == {("TRUNC-001", "truncated events remain")}


def test_a_truncate_letting_an_invalid_expected_head_through_may_never_compare_it() -> None:
    """ARG-002, otherwise TRUNC-003: a truncate that never compares its expected head
    (a store declared without one) refuses no value of it either."""
    due = InvalidArgumentError("expected_head", "negative", reason_code=ReasonCode.NEGATIVE)
    divergence = of_error("truncate", due, None)
    assert divergence is not None
    assert divergence.rule == "ARG-002"
    assert divergence.otherwise == ("TRUNC-003", UNCOMPARED_TRUNCATE)
    # The stale expectation a truncate let through has that very shape.
    stale = of_error("truncate", CheckpointConflictError("s", 1, 2), None)
    assert stale is not None
    assert (stale.rule, stale.shape) == ("TRUNC-003", UNCOMPARED_TRUNCATE)
