"""The Node.js example backends (examples/node_backend/) through the stdio protocol.

- The commands of the example's README marked ``# run-in-ci`` run verbatim and
  exit 0 (the quick profile, every message checked against the schema), as
  tests/test_examples.py does for the author's guide.
- ``planted_bug.js`` is rejected with the same failed MUST rules as its Python
  twin ``IgnoresExpectedHead``, on the checks the meta-suite's case for that
  twin runs (tests/quality/cases.py); ``file_backend.js`` passes those checks.
- ``torn_batches.js`` (a batch written one line and one fsync per event) is
  rejected with APPEND-003 on every seed by the crash checks at system-call
  precision, which need no fault point; ``file_backend.js`` passes them.
- Every line of a short recorded conversation with ``file_backend.js`` matches
  the protocol's JSON Schema, as shipped in the package, checked with
  ``jsonschema`` directly (not through the kit's own validator).
- The store's crash handling seen from outside: a torn final line is cut off
  on open and reported in ``repairs``; a lock left by a dead process is taken
  over; after ``close`` the process serves another handle (it declares
  ``reusable``) holding nothing of the closed one.

Skipped, with the reason, when ``node`` is not on PATH. The default profile and
the session suite are ``slow``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit
from helpers import first_seed_fast
from test_examples import marked_commands

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "node_backend"
BACKEND = EXAMPLE / "file_backend.js"
PLANTED = EXAMPLE / "planted_bug.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not on PATH: the Node.js example backends are not checked"
)

# The meta-suite's cases live beside their conftest, which only tests/quality loads.
sys.path.insert(0, str(REPO / "tests" / "quality"))
from cases import MEMORY_CASES, SEED  # noqa: E402
from kit_reports import describe, failed_rules, verdict  # noqa: E402

TWIN = next(case for case in MEMORY_CASES if case.name == "IgnoresExpectedHead")
COMMANDS = marked_commands((EXAMPLE / "README.md").read_text(encoding="utf-8"))


def _command(script: Path) -> str:
    """What ``--process`` gets: node and the script, by absolute path."""
    return f"node {shlex.quote(str(script))}"


# -- the README's commands, verbatim ---------------------------------------------------------


def test_the_readme_marks_the_quick_run() -> None:
    assert any("--profile quick" in c and "--validate-protocol" in c for c in COMMANDS)


# Slow: the quick profile through Node with a process per handle (some 700 of them,
# about 3 min); the kit's verdicts on the Node examples stay in the default run below.
@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_documented_command_exits_zero(command: str) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        command,
        shell=True,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,  # one process per handle: Node starts some 700 of them
        check=False,
    )
    assert result.returncode == 0, (
        f"{command!r} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )


# -- the planted bug and its Python twin -----------------------------------------------------


def _node_run(script: Path, checks: tuple[str, ...]) -> KitReport:
    return run_kit(
        plan_run(
            None,
            process=_command(script),
            validate_protocol=True,
            profile="quick",
            seed=SEED,
            only=checks,
        )
    )


def test_planted_bug_fails_the_rules_its_python_twin_fails() -> None:
    twin = run_kit(plan_run(TWIN.target, profile="quick", seed=SEED, only=TWIN.checks))
    planted = _node_run(PLANTED, TWIN.checks)
    assert twin.exit_status == 1, describe(twin)
    assert planted.exit_status == 1, describe(planted)
    assert TWIN.rule in failed_rules(twin), describe(twin)
    assert failed_rules(planted) == failed_rules(twin), describe(planted)
    assert all("--process" in c.replay for c in planted.checks if c.status == "failed")


def test_the_backend_without_the_bug_passes_those_checks() -> None:
    report = _node_run(BACKEND, TWIN.checks)
    assert report.exit_status == 0, describe(report)
    assert failed_rules(report) == set(), describe(report)


TORN = EXAMPLE / "torn_batches.js"
CRASH_CHECKS = ("DUR-002::killed_at_every_system_call", "KILL-001::killed_after_every_system_call")


@pytest.mark.parametrize("seed", first_seed_fast([0, 1, 2]))
def test_a_batch_written_line_by_line_is_caught_without_fault_points(seed: int) -> None:
    report = run_kit(
        plan_run(None, process=_command(TORN), profile="quick", seed=seed, only=list(CRASH_CHECKS))
    )
    assert report.exit_status == 1, describe(report)
    # A batch torn by a killed writer is a write left half-done: KILL-001 fails too,
    # following from APPEND-003, the root, and so does the rule of the check whose
    # kill state showed it (DUR-002).
    assert report.roots == ("APPEND-003",), describe(report)
    assert failed_rules(report) <= {"APPEND-003", "KILL-001", "DUR-002"}, describe(report)
    assert {"APPEND-003", "KILL-001"} <= failed_rules(report), describe(report)
    assert verdict(report, "KILL-001").follows_from == "APPEND-003", describe(report)
    assert [c.status for c in report.checks] == ["failed", "failed"], describe(report)


def test_the_backend_without_the_crash_bug_passes_those_checks() -> None:
    report = run_kit(
        plan_run(
            None, process=_command(BACKEND), profile="quick", seed=SEED, only=list(CRASH_CHECKS)
        )
    )
    assert report.exit_status == 0, describe(report)
    assert [c.status for c in report.checks] == ["passed", "passed"], describe(report)


@pytest.mark.slow
def test_default_profile_passes() -> None:
    report = run_kit(plan_run(None, process=_command(BACKEND), profile="default", seed=SEED))
    assert report.exit_status == 0, describe(report)


@pytest.mark.slow
def test_session_suite_passes() -> None:
    report = run_kit(
        plan_run(None, process=_command(BACKEND), profile="quick", seed=SEED, suite="session")
    )
    assert report.exit_status == 0, describe(report)


# -- a recorded conversation, line by line against the shipped schema ------------------------


def _schema() -> dict[str, Any]:
    text = (
        resources.files("checkpointspec.backends.stdio")
        .joinpath("protocol.schema.json")
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


def _validator(schema: dict[str, Any], pointer: str) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": pointer, "$defs": schema["$defs"]})


def _converse(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send ``requests`` to one backend process at once, return every reply line it wrote."""
    assert NODE is not None
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        [NODE, str(BACKEND)],
        input=lines,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _hello(store: Path) -> dict[str, Any]:
    return {"op": "hello", "id": 0, "protocol": 1, "path": str(store), "options": {}}


