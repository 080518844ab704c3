"""The RESTORE-006 kit checks pass the reference restore and catch broken ones.

The broken session layers are modules beside this file (``restore_layer_*``),
loaded by name as the kit loads any session layer, also in its child processes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from checkpointspec.backends.registry import resolve_backend
from checkpointspec.conformance.checks import restoring_killed
from checkpointspec.conformance.checks.base import Check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.crash.killed_layer_run import load_layer
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.run.kit_run import BackendProbe, KitRun
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.spec import Capability

REFERENCE = "checkpointspec.reference"


def _run(check: Check, tmp_path: Path, layer: str, backend: str = "file") -> None:
    ref = resolve_backend(backend)
    caps = frozenset({Capability.TRUNCATE, Capability.DURABLE})
    run = KitRun(
        backend=ref,
        probe=BackendProbe(caps, has_hooks=False),
        profile=PROFILES["quick"],
        seed=7,
        suite="session",
        session_layer=layer,
    )
    h = Harness(run, tmp_path)
    h.session = load_layer(layer)

    async def go() -> None:
        try:
            result = check.func(h)
            if result is not None:
                await result
        finally:
            await h.close_all()

    asyncio.run(go())


def test_the_reference_restore_survives_power_loss(tmp_path: Path) -> None:
    _run(restoring_killed.restore_survives_power_loss, tmp_path, REFERENCE)


BROKEN = ["restore_layer_no_journal", "restore_layer_always_back", "restore_layer_no_op:NoOp"]


@pytest.mark.parametrize("layer", BROKEN)
def test_power_loss_catches_a_broken_restore(tmp_path: Path, layer: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        _run(restoring_killed.restore_survives_power_loss, tmp_path, layer)
    assert caught.value.rule_id == "RESTORE-006"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "sqlite"])
def test_the_reference_restore_survives_kills(tmp_path: Path, backend: str) -> None:
    _run(restoring_killed.killed_restore_recovers, tmp_path, REFERENCE, backend)


@pytest.mark.slow
@pytest.mark.parametrize("layer", BROKEN)
def test_kills_catch_a_broken_restore(tmp_path: Path, layer: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        _run(restoring_killed.killed_restore_recovers, tmp_path, layer)
    assert caught.value.rule_id == "RESTORE-006"
