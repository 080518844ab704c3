"""Benchmark the stdio proxy against the same backend called in-process, in one run.

Run ``python bench/bench_stdio.py`` (``--quick`` for fewer rounds). The backend
is the file reference backend, once called directly and once served over stdio
by ``checkpointspec.backends.stdio.serve`` behind `StdioCheckpointer` (and by
the Node.js example backend when ``node`` is on PATH, for information). What
is timed, alternating direct and proxied rounds, median of the per-round ratios:

- durable appends of one event, one after another: the proxy's cost is a pipe
  round trip and a thread hop per call, against the backend's fsyncs;
- a read of a 10,000-event log: the proxy's cost is JSON both ways;
- opening and closing a handle, with a reusable child (kept after ``close``)
  and without (a process started per handle): why ``reusable`` matters, since
  the kit opens hundreds of handles.

Information, not a target: the proxy exists to check backends in other
languages, and the kit's run time through it is dominated by what is printed
here as the open/close cost.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from checkpointspec.backends.file import make as file_make
from checkpointspec.backends.stdio import make as stdio_make
from checkpointspec.spec import BackendContext, Checkpointer, UserPrompt

SERVE = [sys.executable, "-m", "checkpointspec.backends.stdio.serve", "file"]
NODE = Path(__file__).resolve().parents[1] / "examples" / "node_backend" / "file_backend.js"


async def _direct(path: Path) -> Checkpointer:
    return file_make(BackendContext(path=path))


def _proxied(command: list[str]) -> Callable[[Path], Awaitable[Checkpointer]]:
    async def open_(path: Path) -> Checkpointer:
        return await stdio_make(BackendContext(path=path, options={"process": shlex.join(command)}))

    return open_


async def _appends(open_: Callable[[Path], Awaitable[Checkpointer]], path: Path, n: int) -> float:
    cp = await open_(path)
    started = time.perf_counter()
    for i in range(n):
        await cp.append("s", [UserPrompt(f"event {i}")])
    elapsed = time.perf_counter() - started
    await cp.close()
    return n / elapsed


async def _read(open_: Callable[[Path], Awaitable[Checkpointer]], path: Path, n: int) -> float:
    cp = await open_(path)
    if await cp.head("big") == 0:
        for start in range(0, n, 1000):
            await cp.append("big", [UserPrompt(f"e{i}") for i in range(start, start + 1000)])
    started = time.perf_counter()
    count = len([e async for e in cp.read("big")])
    elapsed = time.perf_counter() - started
    await cp.close()
    assert count == n
    return n / elapsed


async def _opens(open_: Callable[[Path], Awaitable[Checkpointer]], path: Path, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        cp = await open_(path)
        await cp.close()
    return (time.perf_counter() - started) / n


def _round(kind: str, open_: Callable[[Path], Awaitable[Checkpointer]], n: int) -> float:
    path = Path(tempfile.mkdtemp(prefix="bench-stdio-"))
    try:
        if kind == "append":
            return asyncio.run(_appends(open_, path, n))
        if kind == "read":
            return asyncio.run(_read(open_, path, n))
        return asyncio.run(_opens(open_, path, n))
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    proxied = _proxied(SERVE)
    one_shot = _proxied([*SERVE[:-1], "--one-handle", SERVE[-1]])  # a process per handle
    print(f"{'what':38} {'direct':>12} {'stdio':>12} {'ratio':>7}")
    for kind, n, unit in (("append", 300, "appends/s"), ("read", 10_000, "events/s")):
        ratios, direct_values, proxied_values = [], [], []
        for _ in range(rounds):
            d = _round(kind, _direct, n)
            p = _round(kind, proxied, n)
            direct_values.append(d)
            proxied_values.append(p)
            ratios.append(p / d)
        print(
            f"{kind + ' (' + unit + ')':38} {statistics.median(direct_values):12,.0f} "
            f"{statistics.median(proxied_values):12,.0f} {statistics.median(ratios):6.2f}x"
        )
    opens = statistics.median(_round("open", proxied, 30) for _ in range(rounds))
    print(f"{'open+close, reusable child (ms)':38} {'':12} {opens * 1000:12.1f}")
    fresh = statistics.median(_round("open", one_shot, 10) for _ in range(rounds))
    print(f"{'open+close, fresh child (ms)':38} {'':12} {fresh * 1000:12.1f}")
    if shutil.which("node") and NODE.exists():
        node = _proxied(["node", str(NODE)])
        node_opens = statistics.median(_round("open", node, 30) for _ in range(rounds))
        node_appends = statistics.median(_round("append", node, 300) for _ in range(rounds))
        print(f"{'node example: open+close (ms)':38} {'':12} {node_opens * 1000:12.1f}")
        print(f"{'node example: appends/s':38} {'':12} {node_appends:12,.0f}")


if __name__ == "__main__":
    main()
