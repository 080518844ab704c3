"""The lite-agent bridge (backends/stdio/bridges/lite_agent.mjs) and the async example
checkpointer for the lite-agent interface (examples/lite_agent_checkpointer/).

- ``planted_bug.mjs`` (truncate drops its expectedHead) is rejected with the same failed
  MUST rules as its Python twin ``TruncateIgnoresExpectedHead``, on the checks the
  meta-suite's case for that twin runs; ``checkpointer.mjs`` passes those checks.
- Every kit event kind is stored as a lite-agent SessionEvent (the SDK's ``type``s only)
  and comes back equal.
- Errors are mapped by class name and properties: a typed error with its properties
  (camelCase argument names renamed), a typed name without them and anything else
  untyped with the stack; never by message.
- Capabilities are what the object has plus what was declared; a truncate without an
  expectedHead parameter is refused until declared; a CommonJS module is served too.
- The CLI: ``--declare`` without ``--lite-agent`` and an unknown declaration are usage
  errors; the header says what was found and declared.

Skipped, with the reason, when ``node`` is not on PATH. The whole quick profile and
the session suite through the bridge are ``slow``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.backends.stdio.bridges import (
    LITE_AGENT_BRIDGE,
    TRUNCATE_WITHOUT_EXPECTED_HEAD,
    describe_lite_agent,
    lite_agent_command,
)
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport
from checkpointspec.conformance.running.runner import run_kit

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "lite_agent_checkpointer"
CORRECT = f"{EXAMPLE / 'checkpointer.mjs'}#createJsonCheckpointer"
PLANTED = f"{EXAMPLE / 'planted_bug.mjs'}#createJsonCheckpointer"
DECLARED = ("durable", "multi_process")
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not on PATH: the lite-agent bridge is not checked"
)

# The meta-suite's cases live beside their conftest, which only tests/quality loads.
sys.path.insert(0, str(REPO / "tests" / "quality"))
from cases import MEMORY_CASES, SEED  # noqa: E402
from kit_reports import describe, failed_rules  # noqa: E402

TWIN = next(case for case in MEMORY_CASES if case.name == "TruncateIgnoresExpectedHead")

# The SessionEvent types of the lite-agent SDK the kit's events are carried as.
SDK_EVENT_TYPES = {"user", "assistant", "tool_started", "tool_result", "file_snapshot", "summary"}


def _bridge_run(target: str, checks: tuple[str, ...], **settings: Any) -> KitReport:
    return run_kit(
        plan_run(
            None,
            process=lite_agent_command(target, DECLARED),
            validate_protocol=True,
            profile="quick",
            seed=SEED,
            only=checks,
            **settings,
        )
    )


# -- the planted bug and its Python twin -----------------------------------------------------


def test_planted_bug_fails_the_rules_its_python_twin_fails() -> None:
    twin = run_kit(plan_run(TWIN.target, profile="quick", seed=SEED, only=TWIN.checks))
    planted = _bridge_run(PLANTED, TWIN.checks)
    assert twin.exit_status == 1, describe(twin)
    assert planted.exit_status == 1, describe(planted)
    assert TWIN.rule in failed_rules(twin), describe(twin)
    assert failed_rules(planted) == failed_rules(twin), describe(planted)


def test_the_checkpointer_without_the_bug_passes_those_checks() -> None:
    report = _bridge_run(CORRECT, TWIN.checks)
    assert report.exit_status == 0, describe(report)


@pytest.mark.slow
def test_quick_profile_passes() -> None:
    report = _bridge_run(CORRECT, ())
    assert report.exit_status == 0, describe(report)


@pytest.mark.slow
def test_a_declared_truncate_gap_is_one_verdict() -> None:
    """Declared without an expected head, the example's truncate is TRUNC-003 expected to
    fail, and whatever the kit shows to follow from it fails nothing: the run passes."""
    report = run_kit(
        plan_run(
            None,
            process=lite_agent_command(CORRECT, (*DECLARED, TRUNCATE_WITHOUT_EXPECTED_HEAD)),
            profile="quick",
            seed=1,
            expected_failures={"TRUNC-003": "declared truncate_without_expected_head"},
        )
    )
    assert report.exit_status == 0, describe(report)
    # A declared gap is no root to fix: its rule reads xfailed, and what follows from it
    # (ARG-002 of a truncate's expected head among them) is listed under it.
    assert report.roots == (), describe(report)
    verdicts = {r.id: (r.status, r.follows_from) for r in report.rules}
    assert verdicts["TRUNC-003"] == ("xfailed", None), describe(report)
    assert all(
        status != "failed" or follows == "TRUNC-003" for status, follows in verdicts.values()
    ), describe(report)


@pytest.mark.slow
def test_session_suite_passes() -> None:
    report = _bridge_run(CORRECT, (), suite="session")
    assert report.exit_status == 0, describe(report)


# -- one conversation through the bridge -----------------------------------------------------


def _converse(target: str, requests: list[dict[str, Any]], *declared: str) -> list[dict[str, Any]]:
    """Send ``requests`` to one bridge process at once, return every reply line it wrote."""
    assert NODE is not None
    command = [NODE, str(LITE_AGENT_BRIDGE), target]
    if declared:
        command += ["--declare", ",".join(declared)]
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        command, input=lines, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _hello(store: Path, **options: str) -> dict[str, Any]:
    return {"op": "hello", "id": 0, "protocol": 1, "path": str(store), "options": options}


EVERY_KIND: list[dict[str, Any]] = [
    {"type": "user_prompt", "text": "héllo", "blocks": []},
    {"type": "user_prompt", "text": "see", "blocks": ["a.txt", ""]},
    {
        "type": "assistant_message",
        "text": "",
        "tool_calls": [{"id": "t1", "name": "edit", "arguments": '{ "x" : 1 }'}],
    },
    {"type": "tool_started", "tool_call_id": "t1", "name": "edit"},
    {"type": "tool_result", "tool_call_id": "t1", "content": "ok", "is_error": True},
    {
        "type": "file_snapshot",
        "path": "a.txt",
        "content_before": None,
        "truncated": True,
        "encoding": "base64",
        "hash_after": "ab",
        "tool_call_id": "t1",
    },
    {"type": "summary", "text": "so far", "through_seq": 3, "tokens_before": 9, "tokens_after": 2},
    {"type": "background_completion", "task_id": "b1", "content": "done"},
    {"type": "runtime_reminder", "text": "<system-reminder>"},
    {"type": "repair_message", "text": "fixed", "tool_call_id": None},
]


def test_every_event_kind_is_stored_in_the_sdk_vocabulary_and_read_back_equal(
    tmp_path: Path,
) -> None:
    replies = _converse(
        CORRECT,
        [
            _hello(tmp_path),
            {"op": "append", "id": 1, "session_id": "s", "events": EVERY_KIND},
            {"op": "read", "id": 2, "session_id": "s", "since_seq": 0},
            {"op": "close", "id": 3},
        ],
    )
    assert replies[1] == {"id": 1, "result": len(EVERY_KIND)}
    assert [stored["event"] for stored in replies[2]["events"]] == EVERY_KIND
    digest = hashlib.sha256(b"s").hexdigest()
    on_disk = json.loads((tmp_path / "sessions" / f"{digest}.json").read_text(encoding="utf-8"))
    assert {stored["event"]["type"] for stored in on_disk["events"]} == SDK_EVENT_TYPES
    assert on_disk["events"][0]["event"] == {
        "type": "user",
        "message": {"role": "user", "content": "héllo"},
    }


THROWER = """
class CheckpointConflictError extends Error {
  constructor(sessionId, expected, actual) {
    super('conflict'); this.name = 'CheckpointConflictError';
    Object.assign(this, { sessionId, expected, actual });
  }
}
class InvalidArgumentError extends Error {}
export function create() {
  return {
    async append(sessionId) {
      if (sessionId === 'conflict') throw new CheckpointConflictError(sessionId, 1, 2);
      if (sessionId === 'argument') throw Object.assign(new InvalidArgumentError('bad'),
        { argument: 'sessionId', reason: 'empty', reasonCode: 'empty', ruleId: 'ARG-001' });
      if (sessionId === 'bare') throw new InvalidArgumentError('no properties');
      throw new TypeError('CheckpointConflictError in the message only');
    },
    async *read() {},
    async head() { return 0; },
  };
}
"""


def test_errors_are_mapped_by_class_name_and_properties(tmp_path: Path) -> None:
    module = tmp_path / "thrower.mjs"
    module.write_text(THROWER, encoding="utf-8")
    store = tmp_path / "store"
    store.mkdir()
    replies = _converse(
        f"{module}#create",
        [_hello(store)]
        + [
            {"op": "append", "id": n, "session_id": sid, "events": []}
            for n, sid in enumerate(("conflict", "argument", "bare", "other"), start=1)
        ]
        + [{"op": "delete", "id": 5, "session_id": "s"}],
    )
    assert replies[0]["result"]["capabilities"] == []
    errors = [reply["error"] for reply in replies[1:]]
    assert errors[0] == {
        "type": "CheckpointConflictError",
        "message": "conflict",
        "session_id": "conflict",
        "expected": 1,
        "actual": 2,
    }
    assert errors[1]["type"] == "InvalidArgumentError"
    assert (errors[1]["argument"], errors[1]["rule_id"]) == ("session_id", "ARG-001")
    # A typed name without its properties, and a message naming a type, stay untyped.
    assert errors[2]["type"] == "InvalidArgumentError without argument, reason"
    assert errors[3]["type"] == "TypeError"
    assert "at Object.append" in errors[3]["message"]  # the stack
    assert errors[4]["type"] == "UnsupportedOperationError"
    assert errors[4]["capability"] == "delete"


COMMONJS = """
module.exports.make = ({ dir, limit, name }) => ({
  async append() { return limit; },
  async *read() {},
  async head() { return name === '5' ? -1 : dir.length; },
  async truncate(sessionId, toSeq) {},
});
"""


def test_a_short_truncate_must_be_declared_and_options_reach_the_factory(tmp_path: Path) -> None:
    module = tmp_path / "short.cjs"
    module.write_text(COMMONJS, encoding="utf-8")
    store = tmp_path / "store"
    store.mkdir()
    requests = [
        _hello(store, limit="7", name="str:5", path_as="dir"),
        {"op": "append", "id": 1, "session_id": "s", "events": []},
        {"op": "head", "id": 2, "session_id": "s"},
    ]
    refused = _converse(f"{module}#make", requests[:1])
    assert "truncate_without_expected_head" in refused[0]["error"]["message"]

    served = _converse(f"{module}#make", requests, "truncate_without_expected_head")
    assert served[0]["result"]["capabilities"] == ["truncate"]
    assert served[1]["result"] == 7  # a number option arrives as a number
    assert served[2]["result"] == -1  # str: keeps it a string


def test_describe_names_what_was_found_and_declared() -> None:
    found = describe_lite_agent(CORRECT, ["multi_process"])
    assert found.found == ("delete", "list", "truncate")
    assert found.methods == ("checkIntegrity", "close")
    assert found.capabilities == ("delete", "list", "truncate", "multi_process")
    assert "declared multi_process" in found.header()


def test_declare_needs_lite_agent_and_a_known_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "memory", "--declare", "durable"]) == 2
    assert "--declare" in capsys.readouterr().err
    assert main(["run", "--lite-agent", CORRECT, "--declare", "codec"]) == 2
    assert "cannot reach another process" in capsys.readouterr().err


def test_a_closed_handle_refuses_what_the_bridge_answers_itself(tmp_path: Path) -> None:
    """An object with close() gets the calls after it; those the bridge answers itself
    (a method the object lacks) are refused as closed first, as the contract orders."""
    module = tmp_path / "closable.mjs"
    module.write_text(
        "export const make = () => ({ async append() { return 0; }, async *read() {},"
        " async head() { return 0; }, async close() {} });\n",
        encoding="utf-8",
    )
    store = tmp_path / "store"
    store.mkdir()
    replies = _converse(
        f"{module}#make",
        [
            _hello(store),
            {"op": "delete", "id": 1, "session_id": "s"},
            {"op": "close", "id": 2},
            {"op": "delete", "id": 3, "session_id": "s"},
            {"op": "check_integrity", "id": 4},
        ],
    )
    assert replies[1]["error"]["type"] == "UnsupportedOperationError"
    assert [r["error"]["type"] for r in replies[3:]] == ["CheckpointerClosedError"] * 2


# -- what the bridge answers itself --------------------------------------------------------


WITHOUT_CLOSE = (
    "import {{ createJsonCheckpointer }} from {example};\n"
    "// The example without close() and checkIntegrity(): the bridge answers both.\n"
    "export function make(options) {{\n"
    "  const {{ close, checkIntegrity, ...rest }} = createJsonCheckpointer(options);\n"
    "  return rest;\n"
    "}}\n"
)
ANSWERED = ("CLOSE-001", "CLOSE-002", "INTEG-001")


def test_rules_only_the_bridge_answers_for_are_checked_by_the_kit(tmp_path: Path) -> None:
    """A checkpointer without close(): the bridge names close in its hello's ``emulated``,
    and CLOSE-001, CLOSE-002 and INTEG-001 read kit_checked, with why, never passed; the
    example, which has both methods, passes them."""
    module = tmp_path / "without_close.mjs"
    example = json.dumps((EXAMPLE / "checkpointer.mjs").as_uri())
    module.write_text(WITHOUT_CLOSE.format(example=example), encoding="utf-8")
    store = tmp_path / "store"
    store.mkdir()
    hello = _converse(f"{module}#make", [_hello(store)])[0]["result"]
    assert hello["emulated"]["close"] == (
        "the lite-agent bridge answers close() itself: the checkpointer has none"
    )
    checks = tuple(f"{rule_id}::" for rule_id in ANSWERED)
    bridged = _bridge_run(f"{module}#make", checks)
    assert bridged.exit_status == 0, describe(bridged)
    rules = {rule.id: rule for rule in bridged.rules}
    for rule_id in ANSWERED:
        assert rules[rule_id].status == "kit_checked", describe(bridged)
    assert rules["CLOSE-001"].reason.endswith(
        "the lite-agent bridge answers close() itself: the checkpointer has none"
    ), describe(bridged)
    own = _bridge_run(CORRECT, checks)
    assert {rule.id: rule.status for rule in own.rules if rule.id in ANSWERED} == dict.fromkeys(
        ANSWERED, "passed"
    ), describe(own)


SCRATCH = """
export function make({ dir }) {
  return {
    async append() { return 0; },
    async *read() {},
    async head() { return 0; },
    scratchFiles() { return { '*-shm': 'the WAL index, rebuilt on open' }; },
  };
}
export function wrong({ dir }) {
  return { async append() { return 0; }, async *read() {}, async head() { return 0; }, scratchFiles: ['*-shm'] };
}
"""


def test_scratch_files_are_the_checkpointers_own_in_the_hello(tmp_path: Path) -> None:
    module = tmp_path / "scratch.mjs"
    module.write_text(SCRATCH, encoding="utf-8")
    store = tmp_path / "store"
    store.mkdir()
    (hello,) = _converse(f"{module}#make", [_hello(store)])
    assert hello["result"]["scratch_files"] == {"*-shm": "the WAL index, rebuilt on open"}
    assert "scratch files *-shm" in describe_lite_agent(f"{module}#make").header()
    (refused,) = _converse(f"{module}#wrong", [_hello(store)])
    assert "scratchFiles must be" in refused["error"]["message"]
    (plain,) = _converse(CORRECT, [_hello(store)])
    assert plain["result"]["scratch_files"] == {}


HOOKED = """
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const VERSION = 1;
const typed = (name, message, fields) => Object.assign(new Error(message), { name }, fields);
const sum = (events) => createHash('sha256').update(JSON.stringify(events)).digest('hex');

