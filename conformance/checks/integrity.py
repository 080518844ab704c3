"""Checks of the INTEG rules: a healthy store reports ok, a damaged one says so."""

from __future__ import annotations

from ...spec import Capability, CheckpointError
from ..engines.contract.outcomes import Err, run_backend
from ..engines.run.harness import Harness, read_all
from ._support import changed_files, expect, fingerprint, hooks_of, snapshot
from .base import check

__all__ = ["CHECKS"]


@check("INTEG-001")
async def healthy_store_reports_ok(h: Harness) -> None:
    """INTEG-001: check_integrity on a store written through the contract reports ok and changes nothing."""
    # A bridge that answers check_integrity itself (the backend has none) reports ok itself.
    h.judged_on_the_kit_side("INTEG-001")
    cp = await h.open()
    for n in range(5):
        await cp.append(f"s{n}", [h.prompt(f"{n} {i}") for i in range(n + 1)])
    if h.has(Capability.DELETE):
        await cp.delete("s1")
    sessions = [f"s{n}" for n in range(5)]
    before = await snapshot(cp, sessions)
    report = await cp.check_integrity()
    expect(report.ok, "INTEG-001", f"a healthy store reported: {report.detail} {report.problems}")
    expect(await snapshot(cp, sessions) == before, "INTEG-001", "check_integrity changed the store")


@check("INTEG-002", hooks=True)
async def damage_is_reported(h: Harness) -> None:
    """INTEG-002: damaged data makes check_integrity report ok=False and reads raise, not lie; nothing is repaired."""
    cp = await h.open()
    events = [h.prompt(f"event {i} " + "x" * 200) for i in range(20)]
    await cp.append("s", events)
    await cp.close()
    what = (await hooks_of(h)).damage_store(h.path)
    # Every byte the hook left is compared once the handles are closed: a "repair"
    # of damaged data destroys the evidence, whatever the hook says it damaged.
    damaged = fingerprint(h.path)
    cp = await h.open()
    report = await cp.check_integrity()
    expect(
        not report.ok,
        "INTEG-002",
        f"after damage ({what}) check_integrity reported ok: {report.detail}",
    )
    expect(bool(report.detail), "INTEG-002", "the integrity report names nothing")
    read = await run_backend(lambda: read_all(cp, "s"))
    if isinstance(read, Err):
        expect(
            isinstance(read.error, CheckpointError),
            "INTEG-002",
            f"reading damaged data raised {read.error!r}",
        )
    else:
        expect(
            [s.event for s in read.value] == events,
            "INTEG-002",
            f"after damage ({what}) read returned wrong events without raising CorruptStoreError",
        )
    await h.close_all()
    changes = changed_files(damaged, fingerprint(h.path))
    expect(
        not changes,
        "INTEG-002",
        f"checking and reading the damaged store ({what}) changed its files: {changes}",
    )


CHECKS = (
    healthy_store_reports_ok,
    damage_is_reported,
)
