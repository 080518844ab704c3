"""Damaged stores: whatever happens to the bytes, a reference backend reports it and invents nothing.

Each example builds a small store through a reference backend, closes it, then
damages one of its files the ways disks and people do — a flipped byte, a file
cut short, a zeroed run, a run of bytes copied over another place — and opens
it again. Opening, reading every session and `check_integrity` may refuse with
the contract's errors (`CorruptStoreError`, `SchemaVersionError`) or report the
damage; they must not fail any other way, and a read must never return an event
that was not appended at that seq (INTEG-002's "never returned": damage is
detected, not passed on). A repaired torn tail is fine: it only removes events.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Literal

import msgspec
import pytest
from checkpointspec.backends import file as file_backend
from checkpointspec.backends import sqlite as sqlite_backend
from checkpointspec.spec import (
    BackendContext,
    Checkpointer,
    CorruptStoreError,
    IntegrityReport,
    SchemaVersionError,
    SessionEvent,
    StoredEvent,
    UserPrompt,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Factory = Callable[[BackendContext], object]
BACKENDS: dict[str, Factory] = {"file": file_backend.make, "sqlite": sqlite_backend.make}

APPENDED: dict[str, list[list[SessionEvent]]] = {
    "alpha": [[UserPrompt("one"), UserPrompt("two")], [UserPrompt("three")]],
    "beta": [[UserPrompt("b" * 300)]],
    "gamma/with:odd chars": [[UserPrompt(f"g{i}") for i in range(5)]],
}
"""What every store holds before it is damaged: three sessions, batches of several sizes."""

EXPECTED: dict[str, dict[int, SessionEvent]] = {
    sid: dict(enumerate((e for batch in batches for e in batch), start=1))
    for sid, batches in APPENDED.items()
}

_TEMPLATES: dict[str, Path] = {}
"""One pristine store per backend, built once and copied for each example."""


class Damage(msgspec.Struct, frozen=True):
    """One damage to one file: which file (an index into the sorted list), what, where."""

    file: int
    kind: Literal["flip", "cut", "zero", "splice"]
    at: float
    length: int
    source: float
    bit: int

    def apply(self, path: Path) -> str:
        data = bytearray(path.read_bytes())
        if not data:
            return f"{path.name} is empty"
        at = min(int(self.at * len(data)), len(data) - 1)
        end = min(at + self.length, len(data))
        if self.kind == "flip":
            data[at] ^= 1 << self.bit
        elif self.kind == "cut":
            del data[at:]
        elif self.kind == "zero":
            data[at:end] = bytes(end - at)
        else:
            start = min(int(self.source * len(data)), len(data) - 1)
            piece = data[start : start + (end - at)]
            data[at : at + len(piece)] = piece
        path.write_bytes(bytes(data))
        return f"{self.kind} {path.name} at {at}..{end} of {len(data)}"


damages = st.builds(
    Damage,
    file=st.integers(0, 50),
    kind=st.sampled_from(["flip", "cut", "zero", "splice"]),
    at=st.floats(0, 1),
    length=st.integers(1, 64),
    source=st.floats(0, 1),
    bit=st.integers(0, 7),
)


async def _open(factory: Factory, path: Path) -> Checkpointer:
    made = factory(BackendContext(path=path))
    return await made if asyncio.iscoroutine(made) else made  # type: ignore[return-value]


def _template(backend: str) -> Path:
    if backend not in _TEMPLATES:
        path = Path(tempfile.mkdtemp(prefix=f"damaged-{backend}-"))

        async def build() -> None:
            cp = await _open(BACKENDS[backend], path)
            for sid, batches in APPENDED.items():
                for batch in batches:
                    await cp.append(sid, batch)
            await cp.close()

        asyncio.run(build())
        _TEMPLATES[backend] = path
    return _TEMPLATES[backend]


def _store_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.stat().st_size > 0)


async def _survey(factory: Factory, store: Path) -> list[str] | None:
    """Open the store, read every session and check integrity: the events read that
    were never appended, or None when opening refused the store with the contract's error."""
    try:
        cp = await _open(factory, store)
    except (CorruptStoreError, SchemaVersionError):
        return None  # refused at open: nothing was shown
    try:
        return await _read_everything(cp)
    finally:
        await cp.close()


async def _read_everything(cp: Checkpointer) -> list[str]:
    invented = []
    for sid, expected in EXPECTED.items():
        try:
            got = [stored async for stored in cp.read(sid)]
        except (CorruptStoreError, SchemaVersionError):
            # A flipped bit in a log's format version reads as a newer format: refused too.
            continue
        for stored in got:
            if expected.get(stored.seq) != stored.event or stored.session_id != sid:
                invented.append(f"{sid!r} seq {stored.seq}: {stored.event!r}")
    report = await cp.check_integrity()
    assert isinstance(report.ok, bool)
    return invented


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(damage=damages)
def test_damage_is_reported_never_passed_on(backend: str, damage: Damage, tmp_path: Path) -> None:
    store = Path(tempfile.mkdtemp(dir=tmp_path)) / "store"  # one per example, shrinking included
    shutil.copytree(_template(backend), store)
    files = _store_files(store)
    what = damage.apply(files[damage.file % len(files)])
    invented = asyncio.run(_survey(BACKENDS[backend], store))
    assert not invented, f"after {what}, reads returned events never appended: {invented}"


def test_an_event_that_was_never_appended_is_caught() -> None:
    class Inventive:
        async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
            yield StoredEvent(1, session_id, None, "2026-01-01T00:00:00+00:00", UserPrompt("0ne"))

        async def check_integrity(self) -> IntegrityReport:
            return IntegrityReport(True, "fine")

    invented = asyncio.run(_read_everything(Inventive()))  # type: ignore[arg-type]
    assert len(invented) == len(EXPECTED)
