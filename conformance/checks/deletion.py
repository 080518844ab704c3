"""Checks of the DELETE rules: delete removes everything; a re-append starts afresh."""

from __future__ import annotations

from ...spec import Capability
from ..engines.run.harness import Harness, read_all
from ._support import expect, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


@check("DELETE-001")
async def delete_removes_everything(h: Harness) -> None:
    """DELETE-001: after delete the session is unlisted, head 0, read empty; unknown ids are a no-op."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    await cp.append("t", [h.prompt("t")])
    await cp.delete("s")
    if h.has(Capability.LIST):
        expect(
            [i.id for i in await cp.list_sessions()] == ["t"],
            "DELETE-001",
            "the deleted session is still listed",
        )
    expect(await cp.head("s") == 0, "DELETE-001", "head of a deleted session is not 0")
    expect(await read_all(cp, "s") == [], "DELETE-001", "read of a deleted session yielded events")
    before = await snapshot(cp, ["s", "t", "never-existed"])
    await cp.delete("never-existed")
    await cp.delete("s")
    await unchanged(cp, before, "DELETE-001", "deleting unknown ids")


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


CHECKS = (
    delete_removes_everything,
    reappend_after_delete_starts_afresh,
)
