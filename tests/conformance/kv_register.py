"""A second contract, used only by tests: a key-value register with put, get and delete.

It shows that a contract is a value the generic engines take: its rules, its
model, its operations and its judge are all here, and the model-based machine
(`engines/machines/contract.py`) and the history checker
(`engines/history/linearizable.py`) run it without a line written for it.

The stores keep the register in one JSON file under the store's directory, so
that two handles (or two processes) opened on one directory share it; each call
holds an exclusive `flock` on the file while it reads and writes. The broken
stores each make one realistic mistake.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from checkpointspec.conformance.engines.contract.contract import (
    Answer,
    Call,
    Contract,
    JSONArgs,
    Operation,
    Raised,
    Returned,
)
from checkpointspec.spec import BackendContext
from hypothesis import strategies as st


@dataclass(frozen=True)
class RegisterRule:
    id: str
    title: str
    statement: str


RULES = (
    RegisterRule(
        "KV-001",
        "get returns the latest put",
        "get(k) returns the value of the latest put of k, or None if k was never put or was deleted since.",
    ),
    RegisterRule(
        "KV-002",
        "put returns the value it replaced",
        "put(k, v) returns the value k held before it (None if none), and no two puts replace the same value.",
    ),
    RegisterRule(
        "KV-003",
        "delete of a missing key is refused",
        "delete(k) of a key that holds no value raises KeyMissing and changes nothing.",
    ),
)

State = tuple[tuple[str, int], ...]
"""The register, as its items in key order: hashable, so the history checker can remember it."""


def step(state: State, call: Call) -> tuple[State, Answer]:
    """The sequential model of the register."""
    held = dict(state)
    key = str(call.arguments[0])
    if call.operation == "get":
        return state, Returned(held.get(key))
    if call.operation == "put":
        value = call.arguments[1]
        assert isinstance(value, int)
        previous = held.get(key)
        held[key] = value
        return tuple(sorted(held.items())), Returned(previous)
    if key not in held:
        return state, Raised("KeyMissing")
    previous = held.pop(key)
    return tuple(sorted(held.items())), Returned(previous)


def judge(state: State, call: Call, expected: Answer, actual: Answer | None) -> str:
    """The rule an answer that differs from the model's breaks: each operation's own."""
    return {"get": "KV-001", "put": "KV-002", "delete": "KV-003"}[call.operation]


class KeyMissing(Exception):
    """delete of a key that holds no value."""


class FileRegister:
    """A correct register in ``path / 'register.json'``: each call holds an exclusive
    lock (``register.lock``), and a write replaces the file whole (a new file,
    synced, renamed over it, the directory synced), so a writer killed or a power
    loss at any point leaves the old register or the new one, and an answered call
    is on disk."""

    def __init__(self, path: Path) -> None:
        self.file = path / "register.json"
        self.lock = path / "register.lock"

    def _locked(self) -> int:
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _load(self) -> dict[str, int]:
        # An empty file is an empty register: only a broken writer leaves one, and
        # the reads after it then show what that writer lost.
        try:
            text = self.file.read_bytes()
        except FileNotFoundError:
            return {}
        loaded: dict[str, int] = json.loads(text) if text else {}
        return loaded

    def _save(self, held: dict[str, int]) -> None:
        fresh = self.file.with_suffix(".tmp")
        with fresh.open("wb") as out:
            out.write(json.dumps(held).encode())
            out.flush()
            os.fsync(out.fileno())
        fresh.replace(self.file)
        directory = os.open(self.file.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    async def get(self, key: str) -> int | None:
        fd = self._locked()
        try:
            return self._load().get(key)
        finally:
            os.close(fd)

    async def put(self, key: str, value: int) -> int | None:
        fd = self._locked()
        try:
            held = self._load()
            previous = held.get(key)
            held[key] = value
            self._save(held)
            return previous
        finally:
            os.close(fd)

    async def delete(self, key: str) -> int:
        fd = self._locked()
        try:
            held = self._load()
            if key not in held:
                raise KeyMissing(key)
            previous = held.pop(key)
            self._save(held)
            return previous
        finally:
            os.close(fd)

    async def close(self) -> None:
        return None


class RewritesInPlace(FileRegister):
    """Empties the file, then writes the new contents into it (KV-001 after a kill):
    a writer killed between the two leaves an empty register, its earlier puts gone.
    No run without a kill shows it."""

    def _save(self, held: dict[str, int]) -> None:
        with self.file.open("wb") as out:
            out.write(json.dumps(held).encode())


class ForgivingDelete(FileRegister):
    """Deletes a missing key without a word (KV-003): the model-based machine's to find."""

    async def delete(self, key: str) -> int:
        try:
            return await super().delete(key)
        except KeyMissing:
            return 0


class RenamesUnsynced(FileRegister):
    """Renames a new file over the old without syncing either (KV-001 after a power
    loss): the rename may reach the disk before the bytes, leaving an empty register,
    or not at all, losing an answered put. No kill shows it; the page cache survives one."""

    def _save(self, held: dict[str, int]) -> None:
        fresh = self.file.with_suffix(".tmp")
        fresh.write_bytes(json.dumps(held).encode())
        fresh.replace(self.file)


class UnlockedPut(FileRegister):
    """Reads the previous value, lets other callers run, then writes (KV-002): two
    concurrent puts both replace the same value. One caller at a time never shows it."""

    async def put(self, key: str, value: int) -> int | None:
        previous = await self.get(key)
        await asyncio.sleep(0)
        fd = self._locked()
        try:
            held = self._load()
            held[key] = value
            self._save(held)
        finally:
            os.close(fd)
        return previous


def _call(name: str) -> Callable[[FileRegister, JSONArgs], Awaitable[object]]:
    async def call(store: FileRegister, arguments: JSONArgs) -> object:
        method = getattr(store, name)
        return await method(*arguments)

    return call


_key = st.sampled_from(["a", "b"])

REGISTER: Contract[FileRegister, State] = Contract(
    name="kv_register",
    rules=RULES,
    initial=tuple,
    step=step,
    operations=(
        Operation("get", st.tuples(_key), _call("get"), writes=False),
        Operation("put", st.tuples(_key, st.integers(0, 3)), _call("put")),
        Operation("delete", st.tuples(_key), _call("delete")),
    ),
    judge=judge,
    error_name=lambda exc: "KeyMissing" if isinstance(exc, KeyMissing) else None,
    close=lambda store: store.close(),
    key=lambda call: call.arguments[0],
    readback=lambda calls: tuple(
        Call("get", (key,)) for key in sorted({str(c.arguments[0]) for c in calls})
    ),
)


def opener(kind: type[FileRegister]) -> Callable[[Path], Awaitable[FileRegister]]:
    """A function opening a handle of store class ``kind`` on a directory."""

    async def open_store(path: Path) -> FileRegister:
        return kind(path)

    return open_store


def make(ctx: BackendContext) -> FileRegister:
    """The correct register as a backend's factory, for worker processes;
    ``--option kind=UnlockedPut`` opens a broken one."""
    kinds = {
        kind.__name__: kind
        for kind in (FileRegister, ForgivingDelete, UnlockedPut, RewritesInPlace, RenamesUnsynced)
    }
    return kinds[ctx.options.get("kind", "FileRegister")](ctx.path)
