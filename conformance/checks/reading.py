"""Checks of the READ rules: since_seq is exclusive, unknown sessions read empty, a read is a snapshot.

A read is checked against writes three ways: stepped by hand around a write
(`read_is_a_snapshot`), in flight in the same process as an append
(`read_during_an_append_in_flight`: a task on the writer's event loop, on the
writer's handle and on a second one, and a thread with its own event loop and
handle), and in another process while the writer is held inside the store
(`read_while_a_writer_is_held`).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable

from ...spec import Capability, Checkpointer, UserPrompt
from ..engines.contract.violations import RuleViolation
from ..engines.crash.holds import (
    held_write,
    hold_store,
    holds,
    needs_holding,
    opened_workers_on,
    read_while_held,
)
from ..engines.crash.verdicts import Call, Expected, plan_workload
from ..engines.processes.client import (
    Succeeded,
    WorkerClient,
    WorkerExited,
    WorkerReply,
)
from ..engines.run.harness import Harness, NothingExercised, read_all
from ..engines.target.provenance import open_checkpointer
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


IN_FLIGHT_BATCHES = 12
"""Appends the writer makes per scenario of `read_during_an_append_in_flight`."""
IN_FLIGHT_BATCH = 64
"""Events per append: enough that a store writing them one at a time is caught between two."""
THREAD_PATIENCE = 60.0
"""Seconds the reader thread may take to start, or to finish its last read."""

Seen = list[tuple[int, str]]


@check("READ-003", "APPEND-003", "HANDLE-001")
async def read_during_an_append_in_flight(h: Harness) -> None:
    """READ-003: a read in the same process as an append in flight sees its batch wholly or not at all."""
    writer, second = await h.open(), await h.open()
    batches = [[f"b{b}.e{e}" for e in range(IN_FLIGHT_BATCH)] for b in range(IN_FLIGHT_BATCHES)]
    overlapping = 0
    for where, reader, sid in (
        ("the writer's own handle", writer, "s-same-handle"),
        ("a second handle", second, "s-second-handle"),
    ):
        overlapping += await _task_reads(writer, reader, sid, batches, where)
    overlapping += await _thread_reads(h, writer, "s-thread", batches)
    h.measure(f"{overlapping} reads began while an append of the same process was in flight")


async def _texts(cp: Checkpointer, sid: str) -> Seen:
    return [(stored.seq, getattr(stored.event, "text", "")) async for stored in cp.read(sid)]


async def _append_all(
    writer: Checkpointer, sid: str, batches: list[list[str]], in_flight: Callable[[bool], None]
) -> None:
    """Append ``batches`` one after the other, saying when an append is in flight."""
    for batch in batches:
        in_flight(True)
        try:
            await writer.append(sid, [UserPrompt(text) for text in batch])
        finally:
            in_flight(False)


async def _task_reads(
    writer: Checkpointer, reader: Checkpointer, sid: str, batches: list[list[str]], where: str
) -> int:
    """Append ``batches`` while a task on the same event loop keeps reading through
    ``reader``; every read must end on a batch boundary. How many reads began
    during an append."""
    everything = [text for batch in batches for text in batch]
    state = {"in_flight": False, "finished": False}
    overlapping = 0

    def in_flight(now: bool) -> None:
        state["in_flight"] = now

    async def write() -> None:
        try:
            await _append_all(writer, sid, batches, in_flight)
        finally:
            state["finished"] = True

    async def keep_reading() -> None:
        nonlocal overlapping
        while not state["finished"]:
            during = state["in_flight"]
            _check_whole(await _texts(reader, sid), everything, where)
            overlapping += during
            # A store whose read never suspends would keep the writer from running:
            # hand the loop back between reads (a yield, not a wait for anything).
            await asyncio.sleep(0)

    await asyncio.gather(write(), keep_reading())
    _check_whole(await _texts(reader, sid), everything, where)
    return overlapping


async def _thread_reads(
    h: Harness, writer: Checkpointer, sid: str, batches: list[list[str]]
) -> int:
    """Append ``batches`` while a thread with its own event loop and handle keeps
    reading: a backend doing blocking I/O in its append holds the writer's loop
    still, so only another thread can look during it. How many reads began
    during an append."""
    where = "a thread with its own event loop and handle"
    everything = [text for batch in batches for text in batch]
    in_flight, started, stop = threading.Event(), threading.Event(), threading.Event()
    overlapping: list[int] = [0]
    failed: list[BaseException] = []

    async def keep_reading() -> None:
        cp = await open_checkpointer(h.factory, h.context())
        try:
            while True:
                during = in_flight.is_set()
                _check_whole(await _texts(cp, sid), everything, where)
                overlapping[0] += during
                started.set()
                if stop.is_set():
                    return
        finally:
            await cp.close()

    def run() -> None:
        try:
            asyncio.run(keep_reading())
        except BaseException as error:  # handed to the check's own loop below
            failed.append(error)
        finally:
            started.set()

    thread = threading.Thread(target=run, name="READ-003 reader", daemon=True)
    thread.start()
    try:
        if not await asyncio.to_thread(started.wait, THREAD_PATIENCE):
            raise RuleViolation(
                "READ-003", f"a read through {where} did not finish in {THREAD_PATIENCE:.0f}s"
            )

        def mark(now: bool) -> None:
            (in_flight.set if now else in_flight.clear)()

        if not failed:
            await _append_all(writer, sid, batches, mark)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, THREAD_PATIENCE)
    if thread.is_alive():
        raise RuleViolation(
            "READ-003",
            f"a read through {where} did not finish in {THREAD_PATIENCE:.0f}s after the appends",
        )
    if failed:
        raise failed[0]
    return overlapping[0]


def _check_whole(seen: Seen, everything: list[str], where: str) -> None:
    """``seen`` must be the log after some whole number of the writer's batches."""
    texts = [text for _, text in seen]
    whole = len(seen) % IN_FLIGHT_BATCH == 0
    if (
        whole
        and texts == everything[: len(seen)]
        and [s for s, _ in seen] == list(range(1, len(seen) + 1))
    ):
        return
    batch, inside = divmod(len(seen), IN_FLIGHT_BATCH)
    shape = (
        f"it ends after event {inside} of the {IN_FLIGHT_BATCH} of batch {batch + 1}"
        if not whole
        else f"its seqs and events are not the first {len(seen)} appended"
    )
    raise RuleViolation(
        "READ-003",
        f"a read through {where}, made while appends of {IN_FLIGHT_BATCH} events each were "
        f"in flight in the same process, did not see whole batches: {shape} "
        f"(it yielded {len(seen)} events, the last {seen[-1] if seen else None})",
    )


