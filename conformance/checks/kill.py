"""Checks of the KILL rules: writers killed inside their operations.

- `commanded_workers`: the machine (`checkpointspec.conformance.engines.machines.commanded`)
  drives three worker processes on one store, pauses writes at the backend's
  fault points, resumes them or kills their process, and compares everything
  with `SpecModel`.
- `killed_after_every_system_call`: a worker held right after one of its
  system calls that change the store (`checkpointspec.conformance.engines.crash.holds`)
  is SIGKILLed where it stands; the store, reopened, holds every acknowledged
  write and the killed one wholly or not at all, and a handle in this process
  can append to its session at once: the dead writer holds nothing.
- `killed_while_waiting_for_another_writer`: a writer is held right after one
  of its store system calls (for a server backend, its sends to the server) and
  a second writer of the same session, sent meanwhile, is SIGKILLed once it
  waits for the first; a reader reads the session, a third writer appends, and
  the first is let go. The dead writer's append must not appear after that
  read left it out: whatever it left with the server (a ``COMMIT`` sent with
  the write) must not be applied once it is dead.
- `compaction_killed_after_every_system_call`: the session layer's ``compact``
  runs in a child process (`checkpointspec.conformance.engines.crash.killed_layer_run`),
  held right after one of its store calls (for a server backend, its sends to the
  server: a round trip) and killed there; the log holds the
  summary wholly or not at all, and another compaction of the session runs at
  once: the dead one holds no maintenance lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Final

from ...backends.stdio.messages import Append
from ...spec import AssistantMessage, Capability, UserPrompt, encode_event
from ..engines.contract.violations import RuleViolation
from ..engines.crash.holds import (
    NEVER,
    REPLY_TIMEOUT,
    Held,
    copy_store,
    counted_write,
    held_write,
    hold_store,
    holds,
    needs_holding,
    opened_worker,
    opened_workers_on,
    prepared,
    read_while_held,
    spread,
    until_waiting,
)
from ..engines.crash.killed_layer_run import KillOrder, run_held_restore
from ..engines.crash.stopper import (
    StopperError,
    SyscallStopper,
    is_send,
    server_sends_unavailable,
)
from ..engines.crash.verdicts import (
    Call,
    Expected,
    Step,
    event_text,
    plan_workload,
    verdict_on,
)
from ..engines.machines.commanded import WORKERS, CommandedEnv, CommandedMachine, worker_pool
from ..engines.processes.client import (
    UNSENT,
    Succeeded,
    WorkerClient,
    WorkerReply,
    backend_error,
    marker_prompts,
)
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised, read_all
from ..engines.search.stateful import run_machine
from .base import check

__all__ = ["CHECKS"]

_SESSION: Final = "compacted"


@check(
    "KILL-001",
    "MP-001",
    "READ-003",
    "APPEND-003",
    replay_note="only a backend with fault points has its writers paused and killed at "
    "the same places on every replay; without them a kill lands wherever the writer then is",
    kind="commanded",
)
def commanded_workers(h: Harness) -> None:
    """KILL-001: processes paused inside writes and killed there leave whole writes and free locks."""
    with worker_pool(h.target, WORKERS) as pool:
        env = CommandedEnv(pool, h.capabilities, h.new_store, h.discard_store)
        # No shrinking: every shrink attempt replays processes being killed and
        # restarted, which took minutes; a failing run of at most commanded_steps
        # steps is reported as it was found.
        run_machine(
            h,
            lambda: CommandedMachine(env),
            examples=h.profile.commanded_examples,
            steps=h.profile.commanded_steps,
            shrink=False,
        )


@check(
    "KILL-001",
    "APPEND-003",
    "DUR-002",
    replay_note="the system call a writer is killed after is exact; how many calls a "
    "write makes can vary between runs (a backend that batches by timing)",
    kind="holds",
)
async def killed_after_every_system_call(h: Harness) -> None:
    """KILL-001: a writer SIGKILLed right after any one of its store system calls leaves its write whole or absent, and holds nothing."""
    needs_holding()
    rng = random.Random(h.seed)
    sessions, calls = plan_workload(rng, h.capabilities, 0)
    held = 0
    async for hold in holds(h, rng, calls, "KILL-001"):
        t = hold.t
        store = await hold_store(h, hold, calls, "KILL-001")
        async with (
            opened_worker(h, store, "KILL-001") as worker,
            held_write(worker, store, calls[t], hold.n, "KILL-001", hold.sends) as write,
        ):
            reached = write.reached
            if reached.call is None:
                continue  # this run of the write made fewer calls than counted
            await write.stopper.kill()
            await worker.kill()
        acked = calls[t - 1].after if t else Expected({}, frozenset())
        flight = Step(calls[t].label, 0, 1, calls[t].after)
        await _judge_killed(h, store, sessions, acked, flight, reached, calls[t])
        held += 1
    h.measure(f"killed writers right after {held} different system calls")
    if not held:
        raise NothingExercised(
            "no writer was killed inside a write: every held write made fewer store "
            "calls than counted, so no kill landed after one of them"
        )


async def _judge_killed(
    h: Harness,
    store: Path,
    sessions: tuple[str, ...],
    acked: Expected,
    flight: Step,
    reached: Held,
    call: Call,
) -> None:
    where = f" (killed right after system call #{reached.counted} of {call.label}: {reached.call})"
    verdict = await verdict_on(h, store, sessions, acked, flight, "KILL-001")
    if verdict is not None:
        rule_id, message = verdict
        raise RuleViolation(rule_id, message + where)
    async with h.opened(store) as cp:
        try:
            head = await asyncio.wait_for(cp.head(call.session), REPLY_TIMEOUT)
            await asyncio.wait_for(
                cp.append(call.session, [UserPrompt("after the kill")], head), REPLY_TIMEOUT
            )
        except TimeoutError:
            raise RuleViolation(
                "KILL-001",
                f"appending to {call.session!r} after its writer was killed waited "
                f"{REPLY_TIMEOUT:.0f}s: the dead writer still holds it" + where,
            ) from None


_WAITED: Final = "waited"
"""The session whose writers wait for one another."""
_BEFORE: Final = ("before",)
_FIRST: Final = ("first 1", "first 2")
_KILLED: Final = "killed"
_LATER: Final = "later"


def _append(texts: tuple[str, ...]) -> Call:
    return Call("append", _WAITED, texts, 0, Expected({}, frozenset()))


@check(
    "KILL-001",
    "READ-003",
    needs=[Capability.MULTI_PROCESS],
    kind="holds",
    replay_note="the system call the first writer is held after is exact; the second "
    "is killed wherever it waits for the first",
)
async def killed_while_waiting_for_another_writer(h: Harness) -> None:
    """KILL-001: a writer SIGKILLed while it waits for another writer of its session never has its write applied after a read left it out."""
    needs_holding()
    rng = random.Random(h.seed)
    calls = [_append(_BEFORE), _append(_FIRST)]
    counted, sends = await counted_write(h, calls, 1, "KILL-001")
    tried, waited = 0, 0
    # Half the holds of a workload's: each costs four worker processes and a store.
    holds = spread(rng, counted, max(1, h.profile.held_writes // 2))
    for n in holds:
        if tried and h.slice.spent():
            h.slice.stopped(f"held a first writer {tried} times of {len(holds)}")
            break
        store = await prepared(h, calls, 1, "KILL-001")
        tried += 1
        async with (
            opened_workers_on(h, store, "KILL-001", 4) as (first, second, reader, later),
            held_write(first, store, calls[1], n, "KILL-001", sends) as write,
        ):
            if write.reached.call is None:
                continue  # this run of the write made fewer calls than counted
            killed_after = await _killed_once_waiting(second, store, sends)
            if killed_after is None:
                continue  # the first writer, held here, held nothing the second needed
            waited += 1
            seen = await read_while_held(reader, _WAITED, "KILL-001")
            await later.send(Append(UNSENT, _WAITED, marker_prompts([_LATER])))
            await write.stopper.resume()
            await _acknowledged(write.reply, "the held writer's append, let go")
            await _acknowledged(asyncio.ensure_future(later.receive()), "the later append")
        where = (
            f"(the first writer held right after its store call #{n}, {write.reached.call}; "
            f"the second killed waiting, after {killed_after})"
        )
        await _judge_waiting_kill(h, store, seen, where)
    h.measure(
        f"held a writer right after {tried} different system calls; after {waited} of them "
        "a second writer waited for it and was killed"
    )
    if not waited:
        raise NothingExercised(
            f"no writer was held while waiting for another: of {tried} first writers held, "
            "none held anything a second writer of its session waited for, so no writer "
            "was killed waiting"
        )


async def _killed_once_waiting(worker: WorkerClient, store: Path, sends: bool) -> str | None:
    """Send ``worker`` an append of ``_KILLED`` and SIGKILL it once it waits; the last
    store call it made before (or "no store call"), or None if it finished first."""
    stopper = await SyscallStopper.start(worker.process.pid, [store], NEVER, sends=sends)
    try:
        request = Append(UNSENT, _WAITED, marker_prompts([_KILLED]))
        reply = asyncio.ensure_future(worker.call(request))
        try:
            if not await until_waiting(worker, reply):
                return None
            calls = await stopper.finish()  # its exit kills the traced worker where it waits
            await worker.kill()
        finally:
            if not reply.done():
                reply.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reply  # the killed worker's end is no reply: never left unretrieved
        return f"its store call #{len(calls)}, {calls[-1]}" if calls else "no store call"
    finally:
        await stopper.kill()


async def _acknowledged(reply: asyncio.Future[WorkerReply], what: str) -> None:
    """Wait for ``reply`` (bounded by the worker's deadline); a refusal fails KILL-001."""
    done = await reply
    if not isinstance(done, Succeeded):
        raise RuleViolation.or_crash(
            "KILL-001",
            f"{what} failed after a writer waiting for the same session was killed: {done}",
            "append",
            backend_error(done),
        )


async def _judge_waiting_kill(
    h: Harness, store: Path, seen: list[tuple[int, str]] | None, where: str
) -> None:
    async with h.opened(store) as cp:
        final = [event_text(s.event) for s in await read_all(cp, _WAITED)]
    applied = _KILLED in final
    if seen is not None and applied and _KILLED not in (text for _, text in seen):
        raise RuleViolation(
            "KILL-001",
            "a writer killed while it waited for another writer of its session had its "
            f"append applied after its death, after a read had left it out {where}: the "
            f"read after the kill saw {[text for _, text in seen]}, the log is now {final}",
        )
    acknowledged = [*_BEFORE, *_FIRST, _LATER]
    if [text for text in final if text != _KILLED] != acknowledged or final.count(_KILLED) > 1:
        raise RuleViolation(
            "KILL-001",
            f"the session written by a held writer, a writer killed while it waited and a "
            f"later writer holds {final}: it must hold {acknowledged} in this order, and the "
            f"killed writer's event once or not at all {where}",
        )


_LONG: Final = " ".join(["and then the work went on as planned"] * 6)
"""Text that makes each turn long enough for a summary to be smaller than the turns."""


async def _compactable(h: Harness, store: Path) -> list[bytes]:
    """Write a conversation a compaction reduces to ``store``; its events, encoded."""
    async with h.opened(store) as cp:
        for turn in range(8):
            await cp.append(
                _SESSION,
                [UserPrompt(f"turn {turn}: {_LONG}"), AssistantMessage(f"done {turn}: {_LONG}")],
            )
        return [encode_event(s.event) for s in await read_all(cp, _SESSION)]


@check(
    "KILL-001",
    "APPEND-003",
    replay_note="the system call a compaction is killed after is exact; how many calls "
    "it makes can vary between runs",
    kind="holds",
)
async def compaction_killed_after_every_system_call(h: Harness) -> None:
    """KILL-001: a compaction SIGKILLed right after any one of its store system calls leaves its summary whole or absent, and the session free."""
    needs_holding()
    rng = random.Random(h.seed)
    # A backend whose data lives in a server is held at its round trips too.
    sends = server_sends_unavailable() is None
    before = h.new_store()
    pre = await _compactable(h, before)
    # When the backend keeps its data outside the store's directory (ExternalStorage),
    # or a compaction's store calls are all sends, the directory only names where its
    # data lives (a copy would share that data): each trial writes a new store.
    server = h.run.probe.external_storage

    async def compacted(n: int) -> tuple[Path, str | None, list[str]]:
        if server:
            store = h.new_store()
            await _compactable(h, store)
        else:
            store = copy_store(h, before)
        order = KillOrder(
            h.target,
            str(store),
            str(store),
            h.session_target,
            _SESSION,
            0,
            files=False,
            conversation=True,
            kill_at=0,
            operation="compact",
        )
        try:
            call, calls = await run_held_restore(order, [store], n, sends)
        except StopperError as exc:
            raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
        return store, call, calls

    done, _, calls = await compacted(NEVER)
    server = server or (bool(calls) and all(is_send(call) for call in calls))
    async with h.opened(done) as cp:
        post = [encode_event(s.event) for s in await read_all(cp, _SESSION)]
    if len(post) != len(pre) + 1 or not calls:
        raise CheckSkipped(
            f"a compaction in a child process did not append one summary ({len(pre)} events "
            f"before, {len(post)} after, {len(calls)} store calls): nothing to kill it in"
        )
    points = range(1, len(calls) + 1)
    chosen = sorted(rng.sample(points, min(len(points), h.profile.held_writes)))
    killed = 0
    for n in h.slice.within(chosen, "system calls to kill a compaction after"):
        store, call, _ = await compacted(n)
        killed += 1
        if call is None:
            continue  # this run made fewer calls than the counting run
        await _judge_killed_compaction(h, store, pre, post, f"{call} (call {n} of {len(calls)})")
    h.measure(f"killed compactions right after {killed} of their {len(calls)} system calls")


async def _judge_killed_compaction(
    h: Harness, store: Path, pre: list[bytes], post: list[bytes], where: str
) -> None:
    async with h.opened(store) as cp:
        seen = [encode_event(s.event) for s in await read_all(cp, _SESSION)]
        if seen not in (pre, post):
            raise RuleViolation(
                "KILL-001",
                f"a compaction killed right after {where} left {len(seen)} events, neither the "
                f"{len(pre)} before it nor the {len(post)} after it",
            )
        # The dead compaction must hold nothing: the session takes another one at once.
        layer = h.session
        try:
            async for _ in layer.compact(cp, _SESSION, summarizer=layer.ExtractiveSummarizer()):
                pass
        except Exception as exc:  # compact raises what ended it in error
            raise RuleViolation(
                "KILL-001",
                f"after a compaction was killed right after {where}, another compaction of "
                f"the session raised {type(exc).__name__}: {exc}",
            ) from exc


CHECKS = (
    commanded_workers,
    killed_after_every_system_call,
    killed_while_waiting_for_another_writer,
    compaction_killed_after_every_system_call,
)
