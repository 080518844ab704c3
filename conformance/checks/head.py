"""Checks of the HEAD rules: head is the last seq, 0 for an unknown session."""

from __future__ import annotations

from ...spec import Capability
from ..engines.run.harness import Harness
from ._support import expect
from .base import check

__all__ = ["CHECKS"]


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
    if h.has(Capability.DELETE):
        await cp.delete("s")
        expect(await cp.head("s") == 0, "HEAD-001", "head after delete is not 0")


CHECKS = (head_is_the_last_seq,)
