"""The run's time cap, what each check has left of it, and what a check did within it.

A profile's counts (examples times steps, crash states, holds, kills, stress calls) are
what its pass means; the seed fixes what that work is. The run's budget
(``budget_seconds``, ``--budget``) is only a cap on its wall-clock time: each check
may use what is left of it when it starts (`Allowance.cap`, handed out by
`checkpointspec.conformance.running.slices.BudgetPlan`), and a check the cap stops
before its counts ends **incomplete**, never passed: what it covered found
nothing, which says less than its profile's pass. A check that would start after
the cap is not started at all (incomplete too).

Every loop that repeats something (a Hypothesis example, a crash state, a hold, a
round of processes) asks its `Slice` (`Slice.spent`) before it starts one more;
what is under way is finished, so the cap is a deadline for starting work, not a
timer that interrupts it. A check records what the cap left out (`Slice.stopped`,
"checked 40 of 200 crash states"), which makes it incomplete (`Slice.incomplete`);
where the counts are reached first nothing changes and the report says nothing.

A failure found is shrunk, and explored past in further rounds, within the check's
share of a failure's time (`Allowance.shrinking`: the profile's ``failure_seconds``
left, times the workers, in proportion to its kind's weight, `KIND_WEIGHTS`, over the
weights of the checks not yet started) and never past the cap: once it is spent,
no further round starts and the shrinking's examples end without reaching the backend (as overruns, see
`checkpointspec.conformance.engines.search.driver`), so Hypothesis stops shrinking
and reports the smallest failing example it had found, replayable from its blob,
since its final replay of that example is always admitted. A failure shrunk short
stands: shrinking is no count, so it does not make the check incomplete. A
failing check thus ends about one example's time after its share, and a failure
early in the run leaves the checks after it their time.
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

import msgspec

__all__ = [
    "KIND_WEIGHTS",
    "SHRINK_FLOOR",
    "Allowance",
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
"""Each kind's share of the time a failure's shrinking may take, relative to the
others: the mean seconds a check of the kind takes in the quick profile on the file
reference backend with its counts alone (``checkpointspec run file --profile quick
--budget none``, workers forked from the fork server, on 2 cores under a load of
7): a single scenario 0.05 s, a round of processes 0.5 s, the stress run 2.2 s, a
property 2.4 s, the commanded-workers machine 4.2 s, a crash-state check 5.9 s,
writers held at their system calls 6.0 s, a model-based machine 12.9 s."""

SHRINK_FLOOR = 3.0
"""The fewest seconds a failure's shrinking is given, however little of the budget is
left (never past the cap): enough for a few shrinking steps on a slow backend."""


class Allowance(msgspec.Struct, frozen=True):
    """The time one check may take, from its start: ``cap`` is what is left of the run's
    time cap (None: the run has none; 0: the cap was reached before the check started,
    so it does not start), ``shrinking`` the seconds a failure's work may take: its
    shrinking and the exploration rounds after it (None: as long as the cap allows)."""

    cap: float | None
    shrinking: float | None = None


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

    ``seconds`` is what is left of the run's cap (None: no cap, `spent` is never
    true); ``shrinking`` the seconds a failure's shrinking may take (None: until the
    cap). The check's loops ask `spent` before each repetition and call `stopped`
    when they leave work out.
    """

    def __init__(
        self,
        seconds: float | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        shrinking: float | None = None,
    ) -> None:
        self.seconds = seconds
        self.shrinking = shrinking
        self._clock = clock
        self._started = clock()
        self.round_failed = False
        """A Hypothesis round under way has seen an example fail (`example_failed`)."""
        self._round_examples = 0
        self.examples_run = 0
        """Hypothesis examples started in the generation of passing rounds and up to the
        first failure of failing ones."""
        self.examples_left_out = 0
        """Hypothesis examples rejected because the cap was reached."""
        self.shrinks_left_out = 0
        """Examples of a failing Hypothesis round's shrinking left out because its time
        was spent: the failure is reported as far as it was shrunk."""
        self.rounds_left_out = 0
        """Exploration rounds not started after a failure because its share of the time
        was spent: the check failed, and the rules it found nothing of are not passed
        by it (it did not finish exploring)."""
        self.left_out: list[str] = []
        """What the cap left out, in words (`stopped`); empty if nothing."""
        self.examples_per_round: int | None = None
        """The examples per Hypothesis round the profile asks for (None: no Hypothesis run)."""

    @classmethod
    def of(cls, allowance: Allowance | None) -> Slice:
        """The slice of a check given ``allowance`` (None: no cap)."""
        if allowance is None:
            return cls(None)
        return cls(allowance.cap, shrinking=allowance.shrinking)

    def elapsed(self) -> float:
        """Seconds since the slice began."""
        return self._clock() - self._started

    def spent(self) -> bool:
        """Whether the cap is reached: no more repetitions should start."""
        return self.seconds is not None and self.elapsed() >= self.seconds

    def shrinking_spent(self) -> bool:
        """Whether a failure's work (its shrinking, further exploration rounds) must stop:
        its time, or the cap, is spent."""
        return self.spent() or (self.shrinking is not None and self.elapsed() >= self.shrinking)

    def left(self) -> float | None:
        """Seconds left before the cap (0 when spent), or None without a cap."""
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def stopped(self, what: str) -> None:
        """Record that the cap left ``what`` out, e.g. "checked 40 of 200 crash states":
        the check is then incomplete (`incomplete`) and its result says what it covered."""
        self.left_out.append(what)

    def within(self, items: Iterable[T], what: str) -> Iterator[T]:
        """``items`` (a check's kill points, holds, rounds…) until the cap is reached, the
        first whatever the time; when it stops early it records "checked N of M
        ``what``" (`stopped`)."""
        listed = list(items)
        for done, item in enumerate(listed):
            if done and self.spent():
                self.stopped(f"checked {done} of {len(listed)} {what}")
                return
            yield item

    @property
    def incomplete(self) -> bool:
        """Whether the cap stopped the check short of its profile's counts."""
        return bool(self.left_out) or self.examples_left_out > 0

    @property
    def cut_short(self) -> bool:
        """Whether anything was left out: the counts (`incomplete`) or a failure's
        shrinking or further rounds."""
        return self.incomplete or self.shrinks_left_out > 0 or self.rounds_left_out > 0

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
        """Whether a Hypothesis example may run: before the cap, for Hypothesis' final
        replay of a failure (``final_replay``) whatever the time, and a round's first
        example whatever the time; a failing round's shrinking while its time lasts
        (`shrinking_spent`). Otherwise it is counted as left out: in a round that has
        failed (its shrinking) in `shrinks_left_out`, else in `examples_left_out`."""
        if final_replay:
            return True
        if self.round_failed:
            if self.shrinking_spent():
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
        """What the check covered when the cap or a shrinking's time left something out:
        one line for the report ("" when the profile's counts were reached)."""
        if not self.cut_short or self.seconds is None:
            return ""
        counts = list(self.left_out)
        if self.examples_left_out:
            asked = (
                f" of the {self.examples_per_round} per round its profile asks for"
                if self.examples_per_round is not None
                else ""
            )
            counts.insert(0, f"ran {self.examples_run} examples{asked}")
        parts = []
        if counts:
            parts.append(
                f"{'; '.join(counts)} before the run's time cap "
                f"({self.seconds:.1f} s of it were left when the check started)"
            )
        if self.shrinks_left_out:
            parts.append("stopped shrinking a failure when its share of the budget was spent")
        if self.rounds_left_out:
            parts.append(
                f"left {self.rounds_left_out} exploration rounds after a failure unstarted "
                "when its share of the budget was spent"
            )
        return "; ".join(parts)
