"""LangGraph-shaped savers written for the test suite: one correct, and one-bug variants.

`DictSaver` has every method of a LangGraph ``BaseCheckpointSaver`` (both twins,
the extended operations too) without importing LangGraph, storing in plain dicts
with values deep-copied in and out, as a serializer would. Each subclass breaks
one rule the way a real saver might. `make` is the factory the kit calls
(``--langgraph langgraph_savers:make -o kind=NAME``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import fcntl
import os
import pickle
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from checkpointspec.spec import BackendContext

WRITES_IDX_MAP = {"__error__": -1, "__scheduled__": -2, "__interrupt__": -3, "__resume__": -4}


class CheckpointTuple(NamedTuple):
    config: dict[str, Any]
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    parent_config: dict[str, Any] | None = None
    pending_writes: list[tuple[str, str, Any]] | None = None


def _writes_key(config: dict[str, Any]) -> tuple[str, str, str]:
    """The checkpoint a put_writes config names: (thread, namespace, id)."""
    c = config["configurable"]
    return (c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"])


class PickleSerde:
    """A serializer with LangGraph's typed interface (``serde``), pickling."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return ("pickle", pickle.dumps(obj))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return pickle.loads(data[1])


class DictSaver:
    """A correct saver: checkpoints by (thread, ns) then id, writes by checkpoint then
    (task_id, index), one lock around every call; every value passes through its
    ``serde``, each call's values serialised before anything is stored."""

    def __init__(self) -> None:
        self.serde: Any = PickleSerde()
        self.checkpoints: dict[
            tuple[str, str], dict[str, tuple[dict[str, Any], dict[str, Any], str | None]]
        ] = {}
        self.writes: dict[tuple[str, str, str], dict[tuple[str, int], tuple[str, Any, str]]] = {}
        self.lock = threading.Lock()

    # -- sync twins ----------------------------------------------------------------
    def put(
        self,
        config: dict[str, Any],
        checkpoint: dict[str, Any],
        metadata: dict[str, Any],
        new_versions: dict[str, str],
    ) -> dict[str, Any]:
        c = config["configurable"]
        serialised = self.serde.dumps_typed(checkpoint)
        with self.lock:
            self.checkpoints.setdefault((c["thread_id"], c.get("checkpoint_ns", "")), {})[
                checkpoint["id"]
            ] = (
                serialised,
                self._metadata(metadata),
                c.get("checkpoint_id"),
            )
        return {
            "configurable": {
                "thread_id": c["thread_id"],
                "checkpoint_ns": c.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v.replace("\x00", "") if isinstance(v, str) else copy.deepcopy(v)
            for k, v in metadata.items()
        }

    def put_writes(
        self,
        config: dict[str, Any],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = _writes_key(config)
        replace = all(ch in WRITES_IDX_MAP for ch, _ in writes)
        entries = (
            ((task_id, WRITES_IDX_MAP.get(channel, idx)), channel, value)
            for idx, ((channel, _), value) in enumerate(
                zip(writes, self._serialised(writes), strict=True)
            )
        )
        before: set[tuple[str, int]] | None = None
        for batch in self._transactions(entries):
            with self.lock:
                held = self.writes.setdefault(key, {})
                before = set(held) if before is None else before
                for slot, channel, value in batch:
                    if self._stores(slot in before, replace):
                        held[slot] = (channel, value, task_path)

    def _transactions(self, entries: Iterator[Any]) -> Iterable[Iterable[Any]]:
        """The writes of one call, in the batches stored under one lock each: all at
        once (each entry is serialised as the batch is stored)."""
        return [entries]

    def _serialised(self, writes: Sequence[tuple[str, Any]]) -> Iterable[Any]:
        """The writes' values serialised, every one before any is stored."""
        return [self.serde.dumps_typed(value) for _, value in writes]

    def _stores(self, held: bool, replace: bool) -> bool:
        """Whether a write to a slot (``held`` before this call) is stored: a call of
        special channels replaces, any other keeps the first."""
        return replace or not held

    def _tuple(self, thread: str, ns: str, cid: str) -> CheckpointTuple:
        checkpoint, metadata, parent = self.checkpoints[(thread, ns)][cid]
        held = self.writes.get((thread, ns, cid), {})
        order = sorted(held, key=lambda slot: (held[slot][2], slot[0], slot[1]))
        checkpoint = self.serde.loads_typed(checkpoint)
        checkpoint["channel_values"] = {
            k: v
            for k, v in checkpoint["channel_values"].items()
            if k in checkpoint["channel_versions"]
        }
        return CheckpointTuple(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}},
            checkpoint,
            copy.deepcopy(metadata),
            {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}}
            if parent
            else None,
            [(slot[0], held[slot][0], self.serde.loads_typed(held[slot][1])) for slot in order],
        )

    def get_tuple(self, config: dict[str, Any]) -> CheckpointTuple | None:
        c = config["configurable"]
        thread, ns = c["thread_id"], c.get("checkpoint_ns", "")
        with self.lock:
            held = self.checkpoints.get((thread, ns), {})
            cid = c.get("checkpoint_id") or (max(held) if held else None)
            if cid is None or cid not in held:
                return None
            return self._tuple(thread, ns, cid)

    def list(
        self,
        config: dict[str, Any] | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        c = (config or {}).get("configurable", {})
        before_id = (before or {}).get("configurable", {}).get("checkpoint_id")
        with self.lock:
            found = []
            for (thread, ns), held in sorted(self.checkpoints.items()):
                if config is not None and thread != c["thread_id"]:
                    continue
                if "checkpoint_ns" in c and ns != c["checkpoint_ns"]:
                    continue
                for cid in sorted(held, reverse=True):
                    if c.get("checkpoint_id") and cid != c["checkpoint_id"]:
                        continue
                    if before_id and cid >= before_id:
                        continue
                    if filter and any(held[cid][1].get(k) != v for k, v in filter.items()):
                        continue
                    found.append(self._tuple(thread, ns, cid))
        yield from found if limit is None else found[:limit]

    def delete_thread(self, thread_id: str) -> None:
        with self.lock:
            for key in [k for k in self.checkpoints if k[0] == thread_id]:
                del self.checkpoints[key]
            for key in [k for k in self.writes if k[0] == thread_id]:
                del self.writes[key]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        with self.lock:
            for (thread, ns), held in list(self.checkpoints.items()):
                for cid in [
                    cid for cid, saved in held.items() if saved[1].get("run_id") in run_ids
                ]:
                    del held[cid]
                    self.writes.pop((thread, ns, cid), None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with self.lock:
            for (thread, ns), held in list(self.checkpoints.items()):
                if thread == source_thread_id:
                    self.checkpoints[(target_thread_id, ns)] = copy.deepcopy(held)
                    for cid in held:
                        if (thread, ns, cid) in self.writes:
                            self.writes[(target_thread_id, ns, cid)] = copy.deepcopy(
                                self.writes[(thread, ns, cid)]
                            )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        with self.lock:
            for (thread, ns), held in list(self.checkpoints.items()):
                if thread not in thread_ids:
                    continue
                keep = max(held) if strategy == "keep_latest" and held else None
                for cid in [cid for cid in held if cid != keep]:
                    del held[cid]
                    self.writes.pop((thread, ns, cid), None)
                if keep is not None:  # its parent is gone: it has none
                    checkpoint, metadata, _ = held[keep]
                    held[keep] = (checkpoint, metadata, None)

    # -- async twins -------------------------------------------------------------------
    async def aput(self, *args: Any) -> dict[str, Any]:
        return self.put(*args)

    async def aput_writes(self, *args: Any) -> None:
        self.put_writes(*args)

    async def aget_tuple(self, config: dict[str, Any]) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self, config: dict[str, Any] | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, **kwargs):
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)


