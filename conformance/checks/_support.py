"""Small tools the checks share: state snapshots, error expectations, property runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TypeVar

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ...spec import Checkpointer
from ..harness import Harness, read_all
from ..outcomes import Err, run_backend
from ..violations import RuleViolation, expect

__all__ = [
    "Snapshot",
    "expect",
    "expect_error",
    "property_settings",
    "run_property",
    "snapshot",
    "unchanged",
]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

Snapshot = tuple[tuple[str, ...], dict[str, tuple[tuple[int, object], ...]]]


async def snapshot(cp: Checkpointer, session_ids: Iterable[str] = ()) -> Snapshot:
    """The listed ids and the (seq, event) pairs of every listed or named session."""
    listed = tuple(sorted(info.id for info in await cp.list_sessions()))
    logs: dict[str, tuple[tuple[int, object], ...]] = {}
    for sid in sorted(set(listed) | set(session_ids)):
        logs[sid] = tuple((s.seq, s.event) for s in await read_all(cp, sid))
    return listed, logs


async def unchanged(cp: Checkpointer, before: Snapshot, rule_id: str, call: str) -> None:
    """Fail ``rule_id`` unless the store looks exactly as in ``before``."""
    after = await snapshot(cp, before[1].keys())
    if after != before:
        changed = [
            sid for sid in set(after[1]) | set(before[1]) if after[1].get(sid) != before[1].get(sid)
        ]
        raise RuleViolation(
            rule_id,
            f"{call} changed the store: listed {list(before[0])} -> {list(after[0])}; sessions changed: {changed}",
        )


async def expect_error(
    call: Callable[[], Awaitable[object]], error: type[E], rule_id: str, description: str
) -> E:
    """Run ``call`` and fail ``rule_id`` unless it raises ``error``."""
    outcome = await run_backend(call)
    if not isinstance(outcome, Err):
        raise RuleViolation(
            rule_id, f"{description} returned {outcome.value!r}; expected {error.__name__}"
        )
    if not isinstance(outcome.error, error):
        raise RuleViolation(
            rule_id,
            f"{description} raised {type(outcome.error).__name__}: {outcome.error}; expected {error.__name__}",
        )
    return outcome.error


def property_settings(h: Harness) -> settings:
    """Hypothesis settings for a property check under the run's profile."""
    return settings(
        max_examples=h.profile.property_examples,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


def run_property(
    h: Harness,
    strategy: st.SearchStrategy[T],
    body: Callable[[Checkpointer, T], Coroutine[object, object, None]],
) -> None:
    """Run ``body`` on one fresh store per generated example, on a private loop.

    Hypothesis shrinks a failing example and attaches it to the RuleViolation's notes.
    """
    loop = asyncio.new_event_loop()

    @seed(h.seed)
    @property_settings(h)
    @given(strategy)
    def test(value: T) -> None:
        async def one() -> None:
            cp = await h.open(h.new_store())
            try:
                await body(cp, value)
            finally:
                await cp.close()

        loop.run_until_complete(one())

    try:
        test()
    finally:
        loop.close()
