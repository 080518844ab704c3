"""Multi-process backends with one race each, for the free-running stress check.

Each is the SQLite reference backend with one mistake only contention shows.
The kit loads them by ``module:function`` in its worker processes, which import
this module by name (``tests/quality/conftest.py`` puts this folder on the path).
Nothing here is correct on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from checkpointspec.backends.sqlite import DATABASE_NAME, SqliteCheckpointer
from checkpointspec.spec import BackendContext, CheckpointConflictError, SessionEvent

__all__ = ["CheckThenAppend", "StaleHead", "make_check_then_append", "make_stale_head"]


class CheckThenAppend(SqliteCheckpointer):
    """Checks ``expected_head`` with a separate ``head`` call, then appends unguarded.

    Another process can append between the two calls, so an append succeeds
    from a head that is no longer current (APPEND-002 / APPEND-004 / SEQ-003).
    """

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if expected_head is not None:
            head = await self.head(session_id)
            if head != expected_head:
                raise CheckpointConflictError(session_id, expected_head, head)
        return await super().append(session_id, events, None)


class StaleHead(SqliteCheckpointer):
    """Answers every fifth ``head`` call from the previous answer, as a naive cache would (HEAD-001)."""

    _calls: dict[str, int]
    _last: dict[str, int]

    async def head(self, session_id: str) -> int:
        calls = self.__dict__.setdefault("_calls", {})
        last = self.__dict__.setdefault("_last", {})
        calls[session_id] = calls.get(session_id, 0) + 1
        if calls[session_id] % 5 == 0 and session_id in last:
            return last[session_id]
        last[session_id] = await super().head(session_id)
        return last[session_id]


async def make_check_then_append(ctx: BackendContext) -> SqliteCheckpointer:
    return await CheckThenAppend(Path(ctx.path) / DATABASE_NAME).open()


async def make_stale_head(ctx: BackendContext) -> SqliteCheckpointer:
    return await StaleHead(Path(ctx.path) / DATABASE_NAME).open()
