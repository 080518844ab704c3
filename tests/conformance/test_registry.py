"""The catalog and the kit cannot drift: every rule is checked, every check names real rules."""

from __future__ import annotations

import pytest
from checkpointspec.conformance.registry import CHECKS, check
from checkpointspec.conformance.runner import select_checks
from checkpointspec.spec import RULES, RULES_BY_ID


def test_every_rule_has_a_check_named_after_it() -> None:
    named = {c.rule_id for c in CHECKS.values()}
    missing = [r.id for r in RULES if r.id not in named]
    assert not missing, f"rules without a check named after them: {missing}"


def test_every_check_names_known_rules_and_says_its_rule_first() -> None:
    for c in CHECKS.values():
        assert all(r in RULES_BY_ID for r in c.rules), c.name
        assert c.name.startswith(f"{c.rule_id}::")
        assert c.summary.startswith(f"{c.rule_id}:"), (
            f"{c.name}: docstring must open with its rule id"
        )


def test_registering_an_unknown_rule_fails() -> None:
    with pytest.raises(KeyError, match="NOPE-001"):
        check("NOPE-001")


def test_check_needs_follow_the_rule_it_is_named_after() -> None:
    for c in CHECKS.values():
        capability = RULES_BY_ID[c.rule_id].capability
        if capability is not None:
            assert capability in c.needs, c.name


def test_selection_by_rule_and_by_name() -> None:
    by_rule = select_checks(["TRUNC-002"])
    assert by_rule, "TRUNC-002 selects its checks"
    assert all("TRUNC-002" in c.rules for c in by_rule)
    by_name = select_checks(["APPEND-002::"])
    assert [c.name for c in by_name] == [n for n in CHECKS if n.startswith("APPEND-002::")]
