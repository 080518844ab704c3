"""Whatever a backend answers, every check ends in a verdict, never in the kit's own error.

The backends of `wrong_answers` give well-typed wrong answers at random, one
kind per run (``--option wrong=KIND``): listings with sessions dropped or
duplicated, heads off by one, reads with events missing, wrong seqs and fields,
the wrong error type, None, an operation that never returns. The kit runs on
them through its CLI (``checkpointspec run ... --report``), and every check in
the report must be ``passed``, ``failed``, ``skipped`` or ``not_checked``: an
``error`` is a check that tripped over a wrong answer (a ``KeyError`` on a
listing, an ``IndexError`` on a short read) instead of naming the rule it breaks.
A failure prints each errored check's reason, detail and replay command.

The default run covers the in-process checks on the memory backend for a few
kinds; the ``slow`` tests every kind over several seeds, every kind on the
SQLite backend with the checks memory cannot run (durability, kills, worker
processes, store hooks, codecs; ``hang`` strikes in worker processes only: see
`wrong_answers`), and every in-process kind under the session suite, whose
checks read the backend through the session layer.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.report import KitReport
from kit_reports import describe
from wrong_answers import IN_PROCESS_KINDS, KINDS, WrongMemory, WrongSqlite

MEMORY = f"wrong_answers:{WrongMemory.__qualname__}.make"
SQLITE = f"wrong_answers:{WrongSqlite.__qualname__}.make"

FAST_KINDS = ("head", "read_events", "errors", "none")
"""The kinds the default run tries, on one seed each."""

SLOW_SEEDS = range(1, 6)

VERDICTS = frozenset({"passed", "failed", "skipped", "not_checked"})

pytestmark = pytest.mark.usefixtures("broken_backends_importable")


OUT_OF_PROCESS = (
    "DUR-",
    "KILL-",
    "MP-",
    "MAINT-004",
    "READ-003::read_while_a_writer_is_held",
    "SCHEMA-",
    "INTEG-002",
    "CODEC-",
)
"""The checks the memory backend cannot run (durability, worker processes, store
hooks, codecs): what the SQLite backend adds to the memory backend's runs."""


def run_cli(
    tmp_path: Path,
    backend: str,
    kind: str,
    seed: int,
    *,
    rate: float | None = None,
    only: tuple[str, ...] = (),
    suite: str = "storage",
) -> KitReport:
    """``checkpointspec run BACKEND --profile quick`` with the kind and seed of wrong
    answers, and its JSON report."""
    report = tmp_path / f"{suite}-{kind}-{seed}.json"
    argv = ["run", backend, "--suite", suite, "--profile", "quick", "--seed", str(seed), "-q"]
    argv += ["--option", f"wrong={kind}", "--option", f"wrong_seed={seed}"]
    if rate is not None:
        argv += ["--option", f"wrong_rate={rate}"]
    for prefix in only:
        argv += ["--only", prefix]
    status = main([*argv, "--report", str(report)])
    kit_report = msgspec.json.decode(report.read_bytes(), type=KitReport)
    assert status == kit_report.exit_status, describe(kit_report)
    return kit_report


def errors_of(report: KitReport) -> str:
    """Each check that ended in the kit's own error: its reason, detail and replay."""
    return "\n\n".join(
        f"{c.name}: {c.reason}\n{c.detail}\nreplay: {c.replay}"
        for c in report.checks
        if c.status not in VERDICTS
    )


def assert_only_verdicts(report: KitReport, kind: str) -> None:
    """Every check ended in a verdict; the wrong answers of ``kind`` were seen (some check failed)."""
    errors = errors_of(report)
    assert not errors, f"wrong answers of kind {kind!r} ({KINDS[kind]}) made the kit err:\n{errors}"
    assert any(c.status == "failed" for c in report.checks), (
        f"no check failed on wrong answers of kind {kind!r}: were any given?\n{describe(report)}"
    )


def test_the_wrapper_alone_passes(tmp_path: Path) -> None:
    # With no call struck, the wrapped reference passes: every failure below is a wrong answer's.
    report = run_cli(tmp_path, MEMORY, "listing", 0, rate=0.0)
    assert report.exit_status == 0, describe(report)


@pytest.mark.parametrize("kind", FAST_KINDS)
def test_wrong_answers_end_in_verdicts(tmp_path: Path, kind: str) -> None:
    assert_only_verdicts(run_cli(tmp_path, MEMORY, kind, 0), kind)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("kind", IN_PROCESS_KINDS)
def test_wrong_answers_end_in_verdicts_for_many_seeds(tmp_path: Path, kind: str, seed: int) -> None:
    assert_only_verdicts(run_cli(tmp_path, MEMORY, kind, seed), kind)


SILENT_WORKER = (
    "a worker that never answers ends READ-003's held read and the KILL-001 holds in "
    "WorkerHung, the kit's error: their waits have a deadline but no verdict when it passes"
)


def _in_processes(kind: str) -> object:
    marks = [pytest.mark.xfail(reason=SILENT_WORKER)] if kind == "hang" else []
    return pytest.param(kind, id=kind, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [_in_processes(kind) for kind in KINDS])
def test_wrong_answers_end_in_verdicts_in_processes(tmp_path: Path, kind: str) -> None:
    assert_only_verdicts(run_cli(tmp_path, SQLITE, kind, 0, only=OUT_OF_PROCESS), kind)


@pytest.mark.slow
@pytest.mark.parametrize("kind", IN_PROCESS_KINDS)
def test_wrong_answers_end_in_verdicts_in_the_session_suite(tmp_path: Path, kind: str) -> None:
    # The session layer runs on the backend: what it reads is the backend's answer too.
    report = run_cli(tmp_path, MEMORY, kind, 0, suite="session")
    errors = errors_of(report)
    assert not errors, f"wrong answers of kind {kind!r} ({KINDS[kind]}) made the kit err:\n{errors}"
