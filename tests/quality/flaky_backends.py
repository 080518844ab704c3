"""Backends whose answers differ from one run of the same calls to the next.

Each is the in-memory reference backend with a defect that hidden state decides:
a random the kit does not seed. Hypothesis replays a failing example to shrink and
confirm it, and here the replay goes otherwise (it passes, fails elsewhere, or
draws other steps): the kit must report the defect's rule, never its own error.
``violates`` names the rule; every class is its own factory
(``flaky_backends:HandleFlipsStore.make``). Wrong on purpose.
"""

from __future__ import annotations

import random
from typing import ClassVar, Self

from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import BackendContext

__all__ = ["FLAKY", "HandleFlipsStore"]

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


FLAKY = {cls.__name__: cls for cls in (HandleFlipsStore,)}
