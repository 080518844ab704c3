"""Checks of the KILL rules: the commanded-workers machine pauses and kills writers inside their operations.

The commanded-workers check: a state machine choosing how processes interleave.

Three worker processes hold their own handles on one store. The machine runs
operations on any of them, pauses one inside a write at a fault point the backend
names (holding its locks and open transaction), lets the others read meanwhile,
then resumes it or kills it with SIGKILL and restarts it. Every result is
compared with `SpecModel`. After a kill the write that was cut short must be
wholly there or wholly absent (KILL-001) and must block no one; reads during a
paused write see the log before or after it (READ-003). Backends without fault
points get the same machine with kills at unplanned moments.
"""

from __future__ import annotations

import itertools
import shutil
from typing import ClassVar

from hypothesis import HealthCheck, Phase, note, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ...spec import Capability, CheckpointConflictError, SpecModel, UserPrompt
from ..engines.commanded import Command, Reply, WorkerClient, WorkerHung
from ..engines.violations import RuleViolation, expect
from .base import check
from .harness import Harness

__all__ = ["CHECKS"]

WORKERS = 3


SESSIONS = ("s", "t")


_worker = st.integers(min_value=0, max_value=WORKERS - 1)


_session = st.sampled_from(SESSIONS)


_expected = st.sampled_from(["none", "current", "stale"])


