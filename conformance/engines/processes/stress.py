"""Free-running stress: worker processes hammer shared sessions and record what they saw.

`run_stress` starts N workers (`checkpointspec.conformance.engines.processes.client`)
and sends each a ``hello``, so each has its own handle opened through the
backend's factory. Once every handle is open, each worker is sent a `Stress`
request at once; it then runs its own random
mix of calls on a few shared sessions until it has made its share of
``operations`` or ``seconds`` have passed:

- ``append`` of 1-3 events, 60% of them with ``expected_head`` set to the last
  head the worker saw for that session; after a conflict it retries (up to
  twice) with the conflict's ``actual`` head, each attempt a call of its own
  with new events;
- ``read`` since a recent seq (3% of reads since 0, a full read);
- ``head``;
- ``truncate`` with ``expected_head``, cutting up to three events or, one time
  in five, back to 0 (when the plan's ``truncate`` is set: the check sets it
  when TRUNCATE is declared);
- ``delete`` (when the plan's ``delete`` is set, for DELETE).

Truncates and deletes come on every session, and the appends go on after them:
a session emptied by either is appended to again, racing whatever other
workers still do with the old one.

The calls run in the worker (`run_workload`), not one request each, so that
they come at the backend's own pace and each call's times are taken right
around it. Every appended event is a `UserPrompt` whose text is a marker unique
to the call (``p<worker>.<call>.<n>``), so the history checker can tell where
each event came from. Before each call a worker writes a ``begin`` line
(arguments and invocation time) to its own history file and after it an
``end`` line (completion time and outcome); both are written straight to the
file, without buffering, so they survive the worker being killed. A ``begin``
without an ``end`` becomes an `Unknown` outcome. A breach of the stdio protocol
(a backend served with ``--process``) is no outcome of the call: it ends the
workload, and the worker, and the parent raises it (PROTO-001), as it does one met
only when the worker closes its handle at the end. Times come from
``time.monotonic_ns``, one clock for every process on the host. After each step
the worker replies `Progress` with the number of calls it has made.

With ``kills``, the parent SIGKILLs that many workers, each once it reports a
random number of calls, wherever it then is — usually inside the backend. The
others carry on; if one sends no reply for ``seconds + 30`` seconds the run
ends with `StressHung`, since a killed process must not leave anything held
(KILL-001).
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO

import msgspec

from ....backends.registry import BackendTarget
from ....backends.stdio.wire import StdioProtocolError
from ....spec import CheckpointConflictError, Checkpointer, UserPrompt
from ..history import (
    Conflicted,
    Operation,
    OperationOutcome,
    OpKind,
    Raised,
    Returned,
    Unknown,
)
from .client import (
    UNSENT,
    Failed,
    Progress,
    WorkerClient,
    WorkerExited,
    WorkerHung,
    hello,
    started_workers,
)
from .messages import Stress

__all__ = [
    "StressHung",
    "StressPlan",
    "StressRun",
    "load_history",
    "overlapping_calls",
    "run_stress",
    "run_workload",
    "share_of",
]


class StressPlan(msgspec.Struct, frozen=True):
    """What the workers do. ``target`` is the backend every worker opens, with its options."""

    target: BackendTarget
    path: str
    processes: int = 4
    operations: int = 1000
    """Calls across all workers (conflict retries count)."""
    seconds: float = 10.0
    """Each worker stops after this long even if it has calls left: a cap, and a worker
    that reaches it leaves the profile's count of calls unmade."""
    sessions: tuple[str, ...] = ("s0", "s1", "s2")
    truncate: bool = False
    """Truncates are part of the mix (set it only when TRUNCATE is declared)."""
    delete: bool = False
    """Deletes are part of the mix (set it only when DELETE is declared)."""
    seed: int = 0


class StressRun(msgspec.Struct):
    """What came back: every call of every worker, and what happened to the workers."""

    operations: list[Operation]
    killed: dict[int, int]
    """Worker number -> how many calls it had reported done when it was killed."""
    failures: list[str]
    """Workers that could not open the store, failed or exited with an error (with the
    tail of their stderr)."""


class StressHung(Exception):
    """Workers stopped making progress; ``stuck`` lists them, ``killed`` those killed before."""

    def __init__(self, stuck: list[int], killed: dict[int, int], waited: float) -> None:
        super().__init__(f"workers {stuck} made no progress for {waited:.0f}s")
        self.stuck = stuck
        self.killed = killed
        self.waited = waited


# -- the records a worker writes ------------------------------------------------------------


class _Begin(msgspec.Struct, frozen=True, tag="begin", tag_field="t", omit_defaults=True):
    index: int
    kind: OpKind
    session: str
    invoked: int
    markers: tuple[str, ...] = ()
    expected_head: int | None = None
    since_seq: int = 0
    to_seq: int = 0


class _End(msgspec.Struct, frozen=True, tag="end", tag_field="t"):
    index: int
    completed: int
    outcome: OperationOutcome


_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(_Begin | _End).decode


