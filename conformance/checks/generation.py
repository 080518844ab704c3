"""Checks of the GEN rules: generations only grow, and expected_generation catches the truncate-then-reappend (ABA) hazard."""

from __future__ import annotations

from ...spec import (
    Capability,
    CheckpointConflictError,
    Checkpointer,
    GenerationalCheckpointer,
)
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
from ._support import append_five, expect, expect_error, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


def _generational(cp: Checkpointer) -> GenerationalCheckpointer:
    if not isinstance(cp, GenerationalCheckpointer):
        raise RuleViolation("GEN-001", "GENERATION is declared but the handle has no generation()")
    return cp


@check("GEN-001")
async def generations_only_grow(h: Harness) -> None:
    """GEN-001: 0 at first, +1 exactly per removing truncate and delete, unchanged by append, kept across delete."""
    cp = _generational(await h.open())
    seen = [await cp.generation("s")]
    expect(seen[0] == 0, "GEN-001", f"a new session id has generation {seen[0]}")
    await append_five(cp, h)
    seen.append(await cp.generation("s"))
    expect(seen[-1] == seen[-2], "GEN-001", "append changed the generation")
    await cp.truncate("s", 5)
    seen.append(await cp.generation("s"))
    expect(seen[-1] == seen[-2], "GEN-001", "truncate to the head changed the generation")
    # Each removal moves it on by exactly one, the second and third as the first: a
    # generation that counts once, or that doubles, is caught by the next.
    for to_seq in (4, 3, 2):
        await cp.truncate("s", to_seq)
        # Observed, not asserted: the witness judges it, so a truncate that removed
        # nothing is named by its own rule before the generation it left alone.
        await cp.head("s")
        seen.append(await cp.generation("s"))
        expect(
            seen[-1] == seen[-2] + 1,
            "GEN-001",
            f"truncate to {to_seq} did not raise the generation by 1: {seen}",
        )
    if not h.has(Capability.DELETE):
        return
    # A delete as a session's first removal moves it from 0 to 1, as a truncate does.
    await cp.append("fresh", [h.prompt("only")])
    await cp.delete("fresh")
    first = await cp.generation("fresh")
    expect(first == 1, "GEN-001", f"the first delete of a session set its generation to {first}")
    for round_ in range(2):
        await cp.delete("s")
        seen.append(await cp.generation("s"))
        expect(
            seen[-1] == seen[-2] + 1, "GEN-001", f"delete did not raise the generation by 1: {seen}"
        )
        await cp.append("s", [h.prompt(f"again {round_}")])
        seen.append(await cp.generation("s"))
        expect(
            seen[-1] == seen[-2],
            "GEN-001",
            f"re-appending after delete reset the generation: {seen}",
        )


@check("GEN-002", "GEN-001")
async def expected_generation_catches_aba(h: Harness) -> None:
    """GEN-002: a stale expected_generation conflicts (kind 'generation') even when the head
    matches; the current one, a session's first included, lets appends and truncates through."""
    cp = _generational(await h.open())
    await append_five(cp, h)
    stale = await cp.generation("s")
    await cp.truncate("s", 3)
    # Observed, not asserted: the witness judges them, so a truncate that removed
    # nothing (TRUNC-001), or left the generation alone (GEN-001), is named there,
    # before a stale expectation it makes look current is tried.
    await cp.head("s")
    await cp.generation("s")
    await cp.append("s", [h.prompt("x"), h.prompt("y")])
    before = await snapshot(cp, ["s"])
    error = await expect_error(
        lambda: cp.append("s", [h.prompt("stale")], 5, expected_generation=stale),
        CheckpointConflictError,
        "GEN-002",
        "append with the head right but the generation stale",
    )
    expect(error.kind == "generation", "GEN-002", f"conflict kind is {error.kind!r}")
    await expect_error(
        lambda: cp.truncate("s", 1, 5, expected_generation=stale),
        CheckpointConflictError,
        "GEN-002",
        "truncate with a stale generation",
    )
    await unchanged(cp, before, "GEN-002", "a refused stale-generation write")
    current = await cp.generation("s")
    expect(
        await cp.append("s", [h.prompt("ok")], 5, expected_generation=current) == 6,
        "GEN-002",
        "an append with the current generation failed",
    )
    # The current generation lets a truncate through too, the first one (of a session
    # nothing was ever removed from) included.
    await cp.append("t", [h.prompt("a"), h.prompt("b")])
    first = await cp.generation("t")
    expect(
        await cp.truncate("t", 1, 2, expected_generation=first) == 1,
        "GEN-002",
        f"a truncate with the current generation {first} failed",
    )


CHECKS = (
    generations_only_grow,
    expected_generation_catches_aba,
)
