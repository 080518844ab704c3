"""A gate leaves nothing behind: on a backend that keeps its stores outside their
directories (`ExternalStorage`; a framework's factory: `DropsStores`), every store a run
makes is dropped, its directory still there to name it, a failure to drop is reported,
and a check that copies store directories says why it cannot (running/runner.py,
running/plan.py, engines/crash/holds.py, engines/run/harness.py: discard_store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkpointspec.conformance.engines.crash.holds import copy_store
from checkpointspec.conformance.engines.run.harness import CheckSkipped, Harness
from checkpointspec.conformance.engines.search.budget import parse_budget
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import Capability

PROPERTY = "ARG-001::bad_session_ids_are_refused"


@pytest.mark.usefixtures("broken_backends_importable")
def test_every_store_of_a_run_is_dropped_the_probes_and_a_machines_included(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    model = "SEQ-001::model_based"
    run = plan_run(
        "external_backends:RemembersStores.make",
        profile="quick",
        seed=1,
        only=(model, PROPERTY),
        options={"ledger": str(ledger)},
        budget=parse_budget("none"),
    )
    report = run_kit(run)
    assert report.exit_status == 0, report
    assert report.left_behind == ()
    opened, dropped, found = _ledger(ledger)
    # Every store opened lies under a directory the kit dropped afterwards, and was still
    # there when it was: a backend finds its data by what the directory holds.
    undropped = [p for p in opened if not any(d == p or d in p.parents for d in dropped)]
    assert undropped == [], undropped
    assert set(opened) <= found
    assert len(dropped) == 3  # the probe's and each check's


def _ledger(ledger: Path) -> tuple[list[Path], list[Path], set[Path]]:
    """The stores opened, the directories dropped and the store directories each drop found."""
    lines = ledger.read_text().splitlines()

    def noted(word: str) -> list[Path]:
        return [Path(line.removeprefix(f"{word} ")) for line in lines if line.startswith(word)]

    return noted("opened"), noted("dropped"), set(noted("found"))


def test_a_framework_factory_drops_every_store_of_a_run(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    only = ("OASADD-001::model_based", "OASMP-002::callers_in_processes", "OASKILL-001")
    run = plan_run(
        "openai_session_stores:elsewhere",
        suite="openai_session",
        profile="quick",
        seed=1,
        only=only,
        options={"ledger": str(ledger)},
        declared=(Capability.MULTI_PROCESS,),
        budget=parse_budget("none"),
    )
    assert run.probe.external_storage
    report = run_kit(run)
    assert report.exit_status == 0, report
    assert report.left_behind == ()
    (killed,) = (c for c in report.checks if c.name.startswith("OASKILL-001"))
    # No writer is killed over data the factory says lives on a server.
    assert killed.status == "skipped"
    assert "carries drops_stores" in killed.reason
    opened, dropped, found = _ledger(ledger)
    assert len(dropped) == 4  # the probe's and each check's
    assert len(set(opened)) > 10  # the machine's examples each opened a store of their own
    assert set(opened) <= found


def test_a_framework_store_the_factory_cannot_drop_is_reported_left_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--openai-session", "openai_session_stores:cannot_drop", "--profile", "quick"]
    args += ["--seed", "1", "--only", "OASADD-001::model_based"]
    assert main([*args, "--report", str(tmp_path / "r.json")]) == 0
    assert "left behind the probe's store" in capsys.readouterr().out
    written = json.loads((tmp_path / "r.json").read_bytes())
    assert len(written["left_behind"]) == 2
    assert all("ConnectionError: the server is gone" in left for left in written["left_behind"])


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_store_the_kit_cannot_drop_is_reported_left_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "external_backends:CannotDrop.make", "--profile", "quick", "--seed", "1"]
    args += ["--only", PROPERTY, "--option", f"ledger={tmp_path / 'ledger'}"]
    assert main([*args, "--report", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "left behind the probe's store: drop_stores(" in out
    written = json.loads((tmp_path / "r.json").read_bytes())
    assert len(written["left_behind"]) == 2
    assert all("ConnectionError: the server is gone" in left for left in written["left_behind"])


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_store_directory_is_not_copied_when_its_data_is_elsewhere(tmp_path: Path) -> None:
    run = plan_run(
        "external_backends:RemembersStores.make",
        profile="quick",
        seed=1,
        options={"ledger": str(tmp_path / "ledger")},
    )
    assert run.probe.external_storage
    h = Harness(run, tmp_path / "check")
    with pytest.raises(CheckSkipped, match="keeps its data outside it"):
        copy_store(h, h.new_store())
