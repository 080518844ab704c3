"""Checks of DUR-004: acknowledged writes survive the loss of the primary.

The method (`acknowledged_writes_survive_failover`), once per failover round
(``profile.failovers``):

1. Open a handle through the factory. Without `Replicated` the check is
   skipped. ``start_failover_pair`` starts a throwaway primary on this machine,
   replicating as the backend's deployment promises (for the PostgreSQL
   backend, as its ``replication`` option says).
2. The kit's proxy (`checkpointspec.conformance.engines.network.proxy`) goes in
   front of the primary and the standby is started streaming through it
   (`FailoverPair.start_standby`), so the kit holds the replication stream.
3. Two writers run the stress workload on handles opened with the pair's
   options (`checkpointspec.conformance.engines.network.recorded`). After a
   number of calls drawn from the seed the kit stalls the replication stream:
   the standby falls behind. A synchronous standby makes every commit wait;
   an asynchronous one lets the primary acknowledge commits the standby never
   gets. Once the writers made a dozen more calls, or a second passed
   (a synchronous pair's writers are all waiting), the primary is killed
   (`lose_primary`), the link to it severed and the standby promoted.
4. The writers carry on, on the promoted standby, to the end of their calls.
   A fresh handle then reads every session and the verdict is
   `recorded.judge`'s: every acknowledged append is there, once, at the seqs its
   head said; seqs run 1..head; no refused write took effect; and the history
   checker explains the whole history, a write cut by the failover either way.
   With no failover round, or no append acknowledged before the primary was
   lost in any round, the check is ``not_checked``: nothing had to survive.
"""

from __future__ import annotations

import random
import time
from typing import Final

from ...spec import Checkpointer, Replicated
from ..engines.crash.verdicts import quiet
from ..engines.history import Operation, Returned
from ..engines.network.proxy import FaultProxy
from ..engines.network.recorded import Writers, judge, violation
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised
from ..engines.target.authoring import missing_python_protocol
from .base import check

__all__ = ["CHECKS"]

_WRITERS: Final = 2
_CALLS: Final = 150
"""Calls each writer makes in a round, before and after the failover."""
_SECONDS: Final = 60.0
_STALLED_CALLS: Final = 12
"""Calls the writers may make while the standby receives nothing, before the primary is lost."""
_STALL_WINDOW: Final = 1.0
"""Seconds the kit waits for those calls: writers of a synchronous pair make none."""


def _acknowledged_before(operations: list[Operation], lost_at: int) -> int:
    """The appends acknowledged before ``lost_at`` (``time.monotonic_ns``): the writes
    the failover must keep."""
    return sum(
        1
        for op in operations
        if op.kind == "append"
        and isinstance(op.outcome, Returned)
        and op.completed is not None
        and op.completed < lost_at
    )


async def _round(h: Harness, specimen: Replicated, number: int) -> tuple[list[str], str, int]:
    """One failover: the findings, what was done (for the measure), and how many appends
    were acknowledged before the primary was lost."""
    rng = random.Random(f"{h.seed}:failover:{number}")
    pair = await specimen.start_failover_pair(h.new_store())
    handles: list[Checkpointer] = []
    try:
        # The lost primary makes the backend's driver log a warning per connection.
        with FaultProxy(pair.primary) as link, quiet():
            await pair.start_standby(link.address)
            store = h.new_store()
            options = {**h.options, **pair.options}
            handles = [await h.open(store, options=options) for _ in range(_WRITERS)]
            histories = h.new_store()
            writers = Writers(handles, histories, _CALLS, _SECONDS, h.seed + number)
            async with writers:
                before = rng.randint(10, 80)
                await writers.until(before, _SECONDS)
                link.stall()
                stalled_at = writers.progress
                await writers.until(stalled_at + _STALLED_CALLS, _STALL_WINDOW)
                during = writers.progress - stalled_at
                lost_at = time.monotonic_ns()
                await pair.lose_primary()
                link.sever()
                await pair.promote_standby()
                problems = await writers.finished(_SECONDS + 30)
        for cp in handles:
            await cp.close()
        async with h.opened(store, options=options) as after:
            operations = writers.operations()
            findings = problems + (await judge(after, operations)).findings
    finally:
        for cp in handles:
            await cp.close()
        await pair.stop()
    acknowledged = _acknowledged_before(operations, lost_at)
    done = (
        f"primary lost after {stalled_at} calls ({acknowledged} appends acknowledged), "
        f"{during} of them made while the standby received nothing; "
        f"{len(operations)} calls in all"
    )
    return findings, done, acknowledged


@check(
    "DUR-004",
    kind="stress",
    replay_note="the seed picks when the replication stream stalls and the primary is "
    "killed, counted in calls; which write each lands in depends on timing",
)
async def acknowledged_writes_survive_failover(h: Harness) -> None:
    """DUR-004: after the primary is killed and its standby promoted, every acknowledged append is there, once."""
    specimen = await h.open()
    if not isinstance(specimen, Replicated):
        raise CheckSkipped(
            "DUR-004 needs a primary and standby the kit may kill and promote: "
            + missing_python_protocol(
                specimen,
                "a primary and standby it may kill and promote",
                "Replicated (start_failover_pair(directory), see checkpointspec.spec.server)",
            )
        )
    acknowledged = 0
    for number in range(h.profile.failovers):
        findings, done, before = await _round(h, specimen, number)
        acknowledged += before
        if findings:
            raise violation(
                "DUR-004",
                "after the primary was lost and its standby promoted",
                findings,
                f"round {number}: {done}",
            )
        h.measure(f"round {number}: {done}")
    if not h.profile.failovers:
        raise NothingExercised(
            "no failover happened: the profile runs no failover round (failovers=0)"
        )
    if not acknowledged:
        raise NothingExercised(
            f"no append was acknowledged before the primary was lost in any of the "
            f"{h.profile.failovers} failover rounds, so no acknowledged write had to survive"
        )


CHECKS = (acknowledged_writes_survive_failover,)
