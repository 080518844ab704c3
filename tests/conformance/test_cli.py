"""The CLI's contract: exit statuses, reports, usage errors."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpointspec.conformance.checks.base import Check, check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.run.profiles import DEFAULT_PROFILE
from checkpointspec.conformance.frontends import cli
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running import plan
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.report import CheckResult
from checkpointspec.conformance.running.runner import RunListener, run_kit


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
    assert data["schema_version"] == 9
    assert data["suite"] == "storage"
    assert data["session_layer"] is None
    assert not any(r["id"].startswith(("FOLD-", "RESTORE-")) for r in data["rules"])
    assert data["seed"] == 7
    assert data["exit_status"] == 0
    statuses = {r["id"]: r["status"] for r in data["rules"]}
    assert statuses["APPEND-002"] == "passed"
    assert statuses["DUR-001"] == "skipped"
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert {c.get("name") for c in cases} == {c["name"] for c in data["checks"]}
    assert "PASS" in capsys.readouterr().out


def test_what_a_passing_check_covered_is_printed_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    only = "DUR-003::acknowledged_writes_survive_power_loss"
    args = ["run", "file", "--profile", "quick", "--seed", "1", "--only", only, "-q"]
    assert main([*args, "--report", str(report)]) == 0
    (check,) = json.loads(report.read_bytes())["checks"]
    assert check["status"] == "passed"
    assert check["detail"].startswith("checked 200 crash states of ")
    out = " ".join(capsys.readouterr().out.split())
    assert f"covered {only}: {check['detail']}" in out


def test_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no-such-backend", "-q"]) == 2
    assert "unknown backend" in capsys.readouterr().err


def test_unimportable_factory_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_module_xyz:make", "-q"]) == 2
    assert "cannot import" in capsys.readouterr().err


def test_a_missing_parent_package_is_named_not_the_kits_frame(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "no_such_package_xyz.backend:make", "-q"]) == 2
    err = capsys.readouterr().err
    assert "no package 'no_such_package_xyz' (is its folder on PYTHONPATH?)" in err
    assert "registry.py" not in err  # the kit's own frame is no help to the author


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
    """Run ``checks`` alone, in this process: pool processes would not see the patch."""
    monkeypatch.setattr(plan, "select_checks", lambda only, **_: list(checks))
    monkeypatch.setattr(plan, "side_by_side", lambda run: 1)


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


# --- usage errors a newcomer meets: one line on stderr, exit 2, no traceback ------------


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return path


def test_a_backend_module_with_a_syntax_error_is_one_line_naming_file_and_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    path = _module(tmp_path, monkeypatch, "nc_syntax", "import os\ndef make(ctx)\n    pass\n")
    assert main(["run", "nc_syntax:make", "-q"]) == 2
    err = one_line_error()
    assert "'nc_syntax'" in err
    assert f"{path}:2" in err
    assert "SyntaxError" in err


def test_a_backend_module_that_raises_on_import_names_its_own_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    source = "import json\n\nSETTINGS = json.loads('not json')\n"
    path = _module(tmp_path, monkeypatch, "nc_raises", source)
    assert main(["run", "nc_raises:make", "-q"]) == 2
    err = one_line_error()
    assert f"{path}:3" in err  # the author's line, not json/decoder.py's
    assert "JSONDecodeError" in err


class _LacksCloseAndCapabilities:
    async def append(self, *args: object) -> int:
        return 0

    def read(self, *args: object) -> None:
        return None

    async def head(self, session_id: str) -> int:
        return 0

    async def list_sessions(self) -> list[str]:
        return []

    async def delete(self, session_id: str) -> None:
        return None

    async def truncate(self, *args: object) -> int:
        return 0

    async def check_integrity(self) -> None:
        return None


def returns_none(ctx: object) -> None:
    return None


def returns_dict(ctx: object) -> dict[str, int]:
    return {}


def returns_half_a_checkpointer(ctx: object) -> _LacksCloseAndCapabilities:
    return _LacksCloseAndCapabilities()


@pytest.mark.parametrize(
    ("factory", "returned", "lacks"),
    [
        ("returns_none", "NoneType", "append, read, head"),
        ("returns_dict", "dict", "append, read, head"),
        ("returns_half_a_checkpointer", "_LacksCloseAndCapabilities", "close, capabilities"),
    ],
)
def test_a_factory_returning_something_else_names_what_it_lacks(
    factory: str,
    returned: str,
    lacks: str,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    assert main(["run", f"{__name__}:{factory}", "-q"]) == 2
    err = one_line_error()
    assert f"the factory {__name__}:{factory} returned {returned}" in err
    assert f"which is not a Checkpointer: it lacks {lacks}" in err
    if returned.startswith("_Lacks"):
        assert "append" not in err.split("it lacks")[1]


@pytest.mark.usefixtures("kit_must_not_run")
@pytest.mark.parametrize("option", ["--report", "--junit", "--badge", "--summary"])
@pytest.mark.parametrize(
    ("where", "why"),
    [("missing/x", "does not exist"), ("file/x", "not a directory"), (".", "is a directory")],
)
def test_an_unwritable_output_path_is_refused_before_the_run(
    option: str,
    where: str,
    why: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    (tmp_path / "file").write_text("")
    assert main(["run", "memory", "-q", option, str(tmp_path / where)]) == 2
    err = one_line_error()
    assert option in err
    assert why in err


@pytest.mark.usefixtures("kit_must_not_run")
@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--xfail", "NOPE-999"], "unknown rule 'NOPE-999'"),
        (["-n", "0"], "0 processes"),
        (["-n", "-3"], "-3 processes"),
        (["-n", "two"], "'two' is not a number"),
    ],
)
def test_bad_options_are_refused_with_one_line(
    argv: list[str],
    reason: str,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    assert main(["run", "memory", "-q", *argv]) == 2
    assert reason in one_line_error()


def test_the_cli_and_the_pytest_plugin_default_to_the_same_profile() -> None:
    args = cli._parser().parse_args(["run", "memory"])
    assert args.profile == DEFAULT_PROFILE


# --- what --only leaves out is not_run, not not_checked ---------------------------------


def test_rules_outside_only_are_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    argv = ["run", "memory", "--profile", "quick", "--seed", "1", "--only", "HEAD-001::"]
    assert main([*argv, "--report", str(report), "--junit", str(junit), "-q"]) == 0
    statuses = {r["id"]: r["status"] for r in json.loads(report.read_bytes())["rules"]}
    assert statuses["HEAD-001"] == "passed"
    assert statuses["SEQ-001"] == "not_run"
    assert "not_checked" not in statuses.values()
    not_run = sorted(rule for rule, status in statuses.items() if status == "not_run")
    out = capsys.readouterr().out
    assert f"{len(not_run)} rules not run" in out
    assert "SEQ-001" not in out  # the table leaves them out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    prop = suite.find("properties/property[@name='rules_not_run']")
    assert prop is not None
    assert sorted((prop.get("value") or "").split()) == not_run


# --- live progress: the running check, and the same count as the summary ----------------


class _Events(RunListener):
    """What `run_kit` told, in order: ("start", check) and ("end", check)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def started(self, check: Check) -> None:
        self.events.append(("start", check.name))

    def finished(self, result: CheckResult) -> None:
        self.events.append(("end", result.name))


