"""A contract is a value the engines take: a key-value register (`kv_register`),
driven through the generic model-based machine and judged by the generic history
checker, with no code written for it in the engines."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.conformance.engines.contract.contract import Call, Contract, Raised, Returned
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.crash.contract_kills import killed_at_each_call
from checkpointspec.conformance.engines.crash.contract_power_loss import (
    PowerLosses,
    power_loss_states,
)
from checkpointspec.conformance.engines.crash.recorder import tracer_unavailable
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.engines.history.linearizable import (
    Diverged,
    Linearized,
    Recorded,
    Undecided,
    check_linearizable,
)
from checkpointspec.conformance.engines.machines.contract import contract_machine
from checkpointspec.conformance.engines.processes.contract_programs import (
    judge_history,
    programs,
    run_programs,
)
from checkpointspec.conformance.engines.processes.contract_worker import (
    WorkerGaveNoAnswer,
    run_programs_in_processes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import run_state_machine_as_test
from kv_register import (
    REGISTER,
    FileRegister,
    ForgivingDelete,
    UnlockedPut,
    opener,
)

HERE = Path(__file__).resolve().parent


def _register(kind: str) -> BackendTarget:
    """The test register as a backend target: ``kind`` names its store class."""
    return BackendTarget.named("kv_register:make", {"kind": kind})


QUICK = settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _machine_finding(kind: type[FileRegister], root: Path) -> RuleViolation | None:
    machine = contract_machine(REGISTER, opener(kind), root)
    try:
        run_state_machine_as_test(machine, settings=QUICK)
    except RuleViolation as violation:
        return violation
    return None


def test_the_machine_passes_a_correct_register(tmp_path: Path) -> None:
    assert _machine_finding(FileRegister, tmp_path) is None


def test_the_machine_names_the_first_call_that_left_the_contract(tmp_path: Path) -> None:
    found = _machine_finding(ForgivingDelete, tmp_path)
    assert found is not None
    assert found.rule_id == "KV-003"
    assert "delete(" in found.message
    assert "raised KeyMissing" in found.message


def test_the_machine_does_not_see_a_race_one_caller_never_shows(tmp_path: Path) -> None:
    assert _machine_finding(UnlockedPut, tmp_path) is None


def _history_finding(kind: type[FileRegister], root: Path) -> RuleViolation | None:
    stores = iter(range(10_000))

    @QUICK
    @given(drawn=programs(REGISTER))
    def concurrent(drawn: tuple[tuple[Call, ...], ...]) -> None:
        path = root / f"store-{next(stores)}"
        path.mkdir()
        history = asyncio.run(run_programs(REGISTER, opener(kind), path, drawn))
        judge_history(REGISTER, history)

    try:
        concurrent()
    except RuleViolation as violation:
        return violation
    return None


def test_concurrent_callers_of_a_correct_register_are_linearizable(tmp_path: Path) -> None:
    assert _history_finding(FileRegister, tmp_path) is None


def test_concurrent_callers_find_the_lost_update(tmp_path: Path) -> None:
    found = _history_finding(UnlockedPut, tmp_path)
    assert found is not None
    assert found.rule_id == "KV-002"
    assert "put(" in found.message
    assert "in no order of the concurrent calls" in found.message


_PROCESSES = settings(QUICK, max_examples=8)


def _processes_finding(kind: str, root: Path) -> RuleViolation | None:
    stores = iter(range(10_000))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }

    @_PROCESSES
    @given(drawn=programs(REGISTER, callers=3, calls=3))
    def in_processes(drawn: tuple[tuple[Call, ...], ...]) -> None:
        path = root / f"store-{next(stores)}"
        path.mkdir()
        history = asyncio.run(
            run_programs_in_processes(
                "kv_register:REGISTER",
                _register(kind),
                path,
                drawn,
                env=env,
            )
        )
        assert len(history) == sum(map(len, drawn)), "every call is in the history"
        judge_history(REGISTER, history)

    try:
        in_processes()
    except RuleViolation as violation:
        return violation
    return None


def test_callers_in_processes_of_a_correct_register_are_linearizable(tmp_path: Path) -> None:
    assert _processes_finding("FileRegister", tmp_path) is None


def test_then_programs_start_in_every_process_after_every_first_program(tmp_path: Path) -> None:
    # Each worker reads, then, told to go with the others, writes: every read is over
    # before any write begins, whichever worker is slower to start.
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    first = [[Call("get", ("a",))] for _ in range(3)]
    then = [[Call("put", ("a", n)), Call("get", ("a",))] for n in range(3)]
    history = asyncio.run(
        run_programs_in_processes(
            "kv_register:REGISTER", _register("FileRegister"), tmp_path, first, then=then, env=env
        )
    )
    assert len(history) == 9
    reads = [min((r for r in history if r.process == p), key=lambda r: r.invoked) for p in range(3)]
    writes = [r for r in history if r.call.operation == "put"]
    assert all(r.call == Call("get", ("a",)) and r.completed is not None for r in reads)
    assert sorted(r.process for r in writes) == [0, 1, 2]
    assert max(r.completed or 0.0 for r in reads) <= min(w.invoked for w in writes)
    judge_history(REGISTER, history)


def test_a_worker_that_cannot_open_its_store_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with pytest.raises(WorkerGaveNoAnswer, match="exited before its store was open") as raised:
        asyncio.run(
            run_programs_in_processes(
                "kv_register:REGISTER",
                _register("NoSuchKind"),
                tmp_path,
                [[Call("get", ("a",))]],
                env=env,
            )
        )
    assert "NoSuchKind" in raised.value.stderr


_KILLED_PROGRAM = (
    Call("put", ("a", 1)),
    Call("put", ("b", 2)),
    Call("delete", ("a",)),
    Call("put", ("a", 3)),
)


@pytest.mark.skipif(stopper_unavailable() is not None, reason=str(stopper_unavailable()))
def test_a_writer_killed_at_every_call_leaves_a_correct_register_whole(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    covered = asyncio.run(
        killed_at_each_call(
            "kv_register:REGISTER",
            _register("FileRegister"),
            tmp_path,
            _KILLED_PROGRAM,
            env=env,
        )
    )
    assert covered.calls >= 2 * len(_KILLED_PROGRAM), "a write and a rename per put or delete"
    assert covered.killed == tuple(range(1, covered.calls + 1))


@pytest.mark.skipif(stopper_unavailable() is not None, reason=str(stopper_unavailable()))
def test_a_writer_killed_mid_rewrite_is_caught_by_the_contracts_own_reads(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with pytest.raises(RuleViolation) as found:
        asyncio.run(
            killed_at_each_call(
                "kv_register:REGISTER",
                _register("RewritesInPlace"),
                tmp_path,
                _KILLED_PROGRAM,
                env=env,
            )
        )
    assert found.value.rule_id == "KV-001"
    assert "killed right after its store-changing system call" in found.value.message
    assert "get(" in found.value.message


def _power_losses(kind: str, root: Path) -> PowerLosses:
    return asyncio.run(
        power_loss_states(
            "kv_register:REGISTER",
            _register(kind),
            root,
            _KILLED_PROGRAM,
            budget=60,
            seed=1,
            env={**os.environ, "PYTHONPATH": str(HERE)},
        )
    )


@pytest.mark.skipif(tracer_unavailable() is not None, reason=str(tracer_unavailable()))
def test_a_power_loss_anywhere_leaves_a_synced_register_whole(tmp_path: Path) -> None:
    covered = _power_losses("FileRegister", tmp_path)
    assert covered.operations >= 3 * len(_KILLED_PROGRAM), "write, sync, rename per write"
    assert covered.states == min(60, covered.possible)


@pytest.mark.skipif(tracer_unavailable() is not None, reason=str(tracer_unavailable()))
def test_a_power_loss_finds_the_rename_nobody_synced(tmp_path: Path) -> None:
    with pytest.raises(RuleViolation) as found:
        _power_losses("RenamesUnsynced", tmp_path)
    assert found.value.rule_id == "KV-001"
    assert "power loss after op #" in found.value.message


@pytest.mark.slow
@pytest.mark.skipif(stopper_unavailable() is not None, reason=str(stopper_unavailable()))
def test_a_kill_does_not_see_what_only_a_power_loss_loses(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    covered = asyncio.run(
        killed_at_each_call(
            "kv_register:REGISTER",
            _register("RenamesUnsynced"),
            tmp_path,
            _KILLED_PROGRAM,
            env=env,
        )
    )
    assert covered.killed


# -- the history checker on histories written by hand ------------------------------------


def _put(
    process: int, key: str, value: int, start: float, end: float | None, answer: object
) -> Recorded:
    got = None if end is None else Returned(answer)
    return Recorded(process, Call("put", (key, value)), start, end, got)


def _get(process: int, key: str, start: float, end: float, answer: object) -> Recorded:
    return Recorded(process, Call("get", (key,)), start, end, Returned(answer))


def test_overlapping_calls_may_take_effect_in_either_order() -> None:
    history = [_put(0, "a", 1, 0, 3, None), _put(1, "a", 2, 1, 2, 1), _get(2, "a", 4, 5, 2)]
    assert isinstance(check_linearizable(REGISTER, history), Linearized)


def test_a_call_that_returned_before_another_began_comes_first() -> None:
    # put(a, 2) returned before put(a, 1) began, so it cannot have replaced 1.
    history = [_put(1, "a", 2, 0, 1, 1), _put(0, "a", 1, 2, 3, None)]
    verdict = check_linearizable(REGISTER, history)
    assert isinstance(verdict, Diverged)
    assert verdict.rule_id == "KV-002"
    assert verdict.call == Call("put", ("a", 2))
    assert verdict.expected == Returned(None)


def test_two_puts_replacing_the_same_value_are_a_lost_update() -> None:
    history = [_put(0, "a", 1, 0, 2, None), _put(1, "a", 2, 1, 3, None)]
    verdict = check_linearizable(REGISTER, history)
    assert isinstance(verdict, Diverged)
    assert verdict.rule_id == "KV-002"
    assert "after put('a', 1)" in verdict.message() or "after put('a', 2)" in verdict.message()


def test_a_write_with_no_answer_may_have_taken_effect_or_not() -> None:
    unanswered = _put(0, "a", 7, 0, None, None)
    took_effect = [unanswered, _get(1, "a", 1, 2, 7)]
    never = [unanswered, _get(1, "a", 1, 2, None)]
    assert isinstance(check_linearizable(REGISTER, took_effect), Linearized)
    assert isinstance(check_linearizable(REGISTER, never), Linearized)
    assert isinstance(check_linearizable(REGISTER, [unanswered, _get(1, "a", 1, 2, 5)]), Diverged)


def test_a_refusal_is_an_answer_like_a_value() -> None:
    missing = Recorded(0, Call("delete", ("a",)), 0, 1, Raised("KeyMissing"))
    assert isinstance(check_linearizable(REGISTER, [missing]), Linearized)
    wrongly = Recorded(0, Call("delete", ("a",)), 0, 1, Returned(0))
    verdict = check_linearizable(REGISTER, [wrongly])
    assert isinstance(verdict, Diverged)
    assert verdict.rule_id == "KV-003"
    assert verdict.expected == Raised("KeyMissing")


def test_keys_are_judged_apart_and_a_search_past_its_bound_is_undecided() -> None:
    history = [_put(p, "a", p, 0, 10, None) for p in range(6)]
    assert isinstance(check_linearizable(REGISTER, history, most_states=5), Undecided)
    apart = [_put(0, "a", 1, 0, 1, None), _put(1, "b", 1, 0, 1, None)]
    assert isinstance(check_linearizable(REGISTER, apart), Linearized)


def test_a_contract_refuses_a_rule_id_used_twice() -> None:
    with pytest.raises(ValueError, match="rule id is used twice"):
        Contract(
            name="twice",
            rules=(REGISTER.rules[0], REGISTER.rules[0]),
            initial=REGISTER.initial,
            step=REGISTER.step,
            operations=REGISTER.operations,
            judge=REGISTER.judge,
            error_name=REGISTER.error_name,
            close=REGISTER.close,
        )


def test_a_finding_names_only_a_rule_of_its_contract() -> None:
    with pytest.raises(KeyError, match="KV-009"):
        RuleViolation("KV-009", "no such rule", catalog=REGISTER.rules_by_id)
    with pytest.raises(KeyError, match="SEQ-001"):
        RuleViolation("SEQ-001", "the checkpointer's rule", catalog=REGISTER.rules_by_id)
