"""What a store must show after a crash, and the verdict on one crash state.

Shared by the power-loss and kill checks (DUR-002, DUR-003), whichever way
their operations were recorded: through a simulated disk
(`checkpointspec.conformance.checks.durability`) or by tracing a real process's
system calls (`checkpointspec.conformance.checks.durability_traced`). A `Round` is one
recorded workload: the `CrashPlan` of its operations, and for each call of the
workload the op count at its start and at its return (`Step`) with what
`SpecModel` says the store holds after it. `check_state` builds one crash state,
reopens it through the factory and raises `RuleViolation` unless every
acknowledged call is in effect and the one in flight wholly or not at all.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import shutil
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias

from ....backends.stdio.messages import Append, Delete, Truncate
from ....backends.stdio.wire import StdioProtocolError
from ....spec import Capability, CorruptStoreError, ServerControl, SpecModel, UserPrompt
from ..contract.violations import RuleViolation
from ..processes.client import UNSENT, marker_prompts
from ..run.harness import Harness, NothingExercised, read_all
from ..search.exploration import Explored
from .states import CrashPlan, CrashSpec, CrashState

__all__ = [
    "KIND_WEIGHTS",
    "SESSIONS",
    "Call",
    "Expected",
    "Reopener",
    "Round",
    "Seen",
    "Step",
    "allot",
    "at_point",
    "check_rounds",
    "check_state",
    "event_text",
    "expected_of",
    "kind_of",
    "plan_workload",
    "quiet",
    "reopened_in_a_server",
    "verdict_on",
]


SESSIONS: Final = ("alpha", "beta", "gamma")


_SHOWN_OPS: Final = 12
"""Pending ops listed in a failure message."""

_SHOWN_FILES: Final = 20
"""Files of a crash state listed in a failure message; over it, those the round wrote."""


class Expected(NamedTuple):
    """The store as the model has it: event texts per session, and the listed sessions."""

    logs: dict[str, tuple[str, ...]]
    listed: frozenset[str]


class Step(NamedTuple):
    """One call of the workload: the disk's op count at its start and at its return."""

    label: str
    start: int
    end: int
    after: Expected
    kind: str = ""
    """The kind of write, as `kind_of` names it ("" when it does not matter)."""


class Round(NamedTuple):
    """One recorded workload: its operations' crash plan and its calls."""

    number: int
    plan: CrashPlan
    steps: tuple[Step, ...]
    sessions: tuple[str, ...]
    source: str = ""
    """How the ops were recorded, for failure messages (``", traced"``); empty for the simulated disk."""


class Seen(NamedTuple):
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


class Call(NamedTuple):
    """One write of a crash workload, and what the store holds once it returns."""

    kind: str
    """``append``, ``truncate`` or ``delete``."""
    session: str
    texts: tuple[str, ...]
    """An append's event texts (one `UserPrompt` each)."""
    to_seq: int
    """A truncate's ``to_seq``."""
    after: Expected

    def as_request(self) -> Append | Truncate | Delete:
        """This write as a request to a worker process."""
        if self.kind == "append":
            return Append(UNSENT, self.session, marker_prompts(self.texts))
        if self.kind == "truncate":
            return Truncate(UNSENT, self.session, self.to_seq)
        return Delete(UNSENT, self.session)

    @property
    def label(self) -> str:
        if self.kind == "append":
            return f"append({self.session!r}, {len(self.texts)} events)"
        if self.kind == "truncate":
            return f"truncate({self.session!r}, {self.to_seq})"
        return f"delete({self.session!r})"


KIND_WEIGHTS: Final[Mapping[str, int]] = {
    "append": 4,
    "truncate": 2,
    "delete": 1,
    "first append": 1,
}
"""Each kind of write's share of the holds and kill states, in the order they are allotted: appends
of several events to a session that has events can show a partial batch at most
points, so they get the most; a truncate can show a partial cut; a delete and a
session's first append (a log created) at fewer points."""


def kind_of(calls: Sequence[Call], t: int) -> str:
    """The kind of write ``calls[t]`` is, as `KIND_WEIGHTS` names it."""
    call = calls[t]
    if call.kind != "append":
        return call.kind
    before = calls[t - 1].after.logs.get(call.session, ()) if t else ()
    return "append" if before else "first append"


