"""Backends for findings and roots: one defect that several checks see under several
rules, and several defects that one check must find all of.

`TruncateIgnoresExpectedHead` is the SQLite reference backend (multi-process,
durable, so that every check applies) with one mistake: the kit must name its rule
as the root and show what the other checks saw as following from it.
`ThreeDefects` is the memory reference backend with three unrelated bugs: the
model-based check must report all three, each replayable on its own.
`HeadCachedPerHandle` accepts an expected head another handle made stale: the
racing-appends check must name it HANDLE-001, not APPEND-004. `DeleteCrashes`
crashes with a `TypeError` on every delete of a session it holds events of: checks
that meet the crash in their worker processes (a traced writer, a held writer, the
stress history) must see the crash the model-based check names, DELETE-001.
``violates``
names the root rule (the first, for several). Neither is a meta-suite case
(`cases.py`): `test_findings_and_roots.py` runs them. The kit loads them by
``module:attribute``, in its worker processes too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Self, cast

from broken_backends import ListsOldestFirst, ReadTakesAnyId, TruncateKeepsOneMore
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.backends.sqlite import make as make_sqlite
from checkpointspec.spec import (
    BackendContext,
    CheckpointConflictError,
    FaultHook,
    SessionEvent,
    check_truncate_arguments,
)

__all__ = [
    "DeleteCrashes",
    "DeleteCrashesWhenResumed",
    "HeadCachedPerHandle",
    "ThreeDefects",
    "TruncateIgnoresExpectedHead",
    "TruncateTakesAnEmptyHeadForOne",
]


class _SqliteVariant(SqliteCheckpointer):
    """The SQLite reference backend with one method changed by a subclass."""

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The reference SQLite factory (``ctx.codec`` and options applied), as this class."""
        handle = await make_sqlite(ctx)
        handle.__class__ = cls
        return cast(Self, handle)


class DeleteCrashesWhenResumed(_SqliteVariant):
    """Bug: a delete that stalled at one of its fault points raises ``TypeError`` once it
    goes on (its clean-up indexes a row the stall's bookkeeping left out), after its
    transaction committed.

    Only the commanded workers pause a delete, and they meet the crash in the answer of
    the write they resumed. Kit must report KILL-001 there, keeping delete's crash as
    the other explanation (no check meets it plainly: unpaused deletes work).
    """

    violates = "KILL-001"

    def set_fault_hook(self, hook: FaultHook | None) -> None:
        if hook is None:
            super().set_fault_hook(None)
            return

        def noting(point: str) -> None:
            if point.startswith("delete."):
                self.__dict__["stalled_delete"] = True
            hook(point)

        super().set_fault_hook(noting)

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)
        if self.__dict__.pop("stalled_delete", False):
            missing: list[int] | None = None
            missing[0]  # type: ignore[index]  # the crash itself: None is not subscriptable


class TruncateTakesAnEmptyHeadForOne(_SqliteVariant):
    """Bug: truncate compares ``expected_head`` with 1 where the session's head is 0 (a
    store defaulting a missing head to 1), so on an empty session an expected head of 1
    passes and one of 0 conflicts.

    One worker of the commanded workers shows it alone: after its truncate with the
    stale expected head 1 went through, it reads head 0 and the same truncate goes
    through again. Kit must report TRUNC-003 there, not MP-001.
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
        if expected_head is not None and await self.head(session_id) == 0:
            if expected_head != 1:
                raise CheckpointConflictError(session_id, expected_head, 1)
            expected_head = 0
        return await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )


class TruncateIgnoresExpectedHead(_SqliteVariant):
    """Bug: truncate checks ``expected_head`` is a valid head, then ignores it, so a
    truncate from a stale head succeeds.

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


class HeadCachedPerHandle(MemoryCheckpointer):
    """Bug: each handle remembers a session's head from the first time it touches it and
    compares expected_head with what it remembers, as the lite-agent SDK's file
    checkpointer does: an expected head another handle's append made stale is accepted.

    Appends racing on one expected head through several handles all succeed, but no
    race is needed: handles taking turns show it. Kit must report HANDLE-001, also in
    the racing-appends check.
    """

    violates = "HANDLE-001"

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(store)
        self._heads: dict[str, int] = {}

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """A handle on the process-wide store of ``ctx.path``, with a cache of its own."""
        return cls(store_for(ctx.path))

    async def head(self, session_id: str) -> int:
        if session_id not in self._heads:
            self._heads[session_id] = await super().head(session_id)
        return self._heads[session_id]

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        # Calls on several handles overlap (as a bridge's processes do); each handle's own
        # append is atomic, as the SDK's synchronous one is.
        await asyncio.sleep(0)
        remembered = await self.head(session_id)
        if expected_head is not None and expected_head != remembered:
            raise CheckpointConflictError(session_id, expected_head, remembered)
        head = await super().append(session_id, events, expected_generation=expected_generation)
        self._heads[session_id] = head
        return head


class DeleteCrashes(_SqliteVariant):
    """Bug: delete reads a row it assumes is there and raises ``TypeError`` (an error
    outside the contract) on every session that exists, as a store that indexes a
    missing row does.

    The model-based check names it DELETE-001 (delete's own answer); the held, traced
    and killed writers and the stress history meet the same crash in worker
    processes under their own rules. Kit must report DELETE-001 as the only root.
    """

    violates = "DELETE-001"

    async def delete(self, session_id: str) -> None:
        if await self.head(session_id) > 0:
            missing: list[int] | None = None
            missing[0]  # type: ignore[index]  # the crash itself: None is not subscriptable
        await super().delete(session_id)
