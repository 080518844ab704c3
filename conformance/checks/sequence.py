"""Checks of the SEQ rules: seqs from 1 without gaps, parent links, the returned head, stored ids and times; and the model-based check named after SEQ-001."""

from __future__ import annotations

from ...spec import Codec
from ..engines.contract.outcomes import check_ts
from ..engines.machines.storage import CheckpointerMachine, MachineEnv
from ..engines.run.harness import Harness, read_all
from ..engines.search.stateful import run_machine
from ._support import expect
from .base import check

__all__ = ["CHECKS", "MODEL_OBSERVED", "run_model_based"]


@check("SEQ-001", "SEQ-003")
async def seqs_are_contiguous_across_batches(h: Harness) -> None:
    """SEQ-001: seqs run 1, 2, 3, ... across batches of different sizes."""
    cp = await h.open()
    head = 0
    for size in (1, 3, 2, 5):
        head = await cp.append("s", [h.prompt(f"{head + i}") for i in range(size)])
    seqs = [s.seq for s in await read_all(cp, "s")]
    expect(seqs == list(range(1, 12)), "SEQ-001", f"seqs after batches of 1, 3, 2, 5: {seqs}")
    expect(head == 11, "SEQ-003", f"append returned head {head}; the log has 11 events")


@check("SEQ-002")
async def parent_links_point_back(h: Harness) -> None:
    """SEQ-002: parent_seq is None for seq 1 and seq - 1 after it."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a"), h.prompt("b")])
    await cp.append("s", [h.prompt("c")])
    parents = [(s.seq, s.parent_seq) for s in await read_all(cp, "s")]
    expect(parents == [(1, None), (2, 1), (3, 2)], "SEQ-002", f"(seq, parent_seq) pairs: {parents}")


@check("SEQ-003")
async def append_returns_the_new_head(h: Harness) -> None:
    """SEQ-003: append returns the seq of the log's last event."""
    cp = await h.open()
    returned = [await cp.append("s", [h.prompt(str(i))] * size) for i, size in enumerate((2, 1, 4))]
    expect(returned == [2, 3, 7], "SEQ-003", f"heads returned for batches of 2, 1, 4: {returned}")
    expect(await cp.head("s") == 7, "SEQ-003", "head() disagrees with the value append returned")


@check("SEQ-004")
async def stored_events_carry_id_and_utc_time(h: Harness) -> None:
    """SEQ-004: every stored event carries its session id and a UTC ISO 8601 ts."""
    cp = await h.open()
    await cp.append("sess/1", [h.prompt("a"), h.prompt("b")])
    for stored in await read_all(cp, "sess/1"):
        expect(
            stored.session_id == "sess/1",
            "SEQ-004",
            f"seq {stored.seq} carries session_id {stored.session_id!r}",
        )
        check_ts(stored, "read('sess/1')")


MODEL_OBSERVED = (
    "SEQ-002",
    "SEQ-003",
    "SEQ-004",
    "EVENT-001",
    "APPEND-001",
    "APPEND-002",
    "APPEND-003",
    "APPEND-004",
    "ARG-001",
    "ARG-002",
    "ARG-003",
    "ID-002",
    "READ-001",
    "READ-002",
    "READ-003",
    "HEAD-001",
    "LIST-001",
    "LIST-002",
    "LIST-003",
    "DELETE-001",
    "DELETE-002",
    "TRUNC-001",
    "TRUNC-002",
    "TRUNC-003",
    "TRUNC-004",
    "TRUNC-005",
    "CAP-001",
    "GEN-001",
    "GEN-002",
    "HANDLE-001",
    "CLOSE-001",
    "CLOSE-002",
    "DUR-001",
    "INTEG-001",
)
"""The rules the model-based machine judges besides SEQ-001."""


def run_model_based(h: Harness, codec: type[Codec] | None) -> None:
    """Run the model-based machine (`CheckpointerMachine`) against the backend."""
    # Its bad batches (ARG-003) never reach a backend behind the stdio client; a bridge
    # answers close, check_integrity or undeclared operations itself for a backend without them.
    h.judged_on_the_kit_side(*MODEL_OBSERVED)
    env = MachineEnv(
        target=h.target,
        capabilities=h.capabilities,
        root=h.root,
        codec_factory=codec,
        warnings=h.warnings,
        keep_stores=h.run.probe.external_storage,
    )
    run_machine(
        h,
        lambda: CheckpointerMachine(env),
        examples=h.profile.stateful_examples,
        steps=h.profile.stateful_steps,
    )


@check("SEQ-001", *MODEL_OBSERVED, kind="model")
def model_based(h: Harness) -> None:
    """SEQ-001: random operation sequences on several handles agree with SpecModel step by step."""
    run_model_based(h, None)


CHECKS = (
    seqs_are_contiguous_across_batches,
    parent_links_point_back,
    append_returns_the_new_head,
    stored_events_carry_id_and_utc_time,
    model_based,
)
