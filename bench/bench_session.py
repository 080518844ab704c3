"""Benchmark the session layer's fold and checkpoint listing against baselines from the same run.

Run ``python bench/bench_session.py`` (``--quick`` for fewer rounds). The log is
a realistic agent session: prompts, assistant turns asking for tool calls, tool
starts and results, file snapshots of 0.2-2 KiB before writes (some binary),
reminders, background completions and an occasional summary. Targets:

- `fold` of a 100k-event log: >= 300k events/s (the oracle `fold_model` is
  timed in the same rounds, information only);
- `list_checkpoints` of that log on the file and SQLite backends vs the same
  backend's own bulk read of it (``async for`` over ``read``, nothing else),
  alternating, median of the per-round ratios: >= 0.8x. The memory backend's
  ratio is printed for information: its read walks a list in memory (tens of
  nanoseconds an event), so a single class test per event already costs
  about a third of it and no Python listing can reach 0.8x;
- the peak memory `list_checkpoints` allocates (tracemalloc, file backend,
  whose read is chunked) beyond what the bulk read itself allocates: grows
  with the number of checkpoints, not with the number of events (information:
  the table shows both at a fixed event count and at a fixed checkpoint count).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Final

from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.file.checkpointer import Durability
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.reference.checkpoints import list_checkpoints
from checkpointspec.reference.fold import fold
from checkpointspec.spec import (
    AssistantMessage,
    BackgroundCompletion,
    Checkpointer,
    FileSnapshot,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    content_hash,
    fold_model,
)
from results import Row, print_rows, timed

SID: Final = "bench"
PATHS: Final = [f"src/pkg{n % 7}/module_{n}.py" for n in range(150)] + [
    f"assets/img{n}.png" for n in range(10)
]


# -- the log --------------------------------------------------------------------------------


def session_log(count: int, *, prompts: int, seed: int = 1) -> list[SessionEvent]:
    """``count`` events of an agent session with ``prompts`` user prompts spread evenly."""
    rng = random.Random(seed)
    stride = max(count // max(prompts, 1), 1)
    events: list[SessionEvent] = []
    activity = _turn_events(rng)
    placed = 0
    while len(events) < count:
        seq = len(events) + 1
        if (seq - 1) % stride == 0 and placed < prompts:
            blocks = ("pasted file contents " * 20,) if rng.random() < 0.1 else ()
            events.append(UserPrompt(f"please change thing {placed} " * 3, blocks))
            placed += 1
        elif seq % 9_973 == 0:  # a compaction now and then, covering most of what came before
            events.append(Summary("summary " * 60, seq - rng.randint(20, 400), 50_000, 2_000))
        else:
            events.append(next(activity))
    return events


def _turn_events(rng: random.Random) -> Iterator[SessionEvent]:
    """Assistant turns with tool calls, each started, often snapshotting a file, then answered."""
    call = 0
    text = "Let me look at the code and make the change. " * 4
    while True:
        calls = [
            ToolCall(f"call-{call + k}", rng.choice(["read", "write", "bash"]), '{"path": "x"}')
            for k in range(rng.randint(1, 3))
        ]
        call += len(calls)
        yield AssistantMessage(text, tuple(calls))
        for tool in calls:
            yield ToolStarted(tool.id, tool.name)
            if tool.name == "write":
                yield _snapshot(rng, tool.id)
            yield ToolResult(tool.id, "ok: " + "output line\n" * rng.randint(1, 30))
        roll = rng.random()
        if roll < 0.03:
            yield RuntimeReminder("remember the style guide")
        elif roll < 0.05:
            yield BackgroundCompletion("task", "tests passed")


def _snapshot(rng: random.Random, call_id: str) -> FileSnapshot:
    path = rng.choice(PATHS)
    after = b"new content\n" * rng.randint(10, 100)
    roll = rng.random()
    if roll < 0.15:
        return FileSnapshot(path, None, hash_after=content_hash(after), tool_call_id=call_id)
    if path.endswith(".png"):
        before = base64.b64encode(rng.randbytes(rng.randint(200, 2000))).decode()
        return FileSnapshot(
            path, before, encoding="base64", hash_after=content_hash(after), tool_call_id=call_id
        )
    before_text = "def f():\n    return 1\n" * rng.randint(10, 90)
    return FileSnapshot(path, before_text, hash_after=content_hash(after), tool_call_id=call_id)


def stored(events: list[SessionEvent]) -> list[StoredEvent]:
    return [
        StoredEvent(seq, SID, seq - 1 or None, "2026-01-01T00:00:00+00:00", event)
        for seq, event in enumerate(events, start=1)
    ]


# -- measurements -----------------------------------------------------------------------------


def fold_rates(log: list[StoredEvent], rounds: int) -> tuple[float, float]:
    """Events/s of `fold` and of the oracle `fold_model`, alternating, each its best round."""
    best = {fold: 0.0, fold_model: 0.0}
    for _ in range(rounds):
        for run in best:
            started = time.perf_counter()
            run(log)
            best[run] = max(best[run], len(log) / (time.perf_counter() - started))
    return best[fold], best[fold_model]


async def fill(cp: Checkpointer, events: list[SessionEvent]) -> None:
    for start in range(0, len(events), 1000):
        await cp.append(SID, events[start : start + 1000])


def open_backend(name: str, root: Path) -> Checkpointer:
    if name == "memory":
        return MemoryCheckpointer()
    if name == "file":
        return FileCheckpointer(root / "file", durability=Durability.PROCESS)
    return SqliteCheckpointer(root / "session.db", synchronous="OFF")


async def bulk_read(cp: Checkpointer) -> int:
    count = 0
    async for _ in cp.read(SID):
        count += 1
    return count


async def listing_vs_read(
    name: str, root: Path, events: list[SessionEvent], rounds: int
) -> tuple[float, float, float]:
    """Median bulk-read rate, median listing rate, median per-round ratio (listing / read)."""
    cp = open_backend(name, root)
    try:
        await fill(cp, events)
        await bulk_read(cp)  # warm caches for both sides alike
        reads: list[float] = []
        listings: list[float] = []
        for r in range(rounds):
            for side in ("read", "list") if r % 2 == 0 else ("list", "read"):
                started = time.perf_counter()
                if side == "read":
                    assert await bulk_read(cp) == len(events)
                    reads.append(len(events) / (time.perf_counter() - started))
                else:
                    await list_checkpoints(cp, SID)
                    listings.append(len(events) / (time.perf_counter() - started))
        ratios = [lst / rd for rd, lst in zip(reads, listings, strict=True)]
        return statistics.median(reads), statistics.median(listings), statistics.median(ratios)
    finally:
        await cp.close()


async def peak_memory(root: Path, count: int, prompts: int) -> tuple[int, int, int]:
    """Peak bytes allocated by a bulk read and by list_checkpoints (file backend); checkpoints."""
    cp = FileCheckpointer(root / f"mem-{count}-{prompts}", durability=Durability.PROCESS)
    try:
        await fill(cp, session_log(count, prompts=prompts))
        gc.collect()

        async def peak(run: Callable[[], Awaitable[object]]) -> tuple[int, object]:
            tracemalloc.start()
            base, _ = tracemalloc.get_traced_memory()
            result = await run()
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return top - base, result

        read_peak, _ = await peak(lambda: bulk_read(cp))
        list_peak, found = await peak(lambda: list_checkpoints(cp, SID))
        assert isinstance(found, list)
        return read_peak, list_peak, len(found)
    finally:
        await cp.close()


# -- driver ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    count = 100_000
    events = session_log(count, prompts=count // 40)
    log = stored(events)
    rows: list[Row] = []
    print("running:", file=sys.stderr)

    ours, oracle = timed("fold and fold_model", lambda: fold_rates(log, rounds))
    rows.append(Row(f"fold, {count:,} events", f"{ours:,.0f}/s", None, ">= 300k/s", ours >= 3e5))
    rows.append(Row("fold_model (the oracle)", f"{oracle:,.0f}/s", oracle / ours, "info", True))

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("memory", "file", "sqlite"):
            read, listing, ratio = timed(
                f"list_checkpoints vs read, {name}",
                partial(asyncio.run, listing_vs_read(name, root, events, rounds)),
            )
            rows.append(Row(f"{name}: bulk read", f"{read:,.0f}/s", None, "baseline", True))
            target = name != "memory"  # see the module docstring
            rows.append(
                Row(
                    f"{name}: list_checkpoints",
                    f"{listing:,.0f}/s",
                    ratio,
                    ">= 0.8x read" if target else "info",
                    ratio >= 0.8 or not target,
                )
            )

        shapes = [(20_000, 100), (100_000, 100), (100_000, 1_000), (100_000, 5_000)]
        for n, prompts in shapes:
            read_peak, list_peak, found = timed(
                f"peak memory, {n:,} events, {prompts:,} prompts",
                partial(asyncio.run, peak_memory(root, n, prompts)),
            )
            rows.append(
                Row(
                    f"peak memory, {n:,} events, {found:,} checkpoints"
                    f" (bulk read alone {read_peak / 1024:,.0f} KiB)",
                    f"{list_peak / 1024:,.0f} KiB",
                    None,
                    "info",
                    True,
                )
            )

    return print_rows(rows)


if __name__ == "__main__":
    sys.exit(main())
