"""How a check's end becomes its status: only evidence about the backend fails a rule.

Each test builds a `Check` with the `check` decorator and hands it to `run_check`
directly, against the memory backend or a small variant of it defined here
(loaded by ``module:function``, as the kit loads any backend).
"""

from __future__ import annotations

import pickle
import sqlite3
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.backends.registry import BackendRef, BackendTarget, resolve_backend
from checkpointspec.conformance.checks.base import Check, check
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.run.harness import Harness
from checkpointspec.conformance.engines.run.kit_run import KitRun, ReportOutputs
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.engines.search.transcripts import (
    AnsweredDifferently,
    note_difference,
)
from checkpointspec.conformance.engines.target.provenance import (
    RaisedBy,
    blame_session_layer,
    raised_by,
)
from checkpointspec.conformance.running import plan
from checkpointspec.conformance.running.failures import FLAKY_REPLAY, NOT_AGAIN, REDRAWN
from checkpointspec.conformance.running.plan import RunSettingError, plan_run, probe_backend
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME
from checkpointspec.conformance.running.report import CheckResult, summarise_rules, to_junit
from checkpointspec.conformance.running.runner import report_of, run_check
from checkpointspec.spec import (
    BackendContext,
    Capability,
    SessionInfo,
    UnsupportedOperationError,
)
from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition

# -- backends -------------------------------------------------------------------------


class _HeadHitsTheDisk(MemoryCheckpointer):
    async def head(self, session_id: str) -> int:
        raise sqlite3.OperationalError("disk I/O error")


class _NoDelete(MemoryCheckpointer):
    capabilities = MemoryCheckpointer.capabilities - {Capability.DELETE}

    async def delete(self, session_id: str) -> None:
        raise UnsupportedOperationError("delete", Capability.DELETE.value)


class _RefusesDeclaredDelete(MemoryCheckpointer):
    async def delete(self, session_id: str) -> None:
        raise UnsupportedOperationError("delete", Capability.DELETE.value)


class _RefusesAppend(MemoryCheckpointer):
    async def append(self, *args: object, **kwargs: object) -> int:
        raise UnsupportedOperationError("append", "append")


def make_head_hits_the_disk(ctx: BackendContext) -> MemoryCheckpointer:
    return _HeadHitsTheDisk(store_for(ctx.path))


def make_no_delete(ctx: BackendContext) -> MemoryCheckpointer:
    return _NoDelete(store_for(ctx.path))


def make_refuses_declared_delete(ctx: BackendContext) -> MemoryCheckpointer:
    return _RefusesDeclaredDelete(store_for(ctx.path))


def make_refuses_append(ctx: BackendContext) -> MemoryCheckpointer:
    return _RefusesAppend(store_for(ctx.path))


class _DeletesWithoutDeclaring(MemoryCheckpointer):
    """Written before DELETE was a capability: delete works, undeclared."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.DELETE}

    def _require(self, capability: Capability, operation: str) -> None:
        pass


def make_deletes_without_declaring(ctx: BackendContext) -> MemoryCheckpointer:
    return _DeletesWithoutDeclaring(store_for(ctx.path))


class _HidesEmptySessions(MemoryCheckpointer):
    def _listed(self, store: MemoryStore) -> list[SessionInfo]:
        return [info for info in super()._listed(store) if store.logs[info.id]]


def make_hides_empty_sessions(ctx: BackendContext) -> MemoryCheckpointer:
    return _HidesEmptySessions(store_for(ctx.path))


_opened: list[Path] = []


def make_fails_on_reopen(ctx: BackendContext) -> MemoryCheckpointer:
    if ctx.path in _opened:
        raise PermissionError(f"{ctx.path} is locked")
    _opened.append(ctx.path)
    return MemoryCheckpointer(store_for(ctx.path))


def ours(factory: str) -> BackendRef:
    return resolve_backend(f"{__name__}:{factory}")


def run(kit_check: Check, tmp_path: Path, backend: BackendRef | None = None) -> CheckResult:
    backend = backend or resolve_backend("memory")
    run = KitRun(
        backend=backend,
        probe=probe_backend(BackendTarget(backend)),
        profile=PROFILES["quick"],
        seed=1,
        suite="storage",
        budget=PROFILES["quick"].budget_seconds,
    )
    return run_check(kit_check, run, tmp_path)


# -- checks ---------------------------------------------------------------------------


@check("HEAD-001")
async def check_with_a_bug(h: Harness) -> None:
    """HEAD-001: a check with a bug of its own, after a backend call that worked."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    _ = {"s": 1}["t"]  # the check's own KeyError


@check("HEAD-001")
def engine_assertion(h: Harness) -> None:
    """HEAD-001: a synchronous check whose engine trips over its own invariant."""
    raise AssertionError("the engine's bookkeeping is inconsistent")


