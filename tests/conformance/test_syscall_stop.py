"""Holding a live process right after its Nth system call that changes a store file.

A small child process, on ``go``, creates a file in the store, writes three
pieces (one from another thread) and fsyncs between them, writing to a file
outside the store too; the stopper process must count only the store's calls, hold the
whole process after the Nth, and then kill it there or let it go on.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from checkpointspec.conformance.engines.crash.stopper import SyscallStopper, stopper_unavailable

pytestmark = pytest.mark.skipif(
    stopper_unavailable() is not None, reason=f"cannot hold processes: {stopper_unavailable()}"
)

CHILD = textwrap.dedent(
    """
    import os, sys, threading
    store, elsewhere = sys.argv[1], sys.argv[2]
    sys.stdin.readline()
    fd = os.open(store + "/f", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)  # 1
    other = os.open(elsewhere, os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"A")  # 2
    os.write(other, b"not counted")
    thread = threading.Thread(target=os.write, args=(fd, b"B"))  # 3
    thread.start()
    thread.join()
    os.fsync(fd)  # 4
    os.write(fd, b"C")  # 5
    print("done", flush=True)
    """
)
CALLS = 5


@asynccontextmanager
async def child(tmp_path: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, Path]]:
    store = tmp_path / "store"
    store.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(store),
        str(tmp_path / "elsewhere"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        yield process, store
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def go(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    process.stdin.write(b"go\n")
    await process.stdin.drain()


@pytest.mark.parametrize(("n", "left"), [(1, b""), (2, b"A"), (3, b"AB"), (4, b"AB"), (5, b"ABC")])
def test_a_process_killed_after_its_nth_store_call_leaves_exactly_that(
    tmp_path: Path, n: int, left: bytes
) -> None:
    async def run() -> str:
        async with child(tmp_path) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], n)
            await go(process)
            held = await stopper.outcome
            await stopper.kill()
            assert await process.wait() == -9
            assert (store / "f").read_bytes() == left
            return held

    held = asyncio.run(run())
    assert held.startswith(f"stopped {n} ")
    assert held.endswith(str(tmp_path / "store" / "f"))


def test_a_held_process_goes_on_when_let_go(tmp_path: Path) -> None:
    async def run() -> None:
        async with child(tmp_path) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], 2)
            await go(process)
            assert (await stopper.outcome).startswith("stopped 2 write")
            assert (store / "f").read_bytes() == b"A"
            await stopper.resume()
            assert process.stdout is not None
            assert await process.stdout.readline() == b"done\n"
            assert await process.wait() == 0
            assert (store / "f").read_bytes() == b"ABC"

    asyncio.run(run())


def test_only_the_store_calls_are_counted(tmp_path: Path) -> None:
    async def run() -> list[str]:
        async with child(tmp_path) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], CALLS + 1)
            await go(process)
            assert process.stdout is not None
            assert await process.stdout.readline() == b"done\n"
            return await stopper.finish()

    f = tmp_path / "store" / "f"
    assert asyncio.run(run()) == [
        f"openat {f}",
        f"write {f}",
        f"write {f}",
        f"fsync {f}",
        f"write {f}",
    ]
