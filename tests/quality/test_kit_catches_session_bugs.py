"""Does the session suite find bugs? Every layer in `broken_session` must be rejected.

Each broken session layer has one bug and names the rule it breaks
(``violates``). The kit, run with ``--suite session --session-layer`` on it,
restricted to the checks of its case, must exit 1 and report that rule failed,
with a replay command that names the layer. The reference session layer must
pass the whole session suite on every reference backend (memory by default,
file and SQLite with the ``slow`` tests). The default run keeps a handful of
cases (`session_cases.FAST`); the ``slow`` tests run them all.
"""

from __future__ import annotations

import pytest
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import describe, failed_checks, verdict
from session_cases import SESSION_CASES, SessionCase


def _run(case: SessionCase, seed: int, only: tuple[str, ...] | None = None) -> KitReport:
    """The session suite on ``case``'s backend and layer: its checks, or ``only``."""
    return run_kit(
        plan_run(
            case.backend,
            profile="quick",
            seed=seed,
            suite="session",
            session_layer=case.target,
            only=case.checks if only is None else only,
        )
    )


def _param(case: SessionCase) -> object:
    marks = [pytest.mark.slow] if case.slow else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in SESSION_CASES])
def test_session_suite_reports_the_broken_rule(case: SessionCase) -> None:
    for seed in case.seeds:
        report = _run(case, seed)
        text = describe(report)
        assert report.exit_status == 1, text
        assert verdict(report, case.rule).status == "failed", text
        assert report.suite == "session", text
        assert report.session_layer == case.target, text
        for check in failed_checks(report, case.rule):
            assert "--suite session" in check.replay, text
            assert f"--session-layer {case.target}" in check.replay, text


def _accepts(backend: str) -> None:
    report = run_kit(plan_run(backend, profile="quick", seed=3, suite="session"))
    text = describe(report)
    assert report.exit_status == 0, text
    assert report.session_layer == "checkpointspec.reference"
    assert {r.status for r in report.rules} <= {"passed", "skipped", "not_checked"}, text
    assert all(
        r.id.split("-")[0] in {"FOLD", "CKPT", "SNAP", "RESTORE", "COMPACT"} for r in report.rules
    )


def test_reference_layer_passes_the_session_suite_on_memory() -> None:
    _accepts("memory")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "sqlite"])
def test_reference_layer_passes_the_session_suite(backend: str) -> None:
    _accepts(backend)


GENERATED = {
    "FOLD": "FOLD-001::generated_logs_fold_as_the_model",
    "CKPT": "CKPT-001::generated_logs_list_as_the_model",
}
"""The checks that compare the layer with the oracle on generated logs, by area."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name) for c in SESSION_CASES if c.rule.split("-")[0] in GENERATED],
)
def test_generated_logs_blame_the_broken_rule(case: SessionCase) -> None:
    # The generated-log checks verify every rule of their area and blame the one the
    # first wrong message (or checkpoint field) breaks: never another rule, and the
    # bug's own for most seeds (which logs a seed draws decides whether it shows).
    reports = [_run(case, seed, only=(GENERATED[case.rule.split("-")[0]],)) for seed in (1, 2, 3)]
    caught = [r for r in reports if r.exit_status == 1]
    assert len(caught) >= 2, "\n\n".join(describe(r) for r in reports)
    for report in caught:
        assert {c.violated_rule for c in failed_checks(report)} == {case.rule}, describe(report)