@check("READ-002")
async def reads_head(h: Harness) -> None:
    """READ-002: calls head, nothing more."""
    cp = await h.open()
    await cp.head("s")


@check("HEAD-001")
async def uses_delete_on_the_way(h: Harness) -> None:
    """HEAD-001: a check that calls delete although its rule is about head."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])
    await cp.delete("s")


@check("HEAD-001")
async def appends(h: Harness) -> None:
    """HEAD-001: appends one event."""
    cp = await h.open()
    await cp.append("s", [h.prompt("a")])


@check("HANDLE-001")
async def reopens(h: Harness) -> None:
    """DUR-001: opens the store a second time."""
    await h.open()
    await h.open()


@check("HEAD-001")
async def finds_a_violation(h: Harness) -> None:
    """HEAD-001: reports a violation of another rule."""
    raise RuleViolation("SEQ-003", "append returned 7; expected 1")


@check("HEAD-001")
async def finds_a_violation_that_reads_like_another(h: Harness) -> None:
    """HEAD-001: a violation whose message names another rule and runs over lines."""
    raise RuleViolation(
        "SEQ-003",
        "[SEQ-002] append('s', 1 event) returned 7; expected 1\nthe log holds 1 event",
        call="append('s', 1 event)",
        expected="1",
        got="returned 7",
    )


@check("HEAD-001")
def flaky_violation(h: Harness) -> None:
    """HEAD-001: a violation Hypothesis could not reproduce, wrapped in its group."""
    raise FlakyFailure("Inconsistent results", [RuleViolation("SEQ-001", "seqs 1, 3")])


@check("HEAD-001")
def flaky_with_two_answers(h: Harness) -> None:
    """HEAD-001: the first run broke one rule, its replay another."""
    raise FlakyFailure(
        "Inconsistent results",
        [
            RuleViolation("SEQ-001", "seqs 1, 3"),
            RuleViolation("HANDLE-001", "handle 1 sees nothing"),
        ],
    )


@check("HEAD-001")
def flaky_draws_after_a_violation(h: Harness) -> None:
    """HEAD-001: a re-run drew other steps, and failed while drawing them."""
    try:
        raise RuleViolation("HANDLE-001", "handle 1 sees nothing")
    except RuleViolation:
        raise FlakyStrategyDefinition.with_detail(
            "The second run stopped drawing earlier"
        ) from None


@check("HEAD-001")
def flaky_draws_with_nothing_broken(h: Harness) -> None:
    """HEAD-001: a re-run drew other steps, and no run broke a rule."""
    raise FlakyStrategyDefinition.with_detail("The second run stopped drawing earlier")


@check("HEAD-001")
def flaky_draws_at_a_call_answered_otherwise(h: Harness) -> None:
    """HEAD-001: a re-run drew other steps after a call answered otherwise, no rule broken."""
    flaky = FlakyStrategyDefinition.with_detail("The second run stopped drawing earlier")
    note_difference(
        flaky,
        AnsweredDifferently(
            "handle 0: append('s1', 1 events, expected_head=0)",
            "returned 1",
            "raised CheckpointConflictError (actual 0)",
        ),
    )
    raise flaky


# -- tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("kit_check", [check_with_a_bug, engine_assertion], ids=["async", "sync"])
def test_an_exception_of_the_kit_is_an_error_not_a_failure(
    tmp_path: Path, kit_check: Check
) -> None:
    result = run(kit_check, tmp_path)
    assert result.status == "error"
    assert result.violated_rule is None
    assert kit_check.func.__name__ in result.detail  # where it was raised
    assert "Traceback (most recent call last)" in result.traceback
    assert kit_check.func.__name__ in result.traceback  # down to the raising frame
    assert "not evidence against the backend" in result.reason


def test_an_exception_the_backend_raised_is_named_by_the_call_that_crashed(
    tmp_path: Path,
) -> None:
    """Not the check's rule (READ-002): head crashed, HEAD-001 in whichever check."""
    result = run(reads_head, tmp_path, ours("make_head_hits_the_disk"))
    assert result.status == "failed"
    assert result.violated_rule == "HEAD-001"
    assert result.detail.startswith("the backend raised OperationalError from head: disk I/O")
    assert 'raise sqlite3.OperationalError("disk I/O error")' in result.detail  # its frames
    assert "provenance.py" not in result.detail  # not the kit's
    assert "provenance.py" in result.traceback


def test_an_undeclared_operation_the_backend_refuses_is_not_checked(tmp_path: Path) -> None:
    result = run(uses_delete_on_the_way, tmp_path, ours("make_no_delete"))
    assert result.status == "not_checked"
    assert result.violated_rule is None
    assert result.reason == (
        "the backend refuses delete (UnsupportedOperationError), which this check needs"
    )


