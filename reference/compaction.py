"""Compaction: replacing the conversation of a session by a summary (COMPACT-001 to COMPACT-005).

`compact` is an async generator of `CompactionProgress` reports. It writes at
most one event, a `Summary`, and only at its very end; everything before that
is reading and computing, so stopping it at any point before the append leaves
the log exactly as it was (COMPACT-004). The stages, in the order of `STAGES`:

- *measurement*: read the log once (one consistent snapshot), fold it, find
  the boundary (the same answer as `compaction_boundary`, the oracle) and
  count the conversation's tokens: with the summarizer's own `TokenCounter`
  when it has one (``measured``), else `estimate_tokens` (``estimated``);
- *archiving*: collect the folded messages that lie wholly at or before the
  boundary, the messages the summary replaces, counting the events up to the
  boundary as they are covered;
- *normalization*: those messages, in conversation order, are the transcript
  handed to the summarizer;
- *summarization*: ``await summarizer.summarize(transcript, instructions)``;
- *projection*: the conversation as it will fold with the summary appended
  (FOLD-006) and its size. A summary that would not make it smaller is not
  written: the run ends with ``done`` and ``reduced=False``;
- *persistence*: append the `Summary` with ``expected_head`` set to the head
  measured, so a writer that slipped in meanwhile turns the append into a
  `CheckpointConflictError` and its events stay (COMPACT-005).

The session is held through `maintenance` from before the read until after
the append: a backend with MAINTENANCE refuses other writers with
`SessionLockedError` meanwhile; with any other, ``expected_head`` still
catches them.

How a run ends: ``done`` (``reduced`` says whether a summary was written,
``summary_seq`` where), ``error`` followed by the exception itself, or
``cancelled`` when the ``cancel`` event was set (checked between stages,
while archiving, and raced against the summarizer, whose task is cancelled).
A consumer that closes the generator, or whose task is cancelled, stops the
run the same way but gets no last report: a closed generator cannot yield, and
a cancelled task must see its `asyncio.CancelledError`. Once the append is
issued it is not called back: a cancel seen after that point is ignored (the
run ends with ``done``), and a cancelled task waits for the append's outcome
before the session is released.

Consume the reports with ``contextlib.aclosing`` (or run the generator to its
end) so that an abandoned run releases the session at once, not when the
generator is garbage-collected.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import itertools
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Final

from ..spec import (
    AssistantMessage,
    BackgroundCompletion,
    Checkpointer,
    CompactionError,
    CompactionPhase,
    CompactionProgress,
    CompactionReason,
    CompactionStage,
    FileSnapshot,
    Message,
    RepairMessage,
    RuntimeReminder,
    StoredEvent,
    Summarizer,
    Summary,
    TextBlock,
    TokenCounter,
    TokenCountKind,
    ToolResult,
    ToolStarted,
    UserPrompt,
    estimate_tokens,
)
from ..spec.validation import check_session_id
from .fold import fold
from .maintenance import maintenance

__all__ = ["ARCHIVE_REPORTS", "compact"]

ARCHIVE_REPORTS: Final = 8
"""How many reports archiving makes after its first, however long the log."""


class _Cancelled(Exception):
    """The cancel event was seen: unwinds the run to its ``cancelled`` report."""


async def compact(
    checkpointer: Checkpointer,
    session_id: str,
    *,
    summarizer: Summarizer,
    instructions: str | None = None,
    cancel: asyncio.Event | None = None,
) -> AsyncGenerator[CompactionProgress, None]:
    """Summarise ``session_id`` up to its last clean boundary, reporting as it goes.

    Yields ``start``, then ``progress`` reports through the stages of
    `STAGES`, then exactly one of ``done``, ``error`` or ``cancelled``. After
    ``error`` the generator raises the failure: `InvalidArgumentError` for a
    bad session id, `CompactionError` for an unknown session or a summary that
    is not text, `SessionLockedError` when the session is held elsewhere,
    `CheckpointConflictError` when the log moved on, or whatever the backend or
    the summarizer raised; ``TypeError`` for arguments of the wrong kind. In
    every case but a successful ``done`` the log is unchanged.
    """
    run = _Run(checkpointer, session_id, summarizer, instructions, cancel)
    yield CompactionProgress(phase="start", message=f"compacting session {session_id!r}")
    try:
        run.check_arguments()
        async with (
            maintenance(checkpointer, session_id),
            contextlib.aclosing(run.stages()) as reports,
        ):
            async for report in reports:
                yield report
    except _Cancelled:
        yield run.report("cancelled", message="cancelled; the log is unchanged")
    except Exception as exc:
        yield run.report("error", error=_one_line(exc))
        raise


class _Run:
    """One compaction: its inputs and what it has measured so far."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        summarizer: Summarizer,
        instructions: str | None,
        cancel: asyncio.Event | None,
    ) -> None:
        self.checkpointer = checkpointer
        self.session_id = session_id
        self.summarizer = summarizer
        self.instructions = instructions
        self.cancel = cancel if cancel is not None else asyncio.Event()
        self.stage: CompactionStage | None = None
        self.tokens_before: int | None = None
        self.tokens_after: int | None = None
        self.token_count: TokenCountKind | None = None

    def check_arguments(self) -> None:
        check_session_id(self.session_id)
        if not isinstance(self.summarizer, Summarizer):
            raise TypeError(
                f"summarizer must have an async summarize(messages, instructions), "
                f"not be {type(self.summarizer).__name__}"
            )
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise TypeError(
                f"instructions must be str or None, not {type(self.instructions).__name__}"
            )
        if not isinstance(self.cancel, asyncio.Event):
            raise TypeError(
                f"cancel must be an asyncio.Event or None, not {type(self.cancel).__name__}"
            )

    def report(
        self,
        phase: CompactionPhase,
        *,
        message: str = "",
        completed: int | None = None,
        total: int | None = None,
        reduced: bool | None = None,
        summary_seq: int | None = None,
        error: str | None = None,
    ) -> CompactionProgress:
        """A report carrying the current stage and every count known so far."""
        return CompactionProgress(
            phase=phase,
            stage=self.stage,
            completed=completed,
            total=total,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            token_count=self.token_count,
            reduced=reduced,
            summary_seq=summary_seq,
            message=message,
            error=error,
        )

    def progress(
        self,
        stage: CompactionStage,
        message: str,
        *,
        completed: int | None = None,
        total: int | None = None,
    ) -> CompactionProgress:
        """A ``progress`` report of ``stage``, which becomes the current stage."""
        self.stage = stage
        return self.report("progress", message=message, completed=completed, total=total)

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise _Cancelled

    def count(self, messages: Sequence[Message]) -> int:
        if isinstance(self.summarizer, TokenCounter):
            return self.summarizer.count_tokens(messages)
        return estimate_tokens(messages)

    async def stages(self) -> AsyncGenerator[CompactionProgress, None]:
        """The progress reports of the stages; raises `_Cancelled` when cancelled.

        Every report is followed by a look at the cancel event, so a consumer
        that sets it on seeing a report stops the run before the next step.
        """
        self.check_cancel()
        yield self.progress("measurement", "reading the log")
        self.check_cancel()
        events = await self.read()
        if not events:
            raise CompactionError(
                self.session_id, CompactionReason.UNKNOWN_SESSION, "the session has no events"
            )
        with _gc_paused():
            messages = fold(events)
            boundary = _boundary(_clean_seqs(events), messages)
            seqs = [stored.seq for stored in events]
            # From here on the fold is all that is needed: freeing the events
            # now spares the collector from scanning them again and again.
            del events
        head = seqs[-1]
        self.token_count = "measured" if isinstance(self.summarizer, TokenCounter) else "estimated"
        self.tokens_before = self.count(messages)
        yield self.progress(
            "measurement",
            f"{len(seqs):,} events, {self.tokens_before:,} tokens ({self.token_count})",
            completed=len(seqs),
            total=len(seqs),
        )
        self.check_cancel()
        if boundary is None:
            self.stage = None
            yield self.report(
                "done", reduced=False, message="nothing new to summarise; nothing written"
            )
            return

        total = bisect.bisect_right(seqs, boundary)
        yield self.progress("archiving", f"archiving {total:,} events", completed=0, total=total)
        self.check_cancel()
        # The messages wholly at or before the boundary are the archive (no
        # message spans the boundary). An event counts as archived once the
        # messages up to it are collected; invisible ones count with them.
        lasts = [message.seqs[-1] for message in messages]
        replaced: list[bool] = []
        step = max(1, -(-len(messages) // ARCHIVE_REPORTS))
        reached = 0
        for start in range(0, len(messages), step):
            chunk = lasts[start : start + step]
            hits = [last <= boundary for last in chunk]
            replaced += hits
            reached = max(reached, max(itertools.compress(chunk, hits), default=0))
            done = total if len(replaced) == len(messages) else bisect.bisect_right(seqs, reached)
            yield self.progress(
                "archiving", f"archived {done:,} of {total:,} events", completed=done, total=total
            )
            self.check_cancel()

        transcript = list(itertools.compress(messages, replaced))
        yield self.progress(
            "normalization",
            f"{len(transcript):,} messages to summarise",
            completed=len(transcript),
            total=len(transcript),
        )
        self.check_cancel()

        yield self.progress("summarization", "summarising")
        self.check_cancel()
        text = await self.summarize(transcript)
        if not isinstance(text, str):
            raise CompactionError(
                self.session_id,
                CompactionReason.BAD_SUMMARY,
                f"the summarizer returned {type(text).__name__}, not str",
            )

        yield self.progress("projection", "projecting the conversation")
        self.check_cancel()
        summary_message = Message("user", "summary", (TextBlock(text),), (head + 1,))
        self.tokens_after = self.count(_replace(messages, replaced, summary_message))
        yield self.progress(
            "projection",
            f"{self.tokens_before:,} -> {self.tokens_after:,} tokens ({self.token_count})",
        )
        self.check_cancel()
        if self.tokens_after >= self.tokens_before:
            self.stage = None
            yield self.report(
                "done",
                reduced=False,
                message=(
                    f"the summary would not reduce the conversation "
                    f"({self.tokens_before:,} -> {self.tokens_after:,} tokens); nothing written"
                ),
            )
            return

        yield self.progress("persistence", f"writing the summary through seq {boundary}")
        self.check_cancel()
        summary = Summary(text, boundary, self.tokens_before, self.tokens_after)
        summary_seq = await self.append(summary, head)
        yield self.report(
            "done",
            reduced=True,
            summary_seq=summary_seq,
            message=f"summary at seq {summary_seq} replaces seqs 1..{boundary}",
        )

    async def read(self) -> list[StoredEvent]:
        """The whole log, in one pass."""
        stream = self.checkpointer.read(self.session_id)
        try:
            return [stored async for stored in stream]
        finally:
            # A backend's read may hold a cursor or a file until its iterator is closed.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def summarize(self, transcript: Sequence[Message]) -> object:
        """The summarizer's answer, or `_Cancelled` as soon as the cancel event is set."""
        task = asyncio.ensure_future(self.summarizer.summarize(transcript, self.instructions))
        waiter = asyncio.ensure_future(self.cancel.wait())
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
                # Let the summarizer unwind before the session is released.
                await asyncio.wait((task,))
        if self.cancel.is_set():
            if not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it as lost
            raise _Cancelled
        return task.result()

    async def append(self, summary: Summary, head: int) -> int:
        """Append the summary with ``expected_head``; returns its seq."""
        write = asyncio.ensure_future(
            self.checkpointer.append(self.session_id, [summary], expected_head=head)
        )
        try:
            return await asyncio.shield(write)
        except asyncio.CancelledError:
            # The append cannot be called back once issued: hold the session
            # until its outcome is known, then let the cancellation through.
            await asyncio.wait((write,))
            if not write.cancelled():
                write.exception()
            raise


def _clean_seqs(events: Sequence[StoredEvent]) -> list[int]:
    """The seqs at which no tool call is open: `ToolCallLedger`'s accounting, in one loop.

    The ledger builds a tuple of the open calls after every event and tests
    types with isinstance; this only asks whether a call is open, and compares
    exact types first, which on a long log is a third of the cost. Instances of
    subclasses take the isinstance path.
    """
    open_calls: set[str] = set()
    clean: list[int] = []
    for stored in events:
        event = stored.event
        if type(event) is ToolResult or type(event) is RepairMessage:
            if event.tool_call_id is not None:
                open_calls.discard(event.tool_call_id)
        elif type(event) is AssistantMessage:
            open_calls.update(call.id for call in event.tool_calls)
        elif type(event) is ToolStarted:
            open_calls.add(event.tool_call_id)
        elif type(event) not in _NO_CALLS:
            _account(open_calls, event)
        if not open_calls:
            clean.append(stored.seq)
    return clean


_NO_CALLS: Final = frozenset(
    {UserPrompt, FileSnapshot, Summary, RuntimeReminder, BackgroundCompletion}
)
"""Event types that neither open nor finish a tool call."""


def _account(open_calls: set[str], event: object) -> None:
    """`ToolCallLedger.feed` on a set of open call ids."""
    if isinstance(event, AssistantMessage):
        open_calls.update(call.id for call in event.tool_calls)
    elif isinstance(event, ToolStarted):
        open_calls.add(event.tool_call_id)
    elif isinstance(event, ToolResult | RepairMessage) and event.tool_call_id is not None:
        open_calls.discard(event.tool_call_id)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a fold's worth of objects is built.

    A fold of a long log creates tens of thousands of acyclic objects next to
    the events already in memory; the collections they trigger would rescan
    all of them again and again, which more than doubles the cost of the fold
    (the backends pause it for bulk decoding for the same reason). Nothing
    awaits inside, and the collector's previous state is restored.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _boundary(clean: Sequence[int], messages: Sequence[Message]) -> int | None:
    """`compaction_boundary` from what measurement has at hand: clean seqs and the fold."""
    inside: set[int] = set()
    for message in messages:
        if len(message.seqs) > 1:
            inside.update(range(message.seqs[0], message.seqs[-1]))
    boundary = next((seq for seq in reversed(clean) if seq not in inside), None)
    if boundary is None:
        return None
    if all(m.origin == "summary" for m in messages if m.seqs[-1] <= boundary):
        return None
    return boundary


def _replace(messages: Sequence[Message], replaced: list[bool], summary: Message) -> list[Message]:
    """FOLD-006 on a folded conversation: the summary where the first replaced message was."""
    position = replaced.index(True) if True in replaced else 0
    kept = list(itertools.compress(messages, [not hit for hit in replaced]))
    kept.insert(position, summary)  # the messages before the first replaced one are all kept
    return kept


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
