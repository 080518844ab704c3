"""What changed between two runs on one backend: the regressions a pull request brings.

`compare_reports` reads an older and a newer report (``--report``) and lists, rule by
rule, what got worse and what got better: rules newly failing (a MUST rule failed,
or an ``--xfail`` rule passed, that did not before), fixed, no longer checked
(passed before, now skipped, not checked, not run, incomplete or stopped on a kit
error), and checks whose coverage fell (a number in a passing check's "covered"
detail went down: fewer crash states or kill points reached), each said in whole
sentences. `Comparison.regressed` is what a CI gate fails on: a newly failing rule.

Two reports with the same replay key (`KitReport.replay_key`: kit and Hypothesis
versions, profile, seed, cap, backend and what it declared) ran the same work:
`Comparison.same_work` then says whether they differ in anything but timing (the
rules' and checks' verdicts, the roots, the defects found), which on a
deterministic backend they must not.
"""

from __future__ import annotations

import re

import msgspec

from .report import KitReport, RuleResult

__all__ = ["Comparison", "RuleChange", "compare_reports", "render_comparison", "verdicts_of"]

_FAILING = frozenset({"failed", "xpassed"})
_UNCHECKED = frozenset({"skipped", "not_checked", "not_run", "error", "incomplete"})


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
    """One sentence per check whose covered count went down: what it said before and now."""
    notes: tuple[str, ...]
    """What differs between the runs themselves (profile, seed, capabilities)."""
    same_work: str = ""
    """For two reports with the same replay key: whether they differ only in timing, or
    what else differs, in a sentence; "" when the keys differ or one has none."""

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
        tuple(newly_failing),
        tuple(fixed),
        tuple(unchecked),
        _coverage_fell(old, new),
        tuple(notes),
        _same_work(old, new),
    )


def verdicts_of(report: KitReport) -> dict[str, object]:
    """What a run found, without its timing: what two runs of one key must share (the
    rules' and checks' statuses, the roots, the defects, the exit status)."""
    return {
        "rules": {r.id: r.status for r in report.rules},
        "checks": {c.name: c.status for c in report.checks},
        "roots": report.roots,
        "defects": sorted((d.rule, d.shape) for d in report.defects),
        "exit status": report.exit_status,
    }


def _same_work(old: KitReport, new: KitReport) -> str:
    if old.replay_key is None or old.replay_key != new.replay_key:
        return ""
    then, now = verdicts_of(old), verdicts_of(new)
    differing = [what for what in then if then[what] != now[what]]
    if not differing:
        return (
            "The two runs have the same replay key and the same verdicts (rules, checks, "
            "roots, defects and exit status): they differ only in timing."
        )
    return (
        "The two runs have the same replay key but differ in more than timing: in their "
        f"{', '.join(differing)}; on a deterministic backend that is nondeterminism in the "
        "backend or the kit, or a check the cap stopped in one run only."
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
        if any(what in then and count < then[what] for what, count in now.items()):
            fell.append(
                f"{check.name} covered less than before. Before: {was.detail}. Now: {check.detail}."
            )
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
    if comparison.same_work:
        lines.append(comparison.same_work)
    verdict = (
        f"REGRESSED: {len(comparison.newly_failing)} rule(s) newly failing"
        if comparison.regressed
        else "no rule newly failing"
    )
    return "\n".join([*lines, verdict])
