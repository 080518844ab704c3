"""A run reports every defect it finds, each at its root (docs/kit.md, "Findings and roots").

`rooted_backends` holds the backends: several defects for one check to find all of,
and one defect several checks see under several rules.
"""

from __future__ import annotations

import pytest
from checkpointspec.conformance.engines.search.replay import parse_reproduction
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.runner import run_check, run_kit
from kit_reports import MODEL_BASED, describe
from rooted_backends import (
    DeleteCrashes,
    DeleteCrashesWhenResumed,
    HeadCachedPerHandle,
    ThreeDefects,
    TruncateIgnoresExpectedHead,
    TruncateTakesAnEmptyHeadForOne,
)

THREE = "rooted_backends:ThreeDefects.make"


@pytest.mark.slow
def test_the_model_based_check_finds_every_defect_and_each_replays_alone(tmp_path) -> None:
    run = plan_run(THREE, profile="quick", seed=1, only=(MODEL_BASED,))
    result = run_check(CHECKS_BY_NAME[MODEL_BASED], run, tmp_path)
    found = [f.rule for f in result.findings]
    assert result.status == "failed", result.detail
    assert set(found) == {ThreeDefects.violates, *ThreeDefects.also_violates}, found
    for finding in result.findings:
        assert finding.reproduce is not None, finding
        assert f"--reproduce {finding.reproduce}" in finding.replay
        replay = plan_run(
            THREE,
            profile="quick",
            seed=1,
            only=(MODEL_BASED,),
            reproduction=parse_reproduction(finding.reproduce),
        )
        again = run_check(CHECKS_BY_NAME[MODEL_BASED], replay, tmp_path)
        assert [f.rule for f in again.findings] == [finding.rule], again.detail


