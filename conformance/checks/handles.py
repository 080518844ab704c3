"""Checks of the HANDLE rules: every handle on one store sees one log."""

from __future__ import annotations

from ...spec import CheckpointConflictError
from ..engines.run.harness import Harness
from ._support import expect, expect_error, snapshot
from .base import check

__all__ = ["CHECKS"]


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


CHECKS = (handles_share_one_log,)
