"""The suites and the session layer: --suite, --session-layer, the report, usage errors.

What the session checks find is the quality tests' business
(``tests/quality/test_kit_catches_session_bugs.py``); here is the plumbing: a
storage run never loads the session layer, a session run that cannot load it is
a usage error, a run reports its suite's rules only, the layer's exceptions are
evidence, and the pytest plugin has the same options.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendLoadError
from checkpointspec.conformance.checks import folding
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.target.session_layer import (
    DEFAULT_SESSION_LAYER,
    SessionLayerError,
    load_session_layer,
)
from checkpointspec.conformance.frontends import cli
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import rules_of_suite
from checkpointspec.conformance.running.runner import run_check, run_kit
from checkpointspec.spec import SESSION_LAYER_NAMES

pytest_plugins = ["pytester"]

FAKE_LAYER = """
def _never(*args, **kwargs):
    raise AssertionError("not called by the FOLD checks")

class _Workspace:
    def __init__(self, *args, **kwargs):
        _never()

    open = classmethod(_never)

class Layer:
    list_checkpoints = staticmethod(_never)
    Workspace = _Workspace
    restore = staticmethod(_never)
    recover = staticmethod(_never)
    compact = staticmethod(_never)
    ExtractiveSummarizer = staticmethod(_never)
    maintenance = staticmethod(_never)

class FoldRaises(Layer):
    @staticmethod
    def fold(events):
        return 1 / 0

class Incomplete:
    fold = staticmethod(_never)

class NoOpen(Layer):
    fold = staticmethod(_never)
    Workspace = staticmethod(_never)

class Uncallable(Layer):
    fold = "fold"
    compact = None
"""


@pytest.fixture
def fake_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "fake_layer.py").write_text(FAKE_LAYER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fake_layer"


# -- loading --------------------------------------------------------------------------------


def test_the_default_layer_is_the_reference() -> None:
    layer = load_session_layer()
    assert layer.target == DEFAULT_SESSION_LAYER == "checkpointspec.reference"
    assert all(callable(getattr(layer, name)) for name in SESSION_LAYER_NAMES)


def test_a_layer_that_does_not_import_is_a_usage_error() -> None:
    with pytest.raises(SessionLayerError, match="cannot import 'no_such_layer_xyz'"):
        load_session_layer("no_such_layer_xyz")
    assert issubclass(SessionLayerError, BackendLoadError)  # exit status 2 in the CLI


def test_a_layer_lacking_names_is_a_usage_error_naming_them(fake_layer: str) -> None:
    with pytest.raises(SessionLayerError, match=r"lacks list_checkpoints, Workspace, restore"):
        load_session_layer(f"{fake_layer}:Incomplete")
    with pytest.raises(SessionLayerError, match=r"lacks fold, list_checkpoints"):
        load_session_layer("json")
    with pytest.raises(SessionLayerError, match=r"has no attribute 'Nope'"):
        load_session_layer(f"{fake_layer}:Nope")


def test_a_layer_whose_workspace_cannot_open_is_a_usage_error(fake_layer: str) -> None:
    with pytest.raises(SessionLayerError, match=r"'fake_layer:NoOpen' lacks Workspace\.open \("):
        load_session_layer(f"{fake_layer}:NoOpen")


def test_a_layer_with_names_that_are_not_callable_is_a_usage_error(fake_layer: str) -> None:
    with pytest.raises(SessionLayerError, match=r"'fake_layer:Uncallable': fold, compact is not"):
        load_session_layer(f"{fake_layer}:Uncallable")


def test_the_harness_loads_the_layer_only_when_a_check_asks(tmp_path: Path) -> None:
    # A storage run never loads the layer, so planning it does not refuse this one.
    run = plan_run("memory", profile="quick", seed=1, session_layer="no_such_layer_xyz")
    harness = Harness(run, tmp_path)
    assert harness.session_target == "no_such_layer_xyz"
    with pytest.raises(SessionLayerError):
        _ = harness.session


# -- the CLI --------------------------------------------------------------------------------


def test_a_storage_run_never_loads_the_session_layer(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "memory", "--only", "HEAD-001::", "--session-layer", "no_such_layer_xyz"]
    assert main([*argv, "--seed", "1", "-q"]) == 0


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        ("no_such_layer_xyz", "cannot import 'no_such_layer_xyz'"),
        ("json", "lacks fold"),
        ("fake_layer:NoOpen", "lacks Workspace.open"),
        ("fake_layer:Uncallable", "fold, compact is not callable"),
    ],
)
def test_a_session_run_with_a_bad_layer_is_one_line_and_exit_2(
    layer: str,
    expected: str,
    fake_layer: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    one_line_error: Callable[[], str],
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(cli, "_rules_table", lambda report: ran.append("ran"))
    assert main(["run", "memory", "--suite", "session", "--session-layer", layer, "-q"]) == 2
    assert expected in one_line_error()
    assert ran == []


def test_selecting_the_other_suites_checks_says_which_suite(
    capsys: pytest.CaptureFixture[str], one_line_error: Callable[[], str]
) -> None:
    assert main(["run", "memory", "--only", "FOLD-001", "-q"]) == 2
    assert "--suite session" in one_line_error()
    assert main(["run", "memory", "--suite", "bogus", "-q"]) == 2


def test_a_session_run_reports_its_suite_and_only_its_rules(tmp_path: Path) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    argv = ["run", "memory", "--suite", "session", "--only", "FOLD-", "--only", "CKPT-"]
    assert main([*argv, "--seed", "2", "-q", "--report", str(report), "--junit", str(junit)]) == 0
    data = json.loads(report.read_bytes())
    assert data["schema_version"] == 9
    assert data["suite"] == "session"
    assert data["session_layer"] == DEFAULT_SESSION_LAYER
    statuses = {r["id"]: r["status"] for r in data["rules"]}
    assert set(statuses) == rules_of_suite("session")
    assert statuses["FOLD-003"] == "passed"
    assert statuses["RESTORE-001"] == "not_run"  # in the suite, left out by --only
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("name") == "checkpointspec[memory][session]"


def test_the_all_suite_runs_both() -> None:
    report = run_kit(
        plan_run(
            "memory", profile="quick", seed=4, suite="all", only=("HEAD-001::", "FOLD-001::prompts")
        )
    )
    assert report.exit_status == 0
    assert {r.id for r in report.rules} == rules_of_suite("all")
    assert [c.name.split("::")[0] for c in report.checks] == ["HEAD-001", "FOLD-001"]
    assert report.session_layer == DEFAULT_SESSION_LAYER


def test_session_checks_run_in_spawned_processes() -> None:
    report = run_kit(
        plan_run("memory", profile="quick", seed=5, suite="session", only=("FOLD-",), workers=2)
    )
    assert report.exit_status == 0, [c.reason for c in report.checks]
    skipped = {c.name for c in report.checks if c.status == "skipped"}
    # the restore-less state machine steps aside for the full one on a backend with TRUNCATE
    assert skipped == {"FOLD-001::session_model_without_restore"}
    assert {c.status for c in report.checks} == {"passed", "skipped"}


WITHOUT_TRUNCATE = """
from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.spec import Capability

