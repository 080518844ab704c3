"""The sequential model of a LangGraph checkpoint saver: the oracle of its contract.

A saver holds, per thread and namespace, checkpoints by id (each with its channel
values and versions, metadata and parent) and, per checkpoint, pending writes by
``(task_id, index)``. `SaverState` is that, as plain data; `step` is one call on it,
returning the next state and the answer a conforming saver gives. Nothing here
imports LangGraph: a call's arguments and answers are the plain data the saver
methods take and return (`checkpointspec.spec.langgraph.calls` says their
layout; the kit's adapter turns them into the saver's calls and its
``CheckpointTuple`` into a `TupleView`).

Where two of LangGraph's own savers differ and LangGraph's docs do not say which is
right, the model does not choose: the calls the kit draws avoid the case (a
put_writes mixing special and regular channels, a list whose order or limit
spans several threads or namespaces), and `checkpointspec.spec.langgraph.calls`
says so where it draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

__all__ = [
    "SPECIAL_CHANNELS",
    "CheckpointKey",
    "SaverState",
    "StoredCheckpoint",
    "StoredWrite",
    "TupleView",
    "group_order",
    "metadata_as_stored",
    "tagged",
    "view_of",
    "writes_after",
]

SPECIAL_CHANNELS: Final[Mapping[str, int]] = {
    "__error__": -1,
    "__scheduled__": -2,
    "__interrupt__": -3,
    "__resume__": -4,
}
"""LangGraph's WRITES_IDX_MAP: the index a write to a special channel is stored under."""

