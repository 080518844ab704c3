"""The pytest plugin turns every check into a test item and reports rule violations."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from checkpointspec.conformance.frontends.cli import main as cli_main

pytest_plugins = ["pytester"]

BROKEN = """
from checkpointspec.backends.memory import MemoryCheckpointer, store_for

class IgnoresExpectedHead(MemoryCheckpointer):
    async def append(self, session_id, events, expected_head=None, *, expected_generation=None):
        return await super().append(session_id, events, None)

def make(ctx):
    return IgnoresExpectedHead(store_for(ctx.path))
"""


def test_reference_backend_passes(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-seed", "1", "--checkpointer-only", "APPEND"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["collected 4 items"])  # counted when collected, not after


def test_broken_backend_fails_with_rule_and_replay(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "brokenbackend:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "APPEND-002::",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*APPEND-002::* broke APPEND-002",
            "[[]APPEND-002[]] *",  # the finding comes next
            "*replay: checkpointspec run brokenbackend:make*--seed 1*",
            "(the full traceback, the kit's frames included: pytest -vv)",
        ]
    )
    output = result.stdout.str()
    assert "@reproduce_failure" not in output
    assert "always and only run by failing test cases" not in output
    assert "Traceback (most recent call last)" not in output


def test_the_kits_traceback_is_shown_with_vv(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "brokenbackend:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "APPEND-002::",
        "-vv",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*APPEND-002::* broke APPEND-002", "traceback (the kit's frames included):"]
    )
    assert "Traceback (most recent call last)" in result.stdout.str()


KIT_BUG = """
from checkpointspec.conformance.running import plan
from checkpointspec.conformance.checks.base import check


@check("HEAD-001")
async def check_with_a_bug(h):
    \"\"\"HEAD-001: a check with a bug of its own.\"\"\"
    await (await h.open()).head("s")
    raise KeyError("the check's own bug")


plan.select_checks = lambda only, **_: [check_with_a_bug]
"""


def test_a_kit_error_is_a_pytest_error_not_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KIT_BUG)
    result = pytester.runpytest_subprocess("--checkpointer", "memory", "--checkpointer-seed", "1")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*kit error, not evidence against the backend*KeyError*", "*replay: checkpointspec run*"]
    )


def test_without_the_option_nothing_is_added(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_bad_backend_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--checkpointer", "nonexistent_mod:make")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def _usage_error(result: pytest.RunResult, *expected: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, output
    for text in expected:
        assert text in errors[0]


def test_a_backend_module_with_a_syntax_error_is_a_usage_error(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(nc_syntax="def make(ctx)\n    pass\n")
    result = pytester.runpytest_subprocess("--checkpointer", "nc_syntax:make")
    _usage_error(result, "'nc_syntax'", f"{path}:1", "SyntaxError")


def test_a_backend_module_that_raises_on_import_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    path = pytester.makepyfile(nc_raises="import os\nraise RuntimeError('no config')\n")
    result = pytester.runpytest_subprocess("--checkpointer", "nc_raises:make")
    _usage_error(result, f"{path}:2", "RuntimeError: no config")


def test_a_factory_returning_a_non_checkpointer_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(nc_none="def make(ctx):\n    return None\n")
    result = pytester.runpytest_subprocess("--checkpointer", "nc_none:make")
    _usage_error(result, "returned NoneType, which is not a Checkpointer: it lacks append")


def test_an_unknown_selection_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-only", "NOPE-999"
    )
    _usage_error(result, "--checkpointer-only", "NOPE-999")


def test_kit_items_are_collected_with_the_suites_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-only", "HEAD-001::", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(
        ["test_plain.py::test_one", "checkpointspec[[]memory[]]::HEAD-001::head_is_the_last_seq"]
    )
    result.stdout.fnmatch_lines(["2 tests collected*"])


def test_readmes_pytest_step_installs_what_it_runs() -> None:
    """README's ``pytest --checkpointer ... -n 2`` must work after README's own installs."""
    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    wanted = {re.split(r"[<>=\[ ]", req)[0] for req in extras["pytest"]}
    assert {"pytest", "pytest-xdist"} <= wanted
    readme = (root / "README.md").read_text()
    install = readme.index("pip install '.[pytest]'")
    assert install < readme.index("pytest --checkpointer")


def test_an_expected_failure_is_xfailed_with_its_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "brokenbackend:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "APPEND-002::",
        "--checkpointer-xfail",
        "APPEND-002=ignores expected_head (issue 12)",
        "-rx",
    )
    result.assert_outcomes(xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*XFAIL*APPEND-002*ignores expected_head (issue 12)*"])


def test_an_expected_failure_that_passes_fails_the_run(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "memory",
        "--checkpointer-profile",
        "quick",
        "--checkpointer-only",
        "HEAD-001::",
        "--checkpointer-xfail",
        "HEAD-001=thought broken",
    )
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*XPASS(strict)*HEAD-001: thought broken*"])


BREAKS_ANOTHER_RULE = """
from checkpointspec.conformance.running import plan
from checkpointspec.conformance.checks.base import check
from checkpointspec.conformance.engines.contract.violations import RuleViolation


