"""A backend whose answers differ between re-runs of the same calls is a finding, not a kit error.

Hypothesis replays a failing example to shrink and confirm it; on the backends of
`flaky_backends` the replay goes otherwise, and Hypothesis reports that the runs
differ (``Flaky``: ``FlakyFailure``, ``FlakyStrategyDefinition``). The model-based
check must still name the planted rule, and no check and no rule may read
``error``: that status is for the kit's own failures.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.report import KitReport
from flaky_backends import HandleFlipsStore
from kit_reports import MODEL_BASED, describe, verdict

SEEDS = (1, 2, 3)
"""Seed 1 is where the kit, reading Hypothesis' report as its own error, erred on every rule."""

pytestmark = pytest.mark.usefixtures("broken_backends_importable")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_backend_that_answers_differently_on_a_rerun_fails_its_rule(
    tmp_path: Path, seed: int
) -> None:
    report_file = tmp_path / "report.json"
    backend = f"flaky_backends:{HandleFlipsStore.__qualname__}.make"
    argv = ["run", backend, "--profile", "quick", "--seed", str(seed), "-q"]
    argv += ["--only", MODEL_BASED, "--report", str(report_file)]
    main(argv)
    report = msgspec.json.decode(report_file.read_bytes(), type=KitReport)
    errors = [c.name for c in report.checks if c.status == "error"]
    errors += [r.id for r in report.rules if r.status == "error"]
    assert not errors, describe(report)
    assert verdict(report, HandleFlipsStore.violates).status == "failed", describe(report)
