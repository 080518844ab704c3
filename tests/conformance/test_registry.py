"""The catalog and the kit cannot drift: every rule is checked, every check names real rules."""

from __future__ import annotations

from collections import Counter

import pytest
from checkpointspec.conformance.api.registry import (
    ALL_CHECKS,
    CHECKS_BY_NAME,
    UnknownCheckError,
    select_checks,
)
from checkpointspec.conformance.checks.base import check
from checkpointspec.spec import RULES, RULES_BY_ID


def test_every_rule_has_a_check_named_after_it() -> None:
    named = {c.rule_id for c in ALL_CHECKS}
    missing = [r.id for r in RULES if r.id not in named]
    assert not missing, f"rules without a check named after them: {missing}"


def test_no_check_is_listed_twice() -> None:
    twice = [name for name, n in Counter(c.name for c in ALL_CHECKS).items() if n > 1]
    assert not twice


def test_every_check_names_known_rules_and_says_its_rule_first() -> None:
    for c in ALL_CHECKS:
        assert all(r in RULES_BY_ID for r in c.rules), c.name
        assert c.summary.startswith(f"{c.rule_id}:"), (
            f"{c.name}: docstring must open with its rule id"
        )


def test_checks_live_in_the_module_of_their_rule_area() -> None:
    for c in ALL_CHECKS:
        module = c.func.__module__.rsplit(".", 1)[-1]
        assert module != "_support", c.name
        area = c.rule_id.split("-")[0]
        siblings = {
            d.rule_id.split("-")[0] for d in ALL_CHECKS if d.func.__module__ == c.func.__module__
        }
        # the model-based checks sit with the rule they are named after
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
