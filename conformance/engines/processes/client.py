"""`WorkerClient`: the one way the kit drives a backend in other processes.

Every multi-process check — MP-001's racing writers, DUR-002's killed writer,
KILL-001's commanded machine and holds, READ-003's holds and the free-running
stress run — starts the same worker (``python -m
checkpointspec.conformance.engines.processes.worker BACKEND``, see
`checkpointspec.conformance.engines.processes.worker`) and talks to it the same
way: the stdio protocol (`checkpointspec.backends.stdio.messages`,
docs/stdio-protocol.md), one request per line on its stdin, reply lines on its
stdout, through the protocol's one client wire (`checkpointspec.backends.stdio.wire`:
framing, ids, reply matching) and its one reading of a child
(`checkpointspec.backends.stdio.child`: a deadline on every reply line, end of
file as the child's exit, the tail of its stderr file), as `StdioCheckpointer`
reads its own child; this client awaits where that one waits in ``select``. A worker is that protocol's server: ``hello`` opens
a handle of its own through the backend's factory, and the contract's requests
are answered as any stdio backend answers them. On top, the kit's own requests
(`checkpointspec.conformance.engines.processes.messages`):

| request | what | interim replies |
|---|---|---|
| `PauseAt` (``point``, ``arrival``) | the next request stops at that fault point | ``fault`` |
| `AppendBatches` (``session_id``, ``writer``, ``batches``, ``size``, ``expect_head``) | append batches at full speed | ``acked``, one per batch |
| `Stress` (``number``, ``history``, ``calls``, ``seconds``, ``sessions``, ...) | the free-running workload | ``progress``, one per call |

The checks build requests with the id `UNSENT`; `send` numbers them. What a
request comes to is a `WorkerReply`, decoded from its reply lines:

- `Opened` (``fault_points``): the handle is open (``hello``'s result);
- `Succeeded` (``value``): a result — the new head, the head, or for a read its
  (seq, text) pairs, gathered from its ``events`` chunks;
- `Failed`: a contract error (its type name and message, and for a conflict
  its ``expected`` and ``actual``);
- `Paused` (``point``), before the final one: the request reached the fault
  point `PauseAt` chose. The worker blocks there, inside the backend and
  holding whatever the backend holds at that point — locks and open
  transactions included — until it reads ``resume`` (anything else ends it) or
  is killed. That makes an interleaving across processes a choice the parent
  makes, so a state machine can choose it and shrink it;
- `Acked` (``batch``, ``head``, ``expected_head``), before the final one: an
  `AppendBatches` batch (texts ``WRITER:BATCH:INDEX``) was acknowledged. Each is
  reported at once, so a parent that kills the worker knows exactly which
  writes were acknowledged;
- `Progress` (``calls``), before the final one: a `Stress` worker has made
  that many calls.

Why the batch requests run inside the worker: MP-001 and DUR-002 measure
appends racing at the backend's own pace, and the stress history records each
call's invocation and completion in the worker with `time.monotonic_ns`. A
parent sending one request per call would put a pipe round trip between every
two calls, slowing the workers down and widening every recorded interval, so
the history checker would decide less. The parent chooses what runs (and, for
the state machine, every step); the worker runs loops at full speed.

Anything other than a contract error ends the worker with its traceback on
stderr: the parent sees `WorkerExited`, whose message carries that traceback.
When the backend raised it, the worker exits with `BACKEND_FAILED` and the
`WorkerExited` is noted as the backend's (evidence, as in the kit's own
process); when an answer of the backend broke a rule, it exits with
`BROKE_A_RULE` and the parent raises that `RuleViolation`; when the backend is
itself served over the stdio protocol (``--process``) and broke it, the worker
exits with `BROKE_THE_PROTOCOL` and the parent raises that `StdioProtocolError`,
noted as the backend's (PROTO-001).
Whatever the backend prints to stdout goes to stderr, so it cannot garble the
replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import IO, Final

import msgspec

from ....backends.registry import BackendTarget
from ....backends.stdio.child import ReplyLines, stderr_tail
from ....backends.stdio.messages import PROTOCOL_VERSION, Hello, HelloResult, Request
from ....backends.stdio.wire import Conversation, StdioProtocolError
from ....spec import SessionEvent, UserPrompt
from ..contract.violations import RuleViolation
from ..target.provenance import blame_backend
from .forkserver import WORKER_PROGRAM, ForkedWorker, spawn_forked
from .groups import kill_group, wait_group_gone
from .messages import Acked, KitReply, KitRequest

__all__ = [
    "BACKEND_FAILED",
    "BROKE_A_RULE",
    "BROKE_THE_PROTOCOL",
    "UNSENT",
    "WORKER_BREACH",
    "WORKER_VIOLATION",
    "Acked",
    "BackendFailedInWorker",
    "Failed",
    "Opened",
    "Paused",
    "Progress",
    "Succeeded",
    "WorkerClient",
    "WorkerExited",
    "WorkerHung",
    "WorkerReply",
    "backend_error",
    "breach_line",
    "hello",
    "marker_prompts",
    "started_workers",
    "violation_line",
    "worker_argv",
]

UNSENT: Final = 0
"""The id of a request not sent yet: `WorkerClient.send` gives each its own."""

BACKEND_FAILED: Final = 3
"""A worker's exit status when the backend raised an exception outside the contract:
evidence against the backend, as it is in the kit's own process."""

