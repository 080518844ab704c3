"""Does the kit find bugs? Every backend in `broken_backends` must be rejected.

Each broken backend has one bug and names the rule it breaks (``violates``).
The kit, run on it with a fixed seed, must exit 1 and report that rule failed,
with a replay command that reruns the failing check with that seed. Each run
is restricted to the checks its case names (`cases.MEMORY_CASES`: the checks
named after the broken rule, unless the case says otherwise), which keeps it
fast; the cases that start processes run with the ``slow`` tests. A few tests
run the whole kit, in this process and in spawned ones. The ``slow`` tests also
repeat every verdict over many seeds and check that the whole kit, and its
model-based check alone, blame the right rule.

``BLAMED_BY_THE_MACHINE`` lists bugs whose attribution by the model-based check
is checked over several seeds.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import msgspec
import pytest
from cases import MEMORY_CASES, SEED, Case
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.backends.stdio.messages import Reply
from checkpointspec.conformance.engines.processes.client import hello, worker_argv
from checkpointspec.conformance.engines.processes.messages import AppendBatches, KitReply
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from clock_backends import CLOCK_BACKENDS
from kit_reports import MODEL_BASED, describe, failed_checks, failed_rules, verdict

SLOW_SEEDS = range(100, 130)

SOMETIMES: dict[str, float] = {
    "StripsText": 0.4,
    "DropsToolCalls": 0.7,
}
"""Bugs only some generated inputs show, and the least share of seeds that must catch them.

Only the EVENT-001 property check finds these, when one of its 40 examples (quick
profile) holds a text with surrounding whitespace, or an assistant message with
tool_calls; it has no @example that always does. Which examples a seed gives also
depends on the project modules loaded (Hypothesis draws constants from them), so
per-seed verdicts are not stable and only the share is asserted. Measured on
seeds 0-99 in a fresh interpreter: 74 and 93 caught.
"""

RETRY_SEEDS = (SEED, 1, 2, 3, 4, 5, 6, 7)
"""Seeds tried in turn, in the default run, for a bug in `SOMETIMES`."""

CLEAN_ATTRIBUTION: dict[str, frozenset[str]] = {
    "CaseInsensitiveIds": frozenset({"ID-001"}),
    "ClosedHandleWorks": frozenset({"MAINT-003"}),
    "IgnoresExpectedGeneration": frozenset(),
    "IntegrityFlagsDeletedSessions": frozenset(),
    "ListsOldestFirst": frozenset(),
    "NaiveTimestamps": frozenset(),
    "RacyExpectedHead": frozenset(),
    "SlashFoldedIds": frozenset({"ID-001"}),
    "TruncateClampsToHead": frozenset(),
    "TruncateIgnoresExpectedHead": frozenset(),
}
"""Bugs the whole kit blames on their rule, the model-based check included, and
the other rules the bug also breaks, which the kit may blame too.

A folding key scheme also loses one of two folded ids from the listing (ID-001)
when the ID-001 property check happens to draw both. A close that does nothing
also keeps the handle's maintenance locks (MAINT-003).
"""

BLAMED_BY_THE_MACHINE = ("CloseShutsTheStore", "NonAtomicBatch", "StorePerHandle")
"""Bugs whose evidence the model-based check could pin on a neighbouring rule.

A store per handle reads as a READ-001 miss unless the machine asks the handle
that wrote the event; events left by a refused append read as a seq mismatch
unless the machine remembers where every event came from. The slow test checks
the attribution on several seeds: which seeds reach a bug drifts with
Hypothesis' draws. (``DeleteKeepsEvents`` is attributed the same way, to
DELETE-002, but shrinking its examples takes minutes per seed.)
"""
ATTRIBUTION_SEEDS = range(1, 7)

CLOCK_SEEDS = range(1, 11)
"""The seeds on which a coarse clock's ties must be judged the same (`clock_backends`)."""

CASES = {case.name: case for case in MEMORY_CASES}


def _target(name: str) -> str:
    return CASES[name].target


def _run(case: Case, seed: int = SEED) -> KitReport:
    """The kit on one broken backend, restricted to the checks of its case."""
    return run_kit(plan_run(case.target, profile="quick", seed=seed, only=case.checks))


