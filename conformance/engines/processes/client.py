"""The worker protocol: the one way the kit drives a backend in other processes.

Every multi-process check — MP-001's racing writers, DUR-002's killed writer,
KILL-001's commanded machine and the free-running stress run — starts the same
worker (``python -m checkpointspec.conformance.engines.processes.worker BACKEND``, see
`checkpointspec.conformance.engines.processes.worker`) and talks to it the same way: one
JSON command per line on its stdin, one JSON reply per line on its stdout. The
worker loads the backend's factory when it starts; ``Open`` makes it open a
handle of its own through that factory.

Commands (``op`` names the shape; fields with defaults may be left out):

| command | fields | final reply |
|---|---|---|
| `Open` | ``path``, ``options`` | `Opened` (``fault_points``) |
| `Append` | ``session``, ``markers`` (one UserPrompt each), ``expected_head``, ``pause_at``, ``pause_on`` | `Ok` (new head) |
| `Truncate` | ``session``, ``to_seq``, ``expected_head``, ``pause_at``, ``pause_on`` | `Ok` (new head) |
| `Delete` | ``session``, ``pause_at``, ``pause_on`` | `Ok` |
| `Read` | ``session``, ``since_seq`` | `Ok` ([seq, marker] pairs) |
| `Head` | ``session`` | `Ok` (head) |
| `Acquire` | ``session`` | `Ok`, once the handle holds the session's maintenance lock |
| `Release` | ``session`` | `Ok`, once the handle has given the lock back |
| `Close` | | `Ok`; the process stays for the next `Open` |
| `Resume` | | none of its own: the paused call goes on and sends its final reply |
| `AppendBatches` | ``session``, ``writer``, ``batches``, ``size``, ``expect_head`` | `Ok`, after one `Acked` per batch |
| `Stress` | ``number``, ``history``, ``calls``, ``seconds``, ``sessions``, ``truncate_session``, ``seed`` | `Ok`, after one `Progress` per call |

Every command gets exactly one final reply — `Opened`, `Ok` or `Failed`
(a contract error: its type name and message, and for a conflict its
``expected`` and ``actual``). Before it a command may send interim replies:

- `Paused` (``point``): a write given ``pause_at`` reached that fault point of
  the backend (`FaultInjectable`) for the ``pause_on``-th time. The worker
  blocks there, inside the backend and holding whatever the backend holds at
  that point — locks and open transactions included — until it reads `Resume`
  (any other command ends it) or is killed. That makes an interleaving across
  processes a choice the parent makes, so a state machine can choose it and
  shrink it.
- `Acked` (``batch``, ``head``, ``expected_head``): `AppendBatches` appends
  ``batches`` batches of ``size`` events whose texts are
  ``WRITER:BATCH:INDEX``; with ``expect_head`` each append passes the head the
  worker has just read and is retried after a conflict. Each acknowledged
  append is reported at once, so a parent that kills the worker knows exactly
  which writes were acknowledged.
- `Progress` (``calls``): `Stress` runs the free-running workload of
  `checkpointspec.conformance.engines.processes.stress` and reports how many calls it
  has made after each.

Why the batch commands run inside the worker: MP-001 and DUR-002 measure
appends racing at the backend's own pace, and the stress history records each
call's invocation and completion in the worker with `time.monotonic_ns`. A
parent sending one command per call would put a pipe round trip between every
two calls, slowing the workers down and widening every recorded interval, so
the history checker would decide less. The parent chooses what runs (and, for
the state machine, every step); the worker runs loops at full speed.

Anything other than a contract error (`CheckpointError`) ends the worker with
its traceback on stderr: the parent sees `WorkerExited`, whose message carries
that traceback. Whatever the backend prints to stdout goes to stderr, so it
cannot garble the replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import IO

import msgspec

from .groups import kill_group, wait_group_gone

__all__ = [
    "Acked",
    "Acquire",
    "Append",
    "AppendBatches",
    "Close",
    "Command",
    "Delete",
    "Failed",
    "Head",
    "Ok",
    "Open",
    "Opened",
    "Paused",
    "Progress",
    "Read",
    "Release",
    "Reply",
    "Resume",
    "Stress",
    "Truncate",
    "WorkerClient",
    "WorkerExited",
    "WorkerHung",
    "decode_command",
    "decode_reply",
    "encode",
    "started_workers",
    "worker_argv",
    "worker_env",
]


# -- commands -------------------------------------------------------------------------------


class _Command(msgspec.Struct, frozen=True, omit_defaults=True, tag_field="op"):
    pass


class _Write(_Command, frozen=True, kw_only=True):
    pause_at: str | None = None
    """A fault point to pause at (one of `Opened.fault_points`)."""
    pause_on: int = 1
    """Pause on this arrival at ``pause_at`` (a batch may pass a point several times)."""


class Open(_Command, frozen=True, tag="open"):
    """Open a handle on the store at ``path`` through the factory (closing any open one)."""

    path: str
    options: dict[str, str] = {}
    """`BackendContext.options`, as the kit was given them."""


class Append(_Write, frozen=True, tag="append"):
    """Append one `UserPrompt` per marker (its text is the marker)."""

    session: str
    markers: tuple[str, ...] = ()
    expected_head: int | None = None


class Truncate(_Write, frozen=True, tag="truncate"):
    session: str
    to_seq: int
    expected_head: int | None = None


class Delete(_Write, frozen=True, tag="delete"):
    session: str


class Read(_Command, frozen=True, tag="read"):
    """Read since ``since_seq``; the reply holds (seq, text) pairs."""

    session: str
    since_seq: int = 0


class Head(_Command, frozen=True, tag="head"):
    session: str


class Acquire(_Command, frozen=True, tag="acquire"):
    """Take the session's maintenance lock (``acquire_maintenance``) and keep it."""

    session: str


