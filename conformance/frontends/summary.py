"""A run as Markdown (``--summary FILE.md``), for a CI job's summary page.

Written for GitHub Actions' step summary (``--summary "$GITHUB_STEP_SUMMARY"``),
readable anywhere Markdown is: a verdict line, the conformance levels, one
table row per rule that did not pass (failed, xpassed, error, not checked,
warning, xfailed, skipped) with its finding and the command that replays it,
and the counts the CLI's summary line prints. Rules outside an ``--only``
selection (``not_run``) are counted, not listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..running.failures import rule_headline
from ..running.levels import attained
from ..running.report import (
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_PASSED,
    KitReport,
    RuleResult,
    RuleStatus,
)

__all__ = ["render_summary"]

_LISTED: Final[tuple[RuleStatus, ...]] = (
    "failed",
    "xpassed",
    "error",
    "not_checked",
    "warning",
    "xfailed",
    "kit_checked",
    "skipped",
)
"""The rule statuses that get a row, most urgent first."""

_FINDING_CHARS: Final = 300
"""A finding longer than this is cut: the JSON report and the replay have the rest."""


def _cell(text: str, limit: int = _FINDING_CHARS) -> str:
    """``text`` fit for one table cell: one line, pipes escaped, cut at ``limit``."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return line.replace("\\", "\\\\").replace("|", "\\|")


def _code(text: str) -> str:
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    return f"{fence}{_cell(text, 10_000)}{fence}"


def _replay(rule: RuleResult, report: KitReport) -> str:
    """The replay command of the rule's first finding, or of the check that stopped on a
    kit error for a rule in error; empty when there is none."""
    finding = next((f for f in report.findings if f.rule == rule.id and f.replay), None)
    if finding is not None:
        return finding.replay
    for check in report.checks:
        stopped = rule.status == "error" and check.status == "error" and check.name in rule.checks
        if stopped and check.replay:
            return check.replay
    return ""


def _finding(rule: RuleResult, report: KitReport) -> str:
    if rule.status in ("failed", "xfailed", "warning", "error") and rule.first_failure:
        first = rule_headline(report, rule)
        if rule.follows_from is not None:
            first = f"follows from {rule.follows_from}: {first}"
        why = report.expected_failures.get(rule.id, "")
        return f"{first} (expected: {why})" if rule.status == "xfailed" and why else first
    return rule.reason


def _counts(statuses: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"


def render_summary(report: KitReport) -> str:
    """The Markdown summary of ``report``."""
    if report.exit_status == EXIT_PASSED:
        verdict = "✅ **PASS**: every applicable MUST rule passed"
    elif report.exit_status == EXIT_FAILED:
        failing = sum(r.status in ("failed", "xpassed") for r in report.rules)
        verdict = f"❌ **FAIL**: {failing} rule{'' if failing == 1 else 's'} failing"
    elif report.exit_status == EXIT_INCOMPLETE:
        verdict = (
            "⏳ **INCOMPLETE**: no rule failed, but the time cap stopped checks before their counts"
        )
    else:
        verdict = "⚠️ **KIT ERROR**: no rule failed, but the kit broke off checks"
    suite = "" if report.suite == "storage" else f", suite {report.suite}"
    lines = [
        f"## checkpointspec · {_cell(report.backend)}",
        "",
        f"{verdict} (profile {report.profile}{suite}, seed {report.seed}, "
        f"{report.duration:.1f}s, exit status {report.exit_status})",
        "",
        f"**Levels attained:** {', '.join(attained(report.levels)) or 'none'}",
        "",
        "| level | status | why not |",
        "|---|---|---|",
        *(
            f"| {level.name} | {level.status.replace('_', ' ')} | {_cell(level.reason)} |"
            for level in report.levels
        ),
    ]
    if report.defects:
        lines += ["", "**Fix first:**", ""]
        lines += [
            f"- **{d.rule}**: {d.shape} (seen by {', '.join(d.checks)}"
            + (f"; explains {', '.join(d.symptoms)})" if d.symptoms else ")")
            for d in report.defects
        ]
    elif report.roots:
        lines += ["", f"**Fix first:** {', '.join(report.roots)}"]
    # The report's rules lead with the roots; a stable sort keeps them first per status.
    listed = sorted(
        (r for r in report.rules if r.status in _LISTED),
        key=lambda r: _LISTED.index(r.status),
    )
    if listed:
        lines += [
            "",
            "### Rules that did not pass",
            "",
            "| rule | strength | status | finding | replay |",
            "|---|---|---|---|---|",
            *(
                f"| {r.id} | {r.strength.value} | {r.status} | {_cell(_finding(r, report))} "
                f"| {_code(_replay(r, report))} |"
                for r in listed
            ),
        ]
    not_run = sum(r.status == "not_run" for r in report.rules)
    lines += [
        "",
        f"**Rules:** {_counts(r.status for r in report.rules)}"
        + (f" ({not_run} outside the --only selection)" if not_run else ""),
        "",
        f"**Checks:** {len(report.checks)} run: {_counts(c.status for c in report.checks)}",
        "",
    ]
    return "\n".join(lines)
