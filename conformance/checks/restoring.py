"""Checks of the RESTORE rules (but RESTORE-006): restore rolls files and log back, or nothing.

Each check builds a session the way an agent does, through the session layer's
``Workspace`` on a handle of the backend under test (prompts, tool calls, file
writes and deletes), then restores it with the layer's ``restore``. What the
restore must do comes from the spec's oracle: `plan_restore` says what the
files and the log become, or which `RestoreError` the preflight raises, and
`apply_plan` gives the files after. Files are read out of band with
``pathlib`` (the layer's reserved ``.checkpointspec`` folder left out), the log
through the handle.

Failures mid-restore are made without touching the layer: a `FullDisk` file
system passed as ``fs`` runs out of space at one write; an `Intercepted` handle
appends an event just before the layer's truncate (the log moves on); the
cancel event is set from the progress callback after the first file.
RESTORE-006 (a killed restore) is checked in ``restoring_killed.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from ...spec import (
    AssistantMessage,
    Checkpointer,
    FileSnapshot,
    RestoreError,
    RestoreProgress,
    RestoreReason,
    RestoreResult,
    RuntimeReminder,
    SessionWorkspace,
    StoredEvent,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    apply_plan,
    content_hash,
    plan_restore,
)
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness, read_all
from ._session import FullDisk, Intercepted, events_of, files_under, same, write_files
from .base import check

__all__ = ["CHECKS"]


class Edited:
    """A session of three prompts with tool calls editing files after each, in its
    own workspace directory under the check's root."""

    def __init__(self, h: Harness, name: str) -> None:
        self.h = h
        self.session_id = name
        self.root = h.root / name
        self.root.mkdir(parents=True)
        self.prompts: list[int] = []

    async def build(
        self, cp: Checkpointer, *, snapshot_limit: int | None = None
    ) -> SessionWorkspace:
        """Write the session through the layer's workspace on ``cp``: after the first
        prompt a.txt and b.txt are created; after the second a.txt changes, b.txt is
        deleted and c/new.txt created; after the third a.txt changes again. Each edit
        is a tool call (assistant message, tool start, the edit, its result), so the
        log has no open call. ``self.prompts`` gets the prompts' seqs."""
        if snapshot_limit is None:
            ws = self.h.session.Workspace(self.root, cp, self.session_id)
        else:
            ws = self.h.session.Workspace(
                self.root, cp, self.session_id, snapshot_limit=snapshot_limit
            )
        sid = self.session_id
        call = 0

        async def tool(edit: Callable[[str], Awaitable[FileSnapshot]]) -> None:
            nonlocal call
            call += 1
            call_id = f"t{call}"
            await cp.append(sid, [AssistantMessage("", (ToolCall(call_id, "edit", "{}"),))])
            await cp.append(sid, [ToolStarted(call_id, "edit")])
            await edit(call_id)
            await cp.append(sid, [ToolResult(call_id, "ok")])

        self.prompts.append(await cp.append(sid, [UserPrompt("one")]))
        await tool(lambda t: ws.write("a.txt", b"a1", tool_call_id=t))
        await tool(lambda t: ws.write("b.txt", b"b1", tool_call_id=t))
        self.prompts.append(await cp.append(sid, [UserPrompt("two")]))
        await tool(lambda t: ws.write("a.txt", b"a2", tool_call_id=t))
        await tool(lambda t: ws.delete("b.txt", tool_call_id=t))
        await tool(lambda t: ws.write("c/new.txt", b"new", tool_call_id=t))
        await cp.append(sid, [AssistantMessage("done")])
        self.prompts.append(await cp.append(sid, [UserPrompt("three")]))
        await tool(lambda t: ws.write("a.txt", b"a3", tool_call_id=t))
        await self._check_prompt_heads(cp)
        return ws

    async def _check_prompt_heads(self, cp: Checkpointer) -> None:
        """The heads append returned for the prompts are their seqs in the log (SEQ-003):
        the check restores to them."""
        log = await read_all(cp, self.session_id)
        in_log = [stored.seq for stored in log if isinstance(stored.event, UserPrompt)]
        if in_log != self.prompts:
            raise RuleViolation(
                "SEQ-003",
                f"append returned the heads {self.prompts} for the prompts of session "
                f"{self.session_id!r}, which reads them back at seqs {in_log}",
            )


