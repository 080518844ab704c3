"""The openai_session suite end to end (``--openai-session``): a correct store passes every
rule, and each one-bug store fails with its rule as the run's one root on every seed."""

from __future__ import annotations

import pytest
from checkpointspec.conformance.checks.openai_session import SCENARIOS
from checkpointspec.conformance.engines.crash.recorder import tracer_unavailable
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.frontends.explain import explain_rule
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import rules_of_suite
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import Capability
from checkpointspec.spec.openai_session import OPENAI_SESSION_RULES

STORES = "openai_session_stores:make"
DECLARED = (Capability.DURABLE, Capability.MULTI_PROCESS)


def _run(kind: str, seed: int = 1, only: tuple[str, ...] = ()) -> KitReport:
    run = plan_run(
        STORES,
        suite="openai_session",
        options={"kind": kind},
        profile="quick",
        seed=seed,
        workers=1,
        only=only,
        declared=DECLARED,
    )
    return run_kit(run)


def test_a_correct_store_passes_every_rule() -> None:
    report = _run("FileSession")
    statuses = {r.id: r.status for r in report.rules}
    assert set(statuses) == {r.id for r in OPENAI_SESSION_RULES} == rules_of_suite("openai_session")
    if stopper_unavailable() is not None:
        assert statuses.pop("OASKILL-001") == "not_checked"
    if tracer_unavailable() is not None:
        assert statuses.pop("OASPOWER-001") == "not_checked"
    # A store on files takes no server from its options: the server rules are skipped.
    on_a_server = {"OASSRV-001", "OASSRV-002", "OASSRV-003"}
    assert {r: statuses.pop(r) for r in on_a_server} == dict.fromkeys(on_a_server, "skipped")
    assert set(statuses.values()) == {"passed"}, statuses
    assert report.exit_status == 0
    assert [level.name for level in report.levels] == ["openai_session"]


def test_an_undeclared_store_skips_what_needs_a_declaration() -> None:
    run = plan_run(
        STORES, suite="openai_session", options={"kind": "FileSession"}, only=["OASMP-002"], seed=1
    )
    (result,) = run_kit(run).checks
    assert result.status == "skipped"
    assert "multi_process" in result.reason.lower()


@pytest.mark.parametrize(
    ("kind", "rule_id"),
    [
        ("KeepsItsOwnCopy", "OASSHARE-001"),
        ("RacyPop", "OASPOP-002"),
        pytest.param("OldestFirstLimit", "OASGET-002", marks=pytest.mark.slow),
        pytest.param("PopKeepsTheItem", "OASPOP-001", marks=pytest.mark.slow),
        pytest.param("ClearsEverySession", "OASCLEAR-001", marks=pytest.mark.slow),
        pytest.param("FoldsIds", "OASISO-001", marks=pytest.mark.slow),
        pytest.param("StripsText", "OASITEM-001", marks=pytest.mark.slow),
        pytest.param("AddsOneByOne", "OASADD-002", marks=pytest.mark.slow),
        pytest.param("TornAdd", "OASPOWER-001", marks=pytest.mark.slow),
    ],
)
def test_a_one_bug_store_is_one_root_of_its_rule(kind: str, rule_id: str) -> None:
    report = _run(kind)
    assert report.exit_status == 1
    assert report.roots == (rule_id,), [(d.rule, d.shape) for d in report.defects]
    for failed in (c for c in report.checks if c.status == "failed"):
        assert failed.replay.startswith(
            f"checkpointspec run --openai-session {STORES} --declare durable,multi_process"
        )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4, 5])
@pytest.mark.parametrize(
    ("kind", "rule_id"),
    [
        ("OldestFirstLimit", "OASGET-002"),
        ("PopKeepsTheItem", "OASPOP-001"),
        ("ClearsEverySession", "OASCLEAR-001"),
        ("FoldsIds", "OASISO-001"),
        ("KeepsItsOwnCopy", "OASSHARE-001"),
        ("AddsOneByOne", "OASADD-002"),
    ],
)
def test_the_root_is_the_same_on_other_seeds(kind: str, rule_id: str, seed: int) -> None:
    assert _run(kind, seed).roots == (rule_id,)


def test_a_writer_killed_mid_add_is_named_by_what_it_tore() -> None:
    if stopper_unavailable() is not None:
        pytest.skip(stopper_unavailable() or "")
    report = _run("AddsOneByOne", only=("OASKILL",))
    (result,) = report.checks
    assert result.status == "failed"
    (finding,) = result.findings
    assert finding.rule == "OASADD-002"
    assert "was kept in part" in finding.message


def test_every_rule_has_a_scenario_or_a_check_of_its_own() -> None:
    own = {"OASADD-002", "OASPOP-002", "OASMP-001", "OASMP-002", "OASKILL-001", "OASPOWER-001"}
    own |= {"OASSRV-001", "OASSRV-002", "OASSRV-003"}
    assert {s.rule for s in SCENARIOS} | own == {r.id for r in OPENAI_SESSION_RULES}


def test_a_factory_returning_no_session_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--openai-session", "openai_session_stores:not_a_session", "-q"]) == 2
    err = capsys.readouterr().err
    assert "not an OpenAI Agents Session" in err
    assert "pop_item" in err


@pytest.mark.parametrize(
    "extra",
    [["memory"], ["--suite", "session"], ["--langgraph", "x:y"]],
    ids=["a backend too", "another suite", "another framework too"],
)
def test_openai_session_names_the_backend_and_the_suite(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--openai-session", STORES, *extra, "-q"]) == 2
    assert "--openai-session" in capsys.readouterr().err


def test_declaring_what_a_session_store_cannot_declare_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--openai-session", STORES, "--declare", "truncate", "-q"]) == 2
    assert "declarable: durable, multi_process" in capsys.readouterr().err


def test_explain_says_how_a_session_rule_is_run_and_what_it_needs() -> None:
    text = explain_rule("OASMP-002")
    assert "(--openai-session MODULE:FACTORY)" in text
    assert "an OpenAI Agents session store declared multi_process" in text
    assert "OASMP-002::callers_in_processes" in text
