"""list_checkpoints equals the oracle `checkpoints_model` on every log (CKPT-001..003)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.reference.checkpoints import list_checkpoints
from checkpointspec.spec import (
    AssistantMessage,
    Checkpoint,
    Checkpointer,
    CheckpointerClosedError,
    FileSnapshot,
    InvalidArgumentError,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    UnavailableFile,
    UserPrompt,
    checkpoints_model,
)
from hypothesis import example, given, settings
from session_logs import SID, logs, stored


class LogOnly:
    """Just enough of a checkpointer to be read: the log as given, unvalidated."""

    def __init__(self, log: Sequence[StoredEvent]) -> None:
        self._log = log

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        for event in self._log[since_seq:]:
            yield event


def listed(log: Sequence[StoredEvent]) -> list[Checkpoint]:
    return asyncio.run(list_checkpoints(LogOnly(log), SID))  # type: ignore[arg-type]


FIRST_SNAPSHOT_WINS = stored(
    [
        FileSnapshot("early.txt", "before any prompt"),
        UserPrompt("one"),
        FileSnapshot("a.txt", "x", truncated=True),
        FileSnapshot("./a.txt", "y"),
        UserPrompt("two"),
        FileSnapshot("a.txt", "z"),
        FileSnapshot("../up", None),
        UserPrompt("three"),
    ]
)


@settings(max_examples=300)
@given(logs(storable=False, files=True))
@example(FIRST_SNAPSHOT_WINS)
def test_list_checkpoints_equals_the_oracle(log: list[StoredEvent]) -> None:
    """CKPT-001..003: the streaming listing and checkpoints_model agree on generated logs."""
    assert listed(log) == checkpoints_model(log)


def test_ckpt_002_the_earliest_snapshot_after_a_checkpoint_decides() -> None:
    assert listed(FIRST_SNAPSHOT_WINS) == [
        Checkpoint(
            2,
            "one",
            FIRST_SNAPSHOT_WINS[1].ts,
            (),
            (UnavailableFile("../up", "unsafe_path"), UnavailableFile("a.txt", "truncated")),
        ),
        Checkpoint(
            5,
            "two",
            FIRST_SNAPSHOT_WINS[4].ts,
            ("a.txt",),
            (UnavailableFile("../up", "unsafe_path"),),
        ),
        Checkpoint(8, "three", FIRST_SNAPSHOT_WINS[7].ts, (), ()),
    ]


def test_ckpt_003_undecodable_snapshots_are_unavailable() -> None:
    log = stored(
        [
            UserPrompt("p"),
            FileSnapshot("bad.bin", "not base64!", encoding="base64"),
            FileSnapshot("surrogate.txt", "\udc80"),
            FileSnapshot("good.bin", base64.b64encode(b"\xff").decode(), encoding="base64"),
        ]
    )
    [checkpoint] = listed(log)
    assert checkpoint.files == ("good.bin",)
    assert checkpoint.unavailable_files == (
        UnavailableFile("bad.bin", "undecodable"),
        UnavailableFile("surrogate.txt", "undecodable"),
    )


def test_list_checkpoints_accepts_subclasses_of_the_event_kinds() -> None:
    class Prompt(UserPrompt, frozen=True):
        pass

    class Snapshot(FileSnapshot, frozen=True):
        pass

    log = stored([Prompt("p"), Snapshot("f", None)])
    assert listed(log) == [Checkpoint(1, "p", log[0].ts, ("f",), ())]


BACKENDS = {
    "memory": lambda tmp: MemoryCheckpointer(),
    "file": lambda tmp: FileCheckpointer(tmp / "store"),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ckpt_001_through_a_backend(backend: str, tmp_path: Path) -> None:
    """Reminders are not checkpoints; block-form prompts are; ts is the stored one."""
    batch: list[SessionEvent] = [
        RuntimeReminder("not a checkpoint"),
        UserPrompt("p", ("attached",)),
        AssistantMessage("ok"),
        FileSnapshot("f.txt", None, hash_after="h"),
        UserPrompt("q"),
    ]

    async def main() -> tuple[list[Checkpoint], list[StoredEvent]]:
        cp: Checkpointer = BACKENDS[backend](tmp_path)
        try:
            await cp.append(SID, batch)
            return await list_checkpoints(cp, SID), [e async for e in cp.read(SID)]
        finally:
            await cp.close()

    result, log = asyncio.run(main())
    assert result == checkpoints_model(log)
    assert [(c.seq, c.prompt, c.files) for c in result] == [(2, "p", ("f.txt",)), (5, "q", ())]
    assert result[0].ts == log[1].ts


def test_an_unknown_session_has_no_checkpoints() -> None:
    assert asyncio.run(list_checkpoints(MemoryCheckpointer(), "nobody")) == []


def test_read_errors_propagate() -> None:
    async def main() -> None:
        cp = MemoryCheckpointer()
        with pytest.raises(InvalidArgumentError):
            await list_checkpoints(cp, "")
        await cp.close()
        with pytest.raises(CheckpointerClosedError):
            await list_checkpoints(cp, SID)

    asyncio.run(main())
