"""Checks of the EVENT rules: every event kind round-trips exactly; an unstorable event is refused with its whole batch."""

from __future__ import annotations

from functools import partial

from hypothesis import strategies as st

from ...spec import (
    AssistantMessage,
    Checkpointer,
    InvalidArgumentError,
    SessionEvent,
)
from ..engines.machines.strategies import edge_events
from ..engines.run.harness import Harness, read_all
from ..engines.search.properties import run_property
from ._support import expect, expect_error, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


@check("EVENT-001", kind="property")
def every_event_kind_round_trips(h: Harness) -> None:
    """EVENT-001: any batch of any event kinds reads back equal, field for field."""

    async def body(cp: Checkpointer, batch: list[SessionEvent]) -> None:
        await cp.append("s", batch)
        back = [s.event for s in await read_all(cp, "s")]
        expect(back == batch, "EVENT-001", f"appended {batch!r}; read back {back!r}")
        kinds = [type(e).__name__ for e in back]
        expect(
            kinds == [type(e).__name__ for e in batch], "EVENT-001", f"event kinds changed: {kinds}"
        )

    run_property(h, st.lists(edge_events(), min_size=1, max_size=4), body)


@check("EVENT-002", "APPEND-003")
async def unstorable_event_is_refused_whole(h: Harness) -> None:
    """EVENT-002: a batch holding an unstorable event (lone surrogate, wrongly typed field) is refused whole."""
    cp = await h.open()
    h.judged_on_the_kit_side("EVENT-002")
    await cp.append("s", [h.prompt("kept")])
    before = await snapshot(cp, ["s"])
    wrongly_typed = AssistantMessage(text=42)  # type: ignore[arg-type]
    for bad_event in (AssistantMessage("lone \ud800 surrogate"), wrongly_typed):
        bad: list[SessionEvent] = [h.prompt("fine"), bad_event]
        await expect_error(
            partial(cp.append, "s", bad),
            InvalidArgumentError,
            "EVENT-002",
            f"append of a batch holding {bad_event!r}",
        )
        await unchanged(cp, before, "APPEND-003", "a refused batch")


CHECKS = (
    every_event_kind_round_trips,
    unstorable_event_is_refused_whole,
)
