"""The check registry: every example check, the rules it verifies, what it needs.

A check is an async function taking a `Harness`. It is registered with the
`check` decorator, which names the rules it verifies (the first is the one it
is named after) and any capabilities beyond those the rules already need.
Checks that need the optional `StoreHooks` say so with ``hooks=True``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import msgspec

from ..spec import RULES_BY_ID, Capability

if TYPE_CHECKING:
    from .harness import Harness

__all__ = ["CHECKS", "Check", "CheckFunc", "check"]

CheckFunc = Callable[["Harness"], Awaitable[None] | None]
"""A check: async (runs on the runner's event loop) or sync (owns its loops, e.g. Hypothesis)."""


class Check(msgspec.Struct, frozen=True):
    """One registered check."""

    name: str
    rules: tuple[str, ...]
    needs: frozenset[Capability]
    hooks: bool
    func: CheckFunc
    summary: str

    @property
    def rule_id(self) -> str:
        """The rule this check is named after."""
        return self.rules[0]


CHECKS: dict[str, Check] = {}
"""Every registered check by name, in registration order."""


def check(
    *rules: str, needs: Iterable[Capability] = (), hooks: bool = False
) -> Callable[[CheckFunc], CheckFunc]:
    """Register an async check verifying ``rules`` (at least one; the first names it)."""
    if not rules:
        raise ValueError("a check verifies at least one rule")
    unknown = [r for r in rules if r not in RULES_BY_ID]
    if unknown:
        raise KeyError(f"check names unknown rules: {unknown}")
    # Only the rule a check is named after decides what it needs: a check may also
    # observe rules of capabilities the backend lacks, which the report then skips.
    primary = RULES_BY_ID[rules[0]].capability

    def register(func: CheckFunc) -> CheckFunc:
        name = f"{rules[0]}::{func.__name__}"
        if name in CHECKS:
            raise ValueError(f"check {name} registered twice")
        summary = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else name
        CHECKS[name] = Check(
            name=name,
            rules=tuple(rules),
            needs=frozenset(({primary} if primary is not None else set()) | set(needs)),
            hooks=hooks,
            func=func,
            summary=summary,
        )
        return func

    return register
