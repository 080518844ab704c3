"""Sharing a run's time budget among its checks: `BudgetPlan`.

A run's budget (`KitRun.budget`, the profile's ``budget_seconds`` or ``--budget``)
is shared out as the checks start, not all at once: when a check starts it gets
the time the run has left (times the number of worker processes) in proportion to
its kind's weight (`checkpointspec.conformance.engines.search.budget.KIND_WEIGHTS`) over the
weights of the checks not yet started, itself included, but no more than the time
the run has left (a check runs in one worker), and at least `SLICE_FLOOR`; a kind
in `UNCUT_KINDS` runs its counts, unlimited. A check that ends early leaves its time to the ones after it; a slow
backend's single scenarios eat into what the repeating checks get, which then
thin out their search and say so. A check the backend's declarations skip weighs
nothing. The CLI's runner and the pytest plugin plan the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..checks.base import Check
from ..engines.run.kit_run import KitRun
from ..engines.search.budget import KIND_WEIGHTS, SLICE_FLOOR, UNCUT_KINDS
from .plan import skip_reason

__all__ = ["BudgetPlan"]


class BudgetPlan:
    """The slices of ``run``'s budget for ``checks`` (its selection), handed out as they
    start (`slice_for`); with no budget every slice is None (unlimited)."""

    def __init__(
        self, run: KitRun, checks: Sequence[Check], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._budget = run.budget
        self._capacity = max(1, run.workers)
        self._clock = clock
        self._started = clock()
        self._waiting = {
            c.name: KIND_WEIGHTS[c.kind] for c in checks if skip_reason(c, run.probe) is None
        }
        self.given: dict[str, float] = {}
        """The slice each check was given, by name (a re-check of it gets the same)."""

    def slice_for(self, check: Check) -> float | None:
        """Seconds ``check``, starting now, may spend (None without a budget, and for a
        kind in `UNCUT_KINDS`). A check asked for again (a re-check) gets its first
        slice; one outside the plan the floor."""
        if self._budget is None:
            return None
        if check.kind in UNCUT_KINDS:
            self._waiting.pop(check.name, None)
            return None
        if check.name in self.given:
            return self.given[check.name]
        weight = self._waiting.pop(check.name, None)
        if weight is None:
            return SLICE_FLOOR
        left = max(0.0, self._budget - (self._clock() - self._started))
        share = left * self._capacity * weight / (weight + sum(self._waiting.values()))
        # One check runs in one worker: the others' capacity cannot make its time longer.
        self.given[check.name] = max(SLICE_FLOOR, min(share, left))
        return self.given[check.name]
