"""The conformance kit: checks that a checkpointer meets the contract in `checkpointspec.spec`.

Three layers, each importing only the ones below it:

- `api` — the registry of checks (the storage and session suites), the runner,
  reports, the CLI, the pytest plugin;
- `checks` — one module per area of the rule catalog, each check naming its rules;
- `engines` — the machinery checks drive: the model-based machine, worker
  processes, stress and the history checker, the simulated disk, fault codecs.
"""

from .api.registry import ALL_CHECKS, SESSION_CHECKS, select_checks
from .api.report import CheckResult, KitReport
from .api.runner import run_kit

__all__ = ["ALL_CHECKS", "SESSION_CHECKS", "CheckResult", "KitReport", "run_kit", "select_checks"]
