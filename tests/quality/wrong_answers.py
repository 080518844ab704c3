"""Backends that give well-typed wrong answers at random: the kit must still reach a verdict.

A broken backend of `broken_backends` has one bug the kit must name. The
backends here have a whole kind of bug (``KINDS``), struck at random: a listing
with a session dropped, a head off by one, a read with an event missing, a seq
that is not the event's, a `ValueError` where a `CheckpointConflictError` is
due, a None where an int is due, an operation that never returns. Whatever the
answer, every check must end in a verdict (passed, failed, skipped, not
checked), never in the kit's own error: a check that indexes a listing by the id
it expects, or unpacks a read of the length it expects, turns a wrong answer
into a ``KeyError`` instead of a failed rule. ``test_kit_survives_wrong_answers.py``
runs the kit on them.

Each class wraps a reference backend (`WrongMemory`: memory, for the in-process
checks; `WrongSqlite`: SQLite, so the durability and multi-process checks run
too). The factory reads three options (``--option``), which the kit also hands
to its worker processes:

- ``wrong``: the kind of wrong answer (a key of ``KINDS``), the one switch, so a
  kit error found names the kind that caused it;
- ``wrong_seed``: the seed of the choices (which call is struck, and how); each
  handle draws from its own generator, seeded by the seed, the kind and how
  many handles this process opened on its store before it, so a check run again
  (with ``--only``, or a Hypothesis example replayed on a fresh store) strikes
  the same calls while its operations run in the same order;
- ``wrong_rate``: the share of the kind's calls that are struck (default 0.3).

A hang (``hang``) is struck in worker processes only: an operation of the
kit's own process that never returns would stop the kit, which bounds its
waits on worker processes (`WorkerHung`), not on the backend's calls in its
own event loop. Every class here is wrong on purpose.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Self, TypeVar

from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.backends.sqlite.checkpointer import DATABASE_NAME
from checkpointspec.spec import (
    AssistantMessage,
    BackendContext,
    CheckpointConflictError,
    IntegrityReport,
    InvalidArgumentError,
    SessionEvent,
    SessionInfo,
    StoredEvent,
)
from msgspec.structs import replace

__all__ = ["IN_PROCESS_KINDS", "KINDS", "WrongMemory", "WrongSqlite"]

KINDS: dict[str, str] = {
    "listing": "list_sessions drops, duplicates or reorders sessions, or shifts an mtime",
    "head": "head is off by one, negative or huge",
    "returned_head": "append and truncate return a head off by one, negative or huge",
    "read_events": "read adds, drops, reorders or duplicates events",
    "seqs": "read gives an event a seq off by one, zero, negative or huge",
    "fields": "read gives an event another session id, parent_seq, ts or payload",
    "errors": "a wrong error type: ValueError for a conflict and a conflict for a bad "
    "argument, KeyError or RuntimeError from a call that succeeded or was never made",
    "none": "an operation returns None, or read yields None",
    "integrity": "check_integrity reports a healthy store damaged",
    "generation": "generation is off by one, negative or huge",
    "hang": "an operation never returns (in worker processes only)",
}
"""Each kind of wrong answer, and what a backend of that kind does."""

IN_PROCESS_KINDS: tuple[str, ...] = tuple(kind for kind in KINDS if kind != "hang")
"""The kinds that may strike in the kit's own process."""

HUGE = 2**62
"""A seq or head far beyond any log the kit writes."""

DEFAULT_RATE = 0.3

T = TypeVar("T")

_handles_per_store: Counter[str] = Counter()