@check("READ-003", "APPEND-003", needs=[Capability.MULTI_PROCESS], kind="holds")
async def read_while_a_writer_is_held(h: Harness) -> None:
    """READ-003: a reader in another process, while a writer is held after any one of its store system calls, sees the write wholly or not at all."""
    needs_holding()
    rng = random.Random(h.seed)
    _, calls = plan_workload(rng, h.capabilities, 0)
    held, waited = 0, 0
    async for hold in holds(h, rng, calls, "READ-003"):
        t, n = hold.t, hold.n
        call = calls[t]
        earlier = calls[t - 1].after if t else Expected({}, frozenset())
        want = {earlier.logs.get(call.session, ()), call.after.logs.get(call.session, ())}
        store = await hold_store(h, hold, calls, "READ-003")
        async with (
            opened_workers_on(h, store, "READ-003", 2) as (reader, writer),
            held_write(writer, store, call, n, "READ-003", hold.sends) as write,
        ):
            reached = write.reached
            if reached.call is None:
                continue
            seen = await read_while_held(reader, call.session, "READ-003")
            await write.stopper.resume()
            done = await _finished(writer, write.reply, call, n)
        if not isinstance(done, Succeeded):
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
    if not held:
        raise NothingExercised(
            "no read happened while a writer was held inside a write: every held write "
            "made fewer store calls than counted, so no writer was held"
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


CHECKS = (
    since_seq_is_exclusive,
    unknown_sessions_read_empty,
    read_is_a_snapshot,
    read_during_an_append_in_flight,
    read_while_a_writer_is_held,
)
