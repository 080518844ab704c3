"""A restore (or a compaction) in its own process, SIGKILLed at the k-th fault point it reaches (RESTORE-006).

Run as ``python -m checkpointspec.conformance.engines.crash.killed_layer_run ORDER`` where
ORDER is a `KillOrder` as JSON; `run_restore_process` starts it and waits. The
child opens the backend through its factory, loads the session layer by module
name, and runs ``restore`` with one counting hook installed everywhere a fault
point is reported:

- the restore's own ``fault_hook`` (journal written, each file written, ...);
- the backend's `FaultInjectable` hook, when it has one;
- a `HookedFileSystem` around the real file system, passed as the restore's
  ``fs``, so every write, fsync, rename and unlink of the workspace and the
  journal is a point too.

`run_held_restore` kills the child instead right after one of its system calls
(`checkpointspec.conformance.engines.crash.stopper`): the backend's and the
workspace's, whether or not they pass a fault point.

With ``kill_at`` 0 the child runs to the end and prints a `KillReport` listing
the points in the order reached: the parent learns how many there are. With
``kill_at`` k it SIGKILLs itself on reaching the k-th, from whichever thread
reports it. The same order of points is assumed in every run; a child that
ends without reaching its k-th point simply finishes.

The helpers below it are shared by the parent: the session a restore is tried
on (`build_session`), and the state it is judged by (`session_state`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, cast

import msgspec

from ....backends.fsport import HookedFileSystem, OsFileSystem
from ....backends.registry import BackendTarget, import_object
from ....spec import (
    RESERVED_DIR,
    AssistantMessage,
    Checkpointer,
    FaultInjectable,
    SessionEvent,
    SessionLayer,
    ToolCall,
    ToolResult,
    UserPrompt,
    encode_event,
    make_snapshot,
)
from ....spec.restoration import apply_plan, plan_restore
from ..contract.outcomes import read_all
from ..processes.groups import kill_group, wait_group_gone
from ..target.provenance import open_checkpointer
from ..target.session_layer import load_session_layer
from .stopper import SyscallStopper, tree_states, until_done_or_silent

__all__ = [
    "CHILD_TIMEOUT",
    "HELD_CHILD_CAP",
    "KillOrder",
    "KillReport",
    "KillRun",
    "SessionState",
    "TrialSession",
    "build_session",
    "load_layer",
    "run_held_restore",
    "run_restore_process",
    "session_state",
]


class KillOrder(msgspec.Struct, frozen=True):
    """What the child does: which store, workspace and restore, and where to die (0: nowhere)."""

    target: BackendTarget
    """The backend the child opens, with its options; it goes to the child whole."""
    store: str
    workspace: str
    session_layer: str
    session_id: str
    seq: int
    files: bool
    conversation: bool
    kill_at: int
    operation: str = "restore"
    """``restore`` (the fields above), or ``compact``: the layer's ``compact`` of
    ``session_id`` with its ``ExtractiveSummarizer`` (workspace, seq, files and
    conversation unused)."""
    wait_for_go: bool = False
    """Print ``ready`` once the backend is open, then wait for a line on stdin before
    restoring: time for the kit to attach `checkpointspec.conformance.engines.crash.stopper`."""


class KillReport(msgspec.Struct, frozen=True):
    """What a child that was not killed prints: the points reached, each as ``source:name``
    (source ``layer``, ``backend`` or ``fs``), and how restore ended."""

    points: list[str]
    outcome: str


class KillRun(msgspec.Struct, frozen=True):
    """How a child ended: killed (by its own hook), or with a report; its stderr's tail."""

    killed: bool
    report: KillReport | None
    returncode: int | None
    stderr: str


class _Counter:
    """The one count behind every hook: records ``source:point``, dies at the ``kill_at``-th."""

    def __init__(self, kill_at: int) -> None:
        self.kill_at = kill_at
        self.points: list[str] = []
        self._lock = threading.Lock()

    def hook(self, source: str) -> Callable[[str], None]:
        """The hook for one source of points (``layer``, ``backend`` or ``fs``)."""

        def reached(point: str) -> None:
            with self._lock:
                self.points.append(f"{source}:{point}")
                if len(self.points) == self.kill_at:
                    # The whole group: a backend's own child process dies with us.
                    os.killpg(0, signal.SIGKILL)

        return reached


def load_layer(target: str) -> SessionLayer:
    """The session layer named ``MODULE`` or ``MODULE:OBJECT`` (an object whose attributes
    are the layer's names), as ``--session-layer`` names it. Not checked nor wrapped
    here: the parent checked it (`load_session_layer`) before starting this process,
    and what the layer raises in it is reported as the restore's outcome."""
    return cast(SessionLayer, import_object(target))


