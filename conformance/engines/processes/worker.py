"""The worker process: one handle on a store, serving the commands of the worker protocol.

Run as ``python -m checkpointspec.conformance.engines.processes.worker BACKEND`` (what
`checkpointspec.conformance.engines.processes.client.WorkerClient` starts). The
commands, replies and rules of the conversation are described in
`checkpointspec.conformance.engines.processes.client`; this module only carries them
out. It loads the backend's factory at start, so a worker that cannot import the
backend exits before its first reply.

Commands are read and answered one at a time. The exception is a pause: the
fault hook, called on whichever thread the backend works on, sends `Paused` and
reads the `Resume` from stdin itself, holding the backend exactly where it is.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import IO, BinaryIO

from ....backends.registry import resolve_backend
from ....spec import (
    BackendContext,
    CheckpointConflictError,
    Checkpointer,
    CheckpointError,
    FaultInjectable,
    MaintenanceLockable,
    UnsupportedOperationError,
    UserPrompt,
)
from ..provenance import open_checkpointer
from .client import (
    Acked,
    Acquire,
    Append,
    AppendBatches,
    Close,
    Command,
    Delete,
    Failed,
    Head,
    Ok,
    Open,
    Opened,
    Paused,
    Progress,
    Read,
    Release,
    Reply,
    Resume,
    Stress,
    Truncate,
    decode_command,
    encode,
)
from .stress import run_workload

__all__: list[str] = []


class _Server:
    """One handle and the commands that drive it; replies go out one line at a time."""

    def __init__(self, backend: str, commands: BinaryIO, replies: BinaryIO) -> None:
        self.factory = resolve_backend(backend).load()
        self.commands = commands
        self.replies = replies
        self.lock = threading.Lock()
        self.cp: Checkpointer | None = None
        self.pause_at: str | None = None
        self.pause_on = 1
        self.arrivals = 0

    def send(self, reply: Reply) -> None:
        with self.lock:
            self.replies.write(encode(reply) + b"\n")
            self.replies.flush()

    def hook(self, point: str) -> None:
        # Runs on whichever thread the backend works on; blocking it holds the
        # operation exactly here until the parent says resume (or kills us).
        if point != self.pause_at:
            return
        self.arrivals += 1
        if self.arrivals < self.pause_on:
            return
        self.pause_at = None
        self.send(Paused(point))
        line = self.commands.readline()
        if not line or not isinstance(decode_command(line), Resume):
            os._exit(3)  # anything but resume, or the parent is gone: stop here, as if killed

    async def open(self, command: Open) -> Reply:
        if self.cp is not None:
            await self.cp.close()
            self.cp = None
        ctx = BackendContext(path=Path(command.path), options=dict(command.options))
        try:
            cp = await open_checkpointer(self.factory, ctx)
        except Exception as exc:  # the factory is the backend's code: report, don't die
            return Failed(type(exc).__name__, f"opening through the factory: {exc}")
        self.cp = cp
        if not isinstance(cp, FaultInjectable):
            return Opened()
        cp.set_fault_hook(self.hook)
        return Opened(tuple(cp.fault_points))

    async def call(self, cp: Checkpointer, command: Command) -> Reply:
        """One call of the contract, paused on the way if the command says so."""
        self.pause_at, self.pause_on, self.arrivals = None, 1, 0
        if isinstance(command, Append | Truncate | Delete):
            self.pause_at, self.pause_on = command.pause_at, command.pause_on
        if isinstance(command, Append):
            events = [UserPrompt(marker) for marker in command.markers]
            return Ok(await cp.append(command.session, events, command.expected_head))
        if isinstance(command, Truncate):
            return Ok(await cp.truncate(command.session, command.to_seq, command.expected_head))
        if isinstance(command, Delete):
            await cp.delete(command.session)
            return Ok()
        if isinstance(command, Read):
            stored = cp.read(command.session, command.since_seq)
            return Ok([(s.seq, getattr(s.event, "text", "")) async for s in stored])
        if isinstance(command, Head):
            return Ok(await cp.head(command.session))
        if isinstance(command, Acquire | Release):
            return await self.maintenance(cp, command)
        return Failed("UsageError", f"{command!r} cannot be run now")

    async def maintenance(self, cp: Checkpointer, command: Acquire | Release) -> Reply:
        """Take or give back the maintenance lock; the lock lives as long as this handle."""
        if not isinstance(cp, MaintenanceLockable):
            raise UnsupportedOperationError("acquire_maintenance", "maintenance")
        if isinstance(command, Acquire):
            await cp.acquire_maintenance(command.session)
        else:
            await cp.release_maintenance(command.session)
        return Ok()

    async def append_batches(self, cp: Checkpointer, command: AppendBatches) -> Reply:
        for batch in range(command.batches):
            events = [UserPrompt(f"{command.writer}:{batch}:{i}") for i in range(command.size)]
            while True:
                want = await cp.head(command.session) if command.expect_head else None
                try:
                    head = await cp.append(command.session, events, want)
                except CheckpointConflictError:
                    continue  # another writer got there first: read the head again
                self.send(Acked(batch, head, want))
                break
        return Ok()

    async def stress(self, cp: Checkpointer, command: Stress) -> Reply:
        with _history_file(command.history) as record:
            await run_workload(cp, command, record, lambda calls: self.send(Progress(calls)))
        return Ok()

    async def run(self, command: Command) -> Reply:
        if isinstance(command, Open):
            return await self.open(command)
        cp = self.cp
        if isinstance(command, Close):
            self.cp = None
            if cp is not None:
                await cp.close()
            return Ok()
        if cp is None:
            return Failed("UsageError", "no store open: send Open first")
        if isinstance(command, AppendBatches):
            return await self.append_batches(cp, command)
        if isinstance(command, Stress):
            return await self.stress(cp, command)
        return await self.call(cp, command)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, self.commands.readline):
            try:
                reply = await self.run(decode_command(line))
            except CheckpointConflictError as conflict:
                reply = Failed(
                    "CheckpointConflictError", str(conflict), conflict.expected, conflict.actual
                )
            except CheckpointError as error:
                reply = Failed(type(error).__name__, str(error))
            self.send(reply)
        if self.cp is not None:
            await self.cp.close()


def _history_file(path: str) -> IO[bytes]:
    """Unbuffered: each line is in the file before the next call starts, so a kill
    loses at most the line being written."""
    return Path(path).open("wb", buffering=0)


def _main(backend: str) -> None:
    # The replies get a descriptor of their own; whatever the backend prints to
    # stdout goes to stderr instead of into the replies. os.dup's descriptor is
    # not inherited, so processes the backend starts cannot hold the pipe open.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    asyncio.run(_Server(backend, sys.stdin.buffer, replies).serve())


if __name__ == "__main__":
    _main(sys.argv[1])