def _rejects(report: KitReport, rule_id: str) -> bool:
    return verdict(report, rule_id).status == "failed"


def assert_rejected(report: KitReport, rule_id: str) -> None:
    """Exit status 1, ``rule_id`` failed as the first root and first row of the table, and
    every failure replayable with the run's seed."""
    text = describe(report)
    assert report.exit_status == 1, text
    assert _rejects(report, rule_id), text
    assert failed_checks(report, rule_id), text
    # Named at its root: the planted rule leads the roots and the table.
    assert report.roots[:1] == (rule_id,), text
    assert report.rules[0].id == rule_id, text
    for check in failed_checks(report):
        assert f"--seed {report.seed}" in check.replay, text
        assert f"--only {check.name}" in check.replay, text
        assert report.backend in check.replay, text


def _param(case: Case) -> object:
    marks = [pytest.mark.slow] if case.slow else []
    return pytest.param(case, id=case.name, marks=marks)


def test_named_lists_name_broken_backends() -> None:
    named = set(SOMETIMES) | set(CLEAN_ATTRIBUTION) | set(BLAMED_BY_THE_MACHINE)
    assert sorted(named - set(CASES)) == []


# -- the kit rejects each of them ----------------------------------------------------------


@pytest.mark.parametrize("case", [_param(case) for case in MEMORY_CASES])
def test_kit_reports_the_broken_rule(case: Case) -> None:
    seeds = RETRY_SEEDS if case.name in SOMETIMES else case.seeds
    for seed in seeds:
        report = _run(case, seed)
        if _rejects(report, case.rule):
            break
    assert_rejected(report, case.rule)


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in MEMORY_CASES if not c.slow])
def test_kit_reports_the_broken_rule_for_many_seeds(case: Case) -> None:
    missed = []
    for seed in SLOW_SEEDS:
        report = _run(case, seed)
        if _rejects(report, case.rule):
            assert_rejected(report, case.rule)
        else:
            missed.append(seed)
    caught = len(SLOW_SEEDS) - len(missed)
    share = SOMETIMES.get(case.name, 1.0)
    assert caught >= share * len(SLOW_SEEDS), (
        f"{case.name}: the kit reported {case.rule} with {caught} of {len(SLOW_SEEDS)} seeds; "
        f"missed with {missed}"
    )


def _assert_blames_only(
    name: str, also: frozenset[str] = frozenset(), *, model_must_catch: bool
) -> None:
    """The whole kit blames the bug's rule, and otherwise only ``also``; so does the
    model-based check if it fails (it blames the bug's rule)."""
    rule_id = CASES[name].rule
    report = run_kit(plan_run(_target(name), profile="quick", seed=SEED))
    assert_rejected(report, rule_id)
    text = describe(report)
    assert failed_rules(report) <= {rule_id} | also, text
    model_based = {c.name: c for c in report.checks}[MODEL_BASED]
    if model_must_catch or model_based.status != "passed":
        assert model_based.status == "failed", text
        assert model_based.violated_rule == rule_id, text


def test_full_kit_blames_only_the_broken_rule() -> None:
    # Any example that appends an event shows this bug to the model-based check.
    _assert_blames_only("FirstParentIsZero", model_must_catch=True)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "also"), CLEAN_ATTRIBUTION.items(), ids=list(CLEAN_ATTRIBUTION))