BROKE_A_RULE: Final = 4
"""A worker's exit status when an answer of the backend broke a rule (a head that is
no int, see `checkpointspec.conformance.engines.contract.answers`); the last line of its
stderr is `WORKER_VIOLATION` and the violation as JSON."""

WORKER_VIOLATION: Final = "rule violation in the worker: "

BROKE_THE_PROTOCOL: Final = 5
"""A worker's exit status when the backend, served over the stdio protocol
(``--process``), broke that protocol; the last line of its stderr is
`WORKER_BREACH` and the `StdioProtocolError` as JSON."""

WORKER_BREACH: Final = "stdio protocol breach in the worker: "


class _Violation(msgspec.Struct, frozen=True):
    """A `RuleViolation` whole, as it crosses from a worker to the parent."""

    rule_id: str
    message: str
    also: tuple[str, ...] = ()
    call: str = ""
    expected: str = ""
    got: str = ""


def violation_line(violation: RuleViolation) -> str:
    """The stderr line a worker ends with when ``violation`` ended it: every field of it."""
    found = _Violation(
        violation.rule_id,
        violation.message,
        violation.also,
        violation.call,
        violation.expected,
        violation.got,
    )
    return WORKER_VIOLATION + msgspec.json.encode(found).decode()


def _violation_of(line: str) -> RuleViolation:
    """The `RuleViolation` a worker's `violation_line` carries, said to be the worker's."""
    found = msgspec.json.decode(line.removeprefix(WORKER_VIOLATION), type=_Violation)
    return RuleViolation(
        found.rule_id,
        f"{found.message} (in a worker process)",
        found.also,
        call=found.call,
        expected=found.expected,
        got=found.got,
    )


class _Breach(msgspec.Struct, frozen=True):
    """A `StdioProtocolError` whole, and the operation that met it, as it crosses from a
    worker to the parent."""

    message: str
    operation: str
    line: bytes | None = None
    expected_id: int | None = None


def breach_line(breach: StdioProtocolError, operation: str) -> str:
    """The stderr line a worker ends with when ``breach``, met in the backend's
    ``operation``, ended it: every field of it."""
    found = _Breach(str(breach), operation, breach.line, breach.expected_id)
    return WORKER_BREACH + msgspec.json.encode(found).decode()


def _breach_of(line: str) -> StdioProtocolError:
    """The `StdioProtocolError` a worker's `breach_line` carries, noted as the backend's
    in that worker."""
    found = msgspec.json.decode(line.removeprefix(WORKER_BREACH), type=_Breach)
    breach = StdioProtocolError(found.message, line=found.line, expected_id=found.expected_id)
    blame_backend(breach, f"{found.operation} in a worker process")
    return breach


def _exit_evidence(status: int | None, stderr: str, operation: str) -> Exception | None:
    """What a worker's exit proves against the backend: the rule one of its answers
    broke, the breach of the stdio protocol it met, or the exception it raised (the
    last two noted as the backend's); None for the kit's own."""
    last = stderr.strip().splitlines()[-1:] or [""]
    if status == BROKE_A_RULE and last[0].startswith(WORKER_VIOLATION):
        return _violation_of(last[0])
    if status == BROKE_THE_PROTOCOL and last[0].startswith(WORKER_BREACH):
        return _breach_of(last[0])
    if status == BACKEND_FAILED:
        exited = BackendFailedInWorker(status, stderr)
        blame_backend(exited, f"{operation or 'hello'} in a worker process")
        return exited
    return None


