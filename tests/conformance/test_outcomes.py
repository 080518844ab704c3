"""How `compare_log` turns an unexpected event into the rule it proves broken."""

from __future__ import annotations

import pytest
from checkpointspec.conformance.engines.outcomes import Origin, compare_log, make_event
from checkpointspec.conformance.engines.violations import RuleViolation
from checkpointspec.spec import ModelEvent, SessionEvent, StoredEvent

TS = "2026-12-02T12:00:00.000000+00:00"


def stored(seq: int, event: SessionEvent, session_id: str = "s") -> StoredEvent:
    return StoredEvent(seq, session_id, seq - 1 if seq > 1 else None, TS, event)


def modelled(seq: int, event: SessionEvent, session_id: str = "s") -> ModelEvent:
    return ModelEvent(seq, session_id, seq - 1 if seq > 1 else None, event)


KEPT, EXTRA = make_event("user_prompt", "e1"), make_event("user_prompt", "e2")


@pytest.mark.parametrize(
    ("origin", "rule_id"),
    [
        (Origin("other", 0, "live"), "ID-002"),
        (Origin("s", 0, "deleted"), "DELETE-002"),
        (Origin("s", 0, "truncated"), "TRUNC-001"),
        (Origin("s", 1, "APPEND-003"), "APPEND-003"),  # left by an append that raised
        (Origin("s", 1, "APPEND-002"), "APPEND-002"),  # left by a conflicting append
    ],
)
def test_an_event_that_should_not_be_there_is_blamed_on_its_origin(
    origin: Origin, rule_id: str
) -> None:
    with pytest.raises(RuleViolation) as raised:
        compare_log(
            [stored(1, KEPT), stored(2, EXTRA)],
            [modelled(1, KEPT)],
            "s",
            "read('s')",
            {"e1": Origin("s", 0, "live"), "e2": origin},
        )
    assert raised.value.rule_id == rule_id
    assert "'e2'" in str(raised.value)


def test_without_an_origin_a_longer_log_is_a_seq_mismatch() -> None:
    with pytest.raises(RuleViolation) as raised:
        compare_log([stored(1, KEPT), stored(2, EXTRA)], [modelled(1, KEPT)], "s", "read('s')")
    assert raised.value.rule_id == "READ-001"


def test_the_expected_log_passes() -> None:
    origin = {"e1": Origin("s", 0, "live"), "e2": Origin("s", 1, "APPEND-003")}
    compare_log([stored(1, KEPT)], [modelled(1, KEPT)], "s", "read('s')", origin)
