"""The catalog and the kit cannot drift: every rule is checked, every check names real rules.

The kit's checks are three suites (storage and session for a checkpointer, langgraph
for a LangGraph saver); "every check" here is all three.
"""

from __future__ import annotations

from collections import Counter

import pytest
from checkpointspec.conformance.checks.base import check
from checkpointspec.conformance.running.registry import (
    ALL_CHECKS,
    CHECKS_BY_NAME,
    SESSION_AREAS,
    SESSION_CHECKS,
    SUITES,
    UnknownCheckError,
    UnknownRuleError,
    is_session_check,
    rules_of_suite,
    select_checks,
    suite_of_rule,
)
from checkpointspec.spec import RULES, RULES_BY_ID

EVERY_CHECK = SUITES["all"] + SUITES["langgraph"] + SUITES["openai_session"] + SUITES["adk_session"]

PENDING: dict[str, str] = {}
"""Rules whose checks are being written elsewhere; each says where they will be."""


def test_every_rule_has_a_check_named_after_it() -> None:
    named = {c.rule_id for c in EVERY_CHECK} | set(PENDING)
    missing = [r.id for r in RULES if r.id not in named]
    assert not missing, f"rules without a check named after them: {missing}"
    stale = sorted(set(PENDING) & {c.rule_id for c in EVERY_CHECK})
    assert not stale, (
        f"rules in PENDING that have their check now (drop them from PENDING): {stale}"
    )


def test_no_check_is_listed_twice() -> None:
    twice = [name for name, n in Counter(c.name for c in EVERY_CHECK).items() if n > 1]
    assert not twice


def test_every_check_names_known_rules_and_says_its_rule_first() -> None:
    for c in EVERY_CHECK:
        assert all(r in RULES_BY_ID for r in c.rules), c.name
        assert c.summary.startswith(f"{c.rule_id}:"), (
            f"{c.name}: docstring must open with its rule id"
        )


def test_checks_live_in_the_module_of_their_rule_area() -> None:
    for c in EVERY_CHECK:
        module = c.func.__module__.rsplit(".", 1)[-1]
        assert module not in ("_support", "_session"), c.name
        area = c.rule_id.split("-")[0]
        siblings = {
            d.rule_id.split("-")[0] for d in EVERY_CHECK if d.func.__module__ == c.func.__module__
        }
        if module == "session_model":
            # the session layer's state machine judges every session area at once
            assert siblings <= {"RESTORE", "FOLD"}, c.name
            continue
        if module in ("langgraph", "openai_session", "adk_session"):
            # a framework's suite is one contract's: its scenarios are data in one module
            prefix = {"langgraph": "LG", "openai_session": "OAS", "adk_session": "ADK"}[module]
            assert all(s.startswith(prefix) for s in siblings), c.name
            continue
        # the storage model-based checks sit with the rule they are named after
        assert siblings == {area}, f"{c.name} shares {module}.py with areas {sorted(siblings)}"


def test_a_check_naming_an_unknown_rule_cannot_be_made() -> None:
    with pytest.raises(KeyError, match="NOPE-001"):
        check("NOPE-001")


def test_selection_by_rule_and_by_name() -> None:
    by_rule = select_checks(["TRUNC-002"])
    assert by_rule, "TRUNC-002 selects its checks"
    assert all("TRUNC-002" in c.rules for c in by_rule)
    by_name = select_checks(["APPEND-002::"])
    assert [c.name for c in by_name] == [n for n in CHECKS_BY_NAME if n.startswith("APPEND-002::")]


def test_a_selection_matching_nothing_is_refused() -> None:
    with pytest.raises(UnknownCheckError, match="NOPE-999"):
        select_checks(["NOPE-999"])


# -- suites ------------------------------------------------------------------------------


def test_the_suites_split_the_checks_by_area() -> None:
    assert SUITES["storage"] == ALL_CHECKS
    assert SUITES["all"] == ALL_CHECKS + SESSION_CHECKS
    assert SESSION_CHECKS, "the session suite has checks"
    for c in ALL_CHECKS:
        assert suite_of_rule(c.rule_id) == "storage", c.name
        assert not is_session_check(c), c.name
    for c in SESSION_CHECKS:
        assert c.rule_id.split("-")[0] in SESSION_AREAS, c.name
        assert is_session_check(c), c.name


def test_a_rules_suite_is_the_catalogs() -> None:
    for r in RULES:
        assert suite_of_rule(r.id) == r.suite.value, r.id
    with pytest.raises(UnknownRuleError, match="NOPE-999"):
        suite_of_rule("NOPE-999")


def test_every_rule_belongs_to_one_suite() -> None:
    storage, session = rules_of_suite("storage"), rules_of_suite("session")
    langgraph, sessions = rules_of_suite("langgraph"), rules_of_suite("openai_session")
    services = rules_of_suite("adk_session")
    assert not storage & session
    assert not (storage | session) & langgraph
    assert not (storage | session | langgraph) & sessions
    assert not (storage | session | langgraph | sessions) & services
    assert storage | session == rules_of_suite("all")
    assert storage | session | langgraph | sessions | services == {r.id for r in RULES}
    assert "FOLD-001" in session
    assert "MAINT-001" in storage
    assert "LGPUT-001" in langgraph
    assert suite_of_rule("LGPUT-001") == "langgraph"


def test_selection_within_a_suite_points_at_the_other_one() -> None:
    selected = select_checks(["FOLD-001"], suite="session")
    assert "FOLD-001" in {c.rule_id for c in selected}
    assert all("FOLD-001" in c.rules for c in selected)
    with pytest.raises(UnknownCheckError, match=r"storage suite; the session suite has it"):
        select_checks(["FOLD-001"], suite="storage")
    with pytest.raises(UnknownCheckError, match=r"session suite; the storage suite has it"):
        select_checks(["APPEND-002"], suite="session")
