"""Checks for check_integrity and schema markers (the latter through StoreHooks)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...spec import CheckpointError, SchemaVersionError, StoreHooks
from ..harness import Harness, read_all
from ..outcomes import Err, run_backend
from ..registry import check
from ._support import expect, snapshot

__all__: list[str] = []


def fingerprint(path: Path) -> dict[str, str]:
    """SHA-256 of every file under ``path``, by relative name: what "untouched" means."""
    prints: dict[str, str] = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            full = Path(dirpath) / name
            prints[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return prints


async def _hooks(h: Harness) -> StoreHooks:
    cp = await h.open()
    await cp.close()
    assert isinstance(cp, StoreHooks)
    return cp


@check("INTEG-001")
async def healthy_store_reports_ok(h: Harness) -> None:
    """INTEG-001: check_integrity on a store written through the contract reports ok and changes nothing."""
    cp = await h.open()
    for n in range(5):
        await cp.append(f"s{n}", [h.prompt(f"{n} {i}") for i in range(n + 1)])
    await cp.delete("s1")
    before = await snapshot(cp)
    report = await cp.check_integrity()
    expect(report.ok, "INTEG-001", f"a healthy store reported: {report.detail} {report.problems}")
    expect(await snapshot(cp) == before, "INTEG-001", "check_integrity changed the store")


@check("INTEG-002", hooks=True)
async def damage_is_reported(h: Harness) -> None:
    """INTEG-002: damaged data makes check_integrity report ok=False and reads raise, not lie."""
    cp = await h.open()
    events = [h.prompt(f"event {i} " + "x" * 200) for i in range(20)]
    await cp.append("s", events)
    await cp.close()
    what = (await _hooks(h)).damage_store(h.path)
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


@check("SCHEMA-001", hooks=True)
async def newer_store_is_refused_untouched(h: Harness) -> None:
    """SCHEMA-001: a store marked by a newer format raises SchemaVersionError and keeps every byte."""
    cp = await h.open()
    await cp.append("s", [h.prompt("written by today's version")])
    await cp.close()
    (await _hooks(h)).mark_newer_schema(h.path)
    before = fingerprint(h.path)

    async def open_and_use() -> object:
        newer = await h.open()
        return await newer.append("s", [h.prompt("must not land")])

    outcome = await run_backend(open_and_use)
    expect(
        isinstance(outcome, Err) and isinstance(outcome.error, SchemaVersionError),
        "SCHEMA-001",
        f"opening a newer store gave {outcome!r}; expected SchemaVersionError",
    )
    await h.close_all()
    expect(fingerprint(h.path) == before, "SCHEMA-001", "refusing a newer store changed its files")
