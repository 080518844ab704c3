"""Small tools the checks share: state snapshots, error expectations, file fingerprints,
the backend's hooks, worker processes opened on the store.

A check's Hypothesis run (a property, a state machine) is
`checkpointspec.conformance.engines.search`'s: checks call its drivers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

from ...spec import Capability, Checkpointer, StoredEvent, StoreHooks
from ..engines.contract.outcomes import Err, run_backend
from ..engines.contract.violations import RuleViolation, expect
from ..engines.processes.client import Opened, WorkerClient, hello, started_workers
from ..engines.run.harness import Harness, read_all

__all__ = [
    "Snapshot",
    "append_five",
    "changed_files",
    "check_whole_batches",
    "expect",
    "expect_error",
    "fingerprint",
    "hooks_of",
    "listed_mtime",
    "opened_workers",
    "snapshot",
    "spin",
    "unchanged",
]

E = TypeVar("E", bound=BaseException)


Snapshot = tuple[tuple[str, ...], dict[str, tuple[tuple[int, object], ...]]]


async def snapshot(cp: Checkpointer, session_ids: Iterable[str] = ()) -> Snapshot:
    """The listed ids and the (seq, event) pairs of every listed or named session.

    Without LIST the listing is left out (empty) and only the named sessions are read.
    """
    listed: tuple[str, ...] = ()
    if Capability.LIST in cp.capabilities:
        listed = tuple(sorted(info.id for info in await cp.list_sessions()))
    logs: dict[str, tuple[tuple[int, object], ...]] = {}
    for sid in sorted(set(listed) | set(session_ids)):
        logs[sid] = tuple((s.seq, s.event) for s in await read_all(cp, sid))
    return listed, logs


async def listed_mtime(cp: Checkpointer, session_id: str, after: str) -> float:
    """The mtime ``list_sessions`` gives ``session_id``, which ``after`` left existing.

    Raises `RuleViolation` (LIST-001) when the session is not listed: a session
    appended to and not deleted is listed, even with no events left.
    """
    listed = await cp.list_sessions()
    for info in listed:
        if info.id == session_id:
            return info.mtime
    raise RuleViolation(
        "LIST-001",
        f"{session_id!r} is not listed after {after}; list_sessions shows "
        f"{[info.id for info in listed]}",
    )


async def unchanged(cp: Checkpointer, before: Snapshot, rule_id: str, call: str) -> None:
    """Fail ``rule_id`` unless the store looks exactly as in ``before``."""
    after = await snapshot(cp, before[1].keys())
    if after != before:
        changed = [
            sid for sid in set(after[1]) | set(before[1]) if after[1].get(sid) != before[1].get(sid)
        ]
        raise RuleViolation(
            rule_id,
            f"{call} changed the store: listed {list(before[0])} -> {list(after[0])}; sessions changed: {changed}",
        )


async def expect_error(
    call: Callable[[], Awaitable[object]], error: type[E], rule_id: str, description: str
) -> E:
    """Run ``call`` and fail ``rule_id`` unless it raises ``error``."""
    outcome = await run_backend(call)
    if not isinstance(outcome, Err):
        raise RuleViolation(
            rule_id, f"{description} returned {outcome.value!r}; expected {error.__name__}"
        )
    if not isinstance(outcome.error, error):
        raise RuleViolation(
            rule_id,
            f"{description} raised {type(outcome.error).__name__}: {outcome.error}; expected {error.__name__}",
        )
    return outcome.error


def fingerprint(path: Path) -> dict[str, str]:
    """SHA-256 of every file under ``path``, by relative name, and every directory
    (as ``"directory"``): what "untouched" means, byte for byte."""
    prints: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            prints[str((Path(dirpath) / name).relative_to(path))] = "directory"
        for name in filenames:
            full = Path(dirpath) / name
            prints[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return prints


def changed_files(before: dict[str, str], after: dict[str, str]) -> str:
    """The names that differ between two fingerprints, in words (empty when none do)."""
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    altered = sorted(n for n in before.keys() & after.keys() if before[n] != after[n])
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("created", added), ("removed", removed), ("changed", altered))
        if names
    ]
    return "; ".join(parts)


async def hooks_of(h: Harness) -> StoreHooks:
    """The backend's `StoreHooks`, from a handle opened and closed on a scratch store of
    its own: opening one on the store the hook will change could prepare that store
    (create a table, switch a journal mode) before the hook runs, and the check would
    then never see the backend do it to the store it must leave untouched."""
    cp = await h.open(h.new_store())
    await cp.close()
    assert isinstance(cp, StoreHooks)
    return cp


async def append_five(cp: Checkpointer, h: Harness, sid: str = "s") -> None:
    await cp.append(sid, [h.prompt(f"{sid} {i}") for i in range(1, 6)])


def check_whole_batches(log: list[StoredEvent], batches: list[list[str]], rule_id: str) -> None:
    seqs = [s.seq for s in log]
    expect(
        seqs == list(range(1, len(log) + 1)),
        rule_id,
        f"seqs are not contiguous from 1: {seqs[:20]}",
    )
    texts = [getattr(s.event, "text", None) for s in log]
    position = {text: i for i, text in enumerate(texts)}
    expect(len(position) == len(texts), rule_id, "some event was stored twice")
    for batch in batches:
        places = [position.get(text) for text in batch]
        if all(p is None for p in places):
            continue
        expect(
            None not in places
            and places == list(range(places[0] or 0, (places[0] or 0) + len(batch))),
            rule_id,
            f"batch {batch[0].rsplit(':', 1)[0]} is not stored whole and contiguous: positions {places}",
        )


@contextlib.asynccontextmanager
async def opened_workers(
    h: Harness, count: int, rule_id: str, reply_timeout: float = 60.0
) -> AsyncIterator[list[WorkerClient]]:
    """``count`` worker processes, each with its own handle on ``h.path``, every one
    open before this yields; those still running at the end are killed.

    A backend that refuses a worker's ``hello`` fails ``rule_id``.
    """
    async with started_workers(h.target, count, reply_timeout) as workers:
        for n, worker in enumerate(workers):
            reply = await worker.call(hello(str(h.path), h.target.options))
            if not isinstance(reply, Opened):
                raise RuleViolation(rule_id, f"worker {n} could not open the store: {reply}")
        yield workers


def spin(seconds: float) -> None:
    """Wait ``seconds`` on the CPU: an event-loop sleep is too coarse for sub-millisecond aim."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass
