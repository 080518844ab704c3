"""Unit tests of the checkpoint oracle (`checkpoints_model`) and its helpers (CKPT-001..003).

Expected listings are worked out from the rule statements in spec/rules.py,
never copied from a run of the model. Test names start with the rule id they check.
"""

from __future__ import annotations

import base64

import pytest
from checkpointspec.spec import (
    AssistantMessage,
    BackgroundCompletion,
    Checkpoint,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    UnavailableFile,
    UserPrompt,
    checkpoints_model,
)
from checkpointspec.spec.checkpoints import snapshot_key, snapshot_problem


def log(*events: SessionEvent) -> list[StoredEvent]:
    return [
        StoredEvent(seq, "s", seq - 1 or None, f"ts{seq}", event)
        for seq, event in enumerate(events, start=1)
    ]


def test_an_empty_log_has_no_checkpoints() -> None:
    assert checkpoints_model([]) == []


def test_ckpt_001_one_checkpoint_per_prompt_and_nothing_else() -> None:
    assert checkpoints_model(
        log(
            RuntimeReminder("r"),
            UserPrompt("first"),
            RepairMessage("fix"),
            BackgroundCompletion("t", "done"),
            AssistantMessage("a"),
            UserPrompt("second", ("attached",)),
        )
    ) == [Checkpoint(2, "first", "ts2", (), ()), Checkpoint(6, "second", "ts6", (), ())]


def test_ckpt_002_files_are_the_paths_snapshotted_after_the_checkpoint_sorted() -> None:
    listed = checkpoints_model(
        log(
            FileSnapshot("before.txt", "x"),
            UserPrompt("p"),
            FileSnapshot("z.txt", None),
            FileSnapshot("a.txt", "old"),
            UserPrompt("q"),
            FileSnapshot("./m.txt", "m"),
        )
    )
    assert [c.files for c in listed] == [("a.txt", "m.txt", "z.txt"), ("m.txt",)]


def test_ckpt_002_the_earliest_snapshot_after_the_checkpoint_decides() -> None:
    listed = checkpoints_model(
        log(
            UserPrompt("p"),
            FileSnapshot("f", "", truncated=True),
            UserPrompt("q"),
            FileSnapshot("f", "whole"),
            FileSnapshot("f", "", truncated=True),
        )
    )
    assert listed[0].files == ()
    assert listed[0].unavailable_files == (UnavailableFile("f", "truncated"),)
    assert listed[1].files == ("f",)
    assert listed[1].unavailable_files == ()


def test_ckpt_002_two_spellings_of_one_path_are_one_file() -> None:
    listed = checkpoints_model(
        log(UserPrompt("p"), FileSnapshot("d//f", "", truncated=True), FileSnapshot("d/f", "ok"))
    )
    assert listed[0].files == ()
    assert listed[0].unavailable_files == (UnavailableFile("d/f", "truncated"),)


def test_ckpt_003_each_unavailable_file_says_why_and_files_stay_disjoint() -> None:
    [checkpoint] = checkpoints_model(
        log(
            UserPrompt("p"),
            FileSnapshot("../up", "x"),
            FileSnapshot("big", "", truncated=True),
            FileSnapshot("bad", "!!", encoding="base64"),
            FileSnapshot("ok", base64.b64encode(b"\xff").decode(), encoding="base64"),
            FileSnapshot("new", None),
        )
    )
    assert checkpoint.files == ("new", "ok")
    assert checkpoint.unavailable_files == (
        UnavailableFile("../up", "unsafe_path"),
        UnavailableFile("bad", "undecodable"),
        UnavailableFile("big", "truncated"),
    )


@pytest.mark.parametrize(
    ("snapshot", "problem"),
    [
        (FileSnapshot("f", "x"), None),
        (FileSnapshot("f", None, truncated=True), "truncated"),
        (FileSnapshot("/abs", "", truncated=True), "unsafe_path"),  # the path first
        (FileSnapshot("f", "!!", truncated=True, encoding="base64"), "truncated"),  # then size
        (FileSnapshot("f", "!!", encoding="base64"), "undecodable"),
        (FileSnapshot("f", "\udc80"), "undecodable"),
    ],
)
def test_ckpt_003_snapshot_problem_checks_path_then_truncation_then_content(
    snapshot: FileSnapshot, problem: str | None
) -> None:
    assert snapshot_problem(snapshot) == problem


def test_snapshot_key_is_canonical_or_the_path_as_written() -> None:
    assert snapshot_key("./a//b") == "a/b"
    assert snapshot_key("../a") == "../a"
    assert snapshot_key("") == ""