async def _expect_refusal(
    rule_id: str,
    cp: Checkpointer,
    session_id: str,
    root: Path | None,
    seq: int,
    reason: RestoreReason,
    restore: Callable[[], Awaitable[RestoreResult]],
    *,
    log_after: list[StoredEvent] | None = None,
) -> None:
    """``restore`` must raise RestoreError(``reason``) and leave files and log as they
    were (the log as ``log_after`` when another writer moved it on)."""
    files = files_under(root) if root is not None else {}
    log = await read_all(cp, session_id)
    try:
        result = await restore()
    except RestoreError as exc:
        same(rule_id, f"reason_code of the restore to {seq}", exc.reason_code, reason)
    else:
        raise RuleViolation(
            rule_id,
            f"the restore of {session_id!r} to {seq} returned {result!r} instead of raising "
            f"RestoreError({reason.value})",
        )
    if root is not None:
        same(
            rule_id,
            f"the files after a restore refused with {reason.value}",
            files_under(root),
            files,
        )
    same(
        rule_id,
        f"the log after a restore refused with {reason.value}",
        events_of(await read_all(cp, session_id)),
        events_of(log_after if log_after is not None else log),
    )


def _expect_prompt_at(log: list[StoredEvent], seq: int, session_id: str) -> None:
    """The head append returned for a prompt, ``seq``, is a prompt's seq in ``log`` (SEQ-003)."""
    if not any(s.seq == seq and isinstance(s.event, UserPrompt) for s in log):
        raise RuleViolation(
            "SEQ-003",
            f"append returned the head {seq} for a prompt of session {session_id!r}, "
            "which holds no prompt at that seq",
        )


def _oracle_refusal(
    session_id: str,
    log: list[StoredEvent],
    seq: int,
    current: dict[str, bytes] | None,
    **flags: bool,
) -> RestoreError:
    try:
        plan_restore(session_id, log, seq, current, **flags)
    except RestoreError as exc:
        return exc
    raise AssertionError(f"plan_restore accepts the restore to {seq} the check expects refused")


@check("RESTORE-001")
async def restore_rolls_files_and_log_back(h: Harness) -> None:
    """RESTORE-001: restore leaves events 1..seq-1 and every file as its earliest snapshot after seq had it."""
    cp = await h.open()
    edited = Edited(h, "rolled")
    ws = await edited.build(cp)
    for seq, expected_files in (
        (edited.prompts[2], {"a.txt": b"a2", "c/new.txt": b"new"}),
        (edited.prompts[1], {"a.txt": b"a1", "b.txt": b"b1"}),
    ):
        log = await read_all(cp, edited.session_id)
        before = files_under(edited.root)
        plan = plan_restore(edited.session_id, log, seq, before)
        after = apply_plan(before, plan)
        assert after == expected_files, after
        result = await h.session.restore(cp, edited.session_id, seq, workspace=ws)
        same(
            "RESTORE-001", f"the files after the restore to {seq}", files_under(edited.root), after
        )
        same(
            "RESTORE-001",
            f"the log after the restore to {seq}",
            events_of(await read_all(cp, edited.session_id)),
            events_of(log[: seq - 1]),
        )
        same(
            "RESTORE-001",
            f"restored_files of the restore to {seq}",
            sorted(result.restored_files),
            [f.path for f in plan.files],
        )
        same("RESTORE-001", "conversation_restored", result.conversation_restored, True)
    # A workspace given by its path works the same as a Workspace.
    other = Edited(h, "by-path")
    await other.build(cp)
    await h.session.restore(cp, other.session_id, other.prompts[0], workspace=str(other.root))
    same(
        "RESTORE-001",
        "the files after the restore to the first prompt",
        files_under(other.root),
        {},
    )
    same(
        "RESTORE-001",
        "the log after the restore to seq 1",
        await read_all(cp, other.session_id),
        [],
    )


