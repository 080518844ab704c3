"""OpenAI-Agents-shaped session stores written for the test suite: correct ones, and one-bug variants.

`FileSession` has the four methods of the SDK's ``Session`` protocol without importing
the SDK: every call locks the store's JSON file, reads it, and (for a write) writes
it anew beside it, syncs it and renames it over the old one, so Session objects of
one id in any process share one history and a crash leaves the old file or the new
one. Each subclass breaks one rule the way a real store might. `make` is the factory
the kit calls (``--openai-session openai_session_stores:make -o kind=NAME``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkpointspec.spec import BackendContext, drops_stores

Item = dict[str, Any]


class FileSession:
    """A correct session: one JSON file per store, ``{session_id: [item, ...]}``, each
    call under an exclusive lock on a lock file beside it."""

    def __init__(self, session_id: str, directory: Path) -> None:
        self.session_id = session_id
        self.path = directory / "sessions.json"
        self.lock_path = directory / "sessions.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, list[Item]]]:
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self._load()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, list[Item]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        loaded: dict[str, list[Item]] = json.loads(text)
        return loaded

    def _save(self, data: dict[str, list[Item]]) -> None:
        scratch = self.path.with_suffix(".tmp")
        with open(scratch, "w", encoding="utf-8") as out:
            out.write(json.dumps(data))
            out.flush()
            os.fsync(out.fileno())
        os.replace(scratch, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def key(self) -> str:
        return self.session_id

    def _items(self, data: dict[str, list[Item]]) -> list[Item]:
        return data.get(self.key(), [])

    async def get_items(self, limit: int | None = None) -> list[Item]:
        with self._locked() as data:
            items = self._items(data)
            return items if limit is None else items[-limit:]

    async def add_items(self, items: list[Item]) -> None:
        encoded = [json.loads(json.dumps(item)) for item in items]  # refuses what JSON cannot hold
        with self._locked() as data:
            data.setdefault(self.key(), []).extend(encoded)
            self._save(data)

    async def pop_item(self) -> Item | None:
        with self._locked() as data:
            items = self._items(data)
            if not items:
                return None
            item = items.pop()
            self._save(data)
            return item

    async def clear_session(self) -> None:
        with self._locked() as data:
            data.pop(self.key(), None)
            self._save(data)


class OldestFirstLimit(FileSession):
    """get_items(limit) returns the oldest items (``ORDER BY id LIMIT n``)."""

    async def get_items(self, limit: int | None = None) -> list[Item]:
        with self._locked() as data:
            items = self._items(data)
            return items if limit is None else items[:limit]


class PopKeepsTheItem(FileSession):
    """pop_item returns the latest item and forgets to remove it."""

    async def pop_item(self) -> Item | None:
        with self._locked() as data:
            items = self._items(data)
            return items[-1] if items else None


class ClearsEverySession(FileSession):
    """clear_session deletes the whole store (``DELETE FROM messages``, no WHERE)."""

    async def clear_session(self) -> None:
        with self._locked() as data:
            data.clear()
            self._save(data)


class FoldsIds(FileSession):
    """Session ids are case-folded and NFC-normalised into the store's key."""

    def key(self) -> str:
        return unicodedata.normalize("NFC", self.session_id).casefold()


class StripsText(FileSession):
    """Every text value is stripped of whitespace on the way in."""

    async def add_items(self, items: list[Item]) -> None:
        await super().add_items([_stripped(item) for item in items])