async function load(file) {
  if (!existsSync(file)) return { version: VERSION, events: [], sum: sum([]) };
  const log = JSON.parse(await readFile(file, 'utf8'));
  if (log.version > VERSION) {
    throw typed('SchemaVersionError', `format ${log.version}`, { found: log.version, supported: VERSION });
  }
  return log;
}

function checked(log, file) {
  if (sum(log.events) !== log.sum) {
    throw typed('CorruptStoreError', 'checksum mismatch', { location: file, detail: 'the events do not match their checksum' });
  }
  return log.events;
}

export async function make({ dir }) {
  const file = join(dir, 'log.json');
  await load(file); // a newer store is refused on open
  return {
    async append(sessionId, events, expectedHead) {
      const log = await load(file);
      const stored = checked(log, file).filter((e) => e.sessionId === sessionId);
      if (expectedHead !== undefined && expectedHead !== stored.length) {
        throw typed('CheckpointConflictError', 'conflict', { sessionId, expected: expectedHead, actual: stored.length });
      }
      let seq = stored.length;
      for (const event of events) {
        seq += 1;
        log.events.push({ seq, sessionId, parentSeq: seq > 1 ? seq - 1 : null, ts: new Date(0).toISOString(), event });
      }
      log.sum = sum(log.events);
      await writeFile(file, JSON.stringify(log));
      return seq;
    },
    async *read(sessionId, { sinceSeq = 0 } = {}) {
      const log = await load(file);
      yield* checked(log, file).filter((e) => e.sessionId === sessionId && e.seq > sinceSeq);
    },
    async head(sessionId) {
      const log = await load(file);
      return checked(log, file).filter((e) => e.sessionId === sessionId).length;
    },
    async checkIntegrity() {
      const log = await load(file);
      return sum(log.events) === log.sum ? { ok: true, detail: 'checksum matches' } : { ok: false, detail: 'checksum mismatch in log.json' };
    },
  };
}

