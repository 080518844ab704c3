"""Checks of the NET rules: a server backend's connections cut, delayed and reset (NET-001).

The method (`cut_connections_lose_nothing`):

1. Open a handle through the factory. A handle that is not `ServerRouted`, or
   whose server is not a TCP address, skips the check: the kit cannot stand
   between it and its server.
2. Start the kit's loopback proxy (`checkpointspec.conformance.engines.network.proxy`)
   in front of that address, and open two more handles on the same store through
   the factory with ``options_via(options, proxy)``: every connection they make
   goes through the proxy.
3. Arm the proxy: from then on each connection, those already open (a pool the
   client filled in the factory) and each new one, with a fault drawn from the
   run's seed and the connection's number, is cut after a number of bytes of one
   direction (torn inside a message or at a message's start, closed with a FIN
   or a reset), or has each chunk delayed, or is left alone. A cut towards the
   client after the server committed is a lost ``COMMIT``: the backend must
   find out whether it was applied before it sends the write again.
4. Two writers run the stress workload (`checkpointspec.conformance.engines.network.recorded`)
   through those handles, recording each call and its outcome; a call ended by
   `ConnectionLostError` is an unknown outcome.
5. Through the first handle, which the proxy never touched, read every session
   and judge (`recorded.judge`): every call ended in success, a contract error
   or `ConnectionLostError`; seqs 1..head and the store's integrity ok; every
   acknowledged append present once; no refused one present; and the history
   checker explains the rest, unknown outcomes either way (a duplicate, a lost
   acknowledgement, a fork).

An anomaly of the history none of whose calls a cut touched (`recorded.cut_by`:
ended in `ConnectionLostError`, or in flight when a connection was cut) is no
evidence about connection loss: a run without cuts shows it too, so it is
reported under its own rule (READ-001, SEQ-003 ...), not NET-001. A run in
which the proxy cut no connection proves nothing about NET-001: not checked.
"""

from __future__ import annotations

import random

from ...spec import ServerRouted
from ..engines.crash.verdicts import quiet
from ..engines.network.proxy import Direction, Fault, FaultProxy
from ..engines.network.recorded import Writers, cut_by, judge, violation
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised
from ..engines.target.authoring import missing_python_protocol
from .base import check

__all__ = ["CHECKS", "draw_fault"]

_WRITERS = 2
_SECONDS = 60.0
"""A writer's calls end after this long even if some are left (with every connection cut)."""


def draw_fault(seed: int, connection: int) -> Fault:
    """The fault of the proxy's ``connection``-th connection in the run of ``seed``.

    Every connection is cut in the end: one left alone would carry the rest of
    the workload, since a pool reuses what works. Four in five are cut after 3
    to 12 chunks of one direction (past the connection's start-up, among the
    operations' requests and responses), the others after 13 to 200; towards the
    client 80% of the time, where a dropped response to ``COMMIT`` is a write
    whose outcome the backend must find out. Half are cut inside the next chunk,
    a third with a reset, and a tenth are slowed down as well.
    """
    rng = random.Random(f"{seed}:{connection}")
    direction: Direction = "to_client" if rng.random() < 0.8 else "to_server"
    return Fault(
        cut=direction,
        at_chunk=rng.randint(3, 12) if rng.random() < 0.8 else rng.randint(13, 200),
        torn_bytes=rng.randint(1, 12) if rng.random() < 0.5 else 0,
        reset=rng.random() < 1 / 3,
        delay=rng.choice((0.0005, 0.001, 0.003)) if rng.random() < 0.1 else 0.0,
    )


@check(
    "NET-001",
    kind="stress",
    replay_note="the seed draws each connection's fault; which call a cut lands in "
    "depends on how the backend's connections and the two writers interleave",
)
async def cut_connections_lose_nothing(h: Harness) -> None:
    """NET-001: with connections cut at any byte, delayed or reset, nothing acknowledged is lost and nothing applied twice."""
    specimen = await h.open()
    if not isinstance(specimen, ServerRouted):
        raise CheckSkipped(
            "NET-001 needs to put a proxy between the backend and its server: "
            + missing_python_protocol(
                specimen,
                "the address of a server to put a proxy in front of",
                "ServerRouted (server_address() and options_via(options, address), see "
                "checkpointspec.spec.server)",
            )
        )
    address = specimen.server_address()
    if address is None:
        raise CheckSkipped("NET-001 needs a TCP server: server_address() is None (a unix socket)")
    histories = h.root / "net-histories"
    histories.mkdir()
    # Each cut makes the backend's driver log a warning; hundreds would bury the report.
    with FaultProxy(address) as proxy, quiet():
        routed = specimen.options_via(h.options, proxy.address)
        handles = [await h.open(options=routed) for _ in range(_WRITERS)]
        # Armed after the handles opened: a connection a client opened in its factory
        # is cut like one it opens later.
        proxy.arm(lambda connection: draw_fault(h.seed, connection))
        writers = Writers(handles, histories, h.profile.connection_calls, _SECONDS, h.seed)
        async with writers:
            problems = await writers.finished(_SECONDS + 30)
        for cp in handles:
            await cp.close()
        cuts, connections = [fired.at for fired in proxy.fired], proxy.connections
    operations = writers.operations()
    lost = sum(1 for op in operations if getattr(op.outcome, "error", "") == "ConnectionLostError")
    done = (
        f"{len(operations)} calls through the proxy, {len(cuts)} of {connections} connections "
        f"cut, {lost} calls ended in ConnectionLostError"
    )
    h.measure(done)
    judged = await judge(specimen, operations, cut_by(cuts))
    for apart in judged.apart:
        h.record(apart)
    findings = problems + judged.findings
    if findings:
        raise violation("NET-001", "with connections cut by the kit's proxy", findings, done)
    if not cuts:
        raise NothingExercised(
            f"the kit's proxy cut none of the {connections} connections the backend opened "
            f"through it in {len(operations)} calls: no connection was lost, so nothing is "
            "known of NET-001"
        )


CHECKS = (cut_connections_lose_nothing,)