class Release(_Command, frozen=True, tag="release"):
    """Give the session's maintenance lock back (``release_maintenance``)."""

    session: str


class Close(_Command, frozen=True, tag="close"):
    """Close the handle; the worker waits for the next `Open` (EOF on stdin ends it)."""


class Resume(_Command, frozen=True, tag="resume"):
    """Let the paused call go on; it then sends its own final reply."""


class AppendBatches(_Command, frozen=True, tag="append_batches"):
    """Append ``batches`` batches of ``size`` events ``WRITER:BATCH:INDEX``, acking each."""

    session: str
    writer: str
    batches: int
    size: int
    expect_head: bool = False
    """Pass the head just read as ``expected_head``, and retry after a conflict."""


class Stress(_Command, frozen=True, tag="stress"):
    """Run worker ``number``'s share of the free-running workload, recording its history.

    The worker makes random calls on ``sessions`` (truncates only on
    ``truncate_session``) until it has made ``calls`` calls or ``seconds`` have
    passed, writing a line before and after each call to the file ``history``
    (see `checkpointspec.conformance.engines.processes.stress`).
    """

    number: int
    history: str
    calls: int
    seconds: float
    sessions: tuple[str, ...]
    truncate_session: str | None = None
    seed: int = 0


Command = (
    Open
    | Append
    | Truncate
    | Delete
    | Read
    | Head
    | Acquire
    | Release
    | Close
    | Resume
    | AppendBatches
    | Stress
)


# -- replies --------------------------------------------------------------------------------


class _Reply(msgspec.Struct, frozen=True, omit_defaults=True, tag_field="reply"):
    pass


class Opened(_Reply, frozen=True, tag="opened"):
    """The handle is open; ``fault_points`` are those its backend offers (may be empty)."""

    fault_points: tuple[str, ...] = ()


class Ok(_Reply, frozen=True, tag="ok"):
    """The call returned: the new head (append, truncate), the head, or read's (seq, text) pairs."""

    value: int | list[tuple[int, str]] | None = None


class Failed(_Reply, frozen=True, tag="failed"):
    """The call raised a contract error (``error`` is its type's name)."""

    error: str
    message: str = ""
    expected: int | None = None
    actual: int | None = None


class Paused(_Reply, frozen=True, tag="paused"):
    """A write stopped at fault point ``point``; it waits for `Resume`."""

    point: str


class Acked(_Reply, frozen=True, tag="acked"):
    """Batch ``batch`` of an `AppendBatches` was acknowledged at ``head``."""

    batch: int
    head: int
    expected_head: int | None = None


class Progress(_Reply, frozen=True, tag="progress"):
    """A `Stress` worker has made ``calls`` calls."""

    calls: int


Reply = Opened | Ok | Failed | Paused | Acked | Progress

_FINAL = (Opened, Ok, Failed)


encode = msgspec.json.Encoder().encode
decode_command = msgspec.json.Decoder(Command).decode
decode_reply = msgspec.json.Decoder(Reply).decode


# -- the parent's end -----------------------------------------------------------------------


def worker_argv(backend: str) -> list[str]:
    """The argv that starts one worker for ``backend`` (``module:function`` or a name)."""
    return [sys.executable, "-m", "checkpointspec.conformance.engines.processes.worker", backend]


