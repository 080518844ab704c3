"""A worker that goes silent is named: which request it left unanswered, and its last words.

The worker runs a backend whose factory announces itself on stderr and then
blocks; the kit's client must give up after its reply timeout and say that the
``hello`` request was the one in flight, with what the worker last wrote.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from checkpointspec.conformance.engines.processes.client import WorkerClient, WorkerHung, hello

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
                "blocking_backend:make",
                stderr,
                reply_timeout=2,
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
        f"worker process {pid} sent no answer to its hello request within 2s"
    ), str(hung)
    assert "opening the store at" in str(hung), str(hung)
