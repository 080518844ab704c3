"""Checks for truncate, generations and undeclared optional operations."""

from __future__ import annotations

from functools import partial

from ...spec import (
    Capability,
    CheckpointConflictError,
    Checkpointer,
    GenerationalCheckpointer,
    InvalidArgumentError,
    UnsupportedOperationError,
)
from ..harness import CheckSkipped, Harness, read_all
from ..registry import check
from ._support import expect, expect_error, snapshot, unchanged

__all__: list[str] = []


async def _five(cp: Checkpointer, h: Harness, sid: str = "s") -> None:
    await cp.append(sid, [h.prompt(f"{sid} {i}") for i in range(1, 6)])


@check("TRUNC-001", "SEQ-001")
async def truncate_keeps_exactly_the_prefix(h: Harness) -> None:
    """TRUNC-001: truncate keeps 1..to_seq unchanged, returns to_seq; appends continue at to_seq + 1."""
    cp = await h.open()
    await _five(cp, h)
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
    await _five(cp, h)
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
    await _five(cp, h)
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
    await cp.truncate("ghost", 0, expected_head=0)
    listed = [i.id for i in await cp.list_sessions()]
    expect(listed == [], "TRUNC-004", f"truncating an unknown session created {listed}")
    expect(
        await cp.head("ghost") == 0, "TRUNC-004", "head of the truncated unknown session is not 0"
    )


@check("TRUNC-005", "LIST-001")
async def truncate_to_head_changes_nothing(h: Harness) -> None:
    """TRUNC-005: truncate to the head removes nothing and keeps mtime; to 0 keeps the session listed."""
    cp = await h.open()
    await _five(cp, h)
    mtime = (await cp.list_sessions())[0].mtime
    before = await snapshot(cp, ["s"])
    expect(await cp.truncate("s", 5) == 5, "TRUNC-005", "truncate to the head did not return it")
    await unchanged(cp, before, "TRUNC-005", "truncate to the head")
    expect(
        (await cp.list_sessions())[0].mtime == mtime,
        "TRUNC-005",
        "truncate to the head changed mtime",
    )
    await cp.truncate("s", 0)
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
    await _five(cp, h)
    await cp.truncate("s", 3)
    await cp.append("s", [h.prompt("x"), h.prompt("y")])
    expect(
        await cp.head("s") == 5,
        "TRUNC-001",
        "the head did not return to 5 after truncate to 3 and two appends",
    )


@check("CAP-001")
async def undeclared_operations_refuse_loudly(h: Harness) -> None:
    """CAP-001: truncate / generation without their capability raise UnsupportedOperationError."""
    cp = await h.open()
    await _five(cp, h)
    before = await snapshot(cp, ["s"])
    tried = 0
    if not h.has(Capability.TRUNCATE):
        tried += 1
        await expect_error(
            lambda: cp.truncate("s", 1),
            UnsupportedOperationError,
            "CAP-001",
            "truncate without TRUNCATE",
        )
    generation = getattr(cp, "generation", None)
    if not h.has(Capability.GENERATION) and callable(generation):
        tried += 1
        await expect_error(
            lambda: generation("s"),
            UnsupportedOperationError,
            "CAP-001",
            "generation without GENERATION",
        )
    if not tried:
        raise CheckSkipped("the backend declares every optional operation it has")
    await unchanged(cp, before, "CAP-001", "a refused optional operation")


def _generational(cp: Checkpointer) -> GenerationalCheckpointer:
    if not isinstance(cp, GenerationalCheckpointer):
        raise AssertionError("GENERATION is declared but the backend lacks generation()")
    return cp


@check("GEN-001")
async def generations_only_grow(h: Harness) -> None:
    """GEN-001: 0 at first, +1 or more per removing truncate and delete, unchanged by append, kept across delete."""
    cp = _generational(await h.open())
    seen = [await cp.generation("s")]
    expect(seen[0] == 0, "GEN-001", f"a new session id has generation {seen[0]}")
    await _five(cp, h)
    seen.append(await cp.generation("s"))
    expect(seen[-1] == seen[-2], "GEN-001", "append changed the generation")
    await cp.truncate("s", 5)
    seen.append(await cp.generation("s"))
    expect(seen[-1] == seen[-2], "GEN-001", "truncate to the head changed the generation")
    await cp.truncate("s", 2)
    seen.append(await cp.generation("s"))
    expect(seen[-1] > seen[-2], "GEN-001", f"truncate to 2 did not raise the generation: {seen}")
    await cp.delete("s")
    seen.append(await cp.generation("s"))
    expect(seen[-1] > seen[-2], "GEN-001", f"delete did not raise the generation: {seen}")
    await cp.append("s", [h.prompt("again")])
    seen.append(await cp.generation("s"))
    expect(
        seen[-1] == seen[-2], "GEN-001", f"re-appending after delete reset the generation: {seen}"
    )


@check("GEN-002")
async def expected_generation_catches_aba(h: Harness) -> None:
    """GEN-002: a stale expected_generation conflicts (kind 'generation') even when the head matches."""
    cp = _generational(await h.open())
    await _five(cp, h)
    stale = await cp.generation("s")
    await cp.truncate("s", 3)
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
