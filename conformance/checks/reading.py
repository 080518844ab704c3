"""Checks of the READ rules: since_seq is exclusive, unknown sessions read empty, a read is a snapshot."""

from __future__ import annotations

from ...spec import Capability
from ._support import expect
from .base import check
from .harness import Harness, read_all

__all__ = ["CHECKS"]


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
    if h.has(Capability.LIST):
        listed = [i.id for i in await cp.list_sessions()]
        expect(listed == [], "READ-002", f"reading an unknown session created {listed}")


@check("READ-003", "HANDLE-001")
async def read_is_a_snapshot(h: Harness) -> None:
    """READ-003: a read in progress sees the log before or after a concurrent write, never a mix."""
    reader, writer = await h.open(), await h.open()
    scenarios = ["append", "append through another handle"]
    if h.has(Capability.DELETE):
        scenarios.append("delete")
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


CHECKS = (
    since_seq_is_exclusive,
    unknown_sessions_read_empty,
    read_is_a_snapshot,
)
