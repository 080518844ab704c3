"""The langgraph suite end to end (``--langgraph``): a correct saver passes every rule,
and each one-bug saver fails with its rule as the run's one defect."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkpointspec.conformance.checks.langgraph import SCENARIOS
from checkpointspec.conformance.engines.crash.recorder import (
    attach_unavailable,
    tracer_unavailable,
)
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.frontends.explain import explain_rule
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import rules_of_suite
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import Capability
from checkpointspec.spec.langgraph import LANGGRAPH_RULES

pytest_plugins = ["pytester"]

SAVERS = "langgraph_savers:make"


def _run(kind: str, seed: int = 1) -> KitReport:
    run = plan_run(
        SAVERS, suite="langgraph", options={"kind": kind}, profile="quick", seed=seed, workers=1
    )
    return run_kit(run)


def test_a_correct_saver_passes_every_rule() -> None:
    report = _run("DictSaver")
    statuses = {r.id: r.status for r in report.rules}
    assert set(statuses) == {r.id for r in LANGGRAPH_RULES} == rules_of_suite("langgraph")
    assert statuses.pop("LGKILL-001") == "skipped"  # it keeps nothing in files to tear
    assert statuses.pop("LGSETUP-001") == "skipped"  # it has no setup()
    assert statuses.pop("LGSETUP-002") == "skipped"
    assert statuses.pop("LGSETUP-003") == "skipped"
    assert statuses.pop("LGMP-002") == "skipped"  # not declared multi_process
    assert statuses.pop("LGPOWER-001") == "skipped"  # not declared durable
    assert statuses.pop("LGSRV-001") == "skipped"
    assert statuses.pop("LGSRV-002") == "skipped"  # it is on no server
    assert statuses.pop("LGSRV-003") == "skipped"
    assert set(statuses.values()) == {"passed"}, statuses
    assert report.exit_status == 0
    assert [level.name for level in report.levels] == ["langgraph"]


def test_a_sync_only_saver_is_checked_through_its_sync_twin() -> None:
    report = _run("SyncOnly")
    statuses = {r.id: r.status for r in report.rules}
    assert statuses.pop("LGTWIN-001") == "skipped"  # no second twin to agree with
    assert statuses.pop("LGKILL-001") == "skipped"
    assert statuses.pop("LGSETUP-001") == "skipped"
    assert statuses.pop("LGSETUP-002") == "skipped"
    assert statuses.pop("LGSETUP-003") == "skipped"
    assert statuses.pop("LGMP-002") == "skipped"
    assert statuses.pop("LGPOWER-001") == "skipped"
    assert statuses.pop("LGSRV-001") == "skipped"
    assert statuses.pop("LGSRV-002") == "skipped"  # it is on no server
    assert statuses.pop("LGSRV-003") == "skipped"
    assert set(statuses.values()) == {"passed"}, statuses
    assert report.exit_status == 0


@pytest.mark.parametrize(
    ("kind", "rule_id"),
    [
        ("UnlockedWrites", "LGMP-001"),
        pytest.param("BeforeInclusive", "LGLIST-003", marks=pytest.mark.slow),
        pytest.param("SortsWritesByTaskId", "LGWRITE-001", marks=pytest.mark.slow),
        pytest.param("OverwritesRegularWrites", "LGWRITE-002", marks=pytest.mark.slow),
        pytest.param("LatestIsOldest", "LGGET-001", marks=pytest.mark.slow),
        pytest.param("DeleteThreadRootOnly", "LGDEL-001", marks=pytest.mark.slow),
        pytest.param("PruneDropsLatestWrites", "LGPRUNE-001", marks=pytest.mark.slow),
    ],
)
def test_a_one_bug_saver_is_one_defect_of_its_rule(kind: str, rule_id: str) -> None:
    report = _run(kind)
    assert report.exit_status == 1
    assert [d.rule for d in report.defects] == [rule_id], report.defects
    assert report.roots == (rule_id,)
    for failed in (c for c in report.checks if c.status == "failed"):
        assert failed.replay.startswith(f"checkpointspec run --langgraph {SAVERS} --option kind=")


def test_every_rule_has_a_scenario_but_the_machines() -> None:
    # Every rule is exercised by a written-out scenario on every run, whatever the
    # machine draws; concurrency, kills and setup() have checks of their own.
    own = {"LGMP-001", "LGMP-002", "LGKILL-001", "LGPOWER-001"}
    own |= {"LGSETUP-001", "LGSETUP-002", "LGSETUP-003"}
    own |= {"LGCODEC-001", "LGCODEC-002", "LGSRV-001", "LGSRV-002", "LGSRV-003"}
    assert {s.rule for s in SCENARIOS} | own == {r.id for r in LANGGRAPH_RULES}


@pytest.mark.parametrize(
    ("kind", "status"),
    [("TornFileSaver", "failed"), pytest.param("FileSaver", "passed", marks=pytest.mark.slow)],
)
def test_a_writer_killed_at_each_call(kind: str, status: str) -> None:
    reason = stopper_unavailable()
    if reason is not None:
        pytest.skip(reason)
    run = plan_run(
        SAVERS, suite="langgraph", options={"kind": kind}, only=["LGKILL"], seed=1, workers=1
    )
    report = run_kit(run)
    (result,) = report.checks
    assert result.status == status, result.reason
    if status == "failed":
        assert report.roots == ("LGKILL-001",)
        said = " ".join(f"{f.summary} {f.detail} {f.message}" for f in result.findings)
        assert "read back after the writer was killed" in said, said


def test_the_langgraph_suite_needs_a_saver() -> None:
    with pytest.raises(Exception, match="langgraph"):
        plan_run("memory", suite="storage", only=["LGPUT-001"])


@pytest.mark.parametrize(
    "extra",
    [["memory"], ["--suite", "session"], ["--process", "node x.js"]],
    ids=["a backend too", "another suite", "a process too"],
)
def test_langgraph_names_the_backend_and_the_suite(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--langgraph", SAVERS, *extra, "-q"]) == 2
    assert "--langgraph" in capsys.readouterr().err


def test_the_langgraph_suite_without_a_saver_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "memory", "--suite", "langgraph", "-q"]) == 2
    assert "--langgraph" in capsys.readouterr().err


def test_a_factory_returning_no_saver_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--langgraph", "checkpointspec.backends.memory:make", "-q"]) == 2
    assert "not a LangGraph checkpoint saver" in capsys.readouterr().err


def test_the_pytest_plugin_runs_the_langgraph_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))  # langgraph_savers
    pytester.makepyfile(onebug=LAST_WRITE_WINS)
    result = pytester.runpytest_subprocess(
        "--checkpointer-langgraph",
        "onebug:make",
        "--checkpointer-seed",
        "1",
        "--checkpointer-only",
        "LGWRITE",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*LGWRITE-002::* broke LGWRITE-002", "*--checkpointer-langgraph onebug:make*"]
    )


LAST_WRITE_WINS = """
import langgraph_savers

