"""Checks of the CAP rules: an undeclared optional operation refuses loudly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...spec import Capability, UnsupportedOperationError
from ..engines.contract.outcomes import Ok, run_backend
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import CheckSkipped, Harness
from ._support import append_five, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


@check("CAP-001")
async def undeclared_operations_refuse_loudly(h: Harness) -> None:
    """CAP-001: delete / list_sessions / truncate / generation / acquire_maintenance without their capability raise UnsupportedOperationError."""
    # A bridge that answers every undeclared operation itself refuses them itself.
    h.judged_on_the_kit_side("CAP-001")
    cp = await h.open()
    await append_five(cp, h)
    before = await snapshot(cp, ["s"])
    # Each optional operation, the capability that must be declared for it, and a call.
    optional: list[tuple[Capability, str, Callable[[], Awaitable[object]]]] = [
        (Capability.DELETE, "delete", lambda: cp.delete("s")),
        (Capability.LIST, "list_sessions", cp.list_sessions),
        (Capability.TRUNCATE, "truncate", lambda: cp.truncate("s", 1)),
    ]
    generation = getattr(cp, "generation", None)
    if callable(generation):
        optional.append((Capability.GENERATION, "generation", lambda: generation("s")))
    acquire = getattr(cp, "acquire_maintenance", None)
    if callable(acquire):
        optional.append((Capability.MAINTENANCE, "acquire_maintenance", lambda: acquire("s")))
    tried = 0
    for capability, operation, call in optional:
        if h.has(capability):
            continue
        tried += 1
        outcome = await run_backend(call)
        if isinstance(outcome, Ok):
            # Most often a backend written before the capability existed: one line fixes it.
            raise RuleViolation(
                "CAP-001",
                f"{operation} works but {capability.name} is not declared: declare "
                f"Capability.{capability.name}, or make {operation} raise "
                f"UnsupportedOperationError ({operation} returned {outcome.value!r})",
            )
        if not isinstance(outcome.error, UnsupportedOperationError):
            raise RuleViolation(
                "CAP-001",
                f"{operation} without {capability.name} raised "
                f"{type(outcome.error).__name__}: {outcome.error}; expected "
                "UnsupportedOperationError",
            )
    if not tried:
        raise CheckSkipped("the backend declares every optional operation it has")
    await unchanged(cp, before, "CAP-001", "a refused optional operation")


CHECKS = (undeclared_operations_refuse_loudly,)
