"""A child process speaking the wire: what every client does with its child, one way.

`StdioCheckpointer` (`checkpointspec.backends.stdio.client`, one child per handle)
and the kit's worker client (`checkpointspec.conformance.engines.processes.client`,
one worker per `WorkerClient`) each start a child, read its reply lines with a
deadline on every line, tell a child that exited from one that hangs, and end it.
The rules of that are here:

| name | what |
|---|---|
| `ReplyLines` | the reply lines of one child: its framing (`Lines`) and the deadline of each line, and what an empty read means (the child exited) |
| `stderr_tail` | the end of what a child wrote to its stderr file, the evidence of an exit or a hang |
| `end_process` | ending a child: close its stdin, wait for it within a deadline, then kill it and wait again within one |

Each client does its own I/O, and must: `StdioCheckpointer` is called from
threads (every call through `asyncio.to_thread`, a fault hook that blocks inside a
call, store hooks called synchronously) and keeps its children in a pool across
event loops, so it waits in ``select`` on the caller's thread and never runs an
event loop there; the kit drives many workers at once on one event loop, some
forked by a fork server that alone can reap them, so it awaits. Both feed what
they read to the same `ReplyLines` and read the same kind of stderr file.
`end_process` is the blocking form of ending (a stdio backend's child, a fork
server); `WorkerClient.close` takes the same steps, awaited.

A worker leads a process group of its own and the kit kills that group (its
stdio backend's child goes with it, `conformance/engines/processes/groups.py`); a
stdio backend's child stays in its parent's group, so that a killed worker takes
it along, and is killed alone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from typing import IO

from .wire import Lines

__all__ = ["ReplyLines", "end_process", "stderr_tail"]


class ReplyLines:
    """The reply lines of one child, each due within a deadline of asking for it.

    No I/O happens here. A client calls `ask` when it wants the next line, then,
    while `line` has none, reads its pipe for at most `remaining` seconds (none
    left: the child hangs) and hands over what it read to `took` (False: end of
    file, the child exited)."""

    def __init__(self) -> None:
        self._lines = Lines()
        self._due = 0.0

    def ask(self, seconds: float) -> None:
        """The next line is wanted: it is due within ``seconds`` from now."""
        self._due = time.monotonic() + seconds

    def line(self) -> bytes | None:
        """The next complete line, without its newline, or None until one has come whole."""
        return self._lines.next()

    def remaining(self) -> float:
        """Seconds left to read before the line asked for is overdue (0 once it is)."""
        return max(0.0, self._due - time.monotonic())

    def took(self, chunk: bytes) -> bool:
        """Keep ``chunk``, read from the child's stdout; False when it is empty: the
        child closed its stdout, which is to say it exited (or is exiting)."""
        self._lines.feed(chunk)
        return bool(chunk)


def stderr_tail(stderr: IO[bytes], limit: int) -> str:
    """The last ``limit`` characters the child wrote to the file ``stderr`` so far."""
    # pread leaves the file offset alone: the child writes at that offset.
    fd = stderr.fileno()
    size = os.fstat(fd).st_size
    start = max(0, size - 4 * limit)
    return os.pread(fd, size - start, start).decode(errors="replace")[-limit:]


def end_process(process: subprocess.Popen[bytes], within: float) -> None:
    """End ``process``: close its stdin (a child speaking the wire exits at end of
    file), wait up to ``within`` seconds for it to exit, else kill it and wait up to
    ``within`` again (a killed child held by a tracer is reaped only once the tracer
    ends). ``process.returncode`` stays None if it could not be reaped even so."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=within)
