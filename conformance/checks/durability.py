"""Checks of the DUR rules: acknowledged writes survive a reopen (DUR-001), a SIGKILL of the writer (DUR-002) and a power loss (DUR-003).

The power-loss check (DUR-003): a simulated disk's crash states, reopened through the factory.

Each round uses a new store and a workload drawn from the run's seed; rounds
repeat until ``profile.powerloss_states`` crash states have been checked.

1. Open a handle through the factory and close it. A handle that is not
   `FileSystemPorted` skips the check. Copy the store's files into a
   `SimulatedDisk` and get a handle doing its I/O there (``on_filesystem``).
2. Drive that handle: appends of 1-3 events to two or three sessions, a
   truncate (TRUNCATE), a delete (DELETE), more appends, one of them re-creating
   the deleted session. Each call notes the disk's op count when it starts and when
   it returns, and `SpecModel` says what the store holds after it.
3. For each crash state (`checkpointspec.conformance.engines.crashstates` says which are
   built; over budget they are sampled with the seed), write it into a fresh
   directory and reopen that through the factory with the real file system. A
   call that returned at or before the crash point is acknowledged and must be in
   effect; the call in flight may be in effect wholly or not at all; later calls
   not at all. Every session is read, its seqs and parent links checked, its head
   compared, the listing compared (LIST), and ``check_integrity`` must be ok.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Final, NamedTuple

from ...spec import (
    Capability,
    Checkpointer,
    CorruptStoreError,
    FileSystemPorted,
    SpecModel,
    UserPrompt,
)
from ..engines.commanded import Acked, AppendBatches, WorkerExited, WorkerHung
from ..engines.crashstates import CrashPlan, CrashSpec, CrashState
from ..engines.disk import SimulatedDisk
from ..engines.violations import RuleViolation
from ._support import check_whole_batches, expect, opened_workers, snapshot, spin
from .base import check
from .harness import CheckSkipped, Harness, read_all

__all__ = ["CHECKS"]

_SESSIONS: Final = ("alpha", "beta", "gamma")


_SHOWN_OPS: Final = 12


"""Pending ops listed in a failure message."""


class _Expected(NamedTuple):
    """The store as the model has it: event texts per session, and the listed sessions."""

    logs: dict[str, tuple[str, ...]]
    listed: frozenset[str]


class _Step(NamedTuple):
    """One call of the workload: the disk's op count at its start and at its return."""

    label: str
    start: int
    end: int
    after: _Expected


class _Round(NamedTuple):
    number: int
    plan: CrashPlan
    steps: tuple[_Step, ...]
    sessions: tuple[str, ...]


class _Seen(NamedTuple):
    """What a reopened store shows."""

    logs: dict[str, tuple[str, ...]]
    refused: dict[str, str]
    """Sessions whose read raised CorruptStoreError, with the error."""
    listed: frozenset[str] | None
    """None for a backend without LIST."""
    integrity_ok: bool
    integrity: str
    broken: list[str]
    """Seqs, parent links, session ids or heads that are wrong, and errors other than damage."""


def _expected(model: SpecModel) -> _Expected:
    ids = model.session_ids()
    logs = {sid: tuple(_text(e.event) for e in model.log(sid)) for sid in ids}
    return _Expected(logs, frozenset(ids))


def _text(event: object) -> str:
    return str(getattr(event, "text", event))


