"""The group-commit queue the database backends share (backends/group_commit.py), on its own:
who commits a lone request, how waiting requests are grouped, and who is answered what."""

from __future__ import annotations

import asyncio

import pytest
from checkpointspec.backends.group_commit import GroupCommitQueue, GroupCommitStats


class Recorder:
    """A commit function that records each group and answers each request with itself
    (or the error a request names), after an await, as a transaction would."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.tasks: list[asyncio.Task[object] | None] = []
        self.release = asyncio.Event()
        self.release.set()

    async def commit(self, group: list[str]) -> list[str | Exception]:
        self.groups.append(list(group))
        self.tasks.append(asyncio.current_task())
        await self.release.wait()
        return [ValueError(request) if request.startswith("bad") else request for request in group]


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_a_lone_caller_commits_its_own_request_without_a_task() -> None:
    async def go() -> None:
        recorder = Recorder()
        queue: GroupCommitQueue[str, str] = GroupCommitQueue(
            recorder.commit, max_group=10, caller_runs_when_idle=True
        )
        assert await queue.submit("a") == "a"
        assert recorder.tasks == [asyncio.current_task()]
        assert queue.stats == GroupCommitStats(rounds=1, requests=1)

    run(go())


def test_requests_arriving_while_a_group_is_in_flight_go_together_next() -> None:
    async def go() -> None:
        recorder = Recorder()
        recorder.release.clear()
        queue: GroupCommitQueue[str, str] = GroupCommitQueue(
            recorder.commit, max_group=10, caller_runs_when_idle=True
        )
        first = asyncio.ensure_future(queue.submit("a"))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(queue.submit(name)) for name in ("b", "c", "d")]
        await asyncio.sleep(0)
        recorder.release.set()
        assert await first == "a"
        assert await asyncio.gather(*rest) == ["b", "c", "d"]
        assert recorder.groups == [["a"], ["b", "c", "d"]]
        await queue.drained()
        assert queue.stats == GroupCommitStats(rounds=2, requests=4)

    run(go())


def test_each_request_gets_its_own_outcome() -> None:
    async def go() -> None:
        recorder = Recorder()
        queue: GroupCommitQueue[str, str] = GroupCommitQueue(recorder.commit, max_group=10)
        results = await asyncio.gather(
            *(queue.submit(name) for name in ("a", "bad-b", "c")), return_exceptions=True
        )
        assert results[0] == "a"
        assert results[2] == "c"
        assert isinstance(results[1], ValueError)
        assert str(results[1]) == "bad-b"

    run(go())


def test_a_failing_commit_answers_every_request_of_its_group() -> None:
    async def go() -> None:
        async def fails(group: list[str]) -> list[str | Exception]:
            raise OSError("the server went away")

        queue: GroupCommitQueue[str, str] = GroupCommitQueue(fails, max_group=10)
        results = await asyncio.gather(
            *(queue.submit(name) for name in "abc"), return_exceptions=True
        )
        assert all(isinstance(result, OSError) for result in results)

    run(go())


def test_one_per_key_and_order_shape_each_group() -> None:
    async def go() -> None:
        recorder = Recorder()
        queue: GroupCommitQueue[str, str] = GroupCommitQueue(
            recorder.commit,
            max_group=2,
            one_per=lambda request: request[0],
            order=lambda request: int(request[1]),
        )
        names = ("s2", "s1", "t1", "u3")
        assert await asyncio.gather(*(queue.submit(name) for name in names)) == list(names)
        # At most one per first letter, at most two per group, sorted by the key.
        assert recorder.groups == [["t1", "s2"], ["s1", "u3"]]

    run(go())


def test_a_cancelled_caller_leaves_the_rest_of_its_group_answered() -> None:
    async def go() -> None:
        recorder = Recorder()
        recorder.release.clear()
        queue: GroupCommitQueue[str, str] = GroupCommitQueue(
            recorder.commit, max_group=10, groups_in_flight=1
        )
        waiting = [asyncio.ensure_future(queue.submit(name)) for name in "abc"]
        await asyncio.sleep(0)
        waiting[1].cancel()
        await asyncio.sleep(0)
        recorder.release.set()
        assert await waiting[0] == "a"
        assert await waiting[2] == "c"
        with pytest.raises(asyncio.CancelledError):
            await waiting[1]
        await queue.drained()
        assert recorder.groups == [["a", "b", "c"]]

    run(go())
