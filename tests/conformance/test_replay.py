"""A failure's replay command reproduces it on another machine and checkout.

A model-based failure of a broken backend (tests/quality) is found by the CLI in one
process; its reproduce blob, carried in the JSON report and in the replay command,
replays the same failing steps in a fresh process started elsewhere, with another
hash seed. The seed alone gives the same failure whatever local modules are loaded,
because the kit's Hypothesis runs draw no constants from them. A blob the kit cannot
replay is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from checkpointspec.backends.registry import process_backend, resolve_backend
from checkpointspec.conformance.checks.base import check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.run.kit_run import BackendProbe, KitRun
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.engines.search.properties import run_property
from checkpointspec.conformance.engines.search.replay import (
    HYPOTHESIS_VERSION,
    ReproduceError,
    exact_generation,
    parse_reproduction,
)
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.failures import panel
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.report import REPORT_SCHEMA_VERSION
from checkpointspec.conformance.running.runner import REPLAY_PASSED, run_check
from checkpointspec.spec import Checkpointer
from hypothesis import strategies as st

pytest_plugins = ["pytester"]

QUALITY = Path(__file__).resolve().parents[1] / "quality"
BROKEN = "broken_backends:IgnoresExpectedHead.make"
MODEL_BASED = "SEQ-001::model_based"


def _kit(argv: list[str], cwd: Path, hash_seed: str) -> subprocess.CompletedProcess[str]:
    """The ``checkpointspec`` command in a fresh interpreter, started in ``cwd``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(QUALITY), *sys.path]),
        "PYTHONHASHSEED": hash_seed,
        "COLUMNS": "400",
    }
    return subprocess.run(
        [sys.executable, "-m", "checkpointspec.conformance.frontends.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _only_check(report: Path) -> dict[str, object]:
    data = json.loads(report.read_bytes())
    assert data["schema_version"] == REPORT_SCHEMA_VERSION
    (result,) = data["checks"]
    assert isinstance(result, dict)
    return result


def test_a_model_based_failure_replays_exactly_in_a_fresh_process(tmp_path: Path) -> None:
    found_in, replayed_in = tmp_path / "checkout-a", tmp_path / "elsewhere"
    found_in.mkdir()
    replayed_in.mkdir()
    first = found_in / "report.json"
    argv = ["run", BROKEN, "--only", MODEL_BASED, "--profile", "quick", "--seed", "1", "-q"]
    ran = _kit([*argv, "--report", str(first)], found_in, "1")
    assert ran.returncode == 1, ran.stderr
    failed = _only_check(first)
    assert failed["violated_rule"] == "APPEND-002"
    blob = failed["reproduce"]
    assert isinstance(blob, str)
    assert blob.startswith(f"{HYPOTHESIS_VERSION}:")
    replay_command = failed["replay"]
    assert isinstance(replay_command, str)
    assert replay_command.endswith(f"--seed 1 --reproduce {blob}")
    assert f"replay: {replay_command}" in ran.stdout
    assert "failing steps:" in str(failed["detail"])

    # The printed command, as a user pastes it, elsewhere and with another hash seed.
    words = shlex.split(replay_command)
    assert words[:2] == ["checkpointspec", "run"]
    second = replayed_in / "report.json"
    again = _kit([*words[1:], "-q", "--report", str(second)], replayed_in, "4242")
    assert again.returncode == 1, again.stderr
    replayed = _only_check(second)
    assert replayed["violated_rule"] == "APPEND-002"
    assert replayed["detail"] == failed["detail"]  # the finding and the same failing steps
    assert replayed["reproduce"] == blob
    assert replayed["replay"] == replay_command


def test_the_seed_alone_gives_the_same_failure_whatever_local_modules_are_loaded(
    tmp_path: Path,
) -> None:
    """Another directory, hash seed and backend module (full of literals Hypothesis
    would mix into generation) around the same broken backend: with the same seed the
    failure, its steps and its blob are the same. (The examples drawn are compared
    below: shrinking would hide a difference here.)"""
    shim = tmp_path / "shim"
    shim.mkdir()
    literals = ", ".join(f"{n}, {n * 7919}, 's{n}', 'k{n}'" for n in range(-8, 400))
    (shim / "wrapped_backend.py").write_text(
        f"from broken_backends import IgnoresExpectedHead\n\nLITERALS = [{literals}]\n"
        "make = IgnoresExpectedHead.make\n"
    )
    reports = []
    for backend, cwd, hash_seed in ((BROKEN, tmp_path, "1"), ("wrapped_backend:make", shim, "9")):
        report = cwd / "report.json"
        argv = ["run", backend, "--only", MODEL_BASED, "--profile", "quick", "--seed", "3"]
        ran = _kit([*argv, "-q", "--report", str(report)], cwd, hash_seed)
        assert ran.returncode == 1, ran.stderr
        reports.append(_only_check(report))
    plain, wrapped = reports
    assert wrapped["detail"] == plain["detail"]
    assert wrapped["reproduce"] == plain["reproduce"]


def _examples_drawn(tmp_path: Path) -> list[tuple[list[str], int]]:
    run = KitRun(
        backend=resolve_backend("memory"),
        probe=BackendProbe(frozenset(), has_hooks=False),
        profile=PROFILES["quick"],
        seed=11,
        suite="storage",
    )
    h = Harness(run, tmp_path)
    seen: list[tuple[list[str], int]] = []

    async def body(cp: Checkpointer, value: tuple[list[str], int]) -> None:
        seen.append(value)

    run_property(h, st.tuples(st.lists(st.text(max_size=8), max_size=4), st.integers()), body)
    return seen


def test_a_newly_imported_local_module_does_not_change_the_examples_of_a_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis collects the literals of a module loaded from outside site-packages and
    the standard library; a kit run under the same seed draws the same examples after."""
    before = _examples_drawn(tmp_path / "before")
    module = tmp_path / "fresh_literals.py"
    words = ", ".join(repr(f"w{n}") for n in range(300))
    numbers = ", ".join(str(n * 7919) for n in range(300))
    module.write_text(f"WORDS = [{words}]\nNUMBERS = [{numbers}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("fresh_literals")
    assert _examples_drawn(tmp_path / "after") == before


def test_local_constants_are_off_only_inside_the_kits_runs() -> None:
    from hypothesis.internal.conjecture import providers

    collect = providers._get_local_constants
    with exact_generation():
        assert list(providers._get_local_constants()) == []
    assert providers._get_local_constants is collect


# -- a bad blob -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (f"{HYPOTHESIS_VERSION}:AAFB!AEEH", "does not decode"),
        (f"{HYPOTHESIS_VERSION}:AAFBAEEHAU", "does not decode"),
        ("AAFBAEEHAUEAQQgA", "expected HYPOTHESIS_VERSION:BASE64"),
        ("1.2.3:AAFBAEEHAUEAQQgA", "install hypothesis==1.2.3"),
    ],
    ids=["not-base64", "truncated", "no-version", "other-version"],
)
def test_a_bad_blob_is_one_line_and_exit_2(
    blob: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ReproduceError, match=re.escape(says)):
        parse_reproduction(blob)
    status = main(["run", "memory", "--only", MODEL_BASED, "--reproduce", blob])
    assert status == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert says in line


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_a_blob_needs_exactly_one_check(capsys: pytest.CaptureFixture[str]) -> None:
    blob = f"{HYPOTHESIS_VERSION}:AAFBAEEHAUEAQQgA"
    line = _usage_error(["run", "memory", "--only", "APPEND", "--reproduce", blob], capsys)
    assert "--reproduce replays one check, and 4 are selected" in line


def test_a_check_without_hypothesis_takes_no_blob(capsys: pytest.CaptureFixture[str]) -> None:
    blob = f"{HYPOTHESIS_VERSION}:AAFBAEEHAUEAQQgA"
    argv = ["run", "memory", "--only", "HANDLE-001::handles_share_one_log", "--reproduce", blob]
    line = _usage_error([*argv, "-q"], capsys)
    assert "draws no Hypothesis examples" in line
    assert "--seed alone" in line


@pytest.mark.usefixtures("broken_backends_importable")
def test_a_replayed_example_that_no_longer_fails_passes_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blob of the broken backend's failure, replayed on the reference backend."""
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: one line of text is one line
    report = tmp_path / "broken.json"
    argv = ["run", BROKEN, "--only", MODEL_BASED, "--profile", "quick", "--seed", "1", "-q"]
    assert main([*argv, "--report", str(report)]) == 1
    blob = _only_check(report)["reproduce"]
    assert isinstance(blob, str)
    capsys.readouterr()
    fixed = tmp_path / "fixed.json"
    replay = ["run", "memory", "--only", MODEL_BASED, "--profile", "quick", "--seed", "1"]
    status = main([*replay, "-q", "--reproduce", blob, "--report", str(fixed)])
    assert status == 0
    passed = _only_check(fixed)
    assert (passed["status"], passed["reason"]) == ("passed", REPLAY_PASSED)
    assert f"{MODEL_BASED}: {REPLAY_PASSED}" in capsys.readouterr().out


# -- what the seed does not decide ----------------------------------------------------


def test_checks_timed_by_the_operating_system_say_so() -> None:
    for name in (
        "DUR-002::acknowledged_writes_survive_kill",
        "MP-001::free_running_history",
        "MP-001::processes_share_one_log",
        "KILL-001::commanded_workers",
        "APPEND-004::racing_appends_never_fork",
    ):
        assert CHECKS_BY_NAME[name].replay_note, name
    assert not CHECKS_BY_NAME[MODEL_BASED].replay_note


TIMED = "the kill lands wherever the writer then is"


@check("DUR-002", replay_note=TIMED)
def killed_somewhere(h: Harness) -> None:
    """DUR-002: a stand-in for a check whose kill the clock places."""
    raise RuleViolation("DUR-002", "batch 3 is gone after the kill")


def test_a_timed_checks_panel_does_not_promise_an_exact_replay(tmp_path: Path) -> None:
    kit_check = msgspec.structs.replace(killed_somewhere, needs=frozenset())
    result = run_check(kit_check, plan_run("memory", profile="quick", seed=5), tmp_path)
    assert result.status == "failed"
    assert (result.reproduce, result.replay_note) == (None, TIMED)
    assert result.replay.endswith("--seed 5")  # no blob: the seed is the replay
    lines = panel(result).splitlines()
    replay_at = next(i for i, line in enumerate(lines) if line.startswith("replay: "))
    assert lines[replay_at + 1] == f"(the replay may differ: {TIMED})"


def test_the_replay_command_carries_the_backend_options(tmp_path: Path) -> None:
    kit_check = msgspec.structs.replace(killed_somewhere, needs=frozenset())
    options = {"mode": "two words", "flag": "1"}
    run = plan_run("memory", profile="quick", seed=5, options=options)
    result = run_check(kit_check, run, tmp_path)
    assert "--option flag=1 --option 'mode=two words' --only " in result.replay
    assert shlex.split(result.replay)[3:7] == ["--option", "flag=1", "--option", "mode=two words"]


def test_a_process_backends_replay_names_it_as_the_command_line_did(tmp_path: Path) -> None:
    backend, own = process_backend("node my backend.js", validate=True)
    kit_check = msgspec.structs.replace(killed_somewhere, needs=frozenset())
    run = KitRun(
        backend=backend,
        probe=BackendProbe(frozenset(), has_hooks=False),  # no node here to ask
        profile=PROFILES["quick"],
        seed=5,
        suite="storage",
        options={"flag": "1"},
        process_options=own,
    )
    result = run_check(kit_check, run, tmp_path)
    assert shlex.split(result.replay)[:8] == [
        "checkpointspec",
        "run",
        "--process",
        "node my backend.js",
        "--validate-protocol",
        "--option",
        "flag=1",
        "--only",
    ]


# -- the pytest plugin ----------------------------------------------------------------


@pytest.mark.usefixtures("broken_backends_importable")
def test_the_plugin_prints_both_replays_and_takes_the_blob(pytester: pytest.Pytester) -> None:
    common = ["-p", "no:cacheprovider", "--checkpointer", BROKEN]
    common += ["--checkpointer-only", MODEL_BASED, "--checkpointer-profile", "quick"]
    result = pytester.runpytest_subprocess(*common, "--checkpointer-seed", "1")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    # On CI pytest's short summary repeats the whole message: the same lines, twice. The
    # model-based check explores past its first finding: the first replay is that one's.
    cli_replay = next(line for line in output.splitlines() if line.startswith("replay: "))
    (pytest_replay,) = {line for line in output.splitlines() if line.startswith("    or: pytest")}
    blob = cli_replay.rsplit("--reproduce ", 1)[1]
    assert pytest_replay.endswith(f"--checkpointer-seed 1 --checkpointer-reproduce {blob}")

    words = shlex.split(pytest_replay.removeprefix("    or: "))
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", *words[1:])
    again.assert_outcomes(failed=1)
    steps = output[output.index("failing steps:") : output.index("replay: ")]
    assert steps in again.stdout.str()


def test_the_plugin_refuses_a_bad_blob_in_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--checkpointer", "memory", "--checkpointer-reproduce", "1.2.3:AAFBAEEHAUEAQQgA"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert errors == [
        f"ERROR: --checkpointer-reproduce: the reproduce blob was recorded with Hypothesis "
        f"1.2.3, this environment has {HYPOTHESIS_VERSION}: install hypothesis==1.2.3 to "
        "replay it"
    ]
