"""Checkpoints: the points a session can be restored to (rules CKPT-001 to CKPT-003).

`checkpoints_model` is the oracle for ``checkpointspec.reference.list_checkpoints``.
Every `UserPrompt` is a checkpoint, block-form prompts included; runtime
reminders, repair messages and background completions are events of their own
kinds and never are. The event union names user input explicitly, so no
heuristic guesses which messages a user typed.

A checkpoint's ``files`` are the paths a restore to it would put back: every
path with a snapshot after the checkpoint, restored from the *earliest* such
snapshot (the content the file had when the session first touched it after
the prompt). ``unavailable_files`` are the paths that snapshot cannot put back,
each with its reason; the two are disjoint and both sorted by path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeAlias

import msgspec

from .errors import InvalidArgumentError
from .events import FileSnapshot, UserPrompt
from .records import StoredEvent
from .snapshots import SnapshotContentError, canonical_path, snapshot_content

__all__ = [
    "Checkpoint",
    "UnavailableFile",
    "UnavailableReason",
    "checkpoints_model",
    "snapshot_key",
    "snapshot_problem",
]

UnavailableReason: TypeAlias = Literal["truncated", "unsafe_path", "undecodable"]


class UnavailableFile(msgspec.Struct, frozen=True):
    """A path a restore cannot put back, and why."""

    path: str
    reason: UnavailableReason


class Checkpoint(msgspec.Struct, frozen=True):
    """A user prompt a session can be restored to.

    ``seq`` and ``ts`` are the prompt's; ``prompt`` its text (the extra blocks
    of a block-form prompt are not repeated here).
    """

    seq: int
    prompt: str
    ts: str
    files: tuple[str, ...]
    unavailable_files: tuple[UnavailableFile, ...]


def snapshot_problem(snapshot: FileSnapshot) -> UnavailableReason | None:
    """Why ``snapshot`` cannot put its file back, or None when it can.

    Checked in this order: the path, truncation, then the content's encoding.
    """
    try:
        canonical_path(snapshot.path)
    except InvalidArgumentError:
        return "unsafe_path"
    if snapshot.truncated:
        return "truncated"
    try:
        snapshot_content(snapshot)
    except SnapshotContentError:
        return "undecodable"
    return None


def snapshot_key(path: str) -> str:
    """The file a snapshot path names: its canonical form, or the path as written when unsafe."""
    try:
        return canonical_path(path)
    except InvalidArgumentError:
        return path


def checkpoints_model(events: Iterable[StoredEvent]) -> list[Checkpoint]:
    """The checkpoints of a log, by the CKPT rules; ``events`` in seq order."""
    log = list(events)
    result = []
    for i, stored in enumerate(log):
        if not isinstance(stored.event, UserPrompt):
            continue
        earliest: dict[str, FileSnapshot] = {}
        for later in log[i + 1 :]:
            if isinstance(later.event, FileSnapshot):
                earliest.setdefault(snapshot_key(later.event.path), later.event)
        files = []
        unavailable = []
        for path in sorted(earliest):
            problem = snapshot_problem(earliest[path])
            if problem is None:
                files.append(path)
            else:
                unavailable.append(UnavailableFile(path, problem))
        result.append(
            Checkpoint(stored.seq, stored.event.text, stored.ts, tuple(files), tuple(unavailable))
        )
    return result
