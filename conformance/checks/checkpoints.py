"""Checks of the CKPT rules: the checkpoints the session layer lists for a stored log.

Each check appends a log to the backend and asks the session layer's
``list_checkpoints`` for its checkpoints through the handle, then compares them
with the spec's oracle (`checkpoints_model`, over the log as the backend returns
it) and with the checkpoints the rule gives for that log, written out by hand.
"""

from __future__ import annotations

import base64

from ...spec import (
    AssistantMessage,
    BackgroundCompletion,
    Checkpoint,
    Checkpointer,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    ToolCall,
    ToolResult,
    UnavailableFile,
    UserPrompt,
    checkpoints_model,
    content_hash,
)
from ...spec.events import FileEncoding
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
from ..engines.search.properties import run_property
from ._session import append_log, same, session_logs
from .base import check

__all__ = ["CHECKS"]


def _snap(
    path: str,
    before: str | None,
    *,
    truncated: bool = False,
    encoding: FileEncoding = "utf-8",
    tool_call_id: str | None = None,
) -> FileSnapshot:
    return FileSnapshot(
        path,
        before,
        truncated=truncated,
        encoding=encoding,
        hash_after=content_hash(b"after"),
        tool_call_id=tool_call_id,
    )


def _log() -> list[SessionEvent]:
    """A session with prompts of both forms, non-prompt user input, and snapshots of
    every kind after them."""
    return [
        UserPrompt("first"),  # 1
        AssistantMessage("", tool_calls=(ToolCall("t1", "edit", "{}"),)),  # 2
        _snap("a.txt", "a v1", tool_call_id="t1"),  # 3
        _snap("dir//./b.txt", None, tool_call_id="t1"),  # 4: recorded non-canonically
        ToolResult("t1", "edited"),  # 5
        RuntimeReminder("not a checkpoint"),  # 6
        UserPrompt("second", blocks=("attached file",)),  # 7
        BackgroundCompletion("job", "not a checkpoint either"),  # 8
        _snap("a.txt", "a v2"),  # 9
        _snap("big.bin", "", truncated=True),  # 10
        _snap("../escape.txt", "x"),  # 11
        _snap("bad.bin", "!!not base64!!", encoding="base64"),  # 12
        RepairMessage("repaired, not a checkpoint"),  # 13
        UserPrompt("third"),  # 14
        _snap("c.txt", base64.b64encode(b"\xff\x00").decode(), encoding="base64"),  # 15
        _snap("big.bin", "small now"),  # 16: the earliest one after 14 decides
        UserPrompt("last"),  # 17
    ]


async def _listed(h: Harness, session_id: str) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """What the layer lists for the session of `_log`, and what the oracle says."""
    cp = await h.open()
    log = await append_log(cp, session_id, _log())
    listed = await h.session.list_checkpoints(cp, session_id)
    return list(listed), checkpoints_model(log)


@check("CKPT-001")
async def one_checkpoint_per_user_prompt(h: Harness) -> None:
    """CKPT-001: one checkpoint per user prompt, in seq order, with its seq, text and ts."""
    listed, model = await _listed(h, "ckpt")
    assert [c.seq for c in model] == [1, 7, 14, 17]
    same(
        "CKPT-001",
        "(seq, prompt, ts) of the checkpoints",
        [(c.seq, c.prompt, c.ts) for c in listed],
        [(c.seq, c.prompt, c.ts) for c in model],
    )
    cp = await h.open()
    same(
        "CKPT-001",
        "checkpoints of an unknown session",
        await h.session.list_checkpoints(cp, "none"),
        [],
    )


@check("CKPT-002")
async def a_checkpoint_lists_the_files_a_restore_puts_back(h: Harness) -> None:
    """CKPT-002: a checkpoint's files are the restorable paths snapshotted after it, canonical and sorted."""
    listed, model = await _listed(h, "ckpt")
    expected = [
        ("a.txt", "c.txt", "dir/b.txt"),
        ("a.txt", "c.txt"),
        ("big.bin", "c.txt"),
        (),
    ]
    assert [c.files for c in model] == expected
    same("CKPT-002", "files of each checkpoint", [c.files for c in listed], expected)
    same("CKPT-002", "the checkpoints", listed, model)


@check("CKPT-003")
async def a_checkpoint_lists_what_it_cannot_put_back(h: Harness) -> None:
    """CKPT-003: unavailable_files name every other path snapshotted after it, with its reason."""
    listed, model = await _listed(h, "ckpt")
    after_first = (
        UnavailableFile("../escape.txt", "unsafe_path"),
        UnavailableFile("bad.bin", "undecodable"),
        UnavailableFile("big.bin", "truncated"),
    )
    expected = [after_first, after_first, (), ()]
    assert [c.unavailable_files for c in model] == expected
    same(
        "CKPT-003",
        "unavailable_files of each checkpoint",
        [c.unavailable_files for c in listed],
        expected,
    )
    for c in listed:
        both = set(c.files) & {u.path for u in c.unavailable_files}
        same("CKPT-003", f"paths both in files and unavailable_files at seq {c.seq}", both, set())


@check("CKPT-001", "CKPT-002", "CKPT-003", kind="property")
def generated_logs_list_as_the_model(h: Harness) -> None:
    """CKPT-001: the checkpoints of generated logs are checkpoints_model's (every CKPT rule)."""

    async def body(cp: Checkpointer, events: list[SessionEvent]) -> None:
        log = await append_log(cp, "generated", events)
        listed = list(await h.session.list_checkpoints(cp, "generated"))
        expected = checkpoints_model(log)
        if listed == expected:
            return
        heads = [(c.seq, c.prompt, c.ts) for c in listed]
        if heads != [(c.seq, c.prompt, c.ts) for c in expected]:
            rule_id = "CKPT-001"
        elif [c.files for c in listed] != [c.files for c in expected]:
            rule_id = "CKPT-002"
        else:
            rule_id = "CKPT-003"
        raise RuleViolation(
            rule_id,
            f"checkpoints of a generated log:\n  got      {listed!r}\n  expected {expected!r}",
        )

    run_property(h, session_logs(), body)


CHECKS = (
    one_checkpoint_per_user_prompt,
    a_checkpoint_lists_the_files_a_restore_puts_back,
    a_checkpoint_lists_what_it_cannot_put_back,
    generated_logs_list_as_the_model,
)