def _in_a_worker_process() -> bool:
    """True in the kit's worker processes (``python -m ...processes.worker``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", "").endswith("processes.worker")


class Strikes:
    """When a wrapped handle answers wrongly, and how: one kind, drawn from its own generator."""

    def __init__(self, options: Mapping[str, str], path: Path) -> None:
        self.kind = options.get("wrong", "")
        if self.kind not in KINDS:
            raise InvalidArgumentError(
                "options", f"wrong={self.kind!r} is not one of {sorted(KINDS)}"
            )
        seed = options.get("wrong_seed", "0")
        self.rate = float(options.get("wrong_rate", str(DEFAULT_RATE)))
        # Not the path: it differs between runs, and between the examples of a
        # Hypothesis check, each on a fresh store, which must strike alike when replayed.
        _handles_per_store[str(path)] += 1
        opened = _handles_per_store[str(path)]
        self.random = random.Random(f"{seed}:{self.kind}:{opened}")
        self.armed = self.kind != "hang" or _in_a_worker_process()

    def strike(self, kind: str) -> bool:
        """Whether this call gives a wrong answer of ``kind``."""
        return self.armed and kind == self.kind and self.random.random() < self.rate

    def choose(self, options: Sequence[T]) -> T:
        return self.random.choice(options)

    def wrong_int(self, right: int) -> int:
        """An int that is not ``right``: off by one either way, negative, or huge."""
        return self.choose((right + 1, right - 1 if right > 0 else right + 2, -1, HUGE))


class WrongAnswers:
    """The wrong answers, as overrides of a reference backend's operations (a mixin).

    Each operation asks the backend beneath it (``super()``) and, when its kind
    strikes, changes the answer. ``_strikes`` is set by the factory.
    """

    _strikes: Strikes

    # -- errors and hangs, shared by every operation -----------------------------------------
    async def _call(self, operation: str, answer: Callable[[], Awaitable[T]]) -> T:
        strikes = self._strikes
        if strikes.strike("hang"):
            await asyncio.Event().wait()
        if strikes.strike("errors") and strikes.choose((True, False)):
            # Raised before the call: nothing was done, and the error says something else.
            raise strikes.choose((KeyError(operation), RuntimeError(f"{operation} failed")))
        try:
            value = await answer()
        except CheckpointConflictError as conflict:
            if strikes.strike("errors"):
                raise ValueError(str(conflict)) from None
            raise
        except InvalidArgumentError as invalid:
            if strikes.strike("errors"):
                raise CheckpointConflictError("?", 0, 1) from invalid
            raise
        if strikes.strike("errors"):
            # Raised after the call: it was done, and the caller is told it failed.
            raise strikes.choose((KeyError(operation), RuntimeError(f"{operation} failed")))
        return value

    def _none_or(self, value: T) -> T:
        if self._strikes.strike("none"):
            return None  # type: ignore[return-value]
        return value

    # -- the operations ---------------------------------------------------------------------
    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        async def answer() -> int:
            return await super(WrongAnswers, self).append(  # type: ignore[misc]
                session_id, events, expected_head, expected_generation=expected_generation
            )

        head: int = await self._call("append", answer)
        if self._strikes.strike("returned_head"):
            head = self._strikes.wrong_int(head)
        return self._none_or(head)

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        async def answer() -> int:
            return await super(WrongAnswers, self).truncate(  # type: ignore[misc]
                session_id, to_seq, expected_head, expected_generation=expected_generation
            )

        head: int = await self._call("truncate", answer)
        if self._strikes.strike("returned_head"):
            head = self._strikes.wrong_int(head)
        return self._none_or(head)

    async def head(self, session_id: str) -> int:
        async def answer() -> int:
            return await super(WrongAnswers, self).head(session_id)  # type: ignore[misc]

        head: int = await self._call("head", answer)
        if self._strikes.strike("head"):
            head = self._strikes.wrong_int(head)
        return self._none_or(head)

    async def generation(self, session_id: str) -> int:
        async def answer() -> int:
            return await super(WrongAnswers, self).generation(session_id)  # type: ignore[misc]

        generation: int = await self._call("generation", answer)
        if self._strikes.strike("generation"):
            generation = self._strikes.wrong_int(generation)
        return self._none_or(generation)

    async def delete(self, session_id: str) -> None:
        async def answer() -> None:
            await super(WrongAnswers, self).delete(session_id)  # type: ignore[misc]

        await self._call("delete", answer)

    async def list_sessions(self) -> list[SessionInfo]:
        async def answer() -> list[SessionInfo]:
            listed: list[SessionInfo] = await super(WrongAnswers, self).list_sessions()  # type: ignore[misc]
            return listed

        listed = await self._call("list_sessions", answer)
        if listed and self._strikes.strike("listing"):
            listed = self._wrong_listing(listed)
        return self._none_or(listed)

    def _wrong_listing(self, listed: list[SessionInfo]) -> list[SessionInfo]:
        strikes = self._strikes
        index = strikes.random.randrange(len(listed))
        how = strikes.choose(("drop", "duplicate", "reorder", "mtime"))
        if how == "drop":
            return listed[:index] + listed[index + 1 :]
        if how == "duplicate":
            return [*listed[: index + 1], listed[index], *listed[index + 1 :]]
        if how == "reorder":
            return list(reversed(listed)) if len(listed) > 1 else listed
        shifted = SessionInfo(listed[index].id, listed[index].mtime + strikes.choose((-1e6, 1e6)))
        return [*listed[:index], shifted, *listed[index + 1 :]]

    async def check_integrity(self) -> IntegrityReport:
        async def answer() -> IntegrityReport:
            report: IntegrityReport = await super(WrongAnswers, self).check_integrity()  # type: ignore[misc]
            return report

        report = await self._call("check_integrity", answer)
        if report.ok and self._strikes.strike("integrity"):
            report = IntegrityReport(ok=False, detail="1 problem", problems=("made up",))
        return self._none_or(report)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async def answer() -> list[StoredEvent]:
            inner = super(WrongAnswers, self).read(session_id, since_seq)  # type: ignore[misc]
            return [stored async for stored in inner]

        events = await self._call("read", answer)
        for stored in self._wrong_read(events):
            yield self._none_or(stored)

    def _wrong_read(self, events: list[StoredEvent]) -> list[StoredEvent]:
        strikes = self._strikes
        if strikes.strike("read_events"):
            how = strikes.choose(("extra", "missing", "reorder", "duplicate"))
            if how == "extra" or not events:
                last = events[-1] if events else None
                seq = last.seq + 1 if last is not None else 1
                sid = last.session_id if last is not None else "made-up"
                made_up = StoredEvent(
                    seq, sid, seq - 1 or None, "2000-01-01T00:00:00+00:00", _MADE_UP
                )
                events = [*events, made_up]
            elif how == "missing":
                del events[strikes.random.randrange(len(events))]
            elif how == "reorder":
                events = list(reversed(events)) if len(events) > 1 else events
            else:
                index = strikes.random.randrange(len(events))
                events.insert(index, events[index])
        if events and strikes.strike("seqs"):
            index = strikes.random.randrange(len(events))
            stored = events[index]
            seq = strikes.choose((stored.seq + 1, stored.seq - 1, 0, -1, HUGE))
            events[index] = replace(stored, seq=seq)
        if events and strikes.strike("fields"):
            index = strikes.random.randrange(len(events))
            events[index] = self._wrong_fields(events[index])
        return events

    def _wrong_fields(self, stored: StoredEvent) -> StoredEvent:
        field = self._strikes.choose(("session_id", "parent_seq", "ts", "event"))
        if field == "session_id":
            return replace(stored, session_id=stored.session_id + "-other")
        if field == "parent_seq":
            return replace(stored, parent_seq=self._strikes.choose((None, stored.seq, 0, -1)))
        if field == "ts":
            return replace(
                stored, ts=self._strikes.choose(("", "yesterday", "2000-01-01T00:00:00"))
            )
        return replace(stored, event=_MADE_UP)


_MADE_UP = AssistantMessage("an event nobody appended")


class WrongMemory(WrongAnswers, MemoryCheckpointer):
    """The in-memory reference backend, answering wrongly at random."""

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: a handle on the process-wide store of ``ctx.path``."""
        handle = cls(store_for(ctx.path))
        handle._strikes = Strikes(ctx.options, Path(ctx.path))
        return handle


class WrongSqlite(WrongAnswers, SqliteCheckpointer):
    """The SQLite reference backend, answering wrongly at random (durable, multi-process)."""

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: the SQLite store of ``ctx.path`` (``synchronous`` as asked, FULL by default)."""
        synchronous = ctx.options.get("synchronous", "FULL")
        handle = cls(Path(ctx.path) / DATABASE_NAME, codec=ctx.codec, synchronous=synchronous)
        handle._strikes = Strikes(ctx.options, Path(ctx.path))
        await handle.open()
        return handle
