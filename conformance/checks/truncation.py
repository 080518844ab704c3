"""Checks of the TRUNC rules: truncate keeps exactly the prefix, bounds, expected heads, no phantoms."""

from __future__ import annotations

from functools import partial

from ...spec import (
    Capability,
    CheckpointConflictError,
    GenerationalCheckpointer,
    InvalidArgumentError,
)
from ...spec.divergences import TO_HEAD_CHANGED
from ..engines.run.harness import CheckSkipped, Harness, read_all
from ._support import append_five, expect, expect_error, listed_mtime, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


@check("TRUNC-001", "SEQ-001")
async def truncate_keeps_exactly_the_prefix(h: Harness) -> None:
    """TRUNC-001: truncate keeps 1..to_seq unchanged, returns to_seq; appends continue at to_seq + 1."""
    cp = await h.open()
    await append_five(cp, h)
    kept = (await read_all(cp, "s"))[:2]
    expect(await cp.truncate("s", 2) == 2, "TRUNC-001", "truncate('s', 2) did not return 2")
    after = await read_all(cp, "s")
    expect(
        [(s.seq, s.event) for s in after] == [(s.seq, s.event) for s in kept],
        "TRUNC-001",
        f"after truncate to 2 the log is {[(s.seq, s.event) for s in after]}",
    )
    expect(
        await cp.append("s", [h.prompt("next")]) == 3,
        "TRUNC-001",
        "the append after truncate to 2 did not get seq 3",
    )
    seqs = [s.seq for s in await read_all(cp, "s")]
    expect(seqs == [1, 2, 3], "SEQ-001", f"seqs after truncate and append: {seqs}")


@check("TRUNC-002")
async def truncate_beyond_head_is_refused(h: Harness) -> None:
    """TRUNC-002: to_seq beyond the head raises InvalidArgumentError and changes nothing."""
    cp = await h.open()
    await append_five(cp, h)
    before = await snapshot(cp, ["s", "ghost"])
    for to_seq in (6, 100):
        await expect_error(
            partial(cp.truncate, "s", to_seq),
            InvalidArgumentError,
            "TRUNC-002",
            f"truncate('s', {to_seq}) at head 5",
        )
    await expect_error(
        lambda: cp.truncate("ghost", 1),
        InvalidArgumentError,
        "TRUNC-002",
        "truncate('ghost', 1) of an unknown session",
    )
    await unchanged(cp, before, "TRUNC-002", "a refused truncate")


@check("TRUNC-003")
async def truncate_honours_expected_head(h: Harness) -> None:
    """TRUNC-003: a stale expected_head raises CheckpointConflictError and changes nothing."""
    cp = await h.open()
    await append_five(cp, h)
    before = await snapshot(cp, ["s"])
    error = await expect_error(
        lambda: cp.truncate("s", 2, expected_head=4),
        CheckpointConflictError,
        "TRUNC-003",
        "truncate('s', 2, expected_head=4) at head 5",
    )
    facts = (error.session_id, error.expected, error.actual)
    expect(facts == ("s", 4, 5), "TRUNC-003", f"conflict facts {facts}; expected ('s', 4, 5)")
    await unchanged(cp, before, "TRUNC-003", "a conflicting truncate")
    expect(
        await cp.truncate("s", 2, expected_head=5) == 2,
        "TRUNC-003",
        "truncate with the right expected_head failed",
    )


@check("TRUNC-004")
async def truncate_creates_no_phantom(h: Harness) -> None:
    """TRUNC-004: truncating an unknown session to 0 creates no session."""
    cp = await h.open()
    expect(await cp.truncate("ghost", 0) == 0, "TRUNC-004", "truncate('ghost', 0) did not return 0")
    if h.has(Capability.GENERATION) and isinstance(cp, GenerationalCheckpointer):
        # Observed, not asserted: the witness judges it. A truncate to the head (0 here)
        # removes nothing, so it moves no generation (TRUNC-005, GEN-001).
        await cp.generation("ghost")
    await cp.truncate("ghost", 0, expected_head=0)
    if h.has(Capability.LIST):  # without it, a phantom session is invisible to the contract
        listed = [i.id for i in await cp.list_sessions()]
        expect(listed == [], "TRUNC-004", f"truncating an unknown session created {listed}")
    expect(
        await cp.head("ghost") == 0, "TRUNC-004", "head of the truncated unknown session is not 0"
    )


@check("TRUNC-005", "LIST-001")
async def truncate_to_head_changes_nothing(h: Harness) -> None:
    """TRUNC-005: truncate to the head removes nothing and keeps mtime; to 0 keeps the session listed."""
    cp = await h.open()
    await append_five(cp, h)
    # Without LIST, mtime and whether the session stays listed cannot be observed.
    listing = h.has(Capability.LIST)
    mtime = await listed_mtime(cp, "s", "appending to it") if listing else 0.0
    before = await snapshot(cp, ["s"])
    expect(await cp.truncate("s", 5) == 5, "TRUNC-005", "truncate to the head did not return it")
    await unchanged(cp, before, "TRUNC-005", "truncate to the head")
    if listing:
        after = await listed_mtime(cp, "s", "truncating it to its head")
        expect(
            after == mtime,
            "TRUNC-005",
            f"truncate to the head changed mtime {mtime} -> {after}",
            shape=TO_HEAD_CHANGED,
        )
    await cp.truncate("s", 0)
    if listing:
        listed = [i.id for i in await cp.list_sessions()]
        expect(
            listed == ["s"],
            "TRUNC-005",
            f"after truncate to 0, listed {listed}; the session must stay, empty",
        )
    expect(await read_all(cp, "s") == [], "TRUNC-005", "truncate to 0 left events behind")


@check("TRUNC-006")
async def truncating_backends_offer_generations(h: Harness) -> None:
    """TRUNC-006: a backend with TRUNCATE should declare GENERATION against the ABA hazard."""
    if not h.has(Capability.TRUNCATE):
        raise CheckSkipped("the backend cannot truncate, so the ABA hazard cannot arise")
    if not h.has(Capability.GENERATION):
        h.warn(
            "TRUNC-006",
            "TRUNCATE is declared without GENERATION: a stale writer can append after truncate-and-reappend",
        )
    cp = await h.open()
    await append_five(cp, h)
    await cp.truncate("s", 3)
    await cp.append("s", [h.prompt("x"), h.prompt("y")])
    expect(
        await cp.head("s") == 5,
        "TRUNC-001",
        "the head did not return to 5 after truncate to 3 and two appends",
    )


CHECKS = (
    truncate_keeps_exactly_the_prefix,
    truncate_beyond_head_is_refused,
    truncate_honours_expected_head,
    truncate_creates_no_phantom,
    truncate_to_head_changes_nothing,
    truncating_backends_offer_generations,
)
