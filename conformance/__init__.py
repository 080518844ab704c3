"""The conformance kit: checks that a checkpointer meets the contract in `checkpointspec.spec`.

From Python: ``run_kit(plan_run("sqlite", profile="quick"))`` returns the `KitReport`.

Four layers, each importing only the ones below it:

- `frontends` — how users start a run: the CLI, the pytest plugin, the badge and
  the CI summary;
- `running` — the registry of checks (the storage and session suites), the
  runner, reports and conformance levels;
- `checks` — one module per area of the rule catalog, each check naming its rules;
- `engines` — the machinery checks drive: the run as one value (`KitRun`), the
  harness a check gets, the
  state machines, worker processes, stress and the history checker, crashes
  (simulated disk, traces, held processes), fault codecs.

The names below are imported on first use: a worker process imports
``checkpointspec.conformance.engines.processes.worker`` alone, and every kill of a
worker starts one, so the whole kit (Hypothesis, every check) must not come with
each of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engines.run.kit_run import KitRun
    from .running.plan import plan_run
    from .running.registry import ALL_CHECKS, SESSION_CHECKS, select_checks
    from .running.report import CheckResult, KitReport
    from .running.runner import run_kit

__all__ = [
    "ALL_CHECKS",
    "SESSION_CHECKS",
    "CheckResult",
    "KitReport",
    "KitRun",
    "plan_run",
    "run_kit",
    "select_checks",
]

_HOMES = {
    "ALL_CHECKS": ".running.registry",
    "SESSION_CHECKS": ".running.registry",
    "select_checks": ".running.registry",
    "CheckResult": ".running.report",
    "KitReport": ".running.report",
    "KitRun": ".engines.run",
    "plan_run": ".running.plan",
    "run_kit": ".running.runner",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
