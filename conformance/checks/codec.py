"""Checks of the CODEC rules: round-trips, encode and decode faults, no plaintext fallback, no plaintext at rest; and the model-based check through a codec."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from ...spec import Capability, CodecError
from ..engines.contract.outcomes import Err, run_backend
from ..engines.run.harness import Harness, read_all
from ..engines.target.fault_codecs import CorruptingCodec, FailingCodec, SealedCodec
from ._support import expect, expect_error, fingerprint, snapshot, unchanged
from .base import check
from .sequence import MODEL_OBSERVED, run_model_based

__all__ = ["CHECKS"]

CANARY = "canary-7f3e-plaintext-must-not-appear"


@check("CODEC-001")
async def payloads_round_trip_through_the_codec(h: Harness) -> None:
    """CODEC-001: events round-trip through the codec, also after reopening with the same codec."""
    codec = SealedCodec()
    cp = await h.open(codec=codec)
    events = [h.prompt(f"secret {i} {CANARY}") for i in range(5)]
    await cp.append("s", events)
    expect(
        [s.event for s in await read_all(cp, "s")] == events,
        "CODEC-001",
        "events changed through the codec",
    )
    await cp.close()
    again = await h.open(codec=SealedCodec())
    expect(
        [s.event for s in await read_all(again, "s")] == events,
        "CODEC-001",
        "events changed after reopen",
    )


@check("CODEC-002", "APPEND-003")
async def encode_failure_writes_nothing(h: Harness) -> None:
    """CODEC-002: an encode failure on any event of a batch raises CodecError; nothing is written."""
    for fails_at in (1, 2, 3):
        store = h.new_store()
        codec = FailingCodec()
        cp = await h.open(store, codec)
        await cp.append("s", [h.prompt("first")])
        before = await snapshot(cp, ["s"])
        codec.encode_calls, codec.encode_fails_at = 0, fails_at
        batch = [h.prompt(f"b{i}") for i in range(3)]
        await expect_error(
            partial(cp.append, "s", batch),
            CodecError,
            "CODEC-002",
            f"append whose encode call {fails_at} fails",
        )
        await unchanged(cp, before, "CODEC-002", f"a batch whose encode call {fails_at} failed")
        expect(await cp.head("s") == 1, "CODEC-002", "the head moved after a failed encode")
        await cp.close()


async def _written(h: Harness, path: Path) -> list[object]:
    cp = await h.open(path, SealedCodec())
    events = [h.prompt(f"stored {i} " + "y" * 64) for i in range(12)]
    await cp.append("s", events[:6])
    await cp.append("s", events[6:])
    await cp.close()
    return list(events)


@check("CODEC-003")
async def decode_failure_is_raised_not_repaired(h: Harness) -> None:
    """CODEC-003: a decode failure raises CodecError and leaves every byte of the store unchanged."""
    for fails_from in (1, 7, 12):
        store = h.new_store()
        events = await _written(h, store)
        before = fingerprint(store)
        cp = await h.open(store, FailingCodec(decode_fails_from=fails_from))
        await expect_error(
            partial(read_all, cp, "s"),
            CodecError,
            "CODEC-003",
            f"read whose decode call {fails_from} fails",
        )
        await cp.close()
        expect(
            fingerprint(store) == before,
            "CODEC-003",
            f"a failed decode (call {fails_from}) changed the store's files",
        )
        healthy = await h.open(store, SealedCodec())
        got = [s.event for s in await read_all(healthy, "s")]
        expect(
            got == events,
            "CODEC-003",
            f"after a failed decode, {len(got)} of {len(events)} events are left",
        )
        await healthy.close()


@check("CODEC-004")
async def no_plaintext_fallback(h: Harness) -> None:
    """CODEC-004: a wrong key or a corrupting codec raises CodecError; nothing is returned as plaintext."""
    store = h.new_store()
    await _written(h, store)
    before = fingerprint(store)
    for name, codec in (
        ("a wrong key", SealedCodec(b"another key")),
        ("a corrupting codec", CorruptingCodec()),
    ):
        cp = await h.open(store, codec)
        outcome = await run_backend(partial(read_all, cp, "s"))
        expect(
            isinstance(outcome, Err) and isinstance(outcome.error, CodecError),
            "CODEC-004",
            f"reading with {name} gave {outcome if isinstance(outcome, Err) else f'{len(outcome.value)} events'}; expected CodecError",
        )
        await cp.close()
    expect(fingerprint(store) == before, "CODEC-003", "failed decodes changed the store's files")


@check("CODEC-005")
async def no_plaintext_at_rest(h: Harness) -> None:
    """CODEC-005: with a codec configured, no payload text appears in any file under the store."""
    cp = await h.open(codec=SealedCodec())
    await cp.append(f"session-{CANARY[:6]}", [h.prompt(f"{CANARY} {i}") for i in range(50)])
    await cp.close()
    needle = CANARY.encode()
    found = [
        os.path.relpath(os.path.join(d, f), h.path)
        for d, _, files in os.walk(h.path)
        for f in files
        if needle in Path(d, f).read_bytes()
    ]
    expect(not found, "CODEC-005", f"plaintext payload found in {found}")


@check("CODEC-001", *MODEL_OBSERVED, needs=[Capability.CODEC], kind="model")
def model_based_with_codec(h: Harness) -> None:
    """CODEC-001: the same model-based run, with every payload passing through a codec."""
    run_model_based(h, SealedCodec)


CHECKS = (
    payloads_round_trip_through_the_codec,
    encode_failure_writes_nothing,
    decode_failure_is_raised_not_repaired,
    no_plaintext_fallback,
    no_plaintext_at_rest,
    model_based_with_codec,
)
