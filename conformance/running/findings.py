"""A check's findings as the report shows them: every violation it found, each once.

The runner judges how a check ended (`checkpointspec.conformance.running.runner`);
this module adds what the check found on the way: the violations it recorded and
explored past (`Harness.findings`, see `checkpointspec.conformance.engines.search.exploration`),
each with its own failure panel and replay command, and the rules the same evidence
breaks as well (`RuleViolation.also`), each shown following from the violation's rule.
"""

from __future__ import annotations

import msgspec

from ..checks.base import Check
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
from ..engines.run.kit_run import KitRun
from ..engines.search.exploration import Found, violation_in
from ..engines.search.replay import reproduction_of
from .failures import full_traceback, hypothesis_lines
from .registry import is_session_check
from .report import CheckResult, Finding

__all__ = ["with_findings"]


def _finding_of(found: Found, check: Check, run: KitRun) -> list[Finding]:
    """A violation the check recorded and explored past, as the report shows it (with
    the rules the same evidence breaks as well, `_same_evidence`)."""
    violation, raised = found.violation, found.raised
    replay = run.replay_command(check.name, session_check=is_session_check(check))
    blob = reproduction_of(raised)
    finding = Finding(
        rule=violation.rule_id,
        check=check.name,
        summary=violation.message.splitlines()[0] if violation.message else "",
        detail="\n".join([str(violation), *hypothesis_lines(raised, violation)]),
        replay=f"{replay} --reproduce {blob}" if blob is not None else replay,
        reproduce=str(blob) if blob is not None else None,
    )
    return [finding, *_same_evidence(finding, violation)]


def _same_evidence(finding: Finding, violation: RuleViolation | None) -> list[Finding]:
    """The findings of the rules ``violation`` names in ``also``: the same evidence breaks
    them, so each follows from ``finding``'s rule, and shares its detail and replay."""
    if violation is None or violation.rule_id != finding.rule:
        return []
    return [
        msgspec.structs.replace(
            finding,
            rule=rule,
            follows_from=finding.rule,
            root_evidence=f"the same evidence breaks it: {finding.summary}",
        )
        for rule in violation.also
    ]


def with_findings(
    result: CheckResult,
    check: Check,
    run: KitRun,
    harness: Harness | None,
    raised: BaseException | None = None,
) -> CheckResult:
    """``result`` with every finding of the check: those it recorded and explored past
    (`Harness.findings`), then the one it ended on (``raised``), if it failed. A check
    that recorded any is ``failed``, whatever its last round did: the evidence stands."""
    violation = violation_in(raised) if raised is not None else None
    explored = harness.explored if harness is not None else None
    if explored is not None:
        result = msgspec.structs.replace(
            result,
            rounds=explored.rounds,
            explored=explored.complete and result.status in ("passed", "failed"),
        )
    recorded = [g for f in harness.findings for g in _finding_of(f, check, run)] if harness else []
    ended_finding = (
        [
            Finding(
                rule=result.violated_rule,
                check=check.name,
                summary=result.detail.splitlines()[0].removeprefix(f"[{result.violated_rule}] ")
                if result.detail
                else "",
                detail=result.detail,
                replay=result.replay,
                reproduce=result.reproduce,
            )
        ]
        if result.status == "failed" and result.violated_rule is not None
        else []
    )
    ended = ended_finding + [g for f in ended_finding for g in _same_evidence(f, violation)]
    first_per_rule: dict[str, Finding] = {}
    for finding in recorded + ended:
        first_per_rule.setdefault(finding.rule, finding)
    findings = tuple(first_per_rule.values())
    if not findings:
        return result
    first = findings[0]
    kit_error = f"; then {result.reason}" if result.status == "error" else ""
    return msgspec.structs.replace(
        result,
        status="failed",
        violated_rule=first.rule,
        detail=first.detail,
        replay=first.replay,
        reproduce=first.reproduce,
        replay_note=check.replay_note,
        reason=f"{len(findings)} finding(s){kit_error}" if len(findings) > 1 or kit_error else "",
        findings=findings,
        traceback=result.traceback
        or (full_traceback(harness.findings[0].raised) if harness and harness.findings else ""),
    )
