"""Reports made without running checks, for the tests of what the kit derives from them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec
from checkpointspec.conformance.running.failures import finding_panel
from checkpointspec.conformance.running.levels import judge_levels
from checkpointspec.conformance.running.registry import rules_of_suite
from checkpointspec.conformance.running.report import (
    REPORT_SCHEMA_VERSION,
    CheckResult,
    Finding,
    KitReport,
    exit_status_for,
    summarise_rules,
)
from checkpointspec.conformance.running.roots import rooted
from checkpointspec.spec import Capability

ALL_CAPABILITIES = tuple(sorted(c.value for c in Capability))


def passed(name: str, *rules: str) -> CheckResult:
    return CheckResult(name, (name.split("::")[0], *rules), "passed", 0.1)


def failed(name: str, rule: str, message: str, replay: str = "") -> CheckResult:
    """A check that found ``rule`` broken: its finding made as the kit makes one (``message``
    says what was wrong), its panel rendered from it."""
    replay = replay or f"checkpointspec run memory --only {name} --profile quick --seed 1"
    found = Finding(rule, name, message.splitlines()[0], replay=replay, message=message)
    finding = msgspec.structs.replace(found, detail=finding_panel(found))
    return CheckResult(
        name,
        (name.split("::")[0],),
        "failed",
        0.1,
        violated_rule=rule,
        detail=finding.detail,
        replay=replay,
        findings=(finding,),
    )


def errored(name: str) -> CheckResult:
    return CheckResult(
        name,
        (name.split("::")[0],),
        "error",
        0.1,
        reason="the kit raised TypeError: a bug",
        detail="TypeError: a bug",
        replay=f"checkpointspec run memory --only {name} --profile quick --seed 1",
    )


def every_rule_passed() -> list[CheckResult]:
    """One passing check per storage rule."""
    return [passed(f"{rule}::check") for rule in sorted(rules_of_suite("storage"))]


def report_of(
    checks: Iterable[CheckResult],
    capabilities: Iterable[str] = ALL_CAPABILITIES,
    xfail: Mapping[str, str] | None = None,
    *,
    backend: str = "memory",
) -> KitReport:
    """The report `run_kit` would make of ``checks`` on a storage run."""
    findings, roots, _, defects = rooted(tuple(checks), dict(xfail or {}))
    ordered = tuple(checks)
    declared = tuple(sorted(capabilities))
    rules = summarise_rules(
        ordered, declared, dict(xfail or {}), rule_ids=rules_of_suite("storage")
    )
    return KitReport(
        schema_version=REPORT_SCHEMA_VERSION,
        backend=backend,
        target="checkpointspec.backends.memory:make",
        suite="storage",
        session_layer=None,
        profile="quick",
        seed=1,
        capabilities=declared,
        duration=1.5,
        checks=ordered,
        rules=rules,
        warnings=(),
        exit_status=exit_status_for(rules, ordered),
        levels=judge_levels(rules, declared),
        expected_failures=dict(xfail or {}),
        findings=findings,
        roots=roots,
        defects=defects,
    )
