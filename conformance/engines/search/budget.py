"""Wall-clock time budgets: a run's budget, the slice each check gets, and its deadline.

A profile's counts (examples, crash states, holds) say how much a check tries; its
``budget_seconds`` (``--budget``) says how long the whole run may take. The runner
shares the budget out among the checks as they start
(`checkpointspec.conformance.running.slices`), by the weight of each check's kind
(`KIND_WEIGHTS`); a check gets a `Slice` of it, at least `SLICE_FLOOR` seconds.

A check stops at whichever comes first: its profile's count or its slice's end.
Every loop that repeats something (a Hypothesis example, a crash state, a hold, a
round of processes) asks its slice (`Slice.spent`) before it starts one more; what
is under way is finished, so a slice is a deadline for starting work, not a timer
that interrupts it. A check records what the end of its slice left out
(`Slice.stopped`), and the report says so ("ran 37 of the 100 examples per round
its profile allows within its 6.0 s slice"). Where the count is reached first,
nothing changes and the report says nothing.

A Hypothesis run cut short stays a pass: once the slice is spent its examples are
not started (`Slice.admits_example`): the first example after the slice's end
ends the Hypothesis run instead of reaching the backend
(`checkpointspec.conformance.engines.search.driver.within_slice`). A failure found
before that is shrunk within the same slice: once it is spent, the shrinking's
examples end without reaching the backend (as overruns, see the driver), so
Hypothesis stops shrinking (its shrinker gives up after a run of attempts that
improve nothing, each costing microseconds) and reports the smallest failing
example it had found, replayable from its blob, since its final replay of that
example is always admitted. A failing check thus ends about one example's time after its
slice: the exploration rounds, the shrinking and the final replay share it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Literal, TypeAlias, TypeVar

__all__ = [
    "KIND_WEIGHTS",
    "SLICE_FLOOR",
    "UNCUT_KINDS",
    "CheckKind",
    "Slice",
    "budget_option",
    "example_failed",
    "format_seconds",
    "parse_budget",
]

CheckKind: TypeAlias = Literal[
    "single", "property", "model", "commanded", "crash", "holds", "processes", "stress"
]
"""What a check's time goes on: one scripted scenario (``single``), a Hypothesis property
(``property``), a model-based machine (``model``), the commanded-workers machine
(``commanded``), crash states rebuilt and reopened (``crash``), writers held at their
system calls (``holds``), rounds of worker processes (``processes``), the free-running
stress run (``stress``)."""

KIND_WEIGHTS: dict[CheckKind, float] = {
    "single": 0.05,
    "processes": 0.5,
    "stress": 2.2,
    "property": 2.4,
    "commanded": 4.2,
    "crash": 5.9,
    "holds": 6.0,
    "model": 12.9,
}
"""Each kind's share of a budget, relative to the others: the mean seconds a check of the
kind takes in the quick profile on the file reference backend with its counts alone
(``checkpointspec run file --profile quick --budget none``, workers forked from the fork
server, on 2 cores under a load of 7): a single scenario 0.05 s, a round of processes
0.5 s, the stress run 2.2 s, a property 2.4 s, the commanded-workers machine 4.2 s, a
crash-state check 5.9 s, writers held at their system calls 6.0 s, a model-based
machine 12.9 s. A budget shorter than a run needs thus thins every kind out alike."""

UNCUT_KINDS: frozenset[CheckKind] = frozenset({"commanded"})
"""Kinds of checks that run their profile's counts whatever the budget (their slice is
None): the commanded-workers machine catches a kill between two writes of one batch
on few of a seed's examples only (the meta-suite's EventAtATime on seed 0 needs more
than a minute's worth on a loaded 2-core machine), and its ten quick examples are
already its least. Their weight still counts, so the other checks' slices leave
room for them."""

SLICE_FLOOR = 3.0
"""The fewest seconds a check that repeats anything is given, however tight the budget:
enough for a few examples of a model-based machine on a slow backend, so that a budget
thins a check's search out and never empties it."""

T = TypeVar("T")

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_BUDGET = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[smh]?)")


def parse_budget(text: str) -> float:
    """Seconds from ``90s``, ``90``, ``2m``, ``1.5h``; infinity from ``none`` (no limit:
    the profile's counts alone bound the run). Raises `ValueError` saying what is
    accepted."""
    if text.strip().lower() == "none":
        return math.inf
    matched = _BUDGET.fullmatch(text.strip().lower())
    if matched is None or float(matched["number"]) <= 0:
        raise ValueError(
            f"a budget is a positive duration such as 90s, 2m or 1h, or none; not {text!r}"
        )
    return float(matched["number"]) * _UNITS[matched["unit"]]


