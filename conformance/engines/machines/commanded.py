"""The commanded-workers machine: a state machine choosing how processes interleave.

Three of the kit's worker processes (`checkpointspec.conformance.engines.processes.client`)
hold their own handles on one store. The machine runs operations on any of them
— appends, and truncates (sometimes to 0) and deletes when the backend declares
TRUNCATE and DELETE, after which the same session ids are appended to again —
pauses one inside a write (an append, truncate or delete) at a fault point the
backend names (holding its locks and open transaction), lets the others read
meanwhile, then resumes it or kills it with SIGKILL and restarts it. Every
result is compared with `SpecModel`. After a kill the write that was cut short
must be wholly there or wholly absent (KILL-001) and must block no one; reads
during a paused write see the log before or after it (READ-003). Backends
without fault points get the same machine with kills at unplanned moments.

Build it as ``run_state_machine_as_test(lambda: CommandedMachine(env))``; the
`WorkerPool` in ``env`` keeps its processes across examples, so each example
costs one ``hello`` per worker rather than three interpreter starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import IO, Literal, TypeVar

import msgspec
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ....backends.registry import BackendTarget
from ....backends.stdio.messages import (
    Append,
    Close,
    Delete,
    Head,
    Read,
    Request,
    Resume,
    Truncate,
)
from ....spec import Capability, CheckpointConflictError, SpecModel
from ..contract.violations import RuleViolation, expect
from ..processes.client import (
    UNSENT,
    Failed,
    Opened,
    Paused,
    Succeeded,
    WorkerClient,
    WorkerExited,
    WorkerHung,
    WorkerReply,
    backend_error,
    hello,
    marker_prompts,
)
from ..processes.messages import KitRequest, PauseAt

__all__ = ["WORKERS", "CommandedEnv", "CommandedMachine", "WorkerPool", "worker_pool"]

WORKERS = 3


SESSIONS = ("s", "t")

NEVER_A_HEAD = 2**40
"""An expected head no log of a run reaches, nor any head a process could remember."""


T = TypeVar("T")


class WorkerPool:
    """Worker processes for a synchronous caller, on a private event loop (see `worker_pool`).

    A worker that was killed, or has exited, is started again by its next `open`.
    """

    def __init__(
        self,
        target: BackendTarget,
        loop: asyncio.AbstractEventLoop,
        stderr: list[IO[bytes]],
        reply_timeout: float,
    ) -> None:
        self.target = target
        self.loop = loop
        self.stderr = stderr
        self.reply_timeout = reply_timeout
        self.workers: list[WorkerClient | None] = [None] * len(stderr)

    def _run(self, step: Coroutine[object, object, T]) -> T:
        return self.loop.run_until_complete(step)

    def _worker(self, k: int) -> WorkerClient:
        worker = self.workers[k]
        assert worker is not None, f"worker {k} is not running"
        return worker

    def alive(self, k: int) -> bool:
        worker = self.workers[k]
        return worker is not None and worker.running

    def open(self, k: int, path: Path) -> WorkerReply:
        """Open worker ``k``'s handle on ``path``, starting the worker first if need be."""
        if not self.alive(k):
            start = WorkerClient.start(self.target, self.stderr[k], self.reply_timeout)
            self.workers[k] = self._run(start)
        return self.call(k, hello(str(path), self.target.options))

    def call(self, k: int, request: Request | KitRequest) -> WorkerReply:
        return self._run(self._worker(k).call(request))

    def send(self, k: int, request: Request | KitRequest) -> None:
        self._run(self._worker(k).send(request))

    def receive(self, k: int) -> WorkerReply:
        return self._run(self._worker(k).receive())

    def kill(self, k: int) -> None:
        """SIGKILL worker ``k``; its next `open` starts a new one."""
        self._run(self._worker(k).kill())
        self.workers[k] = None


@contextlib.contextmanager
def worker_pool(
    target: BackendTarget, size: int, reply_timeout: float = 30.0
) -> Iterator[WorkerPool]:
    """``size`` places for workers of ``target``; on leaving, every worker is ended."""
    loop = asyncio.new_event_loop()
    try:
        with contextlib.ExitStack() as files:
            # One stderr file per place, shared by the workers that take it in turn.
            stderr: list[IO[bytes]] = []
            for _ in range(size):
                file = files.enter_context(tempfile.TemporaryFile())
                stderr.append(file)
            pool = WorkerPool(target, loop, stderr, reply_timeout)
            try:
                yield pool
            finally:
                for worker in pool.workers:
                    if worker is not None:
                        loop.run_until_complete(worker.close())
    finally:
        loop.close()


