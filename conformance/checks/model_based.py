"""The model-based check: the state machine of `..stateful`, run under the profile's budget."""

from __future__ import annotations

from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from ...spec import Capability, Codec
from ..codecs import SealedCodec
from ..harness import Harness
from ..registry import check
from ..stateful import MachineEnv, make_machine

__all__: list[str] = []

_OBSERVED = (
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


def _run_machine(h: Harness, codec: type[Codec] | None) -> None:
    env = MachineEnv(
        backend=h.backend,
        capabilities=h.capabilities,
        root=h.root,
        codec_factory=codec,
        options=h.options,
        warnings=h.warnings,
    )
    # A failure's minimal sequence of steps arrives as notes on the RuleViolation,
    # which the runner prints with it.
    run_state_machine_as_test(
        seed(h.seed)(make_machine(env)),
        settings=settings(
            max_examples=h.profile.stateful_examples,
            stateful_step_count=h.profile.stateful_steps,
            deadline=None,
            database=None,
            print_blob=True,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        ),
    )


@check("SEQ-001", *_OBSERVED)
def model_based(h: Harness) -> None:
    """SEQ-001: random operation sequences on several handles agree with SpecModel step by step."""
    _run_machine(h, None)


@check("CODEC-001", *_OBSERVED, needs=[Capability.CODEC])
def model_based_with_codec(h: Harness) -> None:
    """CODEC-001: the same model-based run, with every payload passing through a codec."""
    _run_machine(h, SealedCodec)
