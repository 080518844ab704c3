"""Checks of the LIST rules: each existing session once, most recent first, mtimes in modification order."""

from __future__ import annotations

import itertools
import time

from ...spec import Capability
from ..engines.contract.outcomes import check_list_order
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
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


@check("LIST-003", "LIST-001")
async def mtime_follows_modification_order(h: Harness) -> None:
    """LIST-003: a session modified later never has an earlier mtime (a SHOULD: reported as a warning).

    Its mtimes can only be compared if every session modified is listed: one
    missing breaks LIST-001 (a session truncated to 0 has been appended to and not
    deleted, so it stays listed)."""
    cp = await h.open()
    order = ["x", "y", "z", "x", "w"]
    for sid in order:
        await cp.append(sid, [h.prompt(sid)])
    emptied: dict[str, str] = {}
    if h.has(Capability.TRUNCATE):
        await cp.truncate("y", 0)
        order.append("y")
        emptied["y"] = " (truncated to 0 after its events were appended)"
    recency = list(dict.fromkeys(reversed(order)))
    mtimes = {i.id: i.mtime for i in await cp.list_sessions()}
    missing = [sid for sid in recency if sid not in mtimes]
    if missing:
        names = " and ".join(f"{sid!r}{emptied.get(sid, '')}" for sid in missing)
        raise RuleViolation(
            "LIST-001",
            f"{names} {'is' if len(missing) == 1 else 'are'} not listed: a session "
            "appended to and not deleted stays listed, even with no events; "
            f"list_sessions shows {sorted(mtimes)}",
        )
    for later, earlier in itertools.pairwise(recency):
        if mtimes[later] < mtimes[earlier]:
            h.warn("LIST-003", f"{later!r} was modified after {earlier!r} but has an earlier mtime")


CHECKS = (
    list_shows_existing_sessions_once,
    list_is_most_recent_first,
    mtime_follows_modification_order,
)