class SortsWritesByTaskId(DictSaver):
    """Pending writes sorted by task_id alone, not task_path first (LGWRITE-001)."""

    def _tuple(self, thread: str, ns: str, cid: str) -> CheckpointTuple:
        found = super()._tuple(thread, ns, cid)
        return found._replace(pending_writes=sorted(found.pending_writes or [], key=lambda w: w[0]))


class OverwritesRegularWrites(DictSaver):
    """A retried task's regular writes replace the first (LGWRITE-002)."""

    def _stores(self, held: bool, replace: bool) -> bool:
        return True


class LatestIsOldest(DictSaver):
    """get_tuple without an id returns the oldest checkpoint: a sort the wrong way (LGGET-001)."""

    def get_tuple(self, config: dict[str, Any]) -> CheckpointTuple | None:
        c = config["configurable"]
        if c.get("checkpoint_id"):
            return super().get_tuple(config)
        held = self.checkpoints.get((c["thread_id"], c.get("checkpoint_ns", "")), {})
        return self._tuple(c["thread_id"], c.get("checkpoint_ns", ""), min(held)) if held else None


class BeforeInclusive(DictSaver):
    """``before`` keeps the checkpoint it names (LGLIST-003)."""

    def list(
        self,
        config: dict[str, Any] | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if before is None:
            yield from super().list(config, filter=filter, limit=limit)
            return
        before_id = before["configurable"]["checkpoint_id"]
        everything = super().list(config, filter=filter)
        found = [t for t in everything if t.config["configurable"]["checkpoint_id"] <= before_id]
        yield from found if limit is None else found[:limit]


class DeleteThreadRootOnly(DictSaver):
    """delete_thread removes the root namespace only; a subgraph's checkpoints stay (LGDEL-001)."""

    def delete_thread(self, thread_id: str) -> None:
        with self.lock:
            for key in [k for k in self.checkpoints if k[0] == thread_id and k[1] == ""]:
                del self.checkpoints[key]


class PruneDropsLatestWrites(DictSaver):
    """prune keep_latest keeps the latest checkpoint but drops its writes (LGPRUNE-001)."""

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        super().prune(thread_ids, strategy=strategy)
        with self.lock:
            for key in [k for k in self.writes if k[0] in thread_ids]:
                del self.writes[key]


class UnlockedWrites(DictSaver):
    """put_writes reads the held writes, yields, then stores a copy: two tasks writing
    at once lose one's writes (LGMP-001)."""

    async def aput_writes(
        self,
        config: dict[str, Any],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = _writes_key(config)
        replace = all(ch in WRITES_IDX_MAP for ch, _ in writes)
        held = dict(self.writes.get(key, {}))
        before = set(held)
        await asyncio.sleep(0)
        for idx, (channel, value) in enumerate(writes):
            slot = (task_id, WRITES_IDX_MAP.get(channel, idx))
            if self._stores(slot in before, replace):
                held[slot] = (channel, self.serde.dumps_typed(value), task_path)
        self.writes[key] = held


class WritesAsItSerialises(DictSaver):
    """put_writes stores each write as soon as it is serialised: a value that fails to
    serialise leaves the writes before it stored (LGCODEC-001)."""

    def _serialised(self, writes: Sequence[tuple[str, Any]]) -> Iterable[Any]:
        return (self.serde.dumps_typed(value) for _, value in writes)


class SkipsWhatDoesNotLoad(DictSaver):
    """A pending write whose value fails to deserialise is left out of the tuple, as
    if it had never been written (LGCODEC-002)."""

    def _tuple(self, thread: str, ns: str, cid: str) -> CheckpointTuple:
        held = self.writes.get((thread, ns, cid), {})
        loadable = {}
        for slot, (channel, value, path) in held.items():
            try:
                self.serde.loads_typed(value)
            except Exception:
                continue
            loadable[slot] = (channel, value, path)
        self.writes[(thread, ns, cid)] = loadable
        return super()._tuple(thread, ns, cid)


class SyncOnly(DictSaver):
    """A correct saver whose async twins raise NotImplementedError, as LangGraph's
    sync SqliteSaver's do: the kit checks it through its sync methods."""

    async def aget_tuple(self, config: dict[str, Any]) -> CheckpointTuple | None:
        raise NotImplementedError("use the sync methods")


class StoreLock:
    """A `FileSaver`'s lock: the saver's own thread lock and an exclusive lock on the
    store's lock file, the store's file read afresh on entry and written back on exit
    when the call changed it. Every `DictSaver` call takes ``self.lock``, so each one
    is a transaction of the whole store, across processes too."""

    def __init__(self, saver: FileSaver) -> None:
        self.saver = saver
        self.thread_lock = threading.Lock()
        self.held: Any = None
        self.read = b""

    def __enter__(self) -> None:
        self.thread_lock.acquire()
        try:
            self.held = open(self.saver.file.with_suffix(".lock"), "a+b")
            fcntl.flock(self.held, fcntl.LOCK_EX)
            self.read = self.saver.load()
        except BaseException:
            self._release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            saver = self.saver
            if exc[0] is None and pickle.dumps((saver.checkpoints, saver.writes)) != self.read:
                saver._save()
        finally:
            self._release()

    def _release(self) -> None:
        if self.held is not None:
            self.held.close()  # releases the file lock
            self.held = None
        self.thread_lock.release()


class FileSaver(DictSaver):
    """A correct saver on a file, for several processes and durable: each call holds
    the store's lock (`StoreLock`) over the file read afresh, and a change is written
    to a new file, synced, renamed over the old one and the rename synced, so a killed
    writer or a power loss leaves the old state or the new."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.file = path / "saver.pickle"
        self.lock = StoreLock(self)  # type: ignore[assignment]

    def load(self) -> bytes:
        """Read the store's file into the saver's dicts; the bytes read (b"" for none)."""
        data = self.file.read_bytes() if self.file.exists() else b""
        self.checkpoints, self.writes = pickle.loads(data) if data else ({}, {})
        return data

    def setup(self) -> None:
        """Make the store's file if there is none yet; a store that has one keeps it."""
        with self.lock:
            if not self.file.exists():
                self._save()

    def _save(self) -> None:
        fresh = self.file.with_suffix(f".{os.getpid()}.{id(self)}.new")
        with open(fresh, "wb") as out:
            out.write(pickle.dumps((self.checkpoints, self.writes)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(fresh, self.file)
        self._sync_directory()

    def _sync_directory(self) -> None:
        directory = os.open(self.file.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


class KeepsItsOwnCopy(FileSaver):
    """Reads the store's file once, when opened, and writes its own copy back on every
    change: savers in two processes overwrite each other's work (LGMP-002)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read_once = False

    def load(self) -> bytes:
        if not self.read_once:
            self.read_once = True
            return super().load()
        return b"-"  # never equal to what is written: every change is saved


class RenamesUnsynced(FileSaver):
    """Renames its new file over the old one and answers, without syncing the
    directory: a power loss may take the rename back, and an answered call with it
    (LGPOWER-001)."""

    def _sync_directory(self) -> None:
        pass


class SetupStartsOver(FileSaver):
    """setup() creates the store afresh, as a migration that drops and recreates its
    tables would (LGSETUP-001)."""

    def setup(self) -> None:
        with self.lock:
            self.checkpoints, self.writes = {}, {}


class SetupRefusesAnExistingStore(FileSaver):
    """setup() raises when the store exists, as a migration that is not idempotent does
    (LGSETUP-001)."""

    def setup(self) -> None:
        if self.file.exists():
            raise RuntimeError("table checkpoints already exists")
        super().setup()


class TornFileSaver(FileSaver):
    """Rewrites its file in place, in two writes: a writer killed between them leaves
    a file that no longer loads (LGKILL-001)."""

    def _save(self) -> None:
        data = pickle.dumps((self.checkpoints, self.writes))
        with open(self.file, "wb") as out:
            out.write(data[: len(data) // 2])
            out.flush()
            out.write(data[len(data) // 2 :])


class RowLock:
    """A `ServerSaver`'s lock: the saver's thread lock and a transaction holding the
    store's row (``FOR UPDATE``), read into the saver's dicts on entry and written
    back on exit, committed with it."""

    def __init__(self, saver: ServerSaver) -> None:
        self.saver = saver
        self.thread_lock = threading.Lock()
        self.transaction: Any = None

    def __enter__(self) -> None:
        self.thread_lock.acquire()
        try:
            saver = self.saver
            self.transaction = saver.conn.transaction()
            self.transaction.__enter__()
            (state,) = saver.conn.execute(
                "SELECT state FROM langgraph_test_saver WHERE name = %s FOR UPDATE",
                (saver.name,),
            ).fetchone()
            saver.checkpoints, saver.writes = pickle.loads(state)
        except BaseException:
            self.thread_lock.release()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            saver = self.saver
            if exc[0] is None:
                saver.conn.execute(
                    "UPDATE langgraph_test_saver SET state = %s WHERE name = %s",
                    (pickle.dumps((saver.checkpoints, saver.writes)), saver.name),
                )
            self.transaction.__exit__(*exc)
        finally:
            self.thread_lock.release()


class ServerSaver(DictSaver):
    """A correct saver on a PostgreSQL server (``--option dsn=...``): a store is a row
    of one table, named by the store's directory, and each call a transaction that
    locks the row, reads it, and writes back what the call changed."""

    CONNECT_OPTIONS = ""

    def __init__(self, dsn: str, name: str, *, set_up: bool = True) -> None:
        import psycopg

        super().__init__()
        self.conn = psycopg.connect(dsn, autocommit=True, options=self.CONNECT_OPTIONS)
        self.dsn, self.name = dsn, name
        with contextlib.suppress(psycopg.errors.UniqueViolation):  # made at once elsewhere
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS langgraph_test_saver "
                "(name text PRIMARY KEY, state bytea NOT NULL)"
            )
        self.lock = RowLock(self)  # type: ignore[assignment]
        if set_up:
            self.setup()

    def setup(self) -> None:
        """Make the store's row if it has none; a store that has one keeps it."""
        self.conn.execute(
            "INSERT INTO langgraph_test_saver VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (self.name, pickle.dumps(({}, {}))),
        )


class SetupRacesOnAFreshStore(ServerSaver):
    """setup() looks for the store's row and, finding none, inserts it a moment later:
    savers setting one fresh store up at once all insert, and all but one raise
    (LGSETUP-002)."""

    def setup(self) -> None:
        found = self.conn.execute(
            "SELECT 1 FROM langgraph_test_saver WHERE name = %s", (self.name,)
        ).fetchone()
        if found is None:
            time.sleep(0.05)  # a migration's work between its look and its write
            self.conn.execute(
                "INSERT INTO langgraph_test_saver VALUES (%s, %s)",
                (self.name, pickle.dumps(({}, {}))),
            )


class TrustsAMarkMadeElsewhere(ServerSaver):
    """setup() marks the store set up on a connection of its own before its work, which
    includes a statement no transaction may hold, and trusts the mark ever after: run
    in a caller's transaction, the work is undone and the mark stays (LGSETUP-003)."""

    def setup(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as marks:
            marks.execute("CREATE TABLE IF NOT EXISTS langgraph_test_marks (name text PRIMARY KEY)")
            if marks.execute(
                "SELECT 1 FROM langgraph_test_marks WHERE name = %s", (self.name,)
            ).fetchone():
                return
            marks.execute("INSERT INTO langgraph_test_marks VALUES (%s)", (self.name,))
        self.conn.execute("VACUUM langgraph_test_saver")  # refused inside a transaction
        super().setup()


class CommitsEachWrite(ServerSaver):
    """Stores a task's writes one transaction each: a connection cut or a server killed
    between them leaves half of a put_writes (LGSRV-001, LGSRV-002)."""

    def _transactions(self, entries: Iterator[Any]) -> Iterable[Iterable[Any]]:
        return ([entry] for entry in entries)


class CommitsUnsynced(ServerSaver):
    """Commits with ``synchronous_commit=off``: the server answers before its log is
    on disk, and a server killed then loses answered calls (LGSRV-001)."""

    CONNECT_OPTIONS = "-c synchronous_commit=off"


KINDS: dict[str, type[DictSaver]] = {
    cls.__name__: cls
    for cls in (
        DictSaver,
        SortsWritesByTaskId,
        OverwritesRegularWrites,
        LatestIsOldest,
        BeforeInclusive,
        DeleteThreadRootOnly,
        PruneDropsLatestWrites,
        UnlockedWrites,
        WritesAsItSerialises,
        SkipsWhatDoesNotLoad,
        SyncOnly,
        FileSaver,
        KeepsItsOwnCopy,
        RenamesUnsynced,
        SetupStartsOver,
        SetupRefusesAnExistingStore,
        TornFileSaver,
        ServerSaver,
        SetupRacesOnAFreshStore,
        TrustsAMarkMadeElsewhere,
        CommitsEachWrite,
        CommitsUnsynced,
    )
}


def make(ctx: BackendContext) -> object:
    """The saver the option ``kind`` names (``DictSaver`` by default); a server saver as
    a context manager that closes its connection."""
    kind = KINDS[ctx.options.get("kind", "DictSaver")]
    if issubclass(kind, ServerSaver):
        set_up = ctx.options.get("setup") != "caller"  # else the kit runs setup()
        return _closing(kind(ctx.options["dsn"], str(ctx.path), set_up=set_up))
    return kind(ctx.path) if issubclass(kind, FileSaver) else kind()


@contextlib.contextmanager
def _closing(saver: ServerSaver) -> Iterator[ServerSaver]:
    try:
        yield saver
    finally:
        saver.conn.close()
