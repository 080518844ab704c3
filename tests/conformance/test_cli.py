"""The CLI's contract: exit statuses, reports, usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from checkpointspec.conformance.api.cli import main


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
    assert data["schema_version"] == 1
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
