"""The event ledger: each case is a tiny history and the rule the ledger must name.

A marker stands for one event; the writer is a small number standing for the
handle (or the process) that appended it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from checkpointspec.conformance.engines.contract.ledger import Intrusion, Ledger
from checkpointspec.spec import (
    CheckpointConflictError,
    InvalidArgumentError,
    ReasonCode,
)

Scenario = Callable[[Ledger[int]], None]


def appended_to_another_session(ledger: Ledger[int]) -> None:
    ledger.append("t", ["x"], 0)


def deleted(ledger: Ledger[int]) -> None:
    ledger.append("s", ["x"], 0)
    ledger.remove(["x"], "deleted")


def truncated_away(ledger: Ledger[int]) -> None:
    ledger.append("s", ["a", "x"], 0)
    ledger.remove(["x"], "truncated")


def refused_with_a_head_conflict(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["x"], 1, CheckpointConflictError("s", 0, 2))


def refused_with_a_generation_conflict(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["x"], 1, CheckpointConflictError("s", 0, 1, kind="generation"))


def refused_for_a_bad_expected_head(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["x"], 1, InvalidArgumentError("expected_head", "must be >= 0"))


def refused_for_a_bad_session_id(ledger: Ledger[int]) -> None:
    error = InvalidArgumentError("session_id", "must not be empty", ReasonCode.EMPTY, "ARG-001")
    ledger.refuse("s", ["x"], 1, error)


def refused_for_a_bad_batch(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["x"], 1, InvalidArgumentError("events", "cannot be serialised"))


def raised_half_way(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["w", "x"], 1, OSError("disk full"))


def lost_a_race(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["x"], 1, CheckpointConflictError("s", 3, 5), "APPEND-004")


@pytest.mark.parametrize(
    ("scenario", "rule_id", "reason"),
    [
        (appended_to_another_session, "ID-002", "which was appended to session 't'"),
        (deleted, "DELETE-002", "which was deleted"),
        (truncated_away, "TRUNC-001", "which was truncated away"),
        (refused_with_a_head_conflict, "APPEND-002", "raised CheckpointConflictError"),
        (refused_with_a_generation_conflict, "GEN-002", "raised CheckpointConflictError"),
        (refused_for_a_bad_expected_head, "ARG-002", "raised InvalidArgumentError"),
        (refused_for_a_bad_session_id, "ARG-001", "raised InvalidArgumentError"),
        (refused_for_a_bad_batch, "APPEND-003", "raised InvalidArgumentError"),
        (raised_half_way, "APPEND-003", "raised OSError"),
        (lost_a_race, "APPEND-004", "raised CheckpointConflictError"),
    ],
)
def test_an_event_that_must_not_be_in_the_log_names_its_rule(
    scenario: Scenario, rule_id: str, reason: str
) -> None:
    ledger: Ledger[int] = Ledger()
    scenario(ledger)
    found = ledger.intrusion("x", "s")
    assert found is not None
    assert (found.rule_id, found.marker) == (rule_id, "x")
    assert reason in found.reason
    assert found.entry is ledger.get("x")


@pytest.mark.parametrize("fate", ["acknowledged", "unknown"])
def test_an_event_appended_to_this_session_is_left_to_the_model(fate: str) -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["x"], 0, fate)  # type: ignore[arg-type]
    assert ledger.intrusion("x", "s") is None
    assert ledger.intrusion("never appended", "s") is None
    assert ledger.intrusion(None, "s") is None


def test_the_first_intrusion_of_a_log() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["a", "b"], 0)
    deleted_too = ["c"]
    ledger.append("s", deleted_too, 1)
    ledger.remove(deleted_too, "deleted")
    ledger.append("t", ["d"], 1)
    found = ledger.first_intrusion(["a", None, "c", "d"], "s")
    assert found is not None
    assert (found.rule_id, found.marker, found.entry and found.entry.writer) == (
        "DELETE-002",
        "c",
        1,
    )
    assert ledger.first_intrusion(["a", "b"], "s") is None


def test_the_writer_of_an_event() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["x", "y"], 7)
    assert ledger.writer("y") == 7
    with pytest.raises(KeyError):
        ledger.writer("never appended")


def test_a_marker_is_entered_once() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["x"], 0)
    with pytest.raises(ValueError, match="two appends"):
        ledger.append("t", ["y", "x"], 1)


def test_removing_an_unknown_event_changes_nothing() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.remove(["x", None], "deleted")
    assert len(ledger) == 0


# -- sequences: a read or a final log ---------------------------------------------------------


def _ledger() -> Ledger[int]:
    """Batch a1 a2 a3 by writer 1, b1 by writer 2, c1 (conflicted) by 3, t1 in session t."""
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["a1", "a2", "a3"], 1)
    ledger.append("s", ["b1"], 2)
    ledger.refuse("s", ["c1"], 3, CheckpointConflictError("s", 0, 4))
    ledger.append("t", ["t1"], 4)
    return ledger


def _check(markers: str, **options: bool) -> Intrusion[int] | None:
    return _ledger().check_sequence(
        markers.split(), "s", where="the log", broken_rule="APPEND-003", **options
    )


@pytest.mark.parametrize("markers", ["", "a1 a2 a3", "b1 a1 a2 a3", "a1 a2 a3 b1"])
def test_whole_batches_in_order_pass(markers: str) -> None:
    assert _check(markers) is None


@pytest.mark.parametrize(
    ("markers", "rule_id", "writer", "says"),
    [
        ("a1 a2 a3 z9", "EVENT-001", None, "z9, which no process appended"),
        ("a1 a2 a3 t1", "ID-002", 4, "t1, which was appended to session 't'"),
        ("b1 c1", "APPEND-002", 3, "c1, from an append that raised CheckpointConflictError"),
        ("b1 b1", "APPEND-003", 2, "b1 twice"),
        ("a1 a2 b1", "APPEND-003", 1, "only a1, a2 of the batch a1, a2, a3, followed by b1"),
        ("b1 a1 a2", "APPEND-003", 1, "ends with a1, a2, part of the batch a1, a2, a3"),
        ("a1 a3 a2", "APPEND-003", 1, "a3 out of its batch's order"),
        ("a2 a3", "APPEND-003", 1, "a2 out of its batch's order or without the events before it"),
    ],
)
def test_a_broken_sequence_names_its_rule_and_writer(
    markers: str, rule_id: str, writer: int | None, says: str
) -> None:
    found = _check(markers)
    assert found is not None
    assert found.rule_id == rule_id
    assert (found.entry.writer if found.entry else None) == writer
    assert says in found.reason
    assert found.reason.startswith("the log holds") or found.reason.startswith("the log ends")


def test_a_read_may_start_inside_a_batch_but_not_end_inside_one() -> None:
    assert _check("a2 a3 b1", may_start_inside=True) is None
    found = _check("a2 a3 b1 a1", may_start_inside=True)
    assert found is not None
    assert found.rule_id == "APPEND-003"


def test_after_a_truncate_a_batch_may_end_early() -> None:
    assert _check("a1 a2 b1", may_cut=True) is None
    assert _check("a1 a2", may_cut=True) is None
    found = _check("a1 a3", may_cut=True)  # a cut never removes the middle of a batch
    assert found is not None
    assert found.rule_id == "APPEND-003"