def worker_env() -> dict[str, str]:
    """The environment for workers: this interpreter's import path, so ``module:function``
    resolves in the worker as it does here."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


class WorkerHung(Exception):
    """A worker did not answer in time: it is blocked, most likely on something a
    killed process still holds."""


class WorkerExited(Exception):
    """A worker ended without answering; ``stderr`` holds the end of what it wrote there."""

    def __init__(self, status: int | None, stderr: str) -> None:
        super().__init__(f"the worker exited (status {status}): {stderr.strip() or 'no output'}")
        self.status = status
        self.stderr = stderr


class WorkerClient:
    """The parent's end of one worker process: send commands, receive replies, kill it."""

    def __init__(
        self, process: asyncio.subprocess.Process, stderr: IO[bytes], reply_timeout: float
    ) -> None:
        self.process = process
        self.reply_timeout = reply_timeout
        """Seconds to wait for any one reply before `WorkerHung`."""
        self._stderr = stderr
        self.transcript: bytearray | None = None
        """Set it to a bytearray to keep every reply line received, as received
        (a tracer finds the reply pipe in its trace by these bytes)."""

    @classmethod
    async def start(
        cls,
        backend: str,
        stderr: IO[bytes],
        reply_timeout: float = 30.0,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> WorkerClient:
        """Start a worker for ``backend``, its stderr going to ``stderr`` (a file the caller
        closes); send it `Open` before anything else.

        ``prefix`` goes before the worker's command (a tracer that runs it); ``env``
        adds to its environment.
        """
        process = await asyncio.create_subprocess_exec(
            *prefix,
            *worker_argv(backend),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env={**worker_env(), **(env or {})},
            limit=1 << 24,  # a read's reply is one line
            start_new_session=True,  # its own process group: a kill takes its children too
        )
        return cls(process, stderr, reply_timeout)

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    async def send(self, command: Command) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(encode(command) + b"\n")
        await stdin.drain()

    async def receive(self) -> Reply:
        """The next reply; `WorkerHung` if none comes within ``reply_timeout``, `WorkerExited` at EOF."""
        stdout = self.process.stdout
        assert stdout is not None
        try:
            line = await asyncio.wait_for(stdout.readline(), self.reply_timeout)
        except TimeoutError:
            raise WorkerHung(f"no answer within {self.reply_timeout:.0f}s") from None
        if not line:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), self.reply_timeout)
            raise WorkerExited(self.process.returncode, self.stderr_tail())
        if self.transcript is not None:
            self.transcript += line
        return decode_reply(line)

    async def call(self, command: Command) -> Reply:
        """Send a command that has no interim replies and return its reply."""
        await self.send(command)
        return await self.receive()

    async def replies(self) -> AsyncIterator[Reply]:
        """The replies to the command just sent: its interim replies, then its final one."""
        while True:
            reply = await self.receive()
            yield reply
            if isinstance(reply, _FINAL):
                return

    async def kill(self) -> list[Reply]:
        """SIGKILL, wherever the worker is: no cleanup runs in it, and every
        process it started (a stdio backend's child) is killed with it; this
        returns once none of them is alive.

        Returns the replies it had sent that were not yet received, which may
        acknowledge writes; a line the kill cut short is dropped.
        """
        kill_group(self.process.pid)
        await self.process.wait()
        await wait_group_gone(self.process.pid, self.reply_timeout)
        if self.process.stdin is not None:
            self.process.stdin.close()
        stdout = self.process.stdout
        assert stdout is not None
        try:
            rest = await asyncio.wait_for(stdout.read(), self.reply_timeout)
        except TimeoutError:
            raise WorkerHung("a process the killed worker started keeps its stdout open") from None
        replies = []
        for line in rest.splitlines():
            with contextlib.suppress(msgspec.DecodeError):
                replies.append(decode_reply(line))
        return replies

    async def close(self) -> int | None:
        """End the worker: at EOF on its stdin it closes its handle and exits.

        Returns its exit status (non-zero if closing its handle failed; see
        `stderr_tail`); a worker that does not exit within ``reply_timeout`` is killed.
        """
        if self.running:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), self.reply_timeout)
            except TimeoutError:
                await self.kill()
        return self.process.returncode

    def stderr_tail(self, limit: int = 800) -> str:
        """The last ``limit`` characters the worker wrote to stderr."""
        # pread leaves the file offset alone: the worker writes at that offset.
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4 * limit)
        return os.pread(fd, size - start, start).decode(errors="replace")[-limit:]


@contextlib.asynccontextmanager
async def started_workers(
    backend: str, count: int, reply_timeout: float = 30.0
) -> AsyncIterator[list[WorkerClient]]:
    """``count`` workers for ``backend``, started together; those still running at the end are killed."""
    workers: list[WorkerClient] = []
    with contextlib.ExitStack() as files:
        try:
            for _ in range(count):
                stderr = files.enter_context(tempfile.TemporaryFile())
                workers.append(await WorkerClient.start(backend, stderr, reply_timeout))
            yield workers
        finally:
            for worker in workers:
                if worker.running:
                    await worker.kill()
