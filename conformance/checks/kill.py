"""Checks of the KILL rules: the commanded-workers machine pauses and kills writers inside their operations.

The machine (`checkpointspec.conformance.engines.commanded_machine`) drives three
worker processes on one store, pauses writes at the backend's fault points,
resumes them or kills their process, and compares everything with `SpecModel`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from ..engines.commanded_machine import WORKERS, CommandedEnv, CommandedMachine, worker_pool
from .base import check
from .harness import Harness

__all__ = ["CHECKS"]


@check("KILL-001", "MP-001", "READ-003", "APPEND-003")
def commanded_workers(h: Harness) -> None:
    """KILL-001: processes paused inside writes and killed there leave whole writes and free locks."""
    with worker_pool(h.backend.target, h.options, WORKERS) as pool:
        env = CommandedEnv(pool, h.capabilities, h.new_store)
        # Hypothesis annotates the factory as a class; it documents (and takes) any
        # callable that returns a machine.
        run_state_machine_as_test(
            seed(h.seed)(lambda: CommandedMachine(env)),  # type: ignore[arg-type]
            settings=settings(
                max_examples=h.profile.commanded_examples,
                stateful_step_count=h.profile.commanded_steps,
                deadline=None,
                database=None,
                print_blob=True,
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
                # No shrinking: every shrink attempt replays processes being
                # killed and restarted, which took minutes; a failing run of at
                # most commanded_steps steps is reported as it was found.
                phases=(Phase.explicit, Phase.reuse, Phase.generate),
            ),
        )


CHECKS = (commanded_workers,)
