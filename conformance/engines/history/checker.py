"""Checking a recorded concurrent history of checkpointer calls against the contract.

Everything here is pure: no I/O, no clock, no backend. The stress check
(`checkpointspec.conformance.engines.processes.stress`) records one `Operation` per call made by
its worker processes — what was asked, when it was invoked and when it
returned (on one monotonic clock shared by the processes), and the outcome —
then reads every session in full once all processes are done. `check_history`
decides whether some sequential execution of the contract explains all of it.

How it decides (Elle-style: the order of versions is recovered, not searched)
------------------------------------------------------------------------------
Every appended event carries a marker no other event has, so the final log,
every read and every acknowledged head say exactly where each batch went. Per
session, in near linear time:

1. *Shapes.* The final log and every read hold each marker at most once, only
   markers appended to this session, each batch whole and in order; a read's
   seqs run on from ``since_seq``; an append that conflicted wrote nothing.
2. *Epochs.* Successful truncates and deletes cut the session's history into
   epochs. Each other call must fall between two of them in real time; when one
   overlaps a removal (as in the stress mix, which truncates and deletes every
   session while other processes append to it) the session goes to the search
   below, which also decides re-creation: appends racing the delete that may
   have come before or after it.
3. *Chain.* In each epoch the successful appends form one chain: no two
   succeeded with the same ``expected_head`` (lost update), no two were
   acknowledged at overlapping seqs (forked log), each acknowledged batch sits
   exactly where its returned head says. Every read is a slice of that chain,
   every head and every conflict's ``actual`` a head the chain really had.
   Appends with no response are resolved by the final read: present means they
   took effect, absent that they did not.
4. *Real time.* Each append (and truncate, delete) must take effect at one
   instant inside its call, in chain order, and every read, head and conflict
   must see the chain at one instant inside its own call. With the order fixed
   by step 3, that is a chain of interval constraints which one greedy pass
   (earliest possible instant for each step) settles exactly.

Whatever breaks is reported as an `Anomaly`: the rule it proves broken, one
plain sentence, and the few operations that contradict each other, the first
anomalous call first. An anomaly is named by its cause, and the verdict lists
the causes first (`causes`: a lost update before the wrong head it made an
append return, before the reads that saw the fork); a stage that finds only
lost updates lets the later ones run, so what follows from them is listed too.
`HistoryVerdict.violation` makes the finding: the first anomaly's rule, the
rest as what followed from it. Sessions the
fast path cannot decide go to `checkpointspec.conformance.engines.history.linearize`, a bounded
linearizability search, which may answer "undecided" instead of running on.
Where the search finds no order, the anomaly is the call at fault, not the one it
happened to stop at: a wrong head or read may fit a wrong order of the writes in
flight, and the search then stops at a later answer the right order explains
(`first_unexplained_observer`).

The records are defined in `records` and re-exported here; the fast
path lives in `chain` (stages 1-3) and `realtime` (stage 4), on the
ledger of every marker (`ledger`) this module builds from the history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import msgspec

from ....spec import RULES_BY_ID, CheckpointConflictError
from ..contract.ledger import Fate, Ledger, markers_text
from ..contract.violations import RuleViolation
from .causes import ordered
from .chain import AnomaliesFound, ChainUndecided, SessionChain
from .linearize import LogCall, first_unexplained_observer, search_log
from .records import (
    Anomaly,
    Conflicted,
    Operation,
    OperationOutcome,
    OpKind,
    Raised,
    Returned,
    Unknown,
    answer_text,
    call_text,
    describe,
)

__all__ = [
    "Anomaly",
    "Conflicted",
    "HistoryVerdict",
    "OpKind",
    "Operation",
    "OperationOutcome",
    "Raised",
    "Returned",
    "Unknown",
    "check_history",
    "describe",
]


class HistoryVerdict(msgspec.Struct, frozen=True):
    """The result of `check_history`.

    ``anomalies`` is empty when the history is explained by the contract, as far
    as it was decided; else the first is the cause the finding names and the others
    follow it (`causes.ordered`). ``undecided`` names the sessions the bounded
    search gave up on; ``decided_by`` says for each session whether the ``"chain"``
    (fast path) or the ``"search"`` decided it; ``resolved`` says what became of
    every call with an unknown outcome. ``origin`` is the earliest invocation
    time, the zero of the times printed by `report`.
    """

    operations: int
    anomalies: tuple[Anomaly, ...] = ()
    undecided: tuple[str, ...] = ()
    decided_by: dict[str, str] = {}
    resolved: tuple[str, ...] = ()
    origin: int = 0

    @property
    def ok(self) -> bool:
        """No anomaly was found."""
        return not self.anomalies

    def report(self) -> str:
        """The cause, then what followed from it, then every undecided session, in plain words."""
        parts = [a.explain(self.origin, symptom=n > 0) for n, a in enumerate(self.anomalies)]
        parts += [f"undecided: {u}" for u in self.undecided]
        return "\n".join(parts) if parts else f"{self.operations} operations: no anomaly"

    def violation(self, situation: str) -> RuleViolation:
        """The finding of a history that is not ok: the first anomaly's rule and ``also``,
        its first call with what the contract allows there and what came back, then
        ``situation`` (what was recorded) and the report."""
        if not self.anomalies:
            raise ValueError("an explained history is no violation")
        cause = self.anomalies[0]
        first = cause.operations[0] if cause.operations else None
        followed = len(self.anomalies) - 1
        then = f"; {followed} more anomalies follow it" if followed else ""
        return RuleViolation(
            cause.rule_id,
            f"session {cause.session!r}: {cause.summary}\n{situation}{then} "
            f"(times in ms from the first call):\n{self.report()}",
            cause.also,
            call=call_text(first) if first is not None else "",
            expected=cause.expected or RULES_BY_ID[cause.rule_id].statement,
            got=answer_text(first) if first is not None else "",
        )


# -- the fallback ---------------------------------------------------------------------------


def _as_call(op: Operation) -> LogCall | None:
    outcome = op.outcome
    if isinstance(outcome, Returned):
        status: Literal["ok", "conflict", "indeterminate"] = "ok"
        value = outcome.value
    elif isinstance(outcome, Conflicted):
        status, value = "conflict", outcome.actual
    else:
        if op.kind in ("read", "head"):
            return None  # a read that never answered says nothing
        status, value = "indeterminate", 0
    events = tuple(m for _, m in outcome.events) if isinstance(outcome, Returned) else ()
    return LogCall(
        op.kind,
        op.invoked,
        op.completed,
        status,
        op.markers,
        op.expected_head,
        op.since_seq,
        op.to_seq,
        value,
        events,
    )


def _search(session: SessionChain, reason: str, max_steps: int) -> tuple[list[Anomaly], str | None]:
    pairs = [(op, call) for op in session.ops if (call := _as_call(op)) is not None]
    ops = [op for op, _ in pairs]
    calls = [call for _, call in pairs]
    result = search_log(calls, session.final, max_steps=max_steps)
    if result.verdict == "linearizable":
        # With truncates in the session, absence from the final log no longer
        # proves a call did not take effect, so say only what the log shows.
        present = set(session.final)
        for op in session.ops:
            if not isinstance(op.outcome, Unknown):
                continue
            if op.kind != "append":
                effect = "the search found an order, with or without it"
            elif op.markers and op.markers[0] in present:
                effect = "took effect (in the final log)"
            else:
                effect = "not in the final log"
            session.resolved.append(f"{describe(op)}: {effect}")
        return [], None
    if result.verdict == "undecided":
        return [], (
            f"session {session.name!r}: the search stopped after {result.steps} steps ({reason})"
        )
    # The search fails where no order is left, which a wrong answer to an earlier
    # read or head may have led it to: name the first call no order explains.
    result = first_unexplained_observer(calls, session.final, max_steps=max_steps) or result
    assert result.failed_at is not None
    logs = "; ".join(
        f"head {length}" + (f" ending {markers_text(tail)}" if tail else "")
        for length, tail in result.candidates
    )
    if result.failed_at == len(ops):
        summary = (
            f"no order of the calls ends with the final log ({len(session.final)} events); "
            f"before it the log could only be: {logs}"
        )
        culprits: list[Operation] = [ops[i] for i in result.in_flight]
        rule_id = "MP-001"
    else:
        failed = ops[result.failed_at]
        summary = (
            f"no order of the calls in flight explains what {describe(failed)} returned; "
            f"just before, the log could only be: {logs}"
        )
        culprits = [failed, *(ops[i] for i in result.in_flight if i < len(ops))]
        match failed.kind:
            case "read":
                rule_id = "READ-003"
            case "head":
                rule_id = "HEAD-001"
            case "truncate":
                # Up to three candidates are kept, shortest first: fewer are all of them.
                whole = len(result.candidates) < 3
                heads = [length for length, _ in result.candidates] if whole else []
                rule_id = _truncate_rule(calls, result.failed_at, session, max_steps, heads)
            case "delete":
                rule_id = "DELETE-001"
            case _:
                rule_id = _append_rule(calls, result.failed_at, session, max_steps)
        if failed.kind == "append" and rule_id == "TRUNC-003":
            summary += (
                "; with the truncates that succeeded taken as unconditional an order explains "
                "it: a truncate accepted a stale expected_head"
            )
    summary += f" (decided by the linearizability search: {reason})"
    return [Anomaly(rule_id, session.name, summary, tuple(culprits))], None


def _append_rule(
    calls: list[LogCall], failed_at: int, session: SessionChain, max_steps: int
) -> str:
    """The rule an append no order explains breaks: APPEND-002 for a conflict, MP-001
    for an acknowledged append, except for a conflict whose actual head is where a
    truncate that succeeded cut the log, and which the search gets past once those
    truncates are unconditional: that truncate accepted a stale ``expected_head`` and
    the conflict reports the log it left (TRUNC-003). An acknowledged append is never
    put down to a truncate: a truncate made unconditional could also explain a lost
    update's appends, which are the defect there."""
    failed = calls[failed_at]
    if failed.status != "conflict":
        return "MP-001"
    loosened = [
        msgspec.structs.replace(c, expected_head=None)
        if c.kind == "truncate"
        and c.status == "ok"
        and c.expected_head is not None
        and c.to_seq == failed.value
        else c
        for c in calls
    ]
    if loosened == calls:
        return "APPEND-002"
    return "TRUNC-003" if _gets_past(loosened, failed_at, session, max_steps) else "APPEND-002"


