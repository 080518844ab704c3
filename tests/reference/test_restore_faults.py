"""restore under failure: write errors, truncate conflicts, cancellation, death (RESTORE-005, -006).

Faults are injected at every point a clean restore passes, counted first:

- write failures through `HookedFileSystem`, whose hook raises ENOSPC or EACCES
  just before the Nth write, rename or fsync;
- death through a hook raising `_Died`, a BaseException, which restore does not
  catch: the journal stays as a killed process would leave it, and `recover`
  must then give the pre-restore state (died before the truncate) or the
  post-restore state (after it), computed by the oracle.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from checkpointspec.backends.fsport import HookedFileSystem, OsFileSystem
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.reference import recover
from checkpointspec.reference.journal import journal_path
from checkpointspec.reference.restore import FAULT_POINTS, restore
from checkpointspec.spec import (
    Checkpointer,
    RecoveryOutcome,
    RestoreError,
    RestoreProgress,
    RestoreReason,
    SessionLockedError,
    UserPrompt,
    encode_event,
)
from helpers import read_all, run
from restore_scenes import Scene, State, standard_scene

_FAILING = ("write.before", "rename.before", "fsync.before")
"""Where an injected OSError is raised: a write, rename or fsync that fails."""


class _Died(BaseException):
    """The process dies here: nothing of restore's own error handling runs."""


class _Points:
    """A fault hook counting the points reached, acting at the ``at``-th."""

    def __init__(self, at: int = 0, action: Callable[[str], None] | None = None) -> None:
        self.at = at
        self.action = action
        self.reached: list[str] = []

    def __call__(self, point: str) -> None:
        self.reached.append(point)
        if len(self.reached) == self.at and self.action is not None:
            self.action(point)


async def _scene(root: Path, cp: Checkpointer | None = None) -> tuple[Scene, int, State, State]:
    scene, seq = await standard_scene(root, cp)
    return scene, seq, await scene.state(), await scene.expected_after(seq)


def _hooked(points: _Points) -> HookedFileSystem:
    fs = HookedFileSystem(OsFileSystem())
    fs.hook = points
    return fs


async def _count(root: Path, *, conversation: bool = True) -> list[str]:
    """The points a clean restore of the standard scene passes (restore's and the file system's)."""
    scene, seq = await standard_scene(root)
    post = await scene.expected_after(seq, conversation=conversation)
    points = _Points()
    await restore(
        scene.cp,
        scene.sid,
        seq,
        workspace=root,
        conversation=conversation,
        fs=_hooked(points),
        fault_hook=points,
    )
    assert await scene.state() == post
    return points.reached


def _no_journal(scene: Scene) -> bool:
    return not os.path.exists(journal_path(str(scene.root), scene.sid))


# -- RESTORE-005: a failing write puts every file back -----------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES])
def test_a_failing_write_at_every_point_puts_everything_back(tmp_path: Path, code: int) -> None:
    async def go() -> None:
        reached = await _count(tmp_path / "count")
        failing = [i for i, p in enumerate(reached, start=1) if p in _FAILING]
        assert len(failing) >= 8
        for k in failing:
            scene, seq, pre, _ = await _scene(tmp_path / f"k{k}")

            def fail(point: str) -> None:
                raise OSError(code, os.strerror(code), f"injected at {point}")

            points = _Points(k, fail)
            reports: list[RestoreProgress] = []
            with pytest.raises(RestoreError) as failed:
                await restore(
                    scene.cp,
                    scene.sid,
                    seq,
                    workspace=scene.root,
                    fs=_hooked(points),
                    fault_hook=points,
                    progress=reports.append,
                )
            assert failed.value.reason_code is RestoreReason.APPLY_FAILED, k
            written = [r.path for r in reports if r.phase == "progress"]
            if "restore.journal_written" in reached[:k]:
                # A file's write failed: the error names it, the one after the last reported.
                assert failed.value.path in ("a.txt", "b.bin", "c.txt", "e.bin", "sub/d.txt")
                assert failed.value.path not in written
            else:
                assert failed.value.path is None  # the journal's own write failed
            assert isinstance(failed.value.__cause__, OSError)
            assert failed.value.__cause__.errno == code
            assert await scene.state() == pre, f"failure at point {k} ({reached[k - 1]})"
            assert _no_journal(scene)
            assert reports[0].phase == "start"
            assert reports[-1].phase == "error"

    run(go())


