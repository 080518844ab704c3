"""How the PostgreSQL backend's appends reach the server: alone, or grouped in one transaction.

*Group commit.* Appends a handle is given while two of its transactions are in
flight wait and go together in the next (the queue the database backends
share, `checkpointspec.backends.group_commit`): ``BEGIN``, one call of the
schema's ``append_group`` function, ``COMMIT``, whatever the group's size. Each
append of the group runs in its own subtransaction, so its conflict (or any
error) undoes it alone and is answered to it alone; a group holds at most one
append per session (each is checked against committed state only) and takes
the write locks in key order (no cycle between groups of any processes). One
``COMMIT`` commits the whole group or none of it; a lost ``COMMIT`` is resolved
by the request id of one applied append. A lone append runs on its own, as one
call of the schema's ``append`` function. This is what lets one process's many
writers share round trips and CPU instead of paying three round trips each.

An append that failed inside a group for a reason that is not the contract's
(a transient error) is sent again alone, where it retries or raises the real
error. Connections, retries and error translation are
`checkpointspec.backends.postgres.connections`.
"""

from __future__ import annotations

from typing import Final, NamedTuple, cast

from psycopg import sql

from ..group_commit import GroupCommitQueue
from .connections import CommitAttempt, LostConnection, ServerConnections
from .schema import Conn

__all__ = ["AppendRequest", "Appends"]

_GROUPS_IN_FLIGHT: Final = 2
"""Transactions of appends one handle keeps in flight; appends arriving meanwhile wait."""
_GROUP_MAX: Final = 64
"""Appends per group at most."""


class AppendRequest(NamedTuple):
    """One append, encoded and stamped: the arguments of the schema's ``append`` function,
    in its order (a request is passed to it as is)."""

    session_id: str
    payloads: list[bytes]
    """Stored payloads, after the codec."""
    crcs: list[int]
    """The CRC-32 of each stored payload."""
    ts: str
    """The events' timestamp, ISO 8601."""
    expected_head: int | None
    expected_generation: int | None
    maintenance_key: int | None
    """The session's maintenance-lock key, or None when this handle holds it."""
    write_key: int
    """The session's write-lock key: groups take their locks in this order."""
    request_id: bytes
    """Random, stored on the batch's first row: how a lost ``COMMIT`` is found out."""


_GroupResult = tuple[int | None, str | None, str | None]
"""Per append of a group call: its new head, or the (SQLSTATE, message) of its failure."""


class Appends:
    """One handle's appends: queued, grouped and committed on its ``connections``."""

    def __init__(self, connections: ServerConnections, schema: str) -> None:
        self._connections = connections
        s = sql.Identifier(schema)
        self._sql_append = sql.SQL("SELECT {}.append(%s, %s, %s, %s, %s, %s, %s, %s, %s)").format(s)
        self._sql_group = sql.SQL(
            "SELECT * FROM {}.append_group(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        ).format(s)
        self._queue: GroupCommitQueue[AppendRequest, int] = GroupCommitQueue(
            self._commit,
            max_group=_GROUP_MAX,
            groups_in_flight=_GROUPS_IN_FLIGHT,
            one_per=lambda request: request.session_id,
            order=lambda request: request.write_key,
        )

    async def append(self, request: AppendRequest) -> int:
        """Commit ``request``, alone or in a group; its new head, or raise its own error."""
        return await self._queue.submit(request)

    async def drained(self) -> None:
        """Wait until every append submitted so far has been sent and answered."""
        await self._queue.drained()

    async def _commit(self, group: list[AppendRequest]) -> list[int | Exception]:
        """The group's outcomes, in order; a lone append is sent on its own."""
        if len(group) == 1:
            return [await self._alone(group[0])]
        results = await self._send_group(group)
        outcomes: list[int | Exception] = []
        for request, (head, state, message) in zip(group, results, strict=True):
            if state is None:
                assert head is not None
                outcomes.append(int(head))
                continue
            error = self._connections.translate_state(
                state, message or "", "append", request.session_id
            )
            # Transient or unexpected: alone, it retries or raises the real error.
            outcomes.append(error if error is not None else await self._alone(request))
        return outcomes

    async def _alone(self, request: AppendRequest) -> int | Exception:
        try:
            return await self._send_one(request)
        except Exception as exc:
            return exc

    async def _send_one(self, request: AppendRequest) -> int:
        """One append in its own transaction; after a lost ``COMMIT``, found by its request id."""
        attempt = CommitAttempt()
        connections = self._connections

        async def send(conn: Conn) -> int:
            row = await connections.transact(conn, self._sql_append, request, attempt)
            return int(cast(int, row[0]))

        async def resolve(lost: LostConnection) -> int | None:
            first = await connections.find_request(lost, request.session_id, request.request_id)
            return None if first is None else first + len(request.payloads) - 1

        return await connections.run(
            "append",
            request.session_id,
            send,
            maybe_applied=lambda: attempt.committing,
            resolve=resolve,
        )

    async def _send_group(self, group: list[AppendRequest]) -> list[_GroupResult]:
        """Several appends of distinct sessions in one transaction: per append, its new
        head or the (sqlstate, message) of its own failure, which undid it alone."""
        counts = [len(request.payloads) for request in group]
        payloads = [payload for request in group for payload in request.payloads]
        crcs = [crc for request in group for crc in request.crcs]
        columns = (
            [request.session_id for request in group],
            counts,
            payloads,
            crcs,
            [request.ts for request in group],
            [request.expected_head for request in group],
            [request.expected_generation for request in group],
            [request.maintenance_key for request in group],
            [request.write_key for request in group],
            [request.request_id for request in group],
        )
        attempt = CommitAttempt()
        connections = self._connections

        def results(row: tuple[object, ...]) -> list[_GroupResult]:
            heads, states, messages = cast(
                tuple[list[int | None], list[str | None], list[str | None]], row
            )
            return list(zip(heads, states, messages, strict=True))

        async def send(conn: Conn) -> list[_GroupResult]:
            return results(await connections.transact(conn, self._sql_group, columns, attempt))

        async def resolve(lost: LostConnection) -> list[_GroupResult] | None:
            # The group committed wholly or not at all: one applied append tells.
            answered = results(attempt.row)
            applied = [i for i, (_, state, _) in enumerate(answered) if state is None]
            if not applied:
                return answered  # nothing to commit; each failure stands as answered
            first = group[applied[0]]
            found = await connections.find_request(lost, first.session_id, first.request_id)
            return None if found is None else answered

        return await connections.run(
            "append", None, send, maybe_applied=lambda: attempt.committing, resolve=resolve
        )