def make(ctx):
    return langgraph_savers.OverwritesRegularWrites()
"""


def test_explain_says_how_a_langgraph_rule_is_run_and_what_checks_it() -> None:
    text = explain_rule("LGKILL-001")
    assert "suite:  langgraph (--langgraph MODULE:FACTORY)" in text
    assert "LGKILL-001::writer_killed_at_each_call" in text


def test_explain_names_the_declaration_a_langgraph_rule_needs() -> None:
    assert "a LangGraph saver declared durable (--declare durable)" in explain_rule("LGSRV-003")
    assert "declared multi_process" in explain_rule("LGMP-002")


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("FileSaver", "passed"),
        ("SetupStartsOver", "failed"),
        ("SetupRefusesAnExistingStore", "failed"),
    ],
)
def test_setup_runs_again(kind: str, status: str) -> None:
    run = plan_run(
        SAVERS, suite="langgraph", options={"kind": kind}, only=["LGSETUP-001"], seed=1, workers=1
    )
    (result,) = run_kit(run).checks
    assert result.status == status, result.reason


def _declared_run(kind: str, only: str) -> KitReport:
    run = plan_run(
        SAVERS,
        suite="langgraph",
        options={"kind": kind},
        only=[only],
        seed=1,
        workers=1,
        declared=[Capability.DURABLE, Capability.MULTI_PROCESS],
    )
    return run_kit(run)


@pytest.mark.parametrize(
    ("kind", "status"),
    [pytest.param("FileSaver", "passed", marks=pytest.mark.slow), ("KeepsItsOwnCopy", "failed")],
)
def test_savers_in_several_processes(kind: str, status: str) -> None:
    report = _declared_run(kind, "LGMP-002")
    (result,) = report.checks
    assert result.status == status, result.reason
    if status == "failed":
        assert report.roots == ("LGMP-002",)
        assert result.replay.startswith(
            f"checkpointspec run --langgraph {SAVERS} --declare durable,multi_process "
        )


@pytest.mark.skipif(tracer_unavailable() is not None, reason=str(tracer_unavailable()))
@pytest.mark.parametrize(
    ("kind", "status"),
    [("FileSaver", "passed"), ("RenamesUnsynced", "failed")],
)
def test_a_power_loss_at_each_operation(kind: str, status: str) -> None:
    report = _declared_run(kind, "LGPOWER-001")
    (result,) = report.checks
    assert result.status == status, result.reason
    if status == "failed":
        assert report.roots == ("LGPOWER-001",)
        said = " ".join(f.message for f in result.findings)
        assert "power loss after op #" in said, said


@pytest.mark.parametrize(
    ("kind", "rule_id"),
    [
        ("DictSaver", None),
        ("WritesAsItSerialises", "LGCODEC-001"),
        ("SkipsWhatDoesNotLoad", "LGCODEC-002"),
    ],
)
def test_the_serializer_failing(kind: str, rule_id: str | None) -> None:
    only = [rule_id] if rule_id is not None else ["LGCODEC"]
    run = plan_run(SAVERS, suite="langgraph", options={"kind": kind}, only=only, seed=1, workers=1)
    report = run_kit(run)
    if rule_id is None:
        assert [c.status for c in report.checks] == ["passed", "passed"], report.checks
        assert all("values " in c.detail for c in report.checks)
    else:
        (result,) = report.checks
        assert result.status == "failed"
        assert report.roots == (rule_id,)
        said = " ".join(f.message for f in result.findings)
        assert "whose serializer failed at its value" in said, said


def test_a_saver_declares_only_what_the_contract_knows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--langgraph", SAVERS, "--declare", "codec", "-q"]) == 2
    assert "declarable: durable, multi_process" in capsys.readouterr().err


def test_declaring_needs_a_saver(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "memory", "--declare", "durable", "-q"]) == 2
    assert "--langgraph" in capsys.readouterr().err


_ATTACHES = pytest.mark.skipif(attach_unavailable() is not None, reason=str(attach_unavailable()))


@pytest.mark.parametrize(
    ("kind", "rule_id", "status"),
    [
        ("ServerSaver", "LGSRV-001", "passed"),
        ("CommitsUnsynced", "LGSRV-001", "failed"),
        ("FileSaver", "LGSRV-001", "skipped"),
        ("ServerSaver", "LGSRV-002", "passed"),
        ("CommitsEachWrite", "LGSRV-002", "failed"),
        ("ServerSaver", "LGSETUP-002", "passed"),
        ("SetupRacesOnAFreshStore", "LGSETUP-002", "failed"),
        ("FileSaver", "LGSETUP-002", "skipped"),
        ("ServerSaver", "LGSETUP-003", "passed"),
        ("TrustsAMarkMadeElsewhere", "LGSETUP-003", "failed"),
        pytest.param("ServerSaver", "LGSRV-003", "passed", marks=_ATTACHES),
        pytest.param("CommitsUnsynced", "LGSRV-003", "failed", marks=_ATTACHES),
    ],
)
def test_the_server_faults(kind: str, rule_id: str, status: str, postgres_dsn: str) -> None:
    run = plan_run(
        SAVERS,
        suite="langgraph",
        options={"kind": kind, "dsn": postgres_dsn},
        only=[rule_id],
        seed=1,
        workers=1,
        declared=[Capability.DURABLE],
    )
    report = run_kit(run)
    (result,) = report.checks
    assert result.status == status, result.reason
    if status == "failed":
        assert report.roots == (rule_id,)
        said = " ".join(f.message for f in result.findings)
        assert any(
            words in said
            for words in (
                "server was killed",
                "connections cut",
                "at once",
                "transaction",
                "power cut of the server",
            )
        ), said
    if status == "skipped":
        assert "unreachable server" in result.reason or "setup=caller" in result.reason
