"""Checks of the LIST rules: each existing session once, most recent first, mtimes in modification order."""

from __future__ import annotations

import itertools
import time

from ...spec import Capability
from ..engines.harness import Harness
from ..engines.outcomes import check_list_order
from ._support import expect
from .base import check

__all__ = ["CHECKS"]


@check("LIST-001")
async def list_shows_existing_sessions_once(h: Harness) -> None:
    """LIST-001: exactly the sessions appended to and not deleted, each once."""
    cp = await h.open()
    for sid in ("a", "b", "c", "a", "b"):
        await cp.append(sid, [h.prompt(sid)])
    existing = ["a", "b", "c"]
    if h.has(Capability.DELETE):
        await cp.delete("b")
        existing.remove("b")
    await cp.append("d", [])
    listed = sorted(i.id for i in await cp.list_sessions())
    expect(listed == existing, "LIST-001", f"listed {listed}; expected {existing}")


@check("LIST-002")
async def list_is_most_recent_first(h: Harness) -> None:
    """LIST-002: ordered by mtime descending, ties by id ascending; mtimes are epoch seconds."""
    cp = await h.open()
    for sid in ("x", "y", "z", "x", "w"):
        await cp.append(sid, [h.prompt(sid)])
    infos = await cp.list_sessions()
    check_list_order(infos, "list_sessions()")
    for info in infos:
        expect(
            isinstance(info.mtime, float | int) and 1e9 < info.mtime < time.time() + 86_400,
            "LIST-002",
            f"{info.id!r} has mtime {info.mtime!r}, not seconds since the epoch",
        )


@check("LIST-003")
async def mtime_follows_modification_order(h: Harness) -> None:
    """LIST-003: a session modified later never has an earlier mtime (a SHOULD: reported as a warning)."""
    cp = await h.open()
    order = ["x", "y", "z", "x", "w"]
    for sid in order:
        await cp.append(sid, [h.prompt(sid)])
    if h.has(Capability.TRUNCATE):
        await cp.truncate("y", 0)
        order.append("y")
    recency = list(dict.fromkeys(reversed(order)))
    mtimes = {i.id: i.mtime for i in await cp.list_sessions()}
    for later, earlier in itertools.pairwise(recency):
        if mtimes[later] < mtimes[earlier]:
            h.warn("LIST-003", f"{later!r} was modified after {earlier!r} but has an earlier mtime")


CHECKS = (
    list_shows_existing_sessions_once,
    list_is_most_recent_first,
    mtime_follows_modification_order,
)