class WithoutTruncate(MemoryCheckpointer):
    capabilities = MemoryCheckpointer.capabilities - {Capability.TRUNCATE}

def make(ctx):
    return WithoutTruncate(store_for(ctx.path))
"""


def test_restore_checks_are_skipped_without_truncate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "no_truncate.py").write_text(WITHOUT_TRUNCATE)
    monkeypatch.syspath_prepend(str(tmp_path))
    report = run_kit(
        plan_run(
            "no_truncate:make",
            profile="quick",
            seed=7,
            suite="session",
            only=("RESTORE-", "SNAP-001"),
        )
    )
    assert report.exit_status == 0
    statuses = {c.name.split("::")[0]: (c.status, c.reason) for c in report.checks}
    assert statuses["SNAP-001"][0] == "passed"
    for rule_id in ("RESTORE-001", "RESTORE-005", "RESTORE-007"):
        status, reason = statuses[rule_id]
        assert status == "skipped"
        assert "needs TRUNCATE" in reason


# -- what the layer raises is evidence -----------------------------------------------------------


def test_an_exception_the_layer_raises_fails_the_rule(fake_layer: str, tmp_path: Path) -> None:
    target = f"{fake_layer}:FoldRaises"
    run = plan_run("memory", profile="quick", seed=6, suite="session", session_layer=target)
    result = run_check(folding.CHECKS[0], run, tmp_path)
    assert result.status == "failed", result
    assert result.violated_rule == "FOLD-001"
    assert "the session layer raised ZeroDivisionError from fold" in result.detail
    assert (result.findings[0].raised_by, result.findings[0].call) == ("session layer", "fold")
    assert f"--suite session --session-layer {target} --only FOLD-001::" in result.replay


# -- the pytest plugin --------------------------------------------------------------------------


def test_the_plugin_runs_the_session_suite(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "memory",
        "--checkpointer-suite",
        "session",
        "--checkpointer-only",
        "FOLD-00",
        "--checkpointer-seed",
        "1",
    )
    result.assert_outcomes(passed=7, skipped=1)  # FOLD-001::session_model_without_restore
    result.stdout.fnmatch_lines(["*suite session, session layer checkpointspec.reference*"])


def test_the_plugin_refuses_a_layer_it_cannot_load(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "memory",
        "--checkpointer-suite",
        "session",
        "--checkpointer-session-layer",
        "no_such_layer_xyz",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot import 'no_such_layer_xyz'" in result.stderr.str()
