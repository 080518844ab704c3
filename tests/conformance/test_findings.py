"""Findings and roots: a check explores past what it found, and a finding another rule's
defect explains is shown following from it (engines/search/exploration.py, running/roots.py)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from checkpointspec.conformance.engines.contract.violations import RuleViolation
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
from checkpointspec.conformance.engines.target.witness import Seen, note_divergence
from checkpointspec.conformance.running.findings import findings_from
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.report import CheckResult, Finding
from checkpointspec.conformance.running.roots import defects_of, resolved
from checkpointspec.conformance.running.runner import report_of
from checkpointspec.spec.divergences import TO_HEAD_CHANGED, WRONG_GENERATION, Divergence
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


def _following(check: str, rule: str, root: str) -> CheckResult:
    """A failed check whose finding of ``rule`` follows from ``root``'s divergence."""
    finding = Finding(
        rule, check, f"{rule} is broken", follows_from=root, root_evidence="its own steps"
    )
    rooted_finding = Finding(root, check, f"{root} is broken", shape=f"{root} shape")
    return CheckResult(
        check,
        CHECKS_BY_NAME[check].rules,
        "failed",
        1.0,
        violated_rule=root,
        findings=(rooted_finding, finding),
    )


def _diverged(rule: str, shape: str) -> Seen:
    return Seen(Divergence(rule, shape, "read('s', 3)", "seqs [4]", "seqs [3, 4]"), 7)


def test_a_finding_whose_own_steps_diverged_first_follows_from_the_divergence() -> None:
    check = CHECKS_BY_NAME[STRESS_CHECK]
    violation = RuleViolation("APPEND-002", "a stale expected head was accepted")
    note_divergence(
        violation, _diverged("READ-001", "read yielded an event at or before since_seq")
    )
    root, symptom = findings_from(check, violation, violation, "replay", None)
    assert (root.rule, root.follows_from, root.shape) == (
        "READ-001",
        None,
        "read yielded an event at or before since_seq",
    )
    assert (root.call, root.expected, root.got) == ("read('s', 3)", "seqs [4]", "seqs [3, 4]")
    assert (symptom.rule, symptom.follows_from) == ("APPEND-002", "READ-001")
    assert "call 7, read('s', 3)" in symptom.root_evidence


def test_a_finding_named_by_its_own_divergence_takes_its_shape() -> None:
    check = CHECKS_BY_NAME["READ-001::since_seq_is_exclusive"]
    violation = RuleViolation("READ-001", "read(since_seq=3) yielded seqs [3, 4]")
    note_divergence(
        violation, _diverged("READ-001", "read yielded an event at or before since_seq")
    )
    (finding,) = findings_from(check, violation, violation, "replay", None)
    assert finding.follows_from is None
    assert finding.shape == "read yielded an event at or before since_seq"


def test_a_finding_without_a_divergence_before_it_is_a_root() -> None:
    check = CHECKS_BY_NAME[STRESS_CHECK]
    violation = RuleViolation("APPEND-002", "a stale expected head was accepted")
    (finding,) = findings_from(check, violation, violation, "replay", None)
    assert (finding.rule, finding.follows_from) == ("APPEND-002", None)


def test_findings_of_one_rule_and_shape_in_several_checks_are_one_defect() -> None:
    shape = "read yielded an event at or before since_seq"
    seen_twice = [
        Finding("READ-001", "READ-001::since_seq_is_exclusive", "x", shape=shape),
        Finding("READ-001", "SEQ-001::model_based", "y", shape=shape),
        Finding("SEQ-001", "SEQ-001::model_based", "z", follows_from="READ-001"),
    ]
    (defect,) = defects_of(seen_twice)
    assert defect.rule == "READ-001"
    assert defect.checks == ("READ-001::since_seq_is_exclusive", "SEQ-001::model_based")
    assert defect.symptoms == ("SEQ-001",)


def test_two_shapes_of_one_rule_are_two_defects() -> None:
    two = [
        Finding("READ-001", "a", "x", shape="read yielded an event at or before since_seq"),
        Finding("READ-001", "b", "y", shape="read yielded seqs out of order"),
    ]
    assert len(defects_of(two)) == 2


