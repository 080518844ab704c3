"""Checks of the CLOSE rules: a closed handle refuses everything, and closing one spares the others."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...spec import Capability, CheckpointerClosedError
from ..engines.run.harness import Harness, read_all
from ._support import expect, expect_error
from .base import check

__all__ = ["CHECKS"]


@check("CLOSE-001")
async def closed_handles_refuse_everything(h: Harness) -> None:
    """CLOSE-001: after close every operation raises CheckpointerClosedError; close is idempotent."""
    # A bridge that answers close itself (the backend has none) refuses these calls itself.
    h.judged_on_the_kit_side("CLOSE-001")
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    await cp.close()
    await cp.close()
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "append": lambda: cp.append("s", [h.prompt("b")]),
        "read": lambda: read_all(cp, "s"),
        "head": lambda: cp.head("s"),
        "check_integrity": cp.check_integrity,
    }
    if h.has(Capability.LIST):
        calls["list_sessions"] = cp.list_sessions
    if h.has(Capability.DELETE):
        calls["delete"] = lambda: cp.delete("s")
    if h.has(Capability.TRUNCATE):
        calls["truncate"] = lambda: cp.truncate("s", 0)
    for name, call in calls.items():
        await expect_error(call, CheckpointerClosedError, "CLOSE-001", f"{name} after close")
    other = await h.open()
    expect(await other.head("s") == 1, "CLOSE-002", "calls on a closed handle changed the store")


@check("CLOSE-002")
async def closing_one_handle_spares_the_others(h: Harness) -> None:
    """CLOSE-002: closing a handle keeps acknowledged data and leaves other handles working."""
    h.judged_on_the_kit_side("CLOSE-002")
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


CHECKS = (
    closed_handles_refuse_everything,
    closing_one_handle_spares_the_others,
)
