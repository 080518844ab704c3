"""Concurrent programs of any contract's calls, each in a process of its own.

`run_programs_in_processes` starts one worker per program,
``python -m checkpointspec.conformance.engines.processes.contract_worker CONTRACT
BACKEND PATH``, which imports the contract (``module:attribute``) and the backend's
factory, opens the store in ``PATH`` (the factory's object adapted by the
contract), and says so on stdout. Once every worker is open the parent sends each
its program, one JSON line; the worker makes the calls one after another and
writes one `Recorded` line per call, unbuffered, with the times read just before
and after it from the clock all processes share (``CLOCK_MONOTONIC``), so a
worker that dies loses at most the call in flight, which the history then has
with no answer. Each worker is its own process group, killed whole when the
parent gives up on it (``deadline``) or is done.

The parent judges the gathered history like one of tasks in one process
(`contract_programs.judge_history`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, cast

import msgspec

from ....backends.registry import import_object, load_factory
from ....spec import BackendContext
from ..contract.contract import Call, Contract
from ..history.linearizable import Recorded
from .groups import kill_group

__all__ = ["WorkerGaveNoAnswer", "load_contract", "run_programs_in_processes"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)

READY = b"ready\n"
_encode = msgspec.json.Encoder().encode
_recorded = msgspec.json.Decoder(Recorded)
_program = msgspec.json.Decoder(tuple[Call, ...])


class WorkerGaveNoAnswer(Exception):
    """A worker did not open its store within the deadline, or exited before it was
    open: ``stderr`` is what it wrote."""

    def __init__(self, process: int, why: str, stderr: str) -> None:
        super().__init__(f"worker {process} {why}; its stderr:\n{stderr[-2000:]}")
        self.process, self.why, self.stderr = process, why, stderr


def load_contract(reference: str) -> Contract[object, Hashable]:
    """The contract named ``module:attribute``; TypeError when it names something else."""
    found = import_object(reference)
    if not isinstance(found, Contract):
        raise TypeError(f"{reference} is a {type(found).__name__}, not a Contract")
    return cast("Contract[object, Hashable]", found)


async def _read_lines(stream: asyncio.StreamReader, number: int, into: list[Recorded]) -> None:
    while line := await stream.readline():
        with contextlib.suppress(msgspec.DecodeError):  # a line cut by a kill
            into.append(msgspec.structs.replace(_recorded.decode(line), process=number))


async def run_programs_in_processes(
    contract: str,
    backend: str,
    path: Path,
    programs: Sequence[Sequence[Call]],
    *,
    options: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    deadline: float = 60.0,
) -> list[Recorded]:
    """Run each of ``programs`` in a worker process of its own on the store in
    ``path``, all at once (see the module), and return every call recorded. A call
    a worker made and never answered (it died, or the deadline passed) is in the
    history with no answer."""
    command = [sys.executable, "-m", __name__, contract, backend, str(path)]
    for key, value in (options or {}).items():
        command += ["--option", f"{key}={value}"]
    workers: list[asyncio.subprocess.Process] = []
    try:
        for _ in programs:
            workers.append(
                await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                    env=dict(env) if env is not None else None,
                )
            )
        for number, worker in enumerate(workers):
            assert worker.stdout is not None
            assert worker.stderr is not None
            try:
                ready = await asyncio.wait_for(worker.stdout.readline(), deadline)
            except TimeoutError:
                ready = b""
            if ready != READY:
                kill_group(worker.pid)
                stderr = (await worker.stderr.read()).decode(errors="replace")
                why = "did not open its store" if ready else "exited before its store was open"
                raise WorkerGaveNoAnswer(number, why, stderr)
        histories: list[list[Recorded]] = [[] for _ in workers]
        for worker, program in zip(workers, programs, strict=True):
            assert worker.stdin is not None
            worker.stdin.write(_encode(tuple(program)) + b"\n")
            await worker.stdin.drain()
            worker.stdin.close()
        readers = [
            _read_lines(worker.stdout, number, into)
            for number, (worker, into) in enumerate(zip(workers, histories, strict=True))
            if worker.stdout is not None
        ]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*readers), deadline)
        history = [recorded for one in histories for recorded in one]
        for number, (one, program) in enumerate(zip(histories, programs, strict=True)):
            if len(one) < len(program):  # the call in flight when it died or was given up on
                history.append(Recorded(number, program[len(one)], time.monotonic()))
        return history
    finally:
        for worker in workers:
            if worker.returncode is None:
                kill_group(worker.pid)
            await worker.wait()


async def _serve(contract_ref: str, backend: str, path: str, options: dict[str, str]) -> None:
    contract = load_contract(contract_ref)
    made = load_factory(backend)(BackendContext(path=Path(path), options=options))
    store = await contract.store_of(await made if asyncio.iscoroutine(made) else made)
    out = sys.stdout.buffer
    out.write(READY)
    out.flush()
    program = _program.decode(sys.stdin.buffer.readline())
    process = 0  # the parent numbers its workers
    try:
        for call in program:
            invoked = time.monotonic()
            got = await contract.answer(store, call)
            completed = time.monotonic()
            if isinstance(got, BaseException):
                said = f"{type(got).__name__}: {got}"
                recorded = Recorded(process, call, invoked, completed, None, said)
            else:
                recorded = Recorded(process, call, invoked, completed, got)
            out.write(_encode(recorded) + b"\n")
            out.flush()
    finally:
        await contract.close(store)


def _main(argv: list[str]) -> None:
    contract, backend, path, *rest = argv
    options = dict(
        pair.split("=", 1)
        for flag, pair in zip(rest[::2], rest[1::2], strict=True)
        if flag == "--option"
    )
    asyncio.run(_serve(contract, backend, path, options))


if __name__ == "__main__":
    _main(sys.argv[1:])
