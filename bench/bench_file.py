"""Benchmarks of the file backend against the raw limits of the machine.

Run: ``python bench/bench_file.py [--quick] [--dir DIR]``. Prints one table; every
ratio compares two figures measured in the same run, alternating rounds so that
drift in the machine's speed hits both sides alike. Not a test: nothing here
fails, the ``target`` column says what the figure should reach.

* durable append: one event per ``append`` (``durability=fsync``) against a raw
  loop of ``os.write`` + ``os.fsync`` of the same bytes (the event's frame), and,
  for context, against a raw loop that uses the backend's own technique:
  ``os.pwrite`` + ``os.fdatasync`` into space reserved ahead by ``ftruncate``;
* append vs log length: single-event appends to a 100k-event session against a
  10-event one (``durability=process``, so that CPU cost is not hidden by fsync;
  with fsync as well);
* tail read: ``read(since_seq=head - 10)`` on a 100k-event session against a
  100-event one;
* bulk read: reading all 100k events, against msgspec decoding the same payloads.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.file.format import pack_frames
from checkpointspec.spec import AssistantMessage, SessionEvent, ToolCall, decode_event, encode_event

BIG = 100_000


def sample_event(n: int) -> SessionEvent:
    """A mid-sized event (about 200 bytes encoded), like an assistant turn with a tool call."""
    return AssistantMessage(
        text=f"Turn {n}: reading the file and then running the tests again.",
        tool_calls=(
            ToolCall(id=f"call_{n:08d}", name="read_file", arguments='{"path": "src/app.py"}'),
        ),
    )


async def timed(rounds: int, body: Callable[[], Awaitable[None]]) -> list[float]:
    """Seconds per round of ``body``."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        await body()
        out.append(time.perf_counter() - start)
    return out


async def populate(cp: FileCheckpointer, sid: str, count: int) -> None:
    batch = 1000
    for first in range(0, count, batch):
        await cp.append(sid, [sample_event(first + i) for i in range(min(batch, count - first))])


class DurableAppend(NamedTuple):
    ours: float
    """Backend appends per second."""
    raw: float
    """Raw write+fsync loop, per second."""
    reserved: float
    """Raw pwrite+fdatasync into reserved space, per second."""
    ratio: float
    """Median over blocks of raw time / backend time."""
    ratio_reserved: float
    """The same against the reserved-space loop."""