@check("HEAD-001")
async def breaks_append_002(h):
    \"\"\"HEAD-001: a check that proves another rule broken.\"\"\"
    raise RuleViolation("APPEND-002", "seen on the way")


@check("HEAD-001")
async def kit_bug(h):
    \"\"\"HEAD-001: a check with a bug of its own.\"\"\"
    raise KeyError("the check's own bug")


plan.select_checks = lambda only, **_: [breaks_append_002, kit_bug]
"""


def test_an_expected_failure_covers_its_rule_only(pytester: pytest.Pytester) -> None:
    """As with the CLI's --xfail: a violation of another rule still fails, and a
    kit error stays an error (no verdict), whatever rule is expected to fail."""
    pytester.makeconftest(BREAKS_ANOTHER_RULE)
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "memory",
        "--checkpointer-seed",
        "1",
        "--checkpointer-xfail",
        "HEAD-001=known",
    )
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["*::* broke APPEND-002*"])


def test_an_unknown_xfail_rule_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-xfail", "NOPE-999=why"
    )
    _usage_error(result, "--checkpointer-xfail", "unknown rule 'NOPE-999'")


SEEDS_SEEN = """
import json


def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)  # the worker that ran it, on the xdist controller
    if report.when == "setup" and node is not None:
        seed = dict(report.user_properties)["checkpointspec_seed"]
        with open("seeds.jsonl", "a") as out:
            out.write(json.dumps([node.gateway.id, seed]) + "\\n")
