"""Rule verdicts and exit statuses from check results: a kit error is never a verdict."""

from __future__ import annotations

from checkpointspec.conformance.engines.contract.violations import RuleWarning
from checkpointspec.conformance.running.report import (
    EXIT_FAILED,
    EXIT_KIT_ERROR,
    EXIT_PASSED,
    CheckResult,
    Finding,
    RuleResult,
    exit_status_for,
    summarise_rules,
)
from checkpointspec.spec import Capability

DECLARED = [c.value for c in Capability]


def result(name: str, status: str, violated: str | None = None, reason: str = "") -> CheckResult:
    """A check's result; one that found ``violated`` broken has that finding."""
    return CheckResult(
        name,
        (name.split("::")[0], "HEAD-001"),
        status,  # type: ignore[arg-type]
        0.0,
        reason=reason,
        violated_rule=violated,
        findings=(Finding(violated, name, "the head is wrong"),) if violated else (),
    )


def verdicts(*results: CheckResult) -> dict[str, RuleResult]:
    return {r.id: r for r in summarise_rules(results, DECLARED)}


def test_a_rule_whose_only_unpassed_check_errored_is_error() -> None:
    rules = verdicts(
        result("READ-002::passes", "passed"),
        result("SEQ-003::breaks", "error", reason="the kit raised KeyError: 't'"),
    )
    assert rules["SEQ-003"].status == "error"
    assert rules["SEQ-003"].reason == "SEQ-003::breaks: the kit raised KeyError: 't'"
    # HEAD-001 has a passing check, but the errored one might have failed it.
    assert rules["HEAD-001"].status == "error"
    assert rules["READ-002"].status == "passed"


def test_a_failure_outranks_an_error_of_another_check() -> None:
    rules = verdicts(
        result("SEQ-003::breaks", "error"),
        result("READ-002::finds", "failed", violated="HEAD-001"),
    )
    assert rules["HEAD-001"].status == "failed"
    assert rules["SEQ-003"].status == "error"


def test_a_rule_that_passed_with_a_check_skipped_says_so() -> None:
    rules = verdicts(
        result("DUR-003::on_the_simulated_disk", "passed"),
        result("DUR-003::traced", "skipped", reason="strace is not installed"),
        result("SEQ-003::whole", "passed"),
    )
    assert rules["DUR-003"].status == "passed"
    assert rules["DUR-003"].reason == (
        "1 of 2 checks skipped: DUR-003::traced: strace is not installed"
    )
    # Every check ran: a pass with nothing to add.
    assert rules["SEQ-003"].reason == ""


def test_a_refused_operation_leaves_the_rule_not_checked_with_the_reason() -> None:
    reason = "the backend refuses delete (UnsupportedOperationError), which this check needs"
    rules = verdicts(result("SEQ-003::needs_delete", "not_checked", reason=reason))
    assert rules["SEQ-003"].status == "not_checked"
    assert rules["SEQ-003"].reason == f"SEQ-003::needs_delete: {reason}"


def test_exit_status_failure_then_kit_error_then_pass() -> None:
    errored = (result("SEQ-003::breaks", "error"),)
    failed = (result("READ-002::finds", "failed", violated="HEAD-001"),)
    passed = (result("READ-002::passes", "passed"),)
    assert exit_status_for(summarise_rules(passed, DECLARED), passed) == EXIT_PASSED
    assert exit_status_for(summarise_rules(errored, DECLARED), errored) == EXIT_KIT_ERROR
    both = errored + failed
    assert exit_status_for(summarise_rules(both, DECLARED), both) == EXIT_FAILED
    not_checked = (result("SEQ-003::needs_delete", "not_checked"),)
    assert exit_status_for(summarise_rules(not_checked, DECLARED), not_checked) == EXIT_PASSED


def test_a_rule_the_kit_checked_on_its_own_side_is_kit_checked_not_passed() -> None:
    refused_here = CheckResult(
        "ARG-003::bad_batches_are_refused",
        ("ARG-003", "APPEND-003"),
        "passed",
        0.0,
        kit_checked={"ARG-003": "the stdio client refuses a dict posing as an event"},
    )
    rules = verdicts(refused_here, result("APPEND-003::whole", "passed"))
    assert rules["ARG-003"].status == "kit_checked"
    assert rules["ARG-003"].reason == (
        "ARG-003::bad_batches_are_refused: the stdio client refuses a dict posing as an event"
    )
    # Another check of APPEND-003 reached the backend: its pass stands.
    assert rules["APPEND-003"].status == "passed"
    assert exit_status_for(rules.values()) == EXIT_PASSED


def test_a_warning_is_reported_under_its_own_rule_only() -> None:
    # Its message names other rules in brackets: the warning's rule is its value's.
    warning = RuleWarning("LIST-003", "listed out of mtime order, as [MP-001] and [SEQ-001] say")
    racing = CheckResult(
        "MP-001::racing_writers",
        ("MP-001",),
        "passed",
        0.0,
        warnings=(warning.text,),
        warned=(warning,),
    )
    rules = verdicts(racing)
    assert rules["LIST-003"].status == "warning"
    assert rules["LIST-003"].first_failure == (
        "[LIST-003] listed out of mtime order, as [MP-001] and [SEQ-001] say"
    )
    assert rules["LIST-003"].checks == ("MP-001::racing_writers",)
    assert rules["MP-001"].status == "passed"
    assert rules["SEQ-001"].status == "not_checked"