def hello(path: str, options: Mapping[str, str] | None = None) -> Hello:
    """The request that opens a worker's handle on the store at ``path``."""
    return Hello(UNSENT, PROTOCOL_VERSION, path, dict(options or {}))


def marker_prompts(markers: Sequence[str]) -> list[SessionEvent]:
    """One `UserPrompt` per marker, its text the marker: how the kit tells events apart."""
    return [UserPrompt(marker) for marker in markers]


# -- what a request comes to ----------------------------------------------------------------


class Opened(msgspec.Struct, frozen=True):
    """The handle is open; ``fault_points`` are those its backend offers (may be empty)."""

    fault_points: tuple[str, ...] = ()


class Succeeded(msgspec.Struct, frozen=True):
    """The call returned: the new head (append, truncate), the head, or read's (seq, text) pairs."""

    value: int | list[tuple[int, str]] | None = None


class Failed(msgspec.Struct, frozen=True):
    """The call raised a contract error (``error`` is its type's name)."""

    error: str
    message: str = ""
    expected: int | None = None
    actual: int | None = None


class Paused(msgspec.Struct, frozen=True):
    """The request stopped at fault point ``point``; it waits for `Resume`."""

    point: str


class Progress(msgspec.Struct, frozen=True):
    """A `Stress` worker has made ``calls`` calls."""

    calls: int


WorkerReply = Opened | Succeeded | Failed | Paused | Acked | Progress

_REPLY_LIMIT: Final = 1 << 24
"""The longest reply line a worker may send: a read's reply is one line."""
_CHUNK: Final = 1 << 16
"""Bytes read from a worker's stdout at a time."""

_FINAL = (Opened, Succeeded, Failed)

_decode_hello = msgspec.json.Decoder(HelloResult).decode
_decode_int = msgspec.json.Decoder(int).decode


class _Conversation(Conversation[KitReply]):
    """The wire's conversation with a worker, its replies decoded into what the
    request in flight came to."""

    def __init__(self) -> None:
        super().__init__(UNSENT, KitReply)
        self.read: list[tuple[int, str]] = []

    def begin(self, request: msgspec.Struct) -> None:
        super().begin(request)
        self.read = []

    def came_to(self, line: bytes) -> WorkerReply | None:
        """What ``line`` says; None for a chunk of a read (its pairs are kept for the result).

        Raises `StdioProtocolError` for a line that is no reply to the request in flight.
        """
        reply = self.decode(line)
        if isinstance(reply, KitReply):
            return reply.acked if reply.acked is not None else Progress(reply.progress or 0)
        if reply.fault is not None:
            return Paused(reply.fault)
        if reply.events is not None:
            self.read += [(s.seq, getattr(s.event, "text", "")) for s in reply.events]
            return None
        if reply.error is not None:
            error = reply.error
            return Failed(error.type, error.message, error.expected, error.actual)
        if self.op == "hello":
            return Opened(tuple(_decode_hello(reply.result).fault_points))
        if self.op == "read":
            return Succeeded(self.read)
        if self.op in ("append", "truncate", "head"):
            return Succeeded(_decode_int(reply.result))
        return Succeeded()


# -- the parent's end -----------------------------------------------------------------------


def worker_argv(target: BackendTarget) -> list[str]:
    """The argv that starts one worker for ``target``; run it in ``target.env()``."""
    return target.argv(WORKER_PROGRAM)


