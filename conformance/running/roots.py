"""Which findings follow from another: a run's defects named at their roots.

One defect often breaks several rules, each seen by another check: a truncate that
ignores ``expected_head`` fails TRUNC-003 in its own check, and forks the history
the multi-process check judges (APPEND-002). An author fixing the rules in catalog
order would chase the symptom first. So after the checks, the kit decides for every
finding whether another rule found in the run explains it, from evidence, never
from wording: it re-checks the finding's check with that other rule's defect left
out, and if the finding is then gone while the check run again unchanged still finds
it, it *follows from* that rule.

"Left out" means, by what the candidate root is about:

- an optional operation (the rule's capability: TRUNCATE, DELETE, LIST, GENERATION):
  the check runs again as if the backend did not declare it, so it never calls it;
- anything else, for a check whose Hypothesis run can tolerate a rule
  (`checkpointspec.conformance.engines.search.exploration`): the check runs again with the
  root's rule tolerated from its first round, so every example that breaks it is
  excluded; what the check still finds departs from the model on its own.

A finding that neither way can re-check stays a root: the kit does not guess. The
re-checks run in this process after the checks, each like a check of the run
(``recheck``), the quickest checks' first, within `MAX_RECHECKS` and a time the
runner gives (as long as the checks themselves took): rooting at most doubles the
time of a failing run, and a run that passes or fails one rule spends nothing on it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import msgspec

from ...spec import RULES, RULES_BY_ID, Capability
from ..checks.base import Check
from ..engines.run.kit_run import KitRun, SuiteSelection
from .registry import CHECKS_BY_NAME, SUITES, rules_of_suite
from .report import CheckResult, Finding, RuleResult, summarise_rules

__all__ = [
    "MAX_RECHECKS",
    "Derivation",
    "Verdict",
    "derive_roots",
    "judge",
    "rooted",
    "table_order",
]

MAX_RECHECKS = 16
"""Re-checks one run spends on rooting at most; a finding not reached stays a root."""

_CATALOG_ORDER = {rule.id: n for n, rule in enumerate(RULES)}


class Derivation(NamedTuple):
    """A finding that follows from ``root``: ``evidence`` says how that was shown."""

    root: str
    evidence: str


def _by_capability(run: KitRun, check: Check, rule: str, root: str) -> Capability | None:
    """The optional operation ``root`` is about, if leaving it out of ``check`` can show
    whether ``rule`` follows from it: declared, not needed by the check, and not the
    operation ``rule`` is about itself."""
    capability = RULES_BY_ID[root].capability
    if (
        capability is not None
        and capability in run.probe.capabilities
        and capability not in check.needs
        and RULES_BY_ID[rule].capability != capability
    ):
        return capability
    return None


def _left_out(
    run: KitRun, check: Check, rule: str, root: str, capability: Capability | None
) -> tuple[KitRun, str]:
    """``run`` with ``root``'s defect left out for re-checking ``rule`` in ``check`` (its
    operation's ``capability`` undeclared, or else ``root`` tolerated), and how, for the
    report."""
    if capability is not None:
        probe = msgspec.structs.replace(
            run.probe, capabilities=run.probe.capabilities - {capability}
        )
        return (
            msgspec.structs.replace(run, probe=probe),
            f"with {capability.name} left out, {check.name} no longer finds {rule} broken",
        )
    return (
        msgspec.structs.replace(run, tolerated=run.tolerated | {root}),
        f"with every example that breaks {root} excluded, {check.name} no longer finds "
        f"{rule} broken",
    )


def _found(result: CheckResult) -> set[str]:
    return {f.rule for f in result.findings} if result.status == "failed" else set()


def derive_roots(
    run: KitRun,
    results: Sequence[CheckResult],
    recheck: Callable[[Check, KitRun], CheckResult],
    seconds: float = math.inf,
) -> dict[tuple[str, str], Derivation]:
    """For each (check name, rule) finding of ``results`` that follows from another rule
    found in the run: that rule and the evidence. ``recheck`` runs one check of a
    variant of ``run`` (the runner's `run_check`); the re-checks stop after
    `MAX_RECHECKS` or once they have taken ``seconds``, the quickest checks' first."""
    deadline = time.monotonic() + seconds
    quickest_first = sorted(results, key=lambda r: r.duration)
    findings = [
        (r.name, f.rule)
        for r in quickest_first
        for f in r.findings
        if r.status == "failed" and f.follows_from is None
    ]
    candidates = sorted({rule for _, rule in findings}, key=_CATALOG_ORDER.__getitem__)
    if len(candidates) < 2:
        return {}
    derived: dict[tuple[str, str], Derivation] = {}
    by_name = {r.name: r for r in results}
    controls: dict[str, CheckResult] = {}
    spent = 0
    for check_name, rule in findings:
        check = CHECKS_BY_NAME.get(check_name)
        if check is None:
            continue
        ran = by_name[check_name]
        # Exploration made every finding of one check its own departure from the model
        # (`checkpointspec.conformance.engines.search.exploration`): tolerating a rule this check
        # found too tells nothing new, so only leaving its operation out may re-check it.
        own = {f.rule for f in ran.findings}
        for root in candidates:
            if root == rule or spent >= MAX_RECHECKS or time.monotonic() > deadline:
                continue
            capability = _by_capability(run, check, rule, root)
            # Tolerance re-checks only a check whose Hypothesis runs tolerate rules.
            if capability is None and (root in own or ran.rounds == 0):
                continue
            variant, how = _left_out(run, check, rule, root, capability)
            spent += 1
            again = recheck(check, variant)
            if again.status in ("passed", "failed") and rule not in _found(again):
                # A finding that comes and goes with timing (two appends in one
                # millisecond) vanishes from a re-check whatever is left out: only when
                # the check run again unchanged still finds it is the difference the
                # left-out defect's. One such control per check.
                if check_name not in controls:
                    spent += 1
                    controls[check_name] = recheck(check, run)
                if rule in _found(controls[check_name]):
                    derived[(check_name, rule)] = Derivation(root, how)
                break
    return _without_cycles(derived)


def _without_cycles(
    derived: dict[tuple[str, str], Derivation],
) -> dict[tuple[str, str], Derivation]:
    """Each derivation pointing at a root that is itself a root somewhere: a rule whose
    every finding follows from another cannot explain a third (its own root does),
    and two rules that each explain the other both stay roots."""
    derived_rules = _wholly_derived(derived)
    kept = dict(derived)
    for key, derivation in derived.items():
        seen = {key[1]}
        root = derivation.root
        while root in derived_rules and root not in seen:
            seen.add(root)
            root = derived_rules[root]
        if root in seen:
            del kept[key]
        elif root != derivation.root:
            kept[key] = Derivation(root, derivation.evidence)
    return kept


def _wholly_derived(derived: Mapping[tuple[str, str], Derivation]) -> dict[str, str]:
    """Rules every finding of which follows from another: rule → that root (the first)."""
    by_rule: dict[str, list[str]] = {}
    for (_, rule), derivation in derived.items():
        by_rule.setdefault(rule, []).append(derivation.root)
    return {rule: roots[0] for rule, roots in by_rule.items()}


def rooted(
    results: Sequence[CheckResult], derived: Mapping[tuple[str, str], Derivation]
) -> tuple[tuple[CheckResult, ...], tuple[Finding, ...], tuple[str, ...], dict[str, str]]:
    """The results with each finding's ``follows_from`` filled in; every finding, roots
    first; the root rules, the one explaining most findings first, then in catalog
    order; and each failed rule that follows wholly from another, mapped to its root."""
    marked: list[CheckResult] = []
    for result in results:
        findings = tuple(
            msgspec.structs.replace(
                f,
                follows_from=derived[(result.name, f.rule)].root,
                root_evidence=derived[(result.name, f.rule)].evidence,
            )
            if (result.name, f.rule) in derived
            else f
            for f in result.findings
        )
        marked.append(msgspec.structs.replace(result, findings=findings))
    every = [f for r in marked if r.status == "failed" for f in r.findings]
    explains = {
        rule: sum(f.follows_from == rule for f in every) for rule in {f.rule for f in every}
    }
    # The root explaining most findings leads (the defect to fix first), then catalog order.
    root_rules = sorted(
        {f.rule for f in every if f.follows_from is None},
        key=lambda rule: (-explains[rule], _CATALOG_ORDER[rule]),
    )
    follows = {
        rule: root
        for rule in {f.rule for f in every}
        if rule not in root_rules
        for root in [next(f.follows_from for f in every if f.rule == rule and f.follows_from)]
    }
    ordered = sorted(
        every,
        key=lambda f: (f.follows_from is not None, _CATALOG_ORDER[f.rule], f.check),
    )
    return tuple(marked), tuple(ordered), tuple(root_rules), follows


def table_order(rules: Sequence[RuleResult], roots: Sequence[str]) -> tuple[RuleResult, ...]:
    """The rules in table order: the failed roots in ``roots``' order, then the failed
    rules that follow from them, then the rest, in catalog order."""

    def place(rule: RuleResult) -> tuple[int, int]:
        if rule.id in roots:
            return (0, list(roots).index(rule.id))
        return (1 if rule.follows_from is not None else 2, 0)

    return tuple(sorted(rules, key=place))


class Verdict(NamedTuple):
    """What a run's check results come to: the results with their findings placed, every
    finding (roots first), the root rules, and the rules' verdicts in table order."""

    checks: tuple[CheckResult, ...]
    findings: tuple[Finding, ...]
    roots: tuple[str, ...]
    rules: tuple[RuleResult, ...]


def judge(
    results: Sequence[CheckResult],
    derived: Mapping[tuple[str, str], Derivation],
    suite: SuiteSelection,
    capabilities: Sequence[str],
    expected_failures: Mapping[str, str],
) -> Verdict:
    """The `Verdict` of ``results`` of a run of ``suite``: a run's report and the merge of
    its shards' reports are both this. The run is narrowed when ``results`` are not all
    of the suite's checks. A check may prove a rule of the other suite broken (a session
    check meeting a storage violation): that verdict is listed too, never dropped."""
    marked, findings, roots, follows = rooted(results, derived)
    rules = summarise_rules(
        marked,
        capabilities,
        expected_failures,
        narrowed={r.name for r in marked} != {c.name for c in SUITES[suite]},
        rule_ids=rules_of_suite(suite) | {f.rule for f in findings},
    )
    placed = tuple(msgspec.structs.replace(r, follows_from=follows.get(r.id)) for r in rules)
    return Verdict(marked, findings, roots, table_order(placed, roots))
