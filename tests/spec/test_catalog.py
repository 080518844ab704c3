"""The rule catalog (spec/rules.py) and the generated SPEC.md.

The catalog is data that reports, test names and errors refer to, so its ids must
be unique and well formed, every rule must say something, capabilities must be
real, and SPEC.md must be exactly what the catalog renders to. That spec/
imports only the standard library and msgspec is `tests/test_layering.py`'s.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import checkpointspec.spec
import pytest
from checkpointspec.spec import (
    CAPABILITY_REASONS,
    FRAMEWORK_LEVELS,
    LEVEL_MEANINGS,
    RULES,
    RULES_BY_ID,
    Capability,
    ConformanceLevel,
    Rule,
    RuleSuite,
    Strength,
    rule,
)
from checkpointspec.spec.langgraph import LANGGRAPH_RULES
from checkpointspec.spec.langgraph.rules import LANGGRAPH_DECLARABLE
from checkpointspec.spec.specdoc import render_spec

SPEC_DIR = Path(checkpointspec.spec.__file__).parent
SPEC_MODULES = sorted(SPEC_DIR.glob("*.py"))
RULE_ID = re.compile(r"^[A-Z]+-\d{3}$")
REGENERATE = "python -m checkpointspec.spec.specdoc > spec/SPEC.md"


def test_spec_modules_are_found() -> None:
    names = {path.name for path in SPEC_MODULES}
    assert {"model.py", "rules.py", "events.py", "errors.py", "validation.py"} <= names


# -- rule ids and content --------------------------------------------------------------


def test_rule_ids_are_unique() -> None:
    duplicates = [rule_id for rule_id, n in Counter(r.id for r in RULES).items() if n > 1]
    assert duplicates == []
    assert len(RULES_BY_ID) == len(RULES)


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_rule_ids_are_area_dash_three_digits(r: Rule) -> None:
    assert RULE_ID.match(r.id), r.id


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_title_and_a_statement(r: Rule) -> None:
    for text in (r.title, r.statement, r.since):
        assert text.strip(), r.id
        assert text == text.strip(), f"{r.id}: stray whitespace in {text!r}"
    assert r.statement.endswith("."), f"{r.id}: the statement is one or more sentences"


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_strength_and_a_real_capability_or_none(r: Rule) -> None:
    assert isinstance(r.strength, Strength)
    assert r.capability is None or isinstance(r.capability, Capability)
    assert r.capability is None or r.capability in set(Capability)


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_suite_and_a_level_that_fit_it(r: Rule) -> None:
    assert isinstance(r.suite, RuleSuite)
    if r.strength is Strength.SHOULD:
        assert r.level is None, f"{r.id}: a SHOULD rule decides no verdict, so has no level"
        return
    assert isinstance(r.level, ConformanceLevel)
    if r.suite is RuleSuite.SESSION:
        assert r.level is ConformanceLevel.SESSION, r.id
    elif r.suite in FRAMEWORK_LEVELS:  # another framework's contract: one level
        assert r.level is FRAMEWORK_LEVELS[r.suite], r.id
    elif r.level not in (
        ConformanceLevel.STORE_HOOKS,
        ConformanceLevel.CONNECTION_LOSS,
        ConformanceLevel.STDIO_PROTOCOL,
    ):
        # A storage rule counts towards the level of the capability it needs, or base,
        # unless it is checked only through an opt-in (StoreHooks, ServerRouted) or
        # only a backend behind --process can break it (the stdio protocol).
        assert r.level.capability is r.capability, r.id
        assert r.level is not ConformanceLevel.SESSION, r.id


def test_a_rule_cannot_be_made_with_a_level_that_contradicts_its_strength() -> None:
    with pytest.raises(ValueError, match="NEW-001"):
        Rule("NEW-001", Strength.SHOULD, None, RuleSuite.STORAGE, ConformanceLevel.BASE, "t", "s.")
    with pytest.raises(ValueError, match="NEW-002"):
        Rule("NEW-002", Strength.MUST, None, RuleSuite.STORAGE, None, "t", "s.")
    with pytest.raises(ValueError, match="NEW-003"):
        Rule("NEW-003", Strength.MUST, None, RuleSuite.SESSION, ConformanceLevel.BASE, "t", "s.")


def test_every_rule_of_an_area_is_in_the_same_suite() -> None:
    # SPEC.md names the suite in each area's heading.
    suites: dict[str, set[RuleSuite]] = {}
    for r in RULES:
        suites.setdefault(r.id.split("-")[0], set()).add(r.suite)
    assert {area: s for area, s in suites.items() if len(s) > 1} == {}


def test_every_level_has_a_meaning_and_a_must_rule() -> None:
    assert list(LEVEL_MEANINGS) == list(ConformanceLevel)
    assert all(meaning.strip() for meaning in LEVEL_MEANINGS.values())
    every_rule = RULES + LANGGRAPH_RULES
    assert {r.level for r in every_rule if r.level is not None} == set(ConformanceLevel)
    assert {level.capability for level in ConformanceLevel} - {None} == set(Capability)


def test_every_capability_is_needed_by_some_rule() -> None:
    # A capability no rule needs could be declared without anything being checked.
    needed = {r.capability for r in RULES if r.capability is not None}
    assert needed == set(Capability)


def test_every_capability_has_a_reason() -> None:
    assert set(CAPABILITY_REASONS) == set(Capability)
    assert all(reason.strip() for reason in CAPABILITY_REASONS.values())


def test_rules_of_one_area_are_numbered_in_order() -> None:
    seen: dict[str, list[int]] = {}
    for r in RULES:
        area, number = r.id.split("-")
        seen.setdefault(area, []).append(int(number))
    for area, numbers in seen.items():
        assert numbers == sorted(numbers), area
    # Areas are contiguous blocks: SPEC.md renders one heading per area.
    areas = [r.id.split("-")[0] for r in RULES]
    assert [area for i, area in enumerate(areas) if i == 0 or areas[i - 1] != area] == list(seen)


def test_rule_looks_up_by_id_and_names_unknown_ids() -> None:
    for r in RULES:
        assert rule(r.id) is r is RULES_BY_ID[r.id]
    with pytest.raises(KeyError, match="NOPE-999"):
        rule("NOPE-999")


def test_rule_ids_mentioned_in_spec_sources_exist() -> None:
    # Docstrings point readers at rules; a reference to a missing rule misleads them.
    areas = {r.id.split("-")[0] for r in RULES}
    missing = []
    for path in SPEC_MODULES:
        for mention in re.findall(r"\b([A-Z]+)-(\d{3})\b", path.read_text(encoding="utf-8")):
            rule_id = "-".join(mention)
            if mention[0] in areas and rule_id not in RULES_BY_ID:
                missing.append(f"{path.name}: {rule_id}")
    assert missing == []


# -- SPEC.md ---------------------------------------------------------------------------


def test_spec_md_is_the_rendered_catalog() -> None:
    spec_md = SPEC_DIR / "SPEC.md"
    assert spec_md.exists(), f"spec/SPEC.md is missing; run `{REGENERATE}`"
    assert spec_md.read_text(encoding="utf-8") == render_spec(), (
        f"spec/SPEC.md differs from the catalog; run `{REGENERATE}`"
    )


def test_rendered_spec_states_every_rule() -> None:
    rendered = render_spec()
    for r in RULES:
        assert f"**{r.id}** ({r.strength.value}" in rendered
        assert r.statement in rendered
    for capability in Capability:
        assert f"**{capability.name}**" in rendered
    for level, meaning in LEVEL_MEANINGS.items():
        if any(r.level is level for r in RULES):
            assert f"- `{level.value}`: {meaning}." in rendered


def test_the_langgraph_rules_are_a_catalog_of_their_own() -> None:
    ids = [r.id for r in LANGGRAPH_RULES]
    assert len(set(ids)) == len(ids)
    assert set(ids) <= {r.id for r in RULES}
    assert not set(ids) & {r.id for r in RULES if r.suite is not RuleSuite.LANGGRAPH}
    for r in LANGGRAPH_RULES:
        assert RULE_ID.match(r.id), r.id
        assert r.id.startswith("LG"), r.id
        assert r.suite is RuleSuite.LANGGRAPH, r.id
        assert r.level is ConformanceLevel.LANGGRAPH, r.id
        # An extended operation is detected, not declared: only what a saver cannot
        # show of itself is.
        assert r.capability is None or r.capability in LANGGRAPH_DECLARABLE, r.id