class WorkerHung(Exception):
    """A worker did not answer in time: it is blocked, most likely on something a
    killed process still holds. ``waiting_for`` names the request it did not answer
    (``append``, ``hello`` …), ``stderr`` holds the end of what it wrote there."""

    def __init__(self, message: str, waiting_for: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.waiting_for = waiting_for
        self.stderr = stderr

    @classmethod
    def silent(cls, pid: int, seconds: float, waiting_for: str, stderr: str) -> WorkerHung:
        """Worker ``pid`` sent nothing for ``seconds`` while ``waiting_for`` was in flight."""
        last = stderr.strip().splitlines()[-3:]
        said = "; its last stderr lines: " + " | ".join(last) if last else "; no stderr output"
        doing = f"its {waiting_for} request" if waiting_for else "its start"
        return cls(
            f"worker process {pid} sent no answer to {doing} within {seconds:g}s{said}",
            waiting_for,
            stderr,
        )


class WorkerExited(Exception):
    """A worker ended without answering; ``stderr`` holds the end of what it wrote there."""

    def __init__(self, status: int | None, stderr: str) -> None:
        super().__init__(f"the worker exited (status {status}): {stderr.strip() or 'no output'}")
        self.status = status
        self.stderr = stderr


class BackendFailedInWorker(WorkerExited):
    """A worker ended because the backend raised an exception outside the contract
    (exit status `BACKEND_FAILED`); the message is that exception's last line."""

    def __init__(self, status: int | None, stderr: str) -> None:
        super().__init__(status, stderr)
        raised = stderr.strip().splitlines()[-1:] or ["no output"]
        self.args = (f"{raised[0]} (the worker exited with status {status})",)
        named = raised[0].split(":", 1)[0].strip()
        self.error = named.rsplit(".", 1)[-1] if named.replace(".", "").isidentifier() else ""
        """The class name of what the backend raised ("TypeError"; "" when its last
        line names none)."""


def backend_error(ended: object) -> str:
    """The class name of what the backend raised, when ``ended`` (a worker's reply, or
    what ended it) says: a `Failed` reply's error, or the exception of a worker that
    ended because of it (`BackendFailedInWorker`: "TypeError"); "" for anything else.
    For `RuleViolation.or_crash`, which keeps the operation's crash in view."""
    if isinstance(ended, Failed):
        return ended.error
    return ended.error if isinstance(ended, BackendFailedInWorker) else ""


class WorkerClient:
    """The parent's end of one worker process: send requests, receive what they came to, kill it."""

    def __init__(
        self,
        process: asyncio.subprocess.Process | ForkedWorker,
        stderr: IO[bytes],
        reply_timeout: float,
    ) -> None:
        self.process = process
        self.reply_timeout = reply_timeout
        """Seconds to wait for any one reply before `WorkerHung`."""
        self._stderr = stderr
        self._conversation = _Conversation()
        self._replies = ReplyLines()
        self.transcript: bytearray | None = None
        """Set it to a bytearray to keep every reply line received, as received
        (a tracer finds the reply pipe in its trace by these bytes)."""

    @classmethod
    async def start(
        cls,
        target: BackendTarget,
        stderr: IO[bytes],
        reply_timeout: float = 30.0,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> WorkerClient:
        """Start a worker for ``target``, its stderr going to ``stderr`` (a file the caller
        closes); send it `hello` (with ``target.options``) before anything else. It is forked
        from the run's fork server for ``target`` (`checkpointspec.conformance.engines.processes.forkserver`),
        which has imported the backend already, unless it runs under a ``prefix`` or
        with an ``env`` of its own.

        ``prefix`` goes before the worker's command (a tracer that runs it); ``env``
        adds to its environment.
        """
        if not prefix and not env:
            forked = await spawn_forked(target, stderr, _REPLY_LIMIT)
            if forked is not None:
                return cls(forked, stderr, reply_timeout)
        process = await asyncio.create_subprocess_exec(
            *prefix,
            *worker_argv(target),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env={**target.env(), **(env or {})},
            limit=_REPLY_LIMIT,
            start_new_session=True,  # its own process group: a kill takes its children too
        )
        return cls(process, stderr, reply_timeout)

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    async def send(self, request: Request | KitRequest) -> None:
        """Send ``request`` under an id of its own (a `Resume` under the paused request's)."""
        request = self._conversation.number(request)
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(self._conversation.encode(request) + b"\n")
        await stdin.drain()

    async def receive(self) -> WorkerReply:
        """What the next reply says (a read's chunks are gathered into its result);
        `WorkerHung` if a line does not come within ``reply_timeout``, `WorkerExited` at EOF."""
        while True:
            line = await self._line()
            if self.transcript is not None:
                self.transcript += line + b"\n"
            reply = self._conversation.came_to(line)
            if reply is not None:
                return reply

    async def _line(self) -> bytes:
        """The next reply line, within ``reply_timeout`` of asking for it."""
        stdout = self.process.stdout
        assert stdout is not None
        self._replies.ask(self.reply_timeout)
        while (line := self._replies.line()) is None:
            try:
                chunk = await asyncio.wait_for(stdout.read(_CHUNK), self._replies.remaining())
            except TimeoutError:
                raise WorkerHung.silent(
                    self.process.pid, self.reply_timeout, self._conversation.op, self.stderr_tail()
                ) from None
            if not self._replies.took(chunk):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.process.wait(), self.reply_timeout)
                status, stderr = self.process.returncode, self.stderr_tail()
                evidence = _exit_evidence(status, stderr, self._conversation.op)
                raise evidence or WorkerExited(status, stderr)
        return line

    async def call(self, request: Request | KitRequest) -> WorkerReply:
        """Send a request that has no interim replies and return what it came to."""
        await self.send(request)
        return await self.receive()

    async def replies(self) -> AsyncIterator[WorkerReply]:
        """The replies to the request just sent: its interim replies, then its final one."""
        while True:
            reply = await self.receive()
            yield reply
            if isinstance(reply, _FINAL):
                return

    async def kill(self) -> list[WorkerReply]:
        """SIGKILL, wherever the worker is: no cleanup runs in it, and every
        process it started (a stdio backend's child) is killed with it; this
        returns once none of them is alive.

        Returns the replies it had sent that were not yet received, which may
        acknowledge writes; a line the kill cut short is dropped.
        """
        kill_group(self.process.pid)
        try:
            await asyncio.wait_for(self.process.wait(), self.reply_timeout)
            await wait_group_gone(self.process.pid, self.reply_timeout)
        except TimeoutError:
            # A killed process that cannot be reaped is held by its tracer (a stopper
            # process still attached), or its group has a member SIGKILL cannot end.
            raise WorkerHung(
                f"worker process {self.process.pid} (or a process it started) did not end "
                f"within {self.reply_timeout:g}s of SIGKILL; its last stderr lines: "
                + " | ".join(self.stderr_tail().strip().splitlines()[-3:]),
                self._conversation.op,
                self.stderr_tail(),
            ) from None
        if self.process.stdin is not None:
            self.process.stdin.close()
        stdout = self.process.stdout
        assert stdout is not None
        try:
            rest = await asyncio.wait_for(stdout.read(), self.reply_timeout)
        except TimeoutError:
            raise WorkerHung("a process the killed worker started keeps its stdout open") from None
        self._replies.took(rest)
        replies = []
        while (line := self._replies.line()) is not None:
            with contextlib.suppress(StdioProtocolError):
                reply = self._conversation.came_to(line)
                if reply is not None:
                    replies.append(reply)
        return replies

    async def close(self) -> int | None:
        """End the worker: at EOF on its stdin it closes its handle and exits.

        Returns its exit status (non-zero if closing its handle failed; see
        `stderr_tail`); a worker that does not exit within ``reply_timeout`` is killed,
        its whole group (`kill`). The same steps as `end_process` ends a stdio
        backend's child with, awaited.
        """
        if self.running:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), self.reply_timeout)
            except TimeoutError:
                await self.kill()
        return self.process.returncode

    def exit_evidence(self) -> Exception | None:
        """What the worker's exit proves against the backend once it has exited, as a reply
        it did not send proves it: the breach of the stdio protocol, the rule one of the
        backend's answers broke, or the exception the backend raised, met while closing its
        handle at the end (`close`); None while it runs, after a clean exit, or for the
        kit's own error."""
        if self.running:
            return None
        return _exit_evidence(self.process.returncode, self.stderr_tail(), "close")

    def stderr_tail(self, limit: int = 800) -> str:
        """The last ``limit`` characters the worker wrote to stderr."""
        return stderr_tail(self._stderr, limit)


@contextlib.asynccontextmanager
async def started_workers(
    target: BackendTarget, count: int, reply_timeout: float = 30.0
) -> AsyncIterator[list[WorkerClient]]:
    """``count`` workers for ``target``, started together; those still running at the end are killed."""
    workers: list[WorkerClient] = []
    with contextlib.ExitStack() as files:
        try:
            for _ in range(count):
                stderr = files.enter_context(tempfile.TemporaryFile())
                workers.append(await WorkerClient.start(target, stderr, reply_timeout))
            yield workers
        finally:
            for worker in workers:
                if worker.running:
                    await worker.kill()
