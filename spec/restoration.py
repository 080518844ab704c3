"""Restore, over a workspace modelled as a mapping path -> content (RESTORE rules).

`plan_restore` is the preflight: from the log, the target seq, the flags and
the current content of the files involved, it either returns the `RestorePlan`
— what the files and the log become — or raises the `RestoreError` the
reference restore must raise, before anything is touched. `apply_plan` is the
after-state of the files. Together they are the oracle for
``checkpointspec.reference.restore``.

The checks, in this order (the first failure is the one reported; files are
checked in path order):

1. the session has events (``unknown_session``) and ``seq`` is a user prompt's
   (``not_a_checkpoint``) — RESTORE-002;
2. with ``conversation``: the log before ``seq`` has no open tool call
   (``unfinished_tool_call``) — RESTORE-003;
3. with ``files``, for every path snapshotted after ``seq``, from its earliest
   snapshot after ``seq``: a workspace is given (``workspace_required``), the
   path is safe (``unsafe_path``), the snapshot whole (``snapshot_truncated``)
   and decodable (``snapshot_undecodable``); then the file still holds what the
   session left there (``out_of_band_change``) — RESTORE-003.

"What the session left" is read from the *latest* snapshot of the path: the
file must hash to its ``hash_after``, or still hold its ``content_before`` (the
tool recorded the snapshot and died before writing, SNAP-004). A latest
snapshot without ``hash_after`` (written before hashes were recorded) cannot be
checked: the path is listed in ``unchecked`` and restored all the same.

What a restore reports while it runs (`RestoreProgress`), what it returns
(`RestoreResult`) and what recovering from a killed one did (`RecoveryOutcome`)
are values of the contract too: every session layer's ``restore`` and
``recover`` (`checkpointspec.spec.session_layer`) speak them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias

import msgspec

from .checkpoints import snapshot_key, snapshot_problem
from .conversation import ToolCallLedger
from .errors import RestoreError, RestoreReason
from .events import FileSnapshot, UserPrompt
from .records import StoredEvent
from .snapshots import content_hash, snapshot_content

__all__ = [
    "FileRestore",
    "RecoveryOutcome",
    "RestorePhase",
    "RestorePlan",
    "RestoreProgress",
    "RestoreResult",
    "apply_plan",
    "plan_restore",
]

_PROBLEM_REASONS = {
    "unsafe_path": RestoreReason.UNSAFE_PATH,
    "truncated": RestoreReason.SNAPSHOT_TRUNCATED,
    "undecodable": RestoreReason.SNAPSHOT_UNDECODABLE,
}


class FileRestore(msgspec.Struct, frozen=True):
    """One file a restore puts back: its content, or None to delete it."""

    path: str
    content: bytes | None


class RestorePlan(msgspec.Struct, frozen=True):
    """What a restore that passed its preflight does.

    ``keep_through`` is the head the log is truncated to (``seq - 1``), or None
    when the conversation is left alone; ``expected_head`` is the head the
    preflight saw, which the truncate passes as its ``expected_head``.
    ``files`` are in path order; ``unchecked`` are the paths whose latest
    snapshot has no ``hash_after``.
    """

    session_id: str
    seq: int
    expected_head: int
    keep_through: int | None
    files: tuple[FileRestore, ...]
    unchecked: tuple[str, ...]


RestorePhase: TypeAlias = Literal["start", "progress", "done", "error"]


class RestoreProgress(msgspec.Struct, frozen=True):
    """One report of a running restore (RESTORE-007).

    ``start`` comes first, once the preflight has decided (``total`` files to
    put back, 0 for a refusal); then one ``progress`` per file put back, with
    ``completed`` of ``total`` and its ``path``; last ``done``, or ``error``
    with the failure in one line in ``error``.
    """

    phase: RestorePhase
    completed: int = 0
    total: int = 0
    path: str | None = None
    error: str | None = None


class RestoreResult(msgspec.Struct, frozen=True):
    """What a restore did: the files put back (path order), whether the log was
    truncated, and the files restored without an out-of-band check (their
    latest snapshot has no ``hash_after``)."""

    restored_files: tuple[str, ...]
    conversation_restored: bool
    unchecked_files: tuple[str, ...] = ()


class RecoveryOutcome(enum.StrEnum):
    """What ``recover`` did with the restore journal it found (RESTORE-006)."""

    NOTHING = "nothing"
    """No restore was pending."""
    ROLLED_BACK = "rolled_back"
    """The restore had not committed: files are as before it, the log untouched."""
    ROLLED_FORWARD = "rolled_forward"
    """The log had been truncated: files were brought to the restored state."""


def plan_restore(
    session_id: str,
    events: Sequence[StoredEvent],
    seq: int,
    current: Mapping[str, bytes] | None,
    *,
    files: bool = True,
    conversation: bool = True,
) -> RestorePlan:
    """Preflight a restore of ``session_id`` (whose whole log is ``events``) to ``seq``.

    ``current`` maps each canonical path to the content of that file now (a
    path absent from it has no file); None means no workspace was given. Only
    the paths the restore involves are looked up. Raises `RestoreError`.
    """

    def refuse(reason: RestoreReason, detail: str, path: str | None = None) -> RestoreError:
        return RestoreError(session_id, seq, reason, detail, path)

    if not events:
        raise refuse(RestoreReason.UNKNOWN_SESSION, "the session has no events")
    head = events[-1].seq
    target = next((e for e in events if e.seq == seq), None)
    if target is None or not isinstance(target.event, UserPrompt):
        raise refuse(RestoreReason.NOT_A_CHECKPOINT, f"seq {seq} is not a user prompt of the log")
    if conversation:
        ledger = ToolCallLedger()
        for stored in events:
            if stored.seq >= seq:
                break
            ledger.feed(stored.event)
        if ledger.open_calls:
            raise refuse(
                RestoreReason.UNFINISHED_TOOL_CALL,
                f"tool call {ledger.open_calls[0]!r} before the prompt has no result",
            )
    restores: list[FileRestore] = []
    unchecked: list[str] = []
    if files:
        earliest: dict[str, FileSnapshot] = {}
        latest: dict[str, FileSnapshot] = {}
        for stored in events:
            if stored.seq > seq and isinstance(stored.event, FileSnapshot):
                key = snapshot_key(stored.event.path)
                earliest.setdefault(key, stored.event)
                latest[key] = stored.event
        if earliest and current is None:
            raise refuse(
                RestoreReason.WORKSPACE_REQUIRED,
                f"{len(earliest)} file(s) to restore and no workspace given",
                min(earliest),
            )
        for path in sorted(earliest):
            problem = snapshot_problem(earliest[path])
            if problem is not None:
                raise refuse(_PROBLEM_REASONS[problem], f"snapshot {problem}", path)
        for path in sorted(earliest):
            assert current is not None
            now = current.get(path)
            last = latest[path]
            if last.hash_after is None:
                unchecked.append(path)
            elif content_hash(now) != last.hash_after and not _never_written(last, now):
                raise refuse(
                    RestoreReason.OUT_OF_BAND_CHANGE,
                    "the file changed since the session last wrote it",
                    path,
                )
            restores.append(FileRestore(path, snapshot_content(earliest[path])))
    return RestorePlan(
        session_id,
        seq,
        head,
        seq - 1 if conversation else None,
        tuple(restores),
        tuple(unchecked),
    )


def _never_written(snapshot: FileSnapshot, now: bytes | None) -> bool:
    """Whether the file still holds what ``snapshot`` saw before its tool wrote."""
    if snapshot.truncated or snapshot_problem(snapshot) is not None:
        return False
    return snapshot_content(snapshot) == now


def apply_plan(current: Mapping[str, bytes], plan: RestorePlan) -> dict[str, bytes]:
    """The workspace after ``plan``: its files put back, deleted ones gone."""
    after = dict(current)
    for restore in plan.files:
        if restore.content is None:
            after.pop(restore.path, None)
        else:
            after[restore.path] = restore.content
    return after
