"""Tools the session checks share: logs, workspaces on disk, a checkpointer that
lets a check act between two calls of the layer, and a disk that fills up.

The session checks drive the session layer under test (`Harness.session`) on a
handle of the backend under test; what they compare against comes from the
spec's oracles (`fold_model`, `checkpoints_model`, `plan_restore`,
`apply_plan`, `compaction_boundary`), never from the layer.
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from hypothesis import strategies as st

from ...backends.fsport import ForwardingFileSystem, OsFileSystem
from ...spec import (
    AssistantMessage,
    BackgroundCompletion,
    Capability,
    Checkpointer,
    FileSnapshot,
    GenerationalCheckpointer,
    MaintenanceLockable,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    content_hash,
)
from ...spec.records import IntegrityReport
from ..engines.contract.outcomes import read_all
from ..engines.contract.violations import RuleViolation

__all__ = [
    "RESERVED",
    "FullDisk",
    "Intercepted",
    "append_log",
    "events_of",
    "files_under",
    "same",
    "session_logs",
    "write_files",
]

RESERVED = ".checkpointspec"
"""The workspace folder the session layer keeps for itself (the restore journal)."""


async def append_log(
    cp: Checkpointer, session_id: str, events: Sequence[SessionEvent]
) -> list[StoredEvent]:
    """Append ``events`` as one batch and return the session's whole log as read back.

    Raises `RuleViolation` when the log read back does not have seqs from 1 on
    (SEQ-001) or does not end with the batch (EVENT-001): the layer cannot be
    judged on a log the backend did not keep, and the check's oracle would
    disagree with its own example.
    """
    if events:
        await cp.append(session_id, list(events))
    log = await read_all(cp, session_id)
    seqs = [stored.seq for stored in log]
    if seqs != list(range(1, len(log) + 1)) or len(log) < len(events):
        raise RuleViolation(
            "SEQ-001",
            f"session {session_id!r} reads back with seqs {seqs} after a batch of "
            f"{len(events)} events was appended to it",
        )
    for stored, event in zip(log[len(log) - len(events) :], events, strict=True):
        if stored.event != event or stored.session_id != session_id:
            raise RuleViolation(
                "EVENT-001",
                f"session {session_id!r} reads back {stored.event!r} as seq {stored.seq} "
                f"of session {stored.session_id!r}; appended {event!r}",
            )
    return log


def events_of(log: Sequence[StoredEvent]) -> list[tuple[int, SessionEvent]]:
    """``(seq, event)`` pairs: what two reads of one log must agree on."""
    return [(stored.seq, stored.event) for stored in log]


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by ``/``-separated relative path, the reserved folder
    left out (the layer's journal is not workspace content)."""
    found: dict[str, bytes] = {}
    if not root.exists():
        return found
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not (Path(directory) == root and d == RESERVED))
        for name in names:
            path = Path(directory) / name
            if path.is_symlink():
                continue
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def write_files(root: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` under ``root`` directly (out of band: nothing is recorded)."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def same(rule_id: str, what: str, got: object, expected: object) -> None:
    """Raise `RuleViolation` unless ``got == expected``, showing both."""
    if got != expected:
        raise RuleViolation(rule_id, f"{what}:\n  got      {got!r}\n  expected {expected!r}")


Hook = Callable[[], Awaitable[None]]


class Intercepted:
    """A handle on the backend under test that lets a check act just before the
    session layer's appends and truncates, and records what they were asked.

    Everything else is forwarded unchanged (the maintenance lock and the
    generation too, when the backend has them), so the layer sees the backend's
    own behaviour. ``before_append`` / ``before_truncate`` run once each, before
    the call they precede is forwarded; ``fail_append`` makes every append raise
    it instead of writing.
    """

    def __init__(self, inner: Checkpointer) -> None:
        self.inner = inner
        self.appends: list[tuple[str, tuple[SessionEvent, ...], int | None]] = []
        self.truncates: list[tuple[str, int, int | None]] = []
        self.before_append: Hook | None = None
        self.before_truncate: Hook | None = None
        self.fail_append: Exception | None = None

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.inner.capabilities

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        **kwargs: int | None,
    ) -> int:
        self.appends.append((session_id, tuple(events), expected_head))
        hook, self.before_append = self.before_append, None
        if hook is not None:
            await hook()
        if self.fail_append is not None:
            raise self.fail_append
        result: int = await self.inner.append(session_id, events, expected_head, **kwargs)
        return result

    def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        return self.inner.read(session_id, since_seq)

    async def head(self, session_id: str) -> int:
        return await self.inner.head(session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)

    async def truncate(
        self, session_id: str, to_seq: int, expected_head: int | None = None, **kwargs: int | None
    ) -> int:
        self.truncates.append((session_id, to_seq, expected_head))
        hook, self.before_truncate = self.before_truncate, None
        if hook is not None:
            await hook()
        result: int = await self.inner.truncate(session_id, to_seq, expected_head, **kwargs)
        return result

    async def check_integrity(self) -> IntegrityReport:
        return await self.inner.check_integrity()

    async def close(self) -> None:
        await self.inner.close()

    async def generation(self, session_id: str) -> int:
        if not isinstance(self.inner, GenerationalCheckpointer):
            raise AttributeError("the backend's handle has no generation")
        return await self.inner.generation(session_id)

    async def acquire_maintenance(self, session_id: str) -> None:
        if not isinstance(self.inner, MaintenanceLockable):
            raise AttributeError("the backend's handle has no maintenance lock")
        await self.inner.acquire_maintenance(session_id)

    async def release_maintenance(self, session_id: str) -> None:
        if not isinstance(self.inner, MaintenanceLockable):
            raise AttributeError("the backend's handle has no maintenance lock")
        await self.inner.release_maintenance(session_id)

    def as_checkpointer(self) -> Checkpointer:
        """This wrapper, typed as what the session layer takes."""
        assert isinstance(self, Checkpointer)
        return self


class FullDisk(ForwardingFileSystem):
    """The real file system, except that the ``fail_at``-th write to a workspace
    file (outside the reserved folder) raises ENOSPC, once: a disk that fills up
    part-way through a restore and has room again for putting things back."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(OsFileSystem())
        self._paths: dict[int, str] = {}
        self._writes = 0
        self._fail_at = fail_at
        self.failed = False

    def _workspace_file(self, fd: int) -> bool:
        return f"/{RESERVED}/" not in self._paths.get(fd, f"/{RESERVED}/")

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        fd = super().open(path, create=create, truncate=truncate)
        self._paths[fd] = path
        return fd

    def close(self, fd: int) -> None:
        self._paths.pop(fd, None)
        super().close(fd)

    def dup(self, fd: int) -> int:
        new = super().dup(fd)
        self._paths[new] = self._paths.get(fd, "")
        return new

    def write(self, fd: int, data: bytes, offset: int) -> None:
        if self._workspace_file(fd) and not self.failed:
            self._writes += 1
            if self._writes == self._fail_at:
                self.failed = True
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._paths[fd])
        super().write(fd, data, offset)


# -- generated session logs -----------------------------------------------------------------

_CALL_IDS = ("a", "b", "c", "d")
_PATHS = ("a.txt", "dir/b.txt", "dir//./b.txt", "c.bin", "../out.txt", "/abs.txt")
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _snapshots() -> st.SearchStrategy[FileSnapshot]:
    """Snapshots of every kind: absent before, text, base64 (valid or not), truncated,
    safe and unsafe paths, with and without a hash."""
    return st.builds(
        FileSnapshot,
        path=st.sampled_from(_PATHS),
        content_before=st.one_of(st.none(), _TEXT, st.sampled_from(("aGVsbG8=", "!!not base64!!"))),
        truncated=st.sampled_from((False, False, False, True)),
        encoding=st.sampled_from(("utf-8", "base64")),
        hash_after=st.one_of(st.none(), st.just(content_hash(b"after"))),
        tool_call_id=st.one_of(st.none(), st.sampled_from(_CALL_IDS)),
    )


def session_logs(max_size: int = 30) -> st.SearchStrategy[list[SessionEvent]]:
    """Logs of every event kind in any order after a first prompt: prompts (block form too), assistant
    messages with tool calls from a small pool of ids, tool starts and results,
    snapshots, summaries covering anything up to past their own seq, reminders,
    background completions and repairs with and without a tool call."""
    call = st.builds(ToolCall, st.sampled_from(_CALL_IDS), st.just("edit"), st.just("{}"))
    call_id = st.sampled_from(_CALL_IDS)
    prompt = st.builds(UserPrompt, _TEXT, st.lists(_TEXT, max_size=2).map(tuple))
    # Prompts and snapshots are drawn more often than the rest: every CKPT rule is
    # about snapshots after a prompt, and FOLD-004 about snapshots between results.
    event: st.SearchStrategy[SessionEvent] = st.one_of(
        prompt,
        _snapshots(),
        _snapshots(),
        st.builds(AssistantMessage, _TEXT, st.lists(call, max_size=3).map(tuple)),
        st.builds(ToolStarted, call_id, st.just("edit")),
        st.builds(ToolResult, call_id, _TEXT, st.booleans()),
        _snapshots(),
        st.builds(Summary, _TEXT, st.integers(0, max_size + 2), st.just(100), st.just(10)),
        st.builds(BackgroundCompletion, st.sampled_from(("job-1", "job-2")), _TEXT),
        st.builds(RuntimeReminder, _TEXT),
        st.builds(RepairMessage, _TEXT, st.one_of(st.none(), call_id)),
    )
    return st.tuples(prompt, st.lists(event, max_size=max_size)).map(
        lambda drawn: [drawn[0], *drawn[1]]
    )
