"""Do the crash checks at system-call precision find bugs in backends the kit cannot look inside?

Each backend of `crash_backends` does its I/O on the real file system with one
crash-safety bug, and none offers a simulated disk or fault points: the verdict
must come from the system calls alone (`checkpointspec.conformance.checks.durability_traced`).
``EventAtATime`` (a batch written one fsynced event at a time), which random
kills catch only by luck, must be caught on every seed, directly and through
the stdio protocol. The live holds (`checkpointspec.conformance.engines.crash.holds`)
must catch a SQLite saver that commits a batch one event at a time, as a reader
in another process (READ-003) and as a kill between two commits (KILL-001). The
reference SQLite and file backends must pass the same checks, so each verdict is
the bug's and not the check's.
"""

from __future__ import annotations

import shlex
import sys

import pytest
from checkpointspec.conformance.engines.crash.recorder import tracer_unavailable
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from crash_backends import (
    BatchInTwoUnsyncedPieces,
    NoDirectorySyncOnDisk,
    RenamesBeforeSync,
    SqliteNormalClaimsDurable,
    SqliteOffClaimsDurable,
)
from helpers import first_seed_fast
from kit_reports import describe, failed_checks, verdict

pytestmark = pytest.mark.skipif(
    tracer_unavailable() is not None, reason=f"cannot trace: {tracer_unavailable()}"
)

KILLS = "DUR-002::killed_at_every_system_call"
POWER_LOSS = "DUR-003::power_loss_after_every_system_call"
TRACED = [KILLS, POWER_LOSS]

CASES = [
    (f"crash_backends:{cls.__name__}.make", cls.violates)
    for cls in (
        NoDirectorySyncOnDisk,
        RenamesBeforeSync,
        BatchInTwoUnsyncedPieces,
        SqliteNormalClaimsDurable,
        SqliteOffClaimsDurable,
    )
] + [("hard_backends:EventAtATime.make", "APPEND-003")]

SLOW_SEEDS = range(2, 8)

HELD_KILL = "KILL-001::killed_after_every_system_call"
HELD_READ = "READ-003::read_while_a_writer_is_held"
HELD = [HELD_KILL, HELD_READ]
HELD_CASES = [
    ("crash_backends:SqliteEventPerCommit.make", HELD_READ, "READ-003"),
    ("crash_backends:SqliteEventPerCommit.make", HELD_KILL, "APPEND-003"),
    ("hard_backends:EventAtATime.make", HELD_KILL, "APPEND-003"),
]
needs_holding = pytest.mark.skipif(
    stopper_unavailable() is not None, reason=f"cannot hold processes: {stopper_unavailable()}"
)


def assert_caught(report: KitReport, rule_id: str) -> None:
    text = describe(report)
    assert report.exit_status == 1, text
    assert verdict(report, rule_id).status == "failed", text
    assert report.roots[:1] == (rule_id,), text
    (check, *_) = failed_checks(report, rule_id)
    assert "ops recorded, traced)" in check.detail, text
    assert check.name in TRACED, text


@pytest.mark.parametrize("seed", first_seed_fast([0, 1]))
@pytest.mark.parametrize(("target", "rule_id"), CASES, ids=[t.split(":")[1] for t, _ in CASES])
def test_a_crash_bug_is_caught_from_the_trace(target: str, rule_id: str, seed: int) -> None:
    assert_caught(run_kit(plan_run(target, profile="quick", seed=seed, only=TRACED)), rule_id)


def test_a_partial_batch_in_a_kill_state_fails_the_kill_rows() -> None:
    """The DUR-002 check's own kill states show the partial batch: APPEND-003 is broken,
    and neither DUR-002 nor KILL-001 (a killed writer left its write half-done) reads
    passed."""
    report = run_kit(
        plan_run("hard_backends:EventAtATime.make", profile="quick", seed=0, only=[KILLS])
    )
    text = describe(report)
    assert verdict(report, "APPEND-003").status == "failed", text
    assert verdict(report, "DUR-002").status == "failed", text
    assert verdict(report, "KILL-001").status in ("failed", "skipped"), text


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_batch_written_in_pieces_is_caught_through_stdio() -> None:
    served = "hard_backends:EventAtATime.make"
    serve = shlex.join([sys.executable, "-m", "checkpointspec.backends.stdio.serve", served])
    report = run_kit(plan_run(None, process=serve, profile="quick", seed=0, only=[KILLS]))
    assert_caught(report, "APPEND-003")


# Slow (10-20 s a run): `tox -e conformance`, part of the README's test command,
# runs these checks on the reference backends.
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_the_reference_backends_pass_the_traced_checks(backend: str, seed: int) -> None:
    report = run_kit(plan_run(backend, profile="quick", seed=seed, only=TRACED))
    assert report.exit_status == 0, describe(report)
    for check in report.checks:
        assert check.status == "passed", describe(report)
        assert check.detail.startswith("checked "), describe(report)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_the_reference_backends_pass_the_traced_checks_for_more_seeds(
    backend: str, seed: int
) -> None:
    report = run_kit(plan_run(backend, profile="quick", seed=seed, only=TRACED))
    assert report.exit_status == 0, describe(report)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize(("target", "rule_id"), CASES, ids=[t.split(":")[1] for t, _ in CASES])
