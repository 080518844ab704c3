"""The power-loss check quiets the warnings of the reopens it makes, and nothing else.

Reopening a crash state often cuts a torn tail, which a backend rightly logs as a
warning; `quiet` drops those for the block it wraps, never for the process.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from checkpointspec.conformance.engines.crash.verdicts import quiet

log = logging.getLogger("checkpointspec.tests.quiet")


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_warnings_inside_the_block_are_dropped_errors_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with quiet():
        log.warning("cut a torn tail")
        log.error("could not open the store")
    log.warning("after the block")
    assert _messages(caplog) == ["could not open the store", "after the block"]
    assert logging.root.manager.disable == logging.NOTSET


def test_threads_the_block_hands_work_to_are_quiet_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)

    async def reopen() -> None:
        with quiet():
            await asyncio.to_thread(log.warning, "cut a torn tail in a worker thread")

    asyncio.run(reopen())
    assert _messages(caplog) == []


def test_other_threads_log_as_usual_meanwhile(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    other = threading.Thread(target=log.warning, args=("another thread",))
    with quiet():
        other.start()
        other.join()
        log.warning("inside")
    assert _messages(caplog) == ["another thread"]