@check("RESTORE-002")
async def the_target_is_validated(h: Harness) -> None:
    """RESTORE-002: an unknown session or a seq that is not a user prompt is refused, nothing changed."""
    cp = await h.open()
    edited = Edited(h, "target")
    ws = await edited.build(cp)
    log = await read_all(cp, edited.session_id)
    head = log[-1].seq
    not_prompts = [s.seq for s in log if not isinstance(s.event, UserPrompt)][:2]
    for seq in (*not_prompts, 0, head + 1, head + 50):
        expected = _oracle_refusal(edited.session_id, log, seq, files_under(edited.root))
        await _expect_refusal(
            "RESTORE-002",
            cp,
            edited.session_id,
            edited.root,
            seq,
            expected.reason_code,
            partial(h.session.restore, cp, edited.session_id, seq, workspace=ws),
        )
    await _expect_refusal(
        "RESTORE-002",
        cp,
        "ghost",
        edited.root,
        1,
        RestoreReason.UNKNOWN_SESSION,
        lambda: h.session.restore(cp, "ghost", 1, workspace=ws),
    )


@check("RESTORE-003")
async def everything_is_preflighted(h: Harness) -> None:
    """RESTORE-003: each preflight refusal (open tool call, no workspace, unsafe path, truncated or undecodable snapshot, out-of-band change) changes nothing."""
    cp = await h.open()

    async def case(
        name: str,
        reason: RestoreReason,
        prepare: Callable[[Edited], Awaitable[None]],
        *,
        with_workspace: bool = True,
        snapshot_limit: int | None = None,
    ) -> None:
        edited = Edited(h, name)
        await edited.build(cp, snapshot_limit=snapshot_limit)
        await prepare(edited)
        seq = edited.prompts[1]
        log = await read_all(cp, edited.session_id)
        _expect_prompt_at(log, seq, edited.session_id)
        current = files_under(edited.root) if with_workspace else None
        expected = _oracle_refusal(edited.session_id, log, seq, current)
        assert expected.reason_code is reason, expected
        workspace = str(edited.root) if with_workspace else None
        files = files_under(edited.root)
        try:
            result = await h.session.restore(cp, edited.session_id, seq, workspace=workspace)
        except RestoreError as exc:
            same("RESTORE-003", f"reason_code ({name})", exc.reason_code, reason)
            same("RESTORE-003", f"path of the refusal ({name})", exc.path, expected.path)
        else:
            raise RuleViolation(
                "RESTORE-003",
                f"{name}: the restore to {seq} returned {result!r} instead of raising "
                f"RestoreError({reason.value})",
            )
        same(
            "RESTORE-003",
            f"the files after a refused restore ({name})",
            files_under(edited.root),
            files,
        )
        same(
            "RESTORE-003",
            f"the log after a refused restore ({name})",
            events_of(await read_all(cp, edited.session_id)),
            events_of(log),
        )

    async def open_call(edited: Edited) -> None:
        # A tool call left open before the third prompt, by a log written that way.
        await cp.append(
            edited.session_id, [AssistantMessage("", (ToolCall("open", "edit", "{}"),))]
        )
        edited.prompts[1] = await cp.append(edited.session_id, [UserPrompt("after an open call")])

    async def nothing(edited: Edited) -> None:
        del edited

    async def snapshot_of(edited: Edited, snapshot: FileSnapshot) -> None:
        await cp.append(edited.session_id, [snapshot])

    async def out_of_band(edited: Edited) -> None:
        # a.txt is fine; c/new.txt (later in path order) was edited by someone else.
        write_files(edited.root, {"c/new.txt": b"edited by hand"})

    await case("unfinished", RestoreReason.UNFINISHED_TOOL_CALL, open_call)
    await case("no-workspace", RestoreReason.WORKSPACE_REQUIRED, nothing, with_workspace=False)
    await case(
        "unsafe",
        RestoreReason.UNSAFE_PATH,
        lambda e: snapshot_of(e, FileSnapshot("../escape.txt", "x", hash_after=content_hash(b"y"))),
    )
    await case("truncated", RestoreReason.SNAPSHOT_TRUNCATED, nothing, snapshot_limit=1)
    await case(
        "undecodable",
        RestoreReason.SNAPSHOT_UNDECODABLE,
        lambda e: snapshot_of(
            e, FileSnapshot("u.bin", "!!", encoding="base64", hash_after=content_hash(b"u"))
        ),
    )
    await case("out-of-band", RestoreReason.OUT_OF_BAND_CHANGE, out_of_band)

    # A latest snapshot without hash_after cannot be checked: reported, restored all the same.
    edited = Edited(h, "unchecked")
    await edited.build(cp)
    write_files(edited.root, {"old.txt": b"whatever is there"})
    await cp.append(edited.session_id, [FileSnapshot("old.txt", "old")])
    seq = edited.prompts[2]
    plan = plan_restore(
        edited.session_id, await read_all(cp, edited.session_id), seq, files_under(edited.root)
    )
    assert plan.unchecked == ("old.txt",)
    result = await h.session.restore(cp, edited.session_id, seq, workspace=str(edited.root))
    same("RESTORE-003", "unchecked_files", tuple(sorted(result.unchecked_files)), plan.unchecked)
    same(
        "RESTORE-003", "old.txt after the restore", files_under(edited.root).get("old.txt"), b"old"
    )