def allot(budget: int, kinds: Sequence[str]) -> dict[str, int]:
    """Each of ``kinds``' share of ``budget`` crash points: one each first (as far as the
    budget goes), the rest in proportion to `KIND_WEIGHTS` (1 for a kind it does not
    name), what rounding leaves to the first; in `KIND_WEIGHTS`' order, others after."""
    present = [kind for kind in KIND_WEIGHTS if kind in kinds]
    present += [kind for kind in dict.fromkeys(kinds) if kind not in KIND_WEIGHTS]
    shares = {kind: int(i < budget) for i, kind in enumerate(present)}
    left = budget - sum(shares.values())
    weight = sum(KIND_WEIGHTS.get(kind, 1) for kind in present) or 1
    for kind in present:
        shares[kind] += left * KIND_WEIGHTS.get(kind, 1) // weight
    for kind in present[: budget - sum(shares.values())]:
        shares[kind] += 1
    return shares


def plan_workload(
    rng: random.Random, capabilities: frozenset[Capability], number: int
) -> tuple[tuple[str, ...], list[Call]]:
    """The sessions and writes of crash round ``number``, drawn with ``rng``.

    Appends of 1-3 events to two or three new sessions, then of 2-3 events to
    existing ones, a truncate of two events or more (TRUNCATE), a delete (DELETE),
    then more appends, one of them re-creating the deleted session.
    """
    model = SpecModel(capabilities)
    calls: list[Call] = []

    def append(sid: str) -> None:
        n = len(calls)
        # A batch added to a log that exists is never a single event: a backend that
        # writes such a batch in pieces shows it only with two or more.
        size = rng.randint(2, 3) if model.head(sid) else rng.randint(1, 3)
        texts = tuple(f"r{number}.{n}.{i} {sid}" for i in range(size))
        model.append(sid, [UserPrompt(t) for t in texts])
        calls.append(Call("append", sid, texts, 0, expected_of(model)))

    sessions = tuple(rng.sample(SESSIONS, rng.choice((2, 3))))
    for sid in [*sessions, *rng.choices(sessions, k=2)]:
        append(sid)
    if Capability.TRUNCATE in capabilities:
        sid = max(sessions, key=model.head)
        # It cuts two events or more, for the same reason: a backend that cuts one
        # event at a time shows it only then. The longest log has three or more.
        to_seq = rng.randrange(model.head(sid) - 1)
        model.truncate(sid, to_seq)
        calls.append(Call("truncate", sid, (), to_seq, expected_of(model)))
    victim = rng.choice(sessions)
    if Capability.DELETE in capabilities:
        model.delete(victim)
        calls.append(Call("delete", victim, (), 0, expected_of(model)))
    for sid in [victim, *rng.choices(sessions, k=2)]:
        append(sid)
    return sessions, calls


def expected_of(model: SpecModel) -> Expected:
    """What ``model`` holds now: every session's event texts, and its session ids."""
    ids = model.session_ids()
    logs = {sid: tuple(event_text(e.event) for e in model.log(sid)) for sid in ids}
    return Expected(logs, frozenset(ids))


def event_text(event: object) -> str:
    """The text the workloads put in each event (their marker)."""
    return str(getattr(event, "text", event))


_QUIETED: contextvars.ContextVar[bool] = contextvars.ContextVar("quieted", default=False)


