"""Findings and roots: a check explores past what it found, and a finding another rule's
defect explains is shown following from it (engines/search/exploration.py, running/roots.py)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from checkpointspec.conformance.checks.base import Check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.kit_run import KitRun
from checkpointspec.conformance.engines.search.exploration import (
    Diverging,
    Explored,
    Found,
    explore,
    is_tolerated,
    rule,
    tolerating,
)
from checkpointspec.conformance.engines.search.replay import REPORTING_PHASES, kit_settings
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.report import CheckResult, Finding
from checkpointspec.conformance.running.roots import Derivation, derive_roots, rooted
from checkpointspec.conformance.running.runner import report_of
from checkpointspec.spec import Capability
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

# -- exploration ----------------------------------------------------------------------


def _rounds_finding(*rules: str) -> tuple[list[str], Callable[[], None]]:
    """A round that raises the first of ``rules`` not tolerated yet, and a log of calls."""
    calls: list[str] = []

    def run_round() -> None:
        for rule_id in rules:
            violation = RuleViolation(rule_id, f"{rule_id} is broken")
            if not is_tolerated(violation):
                calls.append(rule_id)
                raise violation
        calls.append("passed")

    return calls, run_round


def test_every_rule_found_is_recorded_and_tolerated_in_the_rounds_after_it() -> None:
    calls, run_round = _rounds_finding("ARG-001", "TRUNC-001")
    found: list[Found] = []
    explored = explore(run_round, found, rounds=4)
    assert [f.violation.rule_id for f in found] == ["ARG-001", "TRUNC-001"]
    assert calls == ["ARG-001", "TRUNC-001", "passed"]
    assert explored == Explored(rounds=3, complete=True)


def test_a_round_stuck_on_a_rule_found_before_ends_exploration_incomplete() -> None:
    found = [Found(RuleViolation("ARG-001", "x"), RuleViolation("ARG-001", "x"))]

    def run_round() -> None:
        raise RuleViolation("ARG-001", "the same again, tolerated or not")

    assert explore(run_round, found, rounds=5) == Explored(rounds=1, complete=False)
    assert len(found) == 1


def test_spent_rounds_leave_the_exploration_incomplete() -> None:
    _, run_round = _rounds_finding("ARG-001", "TRUNC-001", "LIST-002")
    found: list[Found] = []
    assert explore(run_round, found, rounds=2) == Explored(rounds=2, complete=False)
    assert [f.violation.rule_id for f in found] == ["ARG-001", "TRUNC-001"]


def test_rules_tolerated_from_the_start_are_never_findings() -> None:
    _, run_round = _rounds_finding("ARG-001", "TRUNC-001")
    found: list[Found] = []
    explore(run_round, found, rounds=4, tolerated=frozenset({"ARG-001"}))
    assert [f.violation.rule_id for f in found] == ["TRUNC-001"]


def test_an_exception_that_is_no_violation_ends_exploration_and_keeps_the_findings() -> None:
    found: list[Found] = []

    def run_round() -> None:
        if not is_tolerated(RuleViolation("ARG-001", "x")):
            raise RuleViolation("ARG-001", "x")
        raise OSError("the backend's disk is gone")

    with pytest.raises(OSError, match="disk is gone"):
        explore(run_round, found, rounds=4)
    assert [f.violation.rule_id for f in found] == ["ARG-001"]


class _Counter(Diverging, RuleBasedStateMachine):
    """Breaks ARG-001 on its third step; counts the steps it really ran."""

    steps: list[int] = []

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @rule(n=st.just(1))
    def step(self, n: int) -> None:
        self.count += n
        _Counter.steps.append(self.count)
        if self.count == 3:
            raise RuleViolation("ARG-001", "the third step is wrong")


def _run_counter() -> None:
    settings = kit_settings(max_examples=1, phases=REPORTING_PHASES, stateful_step_count=6)
    run_state_machine_as_test(_Counter, settings=settings)


def test_a_machine_breaking_a_tolerated_rule_diverges_and_skips_the_rest_of_its_run() -> None:
    _Counter.steps = []
    with pytest.raises(RuleViolation, match="ARG-001"):
        _run_counter()
    _Counter.steps = []
    with tolerating(frozenset({"ARG-001"})):
        _run_counter()
    assert _Counter.steps == [1, 2, 3]


# -- roots ----------------------------------------------------------------------------

TRUNCATE_CHECK = "TRUNC-003::truncate_honours_expected_head"
STRESS_CHECK = "MP-001::free_running_history"


def _failed(check: str, *rules: str, rounds: int = 0) -> CheckResult:
    findings = tuple(Finding(r, check, f"{r} is broken", f"[{r}] {r} is broken") for r in rules)
    return CheckResult(
        check,
        CHECKS_BY_NAME[check].rules,
        "failed",
        1.0,
        violated_rule=rules[0],
        findings=findings,
        rounds=rounds,
    )


def _passed(check: str) -> CheckResult:
    return CheckResult(check, CHECKS_BY_NAME[check].rules, "passed", 1.0)


@pytest.fixture
def run() -> KitRun:
    return plan_run("memory", profile="quick", seed=1)


def test_a_finding_gone_when_its_root_operation_is_left_out_follows_from_it(run: KitRun) -> None:
    results = [_failed(TRUNCATE_CHECK, "TRUNC-003"), _failed(STRESS_CHECK, "APPEND-002")]

    def recheck(check: Check, variant: KitRun) -> CheckResult:
        name = check.name
        if name == STRESS_CHECK and Capability.TRUNCATE not in variant.probe.capabilities:
            return _passed(name)
        return next(r for r in results if r.name == name)

    derived = derive_roots(run, results, recheck)
    assert set(derived) == {(STRESS_CHECK, "APPEND-002")}
    assert derived[(STRESS_CHECK, "APPEND-002")].root == "TRUNC-003"
    assert "TRUNCATE left out" in derived[(STRESS_CHECK, "APPEND-002")].evidence
    marked, findings, roots, follows = rooted(results, derived)
    assert roots == ("TRUNC-003",)
    assert follows == {"APPEND-002": "TRUNC-003"}
    assert [f.rule for f in findings] == ["TRUNC-003", "APPEND-002"]
    assert marked[1].findings[0].follows_from == "TRUNC-003"


def test_a_finding_still_there_when_the_other_is_left_out_is_a_root(run: KitRun) -> None:
    results = [_failed(TRUNCATE_CHECK, "TRUNC-003"), _failed(STRESS_CHECK, "APPEND-002")]
    derived = derive_roots(
        run, results, lambda check, _: next(r for r in results if r.name == check.name)
    )
    assert derived == {}
    assert rooted(results, derived)[2] == ("APPEND-002", "TRUNC-003")


def test_findings_of_one_check_are_not_rechecked_by_tolerance(run: KitRun) -> None:
    results = [_failed("SEQ-001::model_based", "ARG-001", "SEQ-003", rounds=3)]

    def recheck(check: Check, variant: KitRun) -> CheckResult:
        raise AssertionError("no re-check is needed")

    assert derive_roots(run, results, recheck) == {}


def test_a_finding_of_one_check_follows_from_another_when_its_operation_is_left_out(
    run: KitRun,
) -> None:
    results = [_failed("SEQ-001::model_based", "DELETE-001", "ARG-001", rounds=2)]

    def recheck(check: Check, variant: KitRun) -> CheckResult:
        assert variant.tolerated == frozenset()
        if Capability.DELETE in variant.probe.capabilities:
            return results[0]  # the control: the check run again unchanged
        return _passed(check.name)

    derived = derive_roots(run, results, recheck)
    assert {key: d.root for key, d in derived.items()} == {
        ("SEQ-001::model_based", "ARG-001"): "DELETE-001"
    }


def test_a_finding_the_check_does_not_find_again_unchanged_stays_a_root(run: KitRun) -> None:
    """A finding that depends on timing (a tie within one millisecond) is gone from any
    re-check; gone from the unchanged re-check too, it follows from nothing."""
    results = [_failed("SEQ-001::model_based", "DELETE-001", "ARG-001", rounds=2)]
    rechecked: list[frozenset[Capability]] = []

    def recheck(check: Check, variant: KitRun) -> CheckResult:
        rechecked.append(variant.probe.capabilities)
        return _passed(check.name)

    assert derive_roots(run, results, recheck) == {}
    # The variant without DELETE, then the control with it.
    assert [Capability.DELETE in c for c in rechecked] == [False, True]


def test_two_rules_that_explain_each_other_both_stay_roots(run: KitRun) -> None:
    first, second = "HEAD-001::head_is_the_last_seq", "SEQ-003::append_returns_the_new_head"
    results = [_failed(first, "HEAD-001", rounds=1), _failed(second, "SEQ-003", rounds=1)]
    derived = derive_roots(run, results, lambda check, _: _passed(check.name))
    assert derived == {}


def test_a_rule_that_follows_from_an_expected_failure_fails_nothing() -> None:
    """A known defect (``--xfail``, or a lite-agent truncate declared without an
    expected head) seen again under another rule is one verdict: the run passes."""
    results = [_failed(TRUNCATE_CHECK, "TRUNC-003"), _failed(STRESS_CHECK, "APPEND-002")]
    checks = [CHECKS_BY_NAME[TRUNCATE_CHECK], CHECKS_BY_NAME[STRESS_CHECK]]
    derived = {(STRESS_CHECK, "APPEND-002"): Derivation("TRUNC-003", "with TRUNCATE left out")}
    by_name = {r.name: r for r in results}
    known = plan_run("memory", profile="quick", seed=1, expected_failures={"TRUNC-003": "known"})
    report = report_of(known, checks, by_name, 1.0, derived)
    assert report.exit_status == 0
    assert [(r.id, r.status, r.follows_from) for r in report.rules[:2]] == [
        ("TRUNC-003", "xfailed", None),
        ("APPEND-002", "failed", "TRUNC-003"),
    ]
    # Not derived, the same failure is a failure of the run.
    assert report_of(known, checks, by_name, 1.0, {}).exit_status == 1


def test_a_report_marks_derived_rules_and_leads_with_roots() -> None:
    results = [_failed(TRUNCATE_CHECK, "TRUNC-003"), _failed(STRESS_CHECK, "APPEND-002")]
    base = plan_run("memory", profile="quick", seed=1)
    checks = [CHECKS_BY_NAME[TRUNCATE_CHECK], CHECKS_BY_NAME[STRESS_CHECK]]
    derived = {(STRESS_CHECK, "APPEND-002"): Derivation("TRUNC-003", "with TRUNCATE left out")}
    report = report_of(base, checks, {r.name: r for r in results}, 1.0, derived)
    assert report.roots == ("TRUNC-003",)
    assert [r.id for r in report.rules[:2]] == ["TRUNC-003", "APPEND-002"]
    assert report.rules[1].follows_from == "TRUNC-003"
    assert report.rules[1].status == "failed"
    encoded = msgspec.json.decode(msgspec.json.encode(report))
    assert encoded["findings"][1]["follows_from"] == "TRUNC-003"
