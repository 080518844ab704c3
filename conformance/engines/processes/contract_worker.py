"""Programs of any contract's calls, each in a worker process of its own.

A worker, ``python -m checkpointspec.conformance.engines.processes.contract_worker
BACKEND CONTRACT PATH [--option K=V ...]`` (`BackendTarget.argv`), imports the
backend's factory and the contract (``module:attribute``), opens the store in
``PATH`` (the factory's object adapted by the contract) and says ``ready`` on stdout.
It then reads its program, one JSON line (`_Orders`: a seccomp filter a tracer asked
for, installed first; calls to make after the kit's ``go`` line, when every worker
has made its first calls), makes the calls one after another and writes one
`Recorded` line per call, unbuffered, with the times read just before and after it
from the clock all processes share (``CLOCK_MONOTONIC``); so a worker that dies
loses at most the call in flight, which the history then has with no answer. Each worker is its own
process group, killed whole when the kit is done with it or gives up on it.

`ContractWorker` is the kit's end of one worker (the crash checks hold and kill
one, `checkpointspec.conformance.engines.crash.contract_kills`);
`run_programs_in_processes` runs several at once for the history checker.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import IO, Final, Protocol, TypeVar, cast

import msgspec

from ....backends.registry import BackendTarget, import_object
from ..contract.contract import Call, Contract
from ..history.linearizable import Recorded
from ..target.provenance import blame_backend
from .contract_programs import record_calls
from .filters import install_call_filter
from .forkserver import CONTRACT_WORKER, spawn_forked
from .groups import kill_group

__all__ = [
    "ContractWorker",
    "WorkerGaveNoAnswer",
    "load_contract",
    "open_contract_store",
    "read_back",
    "run_programs_in_processes",
    "serve_contract_worker",
]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)

READY = b"ready\n"
_encode = msgspec.json.Encoder().encode
_recorded = msgspec.json.Decoder(Recorded)


class _Orders(msgspec.Struct, frozen=True):
    """A worker's program line: the calls to make; the calls to make ``then``, once the
    kit says go (a line on stdin) after every worker made its first calls; and, from a
    tracer that asked for one, the seccomp filter to install on itself before the
    first call (`checkpointspec.conformance.engines.processes.filters`)."""

    calls: tuple[Call, ...]
    call_filter: bytes | None = None
    then: tuple[Call, ...] = ()


GO: Final = b"go\n"
"""The kit's line that starts every worker's ``then`` calls at once."""


_orders = msgspec.json.Decoder(_Orders)


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


async def open_contract_store(
    contract: Contract[Store, State], target: BackendTarget, path: Path
) -> Store:
    """The store in ``path``, opened in this process through ``target``'s factory
    (sync or async) and adapted by ``contract``. What the factory or the adapted
    store raises is the backend's (a store a killed writer left that no longer
    opens is evidence, not a kit error)."""
    factory = target.factory()
    try:
        return await contract.open_store(factory, target.context(path))
    except Exception as exc:
        blame_backend(exc, f"opening the store in {path}")
        raise


class _Process(Protocol):
    """What a worker is to the kit, started afresh or forked (`ForkedWorker`)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...

    @property
    def stdout(self) -> asyncio.StreamReader | None: ...

    async def wait(self) -> int: ...


class _Header(msgspec.Struct, frozen=True):
    """A forked worker's first line of input: what a worker started afresh has in its argv."""

    contract: str
    path: str
    options: dict[str, str]


_LINE_LIMIT: Final = 2**24
"""The longest line a worker may write: one call recorded with its whole answer."""


