"""The system-call recorder: strace's output turned into crash-state operations.

A small Python script does to a store directory what backends do (create,
append, positioned and vectored writes, truncate, fsync of files and of the
directory, rename, link, unlink, mkdir, rmdir, a shared writable mapping), runs
under `tracer_argv`, and the parsed operations are compared with what it did.
The strongest check: replaying every recorded operation onto the starting image
gives exactly the files the script left on disk. Synthetic lines cover what a
script cannot force: calls interleaved between threads, strings cut short. A
running process (as a server is) is recorded from when `attach_argv`'s strace
attached, its relative paths placed, and runs on once strace detaches.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.conformance.engines.crash.disk import SimulatedDisk
from checkpointspec.conformance.engines.crash.recorder import (
    TraceError,
    attach_argv,
    attach_unavailable,
    parse_trace,
    tracer_argv,
    tracer_of,
    tracer_unavailable,
)
from checkpointspec.conformance.engines.crash.states import CrashPlan, Image, Op

pytestmark = pytest.mark.skipif(
    tracer_unavailable() is not None, reason=f"cannot trace: {tracer_unavailable()}"
)

SCRIPT = textwrap.dedent(
    """
    import mmap, os, sys
    store = sys.argv[1]
    reply = os.dup(1)
    fd = os.open(store + "/a b.log", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"hello\\n\\x00\\xff")
    os.writev(fd, [b"x", b"yz"])
    os.pwrite(fd, b"Q", 0)
    os.fsync(fd)
    os.close(fd)
    os.write(reply, b"first\\n")
    fd = os.open(store + "/old.log", os.O_RDWR)
    assert os.read(fd, 3) == b"old"
    os.write(fd, b"!")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"O")
    os.ftruncate(fd, 2)
    os.close(fd)
    dfd = os.open(store, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    os.rename(store + "/a b.log", store + "/c.log")
    os.link(store + "/c.log", store + "/l.log")
    os.unlink(store + "/c.log")
    os.mkdir(store + "/sub")
    os.rmdir(store + "/sub")
    fd = os.open(store + "/mapped", os.O_CREAT | os.O_RDWR)
    os.ftruncate(fd, 4096)
    with mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as m:
        m[0:2] = b"hi"
    os.close(fd)
    open(store + "/../outside", "wb").write(b"not the store's")
    os.write(reply, b"second\\nthird\\n")
    """
)


def traced(tmp_path: Path) -> tuple[Path, Image, list[str]]:
    store = tmp_path / "store"
    store.mkdir()
    (store / "old.log").write_bytes(b"old log")
    base = SimulatedDisk.load(store).image()
    trace = tmp_path / "trace"
    subprocess.run(
        [*tracer_argv(trace), sys.executable, "-c", SCRIPT, str(store)],
        stdout=subprocess.PIPE,
        check=True,
    )
    return store, base, trace.read_text().splitlines()


def test_every_store_change_is_recorded_in_order(tmp_path: Path) -> None:
    store, base, lines = traced(tmp_path)
    run = parse_trace(lines, store, base)
    assert [str(op).split(" ", 1)[1] for op in run.ops] == [
        "create a b.log",
        "write a b.log 8 bytes at 0",
        "write a b.log 3 bytes at 8",  # O_APPEND: at the end
        "write a b.log 1 bytes at 11",  # Linux appends a pwrite on an O_APPEND descriptor
        "fsync a b.log",
        "write old.log 1 bytes at 3",  # after the read of 3 bytes
        "write old.log 1 bytes at 0",  # after the seek
        "truncate old.log to 2",
        "fsync_dir .",
        "rename a b.log -> c.log",
        "link c.log -> l.log",
        "unlink c.log",
        "mkdir sub",
        "rmdir sub",
        "create mapped",
        "truncate mapped to 4096",
    ]
    assert run.mapped == {"mapped"}
    # One marker per reply line, each after the calls that preceded it.
    assert run.replies(b"first\nsecond\nthird\n") == [5, 16, 16]
    assert run.replies(b"first\n") is None


def test_replaying_the_operations_gives_the_files_left_on_disk(tmp_path: Path) -> None:
    store, base, lines = traced(tmp_path)
    run = parse_trace(lines, store, base)
    plan = CrashPlan(base, run.ops)
    state = plan.build(plan.kill(len(run.ops)))
    on_disk = {
        str(path.relative_to(store)): path.read_bytes()
        for path in store.rglob("*")
        if path.is_file()
    }
    # The mapping's bytes are the one thing system calls do not show.
    assert on_disk.pop("mapped")[:2] == b"hi"
    assert state.files.pop("mapped") == bytes(4096)
    assert dict(state.files) == on_disk


def test_the_durable_image_keeps_only_what_was_synced(tmp_path: Path) -> None:
    store, base, lines = traced(tmp_path)
    plan = CrashPlan(base, parse_trace(lines, store, base).ops)
    durable = plan.build(plan.specs(len(plan.ops))[0])
    # The data of "a b.log" was fsynced and its name by the directory fsync, but
    # the rename, link and unlink after that were not: the name it had then stays.
    assert durable.files["a b.log"] == b"hello\n\x00\xffxyzQ"
    assert "l.log" not in durable.files
    assert durable.files["old.log"] == b"old log"


def hexed(text: str) -> str:
    """``text`` as strace -xx prints every string and path."""
    return "".join(f"\\x{b:02x}" for b in text.encode())


def test_calls_interleaved_between_threads_are_joined(tmp_path: Path) -> None:
    root = str(tmp_path)
    base = Image({"f": 5}, {5: b""}, frozenset({""}))
    lines = [
        f'11 openat(AT_FDCWD<{hexed(root)}>, "{hexed(root + "/f")}", O_RDWR) = 3<{hexed(root + "/f")}>',
        f'11 pwrite64(3<{hexed(root + "/f")}>, "{hexed("ab")}", 2, 0 <unfinished ...>',
        f'12 pwrite64(3<{hexed(root + "/f")}>, "{hexed("cd")}", 2, 2) = 2',
        "11 <... pwrite64 resumed>) = 2",
        f"12 fsync(3<{hexed(root + '/f')}>) = -1 EIO (Input/output error)",
        "12 +++ killed by SIGKILL +++",
    ]
    ops = parse_trace(lines, root, base).ops
    assert [(op.kind, op.offset, op.data) for op in ops] == [
        ("write", 2, b"cd"),  # completed first
        ("write", 0, b"ab"),
    ]  # the failed fsync is no barrier


def test_a_string_strace_cut_short_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path)
    base = Image({"f": 5}, {5: b""}, frozenset({""}))
    lines = [f'11 pwrite64(3<{hexed(root + "/f")}>, "{hexed("ab")}"..., 9, 0) = 9']
    with pytest.raises(TraceError, match="cut a string"):
        parse_trace(lines, root, base)


def test_a_file_renamed_out_of_the_store_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    base = Image({"f": 5}, {5: b""}, frozenset({""}))
    lines = [f'11 rename("{hexed(root + "/f")}", "{hexed(str(tmp_path / "elsewhere"))}") = 0']
    with pytest.raises(TraceError, match="between the store and elsewhere"):
        parse_trace(lines, root, base)


WORKLOAD = textwrap.dedent(
    """
    import asyncio, sys
    from checkpointspec.backends.file import FileCheckpointer
    from checkpointspec.spec import UserPrompt

    async def work(cp):
        await cp.append("s", [UserPrompt("one"), UserPrompt("two")])
        await cp.append("t", [UserPrompt("t1")])
        await cp.append("s", [UserPrompt("three"), UserPrompt("four")])
        await cp.truncate("s", 1)
        await cp.delete("t")
        await cp.append("t", [UserPrompt("t2")])
        await cp.close()

    if __name__ == "__main__":
        asyncio.run(work(FileCheckpointer(sys.argv[1])))
    """
)


def test_the_file_backend_traced_agrees_with_the_simulated_disk(tmp_path: Path) -> None:
    """The same workload, once on the real file system under strace and once on the
    simulated disk, gives the same operations (timestamps aside: the bytes differ)."""
    real, simulated = tmp_path / "real", tmp_path / "simulated"
    for store in (real, simulated):
        asyncio.run(FileCheckpointer(store).close())
    base = SimulatedDisk.load(real).image()
    trace = tmp_path / "trace"
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    subprocess.run([*tracer_argv(trace), sys.executable, str(script), str(real)], check=True)
    traced_ops = parse_trace(trace.read_text().splitlines(), real, base).ops

    disk = SimulatedDisk.load(simulated)
    namespace: dict[str, object] = {}
    exec(compile(WORKLOAD, "workload", "exec"), namespace)
    work = namespace["work"]
    assert callable(work)
    asyncio.run(work(FileCheckpointer(simulated, fs=disk)))

    def shape(ops: Sequence[Op]) -> list[tuple[str, str, str, int, int]]:
        return [(op.kind, op.path, op.dst, op.offset, len(op.data)) for op in ops]

    assert shape(traced_ops) == shape(disk.ops)
    assert len(traced_ops) > 20


RUNNING = textwrap.dedent(
    """
    import os, sys
    os.chdir(sys.argv[1])  # relative paths, as a server in its data directory uses
    open("before.log", "wb").write(b"untraced")
    print("ready", flush=True)
    sys.stdin.readline()
    fd = os.open("rel.log", os.O_CREAT | os.O_WRONLY, 0o644)
    os.pwrite(fd, b"traced", 0)
    os.fsync(fd)
    os.close(fd)
    print("written", flush=True)
    sys.stdin.readline()
    open("after.log", "wb").write(b"detached")
    """
)


@pytest.mark.skipif(attach_unavailable() is not None, reason=f"{attach_unavailable()}")
def test_a_running_process_is_recorded_while_attached_and_runs_on_after(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    trace = tmp_path / "trace"
    child = subprocess.Popen(
        [sys.executable, "-c", RUNNING, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    tracer: subprocess.Popen[bytes] | None = None
    try:
        assert child.stdout.readline() == "ready\n"
        base = SimulatedDisk.load(store).image()
        tracer = subprocess.Popen(attach_argv(trace, [child.pid]))
        deadline = time.monotonic() + 60
        while tracer_of(child.pid) == 0:
            assert tracer.poll() is None, "strace exited instead of attaching"
            assert time.monotonic() < deadline, "strace did not attach within 60 s"
            time.sleep(0.01)  # polled, with the deadline above
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "written\n"
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
        assert child.poll() is None  # detached, not killed
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
    finally:
        for process in (child, tracer):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    run = parse_trace(trace.read_text().splitlines(), store, base)
    assert [str(op).split(" ", 1)[1] for op in run.ops] == [
        "create rel.log",
        "write rel.log 6 bytes at 0",
        "fsync rel.log",
    ]
    assert (store / "after.log").read_bytes() == b"detached"
