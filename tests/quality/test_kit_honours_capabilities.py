"""Missing operations are not evidence: the kit judges a store without delete or list precisely.

A backend that does not declare DELETE (or LIST, or MAINTENANCE) and refuses the operation with
`UnsupportedOperationError` is correct: on the quick profile nothing of it may
fail, the rules about the operation are skipped with the capability's reason,
and CAP-001 passes. One that does not declare the capability but does not refuse
loudly breaks CAP-001 and nothing else; one that declares it and refuses breaks
the operation's own rule. ID-003 is checked here too: its escape probe aims at a
directory of the check's own, and still catches a backend that escapes.
"""

from __future__ import annotations

import pytest
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import MODEL_BASED, describe, failed_checks, failed_rules, verdict

SEED = 1729


def _run(factory: str, *only: str) -> KitReport:
    return run_kit(plan_run(f"partial_backends:{factory}", profile="quick", seed=SEED, only=only))


@pytest.mark.parametrize(
    ("factory", "capability", "rules"),
    [
        ("make_without_delete", "delete", ("DELETE-001", "DELETE-002")),
        ("make_without_list", "list", ("LIST-001", "LIST-002", "LIST-003")),
        ("make_without_maintenance", "maintenance", ("MAINT-001", "MAINT-002", "MAINT-003")),
    ],
)
def test_an_honest_store_without_an_operation_gets_no_failure(
    factory: str, capability: str, rules: tuple[str, ...]
) -> None:
    report = _run(factory)
    text = describe(report)
    assert report.exit_status == 0, text
    assert capability not in report.capabilities, text
    unfinished = [c.name for c in report.checks if c.status in ("failed", "error", "not_checked")]
    assert unfinished == [], text
    assert {c.name: c.status for c in report.checks}[MODEL_BASED] == "passed", text
    assert verdict(report, "CAP-001").status == "passed", text
    for rule_id in rules:
        rule = verdict(report, rule_id)
        assert rule.status == "skipped", text
        assert capability.upper() in rule.reason or capability in rule.reason, text
    # The rules the issue found charged to a missing delete are judged, and pass.
    for rule_id in ("ID-002", "ID-003", "READ-003", "HEAD-001", "INTEG-001"):
        assert verdict(report, rule_id).status == "passed", text


@pytest.mark.parametrize(
    "factory", ["make_not_implemented_delete", "make_delete_undeclared_but_silent"]
)
def test_an_undeclared_delete_that_does_not_refuse_loudly_breaks_cap_001_only(
    factory: str,
) -> None:
    report = _run(factory)
    text = describe(report)
    assert report.exit_status == 1, text
    assert failed_rules(report) == {"CAP-001"}, text
    assert [c.name for c in failed_checks(report)] == [
        "CAP-001::undeclared_operations_refuse_loudly"
    ], text


def test_an_undeclared_maintenance_lock_that_is_granted_breaks_cap_001_only() -> None:
    report = _run("make_maintenance_undeclared_but_granted")
    text = describe(report)
    assert report.exit_status == 1, text
    assert failed_rules(report) == {"CAP-001"}, text
    (failure,) = failed_checks(report)
    assert "acquire_maintenance works but MAINTENANCE is not declared" in failure.detail, text
    assert verdict(report, "MAINT-001").status == "skipped", text


def test_a_declared_delete_that_refuses_breaks_delete_001() -> None:
    report = _run("make_delete_declared_but_refused", "DELETE", "HEAD-001", "ID-002")
    text = describe(report)
    assert report.exit_status == 1, text
    # A delete that refuses everything also refuses bad ids wrongly (ARG-001): that row
    # fails too, following from DELETE-001, the one root.
    assert report.roots == ("DELETE-001",), text
    assert failed_rules(report) <= {"DELETE-001", "ARG-001"}, text
    assert all(
        verdict(report, r).follows_from == "DELETE-001"
        for r in failed_rules(report) - {"DELETE-001"}
    ), text
    # The checks that merely called delete blame the refusal on DELETE-001, not their own rule.
    assert {c.violated_rule for c in failed_checks(report)} == {"DELETE-001"}, text


def test_id_003_catches_a_backend_that_escapes_into_the_checks_own_directory() -> None:
    report = _run("make_escapes_the_store", "ID-003")
    text = describe(report)
    assert report.exit_status == 1, text
    assert failed_rules(report) == {"ID-003"}, text
    (failure,) = failed_checks(report, "ID-003")
    assert "files appeared beside the store" in failure.detail, text
    # The absolute id pointed into the check's directory, where the escape was seen.
    assert "escaped-absolute" in failure.detail, text
