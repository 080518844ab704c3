"""Checks for delete, several handles, close and reopen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...spec import Capability, CheckpointConflictError, Checkpointer, CheckpointerClosedError
from ..harness import Harness, read_all
from ..registry import check
from ._support import expect, expect_error, snapshot

__all__: list[str] = []


@check("DELETE-001")
async def delete_removes_everything(h: Harness) -> None:
    """DELETE-001: after delete the session is unlisted, head 0, read empty; unknown ids are a no-op."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    await cp.append("t", [h.prompt("t")])
    await cp.delete("s")
    expect(
        [i.id for i in await cp.list_sessions()] == ["t"],
        "DELETE-001",
        "the deleted session is still listed",
    )
    expect(await cp.head("s") == 0, "DELETE-001", "head of a deleted session is not 0")
    expect(await read_all(cp, "s") == [], "DELETE-001", "read of a deleted session yielded events")
    await cp.delete("never-existed")
    await cp.delete("s")
    expect(
        [i.id for i in await cp.list_sessions()] == ["t"],
        "DELETE-001",
        "deleting unknown ids changed the listing",
    )


@check("DELETE-002")
async def reappend_after_delete_starts_afresh(h: Harness) -> None:
    """DELETE-002: re-appending to a deleted session starts at seq 1 with no old event."""
    cp = await h.open()
    await cp.append("s", [h.prompt(f"old {i}") for i in range(4)])
    await cp.delete("s")
    expect(
        await cp.append("s", [h.prompt("new")]) == 1,
        "DELETE-002",
        "the first append after delete did not return 1",
    )
    got = [(s.seq, s.event) for s in await read_all(cp, "s")]
    expect(
        got == [(1, h.prompt("new"))], "DELETE-002", f"after delete and one append the log is {got}"
    )


@check("HANDLE-001", "APPEND-002")
async def handles_share_one_log(h: Harness) -> None:
    """HANDLE-001: writes through one handle are visible through another; conflicts span handles."""
    first, second = await h.open(), await h.open()
    await first.append("s", [h.prompt("one")])
    expect(
        await second.head("s") == 1,
        "HANDLE-001",
        "a second handle does not see the first handle's append",
    )
    await second.append("s", [h.prompt("two")], expected_head=1)
    error = await expect_error(
        lambda: first.append("s", [h.prompt("lost")], expected_head=1),
        CheckpointConflictError,
        "HANDLE-001",
        "append with a head made stale through another handle",
    )
    expect(error.actual == 2, "HANDLE-001", f"conflict reported actual={error.actual}; expected 2")
    expect(
        await snapshot(first, ["s"]) == await snapshot(second, ["s"]),
        "HANDLE-001",
        "two handles see different stores",
    )


@check("CLOSE-001")
async def closed_handles_refuse_everything(h: Harness) -> None:
    """CLOSE-001: after close every operation raises CheckpointerClosedError; close is idempotent."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    await cp.close()
    await cp.close()
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "append": lambda: cp.append("s", [h.prompt("b")]),
        "read": lambda: read_all(cp, "s"),
        "head": lambda: cp.head("s"),
        "list_sessions": cp.list_sessions,
        "delete": lambda: cp.delete("s"),
        "check_integrity": cp.check_integrity,
    }
    if h.has(Capability.TRUNCATE):
        calls["truncate"] = lambda: cp.truncate("s", 0)
    for name, call in calls.items():
        await expect_error(call, CheckpointerClosedError, "CLOSE-001", f"{name} after close")
    other = await h.open()
    expect(await other.head("s") == 1, "CLOSE-002", "calls on a closed handle changed the store")


@check("CLOSE-002")
async def closing_one_handle_spares_the_others(h: Harness) -> None:
    """CLOSE-002: closing a handle keeps acknowledged data and leaves other handles working."""
    keep, drop = await h.open(), await h.open()
    await drop.append("s", [h.prompt("from the closed handle")])
    await drop.close()
    expect(
        await keep.head("s") == 1, "CLOSE-002", "data acknowledged by a closed handle disappeared"
    )
    expect(
        await keep.append("s", [h.prompt("still working")]) == 2,
        "CLOSE-002",
        "a remaining handle stopped working",
    )
    third = await h.open()
    expect(await third.head("s") == 2, "CLOSE-002", "a new handle does not see the store")


async def _reopened(h: Harness, handles: list[Checkpointer]) -> Checkpointer:
    for cp in handles:
        await cp.close()
    return await h.open()


@check("DUR-001")
async def acknowledged_writes_survive_reopen(h: Harness) -> None:
    """DUR-001: after closing every handle and reopening, appends, truncates and deletes are in effect."""
    cp = await h.open()
    await cp.append("kept", [h.prompt(f"k{i}") for i in range(10)])
    await cp.append("gone", [h.prompt("g")])
    await cp.append("cut", [h.prompt(f"c{i}") for i in range(5)])
    if h.has(Capability.TRUNCATE):
        await cp.truncate("cut", 2)
    await cp.delete("gone")
    before = await snapshot(cp, ["kept", "gone", "cut"])
    again = await _reopened(h, [cp])
    after = await snapshot(again, ["kept", "gone", "cut"])
    expect(after == before, "DUR-001", f"after reopen the store differs: {before[0]} -> {after[0]}")
    expect(
        await again.append("kept", [h.prompt("more")]) == 11,
        "DUR-001",
        "appending after reopen did not continue at 11",
    )
