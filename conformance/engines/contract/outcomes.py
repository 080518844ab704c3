"""Comparing what a backend did with what the model says it should have done.

Every mismatch is turned into a `RuleViolation` naming the most specific rule
the evidence supports: an event that belongs to another session points at
ID-002, one that was deleted at DELETE-002, a wrong error type at the rule that
defines that error, and so on.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Generic, TypeVar

import msgspec

from ....backends.stdio.wire import StdioProtocolError
from ....spec import (
    AssistantMessage,
    BackgroundCompletion,
    Checkpointer,
    CheckpointError,
    FileSnapshot,
    ModelEvent,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    Summary,
    ToolResult,
    ToolStarted,
    UserPrompt,
)
from ....spec.divergences import ANSWER_RULE, of_answer, of_error, of_read, rule_requiring
from .ledger import Ledger
from .violations import RuleViolation, expect

__all__ = [
    "EVENT_KINDS",
    "CallOutcome",
    "Err",
    "Ok",
    "check_list_order",
    "check_ts",
    "compare_answer",
    "compare_log",
    "compare_outcomes",
    "make_event",
    "marker_of",
    "markers_of",
    "read_all",
    "run_backend",
    "run_model",
]

T = TypeVar("T")
W = TypeVar("W")


async def read_all(cp: Checkpointer, session_id: str, since_seq: int = 0) -> list[StoredEvent]:
    """Everything one ``read`` yields, as a list."""
    return [stored async for stored in cp.read(session_id, since_seq)]


class Ok(msgspec.Struct, Generic[T], frozen=True):
    value: T


class Err(msgspec.Struct, frozen=True):
    error: BaseException


CallOutcome = Ok[T] | Err


def run_model(call: Callable[[], T]) -> Ok[T] | Err:
    """The model's outcome: a value, or one of the contract's errors."""
    try:
        return Ok(call())
    except CheckpointError as exc:
        return Err(exc)


async def run_backend(call: Callable[[], Awaitable[T]]) -> Ok[T] | Err:
    """The backend's outcome: a value or whatever it raised (anything but cancellation).

    A `RuleViolation` is the kit's verdict on an answer (`check_answer`), not an
    outcome to compare: it propagates. So does a breach of the stdio protocol
    (`StdioProtocolError`): no answer came back, and the breach is its own finding
    (PROTO-001), not a wrong answer of the operation."""
    try:
        return Ok(await call())
    except (RuleViolation, StdioProtocolError):
        raise
    except Exception as exc:
        return Err(exc)


PRIMARY_RULE = ANSWER_RULE
"""The rule that defines what each operation returns (`checkpointspec.spec.divergences`)."""


def rule_for_expected_error(operation: str, error: BaseException) -> str:
    """The rule that requires ``error`` from ``operation``."""
    return rule_requiring(operation, error)


def _describe(outcome: object) -> str:
    if isinstance(outcome, Err):
        return f"raised {type(outcome.error).__name__}: {outcome.error}"
    if isinstance(outcome, Ok):
        return f"returned {outcome.value!r}"
    return repr(outcome)


def compare_outcomes(operation: str, actual: object, expected: object, call: str) -> None:
    """Errors must match in type and facts (values are compared by the caller): a
    difference is the divergence the table names (`checkpointspec.spec.divergences.of_error`)."""
    want = expected.error if isinstance(expected, Err) else None
    got = actual.error if isinstance(actual, Err) else None
    divergence = of_error(operation, want, got)
    if divergence is not None:
        raise RuleViolation.of(
            divergence.at(call), f"{call} {divergence.got}; expected {divergence.expected}"
        )


def compare_answer(
    operation: str,
    actual: object,
    expected: object,
    call: str,
    *,
    otherwise: tuple[str, str] | None = None,
) -> None:
    """A value an operation returned must be the model's: a difference is the divergence
    the table names (`checkpointspec.spec.divergences.of_answer`), with ``otherwise``
    the caller's other explanation of it, if it has one."""
    divergence = of_answer(operation, expected, actual)
    if divergence is not None:
        divergence = msgspec.structs.replace(divergence, otherwise=otherwise)
        raise RuleViolation.of(
            divergence.at(call), f"{call} {divergence.got}; expected {expected!r}"
        )


# -- unique, recognisable events ------------------------------------------------

