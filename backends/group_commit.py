"""Group commit: one handle's concurrent writes committed together, each with its own answer.

A commit that waits for the disk (an fsync, a server's WAL flush) caps a writer
at a few thousand commits a second, and a round trip per write caps it lower.
`GroupCommitQueue` lets the writes one handle is given while earlier ones are in
flight wait and go together: each group is handed to the backend's ``commit``
function, which writes it in one transaction and returns one outcome per
request, its result or the error that request alone gets. Nothing here knows
SQL: the SQLite and PostgreSQL backends each pass their own ``commit`` and the
grouping rules their semantics need (see `GroupCommitQueue`).

Rules every group keeps, whatever the backend:

* A request's outcome is its own: one request's conflict is never another's.
* A group of waiting requests runs in a task of the queue's own, so a caller
  cancelled while it waits never leaves the others unanswered; a cancelled
  caller's answer is dropped. (Only a caller that commits its request alone,
  with ``caller_runs_when_idle``, runs it in its own task.)
* At most ``groups_in_flight`` groups are in flight; what arrives meanwhile
  waits for the next one.
* `GroupCommitQueue.drained` waits until every request accepted has been
  answered, which is how a handle's ``close`` finishes the writes it accepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

import msgspec

__all__ = ["GroupCommitQueue", "GroupCommitStats"]

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


class GroupCommitStats(msgspec.Struct, frozen=True):
    """How a handle's writes were grouped: ``requests`` writes in ``rounds``.

    A round is one call of the backend's ``commit`` (one transaction, unless the
    backend redoes it without a request that failed part-way);
    ``requests / rounds`` is the group-commit factor.
    """

    rounds: int
    requests: int


class _Waiting(Generic[RequestT, ResultT]):
    """A request waiting for a group, and the future its caller awaits."""

    __slots__ = ("answer", "request")

    def __init__(self, request: RequestT) -> None:
        self.request = request
        self.answer: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()

    def settle(self, outcome: ResultT | Exception) -> None:
        if self.answer.done():  # its caller was cancelled: nobody is waiting
            return
        if isinstance(outcome, Exception):
            self.answer.set_exception(outcome)
        else:
            self.answer.set_result(outcome)


class GroupCommitQueue(Generic[RequestT, ResultT]):
    """Groups one handle's concurrent write requests and commits each group at once.

    ``commit(requests)`` writes a group in one transaction and returns one
    outcome per request, in order: its result, or the `Exception` that request
    raises. An exception raised by ``commit`` itself answers every request of
    the group.

    The grouping rules:

    ``max_group``
        the most requests one group holds (bounds how long it holds locks).
    ``groups_in_flight``
        how many groups may be committing at once (one per connection the
        backend is willing to spend on it).
    ``caller_runs_when_idle``
        when no group is in flight and none waits, the caller commits its
        request as a group of one itself, without a task: a lone writer pays
        nothing for grouping. Off, every group runs in a task of the queue's.
    ``one_per``
        a key of which a group holds at most one request (the session id, when
        each request must be checked against committed state only); the others
        wait for a later group, in arrival order.
    ``order``
        a key a group is sorted by before it is committed (the order locks are
        taken in, the same in every process, so no two groups wait for each
        other in a cycle).
    """

    def __init__(
        self,
        commit: Callable[[list[RequestT]], Awaitable[Sequence[ResultT | Exception]]],
        *,
        max_group: int,
        groups_in_flight: int = 1,
        caller_runs_when_idle: bool = False,
        one_per: Callable[[RequestT], Hashable] | None = None,
        order: Callable[[RequestT], int] | None = None,
    ) -> None:
        self._commit = commit
        self._max_group = max_group
        self._groups_in_flight = groups_in_flight
        self._caller_runs_when_idle = caller_runs_when_idle
        self._one_per = one_per
        self._order = order
        self._waiting: list[_Waiting[RequestT, ResultT]] = []
        self._in_flight = 0
        self._drainers: set[asyncio.Task[None]] = set()  # strong references while they run
        self._idle = asyncio.Event()  # set: no group in flight, none waiting
        self._idle.set()
        self._rounds = 0
        self._requests = 0

    @property
    def stats(self) -> GroupCommitStats:
        """How many groups were committed, for how many requests."""
        return GroupCommitStats(self._rounds, self._requests)

    async def submit(self, request: RequestT) -> ResultT:
        """Commit ``request`` with whatever else is waiting; its result, or raise its error."""
        free = self._in_flight < self._groups_in_flight
        if not (free and self._caller_runs_when_idle and not self._waiting):
            waiting: _Waiting[RequestT, ResultT] = _Waiting(request)
            self._waiting.append(waiting)
            if free:
                self._start_drainer()
            return await waiting.answer
        # The caller's own group of one, awaited here (no task, no hop): what queues
        # up meanwhile goes to a drainer when it ends.
        self._in_flight += 1
        self._idle.clear()
        try:
            (outcome,) = await self._commit([request])
        finally:
            self._count(1)
            self._in_flight -= 1
            self._after_group()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def drained(self) -> None:
        """Wait until every request submitted so far has been committed and answered."""
        await self._idle.wait()

    def _start_drainer(self) -> None:
        self._in_flight += 1
        self._idle.clear()
        task = asyncio.ensure_future(self._drain())
        self._drainers.add(task)
        task.add_done_callback(self._drainers.discard)

    def _after_group(self) -> None:
        """Hand what waits to a new drainer if a slot is free, or become idle."""
        if self._waiting:
            if self._in_flight < self._groups_in_flight:
                self._start_drainer()
        elif self._in_flight == 0:
            self._idle.set()

    async def _drain(self) -> None:
        """Commit the waiting requests, group after group, until none is left."""
        try:
            while self._waiting:
                await self._commit_group(self._take_group())
        finally:
            self._in_flight -= 1
            self._after_group()

    def _take_group(self) -> list[_Waiting[RequestT, ResultT]]:
        """The next group: up to ``max_group`` waiting requests, by the grouping rules."""
        one_per = self._one_per
        if one_per is None:
            group = self._waiting[: self._max_group]
            del self._waiting[: self._max_group]
        else:
            group, rest, keys = [], [], set()
            for waiting in self._waiting:
                key = one_per(waiting.request)
                if len(group) < self._max_group and key not in keys:
                    keys.add(key)
                    group.append(waiting)
                else:
                    rest.append(waiting)
            self._waiting = rest
        order = self._order
        if order is not None:
            group.sort(key=lambda waiting: order(waiting.request))
        return group

    async def _commit_group(self, group: list[_Waiting[RequestT, ResultT]]) -> None:
        outcomes: Sequence[ResultT | Exception]
        try:
            outcomes = await self._commit([waiting.request for waiting in group])
        except Exception as exc:
            outcomes = [exc] * len(group)
        except BaseException:  # cancelled (the loop is shutting down): so are the waiters
            for waiting in group:
                waiting.answer.cancel()
            raise
        finally:
            self._count(len(group))
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.settle(outcome)

    def _count(self, requests: int) -> None:
        self._rounds += 1
        self._requests += requests
