"""The session machine accepts a correct session layer and names the rule a broken one breaks.

The machine (conformance/engines/machines/session.py) runs on the memory and file
backends with the reference session layer, with a layer written straight from
the spec's oracles (``session_standin``, which owes nothing to the reference),
and with broken variants of the latter, each breaking one rule. A broken layer
runs without shrinking (a failing run is reported as found), so
that these tests stay quick; one test shrinks, to show a failure reads as the
calls that led to it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import checkpointspec.reference
import msgspec
import pytest
import session_standin
from checkpointspec.backends.registry import BackendRef, BackendTarget, resolve_backend
from checkpointspec.conformance.checks.session_model import (
    CHECKS,
    run_session_machine,
    session_model_based,
    session_model_without_restore,
)
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.harness import CheckSkipped, Harness
from checkpointspec.conformance.engines.run.kit_run import KitRun
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.running.plan import probe_backend
from checkpointspec.spec import (
    Capability,
    Checkpointer,
    FileSnapshot,
    Message,
    RuntimeReminder,
    SessionLayer,
    StoredEvent,
    UserPrompt,
    checkpoints_model,
    make_snapshot,
)
from helpers import first_seed_fast

# The project's broken session layers live beside the kit's other quality cases.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality"))
import broken_session

REFERENCE: SessionLayer = checkpointspec.reference


def harness(
    backend: str | BackendRef, root: Path, seed: int = 0, profile: str = "quick"
) -> Harness:
    ref = resolve_backend(backend) if isinstance(backend, str) else backend
    run = KitRun(
        backend=ref,
        probe=probe_backend(BackendTarget(ref)),
        profile=PROFILES[profile],
        seed=seed,
        suite="session",
    )
    return Harness(run, root)


def layer(**replaced: Any) -> SimpleNamespace:
    """The stand-in session layer with some of its names replaced."""
    names = {name: getattr(session_standin, name) for name in session_standin.__all__}
    return SimpleNamespace(**{**names, **replaced})


def violation(h: Harness, broken: object, *, shrink: bool = False) -> RuleViolation:
    """The first violation the machine finds on ``broken`` (it records each and explores
    on, `Harness.findings`). The broken-layer tests give it the default profile's
    budget: an out-of-band edit before a restore takes several steps."""
    run_session_machine(
        h,
        cast(SessionLayer, broken),
        restores=Capability.TRUNCATE in h.capabilities,
        shrink=shrink,
    )
    assert h.findings, "the machine found nothing"
    return h.findings[0].violation


# -- a correct layer passes -----------------------------------------------------------


@pytest.mark.parametrize("seed", first_seed_fast([0, 1, 2]))
# On the file backend in the slow tier: `tox -e conformance` runs the session suite
# on every reference backend.
@pytest.mark.parametrize("backend", ["memory", pytest.param("file", marks=pytest.mark.slow)])
def test_a_correct_layer_passes(backend: str, seed: int, tmp_path: Path) -> None:
    run_session_machine(harness(backend, tmp_path, seed), layer(), restores=True)


@pytest.mark.parametrize("seed", first_seed_fast([0, 1, 2]))
# On the file backend in the slow tier: `tox -e conformance` runs the session suite
# on every reference backend.
@pytest.mark.parametrize("backend", ["memory", pytest.param("file", marks=pytest.mark.slow)])
def test_the_reference_layer_passes(backend: str, seed: int, tmp_path: Path) -> None:
    run_session_machine(harness(backend, tmp_path, seed), REFERENCE, restores=True)


# Two in the default run, one fold bug and one workspace bug, the rest in the slow
# tier, where the session meta-suite (quality/session_cases.py) also runs every layer
# through the kit.
_SLOW_LAYER = pytest.mark.slow


@pytest.mark.parametrize(
    "name",
    [
        "RemindersArePrompts",
        pytest.param("RemindersAreCheckpoints", marks=_SLOW_LAYER),
        pytest.param("FollowsSymlinks", marks=_SLOW_LAYER),
        "WritesWhenRecordingFails",
        pytest.param("OverwritesOutOfBandChanges", marks=_SLOW_LAYER),
        pytest.param("FilesFlagIgnored", marks=_SLOW_LAYER),
        pytest.param("AlwaysSummarises", marks=_SLOW_LAYER),
        pytest.param("SummaryWithoutExpectedHead", marks=_SLOW_LAYER),
    ],
)
def test_the_kits_broken_layers_are_caught(name: str, tmp_path: Path) -> None:
    """Broken layers of tests/quality/broken_session.py, each the reference with one bug:
    the machine names the rule it breaks."""
    broken = broken_session.BROKEN_LAYERS[name]
    found = violation(harness("memory", tmp_path, profile="default"), broken)
    assert found.rule_id == broken.violates, found


def test_without_truncate_the_machine_leaves_restores_out(tmp_path: Path) -> None:
    restores: list[int] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        restores.append(1)
        return await session_standin.restore(*args, **kwargs)

    h = harness(BackendRef("no-truncate", "session_standin:make_without_truncate"), tmp_path)
    assert Capability.TRUNCATE not in h.capabilities
    run_session_machine(h, layer(restore=counted), restores=False)
    assert restores == []


def test_the_second_check_runs_only_without_truncate(tmp_path: Path) -> None:
    """RESTORE-001 needs TRUNCATE (the kit skips it otherwise); the FOLD-001 check covers the rest."""
    assert session_model_based.needs == {Capability.TRUNCATE}
    assert session_model_without_restore.needs == frozenset()
    with pytest.raises(CheckSkipped, match="RESTORE-001::session_model_based"):
        session_model_without_restore.func(harness("memory", tmp_path))


def test_the_checks_are_named_after_their_rules() -> None:
    assert [c.name for c in CHECKS] == [
        "RESTORE-001::session_model_based",
        "FOLD-001::session_model_without_restore",
    ]
    assert {"FOLD-005", "CKPT-002", "SNAP-001", "COMPACT-004", "RESTORE-003"} <= set(
        session_model_based.rules
    )
    assert not any(r.startswith("RESTORE") for r in session_model_without_restore.rules)


# -- broken layers are caught, naming the rule ----------------------------------------


def fold_without_reminders(events: Iterable[StoredEvent]) -> list[Message]:
    return session_standin.fold(e for e in events if not isinstance(e.event, RuntimeReminder))


def fold_showing_snapshots(events: Iterable[StoredEvent]) -> list[Message]:
    """Shows each file snapshot as a message of its own (splitting tool results, too)."""
    return session_standin.fold(
        StoredEvent(s.seq, s.session_id, s.parent_seq, s.ts, RuntimeReminder(s.event.path))
        if isinstance(s.event, FileSnapshot)
        else s
        for s in events
    )


async def checkpoints_of_reminders_too(cp: Checkpointer, session_id: str) -> list[Any]:
    """Lists reminders as checkpoints, as a layer guessing user input from roles would."""
    log = [
        StoredEvent(s.seq, s.session_id, s.parent_seq, s.ts, UserPrompt(s.event.text))
        if isinstance(s.event, RuntimeReminder)
        else s
        async for s in cp.read(session_id)
    ]
    return checkpoints_model(log)


async def compact_ignoring_cancel(*args: Any, cancel: object = None, **kwargs: Any) -> Any:
    async for progress in session_standin.compact(*args, **kwargs):
        yield progress


class HashlessWorkspace(session_standin.Workspace):
    """Records writes without hash_after, so that no out-of-band edit can be noticed."""

    async def write(
        self, path: str, content: bytes | str, *, tool_call_id: str | None = None
    ) -> FileSnapshot:
        key = self.resolve(path)
        data = content.encode() if isinstance(content, str) else content
        snapshot = make_snapshot(
            key, self.read(key), data, limit=self.snapshot_limit, tool_call_id=tool_call_id
        )
        snapshot = msgspec.structs.replace(snapshot, hash_after=None)
        await self.checkpointer.append(self.session_id, [snapshot])
        (self.root / key).parent.mkdir(parents=True, exist_ok=True)
        (self.root / key).write_bytes(data)
        return snapshot


@pytest.mark.parametrize(
    ("broken", "rule_id"),
    [
        (layer(fold=fold_without_reminders), "FOLD-005"),
        (layer(fold=fold_showing_snapshots), "FOLD-004"),
        (layer(list_checkpoints=checkpoints_of_reminders_too), "CKPT-001"),
        (
            layer(restore=functools.partial(session_standin.restore, check_out_of_band=False)),
            "RESTORE-003",
        ),
        (layer(compact=compact_ignoring_cancel), "COMPACT-004"),
        (layer(Workspace=HashlessWorkspace), "SNAP-001"),
    ],
    ids=[
        "fold-drops-reminders",
        "fold-shows-snapshots",
        "reminders-are-checkpoints",
        "restore-skips-out-of-band",
        "compact-ignores-cancel",
        "snapshots-without-hash",
    ],
)
# The same broken layer on the file backend repeats the memory verdict: slow tier.
@pytest.mark.parametrize("backend", ["memory", pytest.param("file", marks=pytest.mark.slow)])
def test_a_broken_layer_is_caught(
    broken: SimpleNamespace, rule_id: str, backend: str, tmp_path: Path
) -> None:
    found = violation(harness(backend, tmp_path, profile="default"), broken)
    assert found.rule_id == rule_id, found


def test_a_shrunk_failure_reads_as_the_calls_made(tmp_path: Path) -> None:
    found = violation(harness("memory", tmp_path), layer(fold=fold_without_reminders), shrink=True)
    assert found.rule_id == "FOLD-005"
    steps = "\n".join(getattr(found, "__notes__", []))
    assert "state.runtime_message(kind='reminder')" in steps, steps
    assert "append(RuntimeReminder, expected_head=" in steps, steps
