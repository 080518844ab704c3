"""Checks of the LIST rules: each existing session once, most recent first, mtimes in modification order."""

from __future__ import annotations

import itertools
import time

from ...spec import Capability, Checkpointer
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


TIE_ATTEMPTS = 50
"""How many times the LIST-002 check modifies three new sessions back to back to see
them tie; a store whose clock tells every modification apart never ties."""


@check("LIST-002")
async def list_is_most_recent_first(h: Harness) -> None:
    """LIST-002: ordered by mtime descending, ties by id ascending; mtimes are epoch seconds.

    Whether two modifications tie depends on how fast they ran: a first listing is
    judged on the mtimes that differ, then ties are made on purpose (`_ties_by_id`),
    so that every run judges the tie rule the same way on a store that can tie."""
    cp = await h.open()
    for sid in ("x", "y", "z", "x", "w"):
        await cp.append(sid, [h.prompt(sid)])
    infos = await cp.list_sessions()
    check_list_order(infos, "list_sessions()", ties=False)
    for info in infos:
        expect(
            isinstance(info.mtime, float | int) and 1e9 < info.mtime < time.time() + 86_400,
            "LIST-002",
            f"{info.id!r} has mtime {info.mtime!r}, not seconds since the epoch",
        )
    await _ties_by_id(h, cp)


async def _ties_by_id(h: Harness, cp: Checkpointer) -> None:
    """Modify sessions ``t<k>-1``, ``t<k>-2`` and ``t<k>-0``, in that order, until the store
    gives a pair modified in id order and a pair modified against it one mtime,
    and judge every listing: sessions the store cannot tell apart are listed by id,
    whichever was modified last or created first. A store that never ties (its
    clock tells every modification apart) has no tie to judge."""
    in_order = against_order = False
    for attempt in range(TIE_ATTEMPTS):
        sids = [f"t{attempt}-1", f"t{attempt}-2", f"t{attempt}-0"]
        for sid in sids:
            await cp.append(sid, [h.prompt(sid)])
        infos = await cp.list_sessions()
        check_list_order(infos, "list_sessions()")
        mtime = {info.id: info.mtime for info in infos}
        first, second, last = (mtime.get(sid) for sid in sids)
        in_order = in_order or (first is not None and first == second)
        against_order = against_order or (last is not None and last in (first, second))
        if in_order and against_order:
            h.measure(f"sessions tied at the store's clock resolution after {attempt + 1} tries")
            return


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
