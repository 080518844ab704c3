"""The meta-suite's contract: every MUST rule has a broken backend the kit rejects naming it.

A rule no broken backend breaks is a rule whose check nobody has seen fail: it
may pass everything. These tests are fast and run no check; they hold the cases
(`cases.py`) to the contract. That each case's run does reject its backend with
its rule is what ``test_kit_catches_bugs.py`` and ``test_kit_catches_hard_bugs.py``
verify, the costly runs among them with the ``slow`` tests.
"""

from __future__ import annotations

import pytest
from cases import ALL_BACKENDS, ALL_CASES, Case
from checkpointspec.backends.registry import BackendLoadError, resolve_backend
from checkpointspec.conformance.running.registry import select_checks, suite_of_rule
from checkpointspec.spec import RULES, RULES_BY_ID, Strength
from stdio_breaches import BREACHES


def test_every_must_rule_is_broken_by_some_backend() -> None:
    # The session suite's rules are broken by session layers (test_session_meta_contract.py).
    must = {r.id for r in RULES if r.strength is Strength.MUST and suite_of_rule(r.id) == "storage"}
    broken = {case.rule for case in ALL_CASES}
    # PROTO-001 is broken by servers of the stdio protocol, not by backends: each of
    # stdio_breaches.BREACHES is rejected with it in test_kit_catches_bugs_over_stdio.py.
    if BREACHES:
        broken.add("PROTO-001")
    assert sorted(must - broken) == [], "MUST rules no broken backend breaks"


def test_every_broken_backend_has_one_case() -> None:
    names = [case.name for case in ALL_CASES]
    assert sorted(names) == sorted(ALL_BACKENDS), "each backend needs exactly one case"
    assert {case.backend for case in ALL_CASES} == set(ALL_BACKENDS.values())


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.name)
def test_a_case_runs_checks_of_its_rule(case: Case) -> None:
    assert case.rule in RULES_BY_ID
    assert case.seeds
    selected = select_checks(case.checks)
    assert selected
    assert [c.name for c in selected if case.rule not in c.rules] == []


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.name)
def test_a_broken_backend_is_its_own_factory_and_says_its_bug(case: Case) -> None:
    factory = resolve_backend(case.target).load()
    assert getattr(factory, "__self__", None) is case.backend
    doc = " ".join((case.backend.__doc__ or "").split())
    assert doc.startswith("Bug: ")
    assert f"must report {case.rule}" in doc


def test_a_factory_is_loaded_through_a_class_attribute() -> None:
    ref = resolve_backend("broken_backends:IgnoresExpectedHead.make")
    assert ref.target == "broken_backends:IgnoresExpectedHead.make"
    assert callable(ref.load())
    with pytest.raises(BackendLoadError, match=r"no attribute 'IgnoresExpectedHead\.nope'"):
        resolve_backend("broken_backends:IgnoresExpectedHead.nope").load()
