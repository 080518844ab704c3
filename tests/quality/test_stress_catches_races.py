"""Does the free-running stress check find races only contention shows?

The SQLite reference backend must pass it; each backend in `racy_backends` has
one multi-process race and must fail it with the rule that race breaks. The
races are caught from the recorded history alone (`check_history`), so these
tests also show that its reports name the calls that contradict each other.
"""

from __future__ import annotations

import pytest
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import describe, failed_checks

CHECK = "MP-001::free_running_history"
SEED = 1729


def test_the_sqlite_reference_passes() -> None:
    report = run_kit(plan_run("sqlite", profile="quick", only=[CHECK], seed=SEED))
    assert report.exit_status == 0, describe(report)
    assert [c.status for c in report.checks] == ["passed"], describe(report)


@pytest.mark.parametrize(
    ("factory", "rules"),
    [
        # The append goes through from a stale head: it either reports a head its
        # expected_head cannot explain or succeeds next to another append from the
        # same head, whichever the interleaving shows first.
        ("racy_backends:CheckThenAppend.make", {"SEQ-003", "APPEND-004", "APPEND-002"}),
        ("racy_backends:StaleHead.make", {"HEAD-001"}),
        # A delete in two transactions: reads between them, or after an append
        # slipped in, find a head its events do not match.
        ("racy_backends:DeleteInTwoTransactions.make", {"MP-001"}),
    ],
)
def test_a_race_is_caught_with_its_rule(factory: str, rules: set[str]) -> None:
    report = run_kit(plan_run(factory, profile="quick", only=[CHECK], seed=SEED))
    failures = failed_checks(report)
    assert [c.name for c in failures] == [CHECK], describe(report)
    assert failures[0].violated_rule in rules, describe(report)
    assert "process" in failures[0].detail, describe(report)
