"""Checks of the PROTO rules: a backend served over the stdio protocol speaks it exactly.

Every call of every check on such a backend goes through the kit's stdio client
(`checkpointspec.backends.stdio.client`), which raises `StdioProtocolError` for any
breach it meets: the runner makes that a PROTO-001 finding, whichever check was
running (`checkpointspec.conformance.running.findings`). The check here gives the
rule a conversation of its own, every message checked against the published JSON
Schema as ``--validate-protocol`` does, so that it can pass. A backend served in
the kit's own process has no wire to break: the check is skipped, and says why.
"""

from __future__ import annotations

from ...backends.registry import STDIO_FACTORY
from ...backends.stdio import VALIDATE_OPTION
from ...spec import Capability, CheckpointConflictError, GenerationalCheckpointer
from ..engines.run.harness import CheckSkipped, Harness, read_all
from ._support import expect_error
from .base import check

__all__ = ["CHECKS"]


@check("PROTO-001")
async def one_reply_per_request(h: Harness) -> None:
    """PROTO-001: served over stdio, every request is answered by one reply of its id, each message as the schema says."""
    if h.target.ref.target != STDIO_FACTORY:
        raise CheckSkipped(
            "PROTO-001 applies to a backend served over the stdio protocol (--process): "
            "this one answers in the kit's own process, with no protocol to break"
        )
    cp = await h.open(options={VALIDATE_OPTION: "1"})
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    await cp.head("s")
    await read_all(cp, "s")
    await expect_error(
        lambda: cp.append("s", [h.prompt("stale")], expected_head=1),
        CheckpointConflictError,
        "APPEND-002",
        "append with expected_head=1 at head 2",
    )
    if h.has(Capability.LIST):
        await cp.list_sessions()
    if h.has(Capability.TRUNCATE):
        await cp.truncate("s", 1)
    if h.has(Capability.GENERATION) and isinstance(cp, GenerationalCheckpointer):
        await cp.generation("s")
    await cp.check_integrity()
    await cp.close()
    h.measure("a conversation of every declared operation, each message checked against the schema")


CHECKS = (one_reply_per_request,)
