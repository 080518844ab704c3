"""The calls of the LangGraph saver contract as plain data, and what each does to the model.

Every call is an operation name and a tuple of plain arguments whose last is
``via``: ``"async"`` (``aput``, ``alist``, ...) or ``"sync"`` (``put``, ``list``,
...), the twin it goes through (LGTWIN-001; the model answers both alike). The
layouts, after ``via`` is taken off:

==================  ===============================================================
``put``             thread_id, checkpoint_ns, parent checkpoint_id or None,
                    checkpoint (LangGraph's ``Checkpoint`` dict), metadata,
                    new_versions
``put_writes``      thread_id, checkpoint_ns, checkpoint_id, writes
                    (``[channel, value]`` lists), task_id, task_path
``get_tuple``       thread_id, checkpoint_ns, checkpoint_id or None
``list``            thread_id or None, checkpoint_ns or None (the config has no
                    such key), checkpoint_id or None, filter or None, ``before``'s
                    checkpoint_id or None, limit or None
``delete_thread``   thread_id
``delete_for_runs`` run_ids
``copy_thread``     source thread_id, target thread_id
``prune``           thread_ids, strategy
==================  ===============================================================

A model-based run draws *intents* rather than finished calls (a put naming its
parent as "the latest" and the channels it changes), and `prepare` makes the
call a graph would make from the model's state: a fresh checkpoint id greater
than every earlier one, channel versions continuing the parent's, new_versions
naming only the channels this step wrote. That keeps every call within what
LangGraph itself does, so that a divergence is the saver's, never the workload's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, cast

import msgspec

from .model import (
    SPECIAL_CHANNELS,
    CheckpointKey,
    SaverState,
    StoredCheckpoint,
    metadata_as_stored,
)

__all__ = [
    "EXTENDED_OPERATIONS",
    "OPERATIONS",
    "READS",
    "apply",
    "checkpoint_id",
    "prepare",
    "task_path",
    "unknown_checkpoint_id",
    "version",
]

OPERATIONS: Final[tuple[str, ...]] = (
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
)
"""Every operation, in LangGraph's own order of capabilities."""

EXTENDED_OPERATIONS: Final[frozenset[str]] = frozenset({"delete_for_runs", "copy_thread", "prune"})
"""The operations a saver may leave out (LangGraph's extended capabilities)."""

READS: Final[frozenset[str]] = frozenset({"get_tuple", "list"})
"""The operations that change nothing."""


def checkpoint_id(n: int) -> str:
    """The ``n``-th checkpoint id the kit puts: UUID-shaped (savers that store ids as
    UUIDs take them) and increasing with ``n`` as text, as LangGraph's UUIDv6 ids do."""
    return f"{n:08x}-0000-6000-8000-000000000000"


def unknown_checkpoint_id() -> str:
    """A checkpoint id the kit never puts (for LGGET-002)."""
    return "ffffffff-ffff-6fff-bfff-ffffffffffff"


def version(n: int) -> str:
    """The version of a channel written by the ``n``-th checkpoint, in the shape of
    LangGraph's own: increasing, and never the same for two values."""
    return f"{n:032}.{0:016}"


def task_path(task_id: str) -> str:
    """The task_path of a task: a task has one path, and the paths of two ids that differ
    in their last character sort the other way round from the ids, so that a saver
    sorting writes by task_id alone is seen (LGWRITE-001)."""
    return f"~__pregel_pull, node-{255 - sum(map(ord, task_id)) % 256:03d}"


def _via(arguments: Sequence[object]) -> tuple[tuple[object, ...], object]:
    return tuple(arguments[:-1]), arguments[-1]


def _pick(ids: Sequence[str], pick: object) -> str | None:
    if not ids or not isinstance(pick, int):
        return None
    return ids[pick % len(ids)]


