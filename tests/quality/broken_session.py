"""Deliberately broken session layers: each has exactly one bug the session suite must find.

Every class here is ``checkpointspec.reference`` with one mistake put in, the
kind a real session layer makes: a fold that forgets to coalesce, a checkpoint
list that counts reminders, a workspace that writes before it records, a
restore that skips a preflight or cuts the log before it writes the files and
cannot put it back, a compaction that ignores a late cancel. `Layer` holds the
reference's names; each subclass overrides one of them, mostly by wrapping the
reference's function. Each docstring says the bug and the rule the kit must
report; ``violates`` holds that rule id.

The kit loads a session layer by ``MODULE:OBJECT`` (``--session-layer
broken_session:FoldKeepsResultsApart``) and reads the layer's names off the
object. ``BROKEN_LAYERS`` maps each class name to its class. Every class here is
wrong on purpose: none is an example of how to write a session layer.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar

import checkpointspec.reference as reference
import msgspec
from checkpointspec.backends.fsport import OsFileSystem
from checkpointspec.reference.journal import read_journal, remove_journal, roll_files
from checkpointspec.spec import (
    Checkpoint,
    Checkpointer,
    CompactionProgress,
    FileSnapshot,
    FileSystem,
    Message,
    RestoreError,
    RestoreReason,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    Summarizer,
    Summary,
    UnavailableFile,
    UserPrompt,
    canonical_path,
    snapshot_content,
)
from checkpointspec.spec.checkpoints import snapshot_key

__all__ = ["BROKEN_LAYERS", "Layer"]


class Layer:
    """``checkpointspec.reference``'s names; a subclass overrides one of them with a bug."""

    violates: ClassVar[str]
    fold = staticmethod(reference.fold)
    list_checkpoints = staticmethod(reference.list_checkpoints)
    Workspace = reference.Workspace
    restore = staticmethod(reference.restore)
    recover = staticmethod(reference.recover)
    compact = staticmethod(reference.compact)
    ExtractiveSummarizer = reference.ExtractiveSummarizer
    maintenance = staticmethod(reference.maintenance)


async def _read(cp: Checkpointer, session_id: str) -> list[StoredEvent]:
    return [stored async for stored in cp.read(session_id)]


class _Forwarding:
    """A checkpointer handle forwarded, but for ``append``, which a bug rewrites."""

    def __init__(self, inner: Checkpointer, rewrite: Callable[..., object]) -> None:
        self._inner = inner
        self._rewrite = rewrite

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def append(
        self, session_id: str, events: Sequence[SessionEvent], expected_head: int | None = None
    ) -> int:
        rewritten = self._rewrite(session_id, list(events), expected_head)
        assert isinstance(rewritten, tuple)
        new_events, new_head = rewritten
        return await self._inner.append(session_id, new_events, new_head)


# -- FOLD --------------------------------------------------------------------------------


def _fold_then(change: Callable[[list[Message], list[StoredEvent]], list[Message]]) -> object:
    def fold(events: Iterable[StoredEvent]) -> list[Message]:
        log = list(events)
        return change(list(reference.fold(log)), log)

    return staticmethod(fold)


class DropsPromptBlocks(Layer):
    """Bug: fold keeps a block-form prompt's text and drops its extra blocks.

    Kit must report FOLD-001.
    """

    violates = "FOLD-001"
    fold = _fold_then(
        lambda messages, _: [
            msgspec.structs.replace(m, blocks=m.blocks[:1]) if m.origin == "prompt" else m
            for m in messages
        ]
    )


class KeepsEmptyAssistantText(Layer):
    """Bug: fold puts an empty text block before the tool calls of an assistant message
    without text. Kit must report FOLD-002.
    """

    violates = "FOLD-002"

    @staticmethod
    def fold(events: Iterable[StoredEvent]) -> list[Message]:
        from checkpointspec.spec import TextBlock

        return [
            msgspec.structs.replace(m, blocks=(TextBlock(""), *m.blocks))
            if m.origin == "assistant" and not (m.blocks and isinstance(m.blocks[0], TextBlock))
            else m
            for m in reference.fold(events)
        ]


