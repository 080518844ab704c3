"""The worker process: the stdio protocol's server, plus the requests only the kit sends.

Run as ``python -m checkpointspec.conformance.engines.processes.worker BACKEND`` (what
`checkpointspec.conformance.engines.processes.client.WorkerClient` starts). It is
`checkpointspec.backends.stdio.serve.Server` — the same server loop, the same
replies, the same pause at a fault point — with three differences:

- the kit's own requests are answered (`PauseAt`, `AppendBatches`, `Stress`, see
  `checkpointspec.conformance.engines.processes.messages`): `PauseAt` sets the
  server's one pause at a fault point for the request after it;
- a handle is opened as every kit check opens one (`open_checkpointer`: the
  factory's result checked, its exceptions noted as the backend's);
- only contract errors (`CheckpointError`) are replies, and a handle's open
  failure: anything else ends the worker with its traceback on stderr, which
  the parent reports (`WorkerExited`), and so does a failing close at the end
  (a non-zero exit status). The status says whose it was: `BACKEND_FAILED`
  for an exception the backend raised, `BROKE_A_RULE` for an answer that broke
  a rule (named on the last stderr line), `BROKE_THE_PROTOCOL` for a breach of
  the stdio protocol met in a backend itself served over it (``--process``; the
  breach on the last stderr line), 1 for the kit's own.

It loads the backend's factory at start, so a worker that cannot import the
backend exits before its first reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import IO, NoReturn

import msgspec

from ....backends.registry import BackendTarget
from ....backends.stdio.client import without_spares
from ....backends.stdio.messages import Hello, Request
from ....backends.stdio.serve import Server, error_body, reply_stream
from ....backends.stdio.wire import StdioProtocolError
from ....spec import (
    BackendContext,
    CheckpointConflictError,
    Checkpointer,
    CheckpointError,
    UserPrompt,
)
from ..contract.violations import RuleViolation
from ..target.provenance import backend_operation, open_checkpointer
from .client import (
    BACKEND_FAILED,
    BROKE_A_RULE,
    BROKE_THE_PROTOCOL,
    breach_line,
    violation_line,
)
from .contract_worker import serve_contract_worker
from .forkserver import CONTRACT_WORKER, FORK_SERVER_FLAG, PID, READY, STATUS
from .messages import Acked, AppendBatches, KitRequest, PauseAt, Stress
from .stress import run_workload

__all__: list[str] = []


class _KitServer(Server):
    """The stdio server with the kit's own requests answered."""

    decoder = msgspec.json.Decoder(Request | KitRequest)

    async def open(self, ctx: BackendContext) -> Checkpointer:
        return await open_checkpointer(self.factory, ctx)

    async def answer(self, request: Request | KitRequest) -> object:
        if isinstance(request, PauseAt):
            self.pause, self.arrivals = (request.point, request.arrival), 0
            return None
        if isinstance(request, AppendBatches):
            await self.append_batches(self.handle(), request)
            return None
        if isinstance(request, Stress):
            await self.stress(self.handle(), request)
            return None
        return await super().answer(request)

    async def append_batches(self, cp: Checkpointer, request: AppendBatches) -> None:
        conflicts = 0
        for batch in range(request.batches):
            texts = (f"{request.writer}:{batch}:{i}" for i in range(request.size))
            events = [UserPrompt(text) for text in texts]
            while True:
                want = await cp.head(request.session_id) if request.expect_head else None
                try:
                    head = await cp.append(request.session_id, events, want)
                except CheckpointConflictError:
                    # Another writer got there first: read the head again, unless the
                    # conflicts are more than the other writers' appends can explain.
                    conflicts += 1
                    if request.conflicts is not None and conflicts > request.conflicts:
                        raise
                    continue
                self.send(id=request.id, acked=Acked(batch, head, want))
                break

    async def stress(self, cp: Checkpointer, request: Stress) -> None:
        with _history_file(request.history) as record:
            await run_workload(
                cp, request, record, lambda calls: self.send(id=request.id, progress=calls)
            )

    def answered(self, request: Request | KitRequest) -> None:
        if not isinstance(request, PauseAt):  # a pause is for the one request after it
            self.pause = None

    def reply_error(self, request: Request | KitRequest, error: Exception) -> None:
        # The factory is the backend's code: report, don't die; but a breach of the stdio
        # protocol by the backend's child ends the worker, as it does anywhere else.
        if isinstance(request, Hello) and not isinstance(error, StdioProtocolError):
            body = error_body(error)
            message = f"opening through the factory: {body.message}"
            self.send(id=request.id, error=msgspec.structs.replace(body, message=message))
        elif isinstance(error, CheckpointError):
            self.send(id=request.id, error=error_body(error))
        else:
            raise error

    async def finish(self) -> None:
        if self.cp is not None:
            await self.cp.close()  # a failure ends the worker with a non-zero status


