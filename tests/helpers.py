"""What the project's tests in several folders share: running a coroutine, making
events, reading a whole log, and seeds whose repeats run in the slow tier.

Importable as ``helpers`` from any test module: ``pyproject.toml`` puts ``tests/``
on the path (``pythonpath`` in ``[tool.pytest.ini_options]``), for pytest run from
the repository root, its xdist workers and tox alike. Fixtures live in
``tests/conftest.py``; modules a single folder shares stay in that folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any, Protocol, TypeVar

import pytest
from _pytest.mark import ParameterSet
from checkpointspec.spec import StoredEvent, UserPrompt

__all__ = ["Readable", "ev", "first_seed_fast", "read_all", "run"]

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """The result of ``coro``, run to the end on an event loop of its own."""
    return asyncio.run(coro)


def ev(n: int | str) -> UserPrompt:
    """A small storable event told apart by ``n``: the prompt ``event {n}``."""
    return UserPrompt(f"event {n}")


class Readable(Protocol):
    """Anything with a checkpointer's ``read``: every backend, and the opt-in protocols."""

    def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]: ...


async def read_all(cp: Readable, session_id: str, since_seq: int = 0) -> list[StoredEvent]:
    """Every stored event of ``session_id`` after ``since_seq``, in order, as one list."""
    return [stored async for stored in cp.read(session_id, since_seq)]


def first_seed_fast(seeds: Iterable[int]) -> list[ParameterSet]:
    """``seeds`` as ``seed`` parameters, each one after the first marked ``slow``.

    The default run gets one verdict per case, on the first seed; the slow tier
    (``tox -e slow``) repeats it on the others, as it does every repeat over seeds.
    """
    first, *repeats = seeds
    return [pytest.param(first)] + [pytest.param(s, marks=pytest.mark.slow) for s in repeats]