@check("RESTORE-004")
async def files_and_conversation_flags(h: Harness) -> None:
    """RESTORE-004: files=False touches no file, conversation=False keeps the log; the result says so."""
    cp = await h.open()
    edited = Edited(h, "log-only")
    await edited.build(cp)
    seq = edited.prompts[1]
    files = files_under(edited.root)
    log = await read_all(cp, edited.session_id)
    result = await h.session.restore(
        cp, edited.session_id, seq, workspace=str(edited.root), files=False
    )
    same("RESTORE-004", "the files after files=False", files_under(edited.root), files)
    same(
        "RESTORE-004",
        "the log after files=False",
        events_of(await read_all(cp, edited.session_id)),
        events_of(log[: seq - 1]),
    )
    same("RESTORE-004", "restored_files with files=False", tuple(result.restored_files), ())
    same(
        "RESTORE-004", "conversation_restored with files=False", result.conversation_restored, True
    )

    edited = Edited(h, "files-only")
    await edited.build(cp)
    seq = edited.prompts[1]
    before = files_under(edited.root)
    log = await read_all(cp, edited.session_id)
    plan = plan_restore(edited.session_id, log, seq, before, conversation=False)
    result = await h.session.restore(
        cp, edited.session_id, seq, workspace=str(edited.root), conversation=False
    )
    same(
        "RESTORE-004",
        "the files after conversation=False",
        files_under(edited.root),
        apply_plan(before, plan),
    )
    same(
        "RESTORE-004",
        "the log after conversation=False",
        events_of(await read_all(cp, edited.session_id)),
        events_of(log),
    )
    same(
        "RESTORE-004",
        "restored_files with conversation=False",
        sorted(result.restored_files),
        [f.path for f in plan.files],
    )
    same(
        "RESTORE-004",
        "conversation_restored with conversation=False",
        result.conversation_restored,
        False,
    )


