"""What changed between two runs on one backend: the regressions a pull request brings.

`compare_reports` reads an older and a newer report (``--report``) and lists, rule by
rule, what got worse and what got better: rules newly failing (a MUST rule failed,
or an ``--xfail`` rule passed, that did not before), fixed, no longer checked
(passed before, now skipped, not checked, not run or stopped on a kit error), and
checks whose coverage fell (fewer crash states, examples or rounds than before: a
number in a passing check's "covered" detail went down). `Comparison.regressed` is
what a CI gate fails on: a newly failing rule.
"""

from __future__ import annotations

import re

import msgspec

from .report import KitReport, RuleResult

__all__ = ["Comparison", "RuleChange", "compare_reports", "render_comparison"]

_FAILING = frozenset({"failed", "xpassed"})
_UNCHECKED = frozenset({"skipped", "not_checked", "not_run", "error"})


class RuleChange(msgspec.Struct, frozen=True):
    """One rule whose verdict changed: its id and its status before and after."""

    rule: str
    before: str
    after: str
    reason: str = ""


class Comparison(msgspec.Struct, frozen=True):
    """The differences between two reports, each list in catalog order."""

    newly_failing: tuple[RuleChange, ...]
    fixed: tuple[RuleChange, ...]
    no_longer_checked: tuple[RuleChange, ...]
    coverage_fell: tuple[str, ...]
    """One line per check whose covered count went down: check, what, before → after."""
    notes: tuple[str, ...]
    """What differs between the runs themselves (profile, seed, capabilities)."""

    @property
    def regressed(self) -> bool:
        """Something newly fails: the exit status 1 of ``checkpointspec compare``."""
        return bool(self.newly_failing)


def _by_id(report: KitReport) -> dict[str, RuleResult]:
    return {r.id: r for r in report.rules}


def compare_reports(old: KitReport, new: KitReport) -> Comparison:
    """The rules and checks of ``new`` that changed since ``old`` (see the module)."""
    before, after = _by_id(old), _by_id(new)
    order = [r.id for r in sorted(new.rules, key=lambda r: r.id)]
    newly_failing, fixed, unchecked = [], [], []
    for rule_id in order:
        now = after[rule_id]
        was = before.get(rule_id)
        was_status = was.status if was is not None else "absent"
        if now.status in _FAILING and was_status not in _FAILING:
            newly_failing.append(RuleChange(rule_id, was_status, now.status, now.reason))
        elif was_status in _FAILING and now.status == "passed":
            fixed.append(RuleChange(rule_id, was_status, now.status))
        elif was_status == "passed" and now.status in _UNCHECKED:
            unchecked.append(RuleChange(rule_id, was_status, now.status, now.reason))
    notes = [
        f"{field}: {getattr(old, field)!r} then {getattr(new, field)!r}"
        for field in ("backend", "suite", "profile", "seed", "capabilities")
        if getattr(old, field) != getattr(new, field)
    ]
    return Comparison(
        tuple(newly_failing), tuple(fixed), tuple(unchecked), _coverage_fell(old, new), tuple(notes)
    )


_COUNT = re.compile(r"(\d[\d,]*) ([a-z][a-z -]*)")


def _counts(detail: str) -> dict[str, int]:
    """The numbers a passing check says it covered, by what they count."""
    return {what.strip(): int(n.replace(",", "")) for n, what in _COUNT.findall(detail)}


def _coverage_fell(old: KitReport, new: KitReport) -> tuple[str, ...]:
    earlier = {c.name: c for c in old.checks if c.status == "passed"}
    fell = []
    for check in new.checks:
        was = earlier.get(check.name)
        if was is None or check.status != "passed":
            continue
        then, now = _counts(was.detail), _counts(check.detail)
        for what, count in now.items():
            if what in then and count < then[what]:
                fell.append(f"{check.name}: {what} {then[what]} -> {count}")
    return tuple(fell)


def render_comparison(comparison: Comparison) -> str:
    """The comparison as the lines ``checkpointspec compare`` prints."""
    lines = [f"note: the runs differ in {note}" for note in comparison.notes]
    sections = (
        ("newly failing", comparison.newly_failing),
        ("fixed", comparison.fixed),
        ("no longer checked", comparison.no_longer_checked),
    )
    for title, changes in sections:
        for change in changes:
            reason = f" ({change.reason})" if change.reason else ""
            lines.append(f"{title}: {change.rule} {change.before} -> {change.after}{reason}")
    lines += [f"coverage fell: {line}" for line in comparison.coverage_fell]
    verdict = (
        f"REGRESSED: {len(comparison.newly_failing)} rule(s) newly failing"
        if comparison.regressed
        else "no rule newly failing"
    )
    return "\n".join([*lines, verdict])
