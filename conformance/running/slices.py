"""What each check may take of a run's time cap: `BudgetPlan`.

A run's budget (`KitRun.budget`, the profile's ``budget_seconds`` or ``--budget``)
is a cap on its wall-clock time, not a sharing-out of strength: every check may
take what is left of the cap when it starts (`Allowance.cap`), and runs its
profile's counts unless the cap comes first (it then ends ``incomplete``). A check
that would start once the cap is reached is given a cap of 0 and not started.

Only the work a failure adds is shared out (`Allowance.shrinking`: its shrinking and
the exploration rounds after it), and out of the profile's ``failure_seconds``
rather than the cap (the smaller of the two): when a check starts it may spend on a
failure the time left of them (times the number of worker processes) in proportion
to its kind's weight (`checkpointspec.conformance.engines.search.budget.KIND_WEIGHTS`)
over the weights of the checks not yet started, itself included, at least
`SHRINK_FLOOR`, so that a failure early in the run leaves the checks after it their
time. Neither is a count, so this moves no verdict; it keeps a failing run near the
profile's aim instead of at its cap (a service on PostgreSQL that fails its
model-based machine ran 230 s of a quick run's 300 s cap shrinking and exploring
past its findings, 40 s with the quick profile's 60). A check the backend's
declarations skip weighs nothing. The CLI's runner and the pytest plugin plan the
same way.

Checks run side by side start longest first (`longest_first`): a model-based machine
started last keeps one worker busy alone at the end of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..checks.base import Check
from ..engines.run.kit_run import KitRun
from ..engines.search.budget import KIND_WEIGHTS, SHRINK_FLOOR, Allowance
from .plan import skip_reason

__all__ = ["BudgetPlan", "longest_first"]


class BudgetPlan:
    """What ``run``'s time cap leaves each of ``checks`` (its selection), handed out as
    they start (`allowance_for`); with no budget every allowance is None (no cap)."""

    def __init__(
        self, run: KitRun, checks: Sequence[Check], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._budget = run.budget
        aim = run.profile.failure_seconds
        self._failure_budget = (
            run.budget if aim is None or run.budget is None else min(aim, run.budget)
        )
        self._capacity = max(1, run.workers)
        self._clock = clock
        self._started = clock()
        self._waiting = {
            c.name: KIND_WEIGHTS[c.kind] for c in checks if skip_reason(c, run.probe) is None
        }

    def left(self) -> float | None:
        """Seconds left of the run's cap (0 once reached), or None without one."""
        if self._budget is None:
            return None
        return max(0.0, self._budget - (self._clock() - self._started))

    def allowance_for(self, check: Check) -> Allowance | None:
        """What ``check``, starting now, may take: the cap's time left, and its share of
        the failure time left for a failure's work (None without a budget). A cap of 0:
        the run's cap was reached, and the check is not to start."""
        if self._budget is None or self._failure_budget is None:
            return None
        elapsed = self._clock() - self._started
        left = max(0.0, self._budget - elapsed)
        failure_left = max(0.0, self._failure_budget - elapsed)
        weight = self._waiting.pop(check.name, None)
        if weight is None:
            weight = KIND_WEIGHTS[check.kind]
        share = failure_left * self._capacity * weight / (weight + sum(self._waiting.values()))
        # One check runs in one worker: the others' capacity cannot make its time longer.
        return Allowance(cap=left, shrinking=max(SHRINK_FLOOR, min(share, left)))


def longest_first(checks: Sequence[Check], run: KitRun) -> list[Check]:
    """``checks`` in the order to start them in worker processes: by their kind's
    expected time (`KIND_WEIGHTS`), longest first, the catalog's order among equals,
    the checks ``run``'s backend skips last. The order moves no verdict (every check
    has its own store and seed), only how well the workers' time is packed: the
    quick SQLite run ended 14 s after its other checks, running its codec machine
    alone, when it started in the catalog's order."""
    return sorted(
        checks,
        key=lambda c: -KIND_WEIGHTS[c.kind] if skip_reason(c, run.probe) is None else 0.0,
    )