def _stripped(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    if isinstance(value, dict):
        return {k: _stripped(v) for k, v in value.items()}
    return value


class KeepsItsOwnCopy(FileSession):
    """Each Session object reads the store once and answers from its own list after."""

    async def _copy(self) -> list[Item]:
        if not hasattr(self, "copy"):
            with self._locked() as data:
                self.copy = list(self._items(data))
        return self.copy

    async def get_items(self, limit: int | None = None) -> list[Item]:
        items = await self._copy()
        return items if limit is None else items[-limit:]

    async def add_items(self, items: list[Item]) -> None:
        await self._copy()
        await super().add_items(items)
        self.copy.extend(items)

    async def pop_item(self) -> Item | None:
        await self._copy()
        await super().pop_item()
        return self.copy.pop() if self.copy else None

    async def clear_session(self) -> None:
        await super().clear_session()
        self.copy = []


class AddsOneByOne(FileSession):
    """add_items stores each item in a call of its own: one that cannot be stored leaves
    the ones before it."""

    async def add_items(self, items: list[Item]) -> None:
        for item in items:
            await super().add_items([item])


class RacyPop(FileSession):
    """pop_item reads the latest item, then removes it in a second step: two pops at
    once both return it (select, then delete by id)."""

    async def pop_item(self) -> Item | None:
        with self._locked() as data:
            items = self._items(data)
            if not items:
                return None
            item, position = items[-1], len(items) - 1
        await asyncio.sleep(0)  # another caller runs here
        with self._locked() as data:
            items = self._items(data)
            if len(items) > position and items[position] == item:
                del items[position]
            elif item in items:
                items.remove(item)
            self._save(data)
        return item


class TornAdd(FileSession):
    """add_items rewrites the file in place: a killed writer leaves it half written."""

    def _save(self, data: dict[str, list[Item]]) -> None:
        text = json.dumps(data)
        with open(self.path, "w", encoding="utf-8") as out:
            middle = len(text) // 2
            out.write(text[:middle])
            out.flush()
            out.write(text[middle:])


KINDS = {
    cls.__name__: cls
    for cls in (
        FileSession,
        OldestFirstLimit,
        PopKeepsTheItem,
        ClearsEverySession,
        FoldsIds,
        StripsText,
        KeepsItsOwnCopy,
        AddsOneByOne,
        RacyPop,
        TornAdd,
    )
}


def make(session_id: str, ctx: BackendContext) -> FileSession:
    """The kit's factory: the session ``-o kind=NAME`` names (FileSession by default)."""
    return KINDS[ctx.options.get("kind", "FileSession")](session_id, ctx.path)


OPENED_MARK = "opened-by-elsewhere"
"""The file `elsewhere` leaves in each store directory it opens a session on."""


def _noted(ctx: BackendContext, line: str) -> None:
    with Path(ctx.options["ledger"]).open("a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")


async def _note_the_drop(ctx: BackendContext) -> list[str]:
    """Note the drop, and which store directories are still there for it to find."""
    present = sorted(str(mark.parent) for mark in ctx.path.rglob(OPENED_MARK))
    _noted(ctx, f"dropped {ctx.path}")
    for directory in present:
        _noted(ctx, f"found {directory}")
    return present


@drops_stores(_note_the_drop)
def elsewhere(session_id: str, ctx: BackendContext) -> FileSession:
    """`FileSession`, its factory saying its stores keep data elsewhere (`DropsStores`): each
    store it opens and each drop (with the store directories still there) noted in the
    file ``ctx.options["ledger"]``."""
    (ctx.path / OPENED_MARK).touch()
    _noted(ctx, f"opened {ctx.path}")
    return FileSession(session_id, ctx.path)


async def _server_gone(ctx: BackendContext) -> list[str]:
    raise ConnectionError("the server is gone")


@drops_stores(_server_gone)
def cannot_drop(session_id: str, ctx: BackendContext) -> FileSession:
    """`FileSession`, its stores' drop refused as a store whose server went away would."""
    return FileSession(session_id, ctx.path)


class _NotASession:
    """What a factory returning the wrong thing returns: no pop_item, a sync get_items."""

    def get_items(self, limit: int | None = None) -> list[Item]:
        return []

    async def add_items(self, items: list[Item]) -> None:
        return None

    async def clear_session(self) -> None:
        return None


def not_a_session(session_id: str, ctx: BackendContext) -> _NotASession:
    """A factory whose object is not a Session: the probe names what it lacks."""
    return _NotASession()