def test_a_crash_bug_is_caught_for_more_seeds(target: str, rule_id: str, seed: int) -> None:
    assert_caught(run_kit(plan_run(target, profile="quick", seed=seed, only=TRACED)), rule_id)


@needs_holding
@pytest.mark.parametrize("seed", first_seed_fast([0, 1]))
@pytest.mark.parametrize(
    ("target", "check", "rule_id"),
    HELD_CASES,
    ids=[f"{t.split(':')[1]}-{c.split('::')[0]}" for t, c, _ in HELD_CASES],
)
def test_a_writer_held_at_a_system_call_shows_the_bug(
    target: str, check: str, rule_id: str, seed: int
) -> None:
    report = run_kit(plan_run(target, profile="quick", seed=seed, only=[check]))
    text = describe(report)
    assert report.exit_status == 1, text
    (failed, *_) = failed_checks(report, rule_id)
    assert failed.name == check, text
    assert "right after" in failed.detail, text


@pytest.mark.usefixtures("broken_backends_importable")
@needs_holding
def test_a_reader_sees_a_half_committed_batch_through_stdio() -> None:
    served = "crash_backends:SqliteEventPerCommit.make"
    serve = shlex.join([sys.executable, "-m", "checkpointspec.backends.stdio.serve", served])
    report = run_kit(plan_run(None, process=serve, profile="quick", seed=0, only=[HELD_READ]))
    assert report.exit_status == 1, describe(report)
    assert failed_checks(report, "READ-003"), describe(report)


@needs_holding
# Slow (10-20 s a run): `tox -e conformance`, part of the README's test command,
# runs these checks on the reference backends.
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_the_reference_backends_pass_the_holds(backend: str, seed: int) -> None:
    report = run_kit(plan_run(backend, profile="quick", seed=seed, only=HELD))
    assert report.exit_status == 0, describe(report)
    for check in report.checks:
        assert check.status == "passed", describe(report)
        assert "right after 8 different system calls" in check.detail, describe(report)


@needs_holding
@pytest.mark.parametrize("seed", first_seed_fast([0, 1]))
def test_a_restore_killed_at_a_system_call_shows_a_recovery_that_picks_the_wrong_side(
    seed: int,
) -> None:
    """The layer rolls files back even after the log's truncate committed: a kill right
    after the commit's rename shows files from before beside a log from after."""
    report = run_kit(
        plan_run(
            "file",
            suite="session",
            session_layer="broken_session:RecoverAlwaysRollsBack",
            profile="quick",
            seed=seed,
            only=["RESTORE-006::restore_killed_after_every_system_call"],
        )
    )
    assert report.exit_status == 1, describe(report)
    (failed,) = failed_checks(report, "RESTORE-006")
    assert "killed right after system call" in failed.detail, describe(report)


def test_a_store_file_mapped_writable_is_named_not_passed() -> None:
    report = run_kit(
        plan_run("crash_backends:MapsAnIndex.make", profile="quick", seed=0, only=TRACED)
    )
    for check in report.checks:
        assert check.status == "skipped", describe(report)
        assert "maps store files shared and writable (index.map)" in check.reason, describe(report)
    declared = run_kit(
        plan_run("crash_backends:MapsADeclaredIndex.make", profile="quick", seed=0, only=TRACED)
    )
    assert [c.status for c in declared.checks] == ["passed", "passed"], describe(declared)


HELD_COMPACTION = "KILL-001::compaction_killed_after_every_system_call"


@needs_holding
@pytest.mark.parametrize("seed", first_seed_fast([0, 1]))
def test_a_compaction_killed_at_a_system_call_must_leave_the_session_free(seed: int) -> None:
    """A backend whose maintenance lock outlives a dead holder: a compaction killed
    while it holds the session leaves it held, and the next compaction is refused."""
    report = run_kit(
        plan_run(
            "hard_backends:LockOutlivesHolder.make",
            profile="quick",
            seed=seed,
            only=[HELD_COMPACTION],
        )
    )
    assert report.exit_status == 1, describe(report)
    (failed,) = failed_checks(report, "KILL-001")
    assert "another compaction of the session raised SessionLockedError" in failed.detail


@needs_holding
@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_the_reference_backends_survive_killed_compactions(backend: str) -> None:
    report = run_kit(plan_run(backend, profile="quick", seed=0, only=[HELD_COMPACTION]))
    assert report.exit_status == 0, describe(report)
    (check,) = report.checks
    assert check.status == "passed", describe(report)
    assert check.detail.startswith("killed compactions right after "), describe(report)