def _history_file(path: str) -> IO[bytes]:
    """Unbuffered: each line is in the file before the next call starts, so a kill
    loses at most the line being written."""
    return Path(path).open("wb", buffering=0)


def _target(backend: str) -> BackendTarget:
    """The backend its command line names (`BackendTarget.argv`), its factory loaded;
    the options come with each ``hello``."""
    target = BackendTarget.named(backend)
    target.factory()
    return target


def _serve_worker(target: BackendTarget) -> None:
    without_spares()  # a worker opens one handle: a child started ahead would be wasted
    try:
        asyncio.run(_KitServer(target, sys.stdin.buffer, reply_stream()).run())
    except RuleViolation as violation:
        # An answer of the backend broke a rule: the parent raises it (BROKE_A_RULE).
        traceback.print_exc()
        print(violation_line(violation), file=sys.stderr, flush=True)
        sys.exit(BROKE_A_RULE)
    except Exception as exc:
        operation = backend_operation(exc)
        if operation is None:
            raise  # the kit's own error: the parent reports it as one
        traceback.print_exc()
        if isinstance(exc, StdioProtocolError):
            # The backend's child broke the protocol: the parent raises the breach (PROTO-001).
            print(breach_line(exc, operation), file=sys.stderr, flush=True)
            sys.exit(BROKE_THE_PROTOCOL)
        sys.exit(BACKEND_FAILED)


def serve_forked(
    target: BackendTarget, program: bytes, stdin: int, stdout: int, stderr: int
) -> NoReturn:
    """Be a worker in a process just forked by the fork server
    (`checkpointspec.conformance.engines.processes.forkserver`): a session of its own,
    the kit's pipes and file as stdin, stdout and stderr, ``target``'s factory already
    loaded, running ``program`` (a checkpointer's worker or a contract's); ends the
    process with the status a worker started afresh would end with."""
    os.setsid()
    for given, standard in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(given, standard)
        os.close(given)
    status = 1
    try:
        if program == CONTRACT_WORKER:
            serve_contract_worker(target)
        else:
            _serve_worker(target)
        status = 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(status)  # not the fork server's cleanup: it is still running


def serve_forks(backend: str, fd: int) -> None:
    """Be the fork server of `checkpointspec.conformance.engines.processes.forkserver`
    on the socket ``fd``: load ``backend``'s factory, then fork a worker per request
    (`serve_forked` in the child) until end of file, reporting each one's pid and,
    once reaped, its exit status."""
    sock = socket.socket(fileno=fd)
    target = _target(backend)
    sock.sendall(READY)
    statuses: dict[int, int] = {}  # a child's pid -> the write end of its status pipe
    running: dict[int, int] = {}  # a pidfd -> its child's pid
    ended: dict[int, int] = {}  # the same, once the child has exited, until it is reaped
    while True:
        # A traced child reaches its parent only once its tracer is done with it,
        # after its pidfd has said it exited: those are tried again every 50 ms.
        watched: list[socket.socket | int] = [sock, *running]
        readable, _, _ = select.select(watched, [], [], 0.05 if ended else None)
        for pidfd in readable:
            if pidfd in running:
                ended[pidfd] = running.pop(pidfd)
        for pidfd, pid in list(ended.items()):
            if (code := _reaped(pid)) is not None:
                with contextlib.suppress(OSError):
                    os.write(statuses[pid], STATUS.pack(code))
                os.close(statuses.pop(pid))
                os.close(pidfd)
                del ended[pidfd]
        if sock not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 16, 4)
        if not message:
            return  # the kit ended: its workers end at end of file on their stdin
        pid = os.fork()
        if pid == 0:
            sock.close()
            for kept in [*statuses.values(), *running, *ended, fds[3]]:
                os.close(kept)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            serve_forked(target, message, fds[0], fds[1], fds[2])  # never returns
        for passed in fds[:3]:
            os.close(passed)
        statuses[pid] = fds[3]
        running[os.pidfd_open(pid)] = pid
        sock.sendall(PID.pack(pid))


def _reaped(pid: int) -> int | None:
    """The exit status of child ``pid`` once reaped here; None while it cannot be yet."""
    try:
        waited, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -signal.SIGKILL  # not ours to wait for any more: it was killed
    return None if waited == 0 else os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    if FORK_SERVER_FLAG in sys.argv:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kit ends it, by end of file
        serve_forks(sys.argv[1], int(sys.argv[sys.argv.index(FORK_SERVER_FLAG) + 1]))
    else:
        _serve_worker(_target(sys.argv[1]))
