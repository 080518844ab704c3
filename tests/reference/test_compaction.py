"""`compact` and `ExtractiveSummarizer` (COMPACT-001 to COMPACT-005), on the memory and file backends.

Expected values come from the spec: `compaction_boundary` says what a
compaction covers, `fold_model` what the conversation is before and after,
`estimate_tokens` (or the summarizer's own counter) how large it is. Every
"the log is unchanged" compares whole reads, timestamps included. Test names
start with the rule id they check.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.reference.compaction import (
    ARCHIVE_REPORTS,
    _clean_seqs,
    compact,
)
from checkpointspec.reference.summarizers import ExtractiveSummarizer
from checkpointspec.spec import (
    STAGES,
    AssistantMessage,
    Capability,
    CheckpointConflictError,
    Checkpointer,
    CompactionError,
    CompactionProgress,
    CompactionReason,
    FileSnapshot,
    InvalidArgumentError,
    Message,
    SessionEvent,
    SessionLockedError,
    StoredEvent,
    Summarizer,
    Summary,
    TextBlock,
    TokenCounter,
    ToolCall,
    ToolCallLedger,
    ToolResult,
    ToolStarted,
    UserPrompt,
    compaction_boundary,
    estimate_tokens,
    fold_model,
)
from helpers import read_all, run
from hypothesis import example, given, settings
from hypothesis import strategies as st

SID = "session"
Opener = Callable[[], Awaitable[Checkpointer]]
"""Opens one more handle on the test's store."""


# -- stores, logs and summarizers ---------------------------------------------------------


