"""A backend that answers the same calls differently on a re-run is shown at the call.

The model-based machines (the storage machine and the session machine) enter every
call they make and what came back in their run's transcript (`checkpointspec.conformance.engines.search.transcripts`). Two runs of the
same steps on `flaky_backends.EveryOtherStoreConflicts` part at the append the second
store refuses: the difference names that call and both answers, and a check whose
Hypothesis run went otherwise with no rule broken says them in its reason.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import checkpointspec.reference
import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.conformance.engines.contract.outcomes import Err, Ok
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.machines import session, session_runtime, storage_runtime
from checkpointspec.conformance.engines.machines.session import SessionMachine, SessionMachineEnv
from checkpointspec.conformance.engines.machines.session_runtime import stable_answer
from checkpointspec.conformance.engines.machines.storage import CheckpointerMachine, MachineEnv
from checkpointspec.conformance.engines.search.transcripts import (
    AnsweredDifferently,
    Exchange,
    Transcripts,
    recording,
)
from checkpointspec.spec import CheckpointConflictError
from flaky_backends import EveryOtherStoreConflicts

pytestmark = pytest.mark.usefixtures("broken_backends_importable")

APPEND = "handle 0: append('s1', 1 events, expected_head=0)"


def _run_the_same_steps(env: MachineEnv) -> None:
    """One run: a fresh machine (a fresh store), one head, one append on the head."""
    machine = CheckpointerMachine(env)
    try:
        machine.head(0, "s1")
        # The made-up conflict breaks a rule; what matters here is what the transcript says.
        with contextlib.suppress(RuleViolation):
            machine.append(0, "s1", ["user_prompt"], 0)
    finally:
        machine.teardown()


def test_two_runs_of_the_same_steps_part_at_the_call_that_answered_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The steps are called here, not by Hypothesis: its notes have no test to go to.
    monkeypatch.setattr(storage_runtime, "note", lambda text: None)
    target = BackendTarget.named(f"flaky_backends:{EveryOtherStoreConflicts.__qualname__}.make")
    capabilities = EveryOtherStoreConflicts.capabilities
    env = MachineEnv(target=target, capabilities=capabilities, root=tmp_path)
    if next(EveryOtherStoreConflicts.opened) % 2 == 0:
        next(EveryOtherStoreConflicts.opened)  # the first run's handle answers truly
    with recording() as transcripts:
        _run_the_same_steps(env)
        _run_the_same_steps(env)
    difference = transcripts.first_difference()
    assert difference == AnsweredDifferently(
        APPEND, "returned 1", "raised CheckpointConflictError (actual 0)"
    ), transcripts.runs
    assert difference.sentence() == (
        f"{APPEND} returned 1 on one run and raised CheckpointConflictError (actual 0) "
        "on the re-run"
    )


def _transcripts(*runs: list[Exchange]) -> Transcripts:
    transcripts = Transcripts()
    transcripts.runs.extend(runs)
    return transcripts


def test_runs_of_other_steps_show_no_difference() -> None:
    # Another call, or the same text given other events, is another step: the answers
    # after it may differ on a correct backend.
    head = Exchange("head('s')", "returned 0")
    other_call = _transcripts(
        [head, Exchange("read('s')", "returned []")], [head, Exchange("head('t')", "returned 0")]
    )
    assert other_call.first_difference() is None
    other_events = _transcripts(
        [Exchange("append('s', 1 events)", "returned 1", "['user_prompt']")],
        [Exchange("append('s', 1 events)", "returned 1", "['tool_call']")],
    )
    assert other_events.first_difference() is None


def test_the_run_that_shares_the_longest_start_with_the_last_is_compared() -> None:
    a, b = Exchange("head('s')", "returned 0"), Exchange("head('t')", "returned 0")
    transcripts = _transcripts(
        [a, Exchange("head('t')", "returned 5")],
        [a, b, Exchange("read('s')", "returned [1]")],
        [a, b, Exchange("read('s')", "returned [2]")],
    )
    assert transcripts.first_difference() == AnsweredDifferently(
        "read('s')", "returned [1]", "returned [2]"
    )


def test_the_session_machine_names_the_call_a_re_run_answered_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (session, session_runtime):
        monkeypatch.setattr(module, "note", lambda text: None)
    target = BackendTarget.named(f"flaky_backends:{EveryOtherStoreConflicts.__qualname__}.make")
    env = SessionMachineEnv(
        target=target,
        capabilities=EveryOtherStoreConflicts.capabilities,
        root=tmp_path,
        layer=checkpointspec.reference,
    )
    if next(EveryOtherStoreConflicts.opened) % 2 == 0:
        next(EveryOtherStoreConflicts.opened)  # the first run's handle answers truly
    with recording() as transcripts:
        for _ in range(2):  # the same first turn, a prompt and its answer, on a fresh store
            machine = SessionMachine(env)
            try:
                with contextlib.suppress(RuleViolation):
                    machine.first_turn([])
            finally:
                machine.teardown()
    assert transcripts.first_difference() == AnsweredDifferently(
        "append(UserPrompt, expected_head=0)",
        "returned 1",
        "raised CheckpointConflictError (actual 0)",
    ), transcripts.runs


def test_a_session_call_s_answer_keeps_only_what_a_re_run_repeats() -> None:
    assert stable_answer(Err(CheckpointConflictError("s", 2, 3))) == (
        "raised CheckpointConflictError (actual 3)"
    )
    assert stable_answer(Ok(4)) == "returned 4"
    assert stable_answer(Ok(["a", "b"])) == "returned 2 items"
    # A value's text may name the run's directory: only its type is kept.
    assert stable_answer(Ok(Path("/tmp/session-x1"))) == f"returned a {type(Path()).__name__}"