def _gets_past(calls: list[LogCall], failed_at: int, session: SessionChain, max_steps: int) -> bool:
    """Whether the search, on ``calls`` (some made unconditional), orders the call at
    ``failed_at`` and ends with the session's final log or fails only later."""
    again = search_log(calls, session.final, max_steps=max_steps)
    return again.verdict == "linearizable" or (
        again.verdict == "violation" and again.failed_at is not None and again.failed_at > failed_at
    )


def _truncate_rule(
    calls: list[LogCall],
    failed_at: int,
    session: SessionChain,
    max_steps: int,
    heads: Sequence[int] = (),
) -> str:
    """The rule a truncate no order explains breaks: TRUNC-003 when it conflicted, or when
    the search gets past it once its ``expected_head`` is left out (every order would
    have accepted it as an unconditional truncate: only the condition is wrong);
    TRUNC-002 when it succeeded cutting beyond every head the log could have had just
    before (``heads``); else TRUNC-001 (what it kept is wrong)."""
    failed = calls[failed_at]
    if failed.status == "conflict":
        return "TRUNC-003"
    if failed.status == "ok" and heads and all(failed.to_seq > head for head in heads):
        return "TRUNC-002"
    if failed.expected_head is None:
        return "TRUNC-001"
    unconditional = [*calls]
    unconditional[failed_at] = msgspec.structs.replace(failed, expected_head=None)
    return "TRUNC-003" if _gets_past(unconditional, failed_at, session, max_steps) else "TRUNC-001"


