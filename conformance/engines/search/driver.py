"""Driving a check's Hypothesis run: its examples before the run's time cap (a failure's
shrinking within its share), its exploration rounds, its replay.

Every property and state machine of the kit runs through here
(`checkpointspec.conformance.engines.search.properties`,
`checkpointspec.conformance.engines.search.stateful`). A run reads and writes the check
it runs for only through `SearchHost`, which the check's harness
(`checkpointspec.conformance.engines.run.harness.Harness`) is: this module knows
nothing of backends, stores or the runner.
"""

from __future__ import annotations

import bdb
import contextlib
import functools
from collections.abc import Callable
from typing import NoReturn, ParamSpec, Protocol, TypeVar

from hypothesis.control import current_build_context
from hypothesis.errors import UnsatisfiedAssumption

from ..target.witness import Witness, note_divergence
from .budget import Slice, example_failed
from .exploration import Explored, Found, explore, tolerated_violation
from .replay import Replay, Reproduction

__all__ = [
    "SearchCounts",
    "SearchHost",
    "SearchedRun",
    "SliceSpent",
    "explore_runs",
    "reproduction",
    "within_slice",
]

P = ParamSpec("P")
R = TypeVar("R")


class SearchCounts(Protocol):
    """The counts of the run's profile a Hypothesis run reads."""

    @property
    def exploration_rounds(self) -> int: ...

    @property
    def property_examples(self) -> int: ...


class SearchedRun(Protocol):
    """What a Hypothesis run reads of the kit's run: the rules it tolerates from its
    first round (`checkpointspec.conformance.engines.search.exploration.explore`)."""

    @property
    def tolerated(self) -> frozenset[str]: ...


class SearchHost(Protocol):
    """What a Hypothesis run reads and writes of the check it runs for: the run's seed,
    profile and tolerated rules, the example to replay (``--reproduce``), the check's
    slice of the time budget; the findings it records, how it explored, and what it
    measured (`measure`)."""

    @property
    def seed(self) -> int: ...

    @property
    def profile(self) -> SearchCounts: ...

    @property
    def run(self) -> SearchedRun: ...

    @property
    def replay(self) -> Replay | None: ...

    @property
    def slice(self) -> Slice: ...

    @property
    def findings(self) -> list[Found]: ...

    @property
    def witness(self) -> Witness: ...

    explored: Explored | None

    def measure(self, text: str) -> None: ...


def explore_runs(h: SearchHost, run_once: Callable[[], None], examples: int) -> None:
    """``run_once`` (the check's Hypothesis run of ``examples`` examples, each admitted by
    `within_slice`) in exploration rounds (`explore`): every failure is recorded in
    ``h.findings`` and the next round tolerates its rule, up to the profile's
    ``exploration_rounds`` or until the check's share of a failure's time is spent
    (`Slice.shrinking_spent`). A round the cap ended failed nothing:
    its examples after the cap were left out (`Slice.examples_left_out`), which makes
    the check incomplete, not failed.
    A replay (``--reproduce``) runs once, as recorded."""
    if h.replay is not None:
        run_once()
        return
    h.slice.examples_per_round = examples

    def one_round() -> None:
        with h.slice.hypothesis_round(), contextlib.suppress(SliceSpent):
            run_once()

    rounds = h.profile.exploration_rounds
    # A round after the first follows a failure: it is a failure's work, within its share.
    h.explored = explore(one_round, h.findings, rounds, h.run.tolerated, h.slice.shrinking_spent)
    if not h.explored.complete and h.explored.rounds < rounds:
        if h.slice.spent():
            h.slice.stopped(f"explored {h.explored.rounds} of up to {rounds} rounds")
        elif h.slice.shrinking_spent():
            h.slice.rounds_left_out = rounds - h.explored.rounds


class SliceSpent(bdb.BdbQuit):
    """Raised by a Hypothesis example that starts after its check's slice of the time
    budget is spent, to end the run there (`within_slice`). Hypothesis (6.170.24 on)
    hands a `bdb.BdbQuit` (a debugger's "quit") straight back, as it does a KeyboardInterrupt:
    not a failure, nothing shrunk, nothing recorded, so the examples it ran before
    stay as consistent as if the run had ended at its count of examples."""


def within_slice(h: SearchHost) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A Hypothesis example (a property's body, a state machine's factory) that, once
    ``h``'s slice of the time budget is spent (`Slice.admits_example`), does not reach
    the backend: it ends a run that has found nothing (`SliceSpent`), and in a run
    that has failed it ends as a shrink attempt that came to nothing
    (`_ends_shrinking`), so that Hypothesis stops shrinking and reports the smallest
    failing example found so far, which its final replay runs whatever the time.
    It tells the slice when it fails."""

    def decorate(example: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(example)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if h.replay is None and not h.slice.admits_example(
                final_replay=current_build_context().is_final
            ):
                if h.slice.round_failed:
                    _ends_shrinking()
                raise SliceSpent
            h.witness.begin_example()
            try:
                return example(*args, **kwargs)
            except UnsatisfiedAssumption:
                raise
            except Exception as exc:
                note_divergence(exc, h.witness.first)
                if tolerated_violation(exc) is None:
                    example_failed()
                raise

        return run

    return decorate


def _ends_shrinking() -> NoReturn:
    """End the running example of a failing Hypothesis run as an *overrun* (a choice
    sequence too long to finish), without running it: the one outcome Hypothesis never
    compares with an earlier run of the same choices (a rejection would be, and the
    first example of its shrinking re-runs the failure's own, which would then be
    reported as flaky). An overrun is no smaller failure, so the shrinker keeps the
    smallest one it had and stops after a run of attempts that improve nothing;
    if it is the shrinking's first example, Hypothesis skips shrinking altogether. Its
    final replay of the failure is admitted and reports it, with its blob."""
    current_build_context().data.mark_overrun()


def reproduction(h: SearchHost) -> Reproduction | None:
    """The recorded example ``h``'s run replays (``--reproduce``), or None: it searches."""
    return h.replay.reproduction if h.replay is not None else None
