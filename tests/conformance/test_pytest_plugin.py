"""The pytest plugin turns every check into a test item and reports rule violations."""

from __future__ import annotations

import pytest

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
        ["*rule APPEND-002 violated*", "*replay: checkpointspec run brokenbackend:make*--seed 1*"]
    )


KIT_BUG = """
from checkpointspec.conformance.api import pytest_plugin
from checkpointspec.conformance.checks.base import check


@check("HEAD-001")
async def check_with_a_bug(h):
    \"\"\"HEAD-001: a check with a bug of its own.\"\"\"
    await (await h.open()).head("s")
    raise KeyError("the check's own bug")


pytest_plugin.select_checks = lambda only: [check_with_a_bug]
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
