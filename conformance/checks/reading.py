"""Checks of the READ rules: since_seq is exclusive, unknown sessions read empty, a read is a snapshot."""

from __future__ import annotations

import asyncio
import random

from ...backends.stdio.messages import Read
from ...spec import Capability
from ..engines.crash.holds import (
    LOCK_POLL,
    READER_PATIENCE,
    copy_store,
    held_write,
    holds,
    needs_holding,
    opened_worker,
    waits_on_a_lock,
)
from ..engines.crash.verdicts import Call, Expected, plan_workload
from ..engines.harness import Harness, read_all
from ..engines.processes.client import (
    UNSENT,
    Failed,
    Ok,
    WorkerClient,
    WorkerExited,
    WorkerReply,
)
from ..engines.violations import RuleViolation
from ._support import expect
from .base import check

__all__ = ["CHECKS"]


@check("READ-001")
async def since_seq_is_exclusive(h: Harness) -> None:
    """READ-001: read(since_seq) yields exactly seq > since_seq; at or past the head, nothing."""
    cp = await h.open()
    await cp.append("s", [h.prompt(str(i)) for i in range(1, 6)])
    for since in range(8):
        seqs = [s.seq for s in await read_all(cp, "s", since)]
        expect(
            seqs == list(range(since + 1, 6)),
            "READ-001",
            f"read(since_seq={since}) yielded seqs {seqs}",
        )


@check("READ-002", "HEAD-001")
async def unknown_sessions_read_empty(h: Harness) -> None:
    """READ-002: read and head of an unknown session yield nothing / 0 and create nothing."""
    cp = await h.open()
    expect(
        await read_all(cp, "ghost") == [], "READ-002", "read of an unknown session yielded events"
    )
    expect(
        await read_all(cp, "ghost", 3) == [],
        "READ-002",
        "read(since_seq=3) of an unknown session yielded events",
    )
    expect(await cp.head("ghost") == 0, "HEAD-001", "head of an unknown session is not 0")
    if h.has(Capability.LIST):
        listed = [i.id for i in await cp.list_sessions()]
        expect(listed == [], "READ-002", f"reading an unknown session created {listed}")


@check("READ-003", "HANDLE-001")
async def read_is_a_snapshot(h: Harness) -> None:
    """READ-003: a read in progress sees the log before or after a concurrent write, never a mix."""
    reader, writer = await h.open(), await h.open()
    scenarios = ["append", "append through another handle"]
    if h.has(Capability.DELETE):
        scenarios.append("delete")
    if h.has(Capability.TRUNCATE):
        scenarios.append("truncate")
    for scenario in scenarios:
        sid = f"s-{scenario}"
        # Long enough to span pages of a paging backend, and the read has taken 20
        # events before the write: a live (non-snapshot) view then shows a mix.
        before = [h.prompt(f"{scenario} {i}") for i in range(1, 251)]
        await writer.append(sid, before)
        iterator = reader.read(sid).__aiter__()
        taken = [(await iterator.__anext__()).event for _ in range(20)]
        new = h.prompt(f"{scenario} new")
        match scenario:
            case "append":
                await reader.append(sid, [new])
                after = [*before, new]
            case "append through another handle":
                await writer.append(sid, [new])
                after = [*before, new]
            case "truncate":
                await writer.truncate(sid, 10)
                after = before[:10]
            case _:
                await writer.delete(sid)
                after = []
        got = taken + [s.event async for s in iterator]
        expect(
            got in (before, after),
            "READ-003",
            f"a read racing a {scenario} yielded {len(got)} events, neither the "
            f"{len(before)} before nor the {len(after)} after",
        )


@check("READ-003", "APPEND-003", needs=[Capability.MULTI_PROCESS])
async def read_while_a_writer_is_held(h: Harness) -> None:
    """READ-003: a reader in another process, while a writer is held after any one of its store system calls, sees the write wholly or not at all."""
    needs_holding()
    rng = random.Random(h.seed)
    _, calls = plan_workload(rng, h.capabilities, 0)
    held, waited = 0, 0
    async for t, n, before in holds(h, rng, calls, "READ-003"):
        call = calls[t]
        earlier = calls[t - 1].after if t else Expected({}, frozenset())
        want = {earlier.logs.get(call.session, ()), call.after.logs.get(call.session, ())}
        store = copy_store(h, before)
        async with (
            opened_worker(h, store, "READ-003") as reader,
            opened_worker(h, store, "READ-003") as writer,
            held_write(writer, store, call, n, "READ-003") as write,
        ):
            reached = write.reached
            if reached.call is None:
                continue
            seen = await _read_while_held(reader, call.session)
            await write.stopper.resume()
            done = await _finished(writer, write.reply, call, n)
        if not isinstance(done, Ok):
            raise RuleViolation(
                "READ-003",
                f"{call.label}, held right after its system call #{n} and let go, did not "
                f"finish: {done}",
            )
        held += 1
        if seen is None:
            waited += 1
            continue
        texts = tuple(text for _, text in seen)
        if texts not in want or [seq for seq, _ in seen] != list(range(1, len(seen) + 1)):
            raise RuleViolation(
                "READ-003",
                f"while {call.label} was held right after its system call #{n} "
                f"({reached.call}), another process read {call.session!r} as {seen}; it must "
                f"read one of {sorted(list(w) for w in want)}",
            )
    h.measure(
        f"read while writers were held right after {held} different system calls "
        f"({waited} reads waited for the writer)"
    )


async def _finished(
    writer: WorkerClient, reply: asyncio.Future[WorkerReply], call: Call, n: int
) -> WorkerReply:
    """What the held write came to once let go; a writer that exits instead fails READ-003."""
    try:
        return await reply  # bounded: the worker's reply deadline raises WorkerHung
    except WorkerExited as exited:
        raise RuleViolation(
            "READ-003",
            f"the writer (process {writer.process.pid}), held right after its system call "
            f"#{n} of {call.label} and let go, exited without being killed: {exited}",
        ) from exited


async def _read_while_held(reader: WorkerClient, session: str) -> list[tuple[int, str]] | None:
    """What ``reader`` reads of ``session`` now, or None if it waits for the held writer:
    blocked on a file lock (``/proc/locks`` says so at once) or silent for a while."""
    await reader.send(Read(UNSENT, session))
    answer = asyncio.ensure_future(reader.receive())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READER_PATIENCE
    while not answer.done():
        await asyncio.wait([answer], timeout=LOCK_POLL)
        if not answer.done() and (waits_on_a_lock(reader.process.pid) or loop.time() > deadline):
            answer.cancel()
            return None  # it waits for the writer: nothing seen, nothing wrong
    reply = answer.result()
    if isinstance(reply, Failed):
        raise RuleViolation(
            "READ-003", f"a read while a writer was held raised {reply.error}: {reply.message}"
        )
    assert isinstance(reply, Ok)
    assert isinstance(reply.value, list)
    return [(int(seq), str(text)) for seq, text in reply.value]


CHECKS = (
    since_seq_is_exclusive,
    unknown_sessions_read_empty,
    read_is_a_snapshot,
    read_while_a_writer_is_held,
)
