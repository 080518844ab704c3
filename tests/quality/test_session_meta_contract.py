"""The session suite's meta contract: every session MUST rule has a broken layer the kit rejects.

The storage contract (``test_meta_contract.py``) holds broken backends to the
storage rules; this file holds broken session layers (`broken_session`,
`session_cases`) to the rules of the session suite (FOLD, CKPT, SNAP, RESTORE,
COMPACT). These tests are fast and run no check. That each case's run does
reject its layer with its rule is ``test_kit_catches_session_bugs.py``'s.
"""

from __future__ import annotations

import pytest
from broken_session import BROKEN_LAYERS
from checkpointspec.conformance.engines.target.session_layer import load_session_layer
from checkpointspec.conformance.running.registry import select_checks, suite_of_rule
from checkpointspec.spec import RULES, RULES_BY_ID, SESSION_LAYER_NAMES, Strength
from session_cases import PENDING_RULES, SESSION_CASES, SessionCase

SESSION_MUST = frozenset(
    r.id for r in RULES if r.strength is Strength.MUST and suite_of_rule(r.id) == "session"
)


def test_every_session_must_rule_is_broken_by_some_layer() -> None:
    broken = {case.rule for case in SESSION_CASES}
    missing = SESSION_MUST - broken - set(PENDING_RULES)
    assert sorted(missing) == [], "session MUST rules no broken layer breaks"


def test_pending_rules_are_pending() -> None:
    assert set(PENDING_RULES) <= SESSION_MUST
    stale = set(PENDING_RULES) & {case.rule for case in SESSION_CASES}
    assert sorted(stale) == [], "a pending rule has its case now: drop it from PENDING_RULES"


def test_every_broken_layer_has_one_case() -> None:
    assert sorted(case.name for case in SESSION_CASES) == sorted(BROKEN_LAYERS)


def test_some_cases_run_by_default_and_the_rest_are_slow() -> None:
    fast = [case.name for case in SESSION_CASES if case.slow is None]
    assert 0 < len(fast) < len(SESSION_CASES)


@pytest.mark.parametrize("case", SESSION_CASES, ids=lambda case: case.name)
def test_a_case_runs_session_checks_of_its_rule(case: SessionCase) -> None:
    assert case.rule in RULES_BY_ID
    assert suite_of_rule(case.rule) == "session"
    assert case.seeds
    selected = select_checks(case.checks, suite="session")
    assert selected
    assert [c.name for c in selected if case.rule not in c.rules] == []


@pytest.mark.parametrize("case", SESSION_CASES, ids=lambda case: case.name)
def test_a_broken_layer_loads_and_says_its_bug(case: SessionCase) -> None:
    layer = load_session_layer(case.target)
    assert layer.target == case.target
    assert all(hasattr(layer, name) for name in SESSION_LAYER_NAMES)
    doc = " ".join((case.layer.__doc__ or "").split())
    assert doc.startswith("Bug: ")
    assert f"must report {case.rule}" in doc