CheckpointKey: TypeAlias = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)."""

TupleView: TypeAlias = dict[str, object]
"""A CheckpointTuple as plain data: ``thread_id``, ``checkpoint_ns``,
``checkpoint_id`` (its config's), ``id``, ``v`` and ``ts`` (its checkpoint's), ``channel_values``,
``channel_versions``, ``versions_seen``, ``metadata``, ``parent`` (``[thread_id, checkpoint_ns,
checkpoint_id]`` of its parent_config, or None) and ``pending_writes``
(``[task_id, channel, value]`` lists)."""


class StoredCheckpoint(msgspec.Struct, frozen=True):
    """One checkpoint as a conforming saver holds it."""

    id: str
    values: dict[str, object]
    versions: dict[str, str]
    metadata: dict[str, object]
    parent: str | None
    seen: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    """versions_seen: per node, the channel versions it has seen."""
    v: int = 1
    ts: str = ""


class StoredWrite(msgspec.Struct, frozen=True):
    """One pending write: who wrote it, where it sorts, and what."""

    task_id: str
    index: int
    channel: str
    value: object
    task_path: str


def tagged(value: object) -> object:
    """``value`` as an answer compares it: JSON's kinds, with what JSON would blur kept
    apart (bytes from text, a float from an integer, a boolean from 0 and 1), so that a
    saver whose round trip changes a value's type is seen (LGCHAN-001). A tuple is a
    list: LangGraph's serializer does not promise to keep tuples."""
    if isinstance(value, bool):
        return {"$bool": value}
    if isinstance(value, float):
        return {"$float": repr(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": bytes(value).hex()}
    if isinstance(value, (list, tuple)):
        return [tagged(v) for v in value]
    if isinstance(value, dict):
        return {str(k): tagged(v) for k, v in value.items()}
    return value


def metadata_as_stored(metadata: Mapping[str, object]) -> dict[str, object]:
    """The metadata a saver stores for ``metadata`` put with a config naming only its
    thread, namespace and parent: LangGraph's get_checkpoint_metadata, which takes
    NUL characters out of text values (the config adds no key of its own)."""
    return {k: v.replace("\x00", "") if isinstance(v, str) else v for k, v in metadata.items()}


def writes_after(
    held: Mapping[tuple[str, int], StoredWrite],
    writes: Sequence[tuple[str, object]],
    task_id: str,
    task_path: str,
) -> dict[tuple[str, int], StoredWrite]:
    """The pending writes of a checkpoint after put_writes(writes, task_id, task_path):
    a call of special channels only replaces the task's earlier write of each
    (LGWRITE-003); any other keeps the first write of a ``(task_id, index)``
    (LGWRITE-002)."""
    replace = bool(writes) and all(channel in SPECIAL_CHANNELS for channel, _ in writes)
    after = dict(held)
    for index, (channel, value) in enumerate(writes):
        key = (task_id, SPECIAL_CHANNELS.get(channel, index))
        if replace or key not in held:
            after[key] = StoredWrite(task_id, key[1], channel, value, task_path)
    return after


def _sorted_writes(held: Mapping[tuple[str, int], StoredWrite]) -> list[list[object]]:
    ordered = sorted(held.values(), key=lambda w: (w.task_path, w.task_id, w.index))
    return [[w.task_id, w.channel, tagged(w.value)] for w in ordered]


def view_of(
    key: CheckpointKey, stored: StoredCheckpoint, writes: Mapping[tuple[str, int], StoredWrite]
) -> TupleView:
    """The tuple a conforming saver returns for the checkpoint ``key``."""
    thread_id, checkpoint_ns, checkpoint_id = key
    return {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "id": stored.id,
        "v": stored.v,
        "ts": stored.ts,
        "channel_values": tagged(stored.values),
        "channel_versions": dict(stored.versions),
        "versions_seen": {node: dict(seen) for node, seen in stored.seen.items()},
        "metadata": tagged(stored.metadata),
        "parent": [thread_id, checkpoint_ns, stored.parent] if stored.parent else None,
        "pending_writes": _sorted_writes(writes),
    }


def group_order(views: Sequence[TupleView]) -> list[TupleView]:
    """``views`` grouped by thread and namespace (in sorted order), each group in the
    order the saver gave: what a listing is compared as, since LangGraph fixes the
    order within a namespace only (LGLIST-005)."""
    return sorted(views, key=lambda v: (str(v["thread_id"]), str(v["checkpoint_ns"])))


class SaverState:
    """What a conforming saver holds, with what the contract's judge needs to name a
    divergence: which operation removed a checkpoint (``removed``) and which last
    carried one whole (``carried``: a copy, a prune or delete_for_runs it
    survived). ``next_id`` numbers the checkpoints the kit puts, ``next_write``
    the put_writes calls.

    A state is never changed once made: `step` returns a new one. It hashes and
    compares by what decides answers, so the history checker can remember states.
    """

    __slots__ = ("_key", "carried", "checkpoints", "next_id", "next_write", "removed", "writes")

    def __init__(self) -> None:
        self.checkpoints: dict[tuple[str, str], dict[str, StoredCheckpoint]] = {}
        self.writes: dict[CheckpointKey, dict[tuple[str, int], StoredWrite]] = {}
        self.removed: dict[CheckpointKey, str] = {}
        self.carried: dict[CheckpointKey, str] = {}
        self.next_id = 1
        self.next_write = 1
        self._key: bytes | None = None

    # -- reading -------------------------------------------------------------------
    def stored(self, key: CheckpointKey) -> StoredCheckpoint | None:
        """The checkpoint ``key``, if held."""
        return self.checkpoints.get(key[:2], {}).get(key[2])

    def view(self, key: CheckpointKey) -> TupleView | None:
        """The tuple a conforming saver returns for ``key``; None if not held."""
        stored = self.stored(key)
        return None if stored is None else view_of(key, stored, self.writes.get(key, {}))

    def latest(self, thread_id: str, checkpoint_ns: str) -> str | None:
        """The greatest checkpoint id of a thread's namespace (LGGET-001)."""
        held = self.checkpoints.get((thread_id, checkpoint_ns), {})
        return max(held) if held else None

    def ids(self, thread_id: str, checkpoint_ns: str) -> list[str]:
        """A namespace's checkpoint ids, oldest first."""
        return sorted(self.checkpoints.get((thread_id, checkpoint_ns), {}))

    def threads(self) -> list[str]:
        """The threads holding at least one checkpoint, sorted."""
        return sorted({thread for (thread, _), held in self.checkpoints.items() if held})

    def held_keys(self) -> list[CheckpointKey]:
        """Every checkpoint held, sorted."""
        return sorted(
            (thread, ns, checkpoint_id)
            for (thread, ns), held in self.checkpoints.items()
            for checkpoint_id in held
        )

    def listing(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        filter: Mapping[str, object] | None,
        before: str | None,
        limit: int | None,
    ) -> list[TupleView]:
        """What list yields, grouped as `group_order` compares it."""
        found: list[TupleView] = []
        groups = sorted(
            (thread, ns)
            for (thread, ns), held in self.checkpoints.items()
            if held
            and (thread_id is None or thread == thread_id)
            and (checkpoint_ns is None or ns == checkpoint_ns)
        )
        for thread, ns in groups:
            for cid in sorted(self.checkpoints[(thread, ns)], reverse=True):
                stored = self.checkpoints[(thread, ns)][cid]
                if checkpoint_id is not None and cid != checkpoint_id:
                    continue
                if before is not None and cid >= before:
                    continue
                if filter and any(stored.metadata.get(k) != v for k, v in filter.items()):
                    continue
                found.append(
                    view_of((thread, ns, cid), stored, self.writes.get((thread, ns, cid), {}))
                )
        return found if limit is None else found[: max(limit, 0)]

    # -- changing (on a copy) ------------------------------------------------------------
    def changed(self) -> SaverState:
        """A copy to change: what `step` returns."""
        other = SaverState()
        other.checkpoints = {k: dict(v) for k, v in self.checkpoints.items()}
        other.writes = {k: dict(v) for k, v in self.writes.items()}
        other.removed = dict(self.removed)
        other.carried = dict(self.carried)
        other.next_id = self.next_id
        other.next_write = self.next_write
        return other

    def put(self, key: CheckpointKey, stored: StoredCheckpoint) -> None:
        self.checkpoints.setdefault(key[:2], {})[key[2]] = stored
        self.removed.pop(key, None)
        self.carried.pop(key, None)

    def remove(self, key: CheckpointKey, rule_id: str) -> None:
        held = self.checkpoints.get(key[:2], {})
        held.pop(key[2], None)
        if not held:
            self.checkpoints.pop(key[:2], None)
        self.writes.pop(key, None)
        self.carried.pop(key, None)
        self.removed[key] = rule_id

    def put_writes(
        self,
        key: CheckpointKey,
        writes: Sequence[tuple[str, object]],
        task_id: str,
        task_path: str,
    ) -> None:
        self.writes[key] = writes_after(self.writes.get(key, {}), writes, task_id, task_path)

    def copy_thread(self, source: str, target: str) -> None:
        for (thread, ns), held in list(self.checkpoints.items()):
            if thread != source:
                continue
            for cid, stored in held.items():
                self.put((target, ns, cid), stored)
                self.writes[(target, ns, cid)] = dict(self.writes.get((thread, ns, cid), {}))
                self.carried[(target, ns, cid)] = "LGCOPY-001"

    # -- identity ------------------------------------------------------------------------
    def _identity(self) -> bytes:
        if self._key is None:
            self._key = msgspec.json.encode(
                [
                    [[list(k), sorted(v.items())] for k, v in sorted(self.checkpoints.items())],
                    [
                        [list(k), sorted((list(i), w) for i, w in v.items())]
                        for k, v in sorted(self.writes.items())
                        if v
                    ],
                ],
                order="sorted",
            )
        return self._key

    def __hash__(self) -> int:
        return hash(self._identity())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SaverState) and self._identity() == other._identity()
