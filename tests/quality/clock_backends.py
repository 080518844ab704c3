"""Memory backends whose clock is coarse: mtimes in whole seconds or milliseconds.

Sessions modified in one tick of such a clock share an mtime, and LIST-002's tie
rule orders them by id. `CoarseClock` lists them so and must pass on every seed;
`TiesByRecency` and `TiesInCreationOrder` list a tie as a store ordering by a
finer time than it reports, or by a rowid, would, and must fail LIST-002 on
every seed: whether two modifications tie must not decide the verdict.
"""

from __future__ import annotations

import math
from typing import ClassVar, Self

from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import BackendContext, SessionInfo

__all__ = [
    "CLOCK_BACKENDS",
    "CoarseClock",
    "MillisecondClock",
    "TiesByRecency",
    "TiesInCreationOrder",
]


class CoarseClock(MemoryCheckpointer):
    """Reports mtimes rounded down to whole seconds; ties listed by id, as LIST-002 says."""

    resolution: ClassVar[float] = 1.0
    violates: ClassVar[str | None] = None

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: a handle on the process-wide store of ``ctx.path``."""
        return cls(store_for(ctx.path))

    def _tick(self, mtime: float) -> float:
        return math.floor(mtime / self.resolution) * self.resolution

    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        return [SessionInfo(info.id, self._tick(info.mtime)) for info in super()._listed(store)]


class MillisecondClock(CoarseClock):
    """Reports mtimes in whole milliseconds (as seconds); ties listed by id."""

    resolution = 0.001


class TiesByRecency(CoarseClock):
    """Bug: mtimes in whole seconds, listed in the order of the exact modification times.

    Sessions modified in one second share an mtime but are listed most recently
    modified first, not by id. Kit must report LIST-002.
    """

    violates = "LIST-002"

    async def list_sessions(self) -> list[SessionInfo]:
        await MemoryCheckpointer.list_sessions(self)  # closed handle, capability
        exact = MemoryCheckpointer._listed(self, self._store)
        exact.sort(key=lambda info: info.mtime, reverse=True)
        return [SessionInfo(info.id, self._tick(info.mtime)) for info in exact]


class TiesInCreationOrder(CoarseClock):
    """Bug: mtimes in whole milliseconds, a tie listed in the order its sessions were created.

    As ``ORDER BY mtime DESC`` on a table read in rowid order lists it. Kit must
    report LIST-002.
    """

    resolution = 0.001
    violates = "LIST-002"

    async def list_sessions(self) -> list[SessionInfo]:
        await MemoryCheckpointer.list_sessions(self)  # closed handle, capability
        infos = self._listed(self._store)  # in the order the sessions were created
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos


CLOCK_BACKENDS: dict[str, type[CoarseClock]] = {
    cls.__name__: cls for cls in (CoarseClock, MillisecondClock, TiesByRecency, TiesInCreationOrder)
}
"""Every backend here by class name; its factory is ``clock_backends:<name>.make``."""