@check("RESTORE-005")
async def a_failed_or_cancelled_restore_puts_everything_back(h: Harness) -> None:
    """RESTORE-005: a full disk, a truncate conflict and a cancellation leave files and log as they were."""
    cp = await h.open()
    for fail_at in (1, 2):  # the restore writes a.txt and b.txt back, and deletes c/new.txt
        edited = Edited(h, f"full-disk-{fail_at}")
        await edited.build(cp)
        disk = FullDisk(fail_at)
        await _expect_refusal(
            "RESTORE-005",
            cp,
            edited.session_id,
            edited.root,
            edited.prompts[1],
            RestoreReason.APPLY_FAILED,
            partial(
                h.session.restore,
                cp,
                edited.session_id,
                edited.prompts[1],
                workspace=str(edited.root),
                fs=disk,
            ),
        )
        if not disk.failed:
            raise RuleViolation(
                "RESTORE-005",
                "restore wrote the workspace's files without the FileSystem it was given (fs=)",
            )

    edited = Edited(h, "conflict")
    await edited.build(cp)
    spy = Intercepted(cp)
    moved_on = RuntimeReminder("written while the restore ran")

    async def other_writer() -> None:
        await cp.append(edited.session_id, [moved_on])

    spy.before_truncate = other_writer
    log = await read_all(cp, edited.session_id)
    await _expect_refusal(
        "RESTORE-005",
        cp,
        edited.session_id,
        edited.root,
        edited.prompts[1],
        RestoreReason.LOG_CHANGED,
        lambda: h.session.restore(
            spy.as_checkpointer(), edited.session_id, edited.prompts[1], workspace=str(edited.root)
        ),
        log_after=[
            *log,
            StoredEvent(log[-1].seq + 1, edited.session_id, log[-1].seq, "", moved_on),
        ],
    )
    if spy.before_truncate is not None:
        raise RuleViolation(
            "RESTORE-005", "restore never truncated the log through the handle it was given"
        )

    for after_files in (0, 1):
        edited = Edited(h, f"cancel-{after_files}")
        await edited.build(cp)
        cancel = asyncio.Event()
        if after_files == 0:
            cancel.set()

        def progress(
            report: RestoreProgress, cancel: asyncio.Event = cancel, after: int = after_files
        ) -> None:
            if report.phase == "progress" and report.completed >= after:
                cancel.set()

        await _expect_refusal(
            "RESTORE-005",
            cp,
            edited.session_id,
            edited.root,
            edited.prompts[1],
            RestoreReason.CANCELLED,
            partial(
                h.session.restore,
                cp,
                edited.session_id,
                edited.prompts[1],
                workspace=str(edited.root),
                cancel=cancel,
                progress=progress,
            ),
        )


@check("RESTORE-007")
async def restore_reports_its_progress(h: Harness) -> None:
    """RESTORE-007: start first, one progress per file with completed/total, done (or error) last."""
    cp = await h.open()
    edited = Edited(h, "progress")
    await edited.build(cp)
    seq = edited.prompts[1]
    plan = plan_restore(
        edited.session_id, await read_all(cp, edited.session_id), seq, files_under(edited.root)
    )
    reports: list[tuple[str, int, int]] = []

    def progress(report: RestoreProgress) -> None:
        reports.append((report.phase, report.completed, report.total))

    await h.session.restore(
        cp, edited.session_id, seq, workspace=str(edited.root), progress=progress
    )
    total = len(plan.files)
    phases = [phase for phase, _, _ in reports]
    same(
        "RESTORE-007",
        "the phases reported by a restore",
        phases,
        ["start", *["progress"] * total, "done"],
    )
    same(
        "RESTORE-007",
        "(completed, total) of each progress report",
        [(c, t) for phase, c, t in reports if phase == "progress"],
        [(i, total) for i in range(1, total + 1)],
    )

    refused = Edited(h, "progress-refused")
    await refused.build(cp)
    write_files(refused.root, {"a.txt": b"changed by hand"})
    reports.clear()
    try:
        await h.session.restore(
            cp,
            refused.session_id,
            refused.prompts[1],
            workspace=str(refused.root),
            progress=progress,
        )
    except RestoreError:
        pass
    else:
        raise RuleViolation("RESTORE-007", "a restore over an out-of-band change did not raise")
    phases = [phase for phase, _, _ in reports]
    if not phases or phases[0] != "start" or phases[-1] != "error" or "done" in phases:
        raise RuleViolation(
            "RESTORE-007",
            f"a refused restore reported {phases}; it must start with start and end with error",
        )


CHECKS = (
    restore_rolls_files_and_log_back,
    the_target_is_validated,
    everything_is_preflighted,
    files_and_conversation_flags,
    a_failed_or_cancelled_restore_puts_everything_back,
    restore_reports_its_progress,
)
