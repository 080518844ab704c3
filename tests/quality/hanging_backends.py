"""A backend that stops answering: `HangsOnAppend` is the memory reference backend whose
every append waits for an hour, as a store whose server stopped replying does. The
kit loads it by ``module:attribute``, in its worker processes too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Self

from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.spec import BackendContext, SessionEvent

__all__ = ["HangsOnAppend"]


class HangsOnAppend(MemoryCheckpointer):
    """Bug: append never answers."""

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """A handle on the process-wide store of ``ctx.path``."""
        return cls(store_for(ctx.path))

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable: the hour is longer than any test")
