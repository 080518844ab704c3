"""Commanded workers: long-lived processes, each with its own handle, driven over pipes.

The parent sends one JSON command per line on the worker's stdin and reads one
JSON reply per line from its stdout. A command may ask the worker to pause at a
named fault point of the operation (`FaultInjectable`): the worker then reports
``paused`` and blocks inside the backend — holding whatever the backend holds
there, locks and open transactions included — until it is told to resume or is
killed. That makes interleavings across processes a choice the parent makes, so
a state machine can choose them and shrink them.

Run a worker as ``python -m checkpointspec.conformance.engines.commanded BACKEND``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Literal

import msgspec

from ...spec import (
    CheckpointConflictError,
    Checkpointer,
    CheckpointError,
    FaultInjectable,
    UserPrompt,
)
from .loading import open_checkpointer, resolve_backend
from .workers import worker_context, worker_env

__all__ = ["Command", "Reply", "WorkerClient", "WorkerHung"]

Operation = Literal["open", "append", "read", "head", "truncate", "delete", "resume", "close"]


class Command(msgspec.Struct, frozen=True, omit_defaults=True):
    """One request to a worker. ``markers`` become one UserPrompt each (append)."""

    op: Operation
    path: str = ""
    session: str = ""
    markers: tuple[str, ...] = ()
    expected_head: int | None = None
    since_seq: int = 0
    to_seq: int = 0
    pause_at: str | None = None
    pause_on: int = 1
    """Pause on this arrival at ``pause_at`` (a batch may pass a point several times)."""


class Reply(msgspec.Struct, frozen=True, omit_defaults=True):
    """A worker's answer: ``paused`` at a fault point, ``ok`` with a value, or ``error``.

    ``value`` is the new head (append, truncate, head), or for read the
    (seq, marker) pairs; ``fault_points`` answers ``open``.
    """

    status: Literal["ok", "error", "paused"]
    value: int | list[tuple[int, str]] | None = None
    error: str = ""
    message: str = ""
    expected: int | None = None
    actual: int | None = None
    point: str = ""
    fault_points: tuple[str, ...] = ()


class WorkerHung(Exception):
    """A worker did not answer in time: it is blocked, most likely on something a
    killed process still holds."""


_decode_command = msgspec.json.Decoder(Command).decode
_decode_reply = msgspec.json.Decoder(Reply).decode
_encode = msgspec.json.Encoder().encode


class WorkerClient:
    """The parent's end of one worker process."""

    def __init__(
        self, backend_target: str, options: dict[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.timeout = timeout
        self.process = subprocess.Popen(
            [sys.executable, "-m", "checkpointspec.conformance.engines.commanded", backend_target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=worker_env(options),
        )

    def send(self, command: Command) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(_encode(command) + b"\n")
        self.process.stdin.flush()

    def receive(self) -> Reply:
        """The next reply; `WorkerHung` if none arrives within the timeout."""
        stdout = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], self.timeout)
        if not ready:
            raise WorkerHung(f"no answer within {self.timeout:.0f}s")
        line = stdout.readline()
        if not line:
            raise WorkerHung(f"the worker exited (status {self.process.poll()})")
        return _decode_reply(line)

    def call(self, command: Command) -> Reply:
        self.send(command)
        return self.receive()

    def kill(self) -> None:
        """SIGKILL: no cleanup runs in the worker, whatever it was doing."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        """Close the worker's handle, then end the process (stdin EOF ends its loop)."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError, WorkerHung):
                self.call(Command("close"))
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=self.timeout)
        self.kill()


# -- the worker side ------------------------------------------------------------


class _Worker:
    def __init__(self, backend: str) -> None:
        self.factory = resolve_backend(backend).load()
        self.cp: Checkpointer | None = None
        self.pause_at: str | None = None
        self.pause_on = 1
        self.arrivals = 0
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()

    def reply(self, reply: Reply) -> None:
        with self.lock:
            self.out.write(_encode(reply) + b"\n")
            self.out.flush()

    def hook(self, point: str) -> None:
        # Runs on whichever thread the backend works on; blocking it holds the
        # operation exactly here until the parent says resume (or kills us).
        if point != self.pause_at:
            return
        self.arrivals += 1
        if self.arrivals < self.pause_on:
            return
        self.pause_at = None
        self.reply(Reply("paused", point=point))
        command = _decode_command(sys.stdin.buffer.readline())
        if command.op != "resume":
            os._exit(3)

    async def run(self, command: Command) -> Reply:
        if command.op == "open":
            if self.cp is not None:
                await self.cp.close()
            self.cp = await open_checkpointer(self.factory, worker_context(Path(command.path)))
            points: tuple[str, ...] = ()
            if isinstance(self.cp, FaultInjectable):
                self.cp.set_fault_hook(self.hook)
                points = tuple(self.cp.fault_points)
            return Reply("ok", fault_points=points)
        cp = self.cp
        if cp is None:
            return (
                Reply("ok")
                if command.op == "close"
                else Reply("error", error="UsageError", message="no store open")
            )
        self.pause_at = command.pause_at
        self.pause_on = command.pause_on
        self.arrivals = 0
        sid = command.session
        match command.op:
            case "append":
                events = [UserPrompt(m) for m in command.markers]
                return Reply("ok", value=await cp.append(sid, events, command.expected_head))
            case "read":
                pairs = [
                    (s.seq, getattr(s.event, "text", ""))
                    async for s in cp.read(sid, command.since_seq)
                ]
                return Reply("ok", value=pairs)
            case "head":
                return Reply("ok", value=await cp.head(sid))
            case "truncate":
                return Reply(
                    "ok", value=await cp.truncate(sid, command.to_seq, command.expected_head)
                )
            case "delete":
                await cp.delete(sid)
                return Reply("ok")
            case "close":
                await cp.close()
                self.cp = None
                return Reply("ok")
        return Reply("error", error="UsageError", message=f"unknown command {command.op!r}")

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.buffer.readline)
            if not line:
                return
            command = _decode_command(line)
            try:
                reply = await self.run(command)
            except CheckpointConflictError as conflict:
                reply = Reply(
                    "error",
                    error="CheckpointConflictError",
                    message=str(conflict),
                    expected=conflict.expected,
                    actual=conflict.actual,
                )
            except CheckpointError as error:
                reply = Reply("error", error=type(error).__name__, message=str(error))
            self.reply(reply)


if __name__ == "__main__":
    asyncio.run(_Worker(sys.argv[1]).serve())
