"""Workers forked from a process that has already imported the backend: its import paid once.

Every kill of a worker (KILL-001's commanded machine and holds, READ-003, DUR-002,
the stress run) needs a fresh worker, and a fresh interpreter pays the backend's
imports again: a library that takes 3 s to import made a quick run spend most of
its time importing. So a run starts one *fork server* per backend: the worker
program in its fork-server mode (``python -m
checkpointspec.conformance.engines.processes.worker BACKEND --fork-server FD``,
`checkpointspec.conformance.engines.processes.worker.serve_forks`), which loads the
backend's factory once, then forks a worker on each request. A forked worker is the
same worker: its own session and process group, its stdin, stdout and stderr the
kit's pipes and file, the same protocol, the same exit statuses. This module is the
kit's end and the wire between the two (`FORK_SERVER_FLAG`, `READY`, `PID`, `STATUS`).

The kit's end (`spawn_forked`) hands the fork server four descriptors over a Unix
socket (``SCM_RIGHTS``): the worker's stdin and stdout pipe ends, its stderr file,
and the write end of a *status pipe*. The fork server forks, answers the child's
pid, keeps the status pipe, and when it has reaped the child writes the exit status
there (a negative signal number for a signal, as `asyncio.subprocess.Process` has
it). `ForkedWorker` is the kit's view of the child: the pid, the streams, `wait`
and `returncode`, read from the status pipe in whichever event loop asks.

Where a fork server cannot serve, a worker is started as its own program as before:
a worker run under a tracer (``prefix``) or with an environment of its own, a
backend the fork server could not load (the worker started afresh then reports the
import's error as always), a fork server that died, a system without ``pidfd_open``
(Linux before 5.3), or ``CHECKPOINTSPEC_FORK_SERVER=0`` in the environment — for a
backend that starts threads when imported, which a fork does not carry over.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import struct
import subprocess
import tempfile
import threading
from typing import IO, Final

from ....backends.registry import BackendTarget
from ....backends.stdio.child import end_process

__all__ = [
    "CHECKPOINTER_WORKER",
    "CONTRACT_WORKER",
    "FORK_SERVER_FLAG",
    "FORK_SERVER_SETTING",
    "MOST_FORK_SERVERS",
    "PID",
    "PROGRAMS",
    "READY",
    "STATUS",
    "WORKER_PROGRAM",
    "ForkedWorker",
    "spawn_forked",
]

WORKER_PROGRAM: Final = "checkpointspec.conformance.engines.processes.worker"
"""The worker program's module: ``BackendTarget.argv(WORKER_PROGRAM)`` starts a worker."""

FORK_SERVER_SETTING: Final = "CHECKPOINTSPEC_FORK_SERVER"
"""Set it to ``0`` to start every worker as its own program."""

FORK_SERVER_FLAG: Final = "--fork-server"
"""The worker's argument that makes it a fork server on the socket whose descriptor follows."""

STATUS: Final = struct.Struct("!i")
"""A forked worker's exit status, as the fork server writes it to the worker's status pipe."""
PID: Final = struct.Struct("!q")
"""A forked worker's pid, the fork server's answer to each request."""
READY: Final = b"ready"
"""What the fork server sends once it has loaded the backend."""
CHECKPOINTER_WORKER: Final = b"fork"
"""The request for a checkpointer's worker (`checkpointspec.conformance.engines.processes.worker`)."""
CONTRACT_WORKER: Final = b"contract"
"""The request for a contract's worker (`checkpointspec.conformance.engines.processes.
contract_worker`): its first line of input names the contract, the store and the options."""
PROGRAMS: Final = (CHECKPOINTER_WORKER, CONTRACT_WORKER)
"""The workers a fork server forks, by the request that names each."""
_START_PATIENCE: Final = 300.0
"""Seconds a fork server may take to import the backend: some libraries take long."""


