"""The model-based check of the session layer, named after RESTORE-001.

`SessionMachine` plays one session and a real workspace through the session
layer (``h.session``) on top of the backend under test, and compares the log,
its fold, its checkpoints and the workspace with the spec's models after every
step; restores and compactions are predicted by the spec's oracles.

Restores need TRUNCATE. The check is named after RESTORE-001, so the kit skips
it on a backend that does not declare TRUNCATE; the same machine then runs
without restores as ``FOLD-001::session_model_without_restore``, so that the
fold, checkpoint, snapshot and compaction rules are still judged on top of it.
On a backend with TRUNCATE that second check skips itself: the first covers it.
"""

from __future__ import annotations

from ...spec import Capability, SessionLayer
from ..engines.machines.session import SessionMachine, SessionMachineEnv
from ..engines.run.harness import CheckSkipped, Harness
from ..engines.search.stateful import run_machine
from .base import check

__all__ = ["CHECKS", "SESSION_MODEL_OBSERVED", "run_session_machine"]

SESSION_MODEL_OBSERVED = (
    "FOLD-001",
    "FOLD-002",
    "FOLD-003",
    "FOLD-004",
    "FOLD-005",
    "FOLD-006",
    "CKPT-001",
    "CKPT-002",
    "CKPT-003",
    "SNAP-001",
    "SNAP-002",
    "SNAP-003",
    "SNAP-004",
    "COMPACT-001",
    "COMPACT-002",
    "COMPACT-003",
    "COMPACT-004",
    "COMPACT-005",
)
"""The rules the session machine judges on every backend, restores or not."""

RESTORE_OBSERVED = ("RESTORE-002", "RESTORE-003", "RESTORE-004", "RESTORE-006", "RESTORE-007")
"""The restore rules it judges besides RESTORE-001 (RESTORE-006: recover finds nothing to do)."""


def run_session_machine(
    h: Harness, layer: SessionLayer, *, restores: bool, shrink: bool = True
) -> None:
    """Run `SessionMachine` on ``layer`` over the harness's backend, under its seed and profile."""
    env = SessionMachineEnv(
        target=h.target,
        capabilities=h.capabilities,
        root=h.root,
        layer=layer,
        restores=restores,
        keep_stores=h.run.probe.external_storage,
    )
    run_machine(
        h,
        lambda: SessionMachine(env),
        examples=h.profile.stateful_examples,
        steps=h.profile.stateful_steps,
        shrink=shrink,
    )


@check("RESTORE-001", *RESTORE_OBSERVED, *SESSION_MODEL_OBSERVED, kind="model")
def session_model_based(h: Harness) -> None:
    """RESTORE-001: random sessions with a real workspace agree with the spec's models step by step."""
    run_session_machine(h, h.session, restores=True)


@check("FOLD-001", *SESSION_MODEL_OBSERVED, kind="model")
def session_model_without_restore(h: Harness) -> None:
    """FOLD-001: without TRUNCATE, random sessions (no restores) agree with the spec's models."""
    if h.has(Capability.TRUNCATE):
        raise CheckSkipped("RESTORE-001::session_model_based runs this machine with restores")
    run_session_machine(h, h.session, restores=False)


CHECKS = (session_model_based, session_model_without_restore)