def test_a_finding_without_a_shape_is_a_sighting_of_its_rules_one_defect() -> None:
    """A history's anomaly names its rule, not a divergence: with one shaped defect of
    that rule in the run it is that defect seen again, not a second line to fix."""
    shape = "append acknowledged a stale expected_head"
    seen = [
        Finding("MP-001", "STRESS", "15 anomalies, the first: ..."),
        Finding("MP-001", "MP-001::racing", "x", shape=shape, call="append('s1', ...)"),
    ]
    (defect,) = defects_of(seen)
    assert (defect.rule, defect.shape, defect.call) == ("MP-001", shape, "append('s1', ...)")
    assert defect.checks == ("MP-001::racing", "STRESS")


def test_unshaped_findings_stay_apart_from_two_shaped_defects_of_their_rule() -> None:
    shapes = ("read yielded an event at or before since_seq", "read yielded seqs out of order")
    seen = [
        Finding("READ-001", "STRESS", "a history anomaly"),
        Finding("READ-001", "HISTORY", "another history anomaly"),
        *(Finding("READ-001", f"check {n}", "x", shape=s) for n, s in enumerate(shapes)),
    ]
    defects = defects_of(seen)
    assert sorted(d.shape for d in defects) == sorted([*shapes, "a history anomaly"])
    (unshaped,) = (d for d in defects if d.shape not in shapes)
    assert unshaped.checks == ("HISTORY", "STRESS")


def test_an_expected_failure_is_no_defect() -> None:
    known = [Finding("TRUNC-003", TRUNCATE_CHECK, "x", shape="truncate did not raise")]
    assert defects_of(known, {"TRUNC-003": "declared"}) == ()


def test_a_rule_that_follows_from_an_expected_failure_fails_nothing() -> None:
    """A known defect (``--xfail``, or a lite-agent truncate declared without an
    expected head) seen again under another rule is one verdict: the run passes."""
    results = [
        _failed(TRUNCATE_CHECK, "TRUNC-003"),
        _following(STRESS_CHECK, "APPEND-002", "TRUNC-003"),
    ]
    checks = [CHECKS_BY_NAME[TRUNCATE_CHECK], CHECKS_BY_NAME[STRESS_CHECK]]
    by_name = {r.name: r for r in results}
    known = plan_run("memory", profile="quick", seed=1, expected_failures={"TRUNC-003": "known"})
    report = report_of(known, checks, by_name, 1.0)
    assert report.exit_status == 0
    assert report.roots == ()
    assert report.defects == ()
    verdicts = {r.id: (r.status, r.follows_from) for r in report.rules}
    assert verdicts["TRUNC-003"] == ("xfailed", None)
    assert verdicts["APPEND-002"] == ("failed", "TRUNC-003")
    # Not following from it, the same failure is a failure of the run.
    unexplained = {**by_name, STRESS_CHECK: _failed(STRESS_CHECK, "APPEND-002")}
    assert report_of(known, checks, unexplained, 1.0).exit_status == 1


def test_a_report_marks_derived_rules_and_leads_with_roots() -> None:
    results = [
        _failed(TRUNCATE_CHECK, "TRUNC-003"),
        _following(STRESS_CHECK, "APPEND-002", "TRUNC-003"),
    ]
    base = plan_run("memory", profile="quick", seed=1)
    checks = [CHECKS_BY_NAME[TRUNCATE_CHECK], CHECKS_BY_NAME[STRESS_CHECK]]
    report = report_of(base, checks, {r.name: r for r in results}, 1.0)
    assert report.roots == ("TRUNC-003",)
    assert [r.id for r in report.rules[:2]] == ["TRUNC-003", "APPEND-002"]
    assert report.rules[1].follows_from == "TRUNC-003"
    assert report.rules[1].status == "failed"
    encoded = msgspec.json.decode(msgspec.json.encode(report))
    assert [f["follows_from"] for f in encoded["findings"]][-1] == "TRUNC-003"
    # Neither check judged a divergence: the two sightings of TRUNC-003 are one defect.
    assert [(d["rule"], d["checks"]) for d in encoded["defects"]] == [
        ("TRUNC-003", sorted([TRUNCATE_CHECK, STRESS_CHECK]))
    ]


READ_CHECK = "READ-001::since_seq_is_exclusive"
LOCK_CHECK = "MAINT-001::other_handles_are_refused"
NOTHING = "read yielded nothing of a log that holds events"


