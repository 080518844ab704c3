"""A worker the backend ended says so: the parent gets evidence against the backend.

An exception outside the contract that the backend raised ends the worker with
status 3 and reaches the parent noted as the backend's (a failed check, as in
the kit's own process); an answer of a type the contract does not allow ends it
with status 4 and the parent raises the rule it broke; a breach of the stdio
protocol met in a backend itself served over it ends it with status 5 and the
parent raises that breach, noted as the backend's (PROTO-001).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.backends.stdio.messages import Append
from checkpointspec.backends.stdio.wire import StdioProtocolError
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.processes.client import (
    BACKEND_FAILED,
    BROKE_A_RULE,
    BROKE_THE_PROTOCOL,
    BackendFailedInWorker,
    Opened,
    WorkerClient,
    _exit_evidence,
    backend_error,
    breach_line,
    hello,
    marker_prompts,
    violation_line,
)
from checkpointspec.conformance.engines.processes.forkserver import ForkedWorker
from checkpointspec.conformance.engines.target.provenance import backend_operation

FAILING_BACKEND = """
from checkpointspec.backends.memory import MemoryCheckpointer, store_for

class Raises(MemoryCheckpointer):
    async def append(self, *args, **kwargs):
        raise RuntimeError("the disk caught fire")

class ReturnsNone(MemoryCheckpointer):
    async def append(self, *args, **kwargs):
        await super().append(*args, **kwargs)
        return None

def raises(ctx):
    return Raises(store_for(ctx.path))

def returns_none(ctx):
    return ReturnsNone(store_for(ctx.path))
"""


@pytest.fixture(params=["started afresh", "forked"])
def forked(request: pytest.FixtureRequest) -> bool:
    """A worker with an environment of its own is started afresh; one without is
    forked from the fork server: both end the same way."""
    return bool(request.param == "forked")


def _append_in_a_worker(tmp_path: Path, factory: str, forked: bool) -> BaseException:
    (tmp_path / "failing_backend.py").write_text(FAILING_BACKEND, encoding="utf-8")
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])

    async def body() -> BaseException:
        with (tmp_path / "stderr").open("w+b") as stderr:
            if forked:
                sys.path.insert(0, str(tmp_path))  # the fork server's import path
                try:
                    worker = await WorkerClient.start(
                        BackendTarget.named(f"failing_backend:{factory}"), stderr
                    )
                finally:
                    sys.path.remove(str(tmp_path))
                assert isinstance(worker.process, ForkedWorker)
            else:
                worker = await WorkerClient.start(
                    BackendTarget.named(f"failing_backend:{factory}"),
                    stderr,
                    env={"PYTHONPATH": pythonpath},
                )
            try:
                assert isinstance(await worker.call(hello(str(tmp_path / "store"))), Opened)
                try:
                    reply = await worker.call(Append(0, "s", marker_prompts(["m"])))
                except Exception as ended:
                    return ended
                raise AssertionError(f"the worker answered {reply!r}")
            finally:
                await worker.kill()

    return asyncio.run(body())


def test_an_exception_the_backend_raised_is_the_backends(tmp_path: Path, forked: bool) -> None:
    ended = _append_in_a_worker(tmp_path, "raises", forked)
    assert isinstance(ended, BackendFailedInWorker), repr(ended)
    assert ended.status == BACKEND_FAILED
    assert str(ended).startswith("RuntimeError: the disk caught fire"), str(ended)
    assert backend_operation(ended) == "append in a worker process"
    assert ended.error == "RuntimeError"
    assert backend_error(ended) == "RuntimeError"


def test_an_answer_of_the_wrong_type_fails_its_rule(tmp_path: Path, forked: bool) -> None:
    ended = _append_in_a_worker(tmp_path, "returns_none", forked)
    assert isinstance(ended, RuleViolation), repr(ended)
    assert ended.rule_id == "SEQ-003"
    assert ended.message.startswith("append returned NoneType None where an int is due"), (
        ended.message
    )
    # The violation crosses the process boundary whole: its call, expected and got too.
    assert (ended.call, ended.expected, ended.got) == ("append", "an int", "NoneType None")


def test_a_workers_violation_line_carries_every_field() -> None:
    violation = RuleViolation(
        "APPEND-003",
        "a batch torn by a kill",
        ("KILL-001",),
        call="append('s', [3 events])",
        expected="all 3 or none",
        got="2 of 3",
    )
    line = violation_line(violation)
    arrived = _exit_evidence(BROKE_A_RULE, f"Traceback ...\n{line}\n", "append")
    assert isinstance(arrived, RuleViolation), repr(arrived)
    assert arrived.rule_id == "APPEND-003"
    assert arrived.message == "a batch torn by a kill (in a worker process)"
    assert arrived.also == ("KILL-001",)
    assert (arrived.call, arrived.expected, arrived.got) == (
        "append('s', [3 events])",
        "all 3 or none",
        "2 of 3",
    )


def test_a_workers_breach_line_carries_every_field() -> None:
    line = b'{"id":7,"result":2}'
    breach = StdioProtocolError("a reply to another request", line=line, expected_id=6)
    ended = breach_line(breach, "append")
    arrived = _exit_evidence(BROKE_THE_PROTOCOL, f"Traceback ...\n{ended}\n", "append")
    assert isinstance(arrived, StdioProtocolError), repr(arrived)
    assert str(arrived) == "a reply to another request"
    assert (arrived.line, arrived.expected_id) == (line, 6)
    assert backend_operation(arrived) == "append in a worker process"
