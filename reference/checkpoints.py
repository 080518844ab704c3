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

import bisect
from typing import Any, Final

from ..spec import (
    EVENT_TYPES,
    Checkpoint,
    Checkpointer,
    FileSnapshot,
    InvalidArgumentError,
    UnavailableFile,
    UnavailableReason,
    UserPrompt,
    canonical_path,
    snapshot_content,
)
from ..spec.checkpoints import snapshot_key
from ..spec.snapshots import SnapshotContentError
from .fold import event_kind

__all__ = ["list_checkpoints"]

_NEITHER: Final = frozenset(EVENT_TYPES) - {FileSnapshot, UserPrompt}
"""The event kinds a listing skips."""
_UNSEEN: Final = "unseen"  # not an UnavailableReason, nor None


def _key(path: str) -> tuple[str, bool]:
    """The file a snapshot path names (`snapshot_key`) and whether the path is safe."""
    try:
        return canonical_path(path), True
    except InvalidArgumentError:
        return snapshot_key(path), False


def _problem(snapshot: FileSnapshot, safe: bool) -> UnavailableReason | None:
    """`checkpointspec.spec.checkpoints.snapshot_problem`, with the path's safety known."""
    if not safe:
        return "unsafe_path"
    if snapshot.truncated:
        return "truncated"
    content = snapshot.content_before
    if content is None or (snapshot.encoding == "utf-8" and content.isascii()):
        return None  # nothing to decode; ASCII text always encodes (isascii is O(1))
    try:
        snapshot_content(snapshot)
    except SnapshotContentError:
        return "undecodable"
    return None


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
    # and before prompt i + 1. Snapshots before the first prompt go to a segment
    # of no checkpoint, dropped at the end.
    segments: list[dict[str, UnavailableReason | None]] = []
    segment: dict[str, UnavailableReason | None] = {}
    keys: dict[str, tuple[str, bool]] = {}  # raw path -> (canonical key, safe)
    async for stored in checkpointer.read(session_id):
        # Typed Any: the class tests below are the narrowing, and cast() costs a call.
        event: Any = stored.event
        cls = type(event)
        if cls in _NEITHER:
            continue  # nine events in ten: one set lookup
        if cls is not FileSnapshot and cls is not UserPrompt:
            cls = event_kind(cls)  # a subclass of an event kind
            if cls is not FileSnapshot and cls is not UserPrompt:
                continue
        if cls is UserPrompt:
            prompts.append((stored.seq, event.text, stored.ts))
            segment = {}
            segments.append(segment)
            continue
        raw = event.path
        if raw in segment:
            continue  # the path again, spelt canonically (or unsafely, its own key)
        known = keys.get(raw)
        if known is None:
            known = keys[raw] = _key(raw)
        key = known[0]
        if key == raw or key not in segment:
            segment[key] = _problem(event, known[1])
    return _assemble(prompts, segments)


def _assemble(
    prompts: list[tuple[int, str, str]], segments: list[dict[str, UnavailableReason | None]]
) -> list[Checkpoint]:
    """Each checkpoint's files from its segment and the later ones, the earliest winning.

    Walks the segments backwards keeping both answers as sorted lists, updated
    by bisection where a segment adds a path or changes its verdict, so a
    checkpoint costs its own segment plus copying the lists into tuples, not a
    sort of every path the session touched.
    """
    result: list[Checkpoint] = []
    merged: dict[str, UnavailableReason | None] = {}
    restorable: list[str] = []
    unavailable_paths: list[str] = []
    unavailable_items: list[UnavailableFile] = []
    files: tuple[str, ...] = ()
    unavailable: tuple[UnavailableFile, ...] = ()
    for (seq, text, ts), segment in zip(reversed(prompts), reversed(segments), strict=True):
        changed = False
        for path, problem in segment.items():
            old = merged.get(path, _UNSEEN)
            if old == problem:
                continue
            changed = True
            merged[path] = problem
            if old is None:
                del restorable[bisect.bisect_left(restorable, path)]
            elif old is not _UNSEEN:
                at = bisect.bisect_left(unavailable_paths, path)
                del unavailable_paths[at], unavailable_items[at]
            if problem is None:
                bisect.insort(restorable, path)
            else:
                at = bisect.bisect_left(unavailable_paths, path)
                unavailable_paths.insert(at, path)
                unavailable_items.insert(at, UnavailableFile(path, problem))
        if changed:
            files, unavailable = tuple(restorable), tuple(unavailable_items)
        # Otherwise this checkpoint lists what the next one lists: the tuples are shared.
        result.append(Checkpoint(seq, text, ts, files, unavailable))
    result.reverse()
    return result
