"""A failure panel leads with the rule and the finding, in the kit's words, not Hypothesis'.

The panels are built from real failures: a state machine of this module that fails
once and then no more (Hypothesis' `FlakyFailure` on replay), one that always fails,
and a deliberately broken backend of tests/quality run through the CLI. Whatever
Hypothesis says to test authors (``@reproduce_failure``, "always and only run by
failing test cases") is absent; the kit's traceback appears only with ``--verbose``.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.conformance.checks.base import Check, check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.run.kit_run import BackendProbe
from checkpointspec.conformance.engines.search.stateful import run_machine
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running import plan
from checkpointspec.conformance.running.failures import (
    FLAKY_REPLAY,
    NOT_AGAIN,
    finding_panel,
    hypothesis_lines,
    panel,
)
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import CheckResult, Finding
from checkpointspec.conformance.running.runner import run_check
from checkpointspec.spec import Capability
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure
from hypothesis.stateful import RuleBasedStateMachine, rule

FINDING = "a killed append left 2 of 3 events of its batch"

CHATTER = ("@reproduce_failure", "reproduce_failure(", "always and only run by failing test cases")
KIT_TRACEBACK = (
    "Traceback (most recent call last)",
    "search/stateful.py",
    "run_state_machine_as_test",
)

_steps = {"taken": 0}


class _FailsOnce(RuleBasedStateMachine):
    """Fails on the run's third step and never again: what a race looks like to Hypothesis."""

    @rule(n=st.integers(0, 3))
    def write(self, n: int) -> None:
        _steps["taken"] += 1
        if _steps["taken"] == 3:
            raise RuleViolation("KILL-001", FINDING)


class _AlwaysFails(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @rule(n=st.integers(0, 10))
    def write(self, n: int) -> None:
        self.total += n
        if self.total > 12:
            raise RuleViolation("KILL-001", FINDING)


def _on_any_backend(kit_check: Check) -> Check:
    """``kit_check`` without the capability of its rule: these machines touch no backend."""
    return msgspec.structs.replace(kit_check, needs=frozenset())


@_on_any_backend
@check("KILL-001")
def fails_once(h: Harness) -> None:
    """KILL-001: a machine whose failure does not reproduce on replay."""
    _steps["taken"] = 0
    run_machine(h, _FailsOnce, examples=20, steps=5)


@_on_any_backend
@check("KILL-001")
def fails_once_unshrunk(h: Harness) -> None:
    """KILL-001: the same, run as KILL-001 runs its machine (no shrinking)."""
    _steps["taken"] = 0
    run_machine(h, _FailsOnce, examples=20, steps=5, shrink=False)


@_on_any_backend
@check("KILL-001")
def always_fails(h: Harness) -> None:
    """KILL-001: a machine that fails whenever its writes add up to more than 12."""
    run_machine(h, _AlwaysFails, examples=50, steps=10)


def _run(kit_check: Check, tmp_path: Path) -> CheckResult:
    return run_check(kit_check, plan_run("memory", profile="quick", seed=1), tmp_path)


def _cli(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    *checks: Check,
) -> tuple[int, list[str]]:
    """Run the CLI (selecting ``checks`` if any) and return its status and the lines
    of its failure panels: from the first panel's title to the verdict."""
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: one line of text is one line
    if checks:
        monkeypatch.setattr(plan, "select_checks", lambda only, **_: list(checks))
        # The memory backend as if it declared MULTI_PROCESS, so that KILL-001 is judged.
        probed = plan.probe_backend

        def probe(target: BackendTarget) -> BackendProbe:
            found = probed(target)
            return BackendProbe(found.capabilities | {Capability.MULTI_PROCESS}, found.has_hooks)

        monkeypatch.setattr(plan, "probe_backend", probe)
    status = main(argv)
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if " broke " in line)
    return status, out[start:-1]


def _no_chatter(text: str) -> None:
    for fragment in CHATTER:
        assert fragment not in text
    assert "FlakyFailure" not in text
    assert "Inconsistent results" not in text


# -- the translation ------------------------------------------------------------------


def test_a_flaky_failure_is_said_in_the_kits_words() -> None:
    violation = RuleViolation("KILL-001", FINDING)
    group = FlakyFailure("Inconsistent results: a test case failed on the first run", [violation])
    assert hypothesis_lines(group, violation) == [FLAKY_REPLAY, NOT_AGAIN]


def test_advice_to_test_authors_is_dropped_and_the_steps_kept() -> None:
    violation = RuleViolation("KILL-001", FINDING)
    for note in (
        "Failing test case: <state machine>",
        "state = M()",
        "state.write(n=1)",
        "state.write(n=1)",  # a step taken twice is kept twice
        "state.teardown()",
        "Explanation:",
        "    These lines were always and only run by failing test cases:",
        "You can reproduce this test case by temporarily adding "
        "@reproduce_failure('6.170.17', b'AAEC') as a decorator on your test function",
    ):
        violation.add_note(note)
    assert hypothesis_lines(violation, violation) == [
        "failing steps:\nstate = M()\nstate.write(n=1)\nstate.write(n=1)\nstate.teardown()"
    ]


