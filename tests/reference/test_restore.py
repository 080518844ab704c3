"""restore: what it puts back, what it refuses, its flags and its progress (RESTORE-001..004, 007).

Every expectation comes from the oracle (`plan_restore`, `apply_plan`) or is a
whole state compared before and after: a refusal must leave files and log
exactly as they were.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.reference import Workspace, recover, restore
from checkpointspec.reference.journal import journal_path
from checkpointspec.reference.maintenance import maintenance
from checkpointspec.spec import (
    RESERVED_DIR,
    AssistantMessage,
    Capability,
    FileSnapshot,
    RecoveryOutcome,
    RestoreError,
    RestoreProgress,
    RestoreReason,
    RestoreResult,
    SessionLockedError,
    ToolCall,
    UnsupportedOperationError,
    UserPrompt,
    make_snapshot,
)
from helpers import run
from restore_scenes import Scene, standard_scene

# -- RESTORE-001: files and log go back to just before the prompt --------------------------


def test_restore_puts_files_and_log_back_as_the_oracle_says(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        want = await scene.expected_after(seq)
        result = await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert await scene.state() == want
        assert result == RestoreResult(("a.txt", "b.bin", "c.txt", "e.bin", "sub/d.txt"), True, ())
        assert not os.path.exists(journal_path(str(tmp_path), scene.sid))

    run(go())


def test_restore_to_the_first_prompt_empties_the_log_and_deletes_created_files(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        scene, _ = await standard_scene(tmp_path)
        await restore(scene.cp, scene.sid, 1, workspace=tmp_path)
        files, log = await scene.state()
        assert (files, log) == ({}, ())

    run(go())


def test_a_session_written_through_workspace_is_restored(tmp_path: Path) -> None:
    async def go() -> None:
        cp = MemoryCheckpointer()
        ws = await Workspace.open(tmp_path, cp, "s")
        await cp.append("s", [UserPrompt("p1")])
        await ws.write("keep.txt", b"k0")
        await ws.write("gone.bin", b"\x00\xff")
        seq = await cp.append("s", [UserPrompt("p2")])
        await ws.write("keep.txt", "k1 \u00e9")
        await ws.delete("gone.bin")
        await ws.write("deep/new.txt", b"n")
        scene = Scene(tmp_path, cp, "s")
        want = await scene.expected_after(seq)
        result = await restore(cp, "s", seq, workspace=ws)
        assert result.restored_files == ("deep/new.txt", "gone.bin", "keep.txt")
        assert await scene.state() == want

    run(go())


def test_a_symlink_inside_the_root_is_followed_and_kept(tmp_path: Path) -> None:
    async def go() -> None:
        scene = Scene(tmp_path)
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        seq = await scene.prompt("edit through the link")
        await scene.tool_write("link/f.txt", b"new")
        await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert (tmp_path / "link").is_symlink()
        assert not (tmp_path / "real" / "f.txt").exists()

    run(go())


def test_a_file_the_tool_never_wrote_is_restored(tmp_path: Path) -> None:
    """The tool recorded the snapshot and died before writing (SNAP-004)."""

    async def go() -> None:
        scene = Scene(tmp_path)
        await scene.prompt("p1")
        await scene.tool_write("a.txt", b"old")
        seq = await scene.prompt("p2")
        await scene.tool_write("a.txt", b"new", write=False)
        await scene.tool_write("fresh.txt", b"x", write=False)
        want = await scene.expected_after(seq)
        result = await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert result.restored_files == ("a.txt", "fresh.txt")
        assert await scene.state() == want

    run(go())


def test_files_without_hash_are_restored_and_reported_unchecked(tmp_path: Path) -> None:
    async def go() -> None:
        scene = Scene(tmp_path)
        await scene.prompt("p1")
        await scene.tool_write("old.txt", b"v0", hashed=False)
        seq = await scene.prompt("p2")
        await scene.tool_write("old.txt", b"v1", hashed=False)
        await scene.tool_write("new.txt", b"n1")
        scene.put("old.txt", b"edited by hand: cannot be told apart")
        want = await scene.expected_after(seq)
        result = await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert result.unchecked_files == ("old.txt",)
        assert result.restored_files == ("new.txt", "old.txt")
        assert await scene.state() == want

    run(go())


# -- RESTORE-002, RESTORE-003: refusals change nothing ------------------------------------


async def _refused(
    scene: Scene, seq: int, reason: RestoreReason, path: str | None, **kw: object
) -> RestoreError:
    """Restore must raise ``reason`` at ``path`` and leave the state as it was."""
    before = await scene.state()
    reports: list[RestoreProgress] = []
    workspace = kw.pop("workspace", scene.root)
    with pytest.raises(RestoreError) as refused:
        await restore(
            scene.cp,
            scene.sid,
            seq,
            workspace=workspace,  # type: ignore[arg-type]
            progress=reports.append,
            **kw,  # type: ignore[arg-type]
        )
    assert (refused.value.reason_code, refused.value.path) == (reason, path)
    assert (refused.value.session_id, refused.value.seq) == (scene.sid, seq)
    assert await scene.state() == before
    assert [r.phase for r in reports] == ["start", "error"]
    assert not (scene.root / RESERVED_DIR).exists() or not os.listdir(scene.root / RESERVED_DIR)
    return refused.value


def test_unknown_session_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene = Scene(tmp_path, sid="nobody")
        await _refused(scene, 1, RestoreReason.UNKNOWN_SESSION, None)

    run(go())


@pytest.mark.parametrize("seq", [0, 2, 3, 99, -1])
def test_a_seq_that_is_not_a_prompt_is_refused(tmp_path: Path, seq: int) -> None:
    async def go() -> None:
        scene = Scene(tmp_path)
        await scene.prompt("p1")
        await scene.tool_write("a.txt", b"a")
        await scene.tool_turn("t")
        await _refused(scene, seq, RestoreReason.NOT_A_CHECKPOINT, None)

    run(go())


def test_an_unfinished_tool_call_before_the_prompt_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene = Scene(tmp_path)
        await scene.prompt("p1")
        await scene.append(AssistantMessage("", (ToolCall("open", "edit", "{}"),)))
        seq = await scene.prompt("p2")
        await scene.tool_write("a.txt", b"a")
        await _refused(scene, seq, RestoreReason.UNFINISHED_TOOL_CALL, None)
        # Without the conversation there is no cut, so the boundary does not matter.
        await restore(scene.cp, scene.sid, seq, workspace=tmp_path, conversation=False)
        assert scene.read("a.txt") is None

    run(go())


def test_files_to_restore_without_a_workspace_are_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        await _refused(scene, seq, RestoreReason.WORKSPACE_REQUIRED, "a.txt", workspace=None)

    run(go())


@pytest.mark.parametrize("bad", ["../outside.txt", "/etc/passwd", "a/../../x"])
def test_a_snapshot_path_that_climbs_out_is_refused(tmp_path: Path, bad: str) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path / "ws")
        await scene.append(FileSnapshot(bad, "x", hash_after="absent"))
        await _refused(scene, seq, RestoreReason.UNSAFE_PATH, bad)

    run(go())


def test_a_path_through_a_symlink_leaving_the_root_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "f.txt").write_bytes(b"precious")
        scene, seq = await standard_scene(tmp_path / "ws")
        (scene.root / "esc").symlink_to(outside)
        await scene.append(make_snapshot("esc/f.txt", b"precious", b"precious"))
        await _refused(scene, seq, RestoreReason.UNSAFE_PATH, "esc/f.txt")
        assert (outside / "f.txt").read_bytes() == b"precious"

    run(go())


def test_a_snapshot_of_the_reserved_folder_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        await scene.append(make_snapshot(f"{RESERVED_DIR}/x", None, None))
        await _refused(scene, seq, RestoreReason.UNSAFE_PATH, f"{RESERVED_DIR}/x")

    run(go())


def test_the_first_problem_in_path_order_is_reported(tmp_path: Path) -> None:
    """A symlink escape is a per-path problem: it loses to an earlier path's, wins over later ones."""

    async def go() -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        scene, seq = await standard_scene(tmp_path / "ws")
        (scene.root / "m").symlink_to(outside)
        await scene.append(make_snapshot("m/f.txt", None, b"x"))
        await scene.append(FileSnapshot("z.txt", "", truncated=True, hash_after="absent"))
        await _refused(scene, seq, RestoreReason.UNSAFE_PATH, "m/f.txt")
        await scene.append(FileSnapshot("b0.txt", "", truncated=True, hash_after="absent"))
        await _refused(scene, seq, RestoreReason.SNAPSHOT_TRUNCATED, "b0.txt")

    run(go())


