"""The records of a concurrent history: one `Operation` per call, and `Anomaly`.

A recorder (the stress check's workers, or your own harness) writes one
`Operation` per call it made: which process, what it asked, when it was invoked
and when it returned, and the outcome. `checkpointspec.conformance.engines.history`
checks a list of them; this module only defines them and says them in words.
Nothing here does I/O.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ..contract.ledger import markers_text

__all__ = [
    "Anomaly",
    "Conflicted",
    "OpKind",
    "Operation",
    "OperationOutcome",
    "Raised",
    "Returned",
    "Unknown",
    "answer_text",
    "call_text",
    "describe",
    "observer_rule",
]

OpKind = Literal["append", "read", "head", "truncate", "delete"]


class Returned(msgspec.Struct, frozen=True, tag="ok", tag_field="status"):
    """The call returned normally.

    ``value`` is the head an append, truncate or head call returned (0 for read
    and delete); ``events`` holds the (seq, marker) pairs a read yielded.
    """

    value: int = 0
    events: tuple[tuple[int, str], ...] = ()


class Conflicted(msgspec.Struct, frozen=True, tag="conflict", tag_field="status"):
    """The call raised `CheckpointConflictError` with these ``expected`` and ``actual`` heads."""

    expected: int
    actual: int


class Raised(msgspec.Struct, frozen=True, tag="error", tag_field="status"):
    """The call raised something other than a conflict.

    The checker does not assume such a write had no effect; like an unknown
    outcome, it is resolved by whether its events are in the log.
    """

    error: str
    message: str = ""


class Unknown(msgspec.Struct, frozen=True, tag="unknown", tag_field="status"):
    """No response: the process was killed while the call was in flight."""


OperationOutcome: TypeAlias = Returned | Conflicted | Raised | Unknown


class Operation(msgspec.Struct, frozen=True, omit_defaults=True):
    """One call one process made, with its arguments, its times and its outcome.

    ``index`` numbers the process's calls from 0. ``invoked`` is read just before
    the call and ``completed`` just after it returned (None when the outcome is
    `Unknown`), both from one monotonic clock all processes share, so the call
    took effect (if at all) somewhere in between. ``markers`` are the unique
    texts of an append's events, one per event; ``expected_head``,
    ``since_seq`` and ``to_seq`` are the call's arguments.
    """

    process: int
    index: int
    kind: OpKind
    session: str
    invoked: int
    completed: int | None
    outcome: OperationOutcome
    markers: tuple[str, ...] = ()
    expected_head: int | None = None
    since_seq: int = 0
    to_seq: int = 0


class Anomaly(msgspec.Struct, frozen=True):
    """Something the contract forbids, with the operations that show it.

    ``rule_id`` names the anomaly by its cause (`checkpointspec.conformance.engines.history.causes`);
    ``operations[0]`` is the first anomalous call, the one whose answer no legal
    behaviour allows, and ``expected`` says what the contract allows it ("" when the
    summary says it). ``also`` names the rules the same evidence breaks as well (a
    lost update across processes breaks APPEND-004 too), never the rules of the
    symptoms it caused, which are anomalies of their own listed after it.
    """

    rule_id: str
    session: str
    summary: str
    operations: tuple[Operation, ...] = ()
    also: tuple[str, ...] = ()
    expected: str = ""

    def explain(self, origin: int = 0, *, symptom: bool = False) -> str:
        """The summary, then each operation involved with its times relative to ``origin``;
        a ``symptom`` is said as what follows from the cause before it."""
        head = f"then, as {self.rule_id}:" if symptom else f"[{self.rule_id}]"
        lines = [f"{head} session {self.session!r}: {self.summary}"]
        lines += [f"    - {describe(op, origin)}" for op in self.operations]
        return "\n".join(lines)


# -- describing operations ----------------------------------------------------------------


def _result(op: Operation) -> str:
    outcome = op.outcome
    if isinstance(outcome, Conflicted):
        return f"conflict: expected {outcome.expected}, actual {outcome.actual}"
    if isinstance(outcome, Raised):
        return f"raised {outcome.error}"
    if isinstance(outcome, Unknown):
        return "no response: the process was killed"
    if op.kind == "read":
        events = outcome.events
        if not events:
            return "got nothing"
        seqs = (
            f"seq {events[0][0]}" if len(events) == 1 else f"seqs {events[0][0]}..{events[-1][0]}"
        )
        return f"got {seqs}: {markers_text([m for _, m in events])}"
    if op.kind == "head":
        return f"got {outcome.value}"
    if op.kind == "append":
        return f"ok, head {outcome.value}"
    return "ok"


def call_text(op: Operation) -> str:
    """The call as the process made it: ``process 2: append('s0', [a1 a2], expected_head=4)``."""
    expected = f", expected_head={op.expected_head}" if op.expected_head is not None else ""
    match op.kind:
        case "append":
            args = f"[{markers_text(op.markers)}]{expected}"
        case "read":
            args = f"since_seq={op.since_seq}"
        case "truncate":
            args = f"{op.to_seq}{expected}"
        case _:
            args = ""
    return f"process {op.process}: {op.kind}({op.session!r}{', ' if args else ''}{args})"


def answer_text(op: Operation) -> str:
    """What came back from the call, in words."""
    return _result(op)


def describe(op: Operation, origin: int | None = None) -> str:
    """One operation in plain words; with ``origin``, also when it ran (ms after origin)."""
    expected = f" with expected_head {op.expected_head}" if op.expected_head is not None else ""
    match op.kind:
        case "append":
            what = f"appended {markers_text(op.markers) or 'nothing'}" + (
                expected or " without expected_head"
            )
        case "read":
            what = f"read since {op.since_seq}"
        case "head":
            what = "asked for the head"
        case "truncate":
            what = f"truncated to {op.to_seq}{expected}"
        case "delete":
            what = "deleted the session"
    text = f"process {op.process} {what} ({_result(op)})"
    if origin is None:
        return text
    done = "never" if op.completed is None else f"{(op.completed - origin) / 1e6:.3f}"
    return f"{text}  [op {op.index}, {(op.invoked - origin) / 1e6:.3f} → {done} ms]"


def observer_rule(op: Operation) -> str:
    """The rule a call that only looks at the log breaks when it sees the wrong head."""
    if op.kind == "read":
        return "READ-003"
    if op.kind == "head":
        return "HEAD-001"
    if op.kind == "truncate":
        return "TRUNC-003"
    return "APPEND-002" if isinstance(op.outcome, Conflicted) else "APPEND-001"