def prepare(
    state: SaverState, operation: str, intent: Sequence[object]
) -> tuple[object, ...] | None:
    """The call's arguments a graph would pass, made from the drawn ``intent`` and the
    model's ``state``; None when the intent has nothing to act on here (put_writes to
    a namespace with no checkpoint, a copy onto a thread that holds checkpoints).

    Intents (``via`` last, as in a call):

    - ``put``: thread_id, checkpoint_ns, parent (``"latest"`` or ``"none"``), values
      to set (channel to value), channels to remove, channels to put empty, metadata;
    - ``put_writes``: thread_id, checkpoint_ns, which checkpoint (an index into the
      namespace's ids), writes, task_id; each value is made ``{"write": N, "value":
      V}`` with N the call's number, so that two calls never write the same value;
    - ``get_tuple``: thread_id, checkpoint_ns, which checkpoint (None: the latest, an
      index, or ``"unknown"``);
    - ``list``: thread_id or None, checkpoint_ns or None, which checkpoint or None,
      filter, which checkpoint ``before`` names or None, limit;
    - the others: their call's arguments.
    """
    args, via = _via(intent)
    if operation == "put":
        thread, ns, parent, set_values, removed, emptied, metadata = args
        return (
            *_put_call(
                state,
                str(thread),
                str(ns),
                parent == "latest",
                cast("Mapping[str, object]", set_values),
                cast("Sequence[str]", removed),
                cast("Sequence[str]", emptied),
                cast("Mapping[str, object]", metadata),
            ),
            via,
        )
    if operation == "put_writes":
        thread, ns, which, writes, task_id = args
        target = _pick(state.ids(str(thread), str(ns)), which)
        if target is None:
            return None
        # Each call's values are its own, so that a write kept in place of another shows.
        serial = state.next_write
        stamped = [
            [c, {"write": serial, "value": v}]
            for c, v in cast("Sequence[Sequence[object]]", writes)
        ]
        return (thread, ns, target, stamped, task_id, task_path(str(task_id)), via)
    if operation == "get_tuple":
        thread, ns, which = args
        target = (
            unknown_checkpoint_id()
            if which == "unknown"
            else _pick(state.ids(str(thread), str(ns)), which)
        )
        return (thread, ns, target, via)
    if operation == "list":
        thread, ns, which, filter_, before_which, limit = args
        if thread is None:
            ns = None  # list(None) has no config to name a namespace in
        scope_ids = state.ids(str(thread), str(ns)) if thread is not None and ns is not None else []
        if thread is None or ns is None:
            # Across threads or namespaces LangGraph fixes no order, so no limit either.
            limit = None
        pool = scope_ids or [cid for _, _, cid in state.held_keys()]
        return (
            thread,
            ns,
            _pick(scope_ids, which) if thread is not None else None,
            filter_,
            _pick(sorted(set(pool)), before_which),
            limit,
            via,
        )
    if operation == "copy_thread":
        source, onto = args
        threads = state.threads()
        if source == onto or onto in threads or source not in threads:
            return None  # a copy onto a thread in use, or of nothing, LangGraph leaves open
    return tuple(intent)


def _put_call(
    state: SaverState,
    thread: str,
    ns: str,
    from_latest: bool,
    set_values: Mapping[str, object],
    removed: Sequence[str],
    emptied: Sequence[str],
    metadata: Mapping[str, object],
) -> tuple[object, ...]:
    n = state.next_id
    parent_id = state.latest(thread, ns) if from_latest else None
    parent = state.stored((thread, ns, parent_id)) if parent_id is not None else None
    versions = dict(parent.versions) if parent is not None else {}
    values = dict(parent.values) if parent is not None else {}
    new_versions: dict[str, str] = {}
    for channel in removed:
        versions.pop(channel, None)
        values.pop(channel, None)
    for channel, value in set_values.items():
        new_versions[channel] = versions[channel] = version(n)
        values[channel] = value
    for channel in emptied:
        if channel not in set_values:
            new_versions[channel] = versions[channel] = version(n)
            values.pop(channel, None)
    checkpoint = {
        "v": 1,
        "id": checkpoint_id(n),
        "ts": f"2026-01-01T00:00:00.{n:06d}+00:00",
        "channel_values": values,
        "channel_versions": versions,
        # The step's node saw the parent's versions, as LangGraph records it.
        "versions_seen": {
            **(parent.seen if parent is not None else {}),
            "node": dict(parent.versions if parent else {}),
        },
        "updated_channels": sorted(new_versions),
    }
    return (thread, ns, parent_id, checkpoint, dict(metadata), new_versions)