ROOTED_SEEDS = (1, 2, 3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", ROOTED_SEEDS)
def test_one_defect_seen_by_several_checks_is_named_at_its_root(seed: int) -> None:
    backend = "rooted_backends:TruncateIgnoresExpectedHead.make"
    report = run_kit(plan_run(backend, profile="quick", seed=seed))
    text = describe(report)
    assert report.exit_status == 1, text
    assert report.roots == (TruncateIgnoresExpectedHead.violates,), text
    assert report.rules[0].id == TruncateIgnoresExpectedHead.violates, text
    for rule in report.rules[1:]:
        assert rule.status != "failed" or rule.follows_from == report.roots[0], text


# Slow: the held, traced and killed writers and the stress history start worker
# processes (about a minute on a shared 2-core machine).
@pytest.mark.slow
def test_a_crash_met_in_worker_processes_is_the_crash_the_model_based_check_names() -> None:
    """A delete that raises TypeError ends the workers of READ-003, DUR-002, KILL-001
    and MP-001's checks: each finding keeps delete's crash as its other explanation,
    which the model-based check shows plainly, so DELETE-001 is the one root."""
    backend = "rooted_backends:DeleteCrashes.make"
    only = ("SEQ-001", "READ-003", "DUR-002", "KILL-001", "MP-001")
    report = run_kit(plan_run(backend, profile="quick", seed=1, only=only))
    text = describe(report)
    assert report.exit_status == 1, text
    assert report.roots == (DeleteCrashes.violates,), text
    followers = [f for f in report.findings if f.rule != DeleteCrashes.violates]
    assert {f.rule for f in followers} >= {"READ-003", "DUR-002", "KILL-001"}, text
    for finding in followers:
        assert finding.follows_from == DeleteCrashes.violates, text
        assert finding.shape == "delete raised TypeError", text


# Slow: the commanded workers start three processes and run the quick profile's examples
# (about 90 s on a shared 2-core machine); the model-based and TRUNC-003 checks name the
# same defect in the default run (quality/test_kit_catches_bugs.py).
@pytest.mark.slow
def test_commanded_workers_name_an_ignored_truncate_head_by_its_own_rule() -> None:
    """A truncate that never compares expected_head is TRUNC-003 in the commanded-workers
    check too, as a single worker shows it, not MP-001 (which it was reported as)."""
    backend = "rooted_backends:TruncateIgnoresExpectedHead.make"
    report = run_kit(
        plan_run(backend, profile="quick", seed=1729, only=("KILL-001::commanded_workers",))
    )
    text = describe(report)
    assert report.exit_status == 1, text
    assert report.roots == ("TRUNC-003",), text
    assert [f.rule for f in report.findings] == ["TRUNC-003"], text


@pytest.mark.slow
@pytest.mark.parametrize("seed", ROOTED_SEEDS)
def test_commanded_workers_name_a_condition_one_worker_decides_wrongly_by_its_own_rule(
    seed: int,
) -> None:
    """A truncate comparing an empty session's expected head with 1 lets a stale expected
    head through and refuses one that holds, for one worker alone: TRUNC-003 in the
    commanded-workers check, either way, not MP-001 (which both were reported as: the
    worker's probe with a head no log reaches conflicted, as this store compares that
    one, and a refusal was not probed at all)."""
    backend = "rooted_backends:TruncateTakesAnEmptyHeadForOne.make"
    report = run_kit(
        plan_run(backend, profile="quick", seed=seed, only=("KILL-001::commanded_workers",))
    )
    text = describe(report)
    assert report.exit_status == 1, text
    assert report.roots == (TruncateTakesAnEmptyHeadForOne.violates,), text


@pytest.mark.slow
def test_a_crash_of_a_resumed_write_keeps_the_operations_crash_in_view() -> None:
    """A worker that ended on the backend's error while finishing a paused write is
    KILL-001 with that operation's crash as its other explanation, as one that ended
    on a call it had just been sent: so where the crash is seen plainly it is the root."""
    backend = "rooted_backends:DeleteCrashesWhenResumed.make"
    report = run_kit(
        plan_run(backend, profile="quick", seed=3, only=("KILL-001::commanded_workers",))
    )
    text = describe(report)
    assert report.exit_status == 1, text
    [finding] = report.findings
    assert finding.rule == DeleteCrashesWhenResumed.violates, text
    assert finding.otherwise == ("DELETE-001", "delete raised TypeError"), text


@pytest.mark.slow
def test_a_declared_gap_explains_everything_downstream_in_every_suite() -> None:
    """With TRUNC-003 expected to fail, what it breaks elsewhere (the stress history, a
    restore's conditional truncate in the session suite) is that known defect seen
    again: no root, nothing under `fix first:`, and the run passes."""
    backend = "rooted_backends:TruncateIgnoresExpectedHead.make"
    report = run_kit(
        plan_run(
            backend,
            suite="all",
            profile="quick",
            seed=1,
            expected_failures={"TRUNC-003": "declared"},
        )
    )
    text = describe(report)
    assert report.roots == (), text
    assert report.defects == (), text
    assert report.exit_status == 0, text
    for rule in report.rules:
        assert rule.status != "failed" or rule.follows_from == "TRUNC-003", text


def test_the_model_based_check_names_a_session_an_empty_append_made_by_that_append(
    tmp_path,
) -> None:
    """A session listed because an empty append created it is APPEND-001 in the
    model-based check too, as the table names it for every check, not LIST-001 (which
    the machine's own listing comparison called it)."""
    backend = "broken_backends:EmptyAppendCreatesSession.make"
    run = plan_run(backend, profile="quick", seed=1, only=(MODEL_BASED,))
    result = run_check(CHECKS_BY_NAME[MODEL_BASED], run, tmp_path)
    assert "LIST-001" not in {f.rule for f in result.findings}, result.detail
    made = [f for f in result.findings if f.shape == "an empty append created a session"]
    assert [f.rule for f in made] == ["APPEND-001"], result.detail
    assert made[0].call.endswith("list_sessions()"), made[0]


def test_racing_appends_that_need_no_race_are_named_by_the_handles_taking_turns(
    tmp_path,
) -> None:
    """Handles that each remember a stale head all win a race on it, and win taking turns
    too: the racing-appends check names that HANDLE-001, with the HANDLE-001 check's shape,
    not APPEND-004 (which it was reported as on the lite-agent file checkpointer)."""
    backend = "rooted_backends:HeadCachedPerHandle.make"
    racing = "APPEND-004::racing_appends_never_fork"
    run = plan_run(backend, profile="quick", seed=1, only=(racing,))
    result = run_check(CHECKS_BY_NAME[racing], run, tmp_path)
    assert [(f.rule, f.shape) for f in result.findings] == [
        (HeadCachedPerHandle.violates, "a handle does not see another handle's writes")
    ], result.detail


def test_racing_appends_taking_turns_pass_a_correct_backend(tmp_path) -> None:
    racing = "APPEND-004::racing_appends_never_fork"
    result = run_check(
        CHECKS_BY_NAME[racing], plan_run("memory", profile="quick", only=(racing,)), tmp_path
    )
    assert result.status == "passed", result.detail