class _DropWarnings(logging.Filter):
    """Drops records below ERROR that are logged inside a `quiet` block."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not _QUIETED.get()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
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


async def _reopen(
    h: Harness, target: Path, sessions: tuple[str, ...], options: Mapping[str, str] | None = None
) -> Seen:
    with quiet():
        return await _inspect(h, target, sessions, options)


async def _inspect(
    h: Harness, target: Path, sessions: tuple[str, ...], options: Mapping[str, str] | None
) -> Seen:
    async with h.opened(target, options=options) as cp:
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
            logs[sid] = tuple(event_text(s.event) for s in stored)
            broken += _structure(sid, [(s.seq, s.parent_seq, s.session_id) for s in stored])
            head = await cp.head(sid)
            if head != len(stored):
                broken.append(f"head({sid!r}) is {head} but read returned {len(stored)} events")
    return Seen(logs, refused, listed, report.ok, report.detail, broken)


def _structure(sid: str, links: list[tuple[int, int | None, str]]) -> list[str]:
    for n, (seq, parent, owner) in enumerate(links, start=1):
        if (seq, parent, owner) != (n, n - 1 if n > 1 else None, sid):
            return [
                f"session {sid!r}: event {n} has seq {seq}, parent_seq {parent}, "
                f"session_id {owner!r}; seqs must run 1, 2, ... with parent seq - 1"
            ]
    return []


def at_point(rnd: Round, point: int) -> tuple[Expected, Step | None]:
    """What is acknowledged after ``point`` ops, and the call in flight then (if any)."""
    done = [s for s in rnd.steps if s.end <= point]
    acked = done[-1].after if done else Expected({}, frozenset())
    following = rnd.steps[len(done)] if len(done) < len(rnd.steps) else None
    return acked, following if following is not None and following.start < point else None


class StateVerdict(NamedTuple):
    """What a crash state breaks: the ``rule``, how (``message``, with the state's
    values) and the ``shape`` of it without them, the same for a kill and a power loss
    that leave the same kind of state."""

    rule: str
    message: str
    shape: str


def _judge(
    seen: Seen, acked: Expected, flight: Step | None, garbage: bool, rule_id: str
) -> StateVerdict | None:
    """What ``seen`` breaks, or None when it is a state the rule allows."""
    if seen.broken:
        return StateVerdict(rule_id, "; ".join(seen.broken), "reading the reopened store failed")
    if not garbage and (seen.refused or not seen.integrity_ok):
        damaged = "; ".join(f"read({sid!r}) raised {err}" for sid, err in seen.refused.items())
        return StateVerdict(
            rule_id,
            f"{damaged or 'reads work'}; check_integrity: {seen.integrity}",
            "the store is damaged where no write was torn",
        )
    if seen.refused and seen.integrity_ok:
        return StateVerdict(
            rule_id,
            f"reads raise CorruptStoreError ({seen.refused}) but check_integrity is ok",
            "reads raise CorruptStoreError but check_integrity is ok",
        )
    for want in [acked] if flight is None else [acked, flight.after]:
        logs_match = all(got == want.logs.get(sid, ()) for sid, got in seen.logs.items())
        listed_match = seen.listed is None or (
            seen.listed - set(seen.refused) == want.listed - set(seen.refused)
        )
        if logs_match and listed_match:
            return None
    return _mismatch(seen, acked, flight, rule_id)


def _mismatch(seen: Seen, acked: Expected, flight: Step | None, rule_id: str) -> StateVerdict:
    other = flight.after if flight is not None else acked
    interrupted = f" or, with the interrupted {flight.label}, " if flight is not None else " "
    for sid, got in seen.logs.items():
        want, alt = acked.logs.get(sid, ()), other.logs.get(sid, ())
        if got in (want, alt):
            continue
        if len(want) < len(got) < len(alt) and alt[: len(got)] == got and got[: len(want)] == want:
            assert flight is not None
            return StateVerdict(
                "APPEND-003",
                f"session {sid!r} shows {len(got) - len(want)} of the {len(alt) - len(want)} "
                f"events of the interrupted {flight.label}: a partial batch",
                "a partial batch is readable",
            )
        if len(alt) < len(got) < len(want) and want[: len(got)] == got and got[: len(alt)] == alt:
            assert flight is not None
            return StateVerdict(
                rule_id,
                f"session {sid!r} lost {len(want) - len(got)} of the {len(want) - len(alt)} "
                f"events the interrupted {flight.label} removes: a truncate carried part of "
                f"the way (expected {len(want)} or {len(alt)} events, read {len(got)})",
                "a truncate is carried part of the way",
            )
        lost = [t for t in want if t not in got]
        back = [t for t in got if t not in want and t not in alt]
        what = (f"acknowledged events lost: {lost}; " if lost else "") + (
            f"events no acknowledged state holds: {back}; " if back else ""
        )
        expected = f"{list(want)}" + (f"{interrupted}{list(alt)}" if alt != want else "")
        shape = "; ".join(
            part
            for part, present in (
                ("acknowledged events are lost", lost),
                ("events no acknowledged state holds are read", back),
            )
            if present
        )
        return StateVerdict(
            rule_id,
            f"session {sid!r}: {what}expected {expected}, read {list(got)}",
            shape or "a log is no state the writes could leave",
        )
    wanted = (
        sorted(acked.listed)
        if flight is None
        else f"{sorted(acked.listed)}{interrupted}{sorted(other.listed)}"
    )
    evidence = f"list_sessions shows {sorted(seen.listed or ())}, expected {wanted}"
    wrong, shape = _listing_faults(seen, acked, flight)
    return StateVerdict(
        rule_id,
        f"{wrong} ({evidence})" if wrong else evidence,
        shape or "the listing is no state the writes could leave",
    )


def _listing_faults(seen: Seen, acked: Expected, flight: Step | None) -> tuple[str, str]:
    """What is wrong with the listing, session by session, in words: the sessions
    whose presence no state the writes could leave agrees with; and the first fault's
    shape. Empty when the fault is only in how the sessions combine."""
    listed = seen.listed or frozenset()
    after = flight.after.listed if flight is not None else acked.listed
    faults: list[str] = []
    shapes: list[str] = []
    for sid in sorted(listed | acked.listed | after):
        shown, before, then = sid in listed, sid in acked.listed, sid in after
        if shown and not seen.logs.get(sid) and not before:
            fault = f"{sid!r} is listed but has no events"
            if flight is not None and then:
                fault += (
                    f"; after the interrupted {flight.label} it must be absent, or hold its events"
                )
            faults.append(fault)
            shapes.append("a session is listed with no events")
        elif shown and not (before or then):
            faults.append(f"{sid!r} is listed, and no state the writes could leave lists it")
            shapes.append("a session is listed that no state the writes could leave lists")
        elif not shown and before and then:
            faults.append(f"{sid!r} holds acknowledged events but is not listed")
            shapes.append("a session holding acknowledged events is not listed")
    return "; ".join(faults), (shapes[0] if shapes else "")


def _context(rnd: Round, spec: CrashSpec, state: CrashState, crash: str) -> str:
    _, flight = at_point(rnd, spec.point)
    done = [s.label for s in rnd.steps if s.end <= spec.point]
    pending = [str(rnd.plan.ops[i - 1]) for i in rnd.plan.pending(spec.point)]
    shown = pending[-_SHOWN_OPS:]
    if len(pending) > len(shown):
        shown.insert(0, f"... {len(pending) - len(shown)} earlier")
    shown_files = sorted(state.files.items())
    if len(shown_files) > _SHOWN_FILES:
        # A server's data directory holds hundreds of files: those the round wrote tell.
        written = {op.path for op in rnd.plan.ops} | {op.dst for op in rnd.plan.ops}
        shown_files = [(path, data) for path, data in shown_files if path in written]
    files = ", ".join(f"{path} ({len(data)} bytes)" for path, data in shown_files)
    if len(shown_files) < len(state.files):
        files += f" and {len(state.files) - len(shown_files)} files the round did not write"
    return (
        f"\n  {crash}: {spec} (round {rnd.number}, {len(rnd.plan.ops)} ops recorded{rnd.source})"
        f"\n  acknowledged calls: {', '.join(done) or 'none'}"
        f"\n  in flight: {flight.label if flight is not None else 'nothing'}"
        f"\n  pending ops at the crash: {'; '.join(shown) or 'none'}"
        f"\n  files after the crash: {files or 'none'}"
    )


Reopener: TypeAlias = Callable[[CrashState, tuple[str, ...]], Awaitable[Seen]]
"""How a crash state is reopened and read (`reopened_in_a_server` for a server's data
directory); the default writes it into a new store directory and opens that."""


async def _reopened_as_store(h: Harness, state: CrashState, sessions: tuple[str, ...]) -> Seen:
    target = h.new_store()
    try:
        state.materialise(target)
        return await _reopen(h, target, sessions)
    finally:
        shutil.rmtree(target, ignore_errors=True)


async def reopened_in_a_server(
    h: Harness, store: Path, server: ServerControl, state: CrashState, sessions: tuple[str, ...]
) -> Seen:
    """What the store at ``store`` shows in a server started on a copy of ``state``, a
    crash state of ``server``'s data directory; the copy is removed afterwards."""
    copy = server.copy_at()
    try:
        copy.data_directory.mkdir()
        state.materialise(copy.data_directory)
        copy.start()
        return await _reopen(h, store, sessions, copy.options)
    finally:
        copy.remove()


