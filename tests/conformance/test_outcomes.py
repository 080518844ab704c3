"""How `compare_log` turns an unexpected event into the rule it proves broken, and
`compare_outcomes` a missing error into the rule that requires it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from checkpointspec.conformance.engines.contract.ledger import Ledger
from checkpointspec.conformance.engines.contract.outcomes import (
    Err,
    Ok,
    compare_log,
    compare_outcomes,
    make_event,
    run_model,
)
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.spec import (
    Capability,
    CheckpointConflictError,
    InvalidArgumentError,
    ModelEvent,
    ReasonCode,
    SessionEvent,
    SpecModel,
    StoredEvent,
    UserPrompt,
)

TS = "2026-12-02T12:00:00.000000+00:00"


def stored(seq: int, event: SessionEvent, session_id: str = "s") -> StoredEvent:
    return StoredEvent(seq, session_id, seq - 1 if seq > 1 else None, TS, event)


def modelled(seq: int, event: SessionEvent, session_id: str = "s") -> ModelEvent:
    return ModelEvent(seq, session_id, seq - 1 if seq > 1 else None, event)


KEPT, EXTRA = make_event("user_prompt", "e1"), make_event("user_prompt", "e2")


def _other_session(ledger: Ledger[int]) -> None:
    ledger.append("other", ["e2"], 0)


def _deleted(ledger: Ledger[int]) -> None:
    ledger.append("s", ["e2"], 0)
    ledger.remove(["e2"], "deleted")


def _truncated(ledger: Ledger[int]) -> None:
    ledger.append("s", ["e2"], 0)
    ledger.remove(["e2"], "truncated")


def _invalid_batch(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["e2"], 1, InvalidArgumentError("events", "not a batch"))


def _conflict(ledger: Ledger[int]) -> None:
    ledger.refuse("s", ["e2"], 1, CheckpointConflictError("s", 0, 1))


@pytest.mark.parametrize(
    ("history", "rule_id"),
    [
        (_other_session, "ID-002"),
        (_deleted, "DELETE-002"),
        (_truncated, "TRUNC-001"),
        (_invalid_batch, "APPEND-003"),
        (_conflict, "APPEND-002"),
    ],
)
def test_an_event_that_should_not_be_there_is_blamed_on_its_origin(
    history: Callable[[Ledger[int]], None], rule_id: str
) -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["e1"], 0)
    history(ledger)
    with pytest.raises(RuleViolation) as raised:
        compare_log([stored(1, KEPT), stored(2, EXTRA)], [modelled(1, KEPT)], "s", "read", ledger)
    assert raised.value.rule_id == rule_id
    assert "'e2'" in str(raised.value)


def test_without_a_ledger_a_longer_log_is_a_seq_mismatch() -> None:
    with pytest.raises(RuleViolation) as raised:
        compare_log([stored(1, KEPT), stored(2, EXTRA)], [modelled(1, KEPT)], "s", "read('s')")
    assert raised.value.rule_id == "READ-001"


def test_an_acknowledged_event_at_the_wrong_seq_is_left_to_the_model() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["e1", "e2"], 0)
    with pytest.raises(RuleViolation) as raised:
        compare_log([stored(1, KEPT), stored(2, EXTRA)], [modelled(1, KEPT)], "s", "read", ledger)
    assert raised.value.rule_id == "READ-001"


def test_the_expected_log_passes() -> None:
    ledger: Ledger[int] = Ledger()
    ledger.append("s", ["e1"], 0)
    _invalid_batch(ledger)
    compare_log([stored(1, KEPT)], [modelled(1, KEPT)], "s", "read('s')", ledger)


def blamed_rule(operation: str, expected: Err) -> str:
    """The rule a backend that succeeded where the model raised ``expected`` is charged with."""
    with pytest.raises(RuleViolation) as raised:
        compare_outcomes(operation, Ok(0), expected, f"{operation}(...)")
    return raised.value.rule_id


@pytest.mark.parametrize(
    ("error", "rule_id"),
    [
        pytest.param(
            InvalidArgumentError(
                "to_seq", "event cannot be serialised", ReasonCode.BEYOND_HEAD, "TRUNC-002"
            ),
            "TRUNC-002",
            id="beyond-head-worded-as-unstorable",
        ),
        pytest.param(
            InvalidArgumentError(
                "events", "3 is beyond the head 2", ReasonCode.UNSTORABLE, "EVENT-002"
            ),
            "EVENT-002",
            id="unstorable-worded-as-beyond-head",
        ),
    ],
)
def test_an_error_is_mapped_by_its_code_never_by_its_wording(
    error: InvalidArgumentError, rule_id: str
) -> None:
    assert blamed_rule("truncate", Err(error)) == rule_id


_model = SpecModel({Capability.TRUNCATE})
_model.append("s", [UserPrompt("a")])


@pytest.mark.parametrize(
    ("operation", "outcome", "rule_id"),
    [
        ("truncate", run_model(lambda: _model.copy().truncate("s", 2)), "TRUNC-002"),
        (
            "append",
            run_model(lambda: _model.copy().append("s", [UserPrompt("\ud800")])),
            "EVENT-002",
        ),
        ("append", run_model(lambda: _model.copy().append("s", "x")), "ARG-003"),
        ("append", run_model(lambda: _model.copy().append("", [])), "ARG-001"),
        ("read", run_model(lambda: _model.copy().read("s", -1)), "ARG-002"),
    ],
)
def test_the_models_refusals_are_charged_to_the_rule_they_enforce(
    operation: str, outcome: object, rule_id: str
) -> None:
    assert isinstance(outcome, Err)
    assert blamed_rule(operation, outcome) == rule_id


def test_an_error_without_a_rule_id_falls_back_to_its_arguments_rule() -> None:
    assert blamed_rule("append", Err(InvalidArgumentError("session_id", "bad"))) == "ARG-001"
    assert blamed_rule("append", Err(InvalidArgumentError("events", "bad"))) == "ARG-003"
    assert blamed_rule("truncate", Err(InvalidArgumentError("to_seq", "beyond the head"))) == (
        "ARG-002"
    )
