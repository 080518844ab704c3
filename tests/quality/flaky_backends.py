"""Backends whose answers differ from one run of the same calls to the next.

Each is the in-memory reference backend with a defect that hidden state decides:
a random the kit does not seed. Hypothesis replays a failing example to shrink and
confirm it, and here the replay goes otherwise (it passes, fails elsewhere, or
draws other steps): the kit must report the defect's rule, never its own error.
``violates`` names the rule; every class is its own factory
(``flaky_backends:HandleFlipsStore.make``). Wrong on purpose.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import ClassVar, Self

from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import BackendContext, CheckpointConflictError, SessionEvent

__all__ = ["FLAKY", "EveryOtherStoreConflicts", "HandleFlipsStore"]

_COIN = random.Random()
"""Seeded from the system's entropy: no run of the kit decides it."""


class HandleFlipsStore(MemoryCheckpointer):
    """Bug: one handle in three, at random, gets a store of its own instead of ctx.path's.

    Whether a second handle sees the first one's events depends on a coin the kit
    does not control, so re-runs of the same steps answer differently. Kit must
    report HANDLE-001.
    """

    violates: ClassVar[str] = "HANDLE-001"

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: ctx.path's store, or one of the handle's own."""
        if _COIN.random() < 1 / 3:
            return cls(MemoryStore())
        return cls(store_for(ctx.path))


class EveryOtherStoreConflicts(MemoryCheckpointer):
    """Bug: every second handle opened refuses an append with expected_head with a
    conflict it makes up (actual 0), decided by a count of the handles opened.

    The same calls on a fresh store answer one way on one run and the other way on the
    next: the kit must name the call and both answers. Kit must report APPEND-002.
    """

    violates: ClassVar[str] = "APPEND-002"
    opened: ClassVar[itertools.count[int]] = itertools.count()

    def __init__(self, store: MemoryStore, conflicts: bool) -> None:
        super().__init__(store)
        self.conflicts = conflicts

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: ctx.path's store; every second handle conflicts."""
        return cls(store_for(ctx.path), conflicts=next(cls.opened) % 2 == 1)

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        if self.conflicts and expected_head is not None:
            raise CheckpointConflictError(session_id, expected_head, 0)
        return await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )


FLAKY = {cls.__name__: cls for cls in (HandleFlipsStore, EveryOtherStoreConflicts)}