def test_when_undoing_fails_too_the_journal_is_kept_for_recover(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq, pre, _ = await _scene(tmp_path)
        written = [0]

        def hook(point: str) -> None:
            # The second file written fills the disk, and it stays full.
            if point == "restore.file_written":
                written[0] += 1
            elif point == "write.before" and written[0] >= 2:
                raise OSError(errno.ENOSPC, "No space left on device")

        fs = HookedFileSystem(OsFileSystem())
        fs.hook = hook
        with pytest.raises(OSError, match="No space") as failed:
            await restore(scene.cp, scene.sid, seq, workspace=scene.root, fs=fs, fault_hook=hook)
        assert any("journal is kept" in note for note in failed.value.__notes__)
        assert not _no_journal(scene)
        assert await recover(scene.cp, scene.sid, scene.root) is RecoveryOutcome.ROLLED_BACK
        assert await scene.state() == pre

    run(go())


# -- RESTORE-005: the log moved on -------------------------------------------------------------


class _Intruder(MemoryCheckpointer):
    """Another writer appends just before the restore's truncate."""

    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kw: int | None
    ) -> int:
        await self.append(session_id, [UserPrompt("intruder")])
        return await super().truncate(session_id, to_seq, expected_head, **kw)


class _Locked(MemoryCheckpointer):
    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kw: int | None
    ) -> int:
        raise SessionLockedError(session_id, "truncate")


class _Refilled(MemoryCheckpointer):
    """Another writer cuts the last event and appends one, back to the same head (ABA):
    only the generation tells."""

    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kw: int | None
    ) -> int:
        head = await self.head(session_id)
        await super().truncate(session_id, head - 1)
        await self.append(session_id, [UserPrompt("intruder")])
        return await super().truncate(session_id, to_seq, expected_head, **kw)


@pytest.mark.parametrize("backend", [_Intruder, _Locked, _Refilled])
def test_a_truncate_conflict_puts_every_file_back(
    tmp_path: Path, backend: type[MemoryCheckpointer]
) -> None:
    async def go() -> None:
        scene, seq, pre, _ = await _scene(tmp_path, backend())
        with pytest.raises(RestoreError) as failed:
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert failed.value.reason_code is RestoreReason.LOG_CHANGED
        files, log = await scene.state()
        intruded = (b'{"type":"user_prompt","text":"intruder","blocks":[]}',)
        assert files == pre[0]
        if backend is _Intruder:
            assert log == (*pre[1], *intruded)
        elif backend is _Refilled:
            assert log == (*pre[1][:-1], *intruded)
        else:
            assert log == pre[1]
        assert _no_journal(scene)

    run(go())


class _FailsAfter(MemoryCheckpointer):
    """The truncate happens, then the call fails: its outcome is unknown to the caller."""

    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kw: int | None
    ) -> int:
        await super().truncate(session_id, to_seq, expected_head, **kw)
        raise RuntimeError("connection lost after the commit")


class _FailsBefore(MemoryCheckpointer):
    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kw: int | None
    ) -> int:
        raise RuntimeError("connection lost before the commit")


