"""State-machine runs: a Hypothesis state machine run in rounds within the check's slice.

A state-machine run is a `checkpointspec.conformance.engines.search.driver` run of
``run_state_machine_as_test``: each run of steps admitted within the check's slice,
its failures explored past in rounds, replayed alone with ``--reproduce``. The calls
each run makes are recorded (`checkpointspec.conformance.engines.search.transcripts`), so
that when a re-run went otherwise and broke no rule, the call that answered differently
is named, with both answers. Which
machine runs, and on what, is the caller's (the machines are built in
`checkpointspec.conformance.engines.machines`, above this package).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from .driver import SearchHost, explore_runs, reproduction, within_slice
from .replay import REPORTING_PHASES, SEARCH_PHASES, kit_settings, replayable, run_exactly
from .transcripts import note_difference, recording

__all__ = ["run_machine"]


def run_machine(
    h: SearchHost,
    make: Callable[[], RuleBasedStateMachine],
    *,
    examples: int,
    steps: int,
    shrink: bool = True,
) -> None:
    """Run the state machine that ``make`` builds, under the run's seed.

    A failure's minimal sequence of steps and its reproduce blob arrive as notes on
    the RuleViolation, which the runner reports with it; the machine then runs again
    with that rule tolerated, for the next finding (`explore_runs`). ``shrink=False`` reports a
    failing run as it was found, for machines whose every replay is expensive. With
    ``--reproduce`` (``h.replay``) only the recorded run of steps is replayed. A
    check runs at most one machine or property: a blob names one run.
    """
    # Hypothesis takes any factory of machines, though it annotates a class.
    factory = cast(
        "type[RuleBasedStateMachine]",
        replayable(within_slice(h)(make), h.seed, reproduction(h)),
    )
    configured = kit_settings(
        max_examples=examples,
        phases=REPORTING_PHASES if shrink else SEARCH_PHASES,
        stateful_step_count=steps,
    )
    with recording() as transcripts:
        try:
            explore_runs(
                h,
                lambda: run_exactly(
                    lambda: run_state_machine_as_test(factory, settings=configured), h.replay
                ),
                examples,
            )
        except Flaky as flaky:
            # No run broke a rule (explore_runs records every violation): say which
            # call answered otherwise on the re-run, if the machine's transcripts show it.
            difference = transcripts.first_difference()
            if difference is not None:
                note_difference(flaky, difference)
                h.measure(f"answered differently: {difference.sentence()}")
            raise