class FoldKeepsResultsApart(Layer):
    """Bug: fold gives every tool result a user message of its own instead of
    coalescing consecutive ones. Kit must report FOLD-003.
    """

    violates = "FOLD-003"
    fold = _fold_then(
        lambda messages, _: [
            part
            for m in messages
            for part in (
                [
                    msgspec.structs.replace(m, blocks=(b,), seqs=(s,))
                    for b, s in zip(m.blocks, m.seqs, strict=True)
                ]
                if m.origin == "tool_results"
                else [m]
            )
        ]
    )


class SnapshotsSplitResults(Layer):
    """Bug: fold lets a file snapshot between two tool results split them into two
    turns. Kit must report FOLD-004.
    """

    violates = "FOLD-004"

    @staticmethod
    def fold(events: Iterable[StoredEvent]) -> list[Message]:
        log = list(events)
        snapshots = [e.seq for e in log if isinstance(e.event, FileSnapshot)]
        result: list[Message] = []
        for m in reference.fold(log):
            if m.origin != "tool_results":
                result.append(m)
                continue
            start = 0
            for i in range(1, len(m.seqs)):
                if any(m.seqs[i - 1] < s < m.seqs[i] for s in snapshots):
                    result.append(
                        msgspec.structs.replace(m, blocks=m.blocks[start:i], seqs=m.seqs[start:i])
                    )
                    start = i
            result.append(msgspec.structs.replace(m, blocks=m.blocks[start:], seqs=m.seqs[start:]))
        return result


class RemindersArePrompts(Layer):
    """Bug: fold gives runtime reminders the origin of a user prompt. Kit must report FOLD-005."""

    violates = "FOLD-005"
    fold = _fold_then(
        lambda messages, _: [
            msgspec.structs.replace(m, origin="prompt") if m.origin == "reminder" else m
            for m in messages
        ]
    )


class SummaryGoesLast(Layer):
    """Bug: fold puts a summary's message at the end of the conversation instead of
    where what it covers began. Kit must report FOLD-006.
    """

    violates = "FOLD-006"
    fold = _fold_then(
        lambda messages, _: (
            [m for m in messages if m.origin != "summary"]
            + [m for m in messages if m.origin == "summary"]
        )
    )


# -- CKPT --------------------------------------------------------------------------------


class RemindersAreCheckpoints(Layer):
    """Bug: list_checkpoints lists runtime reminders as checkpoints too. Kit must report CKPT-001."""

    violates = "CKPT-001"

    @staticmethod
    async def list_checkpoints(checkpointer: Checkpointer, session_id: str) -> list[Checkpoint]:
        listed = list(await reference.list_checkpoints(checkpointer, session_id))
        for stored in await _read(checkpointer, session_id):
            if isinstance(stored.event, RuntimeReminder):
                listed.append(Checkpoint(stored.seq, stored.event.text, stored.ts, (), ()))
        return sorted(listed, key=lambda c: c.seq)


class FilesIncludeUnavailable(Layer):
    """Bug: list_checkpoints lists the files it cannot restore among those it can.

    Kit must report CKPT-002.
    """

    violates = "CKPT-002"

    @staticmethod
    async def list_checkpoints(checkpointer: Checkpointer, session_id: str) -> list[Checkpoint]:
        return [
            msgspec.structs.replace(
                c, files=tuple(sorted({*c.files, *(u.path for u in c.unavailable_files)}))
            )
            for c in await reference.list_checkpoints(checkpointer, session_id)
        ]