async def _child(order: KillOrder) -> KillReport:
    target = order.target
    cp = await open_checkpointer(target.factory(), target.context(Path(order.store)))
    layer = load_layer(order.session_layer)
    counter = _Counter(order.kill_at)
    fs = HookedFileSystem(OsFileSystem())
    fs.hook = counter.hook("fs")
    injectable = isinstance(cp, FaultInjectable)
    if injectable:
        cast(FaultInjectable, cp).set_fault_hook(counter.hook("backend"))
    if order.wait_for_go:
        sys.stdout.buffer.write(b"ready\n")
        sys.stdout.flush()
        await asyncio.to_thread(sys.stdin.readline)
    if order.operation == "compact":
        return await _compact(cp, order, counter)
    try:
        await layer.restore(
            cp,
            order.session_id,
            order.seq,
            workspace=order.workspace,
            files=order.files,
            conversation=order.conversation,
            fs=fs,
            fault_hook=counter.hook("layer"),
        )
        outcome = "done"
    except Exception as exc:  # the session layer's or backend's: reported, not a crash here
        outcome = f"{type(exc).__name__}: {exc}"
    finally:
        if injectable:
            cast(FaultInjectable, cp).set_fault_hook(None)
        fs.hook = None
        await cp.close()
    return KillReport(counter.points, outcome)


async def _compact(cp: Checkpointer, order: KillOrder, counter: _Counter) -> KillReport:
    layer = load_session_layer(order.session_layer)
    outcome = "done"
    try:
        async for report in layer.compact(
            cp, order.session_id, summarizer=layer.ExtractiveSummarizer()
        ):
            if report.phase in ("error", "cancelled"):
                outcome = f"{report.phase}: {report.message}"
    except Exception as exc:  # the session layer's or backend's: reported, not a crash here
        outcome = f"{type(exc).__name__}: {exc}"
    finally:
        await cp.close()
    return KillReport(counter.points, outcome)


def _main(argument: str) -> None:
    order = msgspec.json.decode(argument.encode(), type=KillOrder)
    report = asyncio.run(_child(order))
    sys.stdout.buffer.write(msgspec.json.encode(report) + b"\n")
    sys.stdout.flush()


CHILD_TIMEOUT: Final = 120.0
"""Seconds a child may run before it is killed and reported as hung; a traced child,
seconds it may use no CPU time (see `HELD_CHILD_CAP`)."""
HELD_CHILD_CAP: Final = 5 * CHILD_TIMEOUT
"""Seconds a traced child may run while it keeps using CPU time."""


async def run_restore_process(order: KillOrder) -> KillRun:
    """Run one child for ``order`` and wait for it; a child still running after
    `CHILD_TIMEOUT` seconds is killed and reported as hung (``TimeoutError``)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        msgspec.json.encode(order).decode(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=order.target.env(),
        start_new_session=True,  # its own process group, killed as one
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), CHILD_TIMEOUT)
    except TimeoutError:
        kill_group(process.pid)
        await asyncio.wait_for(process.wait(), CHILD_TIMEOUT)
        raise TimeoutError(
            f"the {order.operation} child process {process.pid} did not end within "
            f"{CHILD_TIMEOUT:g}s"
        ) from None
    finally:
        kill_group(process.pid)  # a child the backend started must not outlive the run
    await wait_group_gone(process.pid)
    killed = process.returncode == -signal.SIGKILL
    report = None
    if not killed and process.returncode == 0 and out.strip():
        report = msgspec.json.decode(out.strip().splitlines()[-1], type=KillReport)
    tail = err.decode(errors="replace")[-2000:]
    return KillRun(killed, report, process.returncode, tail)


async def run_held_restore(
    order: KillOrder, roots: Sequence[Path], n: int, sends: bool = False
) -> tuple[str | None, list[str]]:
    """Run ``order``'s restore in a child held right after its ``n``-th system call that
    changes a file under ``roots`` or, with ``sends``, that sends to a server
    (`checkpointspec.conformance.engines.crash.stopper`), and kill it there.

    Returns the call it was killed after (None when the restore ended first) and,
    when it ended first, every such call it made, described. Raises `StopperError`
    if the child cannot be traced, ``TimeoutError`` if it hangs.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        msgspec.json.encode(msgspec.structs.replace(order, wait_for_go=True)).decode(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=order.target.env(),
        start_new_session=True,
    )
    stopper: SyscallStopper | None = None
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), CHILD_TIMEOUT)
        if ready != b"ready\n":
            return None, []
        stopper = await SyscallStopper.start(process.pid, roots, n, sends=sends)
        process.stdin.write(b"go\n")
        await process.stdin.drain()
        ended = asyncio.ensure_future(process.wait())
        either: list[asyncio.Future[int] | asyncio.Future[str]] = [ended, stopper.outcome]
        await until_done_or_silent(either, process.pid, CHILD_TIMEOUT, HELD_CHILD_CAP)
        if stopper.outcome.done() and stopper.outcome.result().startswith("stopped "):
            await stopper.kill()
            return stopper.outcome.result().split(" ", 2)[2], []
        if stopper.outcome.done() and not ended.done():
            # The stopper reported and let go of a child that ended: a traced child's
            # exit reaches its parent only once its tracer is gone, a moment later.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(ended), CHILD_TIMEOUT)
        if not ended.done():
            said = " | ".join(stopper.stderr_tail().strip().splitlines()[-3:]) or "nothing"
            at = "with its store calls counted" if n >= 1 << 30 else f"to be held after call #{n}"
            raise TimeoutError(
                f"the {order.operation} child process {process.pid} ({at}) neither ended nor "
                f"was held: it used no CPU time for {CHILD_TIMEOUT:g}s or ran "
                f"{HELD_CHILD_CAP:g}s (its threads: {tree_states(process.pid)}); "
                f"its stopper process wrote to stderr: {said}"
            )
        return None, await stopper.finish()
    finally:
        if stopper is not None:
            await stopper.kill()  # ends a stopper still attached, so the child can be reaped
        kill_group(process.pid)
        await asyncio.wait_for(process.wait(), CHILD_TIMEOUT)
        await wait_group_gone(process.pid)


