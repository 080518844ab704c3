"""Checks for bad input: every operation refuses invalid arguments and changes nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from ...spec import Capability, Checkpointer, InvalidArgumentError
from ..engines.machines.strategies import (
    invalid_events_arguments,
    invalid_seqs,
    invalid_session_ids,
)
from ..engines.run.harness import Harness, read_all
from ..engines.search.properties import run_property
from ._support import expect, expect_error, snapshot, unchanged
from .base import check

__all__ = ["CHECKS"]


def _calls_with_session_id(
    cp: Checkpointer, h: Harness, bad: object
) -> dict[str, Callable[[], Awaitable[object]]]:
    sid: str = bad  # type: ignore[assignment]  # deliberately outside the contract
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "append": lambda: cp.append(sid, [h.prompt("x")]),
        "read": lambda: read_all(cp, sid),
        "head": lambda: cp.head(sid),
    }
    if h.has(Capability.DELETE):
        calls["delete"] = lambda: cp.delete(sid)
    if h.has(Capability.TRUNCATE):
        calls["truncate"] = lambda: cp.truncate(sid, 0)
    return calls


async def _seeded(cp: Checkpointer, h: Harness) -> None:
    await cp.append("s", [h.prompt("a"), h.prompt("b")])


@check("ARG-001", kind="property")
def bad_session_ids_are_refused(h: Harness) -> None:
    """ARG-001: non-str, empty, NUL-holding, over-long or non-UTF-8 ids raise InvalidArgumentError; nothing changes."""

    async def body(cp: Checkpointer, bad: object) -> None:
        await _seeded(cp, h)
        before = await snapshot(cp, ["s"])
        for name, call in _calls_with_session_id(cp, h, bad).items():
            error = await expect_error(
                call, InvalidArgumentError, "ARG-001", f"{name}(session_id={bad!r})"
            )
            expect(
                error.argument == "session_id",
                "ARG-001",
                f"{name} blamed argument {error.argument!r}",
            )
            await unchanged(cp, before, "ARG-001", f"{name}(session_id={bad!r})")

    run_property(h, invalid_session_ids(), body)


@check("ARG-002", kind="property")
def bad_seqs_are_refused(h: Harness) -> None:
    """ARG-002: negative, bool or non-int since_seq / to_seq / expected_head raise InvalidArgumentError."""

    async def body(cp: Checkpointer, bad: object) -> None:
        await _seeded(cp, h)
        before = await snapshot(cp, ["s"])
        seq: int = bad  # type: ignore[assignment]
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "read(since_seq)": lambda: read_all(cp, "s", seq),
            "append(expected_head)": lambda: cp.append("s", [h.prompt("x")], seq),
        }
        if h.has(Capability.TRUNCATE):
            calls["truncate(to_seq)"] = lambda: cp.truncate("s", seq)
            calls["truncate(expected_head)"] = lambda: cp.truncate("s", 1, seq)
        for name, call in calls.items():
            await expect_error(call, InvalidArgumentError, "ARG-002", f"{name}={bad!r}")
            await unchanged(cp, before, "ARG-002", f"{name}={bad!r}")

    run_property(h, invalid_seqs(), body)


@check("ARG-003", "APPEND-003", kind="property")
def bad_batches_are_refused(h: Harness) -> None:
    """ARG-003: an events argument that is not a sequence of SessionEvent raises InvalidArgumentError."""

    async def body(cp: Checkpointer, bad: object) -> None:
        h.judged_on_the_kit_side("ARG-003")
        await _seeded(cp, h)
        before = await snapshot(cp, ["s", "t"])
        for sid in ("s", "t"):
            error = await expect_error(
                partial(cp.append, sid, bad),  # type: ignore[arg-type]
                InvalidArgumentError,
                "ARG-003",
                f"append({sid!r}, events={bad!r})",
            )
            expect(
                error.argument == "events", "ARG-003", f"append blamed argument {error.argument!r}"
            )
        await unchanged(cp, before, "ARG-003", f"append(events={bad!r})")
        expect(await read_all(cp, "t") == [], "ARG-003", "a refused batch created session 't'")

    run_property(h, invalid_events_arguments(), body)


CHECKS = (
    bad_session_ids_are_refused,
    bad_seqs_are_refused,
    bad_batches_are_refused,
)