def test_a_truncate_of_unknown_outcome_is_judged_by_the_log(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq, _, post = await _scene(tmp_path / "after", _FailsAfter())
        await restore(scene.cp, scene.sid, seq, workspace=scene.root)
        assert await scene.state() == post
        assert _no_journal(scene)
        scene, seq, pre, _ = await _scene(tmp_path / "before", _FailsBefore())
        with pytest.raises(RuntimeError, match="before the commit"):
            await restore(scene.cp, scene.sid, seq, workspace=scene.root)
        assert await scene.state() == pre
        assert _no_journal(scene)

    run(go())


# -- RESTORE-005: cancellation -----------------------------------------------------------------


def test_cancelled_before_it_starts_nothing_is_touched(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq, pre, _ = await _scene(tmp_path)
        cancel = asyncio.Event()
        cancel.set()
        reports: list[RestoreProgress] = []
        with pytest.raises(RestoreError) as failed:
            await restore(
                scene.cp,
                scene.sid,
                seq,
                workspace=tmp_path,
                cancel=cancel,
                progress=reports.append,
            )
        assert failed.value.reason_code is RestoreReason.CANCELLED
        assert await scene.state() == pre
        assert [r.phase for r in reports] == ["start", "error"]

    run(go())


def _cancel_counts(reached: Sequence[str], k: int, conversation: bool) -> bool:
    """Whether a cancel set at point ``k`` is still seen: it is checked before each file and
    before the truncate, so only one set after the last of those checks comes too late."""
    if conversation:
        last = reached.index("restore.files_written") + 1
    else:  # the check before the last file follows the one but last file_written
        last = [i for i, p in enumerate(reached, start=1) if p == "restore.file_written"][-2]
    return k <= last


@pytest.mark.parametrize("conversation", [True, False])
def test_cancelled_at_every_point_it_is_all_or_nothing(tmp_path: Path, conversation: bool) -> None:
    async def go() -> None:
        reached = await _count(tmp_path / "count", conversation=conversation)
        outcomes = set()
        for k in range(1, len(reached) + 1):
            scene, seq = await standard_scene(tmp_path / f"k{k}")
            pre = await scene.state()
            post = await scene.expected_after(seq, conversation=conversation)
            cancel = asyncio.Event()
            points = _Points(k, lambda _, cancel=cancel: cancel.set())
            call = restore(
                scene.cp,
                scene.sid,
                seq,
                workspace=scene.root,
                conversation=conversation,
                cancel=cancel,
                fs=_hooked(points),
                fault_hook=points,
            )
            where = f"cancelled at {k} ({reached[k - 1]})"
            if _cancel_counts(reached, k, conversation):
                with pytest.raises(RestoreError) as failed:
                    await call
                assert failed.value.reason_code is RestoreReason.CANCELLED, where
                assert await scene.state() == pre, where
                outcomes.add("cancelled")
            else:
                await call
                assert await scene.state() == post, where
                outcomes.add("done")
            assert _no_journal(scene)
        assert outcomes == {"cancelled", "done"}

    run(go())


# -- RESTORE-006: death at every point, then recover -------------------------------------------


def _expect_after_death(reached: Sequence[str], k: int, conversation: bool) -> str:
    """Which state a death at point ``k`` must recover to.

    The commit point is the truncate or, for a files-only restore, the unlink of
    the journal (the last unlink before ``restore.journal_removed``).
    """
    if conversation:
        commit = reached.index("restore.log_truncated")
    else:
        end = reached.index("restore.journal_removed")
        commit = max(i for i in range(end) if reached[i] == "unlink.after")
    return "post" if k > commit else "pre"


@pytest.mark.parametrize("conversation", [True, False])
def test_death_at_every_point_recovers_to_pre_or_post(tmp_path: Path, conversation: bool) -> None:
    async def go() -> None:
        reached = await _count(tmp_path / "count", conversation=conversation)
        assert set(FAULT_POINTS) - {"restore.log_truncated"} <= set(reached)
        seen = set()
        for k in range(1, len(reached) + 1):
            scene, seq = await standard_scene(tmp_path / f"k{k}")
            states = {
                "pre": await scene.state(),
                "post": await scene.expected_after(seq, conversation=conversation),
            }

            def die(point: str) -> None:
                raise _Died(point)

            points = _Points(k, die)
            with pytest.raises(_Died):
                await restore(
                    scene.cp,
                    scene.sid,
                    seq,
                    workspace=scene.root,
                    conversation=conversation,
                    fs=_hooked(points),
                    fault_hook=points,
                )
            outcome = await recover(scene.cp, scene.sid, scene.root)
            want = _expect_after_death(reached, k, conversation)
            where = f"death at {k} ({reached[k - 1]}), recovered by {outcome}"
            assert await scene.state() == states[want], where
            assert await recover(scene.cp, scene.sid, scene.root) is RecoveryOutcome.NOTHING
            seen.add((want, outcome))
        assert ("pre", RecoveryOutcome.ROLLED_BACK) in seen
        assert ("pre", RecoveryOutcome.NOTHING) in seen
        assert ("post", RecoveryOutcome.NOTHING) in seen
        if conversation:
            assert ("post", RecoveryOutcome.ROLLED_FORWARD) in seen

    run(go())


def test_restore_runs_recover_first(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq, _, post = await _scene(tmp_path)

        def die(point: str) -> None:
            if point == "restore.log_truncated":
                raise _Died(point)

        with pytest.raises(_Died):
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path, fault_hook=die)
        # The log is already cut, so the seq is gone: the restore is refused, but
        # only after it rolled the files forward.
        with pytest.raises(RestoreError) as refused:
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert refused.value.reason_code is RestoreReason.NOT_A_CHECKPOINT
        assert await scene.state() == post
        assert _no_journal(scene)

    run(go())


def test_a_prompt_appended_at_the_same_seq_after_the_commit_is_not_mistaken_for_it(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        scene, seq, _, post = await _scene(tmp_path)
        log = await read_all(scene.cp, scene.sid)
        target = log[seq - 1].event

        def die(point: str) -> None:
            if point == "restore.log_truncated":
                raise _Died(point)

        with pytest.raises(_Died):
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path, fault_hook=die)
        # Another writer re-sends the same prompt: it lands at the same seq, stamped anew.
        assert await scene.append(target) == seq
        assert await recover(scene.cp, scene.sid, tmp_path) is RecoveryOutcome.ROLLED_FORWARD
        files, log_now = await scene.state()
        assert files == post[0]
        assert log_now == (*post[1], encode_event(target))

    run(go())


def test_another_task_can_cancel_between_files(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq, pre, _ = await _scene(tmp_path)
        cancel = asyncio.Event()
        first_file = asyncio.Event()

        def progress(report: RestoreProgress) -> None:
            if report.phase == "progress":
                first_file.set()

        async def canceller() -> None:
            await first_file.wait()
            cancel.set()

        task = asyncio.create_task(canceller())
        with pytest.raises(RestoreError) as failed:
            await restore(
                scene.cp, scene.sid, seq, workspace=tmp_path, cancel=cancel, progress=progress
            )
        await task
        assert failed.value.reason_code is RestoreReason.CANCELLED
        assert await scene.state() == pre

    run(go())
