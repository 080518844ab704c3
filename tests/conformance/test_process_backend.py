"""``--process``: the whole kit through a backend in another process.

The child here is the Python end of the stdio protocol serving a reference
backend, so every verdict must be the reference's own: a pass. Usage errors of
the flag are one line and exit 2, as every usage error is.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpointspec.conformance.engines.processes.groups import group_members
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit

SERVE = [sys.executable, "-m", "checkpointspec.backends.stdio.serve"]


def served(backend: str) -> str:
    return shlex.join([*SERVE, backend])


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "memory", "--process", "x"], "one of them"),
        (
            ["run"],
            "name a backend, or give --process COMMAND, --lite-agent MODULE#FACTORY, --langgraph",
        ),
        (["run", "memory", "--validate-protocol"], "--validate-protocol checks a --process"),
        (["run", "--process", "  "], "--process needs a command"),
        (["run", "--process", "node 'unclosed"], "No closing quotation"),
        (["run", "--process", "no-such-program-here"], "cannot start no-such-program-here"),
    ],
)
def test_process_usage_errors_are_one_line(
    argv: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    one_line_error: Callable[[], str],
) -> None:
    assert main([*argv, "-q"]) == 2
    assert said in one_line_error()


def test_a_child_that_dies_at_start_is_named_with_its_last_words(
    capsys: pytest.CaptureFixture[str], one_line_error: Callable[[], str]
) -> None:
    crash = shlex.join([sys.executable, "-c", "import sys; sys.exit('cannot open the store')"])
    assert main(["run", "--process", crash, "-q"]) == 2
    err = one_line_error()
    assert "exited (status 1) before answering" in err
    assert err.endswith("cannot open the store")


def test_stdio_passes_what_needs_processes_kills_and_several_handles(tmp_path: Path) -> None:
    report = run_kit(
        plan_run(
            None,
            process=served("file"),
            profile="quick",
            seed=5,
            only=(
                "APPEND-002::",
                "HANDLE-001::",
                "DUR-001::",
                "DUR-002::acknowledged_writes_survive_kill",
                "MP-001::processes_share_one_log",
                "MAINT-004::",
                "SCHEMA-001::",  # the store hooks, each a process of its own
                "INTEG-002::",
            ),
            validate_protocol=True,
        )
    )
    failures = [(c.name, c.status, c.detail) for c in report.checks if c.status != "passed"]
    assert report.exit_status == 0, failures
    assert report.backend == f"--process {shlex.quote(served('file'))} --validate-protocol"
    assert "multi_process" in report.capabilities


def test_a_killed_workers_child_is_dead_before_the_kit_looks(tmp_path: Path) -> None:
    import asyncio

    from checkpointspec.backends.registry import BackendTarget
    from checkpointspec.conformance.engines.processes.client import Opened, WorkerClient, hello

    async def body() -> None:
        with (tmp_path / "stderr").open("w+b") as stderr:
            worker = await WorkerClient.start(
                BackendTarget.named("checkpointspec.backends.stdio:make"), stderr, reply_timeout=30
            )
            opened = await worker.call(hello(str(tmp_path), {"process": served("file")}))
            assert isinstance(opened, Opened), stderr.read()
            # The worker and its handle's child: a worker starts no spare child for a
            # next handle it never opens.
            assert len(group_members(worker.process.pid)) == 2
            await worker.kill()
            assert group_members(worker.process.pid) == []

    asyncio.run(body())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "sqlite"])
def test_the_whole_kit_passes_through_stdio(backend: str) -> None:
    report = run_kit(
        plan_run(None, process=served(backend), profile="quick", workers=2, suite="all")
    )
    failures = [
        (c.name, c.status, c.detail) for c in report.checks if c.status not in ("passed", "skipped")
    ]
    assert report.exit_status == 0, failures