def test_a_declared_operation_that_refuses_breaks_its_own_rule(tmp_path: Path) -> None:
    result = run(uses_delete_on_the_way, tmp_path, ours("make_refuses_declared_delete"))
    assert result.status == "failed"
    assert result.violated_rule == "DELETE-001"


def test_a_refused_core_operation_fails_the_checks_rule(tmp_path: Path) -> None:
    result = run(appends, tmp_path, ours("make_refuses_append"))
    assert result.status == "failed"
    assert result.violated_rule == "HEAD-001"


def test_a_factory_that_raises_on_reopen_is_the_backends_doing(tmp_path: Path) -> None:
    _opened.clear()
    result = run(reopens, tmp_path, ours("make_fails_on_reopen"))
    assert result.status == "failed"
    assert result.violated_rule == "HANDLE-001"
    assert "PermissionError from factory" in result.detail


def test_a_rule_violation_fails_the_rule_it_names(tmp_path: Path) -> None:
    result = run(finds_a_violation, tmp_path)
    assert (result.status, result.violated_rule) == ("failed", "SEQ-003")
    assert result.replay.endswith("--only HEAD-001::finds_a_violation --profile quick --seed 1")


def test_a_finding_is_the_violation_s_value_not_its_text(tmp_path: Path) -> None:
    result = run(finds_a_violation_that_reads_like_another, tmp_path)
    (finding,) = result.findings
    assert (result.violated_rule, finding.rule) == ("SEQ-003", "SEQ-003")
    assert finding.summary == "[SEQ-002] append('s', 1 event) returned 7; expected 1"
    assert finding.message.endswith("expected 1\nthe log holds 1 event")
    assert (finding.call, finding.expected, finding.got) == (
        "append('s', 1 event)",
        "1",
        "returned 7",
    )
    assert finding.raised_by is None
    assert result.detail == finding.detail == f"[SEQ-003] {finding.message}"
    verdicts = {r.id: r.status for r in summarise_rules([result], ())}
    assert verdicts["SEQ-003"] == "failed"
    assert verdicts["SEQ-002"] != "failed"  # named in the message only


def test_the_junit_failure_message_is_the_finding_s_rule_and_summary(tmp_path: Path) -> None:
    kit_run = plan_run("memory", profile="quick", seed=1)
    result = run_check(finds_a_violation, kit_run, tmp_path)
    report = report_of(kit_run, [finds_a_violation], {result.name: result}, 0.0)
    failure = ET.fromstring(to_junit(report)).find(".//failure")
    assert failure is not None
    assert failure.get("message") == "[SEQ-003] append returned 7; expected 1"


def test_a_violation_and_who_raised_an_error_cross_a_process_whole() -> None:
    violation = RuleViolation("SEQ-003", "append returned 7", call="append", got="7")
    again = pickle.loads(pickle.dumps(violation))
    assert (again.rule_id, again.message, again.call, again.expected, again.got) == (
        "SEQ-003",
        "append returned 7",
        "append",
        "",
        "7",
    )
    error = KeyError("s")
    blame_session_layer(error, "Workspace.open")
    assert raised_by(pickle.loads(pickle.dumps(error))) == RaisedBy(
        "session layer", "Workspace.open"
    )


def test_a_finding_of_what_the_backend_raised_says_who_and_from_which_call(
    tmp_path: Path,
) -> None:
    result = run(reads_head, tmp_path, ours("make_head_hits_the_disk"))
    (finding,) = result.findings
    assert (finding.rule, finding.raised_by, finding.call) == ("HEAD-001", "backend", "head")
    assert finding.shape == "head raised OperationalError"
    assert finding.got == "OperationalError: disk I/O error"
    assert 'raise sqlite3.OperationalError("disk I/O error")' in finding.frames
    assert result.detail == finding.detail


def test_a_violation_inside_an_exception_group_still_names_its_rule(tmp_path: Path) -> None:
    result = run(flaky_violation, tmp_path)
    assert (result.status, result.violated_rule) == ("failed", "SEQ-001")
    assert result.detail.splitlines() == ["[SEQ-001] seqs 1, 3", FLAKY_REPLAY, NOT_AGAIN]
    assert "FlakyFailure" in result.traceback  # Hypothesis' words, for --verbose only


def test_each_rule_broken_in_the_runs_of_a_flaky_example_is_a_finding(tmp_path: Path) -> None:
    result = run(flaky_with_two_answers, tmp_path)
    assert result.status == "failed"
    assert [f.rule for f in result.findings] == ["SEQ-001", "HANDLE-001"]
    assert FLAKY_REPLAY in result.findings[0].steps
    assert "another run raised: [HANDLE-001] handle 1 sees nothing" in result.findings[0].steps


