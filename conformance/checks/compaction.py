"""Checks of the COMPACT rules: compaction appends one summary, honestly, or nothing.

Each check writes a conversation to the backend, runs the session layer's
``compact`` with its deterministic ``ExtractiveSummarizer`` on a handle, and
consumes the progress stream one report at a time. Between two reports the
check may act: set the cancel event (COMPACT-004) or append an event through
the handle, as another writer of the session would (COMPACT-005). What a
compaction must cover comes from the spec's oracle (`compaction_boundary`),
what the fold shows after it from `fold_model`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ...spec import (
    STAGES,
    AssistantMessage,
    Checkpointer,
    CompactionError,
    CompactionProgress,
    CompactionReason,
    FileSnapshot,
    RuntimeReminder,
    SessionEvent,
    Summary,
    TokenCounter,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    compaction_boundary,
    content_hash,
    fold_model,
)
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness, read_all
from ._session import Intercepted, append_log, events_of, same
from .base import check

__all__ = ["CHECKS"]


def _conversation(turns: int = 6, *, open_call: bool = True) -> list[SessionEvent]:
    """A conversation of prompts, answers and tool calls; with ``open_call`` it ends
    inside a tool call, so the clean boundary is before the head."""
    events: list[SessionEvent] = []
    for turn in range(turns):
        call = f"call-{turn}"
        events += [
            UserPrompt(f"prompt {turn}: please change file {turn}"),
            AssistantMessage(
                f"changing file {turn}", (ToolCall(call, "edit", f'{{"n": {turn}}}'),)
            ),
            ToolStarted(call, "edit"),
            ToolResult(call, f"file {turn} changed"),
            AssistantMessage(f"file {turn} is done; anything else?"),
        ]
    if open_call:
        events += [
            UserPrompt("one more"),
            AssistantMessage("on it", (ToolCall("open", "edit", "{}"),)),
            ToolStarted("open", "edit"),
        ]
    return events


_INVISIBLE: list[SessionEvent] = [
    FileSnapshot("notes.txt", None, hash_after=content_hash(b"notes")),
    FileSnapshot("notes.txt", "notes", hash_after=content_hash(b"more notes")),
]
"""A log whose fold is empty: nothing to summarise. (A session with no events at
all is not exercised: the rules do not say whether compacting it is a no-op or
an error.)"""


async def _compact(
    h: Harness,
    cp: Checkpointer,
    session_id: str,
    *,
    cancel: asyncio.Event | None = None,
    between: Callable[[CompactionProgress], object] | None = None,
) -> list[CompactionProgress]:
    """Every report of one compaction; ``between`` runs after each report is received
    (an awaitable it returns is awaited) before the next is asked for.

    A layer may raise the failure after its ``error`` report (the reference does);
    that exception ends the stream. One raised without an ``error`` report first
    propagates: the progress broke off without an end (COMPACT-002)."""
    reports: list[CompactionProgress] = []
    stream = h.session.compact(
        cp, session_id, summarizer=h.session.ExtractiveSummarizer(), cancel=cancel
    )
    try:
        async for report in stream:
            reports.append(report)
            if between is not None:
                acted = between(report)
                if asyncio.iscoroutine(acted):
                    await acted
    except Exception:
        if not reports or reports[-1].phase != "error":
            raise
    return reports


def _ending(
    rule_id: str, reports: list[CompactionProgress], phase: str, what: str
) -> CompactionProgress:
    phases = [r.phase for r in reports]
    if not reports or reports[-1].phase != phase:
        raise RuleViolation(rule_id, f"{what}: the progress ended {phases[-3:]}, not with {phase}")
    return reports[-1]


@check("COMPACT-001")
async def one_summary_through_the_last_clean_boundary(h: Harness) -> None:
    """COMPACT-001: one Summary through the last seq with no tool call open, appended with expected_head."""
    cp = await h.open()
    spy = Intercepted(cp)
    log = await append_log(cp, "compact", _conversation())
    head = log[-1].seq
    boundary = compaction_boundary(log)
    assert boundary is not None
    assert boundary < head
    reports = await _compact(h, spy.as_checkpointer(), "compact")
    done = _ending("COMPACT-001", reports, "done", "a compaction that reduces")
    after = await read_all(cp, "compact")
    same("COMPACT-001", "the log before the summary", events_of(after[:head]), events_of(log))
    same("COMPACT-001", "events appended by the compaction", len(after) - len(log), 1)
    summary = after[-1].event
    if not isinstance(summary, Summary):
        raise RuleViolation("COMPACT-001", f"the compaction appended {summary!r}, not a Summary")
    same("COMPACT-001", "through_seq of the summary", summary.through_seq, boundary)
    same(
        "COMPACT-001",
        "the appends of the compaction (session, events, expected_head)",
        spy.appends,
        [("compact", (summary,), head)],
    )
    same("COMPACT-001", "done.reduced", done.reduced, True)
    same("COMPACT-001", "done.summary_seq", done.summary_seq, head + 1)
    folded = h.session.fold(after)
    same("COMPACT-001", "the fold after the compaction", list(folded), fold_model(after))
    shown = [m for m in folded if m.origin == "summary"]
    same("COMPACT-001", "summary messages in the fold", [m.seqs for m in shown], [(head + 1,)])


@check("COMPACT-002")
async def compaction_reports_honest_progress(h: Harness) -> None:
    """COMPACT-002: start, the stages in order (archiving counted), then one of done/error/cancelled; counts say how they were made."""
    cp = await h.open()
    await append_log(cp, "progress", _conversation())
    reports = await _compact(h, cp, "progress")
    phases = [r.phase for r in reports]
    if not phases or phases[0] != "start":
        raise RuleViolation("COMPACT-002", f"the progress began {phases[:3]}, not with start")
    _ending("COMPACT-002", reports, "done", "a compaction that reduces")
    middle = reports[1:-1]
    if any(r.phase != "progress" or r.stage is None for r in middle):
        raise RuleViolation(
            "COMPACT-002", f"between start and done: {[(r.phase, r.stage) for r in middle]}"
        )
    stages = [r.stage for r in middle]
    order = [STAGES.index(s) for s in stages if s is not None]
    if order != sorted(order) or sorted(set(stages), key=STAGES.index) != list(STAGES):
        raise RuleViolation(
            "COMPACT-002", f"the stages were reported as {stages}; expected {list(STAGES)} in order"
        )
    archiving = [(r.completed, r.total) for r in middle if r.stage == "archiving"]
    counted = [(c, t) for c, t in archiving if c is not None and t is not None]
    if not counted or len(counted) != len(archiving):
        raise RuleViolation(
            "COMPACT-002", f"archiving reported {archiving}, not completed/total counts"
        )
    completed = [c for c, _ in counted]
    totals = {t for _, t in counted}
    if (
        completed != sorted(completed)
        or len(totals) != 1
        or completed[-1] != next(iter(totals))
        or any(c > t for c, t in counted)
    ):
        raise RuleViolation(
            "COMPACT-002", f"archiving counted {counted}: it must rise to its total"
        )
    summarizer = h.session.ExtractiveSummarizer()
    kind = "measured" if isinstance(summarizer, TokenCounter) else "estimated"
    for r in reports:
        if (r.tokens_before is not None or r.tokens_after is not None) and r.token_count != kind:
            raise RuleViolation(
                "COMPACT-002",
                f"token counts reported as {r.token_count!r} ({r!r}); the summarizer's counts are {kind}",
            )
    if not any(r.tokens_before is not None for r in reports):
        raise RuleViolation("COMPACT-002", "no report gave the conversation's size (tokens_before)")

    await append_log(cp, "nothing", _INVISIBLE)
    noop = await _compact(h, cp, "nothing")
    if [r.phase for r in noop][:1] != ["start"] or sum(
        r.phase in ("done", "error", "cancelled") for r in noop
    ) != 1:
        raise RuleViolation("COMPACT-002", f"a no-op compaction reported {[r.phase for r in noop]}")


@check("COMPACT-003")
async def nothing_to_summarise_is_a_no_op(h: Harness) -> None:
    """COMPACT-003: a log that folds to nothing, one already summarised and one inside its first tool call are left alone."""
    cp = await h.open()
    await append_log(cp, "twice", _conversation(3, open_call=False))
    first = await _compact(h, cp, "twice")
    _ending("COMPACT-003", first, "done", "the first compaction")
    cases: dict[str, list[SessionEvent] | None] = {
        "invisible": _INVISIBLE,
        "twice": None,  # already holds one summary of everything
        "in-a-call": [
            AssistantMessage("", (ToolCall("first", "edit", "{}"),)),
            ToolStarted("first", "edit"),
        ],
    }
    for session_id, events in cases.items():
        log = await append_log(cp, session_id, events or [])
        assert compaction_boundary(log) is None, session_id
        reports = await _compact(h, cp, session_id)
        done = _ending("COMPACT-003", reports, "done", f"compacting {session_id!r}")
        same("COMPACT-003", f"done.reduced for {session_id!r}", done.reduced, False)
        same(
            "COMPACT-003",
            f"the log of {session_id!r} after a no-op",
            events_of(await read_all(cp, session_id)),
            events_of(log),
        )


class _Act:
    """What a check did between two reports of one compaction."""

    def __init__(self) -> None:
        self.acted = False
        self.late = False
        """Whether the summary was already in the log when the check acted: a cancel or
        a write after the summary was acknowledged proves nothing."""


async def _cancelled_at(h: Harness, cp: Checkpointer, at: str | None) -> None:
    session_id = f"cancel-{at or 'before'}"
    log = await append_log(cp, session_id, _conversation())
    cancel = asyncio.Event()
    act = _Act()
    if at is None:
        cancel.set()
        act.acted = True

    async def maybe_cancel(report: CompactionProgress) -> None:
        if report.phase == "progress" and report.stage == at and not act.acted:
            act.late = await cp.head(session_id) != log[-1].seq
            act.acted = True
            cancel.set()

    reports = await _compact(h, cp, session_id, cancel=cancel, between=maybe_cancel)
    if not act.acted or act.late:
        return  # the layer reported no such stage (COMPACT-002's business), or too late
    where = f"cancelled at {at or 'the start'}"
    _ending("COMPACT-004", reports, "cancelled", where)
    same(
        "COMPACT-004",
        f"the log after a compaction {where}",
        events_of(await read_all(cp, session_id)),
        events_of(log),
    )


@check("COMPACT-003")
async def an_unknown_session_is_an_error(h: Harness) -> None:
    """COMPACT-003: compacting a session without events reports error, raises CompactionError (unknown_session) and creates nothing."""
    cp = await h.open()
    reports: list[CompactionProgress] = []
    raised: BaseException | None = None
    try:
        async for report in h.session.compact(
            cp, "never-written", summarizer=h.session.ExtractiveSummarizer()
        ):
            reports.append(report)
    except Exception as exc:
        raised = exc
    if not isinstance(raised, CompactionError):
        raise RuleViolation(
            "COMPACT-003",
            f"compacting a session without events raised {raised!r}, not CompactionError",
        )
    same(
        "COMPACT-003",
        "the error's reason_code",
        raised.reason_code,
        CompactionReason.UNKNOWN_SESSION,
    )
    same("COMPACT-003", "the last report's phase", reports[-1].phase if reports else None, "error")
    same("COMPACT-003", "the head of the unknown session", await cp.head("never-written"), 0)


@check("COMPACT-004")
async def cancellation_leaves_the_log_unchanged(h: Harness) -> None:
    """COMPACT-004: cancelled before it starts or at any stage, compaction ends cancelled and writes nothing."""
    cp = await h.open()
    for at in (None, *STAGES):
        await _cancelled_at(h, cp, at)


async def _written_during(h: Harness, cp: Checkpointer, at: str) -> None:
    """Another writer appends once stage ``at`` is over (for persistence: when it is
    first reported), so the compaction has read the log before the write."""
    session_id = f"writer-{at}"
    log = await append_log(cp, session_id, _conversation())
    event = RuntimeReminder(f"written during {at}")
    act = _Act()
    seen: list[str | None] = []

    async def other_writer(report: CompactionProgress) -> None:
        previous = seen[-1] if seen else None
        seen.append(report.stage)
        if act.acted or report.phase != "progress":
            return
        if (at == "persistence" and report.stage == at) or (
            at != "persistence" and previous == at and report.stage != at
        ):
            act.late = await cp.head(session_id) != log[-1].seq
            act.acted = True
            await cp.append(session_id, [event])

    reports = await _compact(h, cp, session_id, between=other_writer)
    if not act.acted or act.late:
        return
    where = (
        f"a writer appended after {at}"
        if at != "persistence"
        else "a writer appended during persistence"
    )
    _ending("COMPACT-005", reports, "error", where)
    same(
        "COMPACT-005",
        f"the log after {where}",
        [e for _, e in events_of(await read_all(cp, session_id))],
        [*(e for _, e in events_of(log)), event],
    )


@check("COMPACT-005")
async def a_concurrent_writer_is_never_lost(h: Harness) -> None:
    """COMPACT-005: when the log moves on during a compaction, no summary is written and the writer's events stay."""
    cp = await h.open()
    for at in STAGES:
        await _written_during(h, cp, at)


CHECKS = (
    one_summary_through_the_last_clean_boundary,
    compaction_reports_honest_progress,
    nothing_to_summarise_is_a_no_op,
    an_unknown_session_is_an_error,
    cancellation_leaves_the_log_unchanged,
    a_concurrent_writer_is_never_lost,
)
