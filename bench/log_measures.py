"""Measurements the database benchmarks share: the events, filling a log, a bulk read's
rate, and whether append and read-since cost grows with the log's length.

Each works on any open `Checkpointer`; the benchmark opens it with the settings its
question needs and closes it.
"""

from __future__ import annotations

import statistics
import time
from typing import Final

from checkpointspec.spec import AssistantMessage, Checkpointer

TEXT: Final = "x" * 160  # ~200-byte payloads, as in the design notes' measurements


def event(n: int) -> AssistantMessage:
    return AssistantMessage(f"{n} {TEXT}")


async def fill(cp: Checkpointer, sid: str, count: int) -> None:
    """Append ``count`` events to ``sid``, 1,000 to a batch."""
    for start in range(0, count, 1000):
        await cp.append(sid, [event(n) for n in range(start, min(start + 1000, count))])


async def best_read_rate(cp: Checkpointer, count: int) -> float:
    """Events per second of the best of three bulk reads of a ``count``-event log."""
    await fill(cp, "big", count)
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        got = len([stored async for stored in cp.read("big")])
        best = max(best, got / (time.perf_counter() - started))
    assert got == count
    return best


async def length_ratios(cp: Checkpointer, big: int, rounds: int, ops: int) -> tuple[float, float]:
    """Cost ratio (``big``-event log / 10-event log) of a single-event append and of
    read-since, medians over ``rounds``. Both sessions sit in the middle of the key
    space (neighbours on either side), so neither gets an append-at-the-edge path
    the other lacks."""
    await fill(cp, "a-neighbour", 10)
    await fill(cp, "m-small", 10)
    await fill(cp, "m-large", big)
    await fill(cp, "z-neighbour", 10)

    async def append_cost(sid: str) -> float:
        started = time.perf_counter()
        for n in range(ops):
            await cp.append(sid, [event(n)])
        return (time.perf_counter() - started) / ops

    async def read_since_cost(sid: str) -> float:
        head = await cp.head(sid)
        started = time.perf_counter()
        for _ in range(ops):
            async for _ in cp.read(sid, head - 5):
                pass
        return (time.perf_counter() - started) / ops

    appends: list[float] = []
    reads: list[float] = []
    for r in range(rounds):  # alternate the order, so drift and warm-up hit both alike
        first, second = ("m-large", "m-small") if r % 2 else ("m-small", "m-large")
        cost = {first: await append_cost(first), second: await append_cost(second)}
        appends.append(cost["m-large"] / cost["m-small"])
        cost = {first: await read_since_cost(first), second: await read_since_cost(second)}
        reads.append(cost["m-large"] / cost["m-small"])
    return statistics.median(appends), statistics.median(reads)