@pytest.fixture(params=["memory", "file"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "memory":
        store = MemoryStore()

        async def memory() -> Checkpointer:
            return MemoryCheckpointer(store)

        return memory

    async def file() -> Checkpointer:
        return FileCheckpointer(tmp_path / "store", durability=Durability.PROCESS)

    return file


def turn(n: int) -> list[SessionEvent]:
    """One prompt with a file-writing tool call: six events, about 500 characters."""
    call = f"call-{n}"
    return [
        UserPrompt(f"request {n}: change module {n % 7}\n" + "details " * 20),
        AssistantMessage(
            "I will edit it. " * 5, (ToolCall(call, "write", f'{{"path": "src/m{n % 7}.py"}}'),)
        ),
        ToolStarted(call, "write"),
        FileSnapshot(f"src/m{n % 7}.py", "old content"),
        ToolResult(call, "written " * 10),
        AssistantMessage("Done. " * 10),
    ]


def conversation(turns: int, start: int = 0) -> list[SessionEvent]:
    return [event for n in range(start, start + turns) for event in turn(n)]


OPEN_CALL: list[SessionEvent] = [
    UserPrompt("one more"),
    AssistantMessage("", (ToolCall("late", "write", '{"path": "late.py"}'),)),
    ToolStarted("late", "write"),
]
"""A tail whose tool call is still running: compaction stops before it."""


async def collect(
    reports: AsyncIterator[CompactionProgress],
    on_report: Callable[[CompactionProgress], None] | None = None,
) -> tuple[list[CompactionProgress], BaseException | None]:
    """Every report of a run, and the exception it ended with (None if it ended quietly)."""
    seen: list[CompactionProgress] = []
    try:
        async for report in reports:
            seen.append(report)
            if on_report is not None:
                on_report(report)
    except Exception as exc:
        return seen, exc
    return seen, None


class Recording:
    """A summarizer that remembers what it was given; its summary is one short line."""

    def __init__(self, text: str = "the summary") -> None:
        self.text = text
        self.calls: list[tuple[list[Message], str | None]] = []

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        self.calls.append((list(messages), instructions))
        return self.text


class Counting(Recording):
    """Implements `TokenCounter`: one token per message block, and remembers what it counted."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[list[Message]] = []

    def count_tokens(self, messages: Sequence[Message]) -> int:
        self.counted.append(list(messages))
        return sum(len(m.blocks) for m in messages)


async def seeded(
    opener: Opener, events: Sequence[SessionEvent]
) -> tuple[Checkpointer, list[StoredEvent]]:
    cp = await opener()
    await cp.append(SID, list(events))
    return cp, await read_all(cp, SID)


def phases(reports: Sequence[CompactionProgress]) -> list[str]:
    return [r.phase for r in reports]


def assert_well_formed(reports: Sequence[CompactionProgress], last: str) -> None:
    """COMPACT-002: start first, stages in order, one final report of kind ``last``."""
    assert reports[0].phase == "start"
    assert reports[-1].phase == last
    assert all(r.phase == "progress" for r in reports[1:-1])
    order = [STAGES.index(r.stage) for r in reports[1:-1] if r.stage is not None]
    assert order == sorted(order)
    assert all(r.stage is not None for r in reports[1:-1])


# -- COMPACT-001: one summary through the boundary ------------------------------------------


def test_compact_001_appends_one_summary_through_the_boundary(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(5) + OPEN_CALL)
        reports, error = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        after = await read_all(cp, SID)
        assert error is None
        assert after[:-1] == before
        summary = after[-1].event
        assert isinstance(summary, Summary)
        assert summary.through_seq == compaction_boundary(before) == len(before) - 2
        assert reports[-1].reduced is True
        assert reports[-1].summary_seq == after[-1].seq == len(before) + 1
        folded = fold_model(after)
        assert folded[0].origin == "summary"
        assert folded[0].blocks == (TextBlock(summary.text),)
        # What the summary does not cover stays: the call still running.
        assert [m.origin for m in folded[1:]] == ["assistant"]
        await cp.close()

    run(scenario())


def test_compact_001_appends_with_the_head_it_read(opener: Opener) -> None:
    appends: list[int | None] = []

    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        real_append = cp.append

        async def recording_append(
            session_id: str, events: Sequence[SessionEvent], expected_head: int | None = None
        ) -> int:
            appends.append(expected_head)
            return await real_append(session_id, events, expected_head)

        cp.append = recording_append  # type: ignore[method-assign]
        await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert appends == [len(before)]
        await cp.close()

    run(scenario())


def test_compact_001_the_summarizer_gets_what_the_summary_replaces(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3) + OPEN_CALL)
        summarizer = Recording()
        await collect(compact(cp, SID, summarizer=summarizer, instructions="keep paths"))
        through = compaction_boundary(before)
        assert through is not None
        expected = [m for m in fold_model(before) if m.seqs[-1] <= through]
        assert summarizer.calls == [(expected, "keep paths")]
        await cp.close()

    run(scenario())


def test_compact_001_the_projection_is_the_fold_of_the_new_log(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(4) + OPEN_CALL)
        summarizer = Counting()
        reports, _ = await collect(compact(cp, SID, summarizer=summarizer))
        after = await read_all(cp, SID)
        # Counted: the conversation before, then the conversation as it will be.
        assert summarizer.counted == [fold_model(before), fold_model(after)]
        summary = after[-1].event
        assert isinstance(summary, Summary)
        assert (summary.tokens_before, summary.tokens_after) == (
            summarizer.count_tokens(fold_model(before)),
            summarizer.count_tokens(fold_model(after)),
        )
        assert (reports[-1].tokens_before, reports[-1].tokens_after) == (
            summary.tokens_before,
            summary.tokens_after,
        )
        await cp.close()

    run(scenario())


def test_compact_001_compacting_twice_summarises_the_summary_and_what_followed(
    opener: Opener,
) -> None:
    async def scenario() -> None:
        cp, _ = await seeded(opener, conversation(4))
        await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        await cp.append(SID, conversation(4, start=4))
        middle = await read_all(cp, SID)
        summarizer = Recording("second summary")
        reports, error = await collect(compact(cp, SID, summarizer=summarizer))
        after = await read_all(cp, SID)
        assert error is None
        assert reports[-1].reduced is True
        assert after[:-1] == middle
        transcript = summarizer.calls[0][0]
        assert transcript[0].origin == "summary"  # the first summary is summarised again
        assert transcript == fold_model(middle)
        assert fold_model(after) == [
            Message("user", "summary", (TextBlock("second summary"),), (after[-1].seq,))
        ]
        await cp.close()

    run(scenario())


# -- COMPACT-002: honest progress ----------------------------------------------------------


def test_compact_002_reports_start_every_stage_in_order_and_done(opener: Opener) -> None:
    async def scenario() -> None:
        cp, _ = await seeded(opener, conversation(3))
        reports, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert_well_formed(reports, "done")
        assert [s for s in STAGES if any(r.stage == s for r in reports[1:-1])] == list(STAGES)
        assert sum(r.phase in ("done", "error", "cancelled") for r in reports) == 1
        await cp.close()

    run(scenario())


def test_compact_002_archiving_counts_covered_events_up_to_their_total(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(300) + OPEN_CALL)
        reports, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        archiving = [r for r in reports if r.stage == "archiving"]
        through = compaction_boundary(before)
        assert {r.total for r in archiving} == {through}
        completed = [r.completed for r in archiving]
        assert completed[0] == 0
        assert completed[-1] == through
        assert completed == sorted(completed)
        assert len(archiving) <= ARCHIVE_REPORTS + 1  # a few reports, not one per event
        await cp.close()

    run(scenario())


def test_compact_002_token_counts_are_estimated_without_a_counter(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        reports, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        after = await read_all(cp, SID)
        done = reports[-1]
        assert done.token_count == "estimated"
        assert done.tokens_before == estimate_tokens(fold_model(before))
        assert done.tokens_after == estimate_tokens(fold_model(after))
        assert done.tokens_after is not None
        assert done.tokens_after < done.tokens_before
        # Once known, a count is in every later report.
        known = [r for r in reports if r.tokens_before is not None]
        assert known == reports[reports.index(known[0]) :]
        await cp.close()

    run(scenario())


def test_compact_002_token_counts_are_measured_with_a_counter(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        reports, _ = await collect(compact(cp, SID, summarizer=Counting()))
        assert {r.token_count for r in reports[2:]} == {"measured"}
        assert reports[-1].tokens_before == sum(len(m.blocks) for m in fold_model(before))
        await cp.close()

    run(scenario())


# -- COMPACT-003: no-ops ---------------------------------------------------------------------

NO_OPS = {
    "invisible events only": [FileSnapshot("a.txt", None), FileSnapshot("b.txt", "b")],
    "a call open from the start": [
        AssistantMessage("", (ToolCall("c", "write", "{}"),)),
        ToolStarted("c", "write"),
        UserPrompt("meanwhile"),
    ],
    "already one summary": [*conversation(2), Summary("s", 12, 300, 3)],
}


@pytest.mark.parametrize("events", list(NO_OPS.values()), ids=list(NO_OPS))
def test_compact_003_nothing_to_summarise_writes_nothing(
    opener: Opener, events: list[SessionEvent]
) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, events)
        summarizer = Recording()
        reports, error = await collect(compact(cp, SID, summarizer=summarizer))
        assert error is None
        assert phases(reports) == ["start", "progress", "progress", "done"]
        assert (reports[-1].reduced, reports[-1].stage, reports[-1].summary_seq) == (
            False,
            None,
            None,
        )
        assert summarizer.calls == []
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


def test_compact_003_a_second_compaction_in_a_row_is_a_no_op(opener: Opener) -> None:
    async def scenario() -> None:
        cp, _ = await seeded(opener, conversation(3))
        first, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        compacted = await read_all(cp, SID)
        second, error = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert (first[-1].reduced, second[-1].reduced, error) == (True, False, None)
        assert await read_all(cp, SID) == compacted
        await cp.close()

    run(scenario())


def test_compact_003_a_summary_that_would_not_reduce_is_not_written(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, [UserPrompt("hi")])
        reports, error = await collect(compact(cp, SID, summarizer=Recording("x" * 100)))
        assert error is None
        done = reports[-1]
        assert (done.phase, done.reduced, done.summary_seq) == ("done", False, None)
        assert done.tokens_after is not None
        assert done.tokens_before is not None
        assert done.tokens_after >= done.tokens_before
        assert "would not reduce" in done.message
        assert "persistence" not in {r.stage for r in reports}
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


# -- bad input: error, then a typed exception, nothing written ------------------------------


def test_an_unknown_session_is_an_error(opener: Opener) -> None:
    async def scenario() -> None:
        cp = await opener()
        reports, error = await collect(compact(cp, "nobody", summarizer=ExtractiveSummarizer()))
        assert_well_formed(reports, "error")
        assert isinstance(error, CompactionError)
        assert error.reason_code is CompactionReason.UNKNOWN_SESSION
        assert await cp.head("nobody") == 0
        await cp.close()

    run(scenario())


def test_a_compaction_error_pickles_with_its_attributes() -> None:
    error = CompactionError("s", CompactionReason.UNKNOWN_SESSION, "no events")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.args) == (CompactionError, error.args)
    assert (copy.session_id, copy.reason_code, copy.detail) == ("s", "unknown_session", "no events")


@pytest.mark.parametrize("session_id", ["", "a\x00b", 7])
def test_a_bad_session_id_is_an_error(opener: Opener, session_id: Any) -> None:
    async def scenario() -> None:
        cp = await opener()
        reports, error = await collect(compact(cp, session_id, summarizer=ExtractiveSummarizer()))
        assert phases(reports) == ["start", "error"]
        assert isinstance(error, InvalidArgumentError)
        assert error.rule_id == "ARG-001"
        await cp.close()

    run(scenario())


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"summarizer": object()}, "summarizer"),
        ({"summarizer": Recording(), "instructions": b"bytes"}, "instructions"),
        ({"summarizer": Recording(), "cancel": True}, "cancel"),
    ],
)
def test_arguments_of_the_wrong_kind_are_a_type_error(
    opener: Opener, arguments: dict[str, Any], problem: str
) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(2))
        reports, error = await collect(compact(cp, SID, **arguments))
        assert phases(reports) == ["start", "error"]
        assert isinstance(error, TypeError)
        assert problem in str(error)
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


def test_a_summary_that_is_not_text_is_an_error(opener: Opener) -> None:
    class Wrong(Recording):
        async def summarize(self, messages: Sequence[Message], instructions: str | None) -> Any:
            return None

    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(2))
        reports, error = await collect(compact(cp, SID, summarizer=Wrong()))
        assert_well_formed(reports, "error")
        assert isinstance(error, CompactionError)
        assert error.reason_code is CompactionReason.BAD_SUMMARY
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


def test_a_failing_summarizer_is_an_error_and_its_exception_goes_through(
    opener: Opener,
) -> None:
    failure = RuntimeError("model unavailable\nretry later")

    class Failing(Recording):
        async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
            raise failure

    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(2))
        reports, error = await collect(compact(cp, SID, summarizer=Failing()))
        assert_well_formed(reports, "error")
        assert error is failure
        assert reports[-1].stage == "summarization"
        assert reports[-1].error == "RuntimeError: model unavailable retry later"
        assert await read_all(cp, SID) == before
        # The session was released: the next compaction runs.
        again, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert again[-1].reduced is True
        await cp.close()

    run(scenario())


# -- COMPACT-004: cancellation leaves the log unchanged ------------------------------------


@pytest.mark.parametrize("stage", ["start", *STAGES])
def test_compact_004_cancel_at_each_stage_leaves_the_log_unchanged(
    opener: Opener, stage: str
) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(40) + OPEN_CALL)
        cancel = asyncio.Event()

        def on_report(report: CompactionProgress) -> None:
            if (report.phase == "start" and stage == "start") or report.stage == stage:
                cancel.set()

        summarizer = Recording()
        reports, error = await collect(
            compact(cp, SID, summarizer=summarizer, cancel=cancel), on_report
        )
        assert error is None
        assert_well_formed(reports, "cancelled")
        assert reports[-1].stage == (None if stage == "start" else stage)
        assert await read_all(cp, SID) == before
        assert len(summarizer.calls) == (1 if STAGES.index("summarization") < _index(stage) else 0)
        await cp.close()

    run(scenario())


def _index(stage: str) -> int:
    return -1 if stage == "start" else STAGES.index(stage)


def test_compact_004_cancel_in_the_middle_of_archiving(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(100))
        cancel = asyncio.Event()

        def on_report(report: CompactionProgress) -> None:
            if report.stage == "archiving" and report.completed:
                cancel.set()

        reports, _ = await collect(
            compact(cp, SID, summarizer=ExtractiveSummarizer(), cancel=cancel), on_report
        )
        archived = [r.completed for r in reports[:-1] if r.stage == "archiving"]
        assert reports[-1].phase == "cancelled"
        assert archived[-1] is not None
        assert 0 < archived[-1] < len(before)
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


class Hanging(Recording):
    """A summarizer that never answers; notes that it started and that it was cancelled."""

    def __init__(self, on_start: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.cancelled = False
        self.on_start = on_start

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        self.started.set()
        self.on_start()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def test_compact_004_cancel_while_summarising_cancels_the_summarizer(opener: Opener) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        cancel = asyncio.Event()
        summarizer = Hanging(on_start=cancel.set)
        reports, error = await collect(compact(cp, SID, summarizer=summarizer, cancel=cancel))
        assert error is None
        assert reports[-1].phase == "cancelled"
        assert reports[-1].stage == "summarization"
        assert summarizer.cancelled
        assert await read_all(cp, SID) == before
        await cp.close()

    run(scenario())


def test_compact_004_cancelling_the_task_cancels_the_summarizer_and_releases(
    opener: Opener,
) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        summarizer = Hanging()
        seen: list[CompactionProgress] = []
        task = asyncio.ensure_future(collect(compact(cp, SID, summarizer=summarizer), seen.append))
        await summarizer.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert summarizer.cancelled
        assert seen[-1].stage == "summarization"  # no last report: the task was cancelled
        assert await read_all(cp, SID) == before
        again, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert again[-1].reduced is True
        await cp.close()

    run(scenario())


@pytest.mark.parametrize("stage", STAGES)
def test_compact_004_closing_the_generator_at_each_stage_leaves_the_log_and_releases(
    opener: Opener, stage: str
) -> None:
    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        reports = compact(cp, SID, summarizer=ExtractiveSummarizer())
        async for report in reports:
            if report.stage == stage:
                break
        await reports.aclose()
        assert await read_all(cp, SID) == before
        again, _ = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert again[-1].reduced is True
        await cp.close()

    run(scenario())


# -- COMPACT-005: a concurrent writer is never lost ---------------------------------------


def test_compact_005_a_writer_during_summarization_is_kept(opener: Opener) -> None:
    written = UserPrompt("written while summarising")

    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        other = await opener()
        locked_out: list[SessionLockedError] = []

        class Interrupted(Recording):
            async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
                try:
                    await other.append(SID, [written])
                except SessionLockedError as exc:  # a backend with MAINTENANCE shuts it out
                    locked_out.append(exc)
                return "summary"

        reports, error = await collect(compact(cp, SID, summarizer=Interrupted()))
        after = await read_all(cp, SID)
        if locked_out:
            assert Capability.MAINTENANCE in cp.capabilities
            assert reports[-1].reduced is True
            assert after[:-1] == before
        else:
            assert_well_formed(reports, "error")
            assert isinstance(error, CheckpointConflictError)
            assert (error.expected, error.actual) == (len(before), len(before) + 1)
            assert after[:-1] == before
            assert after[-1].event == written
        await other.close()
        await cp.close()

    run(scenario())


def test_compact_005_a_writer_just_before_persistence_is_kept(opener: Opener) -> None:
    written = UserPrompt("written before the summary")

    async def scenario() -> None:
        cp, before = await seeded(opener, conversation(3))
        other = await opener()
        reports = compact(cp, SID, summarizer=ExtractiveSummarizer())
        seen: list[CompactionProgress] = []
        error: BaseException | None = None
        locked = False
        try:
            async for report in reports:
                seen.append(report)
                if report.stage == "persistence" and report.phase == "progress":
                    try:
                        await other.append(SID, [written])
                    except SessionLockedError:
                        locked = True
        except CheckpointConflictError as exc:
            error = exc
        after = await read_all(cp, SID)
        if locked:
            assert seen[-1].reduced is True
        else:
            assert seen[-1].phase == "error"
            assert isinstance(error, CheckpointConflictError)
            assert after == [*before, after[-1]]
            assert after[-1].event == written
        await other.close()
        await cp.close()

    run(scenario())


def test_compact_005_a_second_compaction_of_a_held_session_is_refused(opener: Opener) -> None:
    async def scenario() -> None:
        cp, _ = await seeded(opener, conversation(3))
        first = compact(cp, SID, summarizer=ExtractiveSummarizer())
        async for report in first:
            if report.stage == "measurement":
                break  # the first holds the session from here on
        reports, error = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
        assert phases(reports) == ["start", "error"]
        assert isinstance(error, SessionLockedError)
        rest, error = await collect(first)
        assert error is None
        assert rest[-1].reduced is True
        await cp.close()

    run(scenario())


# -- the boundary agrees with the oracle on any log ----------------------------------------


def logs() -> st.SearchStrategy[list[SessionEvent]]:
    ids = st.sampled_from(["a", "b", "c"])
    event: st.SearchStrategy[SessionEvent] = st.one_of(
        st.builds(UserPrompt, st.text("pq ", min_size=1, max_size=30)),
        st.builds(
            lambda calls: AssistantMessage(
                "thinking", tuple(ToolCall(i, "t", "{}") for i in calls)
            ),
            st.lists(ids, max_size=2, unique=True),
        ),
        st.builds(ToolStarted, ids, st.just("t")),
        st.builds(ToolResult, ids, st.text("r", max_size=40)),
        st.builds(FileSnapshot, st.just("f"), st.none()),
        st.builds(lambda n: Summary("old", n, 5, 1), st.integers(0, 10)),
    )
    return st.lists(event, min_size=1, max_size=12)


SPLIT_TURN: list[SessionEvent] = [
    UserPrompt("go"),
    AssistantMessage("", (ToolCall("a", "t", "{}"),)),
    ToolResult("a", "result a"),
    ToolStarted("b", "t"),
    ToolStarted("c", "t"),
    ToolResult("b", "result b"),
]
"""Seq 3 is clean, but the results at 3 and 6 fold into one turn: the boundary is 1."""


def test_compact_001_never_splits_a_tool_results_turn(opener: Opener) -> None:
    async def scenario() -> None:
        cp, _ = await seeded(opener, SPLIT_TURN)
        await collect(compact(cp, SID, summarizer=Recording("")))
        after = await read_all(cp, SID)
        summary = after[-1].event
        assert isinstance(summary, Summary)
        assert summary.through_seq == 1
        assert fold_model(after)[-1].seqs == (3, 6)  # result b is still in the conversation
        await cp.close()

    run(scenario())


@settings(max_examples=60, deadline=None)
@given(logs())
@example(SPLIT_TURN)
def test_compact_001_003_the_summary_goes_where_the_oracle_says(events: list[SessionEvent]) -> None:
    async def scenario() -> None:
        cp = MemoryCheckpointer()
        await cp.append(SID, events)
        before = await read_all(cp, SID)
        reports, error = await collect(compact(cp, SID, summarizer=Recording("")))
        after = await read_all(cp, SID)
        assert error is None
        through = compaction_boundary(before)
        if reports[-1].reduced:
            summary = after[-1].event
            assert isinstance(summary, Summary)
            assert summary.through_seq == through
            assert estimate_tokens(fold_model(after)) == reports[-1].tokens_after
        else:
            assert after == before
            assert through is None or reports[-1].tokens_after is not None
        await cp.close()

    run(scenario())


class LateResult(ToolResult, frozen=True):
    """A subclass of an event type: compaction must account for it as its base."""


@settings(max_examples=100, deadline=None)
@given(logs(), st.data())
def test_compact_001_clean_seqs_agree_with_the_ledger(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    call = data.draw(st.sampled_from(["a", "b", "c"]))
    events = [*events, LateResult(call, "late"), *data.draw(logs())]
    log = [StoredEvent(n, SID, n - 1 or None, "t", e) for n, e in enumerate(events, 1)]
    ledger = ToolCallLedger()
    expected = []
    for stored in log:
        ledger.feed(stored.event)
        if not ledger.open_calls:
            expected.append(stored.seq)
    assert _clean_seqs(log) == expected


# -- the SQLite backend --------------------------------------------------------------------


def test_compact_on_sqlite(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with SqliteCheckpointer(tmp_path / "s.db", synchronous="OFF") as cp:
            await cp.append(SID, conversation(5) + OPEN_CALL)
            before = await read_all(cp, SID)
            reports, error = await collect(compact(cp, SID, summarizer=ExtractiveSummarizer()))
            after = await read_all(cp, SID)
        assert error is None
        assert_well_formed(reports, "done")
        assert after[:-1] == before
        assert isinstance(after[-1].event, Summary)
        assert after[-1].event.through_seq == compaction_boundary(before)

    run(scenario())


# -- ExtractiveSummarizer -------------------------------------------------------------------


def summarise(events: Sequence[SessionEvent], instructions: str | None = None, **kw: int) -> str:
    stored = [StoredEvent(n, SID, n - 1 or None, "t", e) for n, e in enumerate(events, 1)]
    return run(ExtractiveSummarizer(**kw).summarize(fold_model(stored), instructions))


def test_extractive_summary_names_requests_files_and_counts() -> None:
    text = summarise(conversation(3))
    lines = text.splitlines()
    assert lines[0] == "Summary of 12 messages: 3 requests, 3 tool calls (0 failed)."
    assert "Files touched (3): src/m0.py, src/m1.py, src/m2.py" in lines
    assert lines[-3:] == [
        "- request 0: change module 0",
        "- request 1: change module 1",
        "- request 2: change module 2",
    ]


def test_extractive_summary_is_deterministic_and_bounded() -> None:
    events = conversation(2000)
    text = summarise(events, max_chars=500)
    assert text == summarise(events, max_chars=500)
    assert len(text) <= 500
    assert text.endswith("requests left out)")
    assert "- request 1999: change module 4" in text  # the most recent are kept


def test_extractive_summary_puts_requests_about_the_instructions_first() -> None:
    events = [UserPrompt("Refactor the PARSER"), UserPrompt("tidy the docs"), UserPrompt("x")]
    text = summarise(events, "Focus on the parser work\nignore this line")
    assert text.splitlines()[1:] == [
        "Instructions: Focus on the parser work",
        "Requests about the instructions:",
        "- Refactor the PARSER",
        "Other requests:",
        "- tidy the docs",
        "- x",
    ]
    assert "Instructions" not in summarise(events)


def test_extractive_summary_reads_paths_from_tool_arguments() -> None:
    def call(arguments: str) -> AssistantMessage:
        return AssistantMessage("", (ToolCall("c", "t", arguments),))

    events = [
        call('{"file_path": "b.py"}'),
        call('{"paths": ["c.py", 3, "a.py"], "path": ""}'),
        call('{"filename": "d.py", "file": "e.py", "other": "f.py"}'),
        call("not json"),
        call('["path"]'),
        ToolResult("c", "failed", is_error=True),
    ]
    lines = summarise(events).splitlines()
    assert lines == [
        "Summary of 6 messages: 0 requests, 5 tool calls (1 failed).",
        "Files touched (5): a.py, b.py, c.py, d.py, e.py",
    ]


@pytest.mark.parametrize("setting", [{"max_chars": 10}, {"line_chars": 0}, {"max_files": -1}])
def test_extractive_summarizer_refuses_bad_settings(setting: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(setting))):
        ExtractiveSummarizer(**setting)


def test_extractive_summarizer_keeps_counts_estimated() -> None:
    assert not isinstance(ExtractiveSummarizer(), TokenCounter)


def test_the_counting_helper_is_a_token_counter_and_the_recording_one_is_not() -> None:
    assert isinstance(Counting(), TokenCounter)
    assert isinstance(Counting(), Summarizer)
    assert not isinstance(Recording(), TokenCounter)