PROMPT = {"type": "user_prompt", "text": "héllo ✓", "blocks": ["a"]}
CALL = {
    "type": "assistant_message",
    "text": "",
    "tool_calls": [{"id": "t1", "name": "edit", "arguments": "{}"}],
}
RESULT = {"type": "tool_result", "tool_call_id": "t1", "content": "ok", "is_error": False}


def _conversation(store: Path) -> list[dict[str, Any]]:
    """One request of every op, a conflict, a refusal, and a fault point resumed."""
    requests: list[dict[str, Any]] = [
        _hello(store),
        {"op": "append", "id": 1, "session_id": "s1", "events": [PROMPT, CALL]},
        {"op": "append", "id": 2, "session_id": "s1", "events": [RESULT], "expected_head": 0},
        {"op": "fault_reports", "id": 3, "enabled": True},
        {"op": "append", "id": 4, "session_id": "s1", "events": [RESULT], "expected_head": 2},
        {"op": "resume", "id": 4},
        {"op": "resume", "id": 4},
        {"op": "resume", "id": 4},
        {"op": "fault_reports", "id": 5, "enabled": False},
        {"op": "read", "id": 6, "session_id": "s1", "since_seq": 1},
        {"op": "head", "id": 7, "session_id": "s1"},
        {"op": "list_sessions", "id": 8},
        {"op": "truncate", "id": 9, "session_id": "s1", "to_seq": 1},
        {"op": "truncate", "id": 10, "session_id": "s1", "to_seq": 5},
        {"op": "generation", "id": 11, "session_id": "s1"},
        {"op": "acquire_maintenance", "id": 12, "session_id": "s1"},
        {"op": "acquire_maintenance", "id": 13, "session_id": "s1"},
        {"op": "release_maintenance", "id": 14, "session_id": "s1"},
        {"op": "head", "id": 15, "session_id": ""},
        {"op": "delete", "id": 16, "session_id": "s1"},
        {"op": "check_integrity", "id": 17},
        {"op": "close", "id": 18},
    ]
    return requests