async def _record_round(h: Harness, rng: random.Random, number: int) -> _Round:
    store = h.path if number == 0 else h.new_store()
    base = await h.open(store)
    # Closed first, so that the files copied below are everything it wrote.
    await base.close()
    if not isinstance(base, FileSystemPorted):
        raise CheckSkipped(
            "DUR-003 needs the backend's file I/O routed through a simulated disk: the handle "
            "does not implement FileSystemPorted (on_filesystem(fs) -> Checkpointer, see "
            "checkpointspec.spec.filesystem)"
        )
    disk = SimulatedDisk.load(store)
    cp = base.on_filesystem(disk)
    model = SpecModel(h.capabilities)
    steps: list[_Step] = []

    async def step(
        label: str, call: Callable[[], Awaitable[object]], mirror: Callable[[], object]
    ) -> None:
        start = disk.op_count
        await call()
        end = disk.op_count
        mirror()
        steps.append(_Step(label, start, end, _expected(model)))

    async def append(sid: str) -> None:
        n = len(steps)
        batch = [UserPrompt(f"r{number}.{n}.{i} {sid}") for i in range(rng.randint(1, 3))]
        await step(
            f"append({sid!r}, {len(batch)} events)",
            partial(cp.append, sid, batch),
            partial(model.append, sid, batch),
        )

    sessions = tuple(rng.sample(_SESSIONS, rng.choice((2, 3))))
    try:
        for sid in [*sessions, *rng.choices(sessions, k=2)]:
            await append(sid)
        if h.has(Capability.TRUNCATE):
            sid = max(sessions, key=model.head)
            to_seq = rng.randrange(model.head(sid))
            await step(
                f"truncate({sid!r}, {to_seq})",
                partial(cp.truncate, sid, to_seq),
                partial(model.truncate, sid, to_seq),
            )
        victim = rng.choice(sessions)
        if h.has(Capability.DELETE):
            await step(
                f"delete({victim!r})", partial(cp.delete, victim), partial(model.delete, victim)
            )
        for sid in [victim, *rng.choices(sessions, k=2)]:
            await append(sid)
    finally:
        await cp.close()
    plan = disk.crash_plan()
    if not plan.ops:
        raise RuleViolation(
            "DUR-003",
            "the handle from on_filesystem(fs) changed nothing through fs during "
            f"{len(steps)} writes: on_filesystem must route all of the store's I/O through fs",
        )
    return _Round(number, plan, tuple(steps), sessions)


_QUIETED: contextvars.ContextVar[bool] = contextvars.ContextVar("quieted", default=False)


