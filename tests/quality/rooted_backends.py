"""Backends for findings and roots: one defect that several checks see under several
rules, and several defects that one check must find all of.

`TruncateIgnoresExpectedHead` is the SQLite reference backend (multi-process,
durable, so that every check applies) with one mistake: the kit must name its rule
as the root and show what the other checks saw as following from it.
`ThreeDefects` is the memory reference backend with three unrelated bugs: the
model-based check must report all three, each replayable on its own. ``violates``
names the root rule (the first, for several). Neither is a meta-suite case
(`cases.py`): `test_findings_and_roots.py` runs them. The kit loads them by
``module:attribute``, in its worker processes too.
"""

from __future__ import annotations

from typing import Self, cast

from broken_backends import ListsOldestFirst, ReadTakesAnyId, TruncateKeepsOneMore
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.backends.sqlite import make as make_sqlite
from checkpointspec.spec import BackendContext, check_truncate_arguments

__all__ = ["ThreeDefects", "TruncateIgnoresExpectedHead"]


class TruncateIgnoresExpectedHead(SqliteCheckpointer):
    """Bug: truncate checks ``expected_head`` is a valid head, then ignores it, so a
    truncate from a stale head succeeds.

    Its own check sees TRUNC-003; the multi-process checks see the history it forks
    (appends and truncates disagreeing on the log). Kit must report TRUNC-003 as the
    root.
    """

    violates = "TRUNC-003"

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The reference SQLite factory (``ctx.codec`` and options applied), as this class."""
        handle = await make_sqlite(ctx)
        handle.__class__ = cls
        return cast(Self, handle)

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        self._check_open("truncate")  # a closed handle says so first (CLOSE-001)
        check_truncate_arguments(session_id, to_seq, expected_head, expected_generation)
        return await super().truncate(
            session_id, to_seq, None, expected_generation=expected_generation
        )


class ThreeDefects(ReadTakesAnyId, TruncateKeepsOneMore, ListsOldestFirst):
    """Bugs: reads take any session id, even the empty one (ARG-001); truncate keeps one
    event too many (TRUNC-001); list_sessions lists the oldest first (LIST-002).

    The first shows in almost every run of the model-based check; the kit must still
    find the other two.
    """

    violates = "ARG-001"
    also_violates = ("TRUNC-001", "LIST-002")