async def check_state(
    h: Harness,
    rnd: Round,
    spec: CrashSpec,
    rule_id: str = "DUR-003",
    reopen: Reopener | None = None,
) -> None:
    """Build crash state ``spec`` of ``rnd``, reopen it through the factory and judge it.

    Raises `RuleViolation` (``rule_id``, or APPEND-003 for a partial batch) when a
    call acknowledged before the crash point is not in effect, the call in flight
    is in effect in part, or the store is damaged where nothing was torn. The
    evidence is this crash state, so it breaks ``rule_id`` as well, and a kill
    state (any ``rule_id`` but DUR-003) KILL-001 too: a killed writer left its
    write half-done.
    ``reopen`` says how the state is reopened (default: as a store directory).
    """
    crash = "crash state" if rule_id == "DUR-003" else "kill state"
    state = rnd.plan.build(spec)
    tear = rnd.plan.tear_of(spec)
    try:
        if reopen is None:
            seen = await _reopened_as_store(h, state, rnd.sessions)
        else:
            seen = await reopen(state, rnd.sessions)
    except StdioProtocolError:
        raise  # no answer came back: the breach is its own finding (PROTO-001)
    except Exception as exc:
        shape = f"reopening and reading after a crash raised {type(exc).__name__}"
        raise RuleViolation(
            rule_id,
            f"{shape}: {exc}" + _context(rnd, spec, state, crash),
            shape=shape,
            otherwise=("DUR-002", shape) if rule_id == "DUR-003" else None,
        ) from exc
    acked, flight = at_point(rnd, spec.point)
    garbage = tear is not None and tear.fill == "garbage"
    verdict = _judge(seen, acked, flight, garbage, rule_id)
    if verdict is not None:
        # The check's own crash state shows it: its rule fails with the rule broken. A
        # killed writer that left anything wrong left its write half-done: KILL-001 as
        # well. A power loss is no killed writer; what it leaves that a kill leaves too
        # is no lost cache's doing, but the write's own (the kill's rule, DUR-002).
        also = (rule_id, "KILL-001") if crash == "kill state" else (rule_id,)
        raise RuleViolation(
            verdict.rule,
            verdict.message + _context(rnd, spec, state, crash),
            also,
            shape=verdict.shape,
            otherwise=("DUR-002", verdict.shape) if verdict.rule == "DUR-003" else None,
        )


