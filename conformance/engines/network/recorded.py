"""Workloads recorded on handles in this process, while the kit breaks their server, and their verdict.

The server checks (NET-001, DUR-004) run the stress check's workload
(`checkpointspec.conformance.engines.processes.stress.run_workload`: appends
with and without ``expected_head``, reads, heads, on a few shared sessions,
each call recorded before and after in a history file) as tasks of this
process, one per *writer*, on handles whose connections the kit cuts, stalls
or moves to another server meanwhile. `Writers` runs them and says how far
they got; `judge` reads what the store holds afterwards, through a handle the
kit did not break, and decides:

1. every call ended in success, a contract error (`CheckpointError`) or
   `ConnectionLostError`; anything else (a driver's exception) is a finding,
   but a breach of the stdio protocol (`StdioProtocolError`) ends the writers and
   is raised, its own finding (PROTO-001);
2. the final log of every session has seqs 1..head, and ``check_integrity``
   reports the store ok;
3. every acknowledged append is in it, whole, once; a refused append (any
   contract error but `ConnectionLostError` and a conflict, which the history
   checker judges) is not;
4. the history checker (`checkpointspec.conformance.engines.history`) explains
   the whole history, unknown outcomes (`ConnectionLostError`) either way:
   no event twice, no fork, every read a slice of the one chain.

Every finding is reported under the rule the check verifies, its own rule
named in the message when the history checker found it; with ``caused`` (the
calls the kit's fault touched), a history whose cause (the verdict's first
anomaly, `checkpointspec.conformance.engines.history.causes`) none of the fault's
calls took part in is no evidence about that fault: `judge` hands it back as one
violation of the cause's rule (`Judged.apart`), what followed from it listed in
it, as a run without the fault would show it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from ....backends.stdio.wire import StdioProtocolError
from ....spec import Checkpointer, CheckpointError, ConnectionLostError
from ..contract.outcomes import read_all
from ..contract.violations import RuleViolation
from ..history import Operation, Raised, Returned, Unknown, check_history, describe
from ..processes.messages import Stress
from ..processes.stress import load_history, run_workload

__all__ = ["SESSIONS", "Judged", "Writers", "cut_by", "judge", "violation"]

SESSIONS: Final = ("s0", "s1", "s2")
"""The sessions the writers share."""


class Writers:
    """``len(handles)`` writer tasks running the stress workload, one per handle given.

    ``calls`` bounds each writer's calls and ``seconds`` its time. Use as an async
    context manager: the writers start on entry; `progress` says how many calls
    they have made; `finished` waits (with a deadline) until they are done.
    """

    def __init__(
        self, handles: Sequence[Checkpointer], root: Path, calls: int, seconds: float, seed: int
    ) -> None:
        self._handles = handles
        self._root = root
        self._calls = calls
        self._seconds = seconds
        self._seed = seed
        self._made = [0] * len(handles)
        self._tasks: list[asyncio.Task[None]] = []
        self._moved = asyncio.Event()

    def _history(self, number: int) -> Path:
        return self._root / f"writer-{number}.history"

    async def __aenter__(self) -> Writers:
        for number, cp in enumerate(self._handles):
            self._tasks.append(asyncio.create_task(self._write(number, cp)))
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _write(self, number: int, cp: Checkpointer) -> None:
        command = Stress(
            id=number,
            number=number,
            history=str(self._history(number)),
            calls=self._calls,
            seconds=self._seconds,
            sessions=SESSIONS,
            seed=self._seed,
        )

        def progress(made: int) -> None:
            self._made[number] = made
            self._moved.set()

        with self._history(number).open("wb", buffering=0) as record:
            await run_workload(cp, command, record, progress)

    @property
    def progress(self) -> int:
        """Calls the writers have made between them."""
        return sum(self._made)

    async def until(self, calls: int, seconds: float) -> bool:
        """Wait until the writers have made ``calls`` calls between them, or ``seconds``
        passed, or they are done; True when the calls were made."""
        deadline = time.monotonic() + seconds
        while self.progress < calls and not all(task.done() for task in self._tasks):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._moved.clear()
            try:
                await asyncio.wait_for(self._moved.wait(), left)
            except TimeoutError:
                return False
        return self.progress >= calls

    async def finished(self, seconds: float) -> list[str]:
        """Wait for every writer to end, for at most ``seconds``; a writer still running
        then is cancelled (its last call an unknown outcome). Returns what went wrong:
        a writer that raised, or did not end in time; raises the `StdioProtocolError`
        a writer met (`run_workload` records no breach as an outcome)."""
        done, pending = await asyncio.wait(self._tasks, timeout=seconds)
        for task in done:
            if isinstance(breach := task.exception(), StdioProtocolError):
                raise breach
        problems = [
            f"writer {self._tasks.index(task)} raised {task.exception()!r}"
            for task in done
            if task.exception() is not None
        ]
        problems += [
            f"writer {self._tasks.index(task)} had not ended after {seconds:.0f}s"
            for task in pending
        ]
        return problems

    def operations(self) -> list[Operation]:
        """Every recorded call of every writer (an unfinished one as an unknown outcome)."""
        return [op for n in range(len(self._handles)) for op in load_history(self._history(n), n)]


def _contract_errors() -> frozenset[str]:
    names: set[str] = set()
    pending: list[type[BaseException]] = [CheckpointError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending += cls.__subclasses__()
    return frozenset(names)


class Judged(msgspec.Struct, frozen=True):
    """`judge`'s verdict: the ``findings`` against the rule checked (one sentence each,
    then its evidence; empty when nothing is wrong), and ``apart``: the history's
    anomalies when no call the kit's fault touched takes part in their cause, as one
    violation of the cause's rule."""

    findings: list[str]
    apart: list[RuleViolation]