class CommandedEnv(msgspec.Struct):
    """What a machine runs against: the workers, the declared capabilities, fresh stores
    and how a store an example is done with goes (`Harness.discard_store`)."""

    pool: WorkerPool
    capabilities: frozenset[Capability]
    new_store: Callable[[], Path]
    discard_store: Callable[[Path], None]


_worker = st.integers(min_value=0, max_value=WORKERS - 1)


_session = st.sampled_from(SESSIONS)


_expected = st.sampled_from(["none", "current", "stale"])


WriteKind = Literal["append", "truncate", "delete"]


_write_kind = st.sampled_from(["append", "truncate", "delete"])


_removal = st.sampled_from(["truncate", "delete"])


Write = Append | Truncate | Delete


Pairs = list[tuple[int, str]]


class CommandedMachine(RuleBasedStateMachine):
    """Drives worker processes and `SpecModel` with the same operations."""

    def __init__(self, env: CommandedEnv) -> None:
        super().__init__()
        self.env = env
        self.pool = env.pool
        self.path = env.new_store()
        self.model = SpecModel(env.capabilities)
        self.markers = itertools.count(1)
        self.paused: tuple[int, Write] | None = None
        self.busy: dict[int, tuple[str, list[Pairs]]] = {}
        self.fault_points: tuple[str, ...] = ()
        for k in range(WORKERS):
            self.fault_points = self.open_worker(k, "MP-001")
        self.removes = bool({Capability.TRUNCATE, Capability.DELETE} & env.capabilities)

    # -- plumbing ---------------------------------------------------------------------
    def open_worker(self, k: int, rule_id: str) -> tuple[str, ...]:
        """Open worker ``k``'s handle (restarting it if killed); ``rule_id`` is blamed if
        the backend refuses. A worker that hangs is KILL-001, as for every call."""
        try:
            reply = self.pool.open(k, self.path)
        except (WorkerHung, WorkerExited) as hung:
            raise RuleViolation(
                "KILL-001",
                f"worker {k} hung opening the store: {hung}; "
                "something a killed process held was not released",
            ) from None
        note(f"worker {k}: open -> {reply!r}")
        if not isinstance(reply, Opened):
            raise RuleViolation(rule_id, f"worker {k} could not open the store: {reply}")
        return reply.fault_points

    def call(self, k: int, request: Request | KitRequest) -> WorkerReply:
        try:
            reply = self.pool.call(k, request)
        except (WorkerHung, WorkerExited) as hung:
            raise _lost(
                k, request, hung, "something a killed process held was not released"
            ) from None
        note(f"worker {k}: {request!r} -> {reply!r}")
        return reply

    def command(
        self,
        op: WriteKind,
        session: str,
        expected: str,
        size: int = 0,
        to_seq: int = 0,
    ) -> Write:
        head = self.model.head(session)
        want = {"none": None, "current": head, "stale": head + 1}[expected]
        markers = [f"m{next(self.markers)}" for _ in range(size)]
        if op == "append":
            return Append(UNSENT, session, marker_prompts(markers), want)
        if op == "truncate":
            return Truncate(UNSENT, session, to_seq, want)
        return Delete(UNSENT, session)

    def declared(self, op: WriteKind) -> WriteKind:
        """``op`` if the backend declares its capability, else an append."""
        needs = {"truncate": Capability.TRUNCATE, "delete": Capability.DELETE}.get(op)
        return op if needs is None or needs in self.env.capabilities else "append"

    def apply(self, command: Write) -> int | None:
        """The model's answer to a write: the head after it, or None for a conflict."""
        try:
            if isinstance(command, Append):
                return self.model.append(command.session_id, command.events, command.expected_head)
            if isinstance(command, Truncate):
                return self.model.truncate(
                    command.session_id, command.to_seq, command.expected_head
                )
            self.model.delete(command.session_id)
            return 0
        except CheckpointConflictError:
            return None

    def check_write(self, k: int, command: Write, reply: WorkerReply, expected: int | None) -> None:
        """A write's reply against the model's answer; an error reply where another
        answer was due keeps the operation's crash as its other explanation."""
        kind = _kind(command)
        error = reply.error if isinstance(reply, Failed) else ""
        if isinstance(command, Delete):
            if not isinstance(reply, Succeeded):
                raise RuleViolation.or_crash(
                    "MP-001",
                    f"worker {k}: delete({command.session_id!r}) gave {reply}; "
                    "expected it to succeed",
                    kind,
                    error,
                )
            return
        call = f"worker {k}: {kind}({command.session_id!r}, expected_head={command.expected_head})"
        if expected is None:
            if isinstance(reply, Succeeded):
                self.blame_unchecked_head(k, command, call)
            if error != "CheckpointConflictError":
                raise RuleViolation.or_crash(
                    "MP-001", f"{call} gave {reply}; expected a conflict", kind, error
                )
        elif not (isinstance(reply, Succeeded) and reply.value == expected):
            if isinstance(reply, Failed) and error == "CheckpointConflictError":
                self.blame_refused_head(k, command, call, reply)
            raise RuleViolation.or_crash(
                "MP-001", f"{call} gave {reply}; expected head {expected}", kind, error
            )

    def blame_refused_head(
        self, k: int, command: Append | Truncate, call: str, refusal: Failed
    ) -> None:
        """After a write whose expected_head held was refused: if the same worker then
        reads that very head, the store's own answers disagree, with no other write in
        between (one write at a time here), so the refusal compared a head of the
        store's own making. No other process is needed to show that: the write's own
        rule (APPEND-002, TRUNC-003), not MP-001."""
        head = self.call(k, Head(UNSENT, command.session_id))
        if not (isinstance(head, Succeeded) and head.value == command.expected_head):
            return  # the worker sees another head: MP-001 names the refusal
        kind = _kind(command)
        raise RuleViolation(
            "TRUNC-003" if isinstance(command, Truncate) else "APPEND-002",
            f"{call} gave {refusal}, and worker {k} then read head {head.value}: "
            "the expectation held",
            call=call,
            expected="success",
            got=f"raised CheckpointConflictError: {refusal.message}",
            shape=f"{kind} refused an expectation that holds",
        )

    def blame_unchecked_head(self, k: int, command: Append | Truncate, call: str) -> None:
        """After a write whose expected_head was stale succeeded: if the same worker's next
        write of that kind succeeds with an expected head no log reaches, the backend never
        compares expected_head at all; if it succeeds again with the same stale expected
        head, just after the worker itself read another head, the backend compares it
        with a head of its own making. No other process is needed to show either, so the
        rule broken is the write's own (APPEND-002, TRUNC-003), not MP-001."""
        head = self.call(k, Head(UNSENT, command.session_id))
        if not isinstance(head, Succeeded) or not isinstance(head.value, int):
            return  # MP-001 names the stale write; this worker cannot say more
        stale = [NEVER_A_HEAD]
        if command.expected_head is not None and command.expected_head != head.value:
            stale.append(command.expected_head)
        for expected_head in stale:
            probe: Append | Truncate
            if isinstance(command, Append):
                markers = [f"m{next(self.markers)}"]
                probe = Append(UNSENT, command.session_id, marker_prompts(markers), expected_head)
                rule_id = "APPEND-002"
            else:
                # To the head: a truncate that is let through changes nothing.
                probe = Truncate(UNSENT, command.session_id, head.value, expected_head)
                rule_id = "TRUNC-003"
            alone = self.call(k, probe)
            if isinstance(alone, Succeeded):
                raise RuleViolation(
                    rule_id,
                    f"a {_kind(command)} with a stale expected_head succeeds: after {call} "
                    f"gave Succeeded, worker {k} read head {head.value}, and "
                    f"{_kind(probe)}({command.session_id!r}, expected_head={expected_head}) "
                    f"on it alone also gave {alone}; expected CheckpointConflictError",
                    call=f"worker {k}: {_kind(probe)}({command.session_id!r}, "
                    f"expected_head={expected_head})",
                    expected="raises CheckpointConflictError",
                    got=f"returned {alone.value!r}",
                    shape=f"{_kind(probe)} did not raise CheckpointConflictError (head conflict)",
                )

    def log(self, session: str) -> Pairs:
        return [(e.seq, getattr(e.event, "text", "")) for e in self.model.log(session)]

    # -- rules --------------------------------------------------------------------------
    @rule(k=_worker, session=_session, size=st.integers(1, 3), expected=_expected)
    @precondition(lambda self: self.paused is None)
    def append(self, k: int, session: str, size: int, expected: str) -> None:
        command = self.command("append", session, expected, size)
        self.check_write(k, command, self.call(k, command), self.apply(command))

    @rule(k=_worker, session=_session, cut=st.integers(0, 4), expected=_expected)
    @precondition(lambda self: self.paused is None and Capability.TRUNCATE in self.env.capabilities)
    def truncate(self, k: int, session: str, cut: int, expected: str) -> None:
        command = self.command("truncate", session, expected, to_seq=self.cut_to(session, cut))
        self.check_write(k, command, self.call(k, command), self.apply(command))

    def cut_to(self, session: str, cut: int) -> int:
        """Where a truncate cutting ``cut`` events ends; the largest cut empties the session."""
        return 0 if cut == 4 else max(self.model.head(session) - cut, 0)

    @rule(k=_worker, session=_session)
    @precondition(lambda self: self.paused is None and Capability.DELETE in self.env.capabilities)
    def delete(self, k: int, session: str) -> None:
        """Delete a session; the appends after it re-create it (DELETE-002)."""
        command = self.command("delete", session, "none")
        self.check_write(k, command, self.call(k, command), self.apply(command))

    @rule(k=_worker, session=_session)
    def read(self, k: int, session: str) -> None:
        """READ-003: a read sees the log before or after a write paused in another process.

        While a write is paused the read is only started: a backend may make readers
        wait for the writer's lock. Its answer is collected when the pause ends.
        """
        if k in self.busy or (self.paused is not None and self.paused[0] == k):
            return
        allowed = [self.log(session)]
        if self.paused is not None:
            saved = self.model
            self.model = saved.copy()
            self.apply(self.paused[1])
            allowed.append(self.log(session))
            self.model = saved
            self.pool.send(k, Read(UNSENT, session))
            self.busy[k] = (session, allowed)
            return
        self.check_read(k, session, self.call(k, Read(UNSENT, session)), allowed)

    def check_read(self, k: int, session: str, reply: WorkerReply, allowed: list[Pairs]) -> None:
        got = _pairs(reply)
        expect(
            got in allowed,
            "READ-003",
            f"worker {k} read {session!r} as {got}; the log is {' or '.join(map(str, allowed))}",
        )

    def drain(self) -> None:
        """Collect the reads started during a pause that has just ended."""
        for k, (session, allowed) in sorted(self.busy.items()):
            self.check_read(k, session, self.call_receive(k, Read(UNSENT, session)), allowed)
        self.busy.clear()

    @rule(
        k=_worker,
        session=_session,
        size=st.integers(1, 4),
        point=st.integers(0, 20),
        arrival=st.integers(1, 3),
    )
    @precondition(lambda self: self.paused is None and bool(self.fault_points))
    def pause_inside_append(
        self, k: int, session: str, size: int, point: int, arrival: int
    ) -> None:
        """An append of ``size`` events, with the current head as expected_head."""
        self.pause_inside("append", k, session, size, point, arrival)

    @rule(
        k=_worker,
        session=_session,
        op=_removal,
        cut=st.integers(1, 4),
        point=st.integers(0, 20),
        arrival=st.integers(1, 3),
    )
    @precondition(lambda self: self.paused is None and bool(self.fault_points) and self.removes)
    def pause_inside_removal(
        self, k: int, session: str, op: WriteKind, cut: int, point: int, arrival: int
    ) -> None:
        """A truncate (cutting ``cut`` events, 4 meaning all) or delete, as declared."""
        if op == "delete" and Capability.DELETE not in self.env.capabilities:
            op = "truncate"
        elif op == "truncate" and Capability.TRUNCATE not in self.env.capabilities:
            op = "delete"
        self.pause_inside(op, k, session, cut, point, arrival)

    def pause_inside(
        self, op: WriteKind, k: int, session: str, size: int, point: int, arrival: int
    ) -> None:
        """Pause a write at one of the backend's fault points: one of the write's own
        kind if the backend names such points (``truncate.locked``), each reached
        once per write; else any point, on its first, second or third arrival."""
        own = [p for p in self.fault_points if p.startswith(f"{op}.")]
        candidates = own or self.fault_points
        if own:
            arrival = 1
        # A point the write never reaches (that often) just lets it finish.
        command = self.command(op, session, "current", size, to_seq=self.cut_to(session, size))
        self.call(k, PauseAt(UNSENT, candidates[point % len(candidates)], arrival))
        reply = self.call(k, command)
        if isinstance(reply, Paused):
            self.paused = (k, command)
        else:
            self.check_write(k, command, reply, self.apply(command))

    @rule()
    @precondition(lambda self: self.paused is not None)
    def resume(self) -> None:
        assert self.paused is not None
        k, command = self.paused
        self.paused = None
        self.pool.send(k, Resume(UNSENT))
        reply = self.call_receive(k, command)
        self.check_write(k, command, reply, self.apply(command))
        self.drain()

    def call_receive(self, k: int, command: Request | KitRequest) -> WorkerReply:
        """The answer to ``command``, sent to worker ``k`` before a pause (the paused
        write, a read begun during it); a worker that ended on an error of the backend
        keeps that operation's crash as the other explanation, as `call` does."""
        try:
            return self.pool.receive(k)
        except (WorkerHung, WorkerExited) as hung:
            raise _lost(k, command, hung, "its pause had ended") from None

    @rule(k=_worker, session=_session, op=_write_kind, size=st.integers(1, 3))
    @precondition(lambda self: self.paused is None and not self.fault_points)
    def kill_during_write(self, k: int, session: str, op: WriteKind, size: int) -> None:
        """Without fault points: send a write (as declared) and kill the worker at once."""
        op = self.declared(op)
        command = self.command(op, session, "none", size, to_seq=self.cut_to(session, size))
        self.pool.send(k, command)
        self.paused = (k, command)
        self.kill(k)

    @rule()
    @precondition(lambda self: self.paused is not None)
    def kill_paused(self) -> None:
        """KILL-001: kill the paused writer, as likely as resuming it (`kill` picks any worker)."""
        assert self.paused is not None
        self.kill(self.paused[0])

    @rule(k=_worker)
    def kill(self, k: int) -> None:
        """KILL-001: SIGKILL a worker (paused or idle), restart it, and settle its cut write."""
        self.pool.kill(k)
        self.busy.pop(k, None)
        cut = self.paused if self.paused is not None and self.paused[0] == k else None
        if cut is not None:
            self.paused = None
            session = cut[1].session_id
            # Readers waiting on the dead writer must now get their answers (KILL-001).
            self.drain()
            observer = (k + 1) % WORKERS
            got = _pairs(self.call(observer, Read(UNSENT, session)))
            before = self.log(session)
            saved = self.model.copy()
            self.apply(cut[1])
            after = self.log(session)
            if got == before:
                self.model = saved
            op = _kind(cut[1])
            expect(
                got in (before, after),
                "KILL-001",
                f"after killing worker {k} mid-{op}, {session!r} reads {got}; it must be {before} or {after}",
            )
        self.open_worker(k, "KILL-001")

    @invariant()
    def logs_match(self) -> None:
        if self.paused is not None:
            return
        for session in SESSIONS:
            got = _pairs(self.call(0, Read(UNSENT, session)))
            expect(
                got == self.log(session),
                "MP-001",
                f"worker 0 reads {session!r} as {got}; the model has {self.log(session)}",
            )

    def teardown(self) -> None:
        if self.paused is not None:
            self.kill(self.paused[0])
        for k in range(WORKERS):
            if self.pool.alive(k):
                self.call(k, Close(UNSENT))
        self.env.discard_store(self.path)


def _kind(command: Write) -> WriteKind:
    if isinstance(command, Append):
        return "append"
    return "truncate" if isinstance(command, Truncate) else "delete"


def _pairs(reply: WorkerReply) -> Pairs | WorkerReply:
    """A read's (seq, marker) pairs; the reply itself when the read failed (shown in messages)."""
    if isinstance(reply, Succeeded) and isinstance(reply.value, list):
        return [(seq, marker) for seq, marker in reply.value]
    return reply


def _lost(
    k: int, request: Request | KitRequest, lost: WorkerHung | WorkerExited, why: str
) -> RuleViolation:
    """KILL-001 for worker ``k``, which never answered ``request``: it ended on an error of
    the backend (that operation's crash kept as the other explanation), or it hung
    (``why``: what should have let it go on)."""
    if backend_error(lost):
        return RuleViolation.or_crash(
            "KILL-001",
            f"worker {k} ended on {request!r}: {lost}",
            _operation_of(request),
            backend_error(lost),
        )
    return RuleViolation("KILL-001", f"worker {k} hung on {request!r}: {lost}; {why}")


def _operation_of(request: Request | KitRequest) -> str:
    """The contract operation a worker request makes ("delete" for `Delete`): its tag."""
    return str(request.__struct_config__.tag)
