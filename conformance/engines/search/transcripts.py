"""What a state machine's calls answered, run by run: the evidence of a backend that
answers the same calls differently.

Hypothesis re-runs an example to shrink and confirm it. When a re-run goes otherwise
and no run broke a rule (a `Flaky` with nothing in it), Hypothesis can only say that
the runs differ; the kit says where. While `recording` is open, a machine starts a
run of its own at each example (`new_run`) and enters each call it makes with what
came back (`exchanged`). `first_difference` then compares the last run with every
earlier one: two runs that made the same calls, with the same arguments, and got the
same answers up to one call that answered otherwise, prove that the backend answered
that call differently (each example starts on a fresh store). That call and its two
answers are an `AnsweredDifferently`, noted on the failure for the runner to report
(`note_difference`, `answered_differently`).

Nothing here knows a machine: a call is the text the machine shows for it, and
``given`` what the text leaves out that the call's answers depend on (the kinds of
the events appended).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

import msgspec

__all__ = [
    "AnsweredDifferently",
    "Exchange",
    "Transcripts",
    "answered_differently",
    "exchanged",
    "new_run",
    "note_difference",
    "recording",
]

KEPT_RUNS: Final = 2_000
"""The runs a recording keeps, the latest: a shrink may make many thousands."""

ANSWER_LIMIT: Final = 300
"""Characters of an answer kept: enough to tell two answers apart and show them."""


class Exchange(msgspec.Struct, frozen=True):
    """One call of a run and what it came to (``returned 3``, ``raised
    CheckpointConflictError: ...``); ``given`` is what else the call was given."""

    call: str
    answer: str
    given: str = ""


class AnsweredDifferently(msgspec.Struct, frozen=True):
    """``call`` came to ``answer`` on one run and to ``other`` on a re-run of the same
    steps, every call before it having answered the same on both."""

    call: str
    answer: str
    other: str

    def sentence(self) -> str:
        return f"{self.call} {self.answer} on one run and {self.other} on the re-run"


class Transcripts:
    """The exchanges of each run of one recording, the latest `KEPT_RUNS` runs."""

    def __init__(self) -> None:
        self.runs: collections.deque[list[Exchange]] = collections.deque(maxlen=KEPT_RUNS)

    def first_difference(self) -> AnsweredDifferently | None:
        """The call at which the last run first answered otherwise than an earlier run
        that made the same calls until then (the earlier run sharing the longest such
        start with it); None when no earlier run did."""
        if not self.runs:
            return None
        last = self.runs[-1]
        best: tuple[int, AnsweredDifferently] | None = None
        for earlier in list(self.runs)[:-1]:
            found = _parting(earlier, last)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        return best[1] if best is not None else None


def _parting(
    first: list[Exchange], second: list[Exchange]
) -> tuple[int, AnsweredDifferently] | None:
    """Where ``second`` answered the same call otherwise than ``first``, every exchange
    before it being equal: its index and the difference; None if they part otherwise."""
    for index, (one, two) in enumerate(zip(first, second, strict=False)):
        if one == two:
            continue
        if (one.call, one.given) != (two.call, two.given):
            return None  # other calls: other steps, not the same ones answered otherwise
        return index, AnsweredDifferently(one.call, one.answer, two.answer)
    return None


_RECORDING: ContextVar[Transcripts | None] = ContextVar("transcripts", default=None)


@contextlib.contextmanager
def recording() -> Iterator[Transcripts]:
    """While open, `new_run` and `exchanged` enter the runs into the one it yields."""
    transcripts = Transcripts()
    token = _RECORDING.set(transcripts)
    try:
        yield transcripts
    finally:
        _RECORDING.reset(token)


def new_run() -> None:
    """A run of an example starts (a machine is built); nothing while not `recording`."""
    transcripts = _RECORDING.get()
    if transcripts is not None:
        transcripts.runs.append([])


def exchanged(call: str, answer: str, given: str = "") -> None:
    """Enter ``call`` and what it came to in the current run (see `Exchange`)."""
    transcripts = _RECORDING.get()
    if transcripts is not None and transcripts.runs:
        transcripts.runs[-1].append(Exchange(call, answer[:ANSWER_LIMIT], given))


_NOTE = "_checkpointspec_answered_differently"


def note_difference(error: BaseException, difference: AnsweredDifferently) -> None:
    """Note on ``error`` (Hypothesis' report that runs went differently) which call did."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, _NOTE, difference)


def answered_differently(error: BaseException) -> AnsweredDifferently | None:
    """The call `note_difference` noted on ``error``, if any."""
    found = getattr(error, _NOTE, None)
    return found if isinstance(found, AnsweredDifferently) else None
