"""Holding a live process right after its Nth system call that changes a store file
or, with ``sends``, that sends to a server.

A small child process, on ``go``, creates a file in the store, writes three
pieces (one from another thread) and fsyncs between them, writing to a file
outside the store too; the stopper process must count only the store's calls, hold the
whole process after the Nth, and then kill it there or let it go on. Every wait
has a deadline: a held child killed by someone else is reaped (never left a
zombie its parent cannot wait for), and a stopper process that does not answer
is killed and named. A second child sends to a TCP server of the test, to its
parent through a pipe and through an unnamed socket pair: only the first count.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
from checkpointspec.conformance.engines.crash.stopper import (
    StopperHung,
    SyscallStopper,
    is_send,
    server_sends_unavailable,
    stopper_unavailable,
    store_call_filter,
    until_done_or_silent,
)
from checkpointspec.conformance.engines.processes.filters import install_call_filter

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


FILTERED_CHILD = CHILD.replace(
    "sys.stdin.readline()",
    "from checkpointspec.conformance.engines.processes.filters import install_call_filter\n"
    "install_call_filter(bytes.fromhex(sys.stdin.readline()))",
)
"""The same child, installing the filter it is sent before its first store call."""


@asynccontextmanager
async def child(
    tmp_path: Path, program: str = CHILD
) -> AsyncIterator[tuple[asyncio.subprocess.Process, Path]]:
    store = tmp_path / "store"
    store.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
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


async def go_filtered(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    process.stdin.write(store_call_filter().hex().encode() + b"\n")
    await process.stdin.drain()


@pytest.mark.parametrize(("n", "left"), [(1, b""), (2, b"A"), (3, b"AB"), (4, b"AB"), (5, b"ABC")])
def test_under_the_call_filter_a_process_is_held_at_the_same_calls(
    tmp_path: Path, n: int, left: bytes
) -> None:
    async def run() -> str:
        async with child(tmp_path, FILTERED_CHILD) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], n, filtered=True)
            await go_filtered(process)
            held = await stopper.outcome
            with pytest.raises(ValueError, match="killed, not resumed"):
                await stopper.resume()
            await stopper.kill()
            assert await process.wait() == -9
            assert (store / "f").read_bytes() == left
            return held

    held = asyncio.run(run())
    assert held.startswith(f"stopped {n} ")
    assert held.endswith(str(tmp_path / "store" / "f"))


def test_the_call_filter_traps_the_calls_that_may_count_and_no_other(tmp_path: Path) -> None:
    # Untraced, a trapped call fails with ENOSYS (no tracer to hand it to): a write
    # does; a read, a stat and a getpid run as ever. The probe can write nothing once
    # filtered, so it answers by its exit status.
    probe = textwrap.dedent(
        """
        import errno, os, sys
        from checkpointspec.conformance.engines.processes.filters import install_call_filter
        path = sys.argv[2]
        reading, writing = os.open(path, os.O_RDONLY), os.open(path, os.O_WRONLY)
        install_call_filter(bytes.fromhex(sys.argv[1]))
        if not (os.getpid() > 0 and os.stat(path).st_size == 4 and os.read(reading, 9) == b"data"):
            os._exit(2)
        try:
            os.write(writing, b"x")
        except OSError as exc:
            os._exit(0 if exc.errno == errno.ENOSYS else 3)
        os._exit(4)
        """
    )
    data = tmp_path / "data"
    data.write_bytes(b"data")
    done = subprocess.run(
        [sys.executable, "-c", probe, store_call_filter().hex(), str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert data.read_bytes() == b"data"


def test_a_call_filter_of_no_whole_entries_is_refused() -> None:
    with pytest.raises(ValueError, match="whole 8-byte entries"):
        install_call_filter(b"\x00" * 12)


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


@pytest.mark.parametrize("filtered", [False, True], ids=["every-call", "filtered"])
def test_only_the_store_calls_are_counted(tmp_path: Path, filtered: bool) -> None:
    # Under the call filter the same calls are counted as when traced at every call.
    async def run() -> list[str]:
        async with child(tmp_path, FILTERED_CHILD if filtered else CHILD) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], CALLS + 1, filtered=filtered)
            await (go_filtered if filtered else go)(process)
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


REAPED_WITHIN = 60.0
"""A deadline that turns a hang into a failure; the child is reaped at once."""


def test_a_held_process_killed_by_another_is_reaped_and_the_stopper_ends(tmp_path: Path) -> None:
    async def run() -> tuple[int, int | None]:
        async with child(tmp_path) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], 2)
            await go(process)
            assert (await stopper.outcome).startswith("stopped 2 ")
            process.kill()  # not through the stopper: a worker's own kill
            status = await asyncio.wait_for(process.wait(), REAPED_WITHIN)
            await stopper.kill()
            return status, stopper.process.returncode

    status, stopper_status = asyncio.run(run())
    assert status == -signal.SIGKILL
    assert stopper_status == 0


def test_a_stopper_that_does_not_answer_is_killed_and_named(tmp_path: Path) -> None:
    async def run() -> tuple[StopperHung, int, int | None]:
        async with child(tmp_path) as (process, store):
            stopper = await SyscallStopper.start(process.pid, [store], CALLS + 1)
            stopper.patience = 0.5
            os.kill(stopper.process.pid, signal.SIGSTOP)  # it can never answer now
            with pytest.raises(StopperHung) as hung:
                await stopper.finish()
            return hung.value, process.pid, stopper.process.returncode

    hung, pid, stopper_status = asyncio.run(run())
    assert hung.pid == pid
    assert hung.waiting_for == "report the calls it counted"
    assert str(hung).startswith(
        f"the stopper process tracing process {pid} (store call #{CALLS + 1}) did not report "
        "the calls it counted within 0.5s"
    ), str(hung)
    assert stopper_status == -signal.SIGKILL


def test_a_process_that_uses_no_cpu_time_is_given_up_on() -> None:
    async def run() -> bool:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(600)"
        )
        try:
            ended = asyncio.ensure_future(process.wait())
            never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            return await until_done_or_silent([ended, never], process.pid, 0.5, REAPED_WITHIN)
        finally:
            process.kill()
            await process.wait()

    assert asyncio.run(run()) is False


def test_a_process_that_ends_is_waited_for() -> None:
    async def run() -> bool:
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        ended = asyncio.ensure_future(process.wait())
        never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        return await until_done_or_silent([ended, never], process.pid, 30, REAPED_WITHIN)

    assert asyncio.run(run()) is True


SENDER = textwrap.dedent(
    """
    import os, socket, sys
    server = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    left, right = socket.socketpair()
    sys.stdin.readline()
    server.sendall(b"one")  # 1
    left.send(b"wake-up")  # an unnamed pair: not a server
    os.write(server.fileno(), b"two")  # 2
    sys.stdout.write("to the parent\\n")  # a pipe: not a server
    sys.stdout.flush()
    server.sendmsg([b"three"])  # 3
    print("done", flush=True)
    """
)

NO_SENDS = pytest.mark.skipif(
    server_sends_unavailable() is not None,
    reason=f"cannot count sends: {server_sends_unavailable()}",
)


class Sender(NamedTuple):
    """The sending child, connected, and what its server got (whole once ``ended`` is set)."""

    process: asyncio.subprocess.Process
    peer: str
    received: bytearray
    ended: asyncio.Event


@asynccontextmanager
async def sender() -> AsyncIterator[Sender]:
    received, connected, ended = bytearray(), asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        received.extend(await reader.read())
        writer.close()
        ended.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SENDER,
            str(port),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            await connected.wait()
            yield Sender(process, f"127.0.0.1:{port}", received, ended)
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


@NO_SENDS
def test_with_sends_only_the_sends_to_a_server_are_counted() -> None:
    """A send counts on a connected stream socket with a peer address; the pipe to
    the parent and an unnamed socket pair never do."""

    async def run() -> tuple[str, list[str], bytes]:
        async with sender() as child:
            counting = await SyscallStopper.start(child.process.pid, [], 99, sends=True)
            await go(child.process)
            assert child.process.stdout is not None
            assert await child.process.stdout.readline() == b"to the parent\n"
            assert await child.process.stdout.readline() == b"done\n"
            calls = await counting.finish()
            await child.ended.wait()
            return child.peer, calls, bytes(child.received)

    peer, calls, received = asyncio.run(run())
    assert calls == [f"sendto to {peer}", f"write to {peer}", f"sendmsg to {peer}"]
    assert all(is_send(call) for call in calls)
    assert received == b"onetwothree"


@NO_SENDS
def test_a_process_held_after_its_nth_send_has_sent_exactly_that() -> None:
    async def run() -> tuple[str, str, bytes]:
        async with sender() as child:
            stopper = await SyscallStopper.start(child.process.pid, [], 2, sends=True)
            await go(child.process)
            held = await stopper.outcome
            await stopper.kill()
            assert await child.process.wait() == -9
            await child.ended.wait()  # the kill closed the connection: all it got is read
            return child.peer, held, bytes(child.received)

    peer, held, received = asyncio.run(run())
    assert held == f"stopped 2 write to {peer}"
    assert received == b"onetwo"


MANY_WRITES = textwrap.dedent(
    """
    import os, sys
    store = sys.argv[1]
    sys.stdin.readline()
    fd = os.open(store + "/f", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    for _ in range(int(sys.argv[2])):
        os.write(fd, b"x")
    print("done", flush=True)
    sys.stdin.readline()
    """
)


def test_a_stopper_that_counted_more_calls_than_a_pipe_holds_still_ends_on_kill(
    tmp_path: Path,
) -> None:
    # Ending before its target, the stopper process lists every call it counted; a
    # kill that did not read the list left it blocked on a full pipe (a writer
    # polling for a lock makes thousands of calls).
    store = tmp_path / "store"
    store.mkdir()
    writes = 20_000  # a line each, far more than a pipe and the stream's buffer hold

    async def run() -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            MANY_WRITES,
            str(store),
            str(writes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            stopper = await SyscallStopper.start(process.pid, [store], writes + 10, patience=10.0)
            await go(process)
            assert process.stdout is not None
            assert await process.stdout.readline() == b"done\n"
            await stopper.kill()  # StopperHung here when the list stays unread
            assert await process.wait() == -9
            assert (store / "f").stat().st_size == writes
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()

    asyncio.run(run())