def apply(state: SaverState, operation: str, call: Sequence[object]) -> tuple[SaverState, object]:
    """The state after ``call`` of ``operation`` (its arguments, ``via`` last) and the
    answer a conforming saver gives, as plain data: a put's config as
    ``{thread_id, checkpoint_ns, checkpoint_id}``, a tuple as `TupleView`, a listing
    as a list of them grouped by `group_order`, None for the rest."""
    args, _ = _via(call)
    if operation == "get_tuple":
        thread_id, namespace, which = (str(args[0]), str(args[1]), args[2])
        found = which if isinstance(which, str) else state.latest(thread_id, namespace)
        return state, (state.view((thread_id, namespace, found)) if found is not None else None)
    if operation == "list":
        return state, state.listing(
            cast("str | None", args[0]),
            cast("str | None", args[1]),
            cast("str | None", args[2]),
            cast("Mapping[str, object] | None", args[3]),
            cast("str | None", args[4]),
            cast("int | None", args[5]),
        )
    after = state.changed()
    if operation == "put":
        thread, ns, parent, checkpoint, metadata, _new_versions = args
        cp = cast("Mapping[str, object]", checkpoint)
        versions = cast("dict[str, str]", cp["channel_versions"])
        values = cast("dict[str, object]", cp["channel_values"])
        key: CheckpointKey = (str(thread), str(ns), str(cp["id"]))
        after.put(
            key,
            StoredCheckpoint(
                key[2],
                {c: v for c, v in values.items() if c in versions},
                dict(versions),
                metadata_as_stored(cast("Mapping[str, object]", metadata)),
                cast("str | None", parent),
                {
                    str(node): dict(seen)
                    for node, seen in cast(
                        "Mapping[str, Mapping[str, str]]", cp["versions_seen"]
                    ).items()
                },
                cast("int", cp["v"]),
                str(cp["ts"]),
            ),
        )
        after.next_id = max(after.next_id, _number_of(key[2]) + 1)
        return after, {"thread_id": key[0], "checkpoint_ns": key[1], "checkpoint_id": key[2]}
    if operation == "put_writes":
        w_thread, w_ns, w_id, writes, task_id, path = args
        pairs = [(str(c), v) for c, v in cast("Sequence[Sequence[object]]", writes)]
        after.put_writes((str(w_thread), str(w_ns), str(w_id)), pairs, str(task_id), str(path))
        after.next_write += 1
    elif operation == "delete_thread":
        for key in state.held_keys():
            if key[0] == args[0]:
                after.remove(key, "LGDEL-001")
    elif operation == "delete_for_runs":
        run_ids = set(cast("Sequence[str]", args[0]))
        for key in state.held_keys():
            stored = state.stored(key)
            assert stored is not None
            if stored.metadata.get("run_id") in run_ids:
                after.remove(key, "LGRUNS-001")
            elif run_ids:
                after.carried[key] = "LGRUNS-001"
    elif operation == "copy_thread":
        after.copy_thread(str(args[0]), str(args[1]))
    elif operation == "prune":
        thread_ids = set(cast("Sequence[str]", args[0]))
        keep_latest = args[1] == "keep_latest"
        rule_id = "LGPRUNE-001" if keep_latest else "LGPRUNE-002"
        for key in state.held_keys():
            if key[0] not in thread_ids:
                continue
            if keep_latest and key[2] == state.latest(key[0], key[1]):
                # Its parent is pruned: a parent_config naming it would lead a graph's
                # history to a checkpoint that is gone (PostgresSaver documents None).
                kept = state.stored(key)
                assert kept is not None
                after.put(key, msgspec.structs.replace(kept, parent=None))
                after.carried[key] = rule_id
            else:
                after.remove(key, rule_id)
    else:
        raise ValueError(f"no operation {operation!r} in the LangGraph saver contract")
    return after, None


def _number_of(cid: str) -> int:
    try:
        return int(cid.split("-")[0], 16)
    except ValueError:
        return 0


def special(channel: str) -> bool:
    """Whether ``channel`` is one of LangGraph's special channels (WRITES_IDX_MAP)."""
    return channel in SPECIAL_CHANNELS
