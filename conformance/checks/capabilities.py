"""Checks of the CAP rules: an undeclared optional operation refuses loudly."""

from __future__ import annotations

from ...spec import (
    Capability,
    UnsupportedOperationError,
)
from ._support import append_five, expect_error, snapshot, unchanged
from .base import check
from .harness import CheckSkipped, Harness

__all__ = ["CHECKS"]


@check("CAP-001")
async def undeclared_operations_refuse_loudly(h: Harness) -> None:
    """CAP-001: delete / list_sessions / truncate / generation without their capability raise UnsupportedOperationError."""
    cp = await h.open()
    await append_five(cp, h)
    before = await snapshot(cp, ["s"])
    tried = 0
    if not h.has(Capability.DELETE):
        tried += 1
        await expect_error(
            lambda: cp.delete("s"),
            UnsupportedOperationError,
            "CAP-001",
            "delete without DELETE",
        )
    if not h.has(Capability.LIST):
        tried += 1
        await expect_error(
            cp.list_sessions,
            UnsupportedOperationError,
            "CAP-001",
            "list_sessions without LIST",
        )
    if not h.has(Capability.TRUNCATE):
        tried += 1
        await expect_error(
            lambda: cp.truncate("s", 1),
            UnsupportedOperationError,
            "CAP-001",
            "truncate without TRUNCATE",
        )
    generation = getattr(cp, "generation", None)
    if not h.has(Capability.GENERATION) and callable(generation):
        tried += 1
        await expect_error(
            lambda: generation("s"),
            UnsupportedOperationError,
            "CAP-001",
            "generation without GENERATION",
        )
    if not tried:
        raise CheckSkipped("the backend declares every optional operation it has")
    await unchanged(cp, before, "CAP-001", "a refused optional operation")


CHECKS = (undeclared_operations_refuse_loudly,)
