"""A worker that goes silent is named: which request it left unanswered, and its last words.

The worker runs a backend whose factory announces itself on stderr and then
blocks; the kit's client must give up after its reply timeout and say that the
``hello`` request was the one in flight, with what the worker last wrote. A
worker whose backend ends its own process in the middle of a held write is
evidence against the backend: the check's rule fails, with its exit status and
last words.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.crash.holds import NEVER, held_write
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.engines.crash.verdicts import Call, Expected
from checkpointspec.conformance.engines.processes.client import (
    Opened,
    WorkerClient,
    WorkerHung,
    hello,
)

BLOCKING_FACTORY = """
import sys, time

def make(ctx):
    print("opening the store at", ctx.path, file=sys.stderr, flush=True)
    time.sleep(600)
"""


def test_a_silent_worker_names_the_request_it_left_unanswered_and_its_last_words(
    tmp_path: Path,
) -> None:
    (tmp_path / "blocking_backend.py").write_text(BLOCKING_FACTORY, encoding="utf-8")
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])

    async def body() -> tuple[WorkerHung, int]:
        with (tmp_path / "stderr").open("w+b") as stderr:
            worker = await WorkerClient.start(
                BackendTarget.named("blocking_backend:make"),
                stderr,
                # Long enough for the worker to start and reach the factory on a busy machine.
                reply_timeout=10,
                env={"PYTHONPATH": pythonpath},
            )
            try:
                with pytest.raises(WorkerHung) as hung:
                    await worker.call(hello(str(tmp_path / "store")))
                return hung.value, worker.process.pid
            finally:
                await worker.kill()

    hung, pid = asyncio.run(body())
    assert hung.waiting_for == "hello"
    assert str(hung).startswith(
        f"worker process {pid} sent no answer to its hello request within 10s"
    ), str(hung)
    assert "opening the store at" in str(hung), str(hung)


EXITING_FACTORY = """
import os, sys
from checkpointspec.backends.file import FileCheckpointer

class ExitsInAppend(FileCheckpointer):
    async def append(self, session_id, events, expected_head=None, **kwargs):
        print("giving up on", session_id, file=sys.stderr, flush=True)
        os._exit(3)

def make(ctx):
    return ExitsInAppend(ctx.path)
"""


@pytest.mark.skipif(stopper_unavailable() is not None, reason=f"{stopper_unavailable()}")
def test_a_writer_that_exits_mid_write_without_being_killed_fails_the_rule(
    tmp_path: Path,
) -> None:
    """The backend ended its own process inside append: evidence, not a kit error."""
    (tmp_path / "exiting_backend.py").write_text(EXITING_FACTORY, encoding="utf-8")
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    store = tmp_path / "store"
    store.mkdir()
    call = Call("append", "alpha", ("a", "b"), 0, Expected({"alpha": ("a", "b")}, frozenset()))

    async def body() -> RuleViolation:
        with (tmp_path / "stderr").open("w+b") as stderr:
            worker = await WorkerClient.start(
                BackendTarget.named("exiting_backend:make"),
                stderr,
                reply_timeout=60,
                env={"PYTHONPATH": pythonpath},
            )
            try:
                assert isinstance(await worker.call(hello(str(store))), Opened)
                with pytest.raises(RuleViolation) as violation:
                    async with held_write(worker, store, call, NEVER, "KILL-001"):
                        pass
                return violation.value
            finally:
                await worker.kill()

    violation = asyncio.run(body())
    assert violation.rule_id == "KILL-001"
    assert "exited in the middle of append('alpha', 2 events) without being killed" in str(
        violation
    ), str(violation)
    assert "status 3" in str(violation), str(violation)
    assert "giving up on alpha" in str(violation), str(violation)
