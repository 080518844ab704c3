"""A gate leaves nothing behind: on a backend that keeps its stores outside their
directories (`ExternalStorage`), every store a run makes is dropped, a failure to drop
is reported, and a check that copies store directories says why it cannot
(running/runner.py, running/plan.py, engines/crash/holds.py)."""

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
    lines = ledger.read_text().splitlines()
    opened = [Path(line.removeprefix("opened ")) for line in lines if line.startswith("opened ")]
    dropped = [Path(line.removeprefix("dropped ")) for line in lines if line.startswith("dropped ")]
    # Every store opened lies under a directory the kit dropped afterwards.
    undropped = [p for p in opened if not any(d == p or d in p.parents for d in dropped)]
    assert undropped == [], undropped
    assert len(dropped) == 3  # the probe's and each check's


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
