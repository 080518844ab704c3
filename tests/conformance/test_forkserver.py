"""Workers forked from the run's fork server behave as workers started afresh."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.backends.stdio.messages import Append
from checkpointspec.conformance.engines.processes.client import (
    Opened,
    Succeeded,
    WorkerClient,
    WorkerExited,
    hello,
    marker_prompts,
)
from checkpointspec.conformance.engines.processes.forkserver import (
    FORK_SERVER_SETTING,
    MOST_FORK_SERVERS,
    ForkedWorker,
)
from checkpointspec.conformance.engines.processes.groups import group_members
from helpers import run


async def _started(backend: str, stderr: object) -> WorkerClient:
    assert hasattr(stderr, "fileno")
    return await WorkerClient.start(BackendTarget.named(backend), stderr)  # type: ignore[arg-type]


def test_a_worker_is_forked_and_answers_as_any_worker(tmp_path: Path) -> None:
    async def scenario() -> tuple[object, object, int | None]:
        with tempfile.TemporaryFile() as stderr:
            worker = await _started("sqlite", stderr)
            opened = await worker.call(hello(str(tmp_path)))
            appended = await worker.call(
                Append(id=0, session_id="s", events=marker_prompts(["a", "b"]))
            )
            assert isinstance(worker.process, ForkedWorker)
            return opened, appended, await worker.close()

    opened, appended, status = run(scenario())
    assert isinstance(opened, Opened)
    assert appended == Succeeded(2)
    assert status == 0


def test_a_killed_forked_worker_is_reported_killed_to_every_waiter(tmp_path: Path) -> None:
    # A reply meeting end of file and the kill both wait for the exit at once.
    async def scenario() -> tuple[int, int, list[int]]:
        with tempfile.TemporaryFile() as stderr:
            worker = await _started("file", stderr)
            await worker.call(hello(str(tmp_path / "store")))
            pending_reply = asyncio.ensure_future(worker.receive())
            await asyncio.sleep(0)  # the reply is waiting on the worker's stdout
            await worker.kill()
            with pytest.raises(WorkerExited):
                await pending_reply
            return (
                await worker.process.wait(),
                worker.process.pid,
                group_members(worker.process.pid),
            )

    status, pid, left = run(scenario())
    assert status == -9
    assert left == [], f"process group {pid} still has members {left}"


def test_a_backend_the_fork_server_cannot_load_is_reported_by_a_fresh_worker() -> None:
    async def scenario() -> WorkerClient:
        with tempfile.TemporaryFile() as stderr:
            worker = await _started("no_such_module_anywhere:make", stderr)
            with pytest.raises(WorkerExited, match="no_such_module_anywhere"):
                await worker.call(hello("/nonexistent"))
            return worker

    worker = run(scenario())
    assert not isinstance(worker.process, ForkedWorker)


def test_the_fork_server_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(FORK_SERVER_SETTING, "0")

    async def scenario() -> WorkerClient:
        with tempfile.TemporaryFile() as stderr:
            worker = await _started("memory", stderr)
            await worker.close()
            return worker

    assert not isinstance(run(scenario()).process, ForkedWorker)


def test_workers_of_one_backend_share_one_fork_server(tmp_path: Path) -> None:
    async def scenario() -> set[int]:
        parents = set()
        with tempfile.TemporaryFile() as stderr:
            for _ in range(3):
                worker = await _started("memory", stderr)
                parents.add(_parent_of(worker.process.pid))
                await worker.close()
        return parents

    parents = run(scenario())
    assert len(parents) == 1
    assert os.getpid() not in parents


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def test_a_process_keeps_a_few_fork_servers_ending_the_least_recently_used() -> None:
    # A fork server per module:function imported: five different ones.
    backends = [
        "memory",
        "file",
        "sqlite",
        "checkpointspec.backends.stdio:make",
        "checkpointspec.backends.file.checkpointer:make",
    ]
    assert len(backends) > MOST_FORK_SERVERS

    async def scenario() -> list[int]:
        servers = []
        with tempfile.TemporaryFile() as stderr:
            for backend in backends:
                worker = await _started(backend, stderr)
                servers.append(_parent_of(worker.process.pid))
                await worker.close()
        return servers

    servers = run(scenario())
    # Started one after another, the first is the least recently used: it has ended.
    assert not Path(f"/proc/{servers[0]}").exists() or _state(servers[0]) in "ZX"
    assert all(Path(f"/proc/{pid}").exists() for pid in servers[1:])


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]