def budget_option(text: str) -> float:
    """`parse_budget` for a command-line option (the CLI's ``--budget``, the pytest
    plugin's ``--checkpointer-budget``): its error is the option's usage error."""
    try:
        return parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_seconds(seconds: float) -> str:
    """``90s``, ``2m``, ``1.5s``: a budget as ``--budget`` takes it back."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


_CURRENT: ContextVar[Slice | None] = ContextVar("current_slice", default=None)


def example_failed() -> None:
    """Tell the slice of the running Hypothesis round (if any) that an example of it
    failed: the round's later examples are its shrinking, admitted while the slice
    lasts, and its final replay, admitted whatever the time (`Slice.admits_example`)."""
    current = _CURRENT.get()
    if current is not None:
        current.round_failed = True


class Slice:
    """The wall-clock time one check may spend starting work, from its making on.

    ``seconds`` None: no budget, `spent` is never true. The check's loops ask
    `spent` before each repetition and call `stopped` when they leave work out.
    """

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._started = clock()
        self.round_failed = False
        """A Hypothesis round under way has seen an example fail (`example_failed`)."""
        self._round_examples = 0
        self.examples_run = 0
        """Hypothesis examples started in the generation of passing rounds and up to the
        first failure of failing ones."""
        self.examples_left_out = 0
        """Hypothesis examples rejected because the slice was spent."""
        self.shrinks_left_out = 0
        """Examples of a failing Hypothesis round's shrinking left out because the slice
        was spent: the failure is reported as far as it was shrunk."""
        self.left_out: list[str] = []
        """What the end of the slice left out, in words (`stopped`); empty if nothing."""
        self.examples_per_round: int | None = None
        """The examples per Hypothesis round the profile allows (None: no Hypothesis run)."""

    def elapsed(self) -> float:
        """Seconds since the slice began."""
        return self._clock() - self._started

    def spent(self) -> bool:
        """Whether the slice is over: no more repetitions should start."""
        return self.seconds is not None and self.elapsed() >= self.seconds

    def left(self) -> float | None:
        """Seconds left of the slice (0 when spent), or None without a budget."""
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def stopped(self, what: str) -> None:
        """Record that the slice's end left ``what`` out, e.g. "checked 40 of 200 crash
        states"; the check's result carries it (`coverage`)."""
        self.left_out.append(what)

    def within(self, items: Iterable[T], what: str) -> Iterator[T]:
        """``items`` (a check's kill points, holds, rounds…) until the slice is spent, the
        first whatever the time; when it stops early it records "checked N of M
        ``what``" (`stopped`)."""
        listed = list(items)
        for done, item in enumerate(listed):
            if done and self.spent():
                self.stopped(f"checked {done} of {len(listed)} {what}")
                return
            yield item

    @property
    def cut_short(self) -> bool:
        """Whether the slice's end left anything out."""
        return bool(self.left_out) or self.examples_left_out > 0 or self.shrinks_left_out > 0

    @contextlib.contextmanager
    def hypothesis_round(self) -> Iterator[None]:
        """While open, `example_failed` reaches this slice; a new round has seen no failure."""
        self.round_failed = False
        self._round_examples = 0
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)

    def admits_example(self, final_replay: bool) -> bool:
        """Whether a Hypothesis example may run: while the slice lasts, for Hypothesis'
        final replay of a failure (``final_replay``) whatever the time, and a round's
        first example whatever the time. Otherwise it is counted as left out: in a
        round that has failed (its shrinking) in `shrinks_left_out`, else in
        `examples_left_out`."""
        if final_replay:
            return True
        if self.round_failed:
            if self.spent():
                self.shrinks_left_out += 1
                return False
            return True
        if self.spent() and self._round_examples > 0:
            self.examples_left_out += 1
            return False
        self.examples_run += 1
        self._round_examples += 1
        return True

    def coverage(self) -> str:
        """What the check covered, when the slice left something out: one line for the
        report ("" when the profile's counts were reached first)."""
        if not self.cut_short or self.seconds is None:
            return ""
        parts = list(self.left_out)
        if self.examples_left_out:
            allowed = (
                f" of the {self.examples_per_round} per round its profile allows"
                if self.examples_per_round is not None
                else ""
            )
            parts.insert(0, f"ran {self.examples_run} examples{allowed}")
        if self.shrinks_left_out:
            parts.append("stopped shrinking a failure at the slice's end")
        return f"{'; '.join(parts)} within its {self.seconds:.1f} s slice of the budget"
