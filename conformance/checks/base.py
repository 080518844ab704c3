"""What a check is: an async or sync function of a `Harness`, with the rules it verifies.

The `check` decorator turns such a function into a `Check` value; it registers
nothing. Each module of this package lists its checks in a `CHECKS` tuple, and
`checkpointspec.conformance.running.registry` joins those tuples into the one the
kit runs, so the set of checks is plain data that a caller can filter or extend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import msgspec

from ...spec import RULES_BY_ID, Capability
from ..engines.search.budget import CheckKind

if TYPE_CHECKING:
    from ..engines.run.harness import Harness

__all__ = ["Check", "CheckFunc", "check"]

CheckFunc = Callable[["Harness"], Awaitable[None] | None]
"""A check: async (runs on the runner's event loop) or sync (owns its loops, e.g. Hypothesis)."""


class Check(msgspec.Struct, frozen=True):
    """One check: its name, the rules it verifies (the first names it) and what it needs."""

    name: str
    rules: tuple[str, ...]
    needs: frozenset[Capability]
    hooks: bool
    func: CheckFunc
    summary: str
    replay_note: str = ""
    """What of the check the seed does not decide (a kill at a moment of a real
    process, a race the operating system schedules), so that a failure's replay may
    differ; empty for a check whose replay is exact. Failure panels print it."""
    kind: CheckKind = "single"
    """What the check's time goes on, which decides its share of a run's time budget for
    shrinking a failure (`checkpointspec.conformance.engines.search.budget.KIND_WEIGHTS`)."""

    @property
    def rule_id(self) -> str:
        """The rule this check is named after."""
        return self.rules[0]


def check(
    *rules: str,
    needs: Iterable[Capability] = (),
    hooks: bool = False,
    replay_note: str = "",
    kind: CheckKind = "single",
) -> Callable[[CheckFunc], Check]:
    """Make ``func`` a `Check` verifying ``rules`` (at least one; the first names it).

    ``needs`` adds capabilities beyond the one of the first rule; ``hooks`` says
    the check needs `StoreHooks`; ``replay_note`` says what of it the seed does not
    decide (`Check.replay_note`); ``kind`` what its time goes on (`Check.kind`).
    Raises `KeyError` for a rule the catalog lacks.
    """
    if not rules:
        raise ValueError("a check verifies at least one rule")
    unknown = [r for r in rules if r not in RULES_BY_ID]
    if unknown:
        raise KeyError(f"check names unknown rules: {unknown}")
    # Only the rule a check is named after decides what it needs: a check may also
    # observe rules of capabilities the backend lacks, which the report then skips.
    primary = RULES_BY_ID[rules[0]].capability

    def make(func: CheckFunc) -> Check:
        summary = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else func.__name__
        return Check(
            name=f"{rules[0]}::{func.__name__}",
            rules=tuple(rules),
            needs=frozenset(({primary} if primary is not None else set()) | set(needs)),
            hooks=hooks,
            func=func,
            summary=summary,
            replay_note=replay_note,
            kind=kind,
        )

    return make
