"""Does a failing run stay within its cap? A failure's shrinking stops at its check's share
of the budget, and nothing starts after the cap (engines/search/budget.py, driver.py).

Nothing here times the machine. The check-level tests give a check a slice that ends
the moment it finds a failure, and count the examples Hypothesis asked the slice for
after that: only the final replay of the failure may run. The slow test runs the whole
quick profile, capped at 60 s, on a backend whose bug Hypothesis shrinks for minutes
when let, and holds the run to one and a half times its cap.
"""

from __future__ import annotations

import pytest
from checkpointspec.conformance.engines.search.budget import Allowance, Slice
from checkpointspec.conformance.engines.search.replay import parse_reproduction
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.runner import run_check, run_kit
from kit_reports import describe, verdict

MODEL = "SEQ-001::model_based"
PROPERTY = "ARG-001::bad_session_ids_are_refused"


class Asked:
    """The examples a check's slice was asked to admit, as (round failed, final replay,
    admitted), recorded by `Slice.admits_example`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[bool, bool, bool]] = []
        admits = Slice.admits_example

        def recording(budget: Slice, final_replay: bool) -> bool:
            failed = budget.round_failed
            admitted = admits(budget, final_replay)
            self.calls.append((failed, final_replay, admitted))
            return admitted

        monkeypatch.setattr(Slice, "admits_example", recording)
        # A slice that ends the moment its check has found a failure, whatever the clock.
        monkeypatch.setattr(Slice, "spent", lambda budget: budget.round_failed)

    def after_the_failure(self) -> list[tuple[bool, bool]]:
        """(final replay, admitted) for each example asked for once a round had failed."""
        return [(final, admitted) for failed, final, admitted in self.calls if failed]


@pytest.mark.parametrize(
    ("check", "backend"),
    [
        (MODEL, "broken_backends:InclusiveSinceSeq.make"),
        (PROPERTY, "broken_backends:ReadTakesAnyId.make"),
    ],
)
def test_a_failure_found_as_the_slice_ends_is_reported_unshrunk_and_replays(
    monkeypatch: pytest.MonkeyPatch, check: str, backend: str
) -> None:
    asked = Asked(monkeypatch)
    run = plan_run(backend, profile="quick", seed=0, only=(check,))
    result = run_check(CHECKS_BY_NAME[check], run, allowance=Allowance(cap=60.0))
    assert result.status == "failed", result.detail
    assert result.violated_rule is not None, result.detail
    assert result.cut_short
    assert result.rounds == 1  # no exploration round starts after the slice
    # After the failure, only Hypothesis' final replay of it reached the backend; its
    # shrinking was asked for once and left out.
    assert asked.after_the_failure() == [(False, False), (True, True)]
    # What it reports replays alone.
    assert result.reproduce is not None
    replay = plan_run(
        backend,
        profile="quick",
        seed=0,
        only=(check,),
        reproduction=parse_reproduction(result.reproduce),
    )
    replayed = run_check(CHECKS_BY_NAME[check], replay)
    assert replayed.status == "failed", replayed.detail
    assert replayed.violated_rule == result.violated_rule
    # The same violation (its steps print the store's times, which differ).
    assert (replayed.detail or "").splitlines()[0] == (result.detail or "").splitlines()[0]


@pytest.mark.slow
def test_a_failing_quick_run_ends_within_its_cap() -> None:
    """A file backend whose head runs one ahead of its log: the model checks shrink
    their failure on a backend that writes through the file system, MP-001's writers
    conflict on every append. With a cap of 60 s the run ends within one and a half
    times it: shrinking stops at each check's share, nothing starts after the cap."""
    report = run_kit(
        plan_run(
            "hard_backends:HeadAheadOfAppend.make",
            profile="quick",
            seed=0,
            workers=2,
            budget=60.0,
        )
    )
    assert report.exit_status == 1, describe(report)
    assert verdict(report, "MP-001").status == "failed", describe(report)
    assert report.duration <= 1.5 * 60.0, describe(report)
