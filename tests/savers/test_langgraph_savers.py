"""LangGraph's own savers and conformance suite, in the ``langgraph`` tox environment.

Skipped where LangGraph is not installed (the core depends on none of it): the
mapping of LangGraph's conformance suite stays complete against the installed
package, and the savers of ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` get the verdicts docs/langgraph.md publishes.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

conformance = pytest.importorskip("langgraph.checkpoint.conformance")

from checkpointspec.conformance.running.plan import plan_run  # noqa: E402
from checkpointspec.conformance.running.runner import run_kit  # noqa: E402
from checkpointspec.spec import RULES_BY_ID  # noqa: E402
from langgraph_official import OFFICIAL_TESTS  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODULES = (
    "test_put",
    "test_put_writes",
    "test_get_tuple",
    "test_list",
    "test_delete_thread",
    "test_delete_for_runs",
    "test_copy_thread",
    "test_prune",
)


def _installed_tests() -> list[str]:
    names = []
    for stem in MODULES:
        module = importlib.import_module(f"langgraph.checkpoint.conformance.spec.{stem}")
        (listed,) = [v for k, v in vars(module).items() if re.fullmatch(r"ALL_\w+_TESTS", k)]
        names += [f"{stem}.{test.__name__}" for test in listed]
    return names


def test_every_official_test_maps_to_rules_of_the_contract() -> None:
    assert list(OFFICIAL_TESTS) == _installed_tests()
    for test, rules in OFFICIAL_TESTS.items():
        assert rules, test
        for rule_id in rules:
            assert rule_id in RULES_BY_ID, f"{test}: {rule_id}"
            assert rule_id.startswith("LG"), f"{test}: {rule_id}"


def test_the_docs_show_the_mapping_test_by_test() -> None:
    rows = (REPO / "docs" / "langgraph.md").read_text(encoding="utf-8").splitlines()
    for test, rules in OFFICIAL_TESTS.items():
        start, end = f"| `{test.split('.')[1]}` |", f"| {', '.join(rules)} |"
        assert any(r.startswith(start) and r.endswith(end) for r in rows), (start, end)


@pytest.mark.parametrize("factory", ["in_memory", "sqlite", "async_sqlite"])
def test_langgraphs_savers_pass_the_contract(factory: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))  # the recipes are examples.langgraph_savers
    run = plan_run(
        f"examples.langgraph_savers.recipes:{factory}",
        suite="langgraph",
        profile="quick",
        seed=1,
        workers=1,
    )
    report = run_kit(run)
    failed = {r.id: r.reason for r in report.rules if r.status not in ("passed", "skipped")}
    assert not failed, failed