def test_a_violation_behind_inconsistent_data_generation_is_a_finding(tmp_path: Path) -> None:
    result = run(flaky_draws_after_a_violation, tmp_path)
    assert (result.status, result.violated_rule) == ("failed", "HANDLE-001")
    assert REDRAWN in result.detail


def test_a_flaky_example_that_broke_no_rule_is_not_checked_not_a_kit_error(
    tmp_path: Path,
) -> None:
    result = run(flaky_draws_with_nothing_broken, tmp_path)
    assert result.status == "not_checked"
    assert "answered the same calls differently on a re-run" in result.reason
    assert result.detail.splitlines()[:2] == [
        FLAKY_REPLAY,
        REDRAWN,
    ]
    (rule,) = summarise_rules([result], Capability, rule_ids=["HEAD-001"])
    assert rule.status == "not_checked"


def test_a_flaky_example_names_the_call_that_answered_otherwise_and_both_answers(
    tmp_path: Path,
) -> None:
    result = run(flaky_draws_at_a_call_answered_otherwise, tmp_path)
    assert result.status == "not_checked"
    assert (
        "handle 0: append('s1', 1 events, expected_head=0) returned 1 on one run and "
        "raised CheckpointConflictError (actual 0) on the re-run"
    ) in result.reason, result.reason


class _ClaimsMultiProcess(MemoryCheckpointer):
    capabilities = MemoryCheckpointer.capabilities | {Capability.MULTI_PROCESS}


def test_a_worker_process_that_cannot_start_is_a_kit_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A factory this process can import but a worker process cannot: the worker
    # exits before its first reply, which says nothing about the backend.
    module = types.ModuleType("checkpointspec_test_in_memory_only")
    module.make = lambda ctx: _ClaimsMultiProcess(store_for(ctx.path))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    backend = resolve_backend(f"{module.__name__}:make")
    result = run(CHECKS_BY_NAME["MP-001::processes_share_one_log"], tmp_path, backend)
    assert result.status == "error", result
    assert result.violated_rule is None
    assert "WorkerExited" in result.reason
    assert "No module named" in result.detail  # the worker's own stderr


# -- the run's output files ----------------------------------------------------------------


def test_a_run_carries_its_output_files(tmp_path: Path) -> None:
    outputs = ReportOutputs(report=str(tmp_path / "r.json"), summary=str(tmp_path / "s.md"))
    run = plan_run("memory", seed=1, only=("SEQ-001",), outputs=outputs)
    assert run.outputs.named() == {"report": outputs.report, "summary": outputs.summary}


@pytest.mark.parametrize("name", ["report", "junit", "badge", "summary"])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_backend_is_opened(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def probe_must_not_run(*_: object, **__: object) -> None:
        raise AssertionError("the backend was opened before the outputs were checked")

    monkeypatch.setattr(plan, "probe_backend", probe_must_not_run)
    missing = str(tmp_path / "no" / "such" / "folder" / "out")
    with pytest.raises(RunSettingError, match="does not exist") as refused:
        plan_run("memory", outputs=ReportOutputs(**{name: missing}))
    assert refused.value.setting == name


# -- a wrong answer is a verdict, never an error of the kit ----------------------------------


def test_a_session_missing_from_the_listing_fails_list_001_not_the_kit(tmp_path: Path) -> None:
    mtime_check = CHECKS_BY_NAME["LIST-003::mtime_follows_modification_order"]
    result = run(mtime_check, tmp_path, ours("make_hides_empty_sessions"))
    # Named at the first divergence: the listing left out a session truncated to 0.
    assert (result.status, result.violated_rule) == ("failed", "TRUNC-005"), result.detail
    root, symptom = result.findings
    assert root.shape == "a session truncated to 0 is no longer listed"
    assert (symptom.rule, symptom.follows_from) == ("LIST-001", "TRUNC-005")
    assert symptom.message.startswith(
        "'y' (truncated to 0 after its events were appended) is not listed: a session "
        "appended to and not deleted stays listed"
    ), symptom.message
    reference = tmp_path / "reference"
    reference.mkdir()
    assert run(mtime_check, reference).status == "passed"


def test_an_undeclared_operation_that_works_is_told_the_one_line_fix(tmp_path: Path) -> None:
    result = run(
        CHECKS_BY_NAME["CAP-001::undeclared_operations_refuse_loudly"],
        tmp_path,
        ours("make_deletes_without_declaring"),
    )
    assert (result.status, result.violated_rule) == ("failed", "CAP-001"), result.detail
    assert result.detail.startswith(
        "[CAP-001] delete works but DELETE is not declared: declare Capability.DELETE, "
        "or make delete raise UnsupportedOperationError"
    ), result.detail
