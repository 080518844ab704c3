"""Hypothesis strategies for session logs: every event kind, with the awkward cases in reach.

Small pools of ids, paths and texts so that coincidences (a result for an
earlier call, one path snapshotted twice, two spellings of one path) happen in
small examples, and every value shrinks towards the plain case: a short log of
prompts and assistant messages.
"""

from __future__ import annotations

import base64

import msgspec
from checkpointspec.spec import (
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
)
from hypothesis import strategies as st

SID = "s"

texts = st.sampled_from(["", "hi", "a longer text", "ünïcode"])
call_ids = st.sampled_from(["c1", "c2", "c3"])

SAFE_PATHS = ["a.txt", "dir/b.bin", "./a.txt", "dir//b.bin", "c"]
UNSAFE_PATHS = ["../up", "/abs", "", "a/../a.txt", "nul\x00"]
paths = st.sampled_from(SAFE_PATHS + UNSAFE_PATHS)


def snapshot_contents(*, storable: bool) -> st.SearchStrategy[tuple[str | None, str]]:
    """(content_before, encoding): absent, text, good and malformed base64, unencodable text."""
    good = [
        (None, "utf-8"),
        ("text", "utf-8"),
        ("", "utf-8"),
        (base64.b64encode(b"\xff\x00").decode(), "base64"),
        ("not base64!", "base64"),
    ]
    if not storable:
        good.append(("\udc80", "utf-8"))  # a lone surrogate: no backend can store it
    return st.sampled_from(good)


def snapshots(*, storable: bool = True) -> st.SearchStrategy[FileSnapshot]:
    return st.builds(
        lambda path, content, truncated, call: FileSnapshot(
            path,
            content[0],
            truncated=truncated,
            encoding=content[1],  # type: ignore[arg-type]
            hash_after="h",
            tool_call_id=call,
        ),
        paths,
        snapshot_contents(storable=storable),
        st.booleans(),
        st.none() | call_ids,
    )


prompts = st.builds(UserPrompt, texts, st.lists(texts, max_size=2).map(tuple))


def events(*, storable: bool = True) -> st.SearchStrategy[SessionEvent]:
    """Any event, tool results twice as likely (they are what coalesces).

    A summary's ``through_seq`` is 0 here; `logs` draws it once the summary has a seq.
    """
    results = st.builds(ToolResult, call_ids, texts, st.booleans())
    return st.one_of(
        prompts,
        st.builds(
            AssistantMessage,
            texts,
            st.lists(st.builds(ToolCall, call_ids, st.just("tool"), st.just("{}")), max_size=2).map(
                tuple
            ),
        ),
        st.builds(ToolStarted, call_ids, st.just("tool")),
        results,
        results,
        snapshots(storable=storable),
        st.builds(Summary, texts, st.just(0), st.just(10), st.just(2)),
        st.builds(BackgroundCompletion, st.just("task"), texts),
        st.builds(RuntimeReminder, texts),
        st.builds(RepairMessage, texts, st.none() | call_ids),
    )


def stored(batch: list[SessionEvent]) -> list[StoredEvent]:
    """The events as a log holds them, seqs from 1."""
    return [
        StoredEvent(seq, SID, seq - 1 or None, f"2026-01-01T00:00:{seq:02d}+00:00", event)
        for seq, event in enumerate(batch, start=1)
    ]


@st.composite
def logs(
    draw: st.DrawFn, *, storable: bool = True, max_size: int = 30, files: bool = False
) -> list[StoredEvent]:
    """A log; each summary at seq s covers through a seq from 0 to s + 2 (past itself too).

    With ``files``, prompts and snapshots make up most of it: what checkpoints are made of.
    """
    kinds = events(storable=storable)
    if files:
        shots = snapshots(storable=storable)
        kinds = st.one_of(prompts, shots, shots, kinds)
    batch = draw(st.lists(kinds, max_size=max_size))
    for index, event in enumerate(batch):
        if isinstance(event, Summary):
            through = draw(st.integers(0, index + 3))
            batch[index] = msgspec.structs.replace(event, through_seq=through)
    return stored(batch)
