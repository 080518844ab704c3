"""The time cap: parsing ``--budget``, what each check may take of a run's cap, checks
the cap stops before their counts ending incomplete and saying what they covered,
and a failure's shrinking kept to its share (engines/search/budget.py,
running/slices.py, engines/search/driver.py's `within_slice`).

Clocks are stand-ins that tick once per reading, and a slice of 0 s is spent from its
start: nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import msgspec
import pytest
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.engines.search.budget import (
    KIND_WEIGHTS,
    SHRINK_FLOOR,
    Allowance,
    Slice,
    format_seconds,
    parse_budget,
)
from checkpointspec.conformance.engines.search.driver import (
    SearchHost,
    SliceSpent,
    explore_runs,
    within_slice,
)
from checkpointspec.conformance.engines.search.exploration import rejecting_tolerated
from checkpointspec.conformance.engines.search.replay import (
    REPORTING_PHASES,
    kit_settings,
    replayable,
    reproduction_of,
)
from checkpointspec.conformance.engines.target.witness import Witness
from checkpointspec.conformance.frontends.cli import main, run_header
from checkpointspec.conformance.running.plan import CI_SEED, CI_VARIABLES, in_ci, plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.runner import run_check, run_kit
from checkpointspec.conformance.running.slices import BudgetPlan, longest_first
from hypothesis import given
from hypothesis import strategies as st

POWER_LOSS = "DUR-003::acknowledged_writes_survive_power_loss"
PROPERTY = "ARG-001::bad_session_ids_are_refused"


def ticking() -> Callable[[], float]:
    """A clock that reads 0, 1, 2, … seconds, one second more at each reading."""
    ticks = itertools.count()
    return lambda: float(next(ticks))


# -- parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("90", 90.0), ("2m", 120.0), ("1.5h", 5400.0), ("none", math.inf)],
)
def test_a_budget_is_read_in_seconds_minutes_or_hours(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "0s", "-3m", "m"])
def test_a_budget_that_is_no_positive_duration_is_refused_with_the_forms_accepted(
    text: str,
) -> None:
    with pytest.raises(ValueError, match="such as 90s, 2m or 1h, or none"):
        parse_budget(text)


def test_a_budget_is_printed_as_the_option_takes_it_back() -> None:
    for seconds in (60.0, 90.0, 300.0, 1.5):
        assert parse_budget(format_seconds(seconds)) == seconds


def test_every_profile_has_a_cap_growing_with_its_counts() -> None:
    budgets = [PROFILES[name].budget_seconds for name in ("quick", "default", "thorough")]
    assert budgets == [300.0, 1800.0, 14400.0]
    # A failure's work is shared out of a time well inside the cap: the quick gate's minute.
    failures = [PROFILES[name].failure_seconds for name in ("quick", "default", "thorough")]
    assert failures == [60.0, 600.0, 3600.0]


def test_bad_budget_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "memory", "--budget", "soon", "-q"]) == 2
    assert "--budget" in capsys.readouterr().err


# -- planning allowances ------------------------------------------------------------


def test_every_check_may_take_what_is_left_of_the_cap_and_shrink_for_its_kinds_share() -> None:
    run = plan_run("memory", profile="quick", seed=1, budget=1000.0)
    model = CHECKS_BY_NAME["SEQ-001::model_based"]
    prop = CHECKS_BY_NAME[PROPERTY]
    # DUR-003 needs DURABLE, which the memory backend does not declare.
    skipped = CHECKS_BY_NAME[POWER_LOSS]
    ticks = iter([0.0, 0.0, 400.0])
    plan = BudgetPlan(run, [model, prop, skipped], clock=lambda: next(ticks))
    first = plan.allowance_for(model)
    model_weight, property_weight = KIND_WEIGHTS["model"], KIND_WEIGHTS["property"]
    assert first is not None
    assert first.cap == pytest.approx(1000.0)  # the whole cap, not a share of it
    # A failure's work is shared out of the profile's failure time, not of the cap.
    failure_seconds = run.profile.failure_seconds
    assert failure_seconds is not None
    assert failure_seconds < 1000.0
    assert first.shrinking == pytest.approx(
        failure_seconds * model_weight / (model_weight + property_weight)
    )
    second = plan.allowance_for(prop)  # 400 s into the run: what is left; no failure time
    assert second == Allowance(cap=pytest.approx(600.0), shrinking=SHRINK_FLOOR)


def test_side_by_side_a_checks_shrinking_never_outlasts_the_run() -> None:
    # Two workers: the quick profile's 60 s of failure time are 120 s of checking, but
    # the one check left runs in one worker and may shrink for the run's 100 s, not 120.
    run = plan_run("memory", profile="quick", seed=1, budget=100.0, workers=2)
    assert run.profile.failure_seconds == 60.0
    model, prop = CHECKS_BY_NAME["SEQ-001::model_based"], CHECKS_BY_NAME[PROPERTY]
    frozen = iter([0.0, 0.0, 0.0])
    plan = BudgetPlan(run, [model, prop], clock=lambda: next(frozen))
    model_weight, property_weight = KIND_WEIGHTS["model"], KIND_WEIGHTS["property"]
    given = plan.allowance_for(prop)
    assert given is not None
    assert given.shrinking == pytest.approx(
        120.0 * property_weight / (model_weight + property_weight)
    )
    last = plan.allowance_for(model)
    assert last is not None
    assert (last.cap, last.shrinking) == (pytest.approx(100.0), pytest.approx(100.0))


def test_a_cap_below_the_failure_time_shares_out_the_cap() -> None:
    run = plan_run("memory", profile="quick", seed=1, budget=10.0)
    prop = CHECKS_BY_NAME[PROPERTY]
    frozen = iter([0.0, 0.0])
    given = BudgetPlan(run, [prop], clock=lambda: next(frozen)).allowance_for(prop)
    assert given == Allowance(cap=pytest.approx(10.0), shrinking=pytest.approx(10.0))


def test_checks_side_by_side_start_longest_first_and_the_skipped_last() -> None:
    run = plan_run("file", profile="quick", seed=1, workers=2)
    single = CHECKS_BY_NAME["SEQ-001::seqs_are_contiguous_across_batches"]
    model, prop = CHECKS_BY_NAME["SEQ-001::model_based"], CHECKS_BY_NAME[PROPERTY]
    other_model = CHECKS_BY_NAME["CODEC-001::model_based_with_codec"]
    # A crash check, but the file backend is not REPLICATED: it weighs nothing.
    skipped = CHECKS_BY_NAME["DUR-004::acknowledged_writes_survive_failover"]
    order = longest_first([single, skipped, model, prop, other_model], run)
    assert [c.name for c in order] == [
        model.name,
        other_model.name,  # among checks of one kind, the order they were given in
        prop.name,
        single.name,
        skipped.name,
    ]


def test_the_commanded_machine_is_capped_like_every_check() -> None:
    run = plan_run("file", profile="quick", seed=1, budget=1.0)
    commanded = CHECKS_BY_NAME["KILL-001::commanded_workers"]
    given = BudgetPlan(run, [commanded]).allowance_for(commanded)
    assert given is not None
    assert 0 < (given.cap or 0) <= 1.0


def test_a_check_due_after_the_cap_is_not_started_and_is_incomplete() -> None:
    run = plan_run("memory", profile="quick", seed=1, budget=1.0)
    ticks = iter([0.0, 5.0])
    plan = BudgetPlan(run, [CHECKS_BY_NAME[PROPERTY]], clock=lambda: next(ticks))
    given = plan.allowance_for(CHECKS_BY_NAME[PROPERTY])
    assert given == Allowance(cap=0.0, shrinking=SHRINK_FLOOR)
    result = run_check(CHECKS_BY_NAME[PROPERTY], run, allowance=given)
    assert result.status == "incomplete"
    assert result.reason == "not started: the run reached its time cap (1s) first"
    assert result.duration == 0.0


def test_without_a_budget_no_check_is_capped() -> None:
    run = plan_run("memory", profile="quick", seed=1, budget=parse_budget("none"))
    assert run.budget is None
    plan = BudgetPlan(run, [CHECKS_BY_NAME[PROPERTY]])
    assert plan.allowance_for(CHECKS_BY_NAME[PROPERTY]) is None


def test_a_run_takes_its_profiles_budget_unless_told_otherwise() -> None:
    assert plan_run("memory", profile="quick", seed=1).budget == 300.0
    assert plan_run("memory", profile="quick", seed=1, budget=90.0).budget == 90.0


def test_a_replay_command_repeats_a_budget_other_than_the_profiles() -> None:
    own = plan_run("memory", profile="quick", seed=1)
    assert "--budget" not in own.replay_command(PROPERTY, session_check=False)
    other = plan_run("memory", profile="quick", seed=1, budget=120.0)
    assert other.replay_command(PROPERTY, session_check=False).endswith(" --budget 2m")
    uncapped = plan_run("memory", profile="quick", seed=1, budget=parse_budget("none"))
    assert uncapped.replay_command(PROPERTY, session_check=False).endswith(" --budget none")


def test_the_command_for_the_same_work_keeps_the_suite_options_and_cap_not_the_only() -> None:
    run = plan_run(
        "memory",
        suite="all",
        profile="quick",
        seed=3,
        only=(PROPERTY,),
        options={"k": "v"},
        budget=120.0,
    )
    assert run.rerun_command() == (
        "checkpointspec run memory --suite all --option k=v --profile quick --seed 3 --budget 2m"
    )


# -- loops that stop at the cap -----------------------------------------------------


def test_a_loop_takes_items_until_the_cap_and_says_how_many() -> None:
    budget = Slice(3.0, clock=ticking())
    assert list(budget.within(range(10), "kill points")) == [0, 1, 2]
    assert budget.incomplete
    assert budget.coverage() == (
        "checked 3 of 10 kill points before the run's time cap "
        "(3.0 s of it were left when the check started)"
    )


def test_a_loop_reaching_its_count_first_says_nothing() -> None:
    budget = Slice(100.0, clock=ticking())
    assert list(budget.within(range(5), "kill points")) == [0, 1, 2, 3, 4]
    assert not budget.incomplete
    assert budget.coverage() == ""


def test_a_spent_slice_still_takes_the_first_item() -> None:
    budget = Slice(0.0)
    assert list(budget.within(["only"], "holds")) == ["only"]
    assert list(Slice(0.0).within(["first", "second"], "holds")) == ["first"]


def test_a_crash_state_check_the_cap_stops_is_incomplete_and_says_how_far_it_got() -> None:
    run = plan_run("file", profile="quick", seed=1, only=(POWER_LOSS,))
    result = run_check(CHECKS_BY_NAME[POWER_LOSS], run, allowance=Allowance(cap=1e-9))
    assert result.status == "incomplete", result.detail
    assert result.cut_short
    # One round is recorded, and its states are checked for as long as recording took.
    covered = re.search(
        r"checked (\d+) of 200 crash states before the run's time cap", result.reason
    )
    assert covered is not None, result.reason
    assert 1 <= int(covered[1]) < 200


# -- Hypothesis runs ----------------------------------------------------------------


def _harness(budget: Slice, rounds: int = 4) -> SearchHost:
    """What `within_slice` and `explore_runs` read of a harness (`SearchHost`)."""
    stand_in = SimpleNamespace(
        replay=None,
        slice=budget,
        findings=[],
        explored=None,
        profile=msgspec.structs.replace(PROFILES["quick"], exploration_rounds=rounds),
        run=SimpleNamespace(tolerated=frozenset()),
        witness=Witness(frozenset()),
    )
    return cast("SearchHost", stand_in)


def test_a_property_at_the_cap_ends_its_run_as_a_stop_after_the_examples_it_ran() -> None:
    h = _harness(Slice(3.0, clock=ticking()))
    ran: list[int] = []

    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers())
    @within_slice(h)
    def test(n: int) -> None:
        ran.append(n)

    explore_runs(h, test, 50)
    assert len(ran) == 2  # the readings at 1 s and 2 s; the one at 3 s ends the run
    assert h.explored is not None
    assert h.explored.complete
    assert h.slice.incomplete
    assert h.slice.coverage() == (
        "ran 2 examples of the 50 per round its profile asks for before the run's time cap "
        "(3.0 s of it were left when the check started)"
    )


def test_the_end_of_a_slice_reaches_hypothesis_as_a_stop_not_a_failure() -> None:
    h = _harness(Slice(0.0))

    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers())
    @within_slice(h)
    def test(n: int) -> None:
        pass

    with h.slice.hypothesis_round(), pytest.raises(SliceSpent):
        test()
    assert h.slice.examples_run == 1


def _failing_above(h: SearchHost, floor: int, ran: list[int]) -> Callable[[], None]:
    """A property of ``h`` that fails on every number of at least ``floor`` (Hypothesis
    shrinks a failure towards ``floor``), recording in ``ran`` each number it runs on."""

    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers(min_value=0, max_value=10_000))
    @within_slice(h)
    def test(n: int) -> None:
        ran.append(n)
        if n >= floor:
            raise RuleViolation("SEQ-001", f"{n} is too big")

    return replayable(test, 1, None)


def test_a_failure_found_after_the_slice_is_reported_unshrunk_and_replays() -> None:
    h = _harness(Slice(0.0))  # spent from the start: only the first example is admitted
    ran: list[int] = []

    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers(min_value=0, max_value=10_000))
    @within_slice(h)
    def test(n: int) -> None:
        ran.append(n)
        raise RuleViolation("SEQ-001", f"{n} is too big")

    with h.slice.hypothesis_round(), pytest.raises(RuleViolation) as failed:
        replayable(test, 3, None)()
    # The first example failed; none of its shrinking ran, the final replay ran it again.
    first = ran[0]
    assert ran == [first, first]
    assert str(failed.value).startswith(f"[SEQ-001] {first} is too big")
    assert h.slice.shrinks_left_out == 1
    assert h.slice.cut_short
    assert not h.slice.incomplete  # shrinking is no count: the failure stands
    blob = reproduction_of(failed.value)
    assert blob is not None
    replayed: list[int] = []
    with pytest.raises(RuleViolation, match=rf"^\[SEQ-001\] {first} is"):
        replayable(_recording(replayed), 3, blob)()
    assert replayed == [first]


def _recording(ran: list[int]) -> Callable[[int], None]:
    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers(min_value=0, max_value=10_000))
    def test(n: int) -> None:
        ran.append(n)
        raise RuleViolation("SEQ-001", f"{n} is too big")

    return cast("Callable[[int], None]", test)


@pytest.mark.parametrize("seconds", [5.0, 8.0, 12.0])
def test_shrinking_stops_at_the_slices_end_and_reports_the_smallest_failure_so_far(
    seconds: float,
) -> None:
    # The clock ticks once per example asked for: the slice admits ``seconds`` examples.
    h = _harness(Slice(seconds, clock=ticking()))
    ran: list[int] = []
    with h.slice.hypothesis_round(), pytest.raises(RuleViolation) as failed:
        _failing_above(h, 100, ran)()
    *searched, replayed = ran
    # Nothing reached the backend after the slice's end but the final replay ...
    assert len(searched) <= seconds
    assert h.slice.shrinks_left_out > 0
    # ... which reran the smallest failure the shrinking had found by then: what it
    # reports, and what its blob replays.
    smallest = min(n for n in searched if n >= 100)
    assert replayed == smallest
    assert str(failed.value).startswith(f"[SEQ-001] {smallest} is too big")
    blob = reproduction_of(failed.value)
    assert blob is not None
    again: list[int] = []
    with pytest.raises(RuleViolation, match=rf"^\[SEQ-001\] {smallest} is"):
        replayable(_recording(again), 1, blob)()
    assert again == [smallest]


def test_a_failing_run_with_time_left_shrinks_in_full() -> None:
    h = _harness(Slice(None))
    ran: list[int] = []
    with h.slice.hypothesis_round(), pytest.raises(RuleViolation, match=r"^\[SEQ-001\] 100 is"):
        _failing_above(h, 100, ran)()
    assert len(ran) > 12  # more than the slices above admit
    assert h.slice.shrinks_left_out == 0
    assert not h.slice.cut_short


def test_a_property_check_the_cap_stops_is_incomplete_never_passed() -> None:
    run = plan_run("memory", profile="quick", seed=1, only=(PROPERTY,))
    result = run_check(CHECKS_BY_NAME[PROPERTY], run, allowance=Allowance(cap=1e-9))
    assert result.status == "incomplete", result.detail
    assert result.cut_short
    assert result.reason.startswith(
        "ran 1 examples of the 80 per round its profile asks for before the run's time cap"
    ), result.reason


def test_shrinking_stops_at_its_share_before_the_cap() -> None:
    # A cap far away, a share of 4 s: the shrinking stops at the share.
    h = _harness(Slice(1000.0, clock=ticking(), shrinking=4.0))
    ran: list[int] = []
    with h.slice.hypothesis_round(), pytest.raises(RuleViolation):
        _failing_above(h, 100, ran)()
    assert len(ran) <= 5  # at most four before the share is spent, and the final replay
    assert h.slice.shrinks_left_out > 0
    assert not h.slice.incomplete


def _two_defects(h: SearchHost, ran: list[int]) -> Callable[[], None]:
    """A property of ``h`` breaking SEQ-001 on numbers of at least 100 and READ-001 on
    odd ones: two findings, the second found only in a round after the first."""

    @kit_settings(max_examples=50, phases=REPORTING_PHASES)
    @given(st.integers(min_value=0, max_value=10_000))
    @within_slice(h)
    @rejecting_tolerated
    def test(n: int) -> None:
        ran.append(n)
        if n >= 100:
            raise RuleViolation("SEQ-001", f"{n} is too big")
        if n % 2:
            raise RuleViolation("READ-001", f"{n} is odd")

    return replayable(test, 1, None)


def test_rounds_after_a_failure_are_a_failures_work_within_its_share() -> None:
    # A cap far away, a share of 4 s spent by the first round's shrinking: the rounds
    # after it are not started, the check says so, and what it found stands.
    h = _harness(Slice(1000.0, clock=ticking(), shrinking=4.0))
    explore_runs(h, _two_defects(h, []), 50)
    assert len(h.findings) == 1
    assert h.explored is not None
    assert not h.explored.complete
    assert h.slice.rounds_left_out == 3
    assert not h.slice.incomplete  # no count was left out: the check failed
    assert "left 3 exploration rounds after a failure unstarted" in h.slice.coverage()
    # With the time, the next round finds the second defect.
    roomy = _harness(Slice(None))
    explore_runs(roomy, _two_defects(roomy, []), 50)
    assert sorted(f.violation.rule_id for f in roomy.findings) == ["READ-001", "SEQ-001"]
    assert roomy.slice.rounds_left_out == 0


def test_the_report_gives_the_runs_cap_and_what_each_check_had_left(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    args = ["run", "memory", "--profile", "quick", "--seed", "1", "--only", PROPERTY, "-q"]
    assert main([*args, "--budget", "90s", "--report", str(report)]) == 0
    written = json.loads(report.read_bytes())
    assert written["budget"] == 90.0
    (result,) = written["checks"]
    # The one check of the run gets all of it that is left when it starts.
    assert 80.0 < result["budget"] <= 90.0
    assert not result["cut_short"]
    assert written["replay_key"]["seed"] == 1
    assert written["replay_key"]["budget"] == 90.0


# -- the run's verdict under the cap -------------------------------------------------


def test_a_run_the_cap_stops_exits_incomplete_and_its_rules_read_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    args = ["run", "memory", "--profile", "quick", "--seed", "1", "--only", PROPERTY]
    assert main([*args, "--budget", "0.001s", "--report", str(report)]) == 4
    out = capsys.readouterr().out
    assert "INCOMPLETE no rule failed, but the time cap stopped checks" in out
    written = json.loads(report.read_bytes())
    assert written["exit_status"] == 4
    assert not written["accept_incomplete"]
    (result,) = written["checks"]
    assert result["status"] == "incomplete"
    assert {r["id"]: r["status"] for r in written["rules"]}["ARG-001"] == "incomplete"


def test_accept_incomplete_passes_the_run_and_the_report_says_it_was_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    args = ["run", "memory", "--profile", "quick", "--seed", "1", "--only", PROPERTY]
    argv = [*args, "--budget", "0.001s", "--accept-incomplete", "--report", str(report)]
    assert main(argv) == 0
    assert "with 1 incomplete checks accepted (--accept-incomplete)" in capsys.readouterr().out
    written = json.loads(report.read_bytes())
    assert (written["exit_status"], written["accept_incomplete"]) == (0, True)
    assert written["checks"][0]["status"] == "incomplete"  # still not a pass


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_failure_found_before_the_cap_stands() -> None:
    run = plan_run("broken_backends:ReadTakesAnyId.make", profile="quick", seed=0, only=(PROPERTY,))
    result = run_check(CHECKS_BY_NAME[PROPERTY], run, allowance=Allowance(cap=1e-9))
    assert result.status == "failed", result.detail
    assert result.violated_rule == "ARG-001"


def test_in_ci_the_run_is_a_gate_with_a_fixed_seed_and_says_what_it_changed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gate = plan_run("memory", profile="quick", environ={"CI": "true"})
    assert (gate.ci, gate.seed) == (True, CI_SEED)
    assert plan_run("memory", profile="quick", seed=5, environ={"CI": "1"}).seed == 5
    local = plan_run("memory", profile="quick", environ={})
    assert not local.ci
    assert in_ci({"GITHUB_ACTIONS": "true"})
    assert not in_ci({"GITHUB_ACTIONS": "false"})
    header = run_header(gate)
    assert header[0].endswith(f"profile quick · seed {CI_SEED} · cap 5m")
    assert any(line.startswith("CI is set: the run is a gate") for line in header)
    # The settings every Hypothesis run takes are the gate's whether or not CI is set.
    settings = kit_settings(max_examples=5, phases=REPORTING_PHASES)
    assert (settings.database, settings.deadline, settings.print_blob) == (None, None, True)


def test_every_run_names_what_it_runs_before_its_first_check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CI_VARIABLES:  # outside CI: a CI job's header has a line more
        monkeypatch.delenv(name, raising=False)
    assert main(["run", "memory", "--profile", "quick", "--seed", "7", "--only", PROPERTY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("checkpointspec ")
    assert "· memory · suite storage · profile quick · seed 7 · cap 5m" in out[0]
    assert out[1].startswith("backend checkpointspec.backends.memory:make declares ")
    assert out[2] == "the same work again: checkpointspec run memory --profile quick --seed 7"
    assert out[3].startswith("[1/")
    assert (
        main(["run", "memory", "--profile", "quick", "--seed", "7", "--only", PROPERTY, "-q"]) == 0
    )
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0] == out[0]
    assert not quiet[1].startswith("backend ")


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_backend_that_stops_answering_costs_the_run_its_cap_not_more() -> None:
    hanging = ("SEQ-001::seqs_are_contiguous_across_batches", "SEQ-003::append_returns")
    run = plan_run(
        "hanging_backends:HangsOnAppend.make",
        profile="quick",
        seed=1,
        only=(*hanging, "HEAD-001::head_is_the_last_seq"),
        workers=2,
        budget=2.0,
    )
    report = run_kit(run)
    assert report.exit_status == 4, report
    statuses = {c.name: (c.status, c.reason) for c in report.checks}
    stopped = [n for n, (status, reason) in statuses.items() if reason.startswith("stopped: ")]
    assert len(stopped) == 2, statuses
    # The run ended (the cap and its grace, not the backend's hour, bounded it), and
    # what the cap stopped is incomplete, never passed.
    assert all(status == "incomplete" for status, _ in statuses.values()), statuses