def test_each_check_is_announced_when_it_starts_before_its_result() -> None:
    told = _Events()
    run_kit(plan_run("memory", seed=1, only=["HEAD-001::", "READ-002::", "DUR-001::"]), told)
    events = told.events
    names = [name for kind, name in events if kind == "start"]
    assert len(names) >= 2
    assert events == [(kind, n) for n in names for kind in ("start", "end")]


class _Running(RunListener):
    """The checks started and not yet ended, and the most there were at once."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most = 0

    def started(self, check: Check) -> None:
        self.running.add(check.name)
        self.most = max(self.most, len(self.running))

    def finished(self, result: CheckResult) -> None:
        self.running.remove(result.name)  # KeyError if it had not been announced


def test_with_workers_the_running_checks_are_the_started_and_not_ended() -> None:
    told = _Running()
    report = run_kit(plan_run("memory", seed=1, workers=2, only=["HEAD-001::", "READ-00"]), told)
    assert not told.running
    assert told.most == 2
    assert len(report.checks) > 2


def test_the_bar_names_the_running_checks() -> None:
    progress = cli.Progress(disable=True)
    live = cli._Live(progress, "memory")
    first, second = (CHECKS_BY_NAME[n] for n in sorted(CHECKS_BY_NAME)[:2])

    def shown() -> str:
        return str(progress.tasks[0].description)

    live.started(first)
    assert shown() == first.name
    live.started(second)
    assert shown() == f"2 running: {first.name}, {second.name}"
    live.finished(CheckResult(first.name, first.rules, "passed", 0.0))
    assert shown() == second.name
    live.finished(CheckResult(second.name, second.rules, "passed", 0.0))
    assert shown() == "checking memory"
    assert progress.tasks[0].completed == 2


def test_the_summary_counts_every_check_the_bar_counts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    totals: list[int] = []
    real_selected = cli._Live.selected

    def selected(self: cli._Live, checks: list[object]) -> None:
        totals.append(len(checks))
        real_selected(self, checks)  # type: ignore[arg-type]

    monkeypatch.setattr(cli._Live, "selected", selected)
    # DUR-001 is skipped on memory (not durable): skipped checks are counted too.
    assert (
        main(["run", "memory", "--seed", "1", "--only", "HEAD-001::", "--only", "DUR-001::", "-q"])
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    (total,) = totals
    assert f"{total} checks: " in out
    counted = out.split(f"{total} checks: ")[1].split(" · ")[0]
    assert "skipped" in counted
    assert sum(int(part.split()[0]) for part in counted.split(", ")) == total


def test_every_skipped_check_is_named_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    # DUR-001's checks need DURABLE, which the memory backend does not declare.
    assert main(["run", "memory", "--seed", "1", "--only", "DUR-001::", "-q"]) == 0
    out = capsys.readouterr().out
    skipped = [c.name for c in CHECKS_BY_NAME.values() if c.name.startswith("DUR-001::")]
    assert skipped
    for name in skipped:
        assert f"skipped {name}: " in " ".join(out.split()), out


def test_checks_run_side_by_side_unless_told_otherwise() -> None:
    cores = len(os.sched_getaffinity(0))
    everything = plan.plan_run("memory", seed=1, workers=None)
    assert everything.workers == max(1, min(cores, plan.MOST_SIDE_BY_SIDE))
    one_check = plan.plan_run("memory", seed=1, workers=None, only=["SEQ-001::model_based"])
    assert one_check.workers == 1
    assert plan.plan_run("memory", seed=1, workers=3).workers == 3


def test_workers_take_a_count_or_auto() -> None:
    assert cli._parser().parse_args(["run", "memory"]).workers is None
    assert cli._parser().parse_args(["run", "memory", "-n", "auto"]).workers is None
    assert cli._parser().parse_args(["run", "memory", "-n", "2"]).workers == 2