def test_a_truncated_snapshot_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        big = b"x" * 64
        scene.put("big.txt", big)
        await scene.append(make_snapshot("big.txt", big, b"small", limit=16))
        scene.put("big.txt", b"small")
        await _refused(scene, seq, RestoreReason.SNAPSHOT_TRUNCATED, "big.txt")

    run(go())


def test_an_undecodable_snapshot_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        await scene.append(FileSnapshot("bad.bin", "@@not base64@@", encoding="base64"))
        await _refused(scene, seq, RestoreReason.SNAPSHOT_UNDECODABLE, "bad.bin")

    run(go())


@pytest.mark.parametrize(
    ("path", "content"),
    [("a.txt", b"edited by hand"), ("c.txt", b"recreated by hand"), ("e.bin", None)],
)
def test_an_out_of_band_change_is_refused(tmp_path: Path, path: str, content: bytes | None) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        scene.put(path, content)
        await _refused(scene, seq, RestoreReason.OUT_OF_BAND_CHANGE, path)

    run(go())


def test_a_directory_where_a_file_was_is_an_out_of_band_change(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        (tmp_path / "c.txt").mkdir()
        await _refused(scene, seq, RestoreReason.OUT_OF_BAND_CHANGE, "c.txt")

    run(go())


def test_the_reference_refuses_exactly_what_the_oracle_refuses(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        scene.put("sub/d.txt", b"changed")
        scene.put("a.txt", b"changed too")
        with pytest.raises(RestoreError) as oracle:
            await scene.plan(seq)
        error = await _refused(scene, seq, oracle.value.reason_code, oracle.value.path)
        assert error.path == "a.txt"

    run(go())


def test_a_conversation_restore_needs_truncate(tmp_path: Path) -> None:
    class NoTruncate(MemoryCheckpointer):
        capabilities = MemoryCheckpointer.capabilities - {Capability.TRUNCATE}

    async def go() -> None:
        scene, seq = await standard_scene(tmp_path, NoTruncate())
        before = await scene.state()
        with pytest.raises(UnsupportedOperationError):
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert await scene.state() == before
        want = await scene.expected_after(seq, conversation=False)
        await restore(scene.cp, scene.sid, seq, workspace=tmp_path, conversation=False)
        assert await scene.state() == want

    run(go())


def test_a_held_session_is_refused(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        before = await scene.state()
        async with maintenance(scene.cp, scene.sid):
            with pytest.raises(SessionLockedError):
                await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert await scene.state() == before

    run(go())


# -- RESTORE-004: the flags ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "conversation"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_the_flags_restore_exactly_what_they_say(
    tmp_path: Path, files: bool, conversation: bool
) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        want = await scene.expected_after(seq, files=files, conversation=conversation)
        result = await restore(
            scene.cp, scene.sid, seq, workspace=tmp_path, files=files, conversation=conversation
        )
        assert await scene.state() == want
        assert result.conversation_restored is conversation
        assert bool(result.restored_files) is files

    run(go())


def test_files_false_needs_no_workspace_and_ignores_file_problems(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        scene.put("a.txt", b"out of band")
        await scene.append(FileSnapshot("../x", "", truncated=True))
        want = await scene.expected_after(seq, files=False)
        result = await restore(scene.cp, scene.sid, seq, files=False)
        assert result == RestoreResult((), True, ())
        assert await scene.state() == want

    run(go())


# -- RESTORE-007: progress -----------------------------------------------------------------


def test_progress_reports_start_each_file_and_done(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        reports: list[RestoreProgress] = []
        result = await restore(
            scene.cp, scene.sid, seq, workspace=tmp_path, progress=reports.append
        )
        n = len(result.restored_files)
        assert reports[0] == RestoreProgress("start", 0, n)
        assert reports[1:-1] == [
            RestoreProgress("progress", i, n, path)
            for i, path in enumerate(result.restored_files, start=1)
        ]
        assert reports[-1] == RestoreProgress("done", n, n)

    run(go())


def test_progress_of_a_conversation_only_restore_has_no_files(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        reports: list[RestoreProgress] = []
        await restore(scene.cp, scene.sid, seq, files=False, progress=reports.append)
        assert [r.phase for r in reports] == ["start", "done"]

    run(go())


# -- recover with nothing to do --------------------------------------------------------------


def test_recover_without_a_journal_does_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        scene, _ = await standard_scene(tmp_path)
        before = await scene.state()
        assert await recover(scene.cp, scene.sid, tmp_path) == RecoveryOutcome.NOTHING
        assert await recover(scene.cp, scene.sid, str(tmp_path)) == "nothing"
        assert await scene.state() == before

    run(go())


def test_the_reserved_folder_is_refused_whatever_its_case(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        await scene.append(make_snapshot(".CheckpointSpec/x", None, None))
        await _refused(scene, seq, RestoreReason.UNSAFE_PATH, ".CheckpointSpec/x")

    run(go())