export async function markNewerSchema({ dir }) {
  const file = join(dir, 'log.json');
  const log = JSON.parse(await readFile(file, 'utf8'));
  await writeFile(file, JSON.stringify({ ...log, version: VERSION + 1 }));
}

export async function damageStore({ dir }) {
  const file = join(dir, 'log.json');
  const log = JSON.parse(await readFile(file, 'utf8'));
  const message = log.events[3].event.message;
  message.content = String(message.content).replace('x', 'y');
  await writeFile(file, JSON.stringify(log));
  return 'a character of event 4 in log.json, under its checksum';
}
"""


def test_store_hooks_are_the_modules_own_and_reach_the_kit(tmp_path: Path) -> None:
    module = tmp_path / "hooked.mjs"
    module.write_text(HOOKED, encoding="utf-8")
    described = describe_lite_agent(f"{module}#make")
    assert described.storeHooks
    assert "markNewerSchema(), damageStore()" in described.header()
    report = run_kit(
        plan_run(
            None,
            process=lite_agent_command(f"{module}#make", ()),
            validate_protocol=True,
            profile="quick",
            seed=SEED,
            only=("SCHEMA-001", "INTEG-002"),
        )
    )
    statuses = {r.id: r.status for r in report.rules if r.id in ("SCHEMA-001", "INTEG-002")}
    assert statuses == {"SCHEMA-001": "passed", "INTEG-002": "passed"}, describe(report)
    # Without the hooks the same rules are skipped, and only then.
    (tmp_path / "plain.mjs").write_text(
        HOOKED.replace(
            "export async function markNewerSchema", "async function markNewerSchema"
        ).replace("export async function damageStore", "async function damageStore"),
        encoding="utf-8",
    )
    assert not describe_lite_agent(f"{tmp_path / 'plain.mjs'}#make").storeHooks