async def check_rounds(
    h: Harness,
    budget: int,
    record: Callable[[random.Random, int], Awaitable[Round]],
    states: Callable[[Round, random.Random, int], list[CrashSpec]],
    rule_id: str = "DUR-003",
    reopen: Reopener | None = None,
) -> tuple[int, int, int]:
    """Record rounds and check their states until ``budget`` states are checked, or the
    run's time cap is reached (after one state at least, and each
    recorded round's states checked for at least as long as recording it took; the
    result then says how many of ``budget`` were checked).

    ``record(rng, number)`` records round ``number``; ``states(round, rng, left)``
    picks at most ``left`` of its states. A state that breaks a rule is recorded
    (`Harness.record`, each rule once) and the states after it are checked all the
    same, so that the check reports every rule its states break and, having checked
    them all, passes the others. ``reopen`` is `check_state`'s. Returns the states checked, the rounds recorded and
    the operations they held, for the check's `Harness.measure`.
    """
    rng = random.Random(h.seed)
    checked, number, ops = 0, 0, 0
    while checked < budget and not (checked and h.slice.spent()):
        recording = h.slice.elapsed()
        rnd = await record(rng, number)
        ops += len(rnd.plan.ops)
        # A recorded round is worth checking: its states get at least the time it took
        # to record, slice or not (a traced round costs seconds, a state milliseconds).
        paid_until = 2 * h.slice.elapsed() - recording
        for spec in states(rnd, rng, budget - checked):
            if checked and h.slice.spent() and h.slice.elapsed() >= paid_until:
                break
            try:
                await check_state(h, rnd, spec, rule_id, reopen)
            except RuleViolation as violation:
                h.record(violation)
            checked += 1
        number += 1
    if checked < budget:
        h.slice.stopped(f"checked {checked} of {budget} crash states")
    if not checked:
        raise NothingExercised(
            f"no crash state was checked: {number} recorded rounds of {ops} store "
            f"operations gave none within a budget of {budget}"
        )
    h.explored = Explored(rounds=0, complete=True)
    return checked, number, ops


async def verdict_on(
    h: Harness,
    store: Path,
    sessions: tuple[str, ...],
    acked: Expected,
    flight: Step | None,
    rule_id: str,
) -> tuple[str, str] | None:
    """Reopen ``store`` through the factory and judge it as `check_state` judges a crash
    state: the rule broken and how, or None when every call in ``acked`` is in effect
    and ``flight`` (the call interrupted) wholly or not at all."""
    seen = await _reopen(h, store, sessions)
    verdict = _judge(seen, acked, flight, False, rule_id)
    return (verdict.rule, verdict.message) if verdict is not None else None
