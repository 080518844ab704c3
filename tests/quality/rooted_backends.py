"""Backends whose one defect breaks several rules, each seen by another check: the kit
must name the defect's own rule as the root and show the others as following from it.

Each is the SQLite reference backend (multi-process, durable, so that every check
applies) with one mistake; ``violates`` names the root rule. The kit loads them by
``module:attribute``, in its worker processes too: ``rooted_backends:TruncateIgnoresExpectedHead.make``.
"""

from __future__ import annotations

from checkpointspec.backends.sqlite import SqliteCheckpointer
from racy_backends import Racy

__all__ = ["ROOTED", "TruncateIgnoresExpectedHead"]


class TruncateIgnoresExpectedHead(Racy):
    """Bug: truncate drops ``expected_head``, so a truncate from a stale head succeeds.

    Its own check sees TRUNC-003; the multi-process checks see the history it forks
    (appends and truncates disagreeing on the log). Kit must report TRUNC-003 as the
    root.
    """

    violates = "TRUNC-003"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        return await SqliteCheckpointer.truncate(
            self, session_id, to_seq, None, expected_generation=expected_generation
        )


ROOTED: dict[str, type[Racy]] = {"TruncateIgnoresExpectedHead": TruncateIgnoresExpectedHead}