def _inferred_blind_handle(check: str) -> CheckResult:
    """A check whose witness saw another handle read nothing of a log another handle
    wrote: HANDLE-001 by inference, READ-001 by the answer alone; its own assertion
    followed from it."""
    blind = Finding(
        "HANDLE-001",
        check,
        "read('s', 0) seqs []",
        shape="a handle does not see another handle's writes",
        otherwise=("READ-001", NOTHING),
    )
    own = Finding("MAINT-001", check, "x", follows_from="HANDLE-001", root_evidence="steps")
    return CheckResult(
        check, CHECKS_BY_NAME[check].rules, "failed", 1.0, "HANDLE-001", findings=(blind, own)
    )


def _reads_nothing_of_its_own_writes() -> CheckResult:
    finding = Finding("READ-001", READ_CHECK, "read('s', 0) seqs []", shape=NOTHING)
    return CheckResult(
        READ_CHECK, CHECKS_BY_NAME[READ_CHECK].rules, "failed", 1.0, "READ-001", findings=(finding,)
    )


def test_an_inferred_blind_handle_follows_from_the_read_defect_another_check_saw_plainly() -> None:
    results = resolved([_reads_nothing_of_its_own_writes(), _inferred_blind_handle(LOCK_CHECK)])
    lock = results[1]
    assert [(f.rule, f.follows_from) for f in lock.findings] == [
        ("HANDLE-001", "READ-001"),
        ("MAINT-001", "READ-001"),
    ]
    assert READ_CHECK in lock.findings[0].root_evidence
    (defect,) = defects_of([f for r in results for f in r.findings])
    assert (defect.rule, defect.shape, defect.checks) == ("READ-001", NOTHING, (READ_CHECK,))
    assert defect.symptoms == ("HANDLE-001", "MAINT-001")


def test_an_inferred_blind_handle_stands_when_no_check_saw_the_answer_plainly() -> None:
    alone = _inferred_blind_handle(LOCK_CHECK)
    assert resolved([alone]) == (alone,)
    # Another shape of the same rule is no evidence either.
    other = Finding("READ-001", READ_CHECK, "y", shape="read yielded seqs out of order")
    unrelated = CheckResult(
        READ_CHECK, CHECKS_BY_NAME[READ_CHECK].rules, "failed", 1.0, "READ-001", findings=(other,)
    )
    assert resolved([unrelated, alone])[1] == alone


MACHINE_CHECK = "SEQ-001::model_based"
TO_HEAD_CHECK = "TRUNC-005::truncate_to_head_changes_nothing"


def _stale_generation_let_through() -> CheckResult:
    """The model-based machine's finding: an ``expected_generation`` the model refuses
    let through, whose other explanation is a store generation other than the model's."""
    finding = Finding(
        "GEN-002",
        MACHINE_CHECK,
        "append('s', [..], expected_generation=2) returned",
        shape="append did not raise CheckpointConflictError (generation conflict)",
        otherwise=("GEN-001", WRONG_GENERATION),
    )
    return CheckResult(
        MACHINE_CHECK,
        CHECKS_BY_NAME[MACHINE_CHECK].rules,
        "failed",
        1.0,
        "GEN-002",
        findings=(finding,),
    )


def test_a_stale_generation_let_through_follows_from_a_truncate_to_the_head_seen_acting() -> None:
    # A truncate to the head that acts moves the generation one above the model's: an
    # expectation one above is let through. Seen plainly, TRUNC-005 explains it.
    acted = Finding("TRUNC-005", TO_HEAD_CHECK, "generation 1 -> 2", shape=TO_HEAD_CHANGED)
    truncation = CheckResult(
        TO_HEAD_CHECK,
        CHECKS_BY_NAME[TO_HEAD_CHECK].rules,
        "failed",
        1.0,
        "TRUNC-005",
        findings=(acted,),
    )
    results = resolved([truncation, _stale_generation_let_through()])
    (let_through,) = results[1].findings
    assert (let_through.rule, let_through.follows_from) == ("GEN-002", "TRUNC-005")
    assert TO_HEAD_CHECK in let_through.root_evidence
    # Without the sighting it stands as its own root.
    alone = _stale_generation_let_through()
    assert resolved([alone]) == (alone,)