# -- entry point -------------------------------------------------------------------------------


def _validate(ops: Sequence[Operation]) -> Ledger[Operation]:
    """Refuse histories no correct recorder produces; enter every marker in a ledger."""
    ledger: Ledger[Operation] = Ledger()
    last: dict[int, Operation] = {}
    for op in sorted(ops, key=lambda o: (o.process, o.index)):
        if (op.completed is None) != isinstance(op.outcome, Unknown):
            raise ValueError(f"{describe(op)}: only an unknown outcome has no completion time")
        if op.completed is not None and op.completed < op.invoked:
            raise ValueError(f"{describe(op)}: completed before it was invoked")
        before = last.get(op.process)
        if before is not None and (before.completed is None or before.completed > op.invoked):
            raise ValueError(
                f"process {op.process} started op {op.index} before op {before.index} returned"
            )
        last[op.process] = op
        if op.kind != "append":
            continue
        outcome = op.outcome
        if isinstance(outcome, Conflicted):  # it must have written nothing
            conflict = CheckpointConflictError(op.session, outcome.expected, outcome.actual)
            ledger.refuse(op.session, op.markers, op, conflict)
        else:  # an error other than a conflict may have written, like no response at all
            fate: Fate = "acknowledged" if isinstance(outcome, Returned) else "unknown"
            ledger.append(op.session, op.markers, op, fate)
    return ledger