def test_a_recorded_conversation_matches_the_shipped_schema(tmp_path: Path) -> None:
    schema = _schema()
    request_schema = _validator(schema, "#/$defs/Request")
    reply_schema = _validator(schema, "#/$defs/Reply")
    requests = _conversation(tmp_path)
    replies = _converse(requests)
    ops = {r["id"]: r["op"] for r in requests if r["op"] != "resume"}

    for request in requests:
        request_schema.validate(request)
    for reply in replies:
        reply_schema.validate(reply)
        if "result" in reply:
            _validator(schema, f"#/$defs/results/{ops[reply['id']]}").validate(reply["result"])

    # The conversation went as the protocol says, so the schema saw every kind of line.
    by_id: dict[int, list[dict[str, Any]]] = {}
    for reply in replies:
        by_id.setdefault(reply["id"], []).append(reply)
    assert by_id[2][0]["error"]["type"] == "CheckpointConflictError"
    assert [r.get("fault") for r in by_id[4]] == [
        "append.before_write",
        "append.after_write",
        "append.after_fsync",
        None,
    ]
    assert by_id[4][-1]["result"] == 3
    assert [len(r["events"]) for r in by_id[6][:-1]] == [2]
    assert by_id[6][-1]["result"] == {"count": 2}
    assert by_id[6][0]["events"][0]["event"] == CALL
    assert by_id[10][0]["error"]["reason_code"] == "beyond_head"
    assert by_id[11][0]["result"] == 1
    assert by_id[13][0]["error"]["type"] == "SessionLockedError"
    assert by_id[15][0]["error"]["rule_id"] == "ARG-001"
    assert by_id[17][0]["result"]["ok"] is True


# -- crash handling seen from outside ---------------------------------------------------------


def _log_file(store: Path, session_id: str) -> Path:
    return store / "sessions" / f"{hashlib.sha256(session_id.encode()).hexdigest()}.log"


def test_a_torn_final_line_is_cut_off_and_reported(tmp_path: Path) -> None:
    _converse(
        [_hello(tmp_path), {"op": "append", "id": 1, "session_id": "s", "events": [PROMPT]}],
    )
    log = _log_file(tmp_path, "s")
    intact = log.read_bytes()
    with log.open("ab") as f:  # what a kill in the middle of the next append's write leaves
        f.write(b'{"seq":2,"ts":"2026-01-01T00:00:00.000Z","events":[{"type":"us')

    replies = _converse(
        [
            _hello(tmp_path),
            {"op": "check_integrity", "id": 1},
            {"op": "read", "id": 2, "session_id": "s", "since_seq": 0},
        ],
    )
    integrity = replies[1]["result"]
    assert integrity["ok"] is True
    assert len(integrity["repairs"]) == 1
    assert "cut off" in integrity["repairs"][0]
    assert [e["event"] for e in replies[2]["events"]] == [PROMPT]
    assert log.read_bytes() == intact


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    _converse([_hello(tmp_path)])
    digest = hashlib.sha256(b"s").hexdigest()
    # Pid 2**22 + 1 is above Linux's largest pid: no process has it.
    dead = "4194305-1-00000000"
    (tmp_path / "locks" / f"{digest}.write").write_text(dead)
    (tmp_path / "locks" / f"{digest}.maint").write_text(dead)
    replies = _converse(
        [
            _hello(tmp_path),
            {"op": "append", "id": 1, "session_id": "s", "events": [PROMPT]},
            {"op": "acquire_maintenance", "id": 2, "session_id": "s"},
        ],
    )
    assert replies[1] == {"id": 1, "result": 1}
    assert replies[2] == {"id": 2, "result": None}


def test_after_close_the_process_serves_another_handle(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    replies = _converse(
        [
            _hello(first),
            {"op": "fault_reports", "id": 1, "enabled": True},
            {"op": "acquire_maintenance", "id": 2, "session_id": "s"},
            {"op": "close", "id": 3},
            {**_hello(second), "id": 4},
            {"op": "append", "id": 5, "session_id": "s", "events": [PROMPT]},
            {"op": "close", "id": 6},
            {**_hello(first), "id": 7},
            {"op": "acquire_maintenance", "id": 8, "session_id": "s"},
        ],
    )
    assert replies[0]["result"]["reusable"] is True
    # No fault reports after close (an append would otherwise pause), and the first
    # handle's lock was given back on close.
    assert replies[5] == {"id": 5, "result": 1}
    assert replies[8] == {"id": 8, "result": None}
    assert _log_file(second, "s").exists()
    assert not _log_file(first, "s").exists()


def test_a_closed_handle_refuses_calls_and_takes_close_again(tmp_path: Path) -> None:
    replies = _converse(
        [
            _hello(tmp_path),
            {"op": "close", "id": 1},
            {"op": "head", "id": 2, "session_id": "s"},
            {"op": "close", "id": 3},
        ],
    )
    assert replies[2]["error"]["type"] == "CheckpointerClosedError"
    assert replies[2]["error"]["operation"] == "head"
    assert replies[3] == {"id": 3, "result": None}