async def bench_durable_append(root: Path, n: int, blocks: int) -> DurableAppend:
    """The backend's durable single-event append against two raw loops of the same bytes.

    fsync latency drifts by tens of percent within seconds on a VM, so the three
    loops alternate in short blocks and the ratios are taken block by block.
    """
    event = sample_event(0)
    frame, _ = pack_frames([encode_event(event)], 1, time.time_ns())
    cp = FileCheckpointer(root / "durable", durability=Durability.FSYNC)
    await cp.append("s", [event])
    fd = os.open(root / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    reserved_fd = os.open(root / "reserved.log", os.O_WRONLY | os.O_CREAT, 0o644)
    reserved_end = [0]
    os.ftruncate(reserved_fd, n * blocks * len(frame) + (1 << 16))
    os.fsync(reserved_fd)

    async def raw() -> None:
        for _ in range(n):
            os.write(fd, frame)
            os.fsync(fd)

    async def reserved() -> None:
        end = reserved_end[0]
        for _ in range(n):
            os.pwrite(reserved_fd, frame, end)
            os.fdatasync(reserved_fd)
            end += len(frame)
        reserved_end[0] = end

    async def ours() -> None:
        for _ in range(n):
            await cp.append("s", [event])

    raw_times, reserved_times, our_times = [], [], []
    for _ in range(blocks):
        raw_times += await timed(1, raw)
        reserved_times += await timed(1, reserved)
        our_times += await timed(1, ours)
    os.close(fd)
    os.close(reserved_fd)
    await cp.close()
    total = n * blocks
    return DurableAppend(
        total / sum(our_times),
        total / sum(raw_times),
        total / sum(reserved_times),
        statistics.median(r / o for r, o in zip(raw_times, our_times, strict=True)),
        statistics.median(r / o for r, o in zip(reserved_times, our_times, strict=True)),
    )


async def bench_append_vs_length(
    root: Path, n: int, rounds: int, durability: Durability
) -> tuple[float, float]:
    """(µs per append to a 100k session, µs per append to a 10-event session), medians."""
    cp = FileCheckpointer(root / f"length-{durability.value}", durability=Durability.PROCESS)
    await populate(cp, "big", BIG)
    await populate(cp, "small", 10)
    await cp.close()
    cp = FileCheckpointer(root / f"length-{durability.value}", durability=durability)
    event = sample_event(1)

    def appender(sid: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            for _ in range(n):
                await cp.append(sid, [event])

        return run

    big, small = [], []
    for _ in range(rounds):
        big += await timed(1, appender("big"))
        small += await timed(1, appender("small"))
    await cp.close()
    return statistics.median(big) / n * 1e6, statistics.median(small) / n * 1e6


async def bench_tail_read(root: Path, n: int, rounds: int) -> tuple[float, float]:
    """(µs per read(since=head-10) of a 100k session, of a 100-event session), medians."""
    cp = FileCheckpointer(root / "tail", durability=Durability.PROCESS)
    await populate(cp, "big", BIG)
    await populate(cp, "small", 100)

    def reader(sid: str, since: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            for _ in range(n):
                got = [e async for e in cp.read(sid, since)]
                assert len(got) == 10

        return run

    big, small = [], []
    for _ in range(rounds):
        big += await timed(1, reader("big", BIG - 10))
        small += await timed(1, reader("small", 90))
    await cp.close()
    return statistics.median(big) / n * 1e6, statistics.median(small) / n * 1e6


async def bench_bulk_read(root: Path, rounds: int) -> tuple[float, float, float, float]:
    """(events/s reading 100k events cold, warm, msgspec decode of the same payloads
    with the garbage collector on, and off as the backend's read does)."""
    path = root / "bulk"
    cp = FileCheckpointer(path, durability=Durability.PROCESS)
    await populate(cp, "big", BIG)
    await cp.close()
    payloads = [encode_event(sample_event(i)) for i in range(BIG)]

    cold, warm = [], []
    for _ in range(rounds):
        cp = FileCheckpointer(path)
        start = time.perf_counter()
        got = [e async for e in cp.read("big")]
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        got = [e async for e in cp.read("big")]
        warm.append(time.perf_counter() - start)
        assert len(got) == BIG
        await cp.close()
    decode, decode_no_gc = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        decoded = [decode_event(p) for p in payloads]
        decode.append(time.perf_counter() - start)
        del decoded
        gc.disable()
        start = time.perf_counter()
        decoded = [decode_event(p) for p in payloads]
        decode_no_gc.append(time.perf_counter() - start)
        gc.enable()
        assert len(decoded) == BIG
        del decoded
    return BIG / min(cold), BIG / min(warm), BIG / min(decode), BIG / min(decode_no_gc)


def row(name: str, value: str, target: str, ok: bool | None) -> tuple[str, str, str, str]:
    return (name, value, target, "" if ok is None else ("ok" if ok else "MISSED"))


def ratio_row(
    name: str, value: float, *, at_least: float | None = None, at_most: float | None = None
) -> tuple[str, str, str, str]:
    """A ratio and its target, one of ``at_least`` or ``at_most`` (neither: for context)."""
    if at_least is not None:
        return row(name, f"{value:.2f}x", f">= {at_least:.2f}x", value >= at_least)
    if at_most is not None:
        return row(name, f"{value:.2f}x", f"<= {at_most:.2f}x", value <= at_most)
    return row(name, f"{value:.2f}x", "", None)


async def main(quick: bool, directory: str | None) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-file-", dir=directory))
    rounds = 3 if quick else 5
    try:
        durable = await bench_durable_append(root, 100, 10 if quick else 40)
        big_p, small_p = await bench_append_vs_length(
            root, 1000 if quick else 5000, rounds, Durability.PROCESS
        )
        big_f, small_f = await bench_append_vs_length(
            root, 200 if quick else 1000, rounds, Durability.FSYNC
        )
        tail_big, tail_small = await bench_tail_read(root, 500 if quick else 3000, rounds)
        cold, warm, decode, decode_no_gc = await bench_bulk_read(root, 2 if quick else 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [
        row("durable append (fsync), 1 event", f"{durable.ours:,.0f}/s", "", None),
        row("raw write+fsync, same bytes", f"{durable.raw:,.0f}/s", "", None),
        ratio_row("  ratio append / raw (median of blocks)", durable.ratio, at_least=0.8),
        row("raw pwrite+fdatasync into reserved space", f"{durable.reserved:,.0f}/s", "", None),
        ratio_row("  ratio append / that", durable.ratio_reserved),
        row("append to 100k log (process)", f"{big_p:.1f} µs", "", None),
        row("append to 10-event log (process)", f"{small_p:.1f} µs", "", None),
        ratio_row("  ratio 100k / 10", big_p / small_p, at_most=1.2),
        row("append to 100k log (fsync)", f"{big_f:.1f} µs", "", None),
        row("append to 10-event log (fsync)", f"{small_f:.1f} µs", "", None),
        ratio_row("  ratio 100k / 10", big_f / small_f, at_most=1.2),
        row("read(since=head-10), 100k log", f"{tail_big:.1f} µs", "", None),
        row("read(since=head-10), 100-event log", f"{tail_small:.1f} µs", "", None),
        ratio_row("  ratio 100k / 100", tail_big / tail_small, at_most=2),
        row("bulk read 100k, fresh handle", f"{cold:,.0f} ev/s", ">= 250,000", cold >= 250_000),
        row("bulk read 100k, warm handle", f"{warm:,.0f} ev/s", ">= 250,000", warm >= 250_000),
        row("msgspec decode of the same payloads", f"{decode:,.0f} ev/s", "", None),
        row("  the same with gc disabled", f"{decode_no_gc:,.0f} ev/s", "", None),
    ]
    widths = [max(len(r[i]) for r in [("metric", "value", "target", ""), *rows]) for i in range(4)]
    for r in [("metric", "value", "target", ""), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (about 20 s)")
    parser.add_argument(
        "--dir", help="where to create the temporary stores (default: the system's temp dir)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.dir))