def check_history(
    history: Iterable[Operation],
    final_logs: Mapping[str, Sequence[str]],
    *,
    search_steps: int = 1_000_000,
    max_anomalies: int = 5,
    across_processes: bool = True,
    unconditional_truncates: bool = False,
) -> HistoryVerdict:
    """Decide whether the contract explains ``history``.

    ``final_logs`` holds, for every session the history touches, the markers of a
    full read taken after every process finished or was killed (an empty list for
    a session that ended empty). Each session is checked on its own — the
    contract never relates two sessions, so that is exact — first by the chain
    (fast path), then, if it cannot decide, by a search bounded by
    ``search_steps``. At most ``max_anomalies`` are reported per session, the cause
    first (`causes.ordered`). ``across_processes`` says the operations' ``process``
    numbers are separate processes, as in the stress check; False when they are
    handles of one process (a lost update between them is then APPEND-004, not MP-001).
    ``unconditional_truncates``: the store is known to take no ``expected_head`` in a
    truncate (TRUNC-003 expected, a declared gap): every truncate is judged as one
    made without it, so what only a truncate that ignored a stale expectation explains
    (an append answering a head such a truncate left) is that gap, not an anomaly.

    Raises ValueError for a malformed history: a marker used by two appends, a
    process with overlapping calls, a completion time on an unknown outcome, a
    session without a final log.
    """
    ops = [
        msgspec.structs.replace(op, expected_head=None)
        if unconditional_truncates
        and op.kind == "truncate"
        and not isinstance(op.outcome, Conflicted)  # a refusal compared it after all
        else op
        for op in history
    ]
    ledger = _validate(ops)
    by_session: dict[str, list[Operation]] = defaultdict(list)
    for op in sorted(ops, key=lambda o: o.invoked):
        by_session[op.session].append(op)
    missing = sorted(set(by_session) - set(final_logs))
    if missing:
        raise ValueError(f"no final log for sessions {missing}")
    anomalies: list[Anomaly] = []
    undecided: list[str] = []
    decided_by: dict[str, str] = {}
    resolved: list[str] = []
    for name in sorted(set(by_session) | set(final_logs)):
        session = SessionChain(
            name,
            by_session.get(name, []),
            list(final_logs[name]),
            ledger,
            max_anomalies,
            across_processes,
        )
        try:
            decided_by[name] = session.run()
        except AnomaliesFound:
            decided_by[name] = "chain"
            anomalies += session.anomalies
        except ChainUndecided as fallback:
            if session.anomalies:
                decided_by[name] = "chain"
                anomalies += session.anomalies
                continue
            fresh = SessionChain(
                session.name, session.ops, session.final, ledger, max_anomalies, across_processes
            )
            found, gave_up = _search(fresh, str(fallback), search_steps)
            anomalies += found
            resolved += fresh.resolved
            decided_by[name] = "search"
            if gave_up is not None:
                undecided.append(gave_up)
                decided_by[name] = "undecided"
            continue
        resolved += session.resolved
    return HistoryVerdict(
        operations=len(ops),
        anomalies=ordered(anomalies),
        undecided=tuple(undecided),
        decided_by=decided_by,
        resolved=tuple(resolved),
        origin=min((op.invoked for op in ops), default=0),
    )