class ContractWorker:
    """The kit's end of one worker process: `start` (returns once its store is open),
    `send` its program, `records` of its calls, `kill`.

    A worker is forked from the run's fork server for the backend where one can serve
    (`checkpointspec.conformance.engines.processes.forkserver`: the backend's imports
    paid once, not once per kill), else started afresh: under a tracer's ``prefix``
    or with an environment of its own it always is."""

    def __init__(self, number: int, process: _Process, stderr: IO[bytes]) -> None:
        self.number = number
        self.process = process
        self.stderr = stderr
        self.program: tuple[Call, ...] = ()
        self.transcript = bytearray()
        """Every line the worker wrote to the kit, as written (a trace places them)."""
        self._first_taken = 0
        """Recorded calls `first_records` has handed out already."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def start(
        cls,
        number: int,
        contract: str,
        target: BackendTarget,
        path: Path,
        *,
        env: Mapping[str, str] | None = None,
        deadline: float = 60.0,
        prefix: Sequence[str] = (),
    ) -> ContractWorker:
        """Start worker ``number`` on the store in ``path`` (under the command
        ``prefix``, a tracer's, when given; in ``env``, else the target's);
        `WorkerGaveNoAnswer` if it is not open within ``deadline`` seconds."""
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the worker's for its lifetime
        process: _Process | None = None
        if not prefix and env is None:
            process = await spawn_forked(target, stderr, _LINE_LIMIT, CONTRACT_WORKER)
            if process is not None:
                assert process.stdin is not None
                header = _Header(contract, str(path), dict(target.options))
                process.stdin.write(_encode(header) + b"\n")
        if process is None:
            command = [*prefix, *target.argv(__name__), contract, str(path)]
            for key, value in target.options.items():
                command += ["--option", f"{key}={value}"]
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                env=dict(env) if env is not None else target.env(),
                limit=_LINE_LIMIT,
            )
        worker = cls(number, process, stderr)
        assert process.stdout is not None
        try:
            ready = await asyncio.wait_for(process.stdout.readline(), deadline)
        except TimeoutError:
            ready = b""
        if ready != READY:
            await worker.kill()
            why = "did not open its store" if ready else "exited before its store was open"
            raise WorkerGaveNoAnswer(number, why, worker.stderr_text())
        worker.transcript += ready
        return worker

    def stderr_text(self) -> str:
        """What the worker wrote to its stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    async def send(
        self,
        program: Sequence[Call],
        *,
        call_filter: bytes | None = None,
        then: Sequence[Call] = (),
    ) -> None:
        """Give the worker its program: it starts making the calls at once (first
        installing ``call_filter`` on itself, when given: a tracer's
        `checkpointspec.conformance.engines.crash.stopper.store_call_filter`), and
        makes the ``then`` calls after them once told to `go`."""
        self.program = (*program, *then)
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(_encode(_Orders(tuple(program), call_filter, tuple(then))) + b"\n")
        await stdin.drain()
        if not then:
            stdin.close()

    async def first_records(self, count: int, deadline: float = 60.0) -> list[Recorded]:
        """The worker's first ``count`` recorded calls, as it makes them (fewer if it
        exits first or ``deadline`` passes); `records` then gives the rest."""
        stdout = self.process.stdout
        assert stdout is not None
        got: list[Recorded] = []

        async def read() -> None:
            while len(got) < count and (line := await stdout.readline()):
                self.transcript += line
                with contextlib.suppress(msgspec.DecodeError):
                    got.append(msgspec.structs.replace(_recorded.decode(line), process=self.number))

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(read(), deadline)
        self._first_taken += len(got)
        return got

    def go(self) -> None:
        """Start the worker's ``then`` calls (written at once; see `send`)."""
        stdin = self.process.stdin
        assert stdin is not None
        with contextlib.suppress(ConnectionError):
            stdin.write(GO)
            stdin.close()

    async def records(self, deadline: float = 60.0) -> list[Recorded]:
        """Every call the worker recorded, until it exits (or ``deadline`` passes, when
        it is killed), after those `first_records` gave; the call it was making when it
        ended, with no answer."""
        stdout = self.process.stdout
        assert stdout is not None
        got: list[Recorded] = []

        async def read() -> None:
            while line := await stdout.readline():
                self.transcript += line
                with contextlib.suppress(msgspec.DecodeError):  # a line cut by a kill
                    got.append(msgspec.structs.replace(_recorded.decode(line), process=self.number))

        try:
            await asyncio.wait_for(read(), deadline)
        except TimeoutError:
            await self.kill()
        made = self._first_taken + len(got)
        if made < len(self.program):
            got.append(Recorded(self.number, self.program[made], time.monotonic()))
        return got

    async def kill(self) -> None:
        """Kill the worker's process group, and wait for it."""
        if self.process.returncode is None:
            kill_group(self.process.pid)
        await self.process.wait()


