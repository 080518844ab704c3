"""Which findings follow from another: a run's defects named at their roots, from evidence.

One defect often breaks several rules, each seen by another check. A finding
follows from another rule only when that rule's divergence comes first in the
finding's own steps: the check's witness judged every call the check made
against the model (`checkpointspec.conformance.engines.target.witness`), and a
call that diverged before the check's own assertion is where its defect showed
first (`checkpointspec.conformance.running.findings.findings_from` files the
finding under it), or the same evidence breaks both (`RuleViolation.also`). No
check is re-run to see whether a finding goes away: a re-run that can no longer
observe a defect is no evidence that it follows from anything.

A *defect* is a root rule with the shape of its divergence
(`checkpointspec.spec.divergences.Divergence.shape`; the finding's summary where
no divergence was judged): findings of the same rule and shape in several checks
are one defect seen several times. Rules declared expected to fail (``--xfail``,
or a bridge's declared gap) are no roots: their findings and everything that
follows from them are explained, and `fix first:` never names them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec

from ...spec import RULES
from ...spec.divergences import evidence_of
from ..engines.run.kit_run import SuiteSelection
from .registry import SUITES, rules_of_suite
from .report import CheckResult, Defect, Finding, RuleResult, summarise_rules

__all__ = [
    "Verdict",
    "defects_of",
    "judge",
    "resolved",
    "rooted",
    "table_order",
]

_CATALOG_ORDER = {rule.id: n for n, rule in enumerate(RULES)}


def _order(rule: str) -> int:
    return _CATALOG_ORDER.get(rule, len(_CATALOG_ORDER))


def defect_key(finding: Finding) -> tuple[str, str]:
    """What makes two findings one defect: the rule, and the shape of the divergence."""
    return (finding.rule, finding.shape or finding.summary)


def defects_of(
    findings: Sequence[Finding], expected_failures: Mapping[str, str] = {}
) -> tuple[Defect, ...]:
    """The run's defects: one per root rule and shape, with the checks that saw it and
    the rules that follow from it (its symptoms), the one explaining most first, then
    in catalog order. A rule expected to fail is no defect.

    A root finding without a shape (no call of its check was judged against the
    model: a history's anomaly, a crash state's reading) names its rule only. It is a
    sighting of that rule's one shaped defect when the run has exactly one; otherwise
    the rule's unshaped findings are one defect of their own, shown with the first's
    summary, rather than a line per example."""
    symptoms: dict[str, set[str]] = {}
    for finding in findings:
        if finding.follows_from is not None:
            symptoms.setdefault(finding.follows_from, set()).add(finding.rule)
    roots = [f for f in findings if f.follows_from is None and f.rule not in expected_failures]
    shapes: dict[str, set[str]] = {}
    for finding in roots:
        if finding.shape:
            shapes.setdefault(finding.rule, set()).add(finding.shape)
    unshaped: dict[str, str] = {}
    seen: dict[tuple[str, str], list[Finding]] = {}
    # Shaped findings first: a defect shows the call, expectation and answer of one.
    for finding in sorted(roots, key=lambda f: not f.shape):
        known = shapes.get(finding.rule, set())
        if finding.shape:
            shape = finding.shape
        elif len(known) == 1:
            (shape,) = known
        else:
            shape = unshaped.setdefault(finding.rule, finding.summary)
        seen.setdefault((finding.rule, shape), []).append(finding)
    defects = [
        Defect(
            rule=rule,
            shape=shape,
            checks=tuple(sorted({f.check for f in group})),
            symptoms=tuple(sorted(symptoms.get(rule, set()) - {rule}, key=_order)),
            call=group[0].call,
            expected=group[0].expected,
            got=group[0].got,
        )
        for (rule, shape), group in seen.items()
    ]
    return tuple(sorted(defects, key=lambda d: (-len(d.symptoms), _order(d.rule), d.shape)))


def resolved(results: Sequence[CheckResult]) -> tuple[CheckResult, ...]:
    """``results`` with every finding that has another explanation (its ``otherwise``)
    following from it where the run shows that explanation plainly.

    A read short of another handle's writes reads as that handle not seeing them
    (HANDLE-001) only by inference from the calls before it; a head counting events
    a truncate removed as a head remembered wrongly (HEAD-001). When another check met
    the other explanation with nothing inferred (a root finding of that rule and
    shape: a handle missing its own writes, a read yielding the removed events), that
    is the defect, and the finding, with what followed from it in its check, is one
    of its symptoms. Its rule still fails: its answer broke it."""
    plain = {
        defect_key(f): f.check
        for r in results
        for f in r.findings
        if f.follows_from is None and f.otherwise is None
    }
    return tuple(_resolve(result, plain) for result in results)


def _seen_plainly(
    otherwise: tuple[str, str] | None, plain: Mapping[tuple[str, str], str]
) -> tuple[str, str, str] | None:
    """The rule, shape and check of a plain sighting of ``otherwise`` (a rule and
    shape) by any of the sightings that show it (`evidence_of`), or None."""
    if otherwise is None:
        return None
    return next(
        (
            (rule, shape, plain[(rule, shape)])
            for rule, shape in sorted(evidence_of(*otherwise))
            if (rule, shape) in plain
        ),
        None,
    )


def _resolve(result: CheckResult, plain: Mapping[tuple[str, str], str]) -> CheckResult:
    moved: dict[str, str] = {}
    findings: list[Finding] = []
    for finding in result.findings:
        seen = _seen_plainly(finding.otherwise, plain)
        if seen is not None and finding.follows_from is None:
            root, shape, seen_in = seen
            moved[finding.rule] = root
            finding = msgspec.structs.replace(
                finding,
                follows_from=root,
                root_evidence=f"the same answer is {root}'s ({shape}), seen plainly by {seen_in}",
            )
        findings.append(finding)
    if not moved:
        return result
    roots_left = {f.rule for f in findings if f.follows_from is None}
    repointed = tuple(
        msgspec.structs.replace(finding, follows_from=moved[finding.follows_from])
        if finding.follows_from in moved and finding.follows_from not in roots_left
        else finding
        for finding in findings
    )
    return msgspec.structs.replace(result, findings=repointed)


def rooted(
    results: Sequence[CheckResult], expected_failures: Mapping[str, str] = {}
) -> tuple[tuple[Finding, ...], tuple[str, ...], dict[str, str], tuple[Defect, ...]]:
    """Every finding of ``results``, roots first; the root rules, the one explaining
    most findings first, then in catalog order; each failed rule that follows wholly
    from another, mapped to its root; and the run's defects (`defects_of`). A rule
    expected to fail is no root, and what follows from it is explained."""
    every = [f for r in results if r.status == "failed" for f in r.findings]
    defects = defects_of(every, expected_failures)
    root_rules = tuple(dict.fromkeys(d.rule for d in defects))
    failed = {f.rule for f in every}
    follows = {
        rule: root
        for rule in failed
        if rule not in root_rules
        for root in [
            next((f.follows_from for f in every if f.rule == rule and f.follows_from), None)
        ]
        if root is not None
    }
    ordered = sorted(
        every,
        key=lambda f: (f.follows_from is not None, _order(f.rule), f.check),
    )
    return tuple(ordered), root_rules, follows, defects


def table_order(rules: Sequence[RuleResult], roots: Sequence[str]) -> tuple[RuleResult, ...]:
    """The rules in table order: the failed roots in ``roots``' order, then the failed
    rules that follow from them, then the rest, in catalog order."""

    def place(rule: RuleResult) -> tuple[int, int]:
        if rule.id in roots:
            return (0, list(roots).index(rule.id))
        return (1 if rule.follows_from is not None else 2, 0)

    return tuple(sorted(rules, key=place))


class Verdict(NamedTuple):
    """What a run's check results come to: the results, every finding (roots first),
    the root rules, the rules' verdicts in table order, and the defects."""

    checks: tuple[CheckResult, ...]
    findings: tuple[Finding, ...]
    roots: tuple[str, ...]
    rules: tuple[RuleResult, ...]
    defects: tuple[Defect, ...]


def judge(
    results: Sequence[CheckResult],
    suite: SuiteSelection,
    capabilities: Sequence[str],
    expected_failures: Mapping[str, str],
) -> Verdict:
    """The `Verdict` of ``results`` of a run of ``suite``: a run's report and the merge of
    its shards' reports are both this. The run is narrowed when ``results`` are not all
    of the suite's checks. A check may prove a rule of the other suite broken (a session
    check meeting a storage violation): that verdict is listed too, never dropped."""
    results = resolved(results)
    findings, roots, follows, defects = rooted(results, expected_failures)
    rules = summarise_rules(
        results,
        capabilities,
        expected_failures,
        narrowed={r.name for r in results} != {c.name for c in SUITES[suite]},
        rule_ids=rules_of_suite(suite) | {f.rule for f in findings},
    )
    placed = tuple(msgspec.structs.replace(r, follows_from=follows.get(r.id)) for r in rules)
    return Verdict(tuple(results), findings, roots, table_order(placed, roots), defects)
