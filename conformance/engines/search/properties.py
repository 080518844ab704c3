"""Property runs: a check's body on one fresh store per generated example.

A property run is a `checkpointspec.conformance.engines.search.driver` run of a
``@given`` test: its examples admitted within the check's slice, its failures explored
past in rounds, replayed alone with ``--reproduce``. Besides a `SearchHost`, it needs
of its check a fresh store per example (`PropertyHost`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Protocol, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from ....spec import Checkpointer
from .driver import SearchHost, explore_runs, reproduction, within_slice
from .exploration import rejecting_tolerated
from .replay import REPORTING_PHASES, kit_settings, replayable, run_exactly

__all__ = ["PropertyHost", "property_settings", "run_property"]

T = TypeVar("T")


class PropertyHost(SearchHost, Protocol):
    """A `SearchHost` that also makes the fresh stores a property's examples run on."""

    def new_store(self) -> Path: ...

    async def open(self, path: Path, /) -> Checkpointer: ...


def property_settings(h: SearchHost) -> settings:
    """Hypothesis settings for a property check under the run's profile (`kit_settings`).

    No explain phase: its advice is for the authors of a test, and a failure panel is
    read by a backend's author (`checkpointspec.conformance.running.failures`).
    """
    return kit_settings(max_examples=h.profile.property_examples, phases=REPORTING_PHASES)


def run_property(
    h: PropertyHost,
    strategy: st.SearchStrategy[T],
    body: Callable[[Checkpointer, T], Coroutine[object, object, None]],
) -> None:
    """Run ``body`` on one fresh store per generated example, on a private loop.

    Hypothesis shrinks a failing example and attaches it, and its reproduce blob, to
    the RuleViolation's notes. A failure is recorded and the search goes on with its
    rule tolerated (`explore_runs`). With ``--reproduce`` (``h.replay``) only the
    recorded example runs (`checkpointspec.conformance.engines.search.replay`).
    """
    loop = asyncio.new_event_loop()

    @property_settings(h)
    @given(strategy)
    @rejecting_tolerated
    @within_slice(h)
    def test(value: T) -> None:
        async def one() -> None:
            cp = await h.open(h.new_store())
            try:
                await body(cp, value)
            finally:
                await cp.close()

        loop.run_until_complete(one())

    try:
        explore_runs(
            h,
            lambda: run_exactly(replayable(test, h.seed, reproduction(h)), h.replay),
            h.profile.property_examples,
        )
    finally:
        loop.close()
