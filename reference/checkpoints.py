"""Listing the checkpoints of a session (CKPT-001..003), in one streaming pass.

`list_checkpoints` returns exactly what `checkpointspec.spec.checkpoints_model`,
the oracle, returns for the session's log, without holding the log: memory
grows with the number of checkpoints and the distinct paths snapshotted between
two prompts, never with the number of events.

How: the prompts cut the log into segments. While reading, each segment keeps
the problem (`checkpointspec.spec.snapshot_problem`, None for a restorable
file) of the *first* snapshot of each path in it. A checkpoint's files are
then those of its own segment and every later one, the earliest segment
winning for a path snapshotted in several; one backwards pass over the
segments builds them all.
"""

from __future__ import annotations

from typing import Any, Final

from ..spec import (
    EVENT_TYPES,
    Checkpoint,
    Checkpointer,
    FileSnapshot,
    UnavailableFile,
    UnavailableReason,
    UserPrompt,
)
from ..spec.checkpoints import snapshot_key, snapshot_problem
from .fold import event_kind

__all__ = ["list_checkpoints"]

_KNOWN: Final = frozenset(EVENT_TYPES)


async def list_checkpoints(checkpointer: Checkpointer, session_id: str) -> list[Checkpoint]:
    """The checkpoints of ``session_id``, in seq order (CKPT-001..003).

    One per user prompt, block-form included, with the prompt's seq, text and
    ts, the paths a restore to it puts back (``files``) and those it cannot,
    with why (``unavailable_files``). An unknown session has none. Errors of
    ``checkpointer.read`` propagate (an invalid session id, a closed handle, a
    damaged store).
    """
    prompts: list[tuple[int, str, str]] = []
    # segments[i]: canonical path -> problem of its first snapshot after prompt i
    # and before prompt i + 1. Snapshots before the first prompt belong to none.
    segments: list[dict[str, UnavailableReason | None]] = []
    segment: dict[str, UnavailableReason | None] | None = None
    # The raw paths of the current segment already accounted for: a repeated path
    # (the common case) costs one dict lookup, not a canonicalisation.
    seen: set[str] = set()
    keys: dict[str, str] = {}  # raw path -> canonical, shared by all segments
    async for stored in checkpointer.read(session_id):
        # Typed Any: the class test below is the narrowing, and cast() costs a call.
        event: Any = stored.event
        cls = type(event)
        if cls not in _KNOWN:
            cls = event_kind(cls)
        if cls is FileSnapshot:
            raw = event.path
            if segment is None or raw in seen:
                continue
            seen.add(raw)
            key = keys.get(raw)
            if key is None:
                key = keys[raw] = snapshot_key(raw)
            if key not in segment:
                segment[key] = snapshot_problem(event)
        elif cls is UserPrompt:
            prompts.append((stored.seq, event.text, stored.ts))
            segment = {}
            segments.append(segment)
            seen = set()
    return _assemble(prompts, segments)


def _assemble(
    prompts: list[tuple[int, str, str]], segments: list[dict[str, UnavailableReason | None]]
) -> list[Checkpoint]:
    """Each checkpoint's files from its segment and the later ones, the earliest winning."""
    result: list[Checkpoint] = []
    merged: dict[str, UnavailableReason | None] = {}
    files: tuple[str, ...] = ()
    unavailable: tuple[UnavailableFile, ...] = ()
    for (seq, text, ts), segment in zip(reversed(prompts), reversed(segments), strict=True):
        if segment:
            merged.update(segment)
            ordered = sorted(merged.items())
            files = tuple(path for path, problem in ordered if problem is None)
            unavailable = tuple(
                UnavailableFile(path, problem) for path, problem in ordered if problem is not None
            )
        # A segment without snapshots lists what the next checkpoint lists: share the tuples.
        result.append(Checkpoint(seq, text, ts, files, unavailable))
    result.reverse()
    return result