# -- panels of real failures ----------------------------------------------------------


@pytest.mark.parametrize("kit_check", [fails_once, fails_once_unshrunk], ids=["shrunk", "unshrunk"])
def test_a_failure_that_does_not_reproduce_leads_with_rule_and_finding(
    tmp_path: Path, kit_check: Check
) -> None:
    result = _run(kit_check, tmp_path)
    assert (result.status, result.violated_rule) == ("failed", "KILL-001")
    lines = panel(result).splitlines()
    assert lines[0] == f"{kit_check.name} broke KILL-001"
    assert lines[1] == f"[KILL-001] {FINDING}"
    if kit_check is fails_once:  # Hypothesis replays only the runs it shrinks
        assert lines[2] == FLAKY_REPLAY
    _no_chatter(result.detail)
    # A run Hypothesis replayed to report it also carries its blob (--reproduce).
    assert f"--only {kit_check.name} --profile quick --seed 1" in result.replay


def test_the_cli_panel_has_the_finding_first_and_the_traceback_only_with_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    argv = ["run", "memory", "--seed", "3", "-q", "--report", str(report)]
    status, lines = _cli(monkeypatch, capsys, argv, fails_once)
    assert status == 1
    assert "fails_once broke KILL-001" in lines[0]
    assert lines[1:3] == [f"[KILL-001] {FINDING}", FLAKY_REPLAY]
    text = "\n".join(lines)
    _no_chatter(text)
    for fragment in KIT_TRACEBACK:
        assert fragment not in text
    assert "replay: checkpointspec run memory --only KILL-001::fails_once" in text
    assert "(the full traceback, the kit's frames included: --verbose)" in text
    # The JSON report carries the same panel text, and the traceback apart from it.
    (checked,) = json.loads(report.read_bytes())["checks"]
    assert checked["detail"].splitlines() == lines[1 : 1 + len(checked["detail"].splitlines())]
    assert "Traceback (most recent call last)" in checked["traceback"]

    status, verbose = _cli(monkeypatch, capsys, [*argv, "--verbose"], fails_once)
    assert status == 1
    assert verbose[1:3] == lines[1:3]  # still the finding first
    text = "\n".join(verbose)
    _no_chatter(text.split("traceback (the kit's frames included):")[0])
    for fragment in KIT_TRACEBACK:
        assert fragment in text


def test_steps_of_a_steady_failure_are_kept_without_hypothesis_advice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _cli(monkeypatch, capsys, ["run", "memory", "--seed", "3", "-q"], always_fails)
    assert status == 1
    assert lines[1] == f"[KILL-001] {FINDING}"
    assert lines[2] == "failing steps:"
    assert any(line.startswith("state.write(n=") for line in lines)
    text = "\n".join(lines)
    _no_chatter(text)
    assert FLAKY_REPLAY not in text
    assert "Traceback" not in text


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_broken_backend_gets_a_panel_without_hypothesis_advice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = "broken_backends:IgnoresExpectedHead.make"
    argv = ["run", backend, "--only", "SEQ-001::model_based", "--profile", "quick"]
    status, lines = _cli(monkeypatch, capsys, [*argv, "--seed", "1", "-q"])
    assert status == 1
    assert "SEQ-001::model_based broke APPEND-002" in lines[0]
    assert lines[1].startswith("[APPEND-002] handle 0: append(")
    assert lines[2] == "failing steps:"
    text = "\n".join(lines)
    _no_chatter(text)
    assert "Explanation" not in text
    assert "Traceback" not in text
    assert f"replay: checkpointspec run {backend} --only SEQ-001::model_based" in text


def test_a_finding_s_panel_is_rendered_from_its_fields() -> None:
    violation = Finding(
        "KILL-001",
        "KILL-001::x",
        FINDING,
        message=FINDING,
        steps=("failing steps:", "  write(n=3)"),
    )
    assert finding_panel(violation) == f"[KILL-001] {FINDING}\nfailing steps:\n  write(n=3)"
    raised = Finding(
        "HEAD-001",
        "HEAD-001::x",
        "the session layer raised KeyError from fold: 's'",
        message="the session layer raised KeyError from fold: 's'",
        raised_by="session layer",
        frames='  File "layer.py", line 3, in fold',
    )
    assert finding_panel(raised).splitlines() == [
        "the session layer raised KeyError from fold: 's'",
        "where the session layer raised it:",
        '  File "layer.py", line 3, in fold',
    ]


def test_verbose_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert "--verbose" in capsys.readouterr().out
