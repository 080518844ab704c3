"""Conformance levels: named sets of MUST rules a run attains or not.

A backend that declares fewer capabilities is not a worse backend, so one
pass/fail verdict undersells it; the levels say what it was shown to do. Which
level a rule counts towards is a fact of the catalog (``Rule.level``, a
`checkpointspec.spec.ConformanceLevel`); `LEVELS` is a query over it, so each
MUST rule lies in exactly one level:

- ``base``: every storage MUST rule that needs no capability and no opt-in;
- one level per capability (``delete``, ``list``, ``truncate``, ``generation``,
  ``durable``, ``multi_process``, ``maintenance``, ``codec``, ``replicated``): the
  storage MUST rules that need it (``Rule.capability``);
- ``session``: the MUST rules of the session suite (``Rule.suite``), whatever
  capability they need, since they judge the session layer on the backend;
- ``store_hooks``: the rules only checked through the `StoreHooks` opt-in
  (SCHEMA-001, INTEG-002: the kit must age or damage a closed store), kept out
  of ``base`` so that a backend which cannot offer the opt-in (one in another
  language, behind ``--process``) can still attain ``base``.
- ``connection_loss``: NET-001, only checked through the `ServerRouted` opt-in
  (the kit's proxy between a backend and its server), kept out of ``base`` for
  the same reason: a backend with no server still attains ``base``.
- ``stdio_protocol``: PROTO-001, which only a backend served over the stdio
  protocol (``--process``) can break, kept out of ``base`` for the same reason: a
  backend in the kit's own process, for which it is skipped, still attains ``base``.

SHOULD rules are in no level: they never decide a verdict.

A level is attained only when every one of its rules **passed** in the run,
with one allowance: a rule skipped because it *also* needs a capability the
backend does not declare (MAINT-004 needs MULTI_PROCESS as well as MAINTENANCE;
RESTORE-006 needs DURABLE) does not apply to this backend, so it does not keep
the level back — the backend never claimed what it checks. A rule
that failed, was expected to fail (``xfailed``) or passed against its ``--xfail``
(``xpassed``) keeps it from being attained, and so does one that was skipped,
not checked, stopped on a kit error, or not run (``--only``, or a run of another
suite): a level is a claim that the kit saw every rule of it hold. `judge_levels`
says which of those kept each level back (`LevelResult.status`) and names the
first such rule.

A rule reported ``kit_checked`` (every case of it refused by the kit's own
client before the backend was asked: ARG-003 through stdio, where JSON cannot
carry what it checks) counts neither way: it is no evidence that the backend
meets it, and none that it does not, as with a rule that does not apply. The
level is judged on its other rules, and an attained level's ``reason`` names the
rule the kit checked on its own side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from ...spec import LEVEL_MEANINGS, RULES, Capability, ConformanceLevel
from ..engines.run.frameworks import FRAMEWORKS
from .registry import ALL_CHECKS, SESSION_CHECKS, suite_of_rule
from .report import LevelResult, LevelStatus, RuleResult

__all__ = [
    "LEVELS",
    "LEVELS_BY_NAME",
    "LevelDefinition",
    "attained",
    "describe_levels",
    "judge_levels",
    "level_of_rule",
]


class LevelDefinition(msgspec.Struct, frozen=True):
    """One conformance level: its name, the capability its rules need (None for
    ``base``, ``store_hooks`` and ``session``), what attaining it shows, and its
    rules in catalog order."""

    name: str
    capability: Capability | None
    meaning: str
    rules: tuple[str, ...]


LEVELS: Final[tuple[LevelDefinition, ...]] = tuple(
    LevelDefinition(
        level.value,
        level.capability,
        LEVEL_MEANINGS[level],
        tuple(r.id for r in RULES if r.level is level),
    )
    for level in ConformanceLevel
)
"""Every level of the catalog, in the order reports list them."""

LEVELS_BY_NAME: Final[dict[str, LevelDefinition]] = {level.name: level for level in LEVELS}

_LEVEL_OF_RULE: Final[dict[str, LevelDefinition]] = {
    rule_id: level for level in LEVELS for rule_id in level.rules
}


def level_of_rule(rule_id: str) -> LevelDefinition | None:
    """The level ``rule_id`` belongs to; None for a SHOULD rule (or an unknown id)."""
    return _LEVEL_OF_RULE.get(rule_id)


def _judge(
    level: LevelDefinition, verdicts: dict[str, RuleResult], declared: frozenset[str]
) -> LevelResult:
    def result(status: LevelStatus, reason: str = "") -> LevelResult:
        capability = level.capability.value if level.capability else None
        return LevelResult(level.name, capability, status, level.rules, reason)

    found = [verdicts[rule_id] for rule_id in level.rules if rule_id in verdicts]
    failed = [v for v in found if v.status in ("failed", "xfailed", "xpassed")]
    if failed:
        return result("failed", f"{failed[0].id} {failed[0].status}")
    own = level.capability.value if level.capability else None
    if own is not None and own not in declared:
        return result("not_declared", f"the backend does not declare {own}")
    # A rule that also needs a capability the backend does not declare does not apply.
    inapplicable = {v.id for v in found if v.status == "skipped" and _needs_undeclared(v, declared)}
    # skipped for want of StoreHooks, not_checked, error, or anything else short of a pass
    unverified = [
        v
        for v in found
        if v.status not in ("passed", "not_run", "kit_checked") and v.id not in inapplicable
    ]
    if unverified:
        first = unverified[0]
        return result("unverified", f"{first.id} {first.status}: {first.reason}")
    absent = [rule_id for rule_id in level.rules if rule_id not in verdicts]
    if absent:
        suite = level.name if level.name in ("session", *FRAMEWORKS) else "storage"
        return result("not_run", f"{absent[0]} not run: the run did not check the {suite} suite")
    not_run = [v for v in found if v.status == "not_run"]
    if not_run:
        return result("not_run", f"{not_run[0].id} not run (--only)")
    by_kit = [v for v in found if v.status == "kit_checked"]
    if by_kit:
        return result("attained", f"{by_kit[0].id} checked by the kit, not the backend")
    return result("attained")


def _needs_undeclared(verdict: RuleResult, declared: frozenset[str]) -> bool:
    """True when every check of the rule needs a capability the backend does not
    declare (the rule's own, or one the check needs besides). A framework's rule is
    skipped only for what its store does not have (an extended operation or a twin,
    setup(), data in files under its store), which its contract leaves optional, as
    LangGraph's suite reports "not implemented"; what this machine lacks leaves a
    check not checked, never skipped."""
    if suite_of_rule(verdict.id) in FRAMEWORKS:
        return True
    checks = [c for c in (*ALL_CHECKS, *SESSION_CHECKS) if c.rule_id == verdict.id]
    return bool(checks) and all({n.value for n in c.needs} - declared for c in checks)


def judge_levels(
    rules: Iterable[RuleResult], capabilities: Iterable[str]
) -> tuple[LevelResult, ...]:
    """Every level in `LEVELS` order, judged on a run's rule verdicts (``KitReport.rules``)
    and the capabilities the backend declares (``KitReport.capabilities``)."""
    verdicts = {r.id: r for r in rules}
    declared = frozenset(capabilities)
    # A framework's store and a checkpointer are different backends: a run lists the
    # levels of the contract it checked only.
    suites = {suite_of_rule(r) for r in verdicts}
    framework = next((s for s in suites if s in FRAMEWORKS), None)
    return tuple(
        _judge(level, verdicts, declared)
        for level in LEVELS
        if (level.name in FRAMEWORKS and level.name == framework)
        or (level.name not in FRAMEWORKS and framework is None)
    )


def attained(levels: Iterable[LevelResult]) -> tuple[str, ...]:
    """The names of the attained levels, in order."""
    return tuple(level.name for level in levels if level.status == "attained")


def describe_levels(levels: Iterable[LevelResult]) -> str:
    """One line for people: the attained levels, then the others grouped by why not
    (``levels: attained base, truncate · failed codec (CODEC-002 failed) · not declared durable``);
    the full reasons are in the report and the Markdown summary."""
    groups: dict[LevelStatus, list[str]] = {}
    for level in levels:
        shown = level.name
        if level.status in ("failed", "unverified"):
            shown += f" ({level.reason.partition(':')[0]})"  # the rule and its status
        groups.setdefault(level.status, []).append(shown)
    parts = [
        f"{status.replace('_', ' ')} {', '.join(groups[status])}"
        for status in _GROUP_ORDER
        if status in groups
    ]
    return "levels: " + (" · ".join(parts) if parts else "none")


_GROUP_ORDER: Final[tuple[LevelStatus, ...]] = (
    "attained",
    "failed",
    "unverified",
    "not_declared",
    "not_run",
)