async def run_programs_in_processes(
    contract: str,
    target: BackendTarget,
    path: Path,
    programs: Sequence[Sequence[Call]],
    *,
    then: Sequence[Sequence[Call]] | None = None,
    env: Mapping[str, str] | None = None,
    deadline: float = 60.0,
) -> list[Recorded]:
    """Run each of ``programs`` in a worker of its own on the store in ``path``, all
    at once: each is given its program only when every one is open. With ``then``
    (one more program per worker), each worker makes those calls only once every
    worker has made its first ones, all told to go at the same moment: every read
    of the first programs comes before any call of the second, which then race.
    Returns every call recorded, a call never answered with no answer."""
    workers: list[ContractWorker] = []
    seconds = then if then is not None else [() for _ in programs]
    try:
        for number, _ in enumerate(programs):
            workers.append(
                await ContractWorker.start(
                    number, contract, target, path, env=env, deadline=deadline
                )
            )
        for worker, program, second in zip(workers, programs, seconds, strict=True):
            await worker.send(program, then=second)
        first: list[list[Recorded]] = [[] for _ in workers]
        if then is not None:
            first = list(
                await asyncio.gather(
                    *(
                        w.first_records(len(p), deadline)
                        for w, p in zip(workers, programs, strict=True)
                    )
                )
            )
            for worker in workers:
                worker.go()
        histories = await asyncio.gather(*(worker.records(deadline) for worker in workers))
        return [recorded for each in (*first, *histories) for recorded in each]
    finally:
        for worker in workers:
            await worker.kill()


async def _serve(target: BackendTarget, contract_ref: str, path: str) -> None:
    contract = load_contract(contract_ref)
    store = await open_contract_store(contract, target, Path(path))
    out = sys.stdout.buffer
    out.write(READY)
    out.flush()
    orders = _orders.decode(sys.stdin.buffer.readline())
    if orders.call_filter is not None:
        install_call_filter(orders.call_filter)
    program = orders.calls

    def write(recorded: Recorded) -> None:
        out.write(_encode(recorded) + b"\n")
        out.flush()

    try:
        await record_calls(contract, store, program, 0, write)  # the parent numbers its workers
        if orders.then and sys.stdin.buffer.readline() == GO:
            await record_calls(contract, store, orders.then, 0, write)
    finally:
        await contract.close(store)


async def read_back(
    contract: Contract[Store, State],
    target: BackendTarget,
    path: Path,
    reads: Sequence[Call],
    process: int,
) -> list[Recorded]:
    """Open the store in ``path`` in this process and make ``reads`` (recorded as the
    calls of ``process``): what the crash checks see of what a crash left."""
    store = await open_contract_store(contract, target, path)
    try:
        return await record_calls(contract, store, reads, process)
    finally:
        await contract.close(store)


def serve_contract_worker(target: BackendTarget) -> None:
    """Be a contract's worker forked by the fork server of ``target`` (its factory
    loaded): the first line of input names the contract, the store and the options
    (`_Header`); then as a worker started afresh."""
    header = msgspec.json.decode(sys.stdin.buffer.readline(), type=_Header)
    opened = BackendTarget(target.ref, header.options)
    asyncio.run(_serve(opened, header.contract, header.path))


def _main(argv: list[str]) -> None:
    backend, contract, path, *rest = argv
    flags, pairs = rest[::2], rest[1::2]
    options = dict(
        pair.split("=", 1) for flag, pair in zip(flags, pairs, strict=True) if flag == "--option"
    )
    asyncio.run(_serve(BackendTarget.named(backend, options), contract, path))


if __name__ == "__main__":
    _main(sys.argv[1:])