"""


def test_xdist_workers_share_the_seed_printed_in_the_header(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SEEDS_SEEN)
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "memory",
        "--checkpointer-profile",
        "quick",
        "--checkpointer-only",
        "APPEND",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=4)
    header = re.search(r"checkpointspec: backend memory, .*seed (\d+)", result.stdout.str())
    assert header is not None, result.stdout.str()
    lines = (pytester.path / "seeds.jsonl").read_text().splitlines()
    seen = [json.loads(line) for line in lines]
    assert len(seen) == 4
    assert {worker for worker, _ in seen} == {"gw0", "gw1"}
    assert {seed for _, seed in seen} == {int(header.group(1))}


def test_the_summary_option_writes_the_clis_markdown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    summary = pytester.path / "summary.md"
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "brokenbackend:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-profile",
        "quick",
        "--checkpointer-only",
        "APPEND-002::",
        "--checkpointer-only",
        "HEAD-001::",
        "--checkpointer-summary",
        str(summary),
        "-n",
        "2",
    )
    result.assert_outcomes(failed=1, passed=1)
    text = summary.read_text(encoding="utf-8")
    assert "❌ **FAIL**: 1 rule failing" in text
    row = next(line for line in text.splitlines() if line.startswith("| APPEND-002 "))
    assert "| failed | [APPEND-002] " in row
    assert "`checkpointspec run brokenbackend:make --only APPEND-002::" in row
    assert "**Checks:** 2 run: 1 failed, 1 passed" in text


def test_the_summary_carries_xfail_reasons(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    summary = pytester.path / "summary.md"
    result = pytester.runpytest_subprocess(
        "--checkpointer",
        "brokenbackend:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "APPEND-002::",
        "--checkpointer-xfail",
        "APPEND-002=issue 12",
        "--checkpointer-summary",
        str(summary),
    )
    result.assert_outcomes(xfailed=1)
    text = summary.read_text(encoding="utf-8")
    assert "✅ **PASS**" in text
    assert "| APPEND-002 | MUST | xfailed | [APPEND-002] " in text
    assert "(expected: issue 12)" in text


def test_an_unwritable_summary_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-summary", str(pytester.path / "no" / "s.md")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --checkpointer-summary: cannot write *does not exist"])


def test_a_process_backend_runs_through_the_plugin(pytester: pytest.Pytester) -> None:
    import shlex
    import sys

    command = shlex.join([sys.executable, "-m", "checkpointspec.backends.stdio.serve", "file"])
    result = pytester.runpytest_subprocess(
        "--checkpointer-process",
        command,
        "--checkpointer-validate-protocol",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "APPEND-002::",
        "--checkpointer-only",
        "HANDLE-001::",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"checkpointspec: backend {command}*"])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--checkpointer", "memory", "--checkpointer-process", "x"],
            "give one of --checkpointer, --checkpointer-process, --checkpointer-langgraph,",
        ),
        (
            ["--checkpointer", "memory", "--checkpointer-validate-protocol"],
            "checks a --checkpointer-process",
        ),
        (["--checkpointer-process", "no-such-program-here"], "cannot start no-such-program-here"),
    ],
)
def test_process_usage_errors_through_the_plugin(
    pytester: pytest.Pytester, args: list[str], said: str
) -> None:
    _usage_error(pytester.runpytest_subprocess(*args), said)


def test_compare_fails_the_session_on_a_rule_newly_failing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenbackend=BROKEN)
    baseline = pytester.path / "memory.json"
    argv = ["run", "memory", "--profile", "quick", "--seed", "1", "-q"]
    assert cli_main([*argv, "--only", "APPEND-002::", "--report", str(baseline)]) == 0
    common = ["--checkpointer-seed", "1", "--checkpointer-profile", "quick"]
    common += ["--checkpointer-only", "APPEND-002::", "--checkpointer-compare", str(baseline)]
    worse = pytester.runpytest_subprocess("--checkpointer", "brokenbackend:make", *common)
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["newly failing: APPEND-002 passed -> failed*", "REGRESSED*"])
    same = pytester.runpytest_subprocess("--checkpointer", "memory", *common)
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["no rule newly failing"])


def test_compare_with_an_unreadable_report_is_a_usage_error(pytester: pytest.Pytester) -> None:
    missing = pytester.path / "missing.json"
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-compare", str(missing)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--checkpointer-compare: cannot read {missing}*"])


def test_a_budget_is_taken_and_one_that_is_no_duration_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    only = ("--checkpointer-only", "APPEND-001")
    taken = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-seed", "1", *only, "--checkpointer-budget", "2m"
    )
    taken.assert_outcomes(passed=2, skipped=1)  # APPEND-001, and two checks observing it
    refused = pytester.runpytest_subprocess(
        "--checkpointer", "memory", *only, "--checkpointer-budget", "soon"
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--checkpointer-budget: a budget is a positive duration*"])


def test_a_check_the_cap_stops_fails_its_test_unless_incomplete_is_accepted(
    pytester: pytest.Pytester,
) -> None:
    only = ("--checkpointer-only", "ARG-001::bad_session_ids")
    capped = ("--checkpointer", "memory", "--checkpointer-seed", "1", *only)
    tiny = ("--checkpointer-budget", "0.001s")
    failed = pytester.runpytest_subprocess(*capped, *tiny)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*incomplete, not passed: ran 1 examples*"])
    accepted = pytester.runpytest_subprocess(*capped, *tiny, "--checkpointer-accept-incomplete")
    accepted.assert_outcomes(passed=1)
