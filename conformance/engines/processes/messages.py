"""The kit's extension of the stdio protocol: the requests only its own workers answer.

A worker (`checkpointspec.conformance.engines.processes.worker`) is the stdio
server (`checkpointspec.backends.stdio.serve.Server`) with these requests added;
`WorkerClient` (`checkpointspec.conformance.engines.processes.client`) sends them.
They never reach a backend, so the protocol's published schema and
docs/stdio-protocol.md leave them out; docs/kit.md ("Worker processes and their
protocol") describes them. On the wire they are requests like the protocol's own:
an ``op`` tag and an ``id`` their replies repeat, one JSON object per line.
"""

from __future__ import annotations

import msgspec

__all__ = ["Acked", "AppendBatches", "KitReply", "KitRequest", "PauseAt", "Stress"]


class _KitRequest(msgspec.Struct, frozen=True, tag_field="op", forbid_unknown_fields=True):
    id: int


class PauseAt(_KitRequest, frozen=True, tag="pause_at"):
    """Pause the next request at fault point ``point`` on its ``arrival``-th arrival
    there: send a ``fault`` reply and wait for ``resume``, holding whatever the
    backend holds at that point (locks, open transactions). The result is null; a
    request that never reaches the point just finishes."""

    point: str
    arrival: int = 1


class AppendBatches(_KitRequest, frozen=True, tag="append_batches"):
    """Append ``batches`` batches of ``size`` user prompts whose texts are
    ``WRITER:BATCH:INDEX``, sending a `KitReply` with ``acked`` as each is acknowledged;
    with ``expect_head`` each append passes the head just read and is retried after a
    conflict, up to ``conflicts`` conflicts in all (None: no limit): the one after
    them is the request's error reply. The result is null."""

    session_id: str
    writer: str
    batches: int
    size: int
    expect_head: bool = False
    conflicts: int | None = None


class Stress(_KitRequest, frozen=True, tag="stress"):
    """Run worker ``number``'s share of the free-running workload: random calls on
    ``sessions`` (truncates with ``truncate``, deletes with ``delete``) until ``calls``
    calls are made or ``seconds`` have passed, each recorded before and after in the
    file ``history``, and a `KitReply` with ``progress`` after each. The result is
    null."""

    number: int
    history: str
    calls: int
    seconds: float
    sessions: tuple[str, ...]
    truncate: bool = False
    delete: bool = False
    seed: int = 0


KitRequest = PauseAt | AppendBatches | Stress


class Acked(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Batch ``batch`` of an `AppendBatches` was acknowledged at ``head`` (it passed
    ``expected_head``)."""

    batch: int
    head: int
    expected_head: int | None = None


class KitReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An interim reply of a kit request: ``id`` and exactly one of ``acked``
    (`AppendBatches`) or ``progress`` (`Stress`: calls made so far)."""

    id: int
    acked: Acked | None = None
    progress: int | None = None
