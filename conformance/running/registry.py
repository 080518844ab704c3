"""The checks the kit runs: two suites, each one tuple in the catalog's order of areas.

``storage`` (`ALL_CHECKS`, the default) checks a checkpointer against the storage
contract. ``session`` (`SESSION_CHECKS`) checks the session layer (fold,
checkpoints, the workspace, restore, compaction) running on that checkpointer:
the FOLD, CKPT, SNAP, RESTORE and COMPACT rules (`SESSION_AREAS`). ``all`` is
both. Which suite a rule belongs to is a fact of the catalog (``Rule.suite`` in
`checkpointspec.spec.rules`; `suite_of_rule` reads it); a run reports the rules
of its suite only.

The tuples are written out here, module by module, so that what runs is visible
in one place and a caller can pass any other selection to the runner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, get_args

from ...spec import FRAMEWORK_LEVELS, RULES, RULES_BY_ID, RuleSuite
from ..checks import (
    Check,
    adk_session,
    appending,
    arguments,
    capabilities,
    checkpoints,
    closing,
    codec,
    compaction,
    deletion,
    durability,
    durability_server,
    durability_traced,
    events,
    failover,
    folding,
    generation,
    handles,
    head,
    identity,
    integrity,
    kill,
    langgraph,
    listing,
    maintenance,
    network,
    openai_session,
    processes,
    protocol,
    reading,
    restoring,
    restoring_killed,
    schema,
    sequence,
    session_model,
    snapshots,
    truncation,
)
from ..engines.run.kit_run import SuiteSelection

__all__ = [
    "ADK_SESSION_CHECKS",
    "ALL_CHECKS",
    "CHECKS_BY_NAME",
    "DEFAULT_SUITE",
    "FRAMEWORK_CHECKS",
    "LANGGRAPH_CHECKS",
    "OPENAI_SESSION_CHECKS",
    "SESSION_AREAS",
    "SESSION_CHECKS",
    "SUITES",
    "SuiteSelection",
    "UnknownCheckError",
    "UnknownRuleError",
    "check_rule_id",
    "is_session_check",
    "rules_of_suite",
    "select_checks",
    "suite_of_rule",
]

ALL_CHECKS: tuple[Check, ...] = (
    *sequence.CHECKS,
    *events.CHECKS,
    *appending.CHECKS,
    *arguments.CHECKS,
    *identity.CHECKS,
    *reading.CHECKS,
    *head.CHECKS,
    *listing.CHECKS,
    *deletion.CHECKS,
    *truncation.CHECKS,
    *capabilities.CHECKS,
    *generation.CHECKS,
    *handles.CHECKS,
    *closing.CHECKS,
    *durability.CHECKS,
    *durability_traced.CHECKS,
    *failover.CHECKS,
    *durability_server.CHECKS,
    *kill.CHECKS,
    *processes.CHECKS,
    *network.CHECKS,
    *protocol.CHECKS,
    *maintenance.CHECKS,
    *integrity.CHECKS,
    *schema.CHECKS,
    *codec.CHECKS,
)
"""The storage suite: every check of a checkpointer against the storage contract."""

SESSION_CHECKS: tuple[Check, ...] = (
    *folding.CHECKS,
    *checkpoints.CHECKS,
    *snapshots.CHECKS,
    *restoring.CHECKS,
    *restoring_killed.CHECKS,
    *compaction.CHECKS,
    *session_model.CHECKS,
)
"""The session suite: the session layer (``--session-layer``) on the checkpointer."""

LANGGRAPH_CHECKS: tuple[Check, ...] = langgraph.CHECKS
"""The langgraph suite: a LangGraph checkpoint saver (``--langgraph``) against its contract."""

OPENAI_SESSION_CHECKS: tuple[Check, ...] = openai_session.CHECKS
"""The openai_session suite: an OpenAI Agents session store (``--openai-session``)
against its contract."""

ADK_SESSION_CHECKS: tuple[Check, ...] = adk_session.CHECKS
"""The adk_session suite: an ADK session service (``--adk-session-service``), checked
against its own contract."""

FRAMEWORK_CHECKS: tuple[Check, ...] = LANGGRAPH_CHECKS + OPENAI_SESSION_CHECKS + ADK_SESSION_CHECKS
"""Every check of another framework's store interface (`FRAMEWORKS`)."""