class ForkedWorker:
    """A worker forked by a fork server: what `WorkerClient` uses of a process.

    ``stdin`` and ``stdout`` are the usual asyncio streams; `wait` and `returncode`
    come from the fork server, which alone can reap the child.
    """

    def __init__(
        self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, status: int
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._status_fd = status
        self._returncode: int | None = None
        self._exited: asyncio.Future[None] | None = None
        """Set once the status has come; one for every waiter (a reply that met end of
        file and a kill wait at once), since a descriptor has one reader per loop."""

    @property
    def returncode(self) -> int | None:
        """The exit status once the worker has ended and been reaped; None before."""
        if self._returncode is None:
            self._take_status()
        return self._returncode

    async def wait(self) -> int:
        """Wait until the worker has ended; its exit status."""
        if self.returncode is None:
            if self._exited is None:
                self._exited = asyncio.get_running_loop().create_future()
                self._exited.get_loop().add_reader(self._status_fd, self._take_status)
            await asyncio.shield(self._exited)
        assert self._returncode is not None  # set before _exited is
        return self._returncode

    def _take_status(self) -> None:
        try:
            data = os.read(self._status_fd, STATUS.size)
        except BlockingIOError:
            return
        # End of file without a status: the fork server is gone and cannot say how
        # the worker ended; it was killed with its session or will be.
        self._returncode = STATUS.unpack(data)[0] if len(data) == STATUS.size else -9
        if self._exited is not None:
            self._exited.get_loop().remove_reader(self._status_fd)
            if not self._exited.done():
                self._exited.set_result(None)
        os.close(self._status_fd)


class _ForkServer:
    """The kit's end of one fork server."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.process = subprocess.Popen(
            [*argv, FORK_SERVER_FLAG, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=env,
            start_new_session=True,  # a Ctrl-C at the terminal is the kit's to handle
        )
        theirs.close()
        self.socket = ours
        self.lock = threading.Lock()
        ours.settimeout(_START_PATIENCE)
        try:
            self.ready = ours.recv(len(READY)) == READY
        except OSError:
            self.ready = False
        ours.settimeout(None)
        if not self.ready:
            self.close()

    def fork(self, program: bytes, stdin: int, stdout: int, stderr: int, status: int) -> int:
        """The pid of a new worker running ``program`` (`PROGRAMS`) on these descriptors."""
        with self.lock:
            socket.send_fds(self.socket, [program], [stdin, stdout, stderr, status])
            answer = _receive_exactly(self.socket, PID.size)
        return int(PID.unpack(answer)[0])

    def close(self) -> None:
        self.socket.close()  # the fork server ends at end of file
        end_process(self.process, 5)
        self._stderr.close()


_servers: dict[tuple[int, str], _ForkServer | None] = {}
"""This process's fork servers by (pid, the ``module:function`` they import), the most
recently used last."""
_servers_lock = threading.Lock()

MOST_FORK_SERVERS: Final = 4
"""Fork servers a process keeps at once: a process that checks many backends one after
another (a test session, the pytest plugin) ends the least recently used, whose
workers have long ended, rather than keep an interpreter per backend it ever used."""


def _server_for(target: BackendTarget) -> _ForkServer | None:
    """This process's fork server for ``target``, started on first use; None if it cannot serve."""
    key = (os.getpid(), target.ref.target)  # a pool process of the runner starts its own
    ended: list[_ForkServer] = []
    with _servers_lock:
        if key in _servers:
            _servers[key] = _servers.pop(key)  # the most recently used goes last
        else:
            server: _ForkServer | None = _ForkServer(target.argv(WORKER_PROGRAM), target.env())
            if server is not None and not server.ready:
                server = None
            _servers[key] = server
            while len(_servers) > MOST_FORK_SERVERS:
                oldest = _servers.pop(next(iter(_servers)))
                if oldest is not None:
                    ended.append(oldest)
        chosen = _servers[key]
    for server in ended:
        server.close()
    return chosen


@atexit.register
def _close_servers() -> None:
    with _servers_lock:
        for (pid, _), server in _servers.items():
            if server is not None and pid == os.getpid():
                server.close()
        _servers.clear()


async def spawn_forked(
    target: BackendTarget, stderr: IO[bytes], limit: int, program: bytes = CHECKPOINTER_WORKER
) -> ForkedWorker | None:
    """A worker for ``target`` forked from the run's fork server, or None where a
    fork server cannot serve (see the module's docstring); ``limit`` is its stdout
    reader's line limit, ``program`` which worker it is (`PROGRAMS`)."""
    if program not in PROGRAMS:
        raise ValueError(f"a fork server runs {PROGRAMS}, not {program!r}")
    if os.environ.get(FORK_SERVER_SETTING, "1") == "0" or not hasattr(os, "pidfd_open"):
        return None
    server = _server_for(target)
    if server is None:
        return None
    child_stdin, our_stdin = os.pipe()
    our_stdout, child_stdout = os.pipe()
    our_status, server_status = os.pipe()
    try:
        pid = server.fork(program, child_stdin, child_stdout, stderr.fileno(), server_status)
    except OSError:  # the fork server died (ConnectionError is one): start afresh from now on
        with _servers_lock:
            _servers[(os.getpid(), target.ref.target)] = None
        server.close()
        for fd in (our_stdin, our_stdout, our_status):
            os.close(fd)
        return None
    finally:
        for fd in (child_stdin, child_stdout, server_status):
            os.close(fd)
    os.set_blocking(our_status, False)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(our_stdout, "rb", 0)
    )
    write_protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
    transport, _ = await loop.connect_write_pipe(
        lambda: write_protocol, os.fdopen(our_stdin, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, write_protocol, None, loop)
    return ForkedWorker(pid, writer, reader, our_status)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the fork server ended")
        data += chunk
    return data
