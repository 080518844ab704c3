"""The OpenAI Agents SDK's own sessions, in the ``openai-agents`` tox environment.

Skipped where the SDK is not installed (the core depends on none of it): the
sessions of ``openai-agents`` get the verdicts docs/openai-agents.md publishes,
through the recipes of examples/openai_sessions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("agents")

from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import Capability

REPO = Path(__file__).resolve().parents[2]
BOTH_CLAIMS = (Capability.DURABLE, Capability.MULTI_PROCESS)

VERDICTS = {
    "recipes:sqlite": (BOTH_CLAIMS, set()),
    "recipes:async_sqlite": (BOTH_CLAIMS, set()),
    "recipes:sqlalchemy_sqlite": (BOTH_CLAIMS, set()),
    "recipes:sqlalchemy_postgres": (BOTH_CLAIMS, set()),
}
"""Per recipe: what it is declared to claim, and the rules it fails (docs/openai-agents.md)."""


SOMETIMES: dict[str, set[str]] = {
    # SQLAlchemySession orders a conversation by created_at, which PostgreSQL fixes when
    # an add's transaction begins: an add that began first and took the session's lock
    # second sorts before items already read. Callers in processes of their own see it
    # in the runs where one is paused between its BEGIN and its lock (docs/openai-agents.md,
    # examples/openai_sessions/upstream/sqlalchemy_postgres_add_order.py).
    "recipes:sqlalchemy_postgres": {"OASMP-002"},
}
"""Rules a recipe fails in some runs only, by how its callers interleave: allowed."""


@pytest.mark.parametrize("recipe", list(VERDICTS))
def test_the_sdks_sessions_get_the_published_verdicts(
    recipe: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared, failing = VERDICTS[recipe]
    monkeypatch.syspath_prepend(str(REPO))  # the recipes are examples.openai_sessions
    options = {}
    if recipe.endswith("_postgres"):
        options["dsn"] = request.getfixturevalue("postgres_dsn")
    sometimes = SOMETIMES.get(recipe, set())
    run = plan_run(
        f"examples.openai_sessions.{recipe}",
        suite="openai_session",
        profile="quick",
        seed=1,
        workers=1,
        declared=declared,
        options=options,
    )
    report = run_kit(run)
    failed = {
        r.id: r.reason for r in report.rules if r.status not in ("passed", "skipped", "not_run")
    }
    assert set(failed) - sometimes == failing, failed
    assert set(report.roots) - sometimes == failing
    skipped = {r.id for r in report.rules if r.status == "skipped"}
    # A store on a server changes no file a killed or power-cut writer could tear; one
    # on files takes no server the kit could kill, cut off or power-cut.
    on_files, on_a_server = (
        {"OASKILL-001", "OASPOWER-001"},
        {"OASSRV-001", "OASSRV-002", "OASSRV-003"},
    )
    assert skipped == (on_files if options else on_a_server), skipped