DEFAULT_SUITE: Final[SuiteSelection] = "storage"
"""The suite of a run that names none: the CLI, the pytest plugin and `run_kit` alike."""

SUITES: dict[SuiteSelection, tuple[Check, ...]] = {
    "storage": ALL_CHECKS,
    "session": SESSION_CHECKS,
    "all": ALL_CHECKS + SESSION_CHECKS,
    "langgraph": LANGGRAPH_CHECKS,
    "openai_session": OPENAI_SESSION_CHECKS,
    "adk_session": ADK_SESSION_CHECKS,
}
"""The checks of each suite."""
assert set(SUITES) == set(get_args(SuiteSelection))

SESSION_AREAS: frozenset[str] = frozenset(
    r.id.split("-")[0] for r in RULES if r.suite is RuleSuite.SESSION
)
"""The rule areas of the session suite's rules (FOLD, CKPT, SNAP, RESTORE, COMPACT)."""

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in SUITES["all"] + FRAMEWORK_CHECKS}
"""Every check of every suite by check name (``RULE-ID::function_name``)."""

_SESSION_NAMES = frozenset(c.name for c in SESSION_CHECKS)


def is_session_check(check: Check) -> bool:
    """Whether ``check`` belongs to the session suite (it needs a session layer)."""
    return check.name in _SESSION_NAMES


def suite_of_rule(rule_id: str) -> SuiteSelection:
    """The suite that checks the catalog's rule ``rule_id`` (its ``Rule.suite``).

    Raises `UnknownRuleError` (one line, naming the id) for an id the catalog lacks.
    """
    suite = RULES_BY_ID[check_rule_id(rule_id)].suite
    return suite.value


def rules_of_suite(suite: SuiteSelection) -> frozenset[str]:
    """The ids of the catalog's rules a run of ``suite`` reports on."""
    if suite == "all":  # the checkpointer's two suites; a framework's is another backend's
        return frozenset(r.id for r in RULES if r.suite not in FRAMEWORK_LEVELS)
    return frozenset(r.id for r in RULES if r.suite == suite)


class UnknownCheckError(LookupError):
    """A selection (``--only``) matched no check."""


class UnknownRuleError(LookupError):
    """A rule id (``--xfail``, ``--checkpointer-xfail``) that is not in the catalog."""


_RULE_IDS: Final = frozenset(r.id for r in RULES)


def check_rule_id(text: str) -> str:
    """``text`` if it is a rule id of the catalog; else raises `UnknownRuleError`
    with a one-line message naming it (the CLI and the pytest plugin both use this)."""
    if text not in _RULE_IDS:
        raise UnknownRuleError(f"unknown rule {text!r}; `checkpointspec rules` lists them")
    return text


def select_checks(
    only: Iterable[str] = (),
    checks: Iterable[Check] = ALL_CHECKS,
    *,
    suite: SuiteSelection | None = None,
) -> list[Check]:
    """The checks whose name or one of whose rules starts with an entry of ``only``.

    The pool is ``suite``'s checks when it is given, else ``checks``; all of the
    pool when ``only`` is empty. Raises `UnknownCheckError` when a non-empty
    selection matches nothing (naming the suite that holds it, if another does).
    """
    pool = list(SUITES[suite] if suite is not None else checks)
    wanted = tuple(only)
    if not wanted:
        return pool
    selected = [c for c in pool if any(_matches(c, w) for w in wanted)]
    if not selected:
        hint = ""
        elsewhere = [
            name
            for name in SUITES
            if name != "all"
            if name != suite and any(_matches(c, w) for c in SUITES[name] for w in wanted)
        ]
        if suite is not None and elsewhere:
            hint = (
                f" in the {suite} suite; the {elsewhere[0]} suite has it (--suite {elsewhere[0]})"
            )
        raise UnknownCheckError(f"no check matches {', '.join(wanted)}{hint}")
    return selected


def _matches(check: Check, wanted: str) -> bool:
    return check.name.startswith(wanted) or wanted in check.rules
