"""The CLI's --badge, --summary, --xfail RULE=REASON, the levels line, and ``explain``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.levels import level_of_rule
from checkpointspec.conformance.running.registry import SUITES
from checkpointspec.spec import CAPABILITY_REASONS, RULES, Capability

BROKEN = "broken_backends:IgnoresExpectedHead.make"
"""A backend whose append ignores expected_head: APPEND-002 fails."""


def test_a_pass_writes_a_green_badge_a_summary_and_prints_the_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    badge, summary = tmp_path / "b.svg", tmp_path / "s.md"
    argv = ["run", "memory", "--profile", "quick", "--seed", "2", "--only", "TRUNC", "-q"]
    assert main([*argv, "--badge", str(badge), "--summary", str(summary)]) == 0
    root = ET.parse(badge).getroot()
    assert root.get("aria-label") == "checkpointspec: truncate"
    text = summary.read_text(encoding="utf-8")
    assert "✅ **PASS**" in text
    assert "**Levels attained:** truncate" in text
    out = capsys.readouterr().out
    assert "levels: attained truncate · not declared durable, multi_process, codec" in out


@pytest.mark.usefixtures("broken_backends_importable")
def test_xfail_with_a_reason_is_shown_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    report, badge, summary = tmp_path / "r.json", tmp_path / "b.svg", tmp_path / "s.md"
    reason = "append ignores expected_head (issue 12)"
    status = main(
        [
            "run",
            BROKEN,
            "--profile",
            "quick",
            "--seed",
            "1",
            "--only",
            "APPEND-002::",
            "--xfail",
            f"APPEND-002={reason}",
            "--report",
            str(report),
            "--badge",
            str(badge),
            "--summary",
            str(summary),
            "-q",
        ]
    )
    assert status == 0
    data = json.loads(report.read_bytes())
    assert data["expected_failures"] == {"APPEND-002": reason}
    rule = next(r for r in data["rules"] if r["id"] == "APPEND-002")
    assert rule["status"] == "xfailed"
    assert reason in rule["reason"]
    row = next(line for line in capsys.readouterr().out.splitlines() if " APPEND-002 " in line)
    assert "xfailed │ Stale expected_head conflicts and writes nothing — APPEND-002::" in row
    assert f"(--xfail: {reason})" in row
    assert "xfailed" in (ET.parse(badge).getroot().get("aria-label") or "")
    assert f"(expected: {reason})" in summary.read_text(encoding="utf-8")


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_failure_writes_a_red_badge_and_a_summary_with_the_replay(tmp_path: Path) -> None:
    badge, summary = tmp_path / "b.svg", tmp_path / "s.md"
    argv = ["run", BROKEN, "--profile", "quick", "--seed", "1", "--only", "APPEND-002::", "-q"]
    assert main([*argv, "--badge", str(badge), "--summary", str(summary)]) == 1
    assert ET.parse(badge).getroot().get("aria-label") == "checkpointspec: failing: 1 rule"
    text = summary.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| APPEND-002 "))
    assert "| failed | [APPEND-002] " in row
    assert (
        f"`checkpointspec run {BROKEN} --only APPEND-002::stale_expected_head_conflicts "
        "--profile quick --seed 1`" in row
    )


def test_xfail_without_a_reason_still_works(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    argv = ["run", "memory", "--profile", "quick", "--only", "HEAD-001", "--xfail", "HEAD-001"]
    assert main([*argv, "--report", str(report), "-q"]) == 1  # it passes: xpassed
    data = json.loads(report.read_bytes())
    assert data["expected_failures"] == {"HEAD-001": ""}
    rule = next(r for r in data["rules"] if r["id"] == "HEAD-001")
    assert rule["status"] == "xpassed"
    assert rule["reason"] == "listed as an expected failure, but it passed"


@pytest.mark.usefixtures("kit_must_not_run")
@pytest.mark.parametrize("value", ["NOPE-999=a reason", "=a reason", "head-001=x"])
def test_xfail_with_an_unknown_rule_is_refused(
    value: str, capsys: pytest.CaptureFixture[str], one_line_error: Callable[[], str]
) -> None:
    assert main(["run", "memory", "-q", "--xfail", value]) == 2
    assert "unknown rule" in one_line_error()


# --- checkpointspec explain RULE ---------------------------------------------------------


def test_explain_prints_the_rule_its_capability_level_and_checks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "TRUNC-003"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "TRUNC-003 (MUST) truncate honours expected_head"
    assert f"needs:  truncate: {CAPABILITY_REASONS[Capability.TRUNCATE]}" in lines
    assert "level:  truncate" in lines
    checks_at = next(i for i, line in enumerate(lines) if line.startswith("checks: "))
    listed = [line.split()[0] for line in lines[checks_at + 1 :]]
    assert listed == [c.name for c in SUITES["all"] if "TRUNC-003" in c.rules]
    assert lines[checks_at] == f"checks: {len(listed)}"
    assert "SEQ-001::model_based" in listed  # a check of another area that verifies it too


def test_explain_names_session_rules_and_should_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "RESTORE-001"]) == 0
    out = capsys.readouterr().out
    assert "suite:  session (--suite session)" in out
    assert "level:  session" in out
    assert main(["explain", "LIST-003"]) == 0
    assert "level:  none (a SHOULD rule decides no verdict)" in capsys.readouterr().out


def test_explain_covers_every_rule_consistently_with_the_rules_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rules"]) == 0
    catalog = capsys.readouterr().out
    for rule in RULES:
        assert main(["explain", rule.id]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{rule.id} ({rule.strength.value}) {rule.title}\n")
        assert " ".join(rule.statement.split()) in " ".join(out.split())
        level = level_of_rule(rule.id)
        row = next(line for line in catalog.splitlines() if f" {rule.id} " in line)
        if level is not None:
            assert f" {level.name} " in row


def test_explain_an_unknown_rule_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], one_line_error: Callable[[], str]
) -> None:
    assert main(["explain", "NOPE-999"]) == 2
    err = one_line_error()
    assert "unknown rule 'NOPE-999'" in err
