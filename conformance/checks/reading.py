"""Checks for read, head and list_sessions."""

from __future__ import annotations

import itertools
import time

from ...spec import Capability
from ..harness import Harness, read_all
from ..outcomes import check_list_order
from ..registry import check
from ._support import expect

__all__: list[str] = []


@check("READ-001")
async def since_seq_is_exclusive(h: Harness) -> None:
    """READ-001: read(since_seq) yields exactly seq > since_seq; at or past the head, nothing."""
    cp = await h.open()
    await cp.append("s", [h.prompt(str(i)) for i in range(1, 6)])
    for since in range(8):
        seqs = [s.seq for s in await read_all(cp, "s", since)]
        expect(
            seqs == list(range(since + 1, 6)),
            "READ-001",
            f"read(since_seq={since}) yielded seqs {seqs}",
        )


@check("READ-002", "HEAD-001")
async def unknown_sessions_read_empty(h: Harness) -> None:
    """READ-002: read and head of an unknown session yield nothing / 0 and create nothing."""
    cp = await h.open()
    expect(
        await read_all(cp, "ghost") == [], "READ-002", "read of an unknown session yielded events"
    )
    expect(
        await read_all(cp, "ghost", 3) == [],
        "READ-002",
        "read(since_seq=3) of an unknown session yielded events",
    )
    expect(await cp.head("ghost") == 0, "HEAD-001", "head of an unknown session is not 0")
    listed = [i.id for i in await cp.list_sessions()]
    expect(listed == [], "READ-002", f"reading an unknown session created {listed}")


@check("READ-003", "HANDLE-001")
async def read_is_a_snapshot(h: Harness) -> None:
    """READ-003: a read in progress sees the log before or after a concurrent write, never a mix."""
    reader, writer = await h.open(), await h.open()
    scenarios = ["append", "append through another handle", "delete"]
    if h.has(Capability.TRUNCATE):
        scenarios.append("truncate")
    for scenario in scenarios:
        sid = f"s-{scenario}"
        # Long enough to span pages of a paging backend, and the read has taken 20
        # events before the write: a live (non-snapshot) view then shows a mix.
        before = [h.prompt(f"{scenario} {i}") for i in range(1, 251)]
        await writer.append(sid, before)
        iterator = reader.read(sid).__aiter__()
        taken = [(await iterator.__anext__()).event for _ in range(20)]
        new = h.prompt(f"{scenario} new")
        match scenario:
            case "append":
                await reader.append(sid, [new])
                after = [*before, new]
            case "append through another handle":
                await writer.append(sid, [new])
                after = [*before, new]
            case "truncate":
                await writer.truncate(sid, 10)
                after = before[:10]
            case _:
                await writer.delete(sid)
                after = []
        got = taken + [s.event async for s in iterator]
        expect(
            got in (before, after),
            "READ-003",
            f"a read racing a {scenario} yielded {len(got)} events, neither the "
            f"{len(before)} before nor the {len(after)} after",
        )


@check("HEAD-001")
async def head_is_the_last_seq(h: Harness) -> None:
    """HEAD-001: head is the last seq; 0 for unknown and deleted sessions (and truncated to 0)."""
    cp = await h.open()
    expect(await cp.head("s") == 0, "HEAD-001", "head of a new store is not 0")
    await cp.append("s", [h.prompt("a"), h.prompt("b"), h.prompt("c")])
    expect(await cp.head("s") == 3, "HEAD-001", "head after 3 events is not 3")
    if h.has(Capability.TRUNCATE):
        await cp.truncate("s", 0)
        expect(await cp.head("s") == 0, "HEAD-001", "head after truncate to 0 is not 0")
        await cp.append("s", [h.prompt("d")])
    await cp.delete("s")
    expect(await cp.head("s") == 0, "HEAD-001", "head after delete is not 0")


@check("LIST-001")
async def list_shows_existing_sessions_once(h: Harness) -> None:
    """LIST-001: exactly the sessions appended to and not deleted, each once."""
    cp = await h.open()
    for sid in ("a", "b", "c", "a", "b"):
        await cp.append(sid, [h.prompt(sid)])
    await cp.delete("b")
    await cp.append("d", [])
    listed = sorted(i.id for i in await cp.list_sessions())
    expect(listed == ["a", "c"], "LIST-001", f"listed {listed}; expected ['a', 'c']")


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
