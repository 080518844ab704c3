"""The same bug is found with the same rule ids directly and through the stdio protocol.

A broken backend of `broken_backends` runs once as a Python factory and once as
a child process behind `StdioCheckpointer` (served by
`checkpointspec.backends.stdio.serve`), with the same checks and seed. The
kit must fail the same MUST rules both times: the proxy neither hides a bug
nor adds one. The cases are those whose checks work on one handle at a time:
these broken backends keep their store in process memory, so through stdio,
where each handle is a process, a check sharing one store between handles
would see a different bug (the reference memory backend, served the same way,
must pass those checks, which the first test asserts).

A backend that breaks the protocol itself (`stdio_breaches`: a garbage line, a reply
under another request's id, an unsolicited reply, an exit in the middle of an
append) is charged with PROTO-001, never with the rule of the check that met it, also when a
worker process of the kit or a recorded history met it, or a stress worker met it only
as it closed its handle at the end.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from cases import HARD_CASES, MEMORY_CASES, SEED, Case
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import describe, failed_rules, verdict
from stdio_breaches import BREACHES, CLOSE_BREACHES

pytestmark = pytest.mark.usefixtures("broken_backends_importable")
CASES = {case.name: case for case in MEMORY_CASES + HARD_CASES}
ONE_HANDLE = (
    "IgnoresExpectedHead",
    "TruncateIgnoresExpectedHead",
    "NaiveTimestamps",
    "ListsOldestFirst",
    "InclusiveSinceSeq",
    "PhantomSessionOnTruncate",
    "ClampsNegativeSinceSeq",
    "ReadTakesAnyId",
    "ClosedHandleWorks",
)
"""Broken backends whose case's checks open one handle at a time. The last ones show
that the values JSON can carry reach the backend, which answers for them: a negative
seq, an empty session id, a call after close."""

FILE_BASED = ("CachedHead", "UpgradesFormatOnOpen", "LockOutlivesHolder")
"""Broken file backends (`hard_backends`): their store is on disk, so every check applies
through stdio, the store hooks (SCHEMA-001) and killed holders (MAINT-004) included."""


def _breaching(breach: str, backend: str = "memory") -> str:
    """The command of the `stdio_breaches` server of ``backend`` that breaks the protocol
    with ``breach``."""
    script = str(Path(__file__).with_name("stdio_breaches.py"))
    return shlex.join([sys.executable, script, breach, backend])


def _served(target: str) -> str:
    return shlex.join([sys.executable, "-m", "checkpointspec.backends.stdio.serve", target])


def test_the_reference_passes_these_checks_through_stdio() -> None:
    checks = tuple(check for name in ONE_HANDLE for check in CASES[name].checks)
    report = run_kit(
        plan_run(
            None,
            process=_served("memory"),
            profile="quick",
            seed=SEED,
            only=checks,
            validate_protocol=True,
        )
    )
    assert report.exit_status == 0, describe(report)


@pytest.mark.parametrize(
    "case", [CASES[name] for name in ONE_HANDLE + FILE_BASED], ids=ONE_HANDLE + FILE_BASED
)
def test_the_same_rules_fail_directly_and_through_stdio(case: Case) -> None:
    seed = case.seeds[0]
    direct = run_kit(plan_run(case.target, profile="quick", seed=seed, only=case.checks))
    proxied = run_kit(
        plan_run(None, process=_served(case.target), profile="quick", seed=seed, only=case.checks)
    )
    assert case.rule in failed_rules(direct), describe(direct)
    assert failed_rules(proxied) == failed_rules(direct), describe(proxied)
    assert proxied.exit_status == 1
    assert all("--process" in c.replay for c in proxied.checks if c.status == "failed")


def test_what_json_cannot_carry_is_reported_as_checked_by_the_kit_not_passed() -> None:
    # The stdio client refuses a dict posing as an event before the backend sees it,
    # so the backend that accepts one (ARG-003) is not shown wrong through stdio, and
    # the reference is not shown right: both are kit_checked, neither passed.
    for target in ("broken_backends:AcceptsEventDicts.make", "memory"):
        report = run_kit(
            plan_run(None, process=_served(target), profile="quick", seed=SEED, only=("ARG-003::",))
        )
        verdicts = {r.id: r for r in report.rules}
        assert verdicts["ARG-003"].status == "kit_checked", describe(report)
        assert "never asked" in verdicts["ARG-003"].reason
        assert report.exit_status == 0, describe(report)


@pytest.mark.parametrize("breach", BREACHES)
def test_a_breach_of_the_protocol_is_its_own_finding(breach: str) -> None:
    # A stdio backend that breaks the protocol at every append (stdio_breaches.py) fails
    # PROTO-001, from the check of a rule that appends as from PROTO-001's own, and the
    # appending check's own rule is not charged with it.
    report = run_kit(
        plan_run(
            None,
            process=_breaching(breach),
            profile="quick",
            seed=SEED,
            only=("APPEND-002::stale_expected_head_conflicts", "PROTO-001::"),
        )
    )
    assert failed_rules(report) == {"PROTO-001"}, describe(report)
    assert verdict(report, "APPEND-002").status == "not_checked", describe(report)
    for check in report.checks:
        assert [f.rule for f in check.findings] == ["PROTO-001"], describe(report)


# Each runs every check of MP-001 and KILL-001 (about 20 s): the slow tier's. The
# default run has every breach met in the kit's own process (the test above).
@pytest.mark.slow
@pytest.mark.parametrize("breach", BREACHES)
def test_a_breach_met_in_a_worker_process_or_a_recorded_history_is_its_own_finding(
    breach: str,
) -> None:
    # The multi-process checks serve the backend inside the kit's worker processes, whose
    # own stdio client meets the breach, and the stress history records every call's
    # outcome: the breach still fails PROTO-001 alone, never MP-001 or KILL-001.
    report = run_kit(
        plan_run(
            None,
            process=_breaching(breach, "sqlite"),
            profile="quick",
            seed=SEED,
            only=("MP-001::", "KILL-001::"),
        )
    )
    assert failed_rules(report) == {"PROTO-001"}, describe(report)
    for name in ("MP-001::processes_share_one_log", "MP-001::free_running_history"):
        check = next(c for c in report.checks if c.name == name)
        assert check.status == "failed", describe(report)
    for check in report.checks:
        assert {f.rule for f in check.findings} <= {"PROTO-001"}, describe(report)
        assert check.status != "error", describe(report)


@pytest.mark.slow
@pytest.mark.parametrize("breach", CLOSE_BREACHES)
def test_a_breach_met_only_when_a_stress_worker_closes_its_handle_is_its_own_finding(
    breach: str,
) -> None:
    # Every call of the stress workers is answered well; the reply to the close each
    # worker sends at its end breaks the protocol. That breach ends the worker (status 5)
    # after its whole history was written, and it is still PROTO-001's finding, never a
    # failed stress worker charged to MP-001.
    report = run_kit(
        plan_run(
            None,
            process=_breaching(breach, "sqlite"),
            profile="quick",
            seed=SEED,
            only=("MP-001::free_running_history",),
        )
    )
    assert failed_rules(report) == {"PROTO-001"}, describe(report)
    assert verdict(report, "MP-001").status != "failed", describe(report)
    (check,) = report.checks
    assert check.status == "failed", describe(report)
    assert [f.rule for f in check.findings] == ["PROTO-001"], describe(report)
    assert check.findings[0].call == "close in a worker process", describe(report)


def test_protocol_rule_is_skipped_with_its_reason_for_a_backend_in_the_kits_process() -> None:
    report = run_kit(plan_run("memory", profile="quick", seed=SEED, only=("PROTO-001::",)))
    proto = verdict(report, "PROTO-001")
    assert proto.status == "skipped", describe(report)
    assert "served over the stdio protocol" in proto.reason
