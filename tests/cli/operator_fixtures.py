"""What the operator CLI's end-to-end tests load into the command by name.

The command runs in a subprocess that imports these through PYTHONPATH
(``--summarizer operator_fixtures:blocking``, ``operator_fixtures:gated=DIR``).
Each announces on stdout that the command reached it (``READY``), so the test
knows when to send SIGINT without sleeping.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.spec import BackendContext, Message, StoredEvent

READY = "READY"
GATE_FD = "CHECKPOINTSPEC_TEST_GATE_FD"


def _ready() -> None:
    sys.stdout.write(READY + "\n")
    sys.stdout.flush()


class BlockingSummarizer:
    """Says READY, then waits until its call is cancelled: a summarizer that never finishes."""

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        _ready()
        await asyncio.get_running_loop().create_future()
        raise AssertionError("a future nobody resolves returned")


def blocking() -> BlockingSummarizer:
    return BlockingSummarizer()


class GatedCheckpointer:
    """A file store whose first read says READY and waits for one byte on the fd in
    ``$CHECKPOINTSPEC_TEST_GATE_FD``: the test sends SIGINT meanwhile, then opens the gate."""

    def __init__(self, inner: FileCheckpointer) -> None:
        self._inner = inner
        self.capabilities = inner.capabilities
        self._gated = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        return self._read(session_id, since_seq)

    async def _read(self, session_id: str, since_seq: int) -> AsyncIterator[StoredEvent]:
        if not self._gated:
            self._gated = True
            _ready()
            # In a thread, so the event loop (and its SIGINT handler) runs meanwhile.
            await asyncio.to_thread(os.read, int(os.environ[GATE_FD]), 1)
        async for stored in self._inner.read(session_id, since_seq):
            yield stored


def gated(ctx: BackendContext) -> GatedCheckpointer:
    return GatedCheckpointer(FileCheckpointer(ctx.path))


class FailingSummarizer:
    """A summarizer whose model is unreachable."""

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        raise ConnectionError("the summarizing model is unreachable")


def failing() -> FailingSummarizer:
    return FailingSummarizer()
