"""Checks of the KILL rules: the commanded-workers machine pauses and kills writers inside their operations.

The machine (`checkpointspec.conformance.engines.commanded_machine`) drives three
worker processes on one store, pauses writes at the backend's fault points,
resumes them or kills their process, and compares everything with `SpecModel`.
"""

from __future__ import annotations

from ..engines.commanded_machine import WORKERS, CommandedEnv, CommandedMachine, worker_pool
from ._support import run_machine
from .base import check
from .harness import Harness

__all__ = ["CHECKS"]


@check(
    "KILL-001",
    "MP-001",
    "READ-003",
    "APPEND-003",
    replay_note="only a backend with fault points has its writers paused and killed at "
    "the same places on every replay; without them a kill lands wherever the writer then is",
)
def commanded_workers(h: Harness) -> None:
    """KILL-001: processes paused inside writes and killed there leave whole writes and free locks."""
    with worker_pool(h.backend.target, h.options, WORKERS) as pool:
        env = CommandedEnv(pool, h.capabilities, h.new_store)
        # No shrinking: every shrink attempt replays processes being killed and
        # restarted, which took minutes; a failing run of at most commanded_steps
        # steps is reported as it was found.
        run_machine(
            h,
            lambda: CommandedMachine(env),
            examples=h.profile.commanded_examples,
            steps=h.profile.commanded_steps,
            shrink=False,
        )


CHECKS = (commanded_workers,)
