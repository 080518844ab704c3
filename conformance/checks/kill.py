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
- `compaction_killed_after_every_system_call`: the session layer's ``compact``
  runs in a child process (`checkpointspec.conformance.engines.crash.killed_restore`),
  held right after one of its store calls and killed there; the log holds the
  summary wholly or not at all, and another compaction of the session runs at
  once: the dead one holds no maintenance lock.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Final

from ...spec import AssistantMessage, UserPrompt, encode_event
from ..engines.crash.holds import (
    NEVER,
    REPLY_TIMEOUT,
    Held,
    copy_store,
    held_write,
    hold_store,
    holds,
    needs_holding,
    opened_worker,
)
from ..engines.crash.killed_restore import KillOrder, run_held_restore
from ..engines.crash.stopper import StopperError
from ..engines.crash.verdicts import Call, Expected, Step, plan_workload, verdict_on
from ..engines.harness import CheckSkipped, Harness, read_all
from ..engines.machines.commanded import WORKERS, CommandedEnv, CommandedMachine, worker_pool
from ..engines.violations import RuleViolation
from ._support import run_machine
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
)
def commanded_workers(h: Harness) -> None:
    """KILL-001: processes paused inside writes and killed there leave whole writes and free locks."""
    with worker_pool(h.backend.target, h.options, WORKERS) as pool:
        env = CommandedEnv(pool, h.capabilities, h.new_store)
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
)
async def compaction_killed_after_every_system_call(h: Harness) -> None:
    """KILL-001: a compaction SIGKILLed right after any one of its store system calls leaves its summary whole or absent, and the session free."""
    needs_holding()
    rng = random.Random(h.seed)
    before = h.new_store()
    pre = await _compactable(h, before)

    async def compacted(n: int) -> tuple[Path, str | None, list[str]]:
        store = copy_store(h, before)
        order = KillOrder(
            h.backend.target,
            h.options,
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
            call, calls = await run_held_restore(order, [store], n)
        except StopperError as exc:
            raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
        return store, call, calls

    done, _, calls = await compacted(NEVER)
    async with h.opened(done) as cp:
        post = [encode_event(s.event) for s in await read_all(cp, _SESSION)]
    if len(post) != len(pre) + 1 or not calls:
        raise CheckSkipped(
            f"a compaction in a child process did not append one summary ({len(pre)} events "
            f"before, {len(post)} after, {len(calls)} store calls): nothing to kill it in"
        )
    points = range(1, len(calls) + 1)
    chosen = sorted(rng.sample(points, min(len(points), h.profile.held_writes)))
    for n in chosen:
        store, call, _ = await compacted(n)
        if call is None:
            continue  # this run made fewer calls than the counting run
        await _judge_killed_compaction(h, store, pre, post, f"{call} (call {n} of {len(calls)})")
    h.measure(f"killed compactions right after {len(chosen)} of their {len(calls)} system calls")


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
    compaction_killed_after_every_system_call,
)
