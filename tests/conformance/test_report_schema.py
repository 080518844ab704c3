"""The JSON Schema shipped in the package is the generated one, and real reports satisfy it."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from checkpointspec.conformance.running import report_schema as schema_module
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import REPORT_SCHEMA_VERSION, KitReport, to_json
from checkpointspec.conformance.running.report_schema import (
    REPORT_SCHEMA_FILE,
    report_schema,
    schema_text,
    shipped_report_schema,
)
from checkpointspec.conformance.running.runner import run_kit

REPO = Path(__file__).resolve().parents[2]
QUALITY = str(REPO / "tests" / "quality")
SHIPPED = Path(schema_module.__file__).with_name(REPORT_SCHEMA_FILE)


def test_the_shipped_file_is_the_generated_schema() -> None:
    # On failure: python -m checkpointspec.conformance.running.report_schema > conformance/running/report.schema.json
    assert SHIPPED.read_text(encoding="utf-8") == schema_text()
    assert shipped_report_schema() == report_schema()


def test_the_module_prints_the_schema() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "checkpointspec.conformance.running.report_schema"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert printed.stdout == schema_text()
    assert printed.stderr == ""


def test_the_package_data_ships_it() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]
    assert REPORT_SCHEMA_FILE in data["checkpointspec.conformance.running"]


def test_the_schema_is_valid_and_names_its_version() -> None:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert str(REPORT_SCHEMA_VERSION) in str(schema["title"])


def _validate(data: object) -> None:
    jsonschema.Draft202012Validator(shipped_report_schema()).validate(data)


def _as_json(report: KitReport) -> Any:
    return json.loads(to_json(report))


@pytest.fixture(scope="module")
def passing_report() -> Any:
    report = run_kit(
        plan_run("memory", profile="quick", seed=3, only=["APPEND-002", "HEAD", "TRUNC"])
    )
    assert report.exit_status == 0
    return _as_json(report)


@pytest.fixture(scope="module")
def failing_report() -> Any:
    sys.path.insert(0, QUALITY)
    try:
        report = run_kit(
            plan_run(
                "broken_backends:IgnoresExpectedHead.make",
                profile="quick",
                seed=3,
                only=["APPEND-002::"],
                expected_failures={"HEAD-001": "listed to show a reason in the report"},
            )
        )
    finally:
        sys.path.remove(QUALITY)
    assert report.exit_status == 1
    return _as_json(report)


def test_a_passing_run_satisfies_the_schema(passing_report: Any) -> None:
    _validate(passing_report)
    assert {level["name"] for level in passing_report["levels"]} >= {"base", "truncate"}


def test_a_failing_run_satisfies_the_schema(failing_report: Any) -> None:
    _validate(failing_report)
    statuses = {r["id"]: r["status"] for r in failing_report["rules"]}
    assert statuses["APPEND-002"] == "failed"
    assert failing_report["expected_failures"] == {
        "HEAD-001": "listed to show a reason in the report"
    }
    assert any(c["status"] == "failed" and c["replay"] for c in failing_report["checks"])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda r: r.pop("levels"), id="no levels"),
        pytest.param(lambda r: r["rules"][0].update(status="passd"), id="unknown rule status"),
        pytest.param(lambda r: r["levels"][0].update(status="done"), id="unknown level status"),
        pytest.param(lambda r: r["checks"][0].update(duration="fast"), id="duration not a number"),
        pytest.param(lambda r: r.update(expected_failures={"HEAD-001": 1}), id="reason not text"),
    ],
)
def test_the_schema_rejects_a_malformed_report(failing_report: Any, damage: Any) -> None:
    broken = copy.deepcopy(failing_report)
    damage(broken)
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken)


def test_a_report_read_back_is_the_same_report(failing_report: Any) -> None:
    decoded = msgspec.json.decode(json.dumps(failing_report), type=KitReport)
    assert json.loads(to_json(decoded)) == failing_report