class EveryUnavailableIsTruncated(Layer):
    """Bug: list_checkpoints gives every unavailable file the reason truncated.

    Kit must report CKPT-003.
    """

    violates = "CKPT-003"

    @staticmethod
    async def list_checkpoints(checkpointer: Checkpointer, session_id: str) -> list[Checkpoint]:
        return [
            msgspec.structs.replace(
                c,
                unavailable_files=tuple(
                    UnavailableFile(u.path, "truncated") for u in c.unavailable_files
                ),
            )
            for c in await reference.list_checkpoints(checkpointer, session_id)
        ]


# -- SNAP --------------------------------------------------------------------------------


class _RootedWorkspace(reference.Workspace):  # type: ignore[misc, name-defined]
    """The reference workspace, remembering its root for the bugs below."""

    def __init__(self, root: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        super().__init__(root, *args, **kwargs)
        self.broken_root = Path(root)

    def put(self, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        target = self.broken_root / self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class _WritesFirst(_RootedWorkspace):
    async def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> FileSnapshot:
        self.put(path, content)
        snapshot: FileSnapshot = await super().write(path, content, tool_call_id=tool_call_id)
        return snapshot


class WritesBeforeRecording(Layer):
    """Bug: Workspace.write changes the file first and records the snapshot after,
    so the snapshot holds the new content. Kit must report SNAP-001.
    """

    violates = "SNAP-001"
    Workspace = _WritesFirst


class _NoLimit(_RootedWorkspace):
    def __init__(self, root: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        kwargs["snapshot_limit"] = 1 << 40
        super().__init__(root, *args, **kwargs)


class KeepsOversizedContent(Layer):
    """Bug: Workspace ignores its snapshot limit and keeps every content whole.

    Kit must report SNAP-002.
    """

    violates = "SNAP-002"
    Workspace = _NoLimit


class _FollowsSymlinks(_RootedWorkspace):
    def resolve(self, path: str) -> str:
        return canonical_path(path)


class FollowsSymlinks(Layer):
    """Bug: Workspace.resolve checks the path's text only, so a symlink leads out of
    the workspace and the reserved folder is writable. Kit must report SNAP-003.
    """

    violates = "SNAP-003"
    Workspace = _FollowsSymlinks


class _WritesAnyway(_RootedWorkspace):
    async def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> FileSnapshot:
        try:
            snapshot: FileSnapshot = await super().write(path, content, tool_call_id=tool_call_id)
        except Exception:
            self.put(path, content)  # "the tool's work must not be lost"
            raise
        return snapshot


class WritesWhenRecordingFails(Layer):
    """Bug: Workspace.write changes the file even when its snapshot could not be
    appended. Kit must report SNAP-004.
    """

    violates = "SNAP-004"
    Workspace = _WritesAnyway


# -- RESTORE -----------------------------------------------------------------------------


class KeepsThePrompt(Layer):
    """Bug: restore keeps the prompt it restores to in the log (events 1..seq, not
    1..seq-1). Kit must report RESTORE-001.
    """

    violates = "RESTORE-001"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        prompt = [e for e in await _read(checkpointer, session_id) if e.seq == seq]
        result = await reference.restore(checkpointer, session_id, seq, **kwargs)
        if prompt and getattr(result, "conversation_restored", False):
            await checkpointer.append(session_id, [prompt[0].event])
        return result


class _Result(msgspec.Struct, frozen=True):
    restored_files: tuple[str, ...]
    conversation_restored: bool
    unchecked_files: tuple[str, ...]


class UnknownSessionIsEmpty(Layer):
    """Bug: restore of a session with no events returns an empty result instead of
    refusing. Kit must report RESTORE-002.
    """

    violates = "RESTORE-002"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        if await checkpointer.head(session_id) == 0:
            return _Result((), True, ())
        return await reference.restore(checkpointer, session_id, seq, **kwargs)


class OverwritesOutOfBandChanges(Layer):
    """Bug: restore has no out-of-band preflight: it puts every file back whatever
    happened to it since the session wrote it. Kit must report RESTORE-003.
    """

    violates = "RESTORE-003"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        try:
            return await reference.restore(checkpointer, session_id, seq, **kwargs)
        except RestoreError as exc:
            if exc.reason_code is not RestoreReason.OUT_OF_BAND_CHANGE:
                raise
        workspace = kwargs.get("workspace")
        root = Path(getattr(workspace, "broken_root", workspace))  # type: ignore[arg-type]
        log = await _read(checkpointer, session_id)
        earliest: dict[str, FileSnapshot] = {}
        for stored in log:
            if stored.seq > seq and isinstance(stored.event, FileSnapshot):
                earliest.setdefault(snapshot_key(stored.event.path), stored.event)
        for path, snapshot in sorted(earliest.items()):
            content = snapshot_content(snapshot)
            if content is None:
                (root / path).unlink(missing_ok=True)
            else:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(content)
        await checkpointer.truncate(session_id, seq - 1, log[-1].seq)
        return _Result(tuple(sorted(earliest)), True, ())


class FilesFlagIgnored(Layer):
    """Bug: restore puts the files back even when told files=False. Kit must report RESTORE-004."""

    violates = "RESTORE-004"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        kwargs["files"] = True
        return await reference.restore(checkpointer, session_id, seq, **kwargs)


class TruncatesFirst(Layer):
    """Bug: restore cuts the log before it writes the files, and cannot put the log
    back when writing them fails or is cancelled. Kit must report RESTORE-005.
    """

    violates = "RESTORE-005"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        head = await checkpointer.head(session_id)
        if kwargs.get("conversation", True) and 0 < seq <= head:
            await checkpointer.truncate(session_id, seq - 1, head)
            kwargs["conversation"] = False
        return await reference.restore(checkpointer, session_id, seq, **kwargs)


class NoStartReport(Layer):
    """Bug: restore never reports its start. Kit must report RESTORE-007."""

    violates = "RESTORE-007"

    @staticmethod
    async def restore(
        checkpointer: Checkpointer, session_id: str, seq: int, **kwargs: object
    ) -> object:
        progress = kwargs.get("progress")
        if callable(progress):
            kwargs["progress"] = lambda report: (
                None if getattr(report, "phase", None) == "start" else progress(report)
            )
        return await reference.restore(checkpointer, session_id, seq, **kwargs)


# RESTORE-006 (a killed restore) has its broken layer with the crash checks
# (conformance/checks/restoring_killed.py); see session_cases.PENDING_RULES.


# -- COMPACT -----------------------------------------------------------------------------


class SummarisesTheOpenCall(Layer):
    """Bug: compaction's summary runs through the head, an open tool call included,
    instead of the last clean boundary. Kit must report COMPACT-001.
    """

    violates = "COMPACT-001"

    @staticmethod
    def compact(
        checkpointer: Checkpointer, session_id: str, **kwargs: object
    ) -> AsyncIterator[CompactionProgress]:
        def through_head(
            sid: str, events: list[SessionEvent], expected_head: int | None
        ) -> tuple[list[SessionEvent], int | None]:
            head = expected_head or 0
            return [
                msgspec.structs.replace(e, through_seq=head) if isinstance(e, Summary) else e
                for e in events
            ], expected_head

        proxy = _Forwarding(checkpointer, through_head)
        return reference.compact(proxy, session_id, **kwargs)  # type: ignore[no-any-return]


class NoStartReportWhenCompacting(Layer):
    """Bug: compaction's progress never reports its start. Kit must report COMPACT-002."""

    violates = "COMPACT-002"

    @staticmethod
    async def compact(
        checkpointer: Checkpointer, session_id: str, **kwargs: object
    ) -> AsyncIterator[CompactionProgress]:
        async for report in reference.compact(checkpointer, session_id, **kwargs):
            if report.phase != "start":
                yield report


class AlwaysSummarises(Layer):
    """Bug: when there is nothing to summarise, compaction writes a summary anyway.

    Kit must report COMPACT-003.
    """

    violates = "COMPACT-003"

    @staticmethod
    async def compact(
        checkpointer: Checkpointer, session_id: str, **kwargs: object
    ) -> AsyncIterator[CompactionProgress]:
        async for report in reference.compact(checkpointer, session_id, **kwargs):
            if report.phase == "done" and not report.reduced:
                head = await checkpointer.head(session_id)
                seq = await checkpointer.append(
                    session_id, [Summary("nothing new", head, 0, 0)], head
                )
                report = msgspec.structs.replace(report, reduced=True, summary_seq=seq)
            yield report


class IgnoresCancelInPersistence(Layer):
    """Bug: a cancel that arrives once persistence has been reported is ignored: the
    summary is written. Kit must report COMPACT-004.
    """

    violates = "COMPACT-004"

    @staticmethod
    async def compact(
        checkpointer: Checkpointer,
        session_id: str,
        *,
        summarizer: Summarizer,
        instructions: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> AsyncIterator[CompactionProgress]:
        inner = asyncio.Event()
        persisting = False
        stream = reference.compact(
            checkpointer, session_id, summarizer=summarizer, instructions=instructions, cancel=inner
        )
        while True:
            if cancel is not None and cancel.is_set() and not persisting:
                inner.set()
            try:
                report = await anext(stream)
            except StopAsyncIteration:
                return
            persisting = persisting or report.stage == "persistence"
            yield report


class SummaryWithoutExpectedHead(Layer):
    """Bug: compaction appends its summary without expected_head, so it lands on top
    of whatever another writer added meanwhile. Kit must report COMPACT-005.
    """

    violates = "COMPACT-005"

    @staticmethod
    def compact(
        checkpointer: Checkpointer, session_id: str, **kwargs: object
    ) -> AsyncIterator[CompactionProgress]:
        proxy = _Forwarding(checkpointer, lambda sid, events, expected_head: (events, None))
        return reference.compact(proxy, session_id, **kwargs)  # type: ignore[no-any-return]


# -- RESTORE-006 -------------------------------------------------------------------------


async def _recover_backwards(
    checkpointer: Checkpointer,
    session_id: str,
    workspace: str | os.PathLike[str],
    *,
    fs: FileSystem | None = None,
) -> str:
    fs = fs or OsFileSystem()
    root = os.path.abspath(os.fspath(workspace))
    journal = read_journal(fs, root, session_id)
    if journal is None:
        return "nothing"
    roll_files(fs, root, journal.files, forward=False)
    remove_journal(fs, root, session_id)
    return "rolled_back"


class RecoverAlwaysRollsBack(Layer):
    """Bug: recover rolls a killed restore's files back even when its truncate had
    committed, leaving old files beside a cut log. Kit must report RESTORE-006.
    """

    violates = "RESTORE-006"
    recover = staticmethod(_recover_backwards)


BROKEN_LAYERS: dict[str, type[Layer]] = {
    cls.__name__: cls
    for cls in (
        RecoverAlwaysRollsBack,
        DropsPromptBlocks,
        KeepsEmptyAssistantText,
        FoldKeepsResultsApart,
        SnapshotsSplitResults,
        RemindersArePrompts,
        SummaryGoesLast,
        RemindersAreCheckpoints,
        FilesIncludeUnavailable,
        EveryUnavailableIsTruncated,
        WritesBeforeRecording,
        KeepsOversizedContent,
        FollowsSymlinks,
        WritesWhenRecordingFails,
        KeepsThePrompt,
        UnknownSessionIsEmpty,
        OverwritesOutOfBandChanges,
        FilesFlagIgnored,
        TruncatesFirst,
        NoStartReport,
        SummarisesTheOpenCall,
        NoStartReportWhenCompacting,
        AlwaysSummarises,
        IgnoresCancelInPersistence,
        SummaryWithoutExpectedHead,
    )
}
"""Every broken session layer by class name."""

_ = (UserPrompt,)