# -- the session a restore is tried on, and the state it is judged by -------------------------

SessionState = tuple[dict[str, bytes], tuple[tuple[int, bytes], ...]]
"""Workspace files (relative path -> content, the reserved folder left out) and the
log as (seq, encoded event) pairs."""


class TrialSession(msgspec.Struct, frozen=True):
    """A session built for a restore: the target seq and the states before and after."""

    session_id: str
    seq: int
    pre: SessionState
    post: SessionState


def workspace_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary files included) but the reserved folder."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d != RESERVED_DIR]
        for name in filenames:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            found[rel] = Path(dirpath, name).read_bytes()
    return found


async def session_state(cp: Checkpointer, session_id: str, root: Path) -> SessionState:
    log = await read_all(cp, session_id)
    return workspace_files(root), tuple((s.seq, encode_event(s.event)) for s in log)


async def build_session(
    cp: Checkpointer, session_id: str, root: Path, *, files: bool, conversation: bool
) -> TrialSession:
    """Three prompts whose tools edit, create, delete and binary-write files in ``root``;
    the restore tried is to the second prompt, which touches every kind of change.

    Each tool write is recorded as the SNAP rules say: snapshot first, then the file.
    """

    async def append(*events: SessionEvent) -> int:
        return await cp.append(session_id, list(events))

    async def tool_write(path: str, content: bytes | None) -> None:
        full = root / path
        before = full.read_bytes() if full.exists() else None
        await append(make_snapshot(path, before, content))
        if content is None:
            full.unlink()
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(content)

    async def tool_turn(call_id: str) -> None:
        await append(AssistantMessage("", (ToolCall(call_id, "edit", "{}"),)))
        await append(ToolResult(call_id, "ok"))

    root.mkdir(parents=True, exist_ok=True)
    await append(UserPrompt("write a, c and e"))
    await tool_write("a.txt", b"a0\n")
    await tool_write("c.txt", b"c0\n")
    await tool_write("e.bin", b"\xff\x00e0")
    await tool_turn("call-1")
    seq = await append(UserPrompt("edit a and e, add b and sub/d, drop c"))
    await tool_write("a.txt", b"a1\n")
    await tool_write("e.bin", b"\xfe\x01e1")
    await tool_write("b.txt", b"b1\n")
    await tool_write("sub/d.txt", "d \u00e9\n".encode())
    await tool_write("c.txt", None)
    await tool_turn("call-2")
    await append(UserPrompt("edit a again"))
    await tool_write("a.txt", b"a2\n")
    pre = await session_state(cp, session_id, root)
    log = await read_all(cp, session_id)
    plan = plan_restore(session_id, log, seq, pre[0], files=files, conversation=conversation)
    post_log = pre[1] if plan.keep_through is None else pre[1][: plan.keep_through]
    return TrialSession(session_id, seq, pre, (apply_plan(pre[0], plan), post_log))


if __name__ == "__main__":
    _main(sys.argv[1])
