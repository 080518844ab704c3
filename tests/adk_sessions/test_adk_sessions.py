"""Google ADK's own session services and one-bug services, in the ``adk`` tox environment.

Skipped where ADK is not installed (the core depends on none of it). A correct
in-memory service and a correct persistent one pass every rule they are judged by;
each one-bug service (`adk_services`) fails its rule as the run's one root; and ADK's
services get the verdicts docs/adk.md publishes, through examples/adk_sessions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("google.adk")

from checkpointspec.conformance.engines.crash.recorder import tracer_unavailable
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import rules_of_suite
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import Capability

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BOTH_CLAIMS = (Capability.DURABLE, Capability.MULTI_PROCESS)
ON_A_SERVER = {"ADKSRV-001", "ADKSRV-002", "ADKSRV-003"}

from adk_services import RULE_OF  # noqa: E402  (beside this file, on the path pytest gives)


def _run(
    backend: str,
    *,
    options: dict[str, str] | None = None,
    declared: tuple[Capability, ...] = (),
    only: list[str] | None = None,
    seed: int = 1,
) -> KitReport:
    run = plan_run(
        backend,
        suite="adk_session",
        profile="quick",
        seed=seed,
        workers=1,
        declared=declared,
        options=options or {},
        only=only or [],
    )
    return run_kit(run)


def _statuses(report: KitReport) -> dict[str, str]:
    return {r.id: r.status for r in report.rules}


def test_the_in_memory_service_passes_what_it_is_judged_by() -> None:
    report = _run("adk_services:make", options={"kind": "InMemory"})
    statuses = _statuses(report)
    assert set(statuses) == rules_of_suite("adk_session")
    undeclared = {"ADKSTALE-001", "ADKMP-002", "ADKKILL-001", "ADKPOWER-001", *ON_A_SERVER}
    assert {r for r, s in statuses.items() if s == "skipped"} == undeclared, statuses
    assert {s for r, s in statuses.items() if r not in undeclared} == {"passed"}, statuses
    assert report.exit_status == 0
    assert [level.name for level in report.levels] == ["adk_session"]


def test_a_persistent_service_that_keeps_the_contract_passes_every_rule() -> None:
    report = _run("adk_services:make", options={"kind": "DurableSqlite"}, declared=BOTH_CLAIMS)
    statuses = _statuses(report)
    if stopper_unavailable() is not None:
        assert statuses.pop("ADKKILL-001") == "not_checked"
    if tracer_unavailable() is not None:
        assert statuses.pop("ADKPOWER-001") == "not_checked"
    # A store on files takes no server from its options: the server rules are skipped.
    assert {r: statuses.pop(r) for r in ON_A_SERVER} == dict.fromkeys(ON_A_SERVER, "skipped")
    assert set(statuses.values()) == {"passed"}, statuses
    assert report.exit_status == 0


def test_a_server_answering_before_its_wal_is_written_fails_the_server_rules(
    postgres_dsn: str,
) -> None:
    report = _run(
        "adk_server_services:asynchronous_commit",
        options={"dsn": postgres_dsn},
        declared=BOTH_CLAIMS,
        only=["ADKSRV"],
    )
    failed = {r.id for r in report.rules if r.status == "failed"}
    # The host's power cut is judged on every state a trace allows; a kill may land
    # where the WAL writer had written everything already.
    assert "ADKSRV-003" in failed, report.roots
    assert failed <= {"ADKSRV-001", "ADKSRV-003"}
    assert {r.id: r.status for r in report.rules}["ADKSRV-002"] == "passed"


@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
@pytest.mark.parametrize(("kind", "rule_id"), sorted(RULE_OF.items()))
def test_a_one_bug_service_fails_its_rule_as_the_one_root(
    kind: str, rule_id: str, seed: int
) -> None:
    report = _run("adk_services:make", options={"kind": kind}, seed=seed)
    failed = {r.id for r in report.rules if r.status == "failed"}
    assert failed == {rule_id}, report.roots
    assert set(report.roots) == {rule_id}
    assert report.exit_status == 1


VERDICTS: dict[str, tuple[tuple[Capability, ...], set[str]]] = {
    "recipes:in_memory": ((), set()),
    "recipes:sqlite": (BOTH_CLAIMS, {"ADKITEM-001", "ADKSTALE-001", "ADKPOWER-001"}),
    "recipes:database_sqlite": (BOTH_CLAIMS, {"ADKMP-002", "ADKPOWER-001"}),
    "recipes:database_postgres": (BOTH_CLAIMS, {"ADKITEM-001"}),
}
"""Per recipe: what it is declared to claim and the rules it fails (docs/adk.md)."""

SOMETIMES: dict[str, set[str]] = {
    # DatabaseSessionService on PostgreSQL reads a session's row, events and state in
    # separate statements under READ COMMITTED: callers appending at once, in one
    # process or in several, see a torn get_session (state behind or ahead of the
    # events read) in the runs where an append commits between a reader's statements
    # (docs/adk.md).
    "recipes:database_postgres": {"ADKMP-001", "ADKMP-002"},
}
"""Rules a recipe fails in some runs only, by how its callers interleave: allowed."""


@pytest.mark.parametrize("recipe", list(VERDICTS))
def test_adks_services_get_the_published_verdicts(
    recipe: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared, failing = VERDICTS[recipe]
    monkeypatch.syspath_prepend(str(REPO))  # the recipes are examples.adk_sessions
    options: dict[str, str] = {}
    if recipe.endswith("_postgres"):
        options["dsn"] = request.getfixturevalue("postgres_dsn")
    sometimes = SOMETIMES.get(recipe, set())
    report = _run(f"examples.adk_sessions.{recipe}", options=options, declared=declared)
    failed = {r.id for r in report.rules if r.status == "failed"}
    differing = {
        r.id: (r.reason, r.first_failure)
        for r in report.rules
        if r.id in (failed - sometimes) ^ failing
    }
    assert failed - sometimes == failing, differing
    assert set(report.roots) - sometimes == failing
