"""Reading a `KitReport` in the quality tests: verdict lookups and a readable dump.

Every assertion on a report passes `describe(report)` as its message, so a
failing test shows what the kit saw: each check's status, the rule it blamed,
its detail and the replay command.
"""

from __future__ import annotations

from checkpointspec.conformance.running.report import CheckResult, KitReport, RuleResult

__all__ = [
    "MODEL_BASED",
    "assert_caught",
    "describe",
    "failed_checks",
    "failed_rules",
    "verdict",
]

MODEL_BASED = "SEQ-001::model_based"
"""The model-based check: random operation sequences compared with SpecModel."""

_DETAIL_LINES = 25


def verdict(report: KitReport, rule_id: str) -> RuleResult:
    """The report's verdict on ``rule_id``."""
    by_id = {r.id: r for r in report.rules}
    assert rule_id in by_id, f"the report has no verdict on {rule_id}\n{describe(report)}"
    return by_id[rule_id]


def failed_rules(report: KitReport) -> set[str]:
    """Ids of the MUST rules the report says failed."""
    return {r.id for r in report.rules if r.status == "failed"}


def failed_checks(report: KitReport, rule_id: str | None = None) -> list[CheckResult]:
    """Failed checks, only those that found ``rule_id`` broken when it is given."""
    return [
        c
        for c in report.checks
        if c.status == "failed" and (rule_id is None or rule_id in {f.rule for f in c.findings})
    ]


def _check_lines(check: CheckResult) -> list[str]:
    line = f"  {check.status:7} {check.name}"
    if check.status == "failed":
        line += "  -> " + ", ".join(
            f.rule + (f" (follows from {f.follows_from})" if f.follows_from else "")
            for f in check.findings
        )
    elif check.status in ("skipped", "not_checked", "error"):
        line += f"  ({check.reason})"
    lines = [line]
    if check.status in ("failed", "error"):
        detail = check.detail.splitlines()
        lines += [f"      {text}" for text in detail[:_DETAIL_LINES]]
        if len(detail) > _DETAIL_LINES:
            lines.append(f"      ... {len(detail) - _DETAIL_LINES} more lines")
        lines.append(f"      replay: {check.replay}")
    return lines


def _unpassed(report: KitReport) -> list[str]:
    # Rules no selected check verifies are left out: with --only they are most of the catalog.
    return [
        f"{r.id}={r.status}"
        for r in report.rules
        if r.status not in ("passed", "skipped") and r.checks
    ]


def describe(report: KitReport) -> str:
    """The report as text: summary, non-passing rules, then every check."""
    lines = [
        f"kit report for {report.backend} (profile {report.profile}, seed {report.seed}): "
        f"exit status {report.exit_status}, roots {list(report.roots)}",
        "rules not passed: " + (", ".join(_unpassed(report)) or "none"),
        "checks:",
    ]
    for check in report.checks:
        lines += _check_lines(check)
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def assert_caught(report: KitReport, rule_id: str) -> None:
    """Exit 1, ``rule_id`` failed as the first root and first row of the table, and a failed
    check found it (its detail is in the message)."""
    text = describe(report)
    assert report.exit_status == 1, text
    assert verdict(report, rule_id).status == "failed", text
    assert failed_checks(report, rule_id), text
    assert report.roots[:1] == (rule_id,), text
    assert report.rules[0].id == rule_id, text
