"""Benchmark `compact` against one bulk read of the same log, measured in the same run.

Run ``python bench/bench_compact.py`` (``--quick`` for fewer rounds). The log is a
100k-event session of ordinary turns (a prompt, an assistant message with a
file-writing tool call, the tool starting, its file snapshot, its result, a
closing message), ending clean. For each backend, each round times one bulk
read of the whole log (``[e async for e in read(session)]``) and one complete
compaction with `ExtractiveSummarizer` (every report consumed), back to back,
then truncates the summary away so the next round compacts the same log. The
figure is the median of the per-round ratios, so load from elsewhere on the
machine hits both sides of each ratio.

Target: compact <= 2x one bulk read (the file backend and SQLite; the memory
backend's read costs almost nothing, so its ratio is for information only).
Not a test: nothing here fails the build; the exit status says whether every
target was met.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.reference.compaction import compact
from checkpointspec.reference.summarizers import ExtractiveSummarizer
from checkpointspec.spec import (
    AssistantMessage,
    Checkpointer,
    FileSnapshot,
    SessionEvent,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
)

EVENTS = 100_000
SID = "big"


def turn(n: int) -> list[SessionEvent]:
    """Six events, about 600 bytes encoded."""
    call = f"call-{n}"
    path = f"src/module_{n % 97}.py"
    return [
        UserPrompt(f"request {n}: please change {path}\n" + "with some detail " * 4),
        AssistantMessage(
            "Let me edit that file. " * 3, (ToolCall(call, "write", f'{{"path": "{path}"}}'),)
        ),
        ToolStarted(call, "write"),
        FileSnapshot(path, "previous content of the file " * 3, hash_after="0" * 64),
        ToolResult(call, "wrote 42 lines"),
        AssistantMessage("Done: the change is in place. " * 2),
    ]


def session(count: int) -> list[SessionEvent]:
    events = [event for n in range(-(-count // 6)) for event in turn(n)]
    return events[: count - count % 6]  # whole turns only: the log ends clean


class Row(NamedTuple):
    name: str
    read: float
    compact: float
    ratio: float
    target: float | None

    @property
    def ok(self) -> bool:
        return self.target is None or self.ratio <= self.target


async def fill(cp: Checkpointer, events: list[SessionEvent]) -> None:
    for start in range(0, len(events), 2000):
        await cp.append(SID, events[start : start + 2000])


async def bulk_read(cp: Checkpointer) -> float:
    started = time.perf_counter()
    events = [stored async for stored in cp.read(SID)]
    elapsed = time.perf_counter() - started
    if len(events) < EVENTS - 6:
        raise RuntimeError(f"read {len(events)} events")
    return elapsed


async def one_compaction(cp: Checkpointer) -> float:
    head = await cp.head(SID)
    started = time.perf_counter()
    async for report in compact(cp, SID, summarizer=ExtractiveSummarizer()):
        last = report
    elapsed = time.perf_counter() - started
    if last.phase != "done" or not last.reduced:
        raise RuntimeError(f"the compaction did not reduce: {last}")
    await cp.truncate(SID, head, expected_head=head + 1)  # the same log for the next round
    return elapsed


async def measure(
    name: str, open_store: Callable[[], Awaitable[Checkpointer]], rounds: int, target: float | None
) -> Row:
    cp = await open_store()
    try:
        await fill(cp, session(EVENTS))
        await bulk_read(cp)  # warm caches and code paths for both sides alike
        reads: list[float] = []
        compactions: list[float] = []
        for r in range(rounds):  # alternate which goes first, so drift hits both alike
            if r % 2:
                compactions.append(await one_compaction(cp))
                reads.append(await bulk_read(cp))
            else:
                reads.append(await bulk_read(cp))
                compactions.append(await one_compaction(cp))
    finally:
        await cp.close()
    ratio = statistics.median(c / r for c, r in zip(compactions, reads, strict=True))
    return Row(name, statistics.median(reads), statistics.median(compactions), ratio, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        async def file_store() -> Checkpointer:
            return FileCheckpointer(root / "file", durability=Durability.PROCESS)

        async def sqlite_store() -> Checkpointer:
            return await SqliteCheckpointer(root / "s.db", synchronous="OFF").open()

        async def memory_store() -> Checkpointer:
            return MemoryCheckpointer()

        for name, opener, target in (
            ("file", file_store, 2.0),
            ("sqlite", sqlite_store, 2.0),
            ("memory", memory_store, None),
        ):
            print(f"  {name} ...", file=sys.stderr, flush=True)
            rows.append(asyncio.run(measure(name, opener, rounds, target)))

    print(f"compact of a {EVENTS:,}-event session vs one bulk read (median of {rounds} rounds)")
    print(f"{'backend':<8} {'read':>9} {'compact':>9} {'ratio':>7}  {'target':<8} ok")
    for row in rows:
        target = f"<= {row.target:g}x" if row.target is not None else "info"
        verdict = "yes" if row.ok else "NO"
        print(
            f"{row.name:<8} {row.read * 1000:>7.0f}ms {row.compact * 1000:>7.0f}ms "
            f"{row.ratio:>6.2f}x  {target:<8} {verdict}"
        )
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
