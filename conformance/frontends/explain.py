"""``checkpointspec explain RULE``: one rule of the catalog, and how the kit checks it.

Everything comes from data the kit runs on: the rule, with its suite and its level,
from `checkpointspec.spec.RULES`, the capability's promise from `CAPABILITY_REASONS`,
the checks from both suites' registries. A check listed
here names the rule among the rules it verifies; a model-based check may also
report a rule it does not list when it meets a violation of it.
"""

from __future__ import annotations

import textwrap

from ...spec import CAPABILITY_REASONS, RULES_BY_ID, RuleSuite
from ..engines.run.frameworks import FRAMEWORKS
from ..running.registry import CHECKS_BY_NAME, check_rule_id

__all__ = ["explain_rule"]

_WIDTH = 78


def _how_to_run(suite: RuleSuite) -> str:
    if suite is RuleSuite.STORAGE:
        return ""
    framework = FRAMEWORKS.get(suite.value)
    if framework is not None:
        return f" ({framework.flag} MODULE:FACTORY)"
    return f" (--suite {suite.value})"


def explain_rule(rule_id: str) -> str:
    """The text ``checkpointspec explain`` prints for ``rule_id``.

    Raises `UnknownRuleError` (one line, naming the id) for an id the catalog lacks.
    """
    rule = RULES_BY_ID[check_rule_id(rule_id)]
    framework = FRAMEWORKS.get(rule.suite.value)
    if framework is not None and rule.capability is not None:
        needs = (
            f"{framework.what} declared {rule.capability.value} (--declare "
            f"{rule.capability.value}): {framework.declarable[rule.capability]}"
        )
    elif rule.suite is RuleSuite.LANGGRAPH:
        needs = "a LangGraph saver; skipped where it lacks the operation or twin the rule is about"
    elif framework is not None:
        needs = f"{framework.what}; skipped where it lacks what the rule is about"
    elif rule.capability is None:
        needs = "no capability: every backend"
    else:
        needs = f"{rule.capability.value}: {CAPABILITY_REASONS[rule.capability]}"
    checks = [c for c in CHECKS_BY_NAME.values() if rule.id in c.rules]
    lines = [
        f"{rule.id} ({rule.strength.value}) {rule.title}",
        "",
        *textwrap.wrap(
            rule.statement,
            _WIDTH,
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        ),
        "",
        f"needs:  {needs}",
        f"level:  {rule.level.value if rule.level else 'none (a SHOULD rule decides no verdict)'}",
        f"suite:  {rule.suite.value}" + _how_to_run(rule.suite),
        f"since:  {rule.since}",
        f"checks: {len(checks)}",
        *(f"  {c.name}  {c.summary.removeprefix(f'{c.rule_id}: ')}" for c in checks),
    ]
    return "\n".join(lines) + "\n"