def cut_by(cuts: Sequence[int]) -> Callable[[Operation], bool]:
    """Whether an operation was touched by one of ``cuts`` (``time.monotonic_ns`` of each
    connection cut): it ended in `ConnectionLostError` or without an outcome, or a cut
    fell while it was in flight (a driver may send it again on a new connection)."""

    def touched(op: Operation) -> bool:
        outcome = op.outcome
        if isinstance(outcome, Unknown) or (
            isinstance(outcome, Raised) and outcome.error == ConnectionLostError.__name__
        ):
            return True
        end = op.completed if op.completed is not None else max(cuts, default=0)
        return any(op.invoked <= at <= end for at in cuts)

    return touched


def _every(_op: Operation) -> bool:
    return True


async def judge(
    cp: Checkpointer,
    operations: list[Operation],
    caused: Callable[[Operation], bool] = _every,
) -> Judged:
    """What the store behind ``cp`` (a handle the kit did not break) and ``operations``
    show against the rule checked. The history's anomalies are a finding when one of
    the calls of their cause (the first) is ``caused`` by the kit's fault (by default
    every call is), else they are handed back apart, under the cause's rule."""
    findings: list[str] = []
    contract = _contract_errors()
    strays = [
        op
        for op in operations
        if isinstance(op.outcome, Raised) and op.outcome.error not in contract
    ]
    if strays:
        findings.append(
            f"{len(strays)} calls ended in an exception that is neither a contract error nor "
            f"{ConnectionLostError.__name__}: "
            + "; ".join(f"{describe(op)}: {_message(op)}" for op in strays[:3])
        )
    finals: dict[str, list[str]] = {}
    for session in SESSIONS:
        stored = await read_all(cp, session)
        seqs = [event.seq for event in stored]
        if seqs != list(range(1, len(seqs) + 1)):
            findings.append(f"session {session!r} holds seqs {seqs[:12]}, not 1..{len(seqs)}")
        finals[session] = [getattr(event.event, "text", "") for event in stored]
    integrity = await cp.check_integrity()
    if not integrity.ok:
        findings.append(f"check_integrity reports the store damaged: {integrity.detail}")
    findings += _lost_or_refused(operations, finals, contract)
    # The writers are tasks of this process: a lost update between them is APPEND-004.
    verdict = check_history(operations, finals, across_processes=False)
    apart: list[RuleViolation] = []
    if verdict.anomalies:
        cause = verdict.anomalies[0]
        if any(caused(op) for op in cause.operations):
            findings.append(f"the history checker found: {verdict.report()}")
        else:
            apart.append(verdict.violation("the history checker found it"))
    return Judged(findings, apart)


def _message(op: Operation) -> str:
    assert isinstance(op.outcome, Raised)
    return op.outcome.message[:200]


def _lost_or_refused(
    operations: list[Operation], finals: dict[str, list[str]], contract: frozenset[str]
) -> list[str]:
    """Acknowledged appends missing from the final logs, and refused ones present: those
    that raised a contract error that promises nothing was written (every one but
    `ConnectionLostError`; a conflict is the history checker's)."""
    present = {marker for log in finals.values() for marker in log}
    lost: list[str] = []
    refused: list[str] = []
    for op in operations:
        if op.kind != "append" or not op.markers:
            continue
        outcome = op.outcome
        if isinstance(outcome, Returned) and any(m not in present for m in op.markers):
            lost.append(describe(op))
        elif (
            isinstance(outcome, Raised)
            and outcome.error in contract
            and outcome.error != ConnectionLostError.__name__
            and any(m in present for m in op.markers)
        ):
            refused.append(f"{describe(op)}")
    findings = []
    if lost:
        findings.append(
            f"{len(lost)} acknowledged appends are missing from the store: " + "; ".join(lost[:6])
        )
    if refused:
        findings.append(
            f"{len(refused)} appends refused with a contract error took effect: "
            + "; ".join(refused[:6])
        )
    return findings


def violation(rule_id: str, situation: str, findings: list[str], context: str) -> RuleViolation:
    """The violation of ``rule_id`` for ``findings`` (`judge`'s): the first one after
    ``situation`` as the one sentence that says what is wrong, the others below it, then
    ``context`` (what the kit did) in parentheses."""
    rest = "".join(f"\n- {finding}" for finding in findings[1:])
    return RuleViolation(rule_id, f"{situation}, {findings[0]}{rest}\n({context})")
