"""docs/backend-authors.md's contract table names every storage rule, each linked to SPEC.md.

The table is the one place an author reads every rule per operation: a rule
added to the catalog without a row (or a link to an anchor SPEC.md does not
have) fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from checkpointspec.spec import RULES, RuleSuite

REPO = Path(__file__).resolve().parents[1]
GUIDE = (REPO / "docs" / "backend-authors.md").read_text(encoding="utf-8")
SPEC = (REPO / "spec" / "SPEC.md").read_text(encoding="utf-8")
_LINK = re.compile(r"\[([A-Z]+-\d{3})\]\(\.\./spec/SPEC\.md#([a-z]+-\d{3})\)")


def _table() -> str:
    start = GUIDE.index("## The author's contract, operation by operation")
    return GUIDE[start : GUIDE.index("### Where authors go wrong", start)]


def test_every_storage_rule_is_in_the_contract_table() -> None:
    linked = {rule_id for rule_id, _ in _LINK.findall(_table())}
    storage = {r.id for r in RULES if r.suite is RuleSuite.STORAGE}
    assert sorted(storage - linked) == []
    assert sorted(linked - storage) == []


def test_every_rule_link_in_the_guide_reaches_its_rule() -> None:
    links = _LINK.findall(GUIDE)
    assert links
    for rule_id, anchor in links:
        assert anchor == rule_id.lower(), rule_id
        assert f'<a id="{anchor}"></a>**{rule_id}**' in SPEC, rule_id
