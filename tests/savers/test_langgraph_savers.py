"""LangGraph's own savers and conformance suite, in the ``langgraph`` tox environment.

Skipped where LangGraph is not installed (the core depends on none of it): the
mapping of LangGraph's conformance suite stays complete against the installed
package, and the savers of ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` get the verdicts docs/langgraph.md publishes.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

conformance = pytest.importorskip("langgraph.checkpoint.conformance")

from checkpointspec.conformance.running.plan import plan_run  # noqa: E402
from checkpointspec.conformance.running.registry import LANGGRAPH_CHECKS  # noqa: E402
from checkpointspec.conformance.running.runner import run_kit  # noqa: E402
from checkpointspec.spec import RULES_BY_ID, Capability  # noqa: E402
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


BOTH_CLAIMS = (Capability.DURABLE, Capability.MULTI_PROCESS)
VERDICTS = {
    "recipes:in_memory": ((), {"LGCODEC-001"}),
    "recipes:sqlite": (BOTH_CLAIMS, set()),
    "recipes:async_sqlite": (BOTH_CLAIMS, set()),
    "postgres_recipes:postgres": (BOTH_CLAIMS, {"LGCHAN-001", "LGSETUP-002"}),
    "postgres_recipes:async_postgres": (BOTH_CLAIMS, {"LGCHAN-001", "LGSETUP-002"}),
}
"""Each recipe's declarations and the rules it fails, as docs/langgraph.md publishes."""

MACHINE = "LGPUT-001::model_based"


@pytest.mark.parametrize("recipe", list(VERDICTS))
def test_langgraphs_savers_get_the_published_verdicts(
    recipe: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared, failing = VERDICTS[recipe]
    monkeypatch.syspath_prepend(str(REPO))  # the recipes are examples.langgraph_savers
    options = {}
    only: list[str] = []
    if recipe.startswith("postgres_recipes"):
        options["dsn"] = request.getfixturevalue("postgres_dsn")
        # Every check but the machine, which takes minutes on a database per store;
        # the scenarios find what it finds.
        only = [c.name for c in LANGGRAPH_CHECKS if c.name != MACHINE]
    run = plan_run(
        f"examples.langgraph_savers.{recipe}",
        suite="langgraph",
        profile="quick",
        seed=1,
        workers=1,
        declared=declared,
        options=options,
        only=only,
    )
    report = run_kit(run)
    failed = {r.id: r.reason for r in report.rules if r.status not in ("passed", "skipped")}
    assert set(failed) == failing, failed
    assert set(report.roots) == failing
    skipped = {r.id for r in report.rules if r.status == "skipped"}
    if declared:  # what it claims is checked, not skipped
        assert not skipped & {"LGMP-002", "LGPOWER-001", "LGKILL-001", "LGSRV-001"} - _elsewhere(
            recipe
        ), skipped


def _elsewhere(recipe: str) -> set[str]:
    """The crash rules a saver's store cannot be checked by: a server's store has no
    files to tear or trace, a file's no server to kill."""
    on_server = recipe.startswith("postgres_recipes")
    return {"LGKILL-001", "LGPOWER-001"} if on_server else {"LGSRV-001"}


@pytest.mark.parametrize(
    "script",
    sorted((REPO / "examples/langgraph_savers/upstream").glob("*.py")),
    ids=lambda p: p.stem,
)
def test_each_published_reproduction_still_reproduces(
    script: Path, request: pytest.FixtureRequest
) -> None:
    env = dict(os.environ)
    if script.stem.startswith("postgres"):
        env["DB_URI"] = request.getfixturevalue("postgres_dsn")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "AssertionError" in done.stderr, done.stderr
    docs = (REPO / "docs" / "langgraph.md").read_text(encoding="utf-8")
    assert f"upstream/{script.name}" in docs
