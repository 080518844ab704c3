"""The CLI's contract: exit statuses, reports, usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from checkpointspec.conformance.api import runner
from checkpointspec.conformance.api.cli import main
from checkpointspec.conformance.checks.base import Check, check
from checkpointspec.conformance.checks.harness import Harness
from checkpointspec.conformance.engines.violations import RuleViolation


def test_memory_passes_and_writes_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    status = main(
        [
            "run",
            "memory",
            "--profile",
            "quick",
            "--seed",
            "7",
            "--only",
            "APPEND",
            "--only",
            "TRUNC",
            "--report",
            str(report),
            "--junit",
            str(junit),
            "-q",
        ]
    )
    assert status == 0
    data = json.loads(report.read_bytes())
    assert data["schema_version"] == 2
    assert data["seed"] == 7
    assert data["exit_status"] == 0
    statuses = {r["id"]: r["status"] for r in data["rules"]}
    assert statuses["APPEND-002"] == "passed"
    assert statuses["DUR-001"] == "skipped"
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert {c.get("name") for c in cases} == {c["name"] for c in data["checks"]}
    assert "PASS" in capsys.readouterr().out


def test_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no-such-backend", "-q"]) == 2
    assert "unknown backend" in capsys.readouterr().err


def test_unimportable_factory_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_module_xyz:make", "-q"]) == 2
    assert "cannot import" in capsys.readouterr().err


def test_factory_that_raises_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "json:loads", "-q"]) == 2
    assert "failed" in capsys.readouterr().err


def test_bad_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "memory", "--option", "novalue", "-q"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_selection_matching_nothing_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "memory", "--only", "NOTHING-999", "-q"]) == 2


def test_xfail_that_passes_fails_the_run() -> None:
    assert (
        main(
            [
                "run",
                "memory",
                "--profile",
                "quick",
                "--only",
                "HEAD-001",
                "--xfail",
                "HEAD-001",
                "-q",
            ]
        )
        == 1
    )


def test_rules_command_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    assert "CODEC-005" in capsys.readouterr().out


@check("HEAD-001")
async def check_with_a_bug(h: Harness) -> None:
    """HEAD-001: a check with a bug of its own."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    raise TypeError("the check's own bug")


@check("SEQ-003")
async def finds_a_violation(h: Harness) -> None:
    """SEQ-003: reports a violation."""
    raise RuleViolation("SEQ-003", "append returned 7; expected 1")


def _only(monkeypatch: pytest.MonkeyPatch, *checks: Check) -> None:
    monkeypatch.setattr(runner, "select_checks", lambda only: list(checks))


def test_a_kit_error_exits_3_and_is_reported_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only(monkeypatch, check_with_a_bug)
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    argv = ["run", "memory", "--seed", "3", "-q", "--report", str(report), "--junit", str(junit)]
    assert main(argv) == 3
    out = capsys.readouterr().out
    assert "KIT ERROR" in out
    assert "TypeError: the check's own bug" in out  # the traceback is printed
    data = json.loads(report.read_bytes())
    assert data["exit_status"] == 3
    (result,) = data["checks"]
    assert (result["status"], result["violated_rule"]) == ("error", None)
    assert {r["id"]: r["status"] for r in data["rules"]}["HEAD-001"] == "error"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    case = suite.find("testcase")
    assert case is not None
    assert case.find("failure") is None
    error = case.find("error")
    assert error is not None
    assert "TypeError" in (error.get("message") or "")


def test_a_failed_rule_outranks_a_kit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, check_with_a_bug, finds_a_violation)
    assert main(["run", "memory", "--seed", "3", "-q"]) == 1
