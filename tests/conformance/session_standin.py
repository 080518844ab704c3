"""A small session layer written straight from the spec's oracles, for the machine's own tests.

It exports the names of ``checkpointspec.reference`` (fold, list_checkpoints,
Workspace, restore, recover, compact, ExtractiveSummarizer) and does what the
rules say in the most direct way: no journal, no maintenance lock, no speed.
The tests drive the session machine with it (and with broken variants of it) so
that they can show the machine accepts a correct layer and names the rule a
broken one breaks, whatever state the reference layer is in.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

import msgspec
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.spec import (
    DEFAULT_SNAPSHOT_LIMIT,
    STAGES,
    BackendContext,
    Capability,
    Checkpoint,
    CheckpointConflictError,
    Checkpointer,
    CompactionError,
    CompactionProgress,
    CompactionReason,
    FileRestore,
    FileSnapshot,
    InvalidArgumentError,
    Message,
    ReasonCode,
    RestoreError,
    RestorePlan,
    RestoreProgress,
    RestoreReason,
    RestoreResult,
    StoredEvent,
    Summary,
    TextBlock,
    canonical_path,
    checkpoints_model,
    compaction_boundary,
    estimate_tokens,
    fold_model,
    make_snapshot,
    plan_restore,
    snapshot_content,
)
from checkpointspec.spec.checkpoints import snapshot_key

__all__ = [
    "ExtractiveSummarizer",
    "Workspace",
    "compact",
    "fold",
    "list_checkpoints",
    "make_without_truncate",
    "recover",
    "restore",
]

RESERVED = ".checkpointspec"


async def _read(cp: Checkpointer, session_id: str) -> list[StoredEvent]:
    return [s async for s in cp.read(session_id)]


def fold(events: Iterable[StoredEvent]) -> list[Message]:
    return fold_model(events)


async def list_checkpoints(checkpointer: Checkpointer, session_id: str) -> list[Checkpoint]:
    return checkpoints_model(await _read(checkpointer, session_id))


class Workspace:
    def __init__(
        self,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = DEFAULT_SNAPSHOT_LIMIT,
    ) -> None:
        self.root = Path(root)
        self.checkpointer = checkpointer
        self.session_id = session_id
        self.snapshot_limit = snapshot_limit

    @classmethod
    async def open(
        cls,
        root: str | os.PathLike[str],
        checkpointer: Checkpointer,
        session_id: str,
        *,
        snapshot_limit: int = DEFAULT_SNAPSHOT_LIMIT,
    ) -> Workspace:
        await recover(checkpointer, session_id, root)
        return cls(root, checkpointer, session_id, snapshot_limit=snapshot_limit)

    def resolve(self, path: str) -> str:
        key = canonical_path(path)
        if key.split("/")[0] == RESERVED:
            raise InvalidArgumentError("path", "reserved", ReasonCode.UNSAFE_PATH, "SNAP-003")
        real = os.path.realpath(self.root / key)
        if not real.startswith(os.path.realpath(self.root) + os.sep):
            raise InvalidArgumentError("path", "symlink", ReasonCode.UNSAFE_PATH, "SNAP-003")
        return key

    def read(self, path: str) -> bytes | None:
        target = self.root / self.resolve(path)
        return target.read_bytes() if target.is_file() else None

    async def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> FileSnapshot:
        key = self.resolve(path)
        data = content.encode() if isinstance(content, str) else content
        snapshot = make_snapshot(
            key, self.read(key), data, limit=self.snapshot_limit, tool_call_id=tool_call_id
        )
        await self.checkpointer.append(self.session_id, [snapshot])
        target = self.root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return snapshot

    async def delete(self, path: str, *, tool_call_id: str | None = None) -> FileSnapshot:
        key = self.resolve(path)
        before = self.read(key)
        if before is None:
            raise InvalidArgumentError("path", "no such file", ReasonCode.NO_SUCH_FILE, "SNAP-001")
        snapshot = make_snapshot(
            key, before, None, limit=self.snapshot_limit, tool_call_id=tool_call_id
        )
        await self.checkpointer.append(self.session_id, [snapshot])
        (self.root / key).unlink()
        return snapshot


def _files(root: Path) -> dict[str, bytes]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and RESERVED in dirnames:
            dirnames.remove(RESERVED)
        for name in filenames:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found


def _root(workspace: object) -> Path | None:
    if workspace is None:
        return None
    if isinstance(workspace, Workspace):
        return workspace.root
    assert isinstance(workspace, str | os.PathLike)
    return Path(workspace)


async def restore(
    checkpointer: Checkpointer,
    session_id: str,
    seq: int,
    *,
    workspace: object = None,
    files: bool = True,
    conversation: bool = True,
    cancel: asyncio.Event | None = None,
    progress: Callable[[RestoreProgress], None] | None = None,
    check_out_of_band: bool = True,
) -> RestoreResult:
    report = progress or (lambda p: None)
    report(RestoreProgress("start"))
    events = await _read(checkpointer, session_id)
    root = _root(workspace)
    current = None if root is None else _files(root)
    try:
        plan = plan_restore(
            session_id, events, seq, current, files=files, conversation=conversation
        )
    except RestoreError as exc:
        if check_out_of_band or exc.reason_code != RestoreReason.OUT_OF_BAND_CHANGE:
            report(RestoreProgress("error", error=str(exc)))
            raise
        plan = _plan_ignoring_out_of_band(session_id, events, seq, conversation)
    for n, restore in enumerate(plan.files, 1):
        assert root is not None
        target = root / restore.path
        if restore.content is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(restore.content)
        report(RestoreProgress("progress", n, len(plan.files), restore.path))
    if plan.keep_through is not None:
        await checkpointer.truncate(session_id, plan.keep_through, plan.expected_head)
    report(RestoreProgress("done", len(plan.files), len(plan.files)))
    return RestoreResult(
        tuple(f.path for f in plan.files), plan.keep_through is not None, plan.unchecked
    )


def _plan_ignoring_out_of_band(
    session_id: str, events: Sequence[StoredEvent], seq: int, conversation: bool
) -> RestorePlan:
    """The plan of a restore that puts files back whatever happened to them since."""
    base = plan_restore(session_id, events, seq, None, files=False, conversation=conversation)
    earliest: dict[str, FileSnapshot] = {}
    for stored in events:
        if stored.seq > seq and isinstance(stored.event, FileSnapshot):
            earliest.setdefault(snapshot_key(stored.event.path), stored.event)
    restores = tuple(FileRestore(p, snapshot_content(earliest[p])) for p in sorted(earliest))
    return msgspec.structs.replace(base, files=restores)


async def recover(
    checkpointer: Checkpointer, session_id: str, workspace: object
) -> Literal["nothing"]:
    return "nothing"


class ExtractiveSummarizer:
    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        texts = [b.text for m in messages for b in m.blocks if isinstance(b, TextBlock)]
        return " / ".join(texts[:3]) or "(nothing)"


async def compact(
    checkpointer: Checkpointer,
    session_id: str,
    *,
    summarizer: ExtractiveSummarizer,
    instructions: str | None = None,
    cancel: asyncio.Event | None = None,
) -> AsyncIterator[CompactionProgress]:
    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    yield CompactionProgress(phase="start")
    log = await _read(checkpointer, session_id)
    if not log:
        yield CompactionProgress(phase="error", error="the session has no events")
        raise CompactionError(session_id, CompactionReason.UNKNOWN_SESSION, "no events")
    boundary = compaction_boundary(log)
    if boundary is None:
        yield CompactionProgress(phase="done", reduced=False)
        return
    before = fold_model(log)
    covered = fold_model(s for s in log if s.seq <= boundary)
    text = ""
    for stage in STAGES:
        if cancelled():
            yield CompactionProgress(phase="cancelled")
            return
        if stage == "summarization":
            text = await summarizer.summarize(covered, instructions)
        yield CompactionProgress(
            phase="progress",
            stage=stage,
            tokens_before=estimate_tokens(before),
            token_count="estimated",
        )
    if cancelled():
        yield CompactionProgress(phase="cancelled")
        return
    head = log[-1].seq if log else 0
    summary = Summary(text, boundary, estimate_tokens(before), 0)
    try:
        new_head = await checkpointer.append(session_id, [summary], head)
    except CheckpointConflictError as exc:
        yield CompactionProgress(phase="error", error=str(exc))
        return
    yield CompactionProgress(phase="done", reduced=True, summary_seq=new_head)


class WithoutTruncate(MemoryCheckpointer):
    """A correct memory backend that does not declare TRUNCATE (truncate refuses loudly)."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.TRUNCATE}


def make_without_truncate(ctx: BackendContext) -> MemoryCheckpointer:
    return WithoutTruncate()