def load_history(path: Path, process: int) -> list[Operation]:
    """One worker's calls from its history file; a call with no ``end`` line is `Unknown`."""
    begins: dict[int, _Begin] = {}
    ends: dict[int, _End] = {}
    data = path.read_bytes() if path.exists() else b""
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            record = _decode_record(line)
        except msgspec.DecodeError:
            continue  # only the last line can be torn, by the kill; its call is unknown
        if isinstance(record, _Begin):
            begins[record.index] = record
        else:
            ends[record.index] = record
    operations = []
    for index in sorted(begins):
        begin, end = begins[index], ends.get(index)
        operations.append(
            Operation(
                process=process,
                index=index,
                kind=begin.kind,
                session=begin.session,
                invoked=begin.invoked,
                completed=end.completed if end is not None else None,
                outcome=end.outcome if end is not None else Unknown(),
                markers=begin.markers,
                expected_head=begin.expected_head,
                since_seq=begin.since_seq,
                to_seq=begin.to_seq,
            )
        )
    return operations


def overlapping_calls(operations: Sequence[Operation]) -> int:
    """How many calls began while a call of another worker was in flight (one with no
    outcome counts as in flight to the end): none means the workers never ran at once."""
    in_flight_until: dict[int, int] = {}  # worker -> the latest end of its calls begun so far
    overlapping = 0
    for op in sorted(operations, key=lambda op: op.invoked):
        if any(
            worker != op.process and until > op.invoked for worker, until in in_flight_until.items()
        ):
            overlapping += 1
        end = op.completed if op.completed is not None else sys.maxsize
        in_flight_until[op.process] = max(in_flight_until.get(op.process, end), end)
    return overlapping


# -- the parent -----------------------------------------------------------------------------


def share_of(plan: StressPlan, number: int) -> int:
    """The calls worker ``number`` makes of ``plan.operations`` (conflict retries count)."""
    base, extra = divmod(plan.operations, plan.processes)
    return base + (1 if number < extra else 0)


