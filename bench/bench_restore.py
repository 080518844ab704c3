"""Benchmark of restore against the raw cost of the file writes it makes.

Run: ``python bench/bench_restore.py [--files N] [--size BYTES] [--rounds R]
[--backend file|memory] [--dir DIR]``. Prints one table; the ratio compares two
figures measured in the same run, alternating rounds so that drift in the
machine's speed hits both sides alike. Not a test: nothing here fails, the
``target`` column says what the figure should reach (issue 10: at most 1.5x).

Each round builds a session whose second prompt's tools rewrote N files (a
snapshot each, then the file), then times:

* ``restore`` to that prompt: preflight (reads and hashes every file), the
  intent journal (before- and after-images, fsynced), N files written back
  (in place, fsynced), the directories fsynced, the log truncated,
  the journal removed;
* the baseline: the same N contents written in place and fsynced, one file
  after another (``open``, ``write``, ``fsync``, ``close``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.reference.restore import restore
from checkpointspec.spec import Checkpointer, UserPrompt, make_snapshot

SID = "bench"


def contents(n: int, size: int, version: int) -> dict[str, bytes]:
    """N files in 10 folders, each ``size`` bytes of text."""
    out = {}
    for i in range(n):
        line = f"file {i} version {version} ".encode()
        out[f"dir{i % 10}/file{i:05d}.txt"] = (line * (size // len(line) + 1))[:size]
    return out


async def build(
    root: Path, store: Path, backend: str, n: int, size: int
) -> tuple[Checkpointer, int]:
    """The session and workspace of one round; returns the handle and the target seq."""
    cp: Checkpointer = FileCheckpointer(store) if backend == "file" else MemoryCheckpointer()
    old, new = contents(n, size, 0), contents(n, size, 1)
    for path, data in old.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    await cp.append(SID, [UserPrompt("create")])
    seq = await cp.append(SID, [UserPrompt("rewrite everything")])
    await cp.append(SID, [make_snapshot(path, old[path], new[path]) for path in sorted(new)])
    for path, data in new.items():
        (root / path).write_bytes(data)
    return cp, seq


def write_directly(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        fd = os.open(root / path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("file", "memory"), default="file")
    parser.add_argument("--dir", default=None, help="where to work (default: a temporary dir)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-restore-", dir=args.dir))
    restore_times, direct_times = [], []
    try:
        for r in range(args.rounds):
            root, store = base / f"ws{r}", base / f"store{r}"
            cp, seq = await build(root, store, args.backend, args.files, args.size)
            start = time.perf_counter()
            result = await restore(cp, SID, seq, workspace=root)
            restore_times.append(time.perf_counter() - start)
            assert len(result.restored_files) == args.files
            await cp.close()
            targets = contents(args.files, args.size, 2)
            start = time.perf_counter()
            write_directly(root, targets)
            direct_times.append(time.perf_counter() - start)
            shutil.rmtree(root)
            shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rt, dt = statistics.median(restore_times), statistics.median(direct_times)
    print(
        f"restore of {args.files} files of {args.size} B ({args.backend} backend), median of {args.rounds}"
    )
    print(f"{'figure':<44}{'seconds':>10}{'ratio':>8}{'target':>9}")
    print(f"{'write + fsync each file directly':<44}{dt:>10.3f}{1:>8.2f}{'':>9}")
    print(
        f"{'restore (preflight, journal, files, truncate)':<44}{rt:>10.3f}{rt / dt:>8.2f}{'<= 1.5':>9}"
    )


if __name__ == "__main__":
    asyncio.run(main())