class CommandedMachine(RuleBasedStateMachine):
    """Drives worker processes and `SpecModel` with the same operations."""

    harness: ClassVar[Harness]
    pool: ClassVar[list[WorkerClient | None]]
    stores: ClassVar[itertools.count[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.path = self.harness.new_store()
        self.model = SpecModel(self.harness.capabilities)
        self.markers = itertools.count(1)
        self.paused: tuple[int, Command] | None = None
        self.busy: dict[int, tuple[str, list[list[tuple[int, str]]]]] = {}
        self.fault_points: tuple[str, ...] = ()
        for k in range(WORKERS):
            self.fault_points = self.open_worker(k)

    # -- plumbing ---------------------------------------------------------------------
    def open_worker(self, k: int) -> tuple[str, ...]:
        worker = self.pool[k]
        if worker is None or worker.process.poll() is not None:
            worker = self.pool[k] = WorkerClient(self.harness.backend.target, self.harness.options)
        reply = self.call(k, Command("open", path=str(self.path)))
        return reply.fault_points

    def call(self, k: int, command: Command) -> Reply:
        worker = self.pool[k]
        assert worker is not None
        try:
            reply = worker.call(command)
        except WorkerHung as hung:
            raise RuleViolation(
                "KILL-001",
                f"worker {k} hung on {command.op}({command.session!r}): {hung}; "
                "something a killed process held was not released",
            ) from None
        note(
            f"worker {k}: {command.op}({command.session!r}) -> {reply.status} {reply.value if reply.value is not None else reply.error}"
        )
        return reply

    def command(
        self, op: str, session: str, expected: str, size: int = 0, to_seq: int = 0
    ) -> Command:
        head = self.model.head(session)
        want = {"none": None, "current": head, "stale": head + 1}[expected]
        markers = tuple(f"m{next(self.markers)}" for _ in range(size))
        return Command(op, session=session, markers=markers, expected_head=want, to_seq=to_seq)  # type: ignore[arg-type]

    def apply(self, command: Command) -> int | None:
        """The model's answer to a write: its new head, or None for a conflict."""
        events = [UserPrompt(m) for m in command.markers]
        try:
            if command.op == "append":
                return self.model.append(command.session, events, command.expected_head)
            return self.model.truncate(command.session, command.to_seq, command.expected_head)
        except CheckpointConflictError:
            return None

    def check_write(self, k: int, command: Command, reply: Reply, expected: int | None) -> None:
        call = (
            f"worker {k}: {command.op}({command.session!r}, expected_head={command.expected_head})"
        )
        if expected is None:
            expect(
                reply.error == "CheckpointConflictError",
                "MP-001",
                f"{call} gave {reply}; expected a conflict",
            )
        else:
            expect(
                reply.status == "ok" and reply.value == expected,
                "MP-001",
                f"{call} gave {reply}; expected head {expected}",
            )

    def log(self, session: str) -> list[tuple[int, str]]:
        return [(e.seq, getattr(e.event, "text", "")) for e in self.model.log(session)]

    # -- rules --------------------------------------------------------------------------
    @rule(k=_worker, session=_session, size=st.integers(1, 3), expected=_expected)
    @precondition(lambda self: self.paused is None)
    def append(self, k: int, session: str, size: int, expected: str) -> None:
        command = self.command("append", session, expected, size)
        self.check_write(k, command, self.call(k, command), self.apply(command))

    @rule(k=_worker, session=_session, cut=st.integers(0, 3), expected=_expected)
    @precondition(
        lambda self: self.paused is None and Capability.TRUNCATE in self.harness.capabilities
    )
    def truncate(self, k: int, session: str, cut: int, expected: str) -> None:
        to_seq = max(self.model.head(session) - cut, 0)
        command = self.command("truncate", session, expected, to_seq=to_seq)
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
            worker = self.pool[k]
            assert worker is not None
            worker.send(Command("read", session=session))
            self.busy[k] = (session, allowed)
            return
        self.check_read(k, session, self.call(k, Command("read", session=session)), allowed)

    def check_read(
        self, k: int, session: str, reply: Reply, allowed: list[list[tuple[int, str]]]
    ) -> None:
        got = _pairs(reply)
        expect(
            got in allowed,
            "READ-003",
            f"worker {k} read {session!r} as {got}; the log is {' or '.join(map(str, allowed))}",
        )

    def drain(self) -> None:
        """Collect the reads started during a pause that has just ended."""
        for k, (session, allowed) in sorted(self.busy.items()):
            self.check_read(k, session, self.call_receive(k), allowed)
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
        # Any point may be reached by an append; one it never reaches just lets it finish.
        candidates = self.fault_points
        command = self.command("append", session, "current", size)
        command = Command(
            "append",
            session=session,
            markers=command.markers,
            expected_head=command.expected_head,
            pause_at=candidates[point % len(candidates)],
            pause_on=arrival,
        )
        reply = self.call(k, command)
        if reply.status == "paused":
            self.paused = (k, command)
        else:
            self.check_write(k, command, reply, self.apply(command))

    @rule()
    @precondition(lambda self: self.paused is not None)
    def resume(self) -> None:
        assert self.paused is not None
        k, command = self.paused
        self.paused = None
        worker = self.pool[k]
        assert worker is not None
        worker.send(Command("resume"))
        reply = self.call_receive(k)
        self.check_write(k, command, reply, self.apply(command))
        self.drain()

    def call_receive(self, k: int) -> Reply:
        worker = self.pool[k]
        assert worker is not None
        try:
            return worker.receive()
        except WorkerHung as hung:
            raise RuleViolation(
                "KILL-001", f"worker {k} hung finishing its write: {hung}"
            ) from None

    @rule(k=_worker, session=_session, size=st.integers(1, 3))
    @precondition(lambda self: self.paused is None and not self.fault_points)
    def kill_during_append(self, k: int, session: str, size: int) -> None:
        """Without fault points: send a write and kill the worker at once."""
        command = self.command("append", session, "none", size)
        worker = self.pool[k]
        assert worker is not None
        worker.send(command)
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
        worker = self.pool[k]
        assert worker is not None
        worker.kill()
        self.pool[k] = None
        self.busy.pop(k, None)
        cut = self.paused if self.paused is not None and self.paused[0] == k else None
        if cut is not None:
            self.paused = None
            session = cut[1].session
            # Readers waiting on the dead writer must now get their answers (KILL-001).
            self.drain()
            observer = (k + 1) % WORKERS
            reply = self.call(observer, Command("read", session=session))
            got = _pairs(reply)
            before = self.log(session)
            saved = self.model.copy()
            self.apply(cut[1])
            after = self.log(session)
            if got == before:
                self.model = saved
            expect(
                got in (before, after),
                "KILL-001",
                f"after killing worker {k} mid-{cut[1].op}, {session!r} reads {got}; it must be {before} or {after}",
            )
        self.open_worker(k)

    @invariant()
    def logs_match(self) -> None:
        if self.paused is not None:
            return
        for session in SESSIONS:
            reply = self.call(0, Command("read", session=session))
            got = _pairs(reply)
            expect(
                got == self.log(session),
                "MP-001",
                f"worker 0 reads {session!r} as {got}; the model has {self.log(session)}",
            )

    def teardown(self) -> None:
        if self.paused is not None:
            self.kill(self.paused[0])
        for k in range(WORKERS):
            worker = self.pool[k]
            if worker is not None and worker.process.poll() is None:
                self.call(k, Command("close"))
        shutil.rmtree(self.path, ignore_errors=True)


def _pairs(reply: Reply) -> list[tuple[int, str]] | Reply:
    """A read's (seq, marker) pairs; the reply itself when the read failed (shown in messages)."""
    if reply.status == "ok" and isinstance(reply.value, list):
        return [(seq, marker) for seq, marker in reply.value]
    return reply


@check("KILL-001", "MP-001", "READ-003", "APPEND-003")
def commanded_workers(h: Harness) -> None:
    """KILL-001: processes paused inside writes and killed there leave whole writes and free locks."""
    pool: list[WorkerClient | None] = [None] * WORKERS
    machine = type("CommandedMachine", (CommandedMachine,), {"harness": h, "pool": pool})
    try:
        run_state_machine_as_test(
            seed(h.seed)(machine),
            settings=settings(
                max_examples=h.profile.commanded_examples,
                stateful_step_count=h.profile.commanded_steps,
                deadline=None,
                database=None,
                print_blob=True,
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
                # No shrinking: every shrink attempt replays processes being
                # killed and restarted, which took minutes; a failing run of at
                # most commanded_steps steps is reported as it was found.
                phases=(Phase.explicit, Phase.reuse, Phase.generate),
            ),
        )
    finally:
        for worker in pool:
            if worker is not None:
                worker.close()


CHECKS = (commanded_workers,)