async def run_stress(plan: StressPlan, workdir: Path, kills: int = 0) -> StressRun:
    """Run the workers to the end (or their kill) and collect their histories.

    ``workdir`` receives one history file per worker. Raises `StressHung` when
    some worker reports no progress for ``plan.seconds + 30`` seconds; every
    worker still running is then killed.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{plan.seed}:kills")
    victims = rng.sample(range(plan.processes), min(kills, plan.processes))
    # Kill somewhere between a quarter and nine tenths of the victim's share, so
    # the run stays long enough around the kill and the other workers see it.
    kill_after = {
        v: rng.randint(max(1, share_of(plan, v) // 4), max(1, share_of(plan, v) * 9 // 10))
        for v in victims
    }
    killed: dict[int, int] = {}
    failures: list[str] = []
    patience = plan.seconds + 30.0

    async def follow(number: int, worker: WorkerClient) -> None:
        # Each call is followed by a Progress reply; none for `patience` seconds
        # means the worker is stuck (WorkerHung).
        async for reply in worker.replies():
            if isinstance(reply, Progress):
                if number in kill_after and reply.calls >= kill_after[number]:
                    await worker.kill()
                    killed[number] = reply.calls
                    return
            elif isinstance(reply, Failed):
                failures.append(f"worker {number} failed: {reply.error}: {reply.message}")
        status = await worker.close()
        if status != 0:
            # Closing the handle at the end is the backend's call too: a breach or a broken
            # rule met there is raised, as one met in the middle of the run is.
            evidence = worker.exit_evidence()
            if evidence is not None:
                raise evidence
            failures.append(f"worker {number} exited with status {status}: {worker.stderr_tail()}")

    async with started_workers(plan.target, plan.processes, patience) as workers:
        # A start barrier, so that the workers really overlap: every handle is
        # open before any worker is told to start.
        for number, worker in enumerate(workers):
            try:
                opened = await worker.call(hello(plan.path, plan.target.options))
            except WorkerHung:
                raise StressHung([number], {}, patience) from None
            except WorkerExited as exited:
                failures.append(f"worker {number} could not start: {exited}")
                continue
            if isinstance(opened, Failed):
                failures.append(f"worker {number} could not open the store: {opened.message}")
        if failures:
            return StressRun([], {}, failures)
        for number, worker in enumerate(workers):
            history = str(workdir / f"history-{number}.jsonl")
            await worker.send(
                Stress(
                    id=UNSENT,
                    number=number,
                    history=history,
                    calls=share_of(plan, number),
                    seconds=plan.seconds,
                    sessions=plan.sessions,
                    truncate=plan.truncate,
                    delete=plan.delete,
                    seed=plan.seed,
                )
            )
        tasks = [asyncio.ensure_future(follow(n, w)) for n, w in enumerate(workers)]
        await asyncio.wait(tasks)
    stuck = [n for n, t in enumerate(tasks) if isinstance(t.exception(), WorkerHung)]
    if stuck:
        raise StressHung(stuck, killed, patience)
    for number, task in enumerate(tasks):
        error = task.exception()
        if isinstance(error, WorkerExited):
            failures.append(f"worker {number} {error}")
        elif error is not None:
            raise error
    operations = [
        op
        for number in range(plan.processes)
        for op in load_history(workdir / f"history-{number}.jsonl", number)
    ]
    return StressRun(operations, killed, failures)


# -- the worker -----------------------------------------------------------------------------


class _Caller:
    """One worker's loop: choose a call, record it, make it, record its outcome."""

    def __init__(self, cp: Checkpointer, plan: Stress, record: IO[bytes]) -> None:
        self.cp = cp
        self.number = plan.number
        self.plan = plan
        self.record = record
        self.rng = random.Random(f"{plan.seed}:{plan.number}")
        self.index = 0
        self.known: dict[str, int] = {}  # the last head this worker saw, per session

    async def call(
        self,
        kind: OpKind,
        session: str,
        run: Callable[[], Awaitable[Returned]],
        *,
        markers: tuple[str, ...] = (),
        expected_head: int | None = None,
        since_seq: int = 0,
        to_seq: int = 0,
    ) -> OperationOutcome:
        index = self.index
        self.index += 1
        invoked = time.monotonic_ns()
        begin = _Begin(index, kind, session, invoked, markers, expected_head, since_seq, to_seq)
        self.record.write(_encode(begin) + b"\n")
        outcome: OperationOutcome
        try:
            outcome = await run()
        except CheckpointConflictError as conflict:
            outcome = Conflicted(conflict.expected, conflict.actual)
            self.known[session] = conflict.actual
        except StdioProtocolError:
            raise  # no answer came back: the breach is its own finding (PROTO-001)
        except Exception as error:  # every other error is part of the history
            outcome = Raised(type(error).__name__, str(error)[:300])
        completed = time.monotonic_ns()
        self.record.write(_encode(_End(index, completed, outcome)) + b"\n")
        return outcome

    async def append(self, session: str, size: int, expected: int | None) -> OperationOutcome:
        markers = tuple(f"p{self.number}.{self.index}.{n}" for n in range(size))

        async def run() -> Returned:
            head = await self.cp.append(session, [UserPrompt(m) for m in markers], expected)
            self.known[session] = head
            return Returned(head)

        return await self.call("append", session, run, markers=markers, expected_head=expected)

    async def read(self, session: str, since: int) -> None:
        async def run() -> Returned:
            events = tuple(
                [
                    (stored.seq, getattr(stored.event, "text", ""))
                    async for stored in self.cp.read(session, since)
                ]
            )
            if events:
                self.known[session] = events[-1][0]
            return Returned(0, events)

        await self.call("read", session, run, since_seq=since)

    async def head(self, session: str) -> None:
        async def run() -> Returned:
            head = self.known[session] = await self.cp.head(session)
            return Returned(head)

        await self.call("head", session, run)

    async def truncate(self, session: str, expected: int, to_seq: int) -> None:
        async def run() -> Returned:
            head = self.known[session] = await self.cp.truncate(session, to_seq, expected)
            return Returned(head)

        await self.call("truncate", session, run, expected_head=expected, to_seq=to_seq)

    async def delete(self, session: str) -> None:
        async def run() -> Returned:
            await self.cp.delete(session)
            self.known[session] = 0
            return Returned(0)

        await self.call("delete", session, run)

    async def step(self) -> None:
        rng = self.rng
        session = rng.choice(self.plan.sessions)
        # A negative head or seq the backend answered is recorded for the history
        # checker to judge; the next call's arguments still have to be drawn.
        known = max(0, self.known.get(session, 0))
        roll = rng.random()
        if roll < 0.45:
            expected = known if rng.random() < 0.6 else None
            size = rng.randint(1, 3)
            for _ in range(3):
                outcome = await self.append(session, size, expected)
                if not isinstance(outcome, Conflicted):
                    break
                expected = outcome.actual
        elif roll < 0.72:
            since = 0 if rng.random() < 0.03 else rng.randint(max(0, known - 4), known)
            await self.read(session, since)
        elif roll < 0.93 or (roll < 0.98 and not self.plan.truncate):
            await self.head(session)
        elif roll < 0.98:
            if known == 0:
                await self.head(session)
            else:
                to_seq = 0 if rng.random() < 0.2 else rng.randint(max(0, known - 3), known - 1)
                await self.truncate(session, known, to_seq)
        elif self.plan.delete:
            await self.delete(session)
        else:
            await self.head(session)


async def run_workload(
    cp: Checkpointer, command: Stress, record: IO[bytes], progress: Callable[[int], None]
) -> None:
    """Worker ``command.number``'s calls on ``cp``, recorded in ``record`` (unbuffered).

    This runs inside the worker process (`checkpointspec.conformance.engines.processes.worker`);
    ``progress`` is told the number of calls made after each step.
    """
    deadline = time.monotonic_ns() + int(command.seconds * 1e9)
    caller = _Caller(cp, command, record)
    while caller.index < command.calls and time.monotonic_ns() < deadline:
        await caller.step()
        progress(caller.index)