def test_full_kit_blames_only_the_broken_rule_slow(name: str, also: frozenset[str]) -> None:
    # Whether the quick profile's machine reaches these bugs depends on the examples drawn.
    _assert_blames_only(name, also, model_must_catch=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", BLAMED_BY_THE_MACHINE)
def test_model_based_check_blames_the_broken_rule(name: str) -> None:
    rule_id = CASES[name].rule
    reports = [
        run_kit(plan_run(_target(name), profile="quick", seed=seed, only=(MODEL_BASED,)))
        for seed in ATTRIBUTION_SEEDS
    ]
    caught = [r for r in reports if r.exit_status == 1]
    assert len(caught) >= len(reports) // 2, "\n\n".join(describe(r) for r in reports)
    for report in caught:
        assert_rejected(report, rule_id)


def test_kit_rejects_in_spawned_check_processes() -> None:
    # workers > 1 runs each check in a spawned interpreter, which must import broken_backends.
    report = run_kit(
        plan_run(
            _target("InclusiveSinceSeq"),
            profile="quick",
            seed=SEED,
            only=("READ-001::", "SEQ-002::"),
            workers=2,
        )
    )
    assert_rejected(report, "READ-001")
    assert verdict(report, "SEQ-002").status == "passed", describe(report)


def test_worker_processes_import_broken_backends(tmp_path: Path) -> None:
    # Every multi-process check starts `checkpointspec.conformance.engines.processes.worker` so.
    target = BackendTarget.named(_target("InclusiveSinceSeq"))
    requests = [
        msgspec.structs.replace(hello(str(tmp_path)), id=1),
        AppendBatches(2, "s", "w", batches=2, size=3),
    ]
    done = subprocess.run(
        worker_argv(target),
        input=b"".join(msgspec.json.encode(request) + b"\n" for request in requests),
        env=target.env(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    opened, *acks, appended = done.stdout.splitlines()
    assert msgspec.json.decode(opened, type=Reply).id == 1, opened
    acked = [msgspec.json.decode(line, type=KitReply).acked for line in acks]
    assert [(a.batch, a.head) for a in acked if a is not None] == [(0, 3), (1, 6)], acks
    assert bytes(msgspec.json.decode(appended, type=Reply).result) == b"null", appended


def test_replay_command_reproduces_the_failure() -> None:
    report = _run(CASES["InclusiveSinceSeq"])
    assert_rejected(report, "READ-001")
    (check,) = failed_checks(report, "READ-001")
    argv = shlex.split(check.replay)
    assert argv[:2] == ["checkpointspec", "run"], check.replay
    command = [
        sys.executable,
        "-m",
        "checkpointspec.conformance.frontends.cli",
        *argv[1:],
        "--quiet",
    ]
    env = {**BackendTarget.named(_target("InclusiveSinceSeq")).env(), "COLUMNS": "400"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert check.detail.splitlines()[0] in done.stdout, done.stdout


# -- ties at the clock's resolution are judged the same on every seed ------------------------


def _assert_list_order_judged(name: str, seeds: Iterable[int], only: tuple[str, ...]) -> None:
    """On every seed, a coarse clock whose ties are listed by id passes, and one whose
    ties are listed otherwise fails LIST-002 (and only that rule)."""
    violates = CLOCK_BACKENDS[name].violates
    for seed in seeds:
        target = f"clock_backends:{name}.make"
        report = run_kit(plan_run(target, profile="quick", seed=seed, only=only))
        if violates is None:
            assert report.exit_status == 0, describe(report)
            assert verdict(report, "LIST-002").status == "passed", describe(report)
        else:
            assert_rejected(report, violates)
            assert failed_rules(report) == {violates}, describe(report)


@pytest.mark.parametrize("name", list(CLOCK_BACKENDS))
def test_list_order_at_the_mtime_resolution_is_judged_the_same_on_every_seed(name: str) -> None:
    _assert_list_order_judged(name, CLOCK_SEEDS[:2], ("LIST-002::",))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLOCK_BACKENDS))
def test_list_order_at_the_mtime_resolution_is_judged_the_same_on_ten_seeds(name: str) -> None:
    # The model-based machine lists too: its verdict must not depend on how fast it ran.
    _assert_list_order_judged(name, CLOCK_SEEDS, ("LIST-002::", MODEL_BASED))


@pytest.mark.parametrize("seed", [2, 3])
def test_a_store_per_handle_is_one_root_whatever_the_handles_ask(seed: int) -> None:
    """Seed 2 races appends on two handles (each answers for its own log), seed 3 reads
    and lists through a handle after the writer closed: both were other roots beside
    HANDLE-001 before the machine probed whether its open handles share the store."""
    report = run_kit(
        plan_run(_target("StorePerHandle"), profile="quick", seed=seed, only=(MODEL_BASED,))
    )
    assert report.roots == ("HANDLE-001",), describe(report)