EVENT_KINDS: tuple[str, ...] = (
    "user_prompt",
    "assistant_message",
    "tool_started",
    "tool_result",
    "file_snapshot",
    "summary",
    "background_completion",
    "runtime_reminder",
    "repair_message",
)


def make_event(kind: str, marker: str) -> SessionEvent:
    """An event of ``kind`` whose identifying text is ``marker`` (unique per run)."""
    match kind:
        case "user_prompt":
            return UserPrompt(marker)
        case "assistant_message":
            return AssistantMessage(marker)
        case "tool_started":
            return ToolStarted(tool_call_id=marker, name="edit")
        case "tool_result":
            return ToolResult(tool_call_id=marker, content="ok")
        case "file_snapshot":
            return FileSnapshot(path=marker, content_before=None)
        case "summary":
            return Summary(text=marker, through_seq=1, tokens_before=10, tokens_after=2)
        case "background_completion":
            return BackgroundCompletion(task_id=marker, content="done")
        case "runtime_reminder":
            return RuntimeReminder(marker)
        case "repair_message":
            return RepairMessage(marker)
    raise ValueError(f"unknown event kind {kind!r}")


def marker_of(event: object) -> str | None:
    """The identifying text `make_event` put into ``event``, if it is one of ours."""
    match event:
        case UserPrompt(text=m) | AssistantMessage(text=m) | Summary(text=m):
            return m
        case RuntimeReminder(text=m) | RepairMessage(text=m):
            return m
        case ToolStarted(tool_call_id=m) | ToolResult(tool_call_id=m):
            return m
        case FileSnapshot(path=m) | BackgroundCompletion(task_id=m):
            return m
    return None


def markers_of(events: Iterable[object]) -> list[str]:
    """The markers of those of ``events`` that are ours, in order."""
    return [m for m in map(marker_of, events) if m is not None]


# -- logs and listings ----------------------------------------------------------------


def check_ts(stored: StoredEvent, call: str) -> None:
    """SEQ-004: ts is ISO 8601 with a zero UTC offset."""
    try:
        ts = datetime.fromisoformat(stored.ts)
    except (TypeError, ValueError):
        raise RuleViolation("SEQ-004", f"{call}: ts {stored.ts!r} is not ISO 8601") from None
    expect(
        ts.utcoffset() == timedelta(0),
        "SEQ-004",
        f"{call}: ts {stored.ts!r} has no UTC offset",
    )


def compare_log(
    actual: Sequence[StoredEvent],
    expected: Sequence[ModelEvent],
    session_id: str,
    call: str,
    ledger: Ledger[W] | None = None,
    since_seq: int = 0,
) -> None:
    """A read's events must be the model's, field for field: the first difference is
    the divergence the table names (`checkpointspec.spec.divergences.of_read`).

    ``ledger`` holds every event the run ever tried to append; it turns an event
    the model does not expect into the rule its presence proves broken.
    """

    def intruder(stored: StoredEvent) -> str | None:
        if ledger is None:
            return None
        found = ledger.intrusion(marker_of(stored.event), session_id)
        return found.rule_id if found is not None else None

    divergence = of_read(since_seq, actual, expected, intruder=intruder)
    if divergence is not None:
        raise RuleViolation.of(
            divergence.at(call), f"{call} yielded {divergence.got}; expected {divergence.expected}"
        )
    for stored in actual:
        check_ts(stored, call)


def check_list_order(infos: Sequence[SessionInfo], call: str, *, ties: bool = True) -> None:
    """LIST-002: mtime descending, ties by id ascending.

    Two sessions tie when the store gives them the same mtime value: modified in
    one tick of its clock, they cannot be told apart, and the tie rule orders them.
    With ``ties=False`` only sessions whose mtimes differ are judged: for a caller
    whose ties come from how fast it ran (the model-based machine), so that its
    verdict does not; the LIST-002 check makes ties on purpose and judges them.
    """
    for before, after in itertools.pairwise(infos):
        if not ties and before.mtime == after.mtime:
            continue
        ordered = before.mtime > after.mtime or (
            before.mtime == after.mtime and before.id < after.id
        )
        expect(
            ordered,
            "LIST-002",
            f"{call}: {before.id!r} (mtime {before.mtime}) is listed before "
            f"{after.id!r} (mtime {after.mtime})",
        )
