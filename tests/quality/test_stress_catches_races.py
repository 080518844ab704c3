"""Does the free-running stress check find races only contention shows?

The SQLite reference backend must pass it; each backend in `racy_backends` has
one multi-process race and must fail it with the rule that race breaks. The
races are caught from the recorded history alone (`check_history`), so these
tests also show that its reports name the calls that contradict each other, and
name the race by its cause on every seed: an expected_head checked outside the
write lock is a lost update across processes (MP-001), never the wrong heads or
reads that follow from it.
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
        # The append goes through from a head another process has just moved: a lost
        # update across processes, whether it shows as an append stored after that
        # process's or as two appends acknowledged from one head.
        ("racy_backends:CheckThenAppend.make", {"MP-001"}),
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


LOST_UPDATE = "racy_backends:CheckThenAppend.make"


def _lost_update_named_at_its_cause(seed: int) -> None:
    report = run_kit(plan_run(LOST_UPDATE, profile="quick", only=[CHECK], seed=seed))
    failures = failed_checks(report)
    assert [c.name for c in failures] == [CHECK], describe(report)
    finding = failures[0].findings[0]
    assert finding.rule == "MP-001", describe(report)
    assert finding.call.startswith("process "), finding
    assert "append(" in finding.call, finding
    assert "expected_head=" in finding.call, finding
    assert finding.expected.startswith("CheckpointConflictError("), finding
    assert finding.got.startswith("ok, head "), finding
    # What the same evidence breaks as well follows from it; nothing else is a root.
    assert report.roots == ("MP-001",), describe(report)
    assert {f.rule for f in failures[0].findings} <= {"MP-001", "APPEND-004", "APPEND-002"}
    assert all(f.follows_from == "MP-001" for f in failures[0].findings[1:]), describe(report)


def test_a_lost_update_is_the_root_not_the_heads_it_made_wrong() -> None:
    _lost_update_named_at_its_cause(SEED)


# Slow: a stress run of four processes per seed, about 3 s each.
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 11))
def test_a_lost_update_is_named_by_its_cause_on_every_seed(seed: int) -> None:
    _lost_update_named_at_its_cause(seed)