class _DropWarnings(logging.Filter):
    """Drops records below ERROR that are logged inside a `_quiet` block."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not _QUIETED.get()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # Cutting off a torn tail is the expected outcome of many crash states, and
    # backends rightly log a warning each time; thousands of them would bury the
    # report. Only what is logged inside this block is dropped: the filter asks a
    # context variable, which the block's task and the threads it starts with
    # asyncio.to_thread see set, and nothing else does. Errors still get through,
    # and the filter leaves every handler when the block ends.
    token = _QUIETED.set(True)
    drop = _DropWarnings()
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = {h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers}
    if logging.lastResort is not None:
        handlers.add(logging.lastResort)  # what prints when no handler is configured
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)
        _QUIETED.reset(token)


async def _reopen(h: Harness, target: Path, sessions: tuple[str, ...]) -> _Seen:
    with _quiet():
        return await _inspect(h, target, sessions)


async def _inspect(h: Harness, target: Path, sessions: tuple[str, ...]) -> _Seen:
    async with h.opened(target) as cp:
        report = await cp.check_integrity()
        listed = None
        if h.has(Capability.LIST):
            listed = frozenset(info.id for info in await cp.list_sessions())
        logs: dict[str, tuple[str, ...]] = {}
        refused: dict[str, str] = {}
        broken: list[str] = []
        for sid in sorted({*sessions, *(listed or ())}):
            try:
                stored = await read_all(cp, sid)
            except CorruptStoreError as exc:
                refused[sid] = str(exc)
                continue
            logs[sid] = tuple(_text(s.event) for s in stored)
            broken += _structure(sid, [(s.seq, s.parent_seq, s.session_id) for s in stored])
            head = await cp.head(sid)
            if head != len(stored):
                broken.append(f"head({sid!r}) is {head} but read returned {len(stored)} events")
    return _Seen(logs, refused, listed, report.ok, report.detail, broken)


def _structure(sid: str, links: list[tuple[int, int | None, str]]) -> list[str]:
    for n, (seq, parent, owner) in enumerate(links, start=1):
        if (seq, parent, owner) != (n, n - 1 if n > 1 else None, sid):
            return [
                f"session {sid!r}: event {n} has seq {seq}, parent_seq {parent}, "
                f"session_id {owner!r}; seqs must run 1, 2, ... with parent seq - 1"
            ]
    return []


def _at(rnd: _Round, point: int) -> tuple[_Expected, _Step | None]:
    """What is acknowledged after ``point`` ops, and the call in flight then (if any)."""
    done = [s for s in rnd.steps if s.end <= point]
    acked = done[-1].after if done else _Expected({}, frozenset())
    following = rnd.steps[len(done)] if len(done) < len(rnd.steps) else None
    return acked, following if following is not None and following.start < point else None


def _judge(
    seen: _Seen, acked: _Expected, flight: _Step | None, garbage: bool
) -> tuple[str, str] | None:
    """The rule broken and how, or None when ``seen`` is a state the rule allows."""
    if seen.broken:
        return "DUR-003", "; ".join(seen.broken)
    if not garbage and (seen.refused or not seen.integrity_ok):
        damaged = "; ".join(f"read({sid!r}) raised {err}" for sid, err in seen.refused.items())
        return "DUR-003", f"{damaged or 'reads work'}; check_integrity: {seen.integrity}"
    if seen.refused and seen.integrity_ok:
        return (
            "DUR-003",
            f"reads raise CorruptStoreError ({seen.refused}) but check_integrity is ok",
        )
    for want in [acked] if flight is None else [acked, flight.after]:
        logs_match = all(got == want.logs.get(sid, ()) for sid, got in seen.logs.items())
        listed_match = seen.listed is None or (
            seen.listed - set(seen.refused) == want.listed - set(seen.refused)
        )
        if logs_match and listed_match:
            return None
    return _mismatch(seen, acked, flight)


def _mismatch(seen: _Seen, acked: _Expected, flight: _Step | None) -> tuple[str, str]:
    other = flight.after if flight is not None else acked
    interrupted = f" or, with the interrupted {flight.label}, " if flight is not None else " "
    for sid, got in seen.logs.items():
        want, alt = acked.logs.get(sid, ()), other.logs.get(sid, ())
        if got in (want, alt):
            continue
        if len(want) < len(got) < len(alt) and alt[: len(got)] == got and got[: len(want)] == want:
            assert flight is not None
            return "APPEND-003", (
                f"session {sid!r} shows {len(got) - len(want)} of the {len(alt) - len(want)} "
                f"events of the interrupted {flight.label}: a partial batch"
            )
        lost = [t for t in want if t not in got]
        back = [t for t in got if t not in want and t not in alt]
        what = (f"acknowledged events lost: {lost}; " if lost else "") + (
            f"events no acknowledged state holds: {back}; " if back else ""
        )
        expected = f"{list(want)}" + (f"{interrupted}{list(alt)}" if alt != want else "")
        return "DUR-003", f"session {sid!r}: {what}expected {expected}, read {list(got)}"
    wanted = (
        sorted(acked.listed)
        if flight is None
        else f"{sorted(acked.listed)}{interrupted}{sorted(other.listed)}"
    )
    return "DUR-003", f"list_sessions shows {sorted(seen.listed or ())}, expected {wanted}"


def _context(rnd: _Round, spec: CrashSpec, state: CrashState) -> str:
    _, flight = _at(rnd, spec.point)
    done = [s.label for s in rnd.steps if s.end <= spec.point]
    pending = [str(rnd.plan.ops[i - 1]) for i in rnd.plan.pending(spec.point)]
    shown = pending[-_SHOWN_OPS:]
    if len(pending) > len(shown):
        shown.insert(0, f"... {len(pending) - len(shown)} earlier")
    files = ", ".join(f"{path} ({len(data)} bytes)" for path, data in sorted(state.files.items()))
    return (
        f"\n  crash state: {spec} (round {rnd.number}, {len(rnd.plan.ops)} ops recorded)"
        f"\n  acknowledged calls: {', '.join(done) or 'none'}"
        f"\n  in flight: {flight.label if flight is not None else 'nothing'}"
        f"\n  pending ops at the crash: {'; '.join(shown) or 'none'}"
        f"\n  files after the crash: {files or 'none'}"
    )


async def _check_state(h: Harness, rnd: _Round, spec: CrashSpec) -> None:
    state = rnd.plan.build(spec)
    tear = rnd.plan.tear_of(spec)
    target = h.new_store()
    try:
        state.materialise(target)
        try:
            seen = await _reopen(h, target, rnd.sessions)
        except Exception as exc:
            raise RuleViolation(
                "DUR-003",
                f"reopening and reading after a power loss raised {type(exc).__name__}: {exc}"
                + _context(rnd, spec, state),
            ) from exc
    finally:
        shutil.rmtree(target, ignore_errors=True)
    acked, flight = _at(rnd, spec.point)
    verdict = _judge(seen, acked, flight, garbage=tear is not None and tear.fill == "garbage")
    if verdict is not None:
        rule_id, message = verdict
        raise RuleViolation(rule_id, message + _context(rnd, spec, state))


@check("DUR-003", "APPEND-003", "INTEG-001")
async def acknowledged_writes_survive_power_loss(h: Harness) -> None:
    """DUR-003: after a simulated power loss at every point, acknowledged writes are in effect."""
    budget = h.profile.powerloss_states
    rng = random.Random(h.seed)
    checked, number = 0, 0
    while checked < budget:
        rnd = await _record_round(h, rng, number)
        for spec in rnd.plan.sample(budget - checked, rng):
            await _check_state(h, rnd, spec)
            checked += 1
        number += 1


async def _reopened(h: Harness, handles: list[Checkpointer]) -> Checkpointer:
    for cp in handles:
        await cp.close()
    return await h.open()


@check("DUR-001")
async def acknowledged_writes_survive_reopen(h: Harness) -> None:
    """DUR-001: after closing every handle and reopening, appends, truncates and deletes are in effect."""
    cp = await h.open()
    await cp.append("kept", [h.prompt(f"k{i}") for i in range(10)])
    await cp.append("gone", [h.prompt("g")])
    await cp.append("cut", [h.prompt(f"c{i}") for i in range(5)])
    if h.has(Capability.TRUNCATE):
        await cp.truncate("cut", 2)
    if h.has(Capability.DELETE):
        await cp.delete("gone")
    before = await snapshot(cp, ["kept", "gone", "cut"])
    again = await _reopened(h, [cp])
    after = await snapshot(again, ["kept", "gone", "cut"])
    expect(after == before, "DUR-001", f"after reopen the store differs: {before[0]} -> {after[0]}")
    expect(
        await again.append("kept", [h.prompt("more")]) == 11,
        "DUR-001",
        "appending after reopen did not continue at 11",
    )


@check(
    "DUR-002",
    "APPEND-003",
    "INTEG-001",
    replay_note="the seed picks when to kill the writer, as a fraction of an append's "
    "measured duration; where in the backend's code that lands depends on timing",
)
async def acknowledged_writes_survive_kill(h: Harness) -> None:
    """DUR-002: after SIGKILL of a writer, every acknowledged batch is stored, whole; no partial batch.

    The kill comes a random fraction of an append's duration after the writer's
    Nth acknowledgement: killing on the acknowledgement itself would mostly land
    at the start of the next append, before it writes anything, where a batch
    written in pieces (APPEND-003) cannot show.
    """
    rng = random.Random(h.seed)
    size = 3
    for round_ in range(h.profile.process_rounds * 2):
        session, writer = f"killed-{round_}", f"k{round_}"
        stop_after = rng.randint(2, 40)
        acked: list[Acked] = []
        ended: object = None
        async with opened_workers(h, 1, "DUR-002") as (worker,):
            await worker.send(AppendBatches(session, writer, 100_000, size))
            ack_times: list[float] = []
            try:
                while len(acked) < stop_after:
                    reply = await worker.receive()
                    if not isinstance(reply, Acked):
                        ended = reply  # the writer stopped on its own
                        break
                    acked.append(reply)
                    ack_times.append(time.perf_counter())
            except (WorkerExited, WorkerHung) as lost:
                ended = lost
            if len(ack_times) >= 2:
                interval = (ack_times[-1] - ack_times[0]) / (len(ack_times) - 1)
                spin(min(interval, 0.05) * rng.random())
            # Acknowledgements sent before the kill but not yet read count too.
            acked += [r for r in await worker.kill() if isinstance(r, Acked)]
        expect(
            len(acked) >= 1,
            "DUR-002",
            f"the writer acknowledged nothing before it was killed: {ended}",
        )
        cp = await h.open()
        log = await read_all(cp, session)
        stored = {getattr(s.event, "text", "") for s in log}
        for ack in acked:
            expect(
                f"{writer}:{ack.batch}:{size - 1}" in stored,
                "DUR-002",
                f"batch {ack.batch}, acknowledged at head {ack.head}, is gone after the kill",
            )
        check_whole_batches(
            log,
            [[f"{writer}:{b}:{i}" for i in range(size)] for b in range(len(log) // size + 2)],
            "APPEND-003",
        )
        report = await cp.check_integrity()
        expect(report.ok, "DUR-002", f"check_integrity after a kill: {report.detail}")
        await cp.close()


CHECKS = (
    acknowledged_writes_survive_power_loss,
    acknowledged_writes_survive_reopen,
    acknowledged_writes_survive_kill,
)
