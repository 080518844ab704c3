"""The checkpointer contract is a `Contract` value too: the generic engines (the
model-based machine of any contract, concurrent programs and the linearizability
checker, a writer killed at every system call) run it with no code of their own for
it, pass the reference backends and name the rule a broken one breaks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from checkpointspec.backends.registry import BackendTarget
from checkpointspec.conformance.engines.contract.checkpointer import checkpointer_contract
from checkpointspec.conformance.engines.contract.contract import Call
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.crash.contract_kills import killed_at_each_call
from checkpointspec.conformance.engines.crash.stopper import stopper_unavailable
from checkpointspec.conformance.engines.machines.contract import contract_machine
from checkpointspec.conformance.engines.processes.contract_programs import (
    judge_history,
    programs,
    run_programs,
)
from checkpointspec.spec import Capability, Checkpointer
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.stateful import run_state_machine_as_test

HERE = Path(__file__).resolve().parent
QUALITY = HERE.parent / "quality"
QUICK = settings(
    max_examples=300,
    stateful_step_count=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    # No explain phase: the tests read the rule, not which steps could vary, and
    # explaining a shrunk machine run re-runs it for minutes.
    phases=tuple(phase for phase in Phase if phase != Phase.explain),
)
EVERYTHING_BUT_GENERATION = frozenset({Capability.DELETE, Capability.LIST, Capability.TRUNCATE})


def _finding(backend: str, root: Path) -> RuleViolation | None:
    target = BackendTarget.named(backend)

    async def open_store(path: Path) -> Checkpointer:
        return await target.open(path)

    machine = contract_machine(checkpointer_contract(EVERYTHING_BUT_GENERATION), open_store, root)
    try:
        run_state_machine_as_test(machine, settings=QUICK)
    except RuleViolation as violation:
        return violation
    return None


@pytest.mark.parametrize("backend", ["memory", pytest.param("sqlite", marks=pytest.mark.slow)])
def test_the_generic_machine_passes_a_reference_backend(backend: str, tmp_path: Path) -> None:
    assert _finding(backend, tmp_path) is None


@pytest.mark.parametrize(
    ("broken", "rule"),
    [
        pytest.param("IgnoresExpectedHead", "APPEND-002", marks=pytest.mark.slow),
        pytest.param("InclusiveSinceSeq", "READ-001", marks=pytest.mark.slow),
        pytest.param("StripsText", "EVENT-001", marks=pytest.mark.slow),
    ],
)
def test_the_generic_machine_names_the_rule_of_the_call_that_left_the_contract(
    broken: str, rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(QUALITY))
    found = _finding(f"broken_backends:{broken}.make", tmp_path)
    assert found is not None, f"{broken} passed"
    assert found.rule_id == rule, found.message


@pytest.mark.slow
def test_a_defect_seen_only_later_is_named_by_the_call_that_saw_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A truncate that keeps one event too many answers as the model does; the first
    # call whose answer differs is a later read or head, and the generic machine,
    # which keeps no ledger of where each event came from, names that call's rule.
    # The checkpointer's own machine traces the event to the truncate (TRUNC-001).
    monkeypatch.syspath_prepend(str(QUALITY))
    found = _finding("broken_backends:TruncateKeepsOneMore.make", tmp_path)
    assert found is not None
    assert found.rule_id in {"HEAD-001", "READ-001", "SEQ-003"}, found.message


def _racing(backend: str, root: Path) -> RuleViolation | None:
    target = BackendTarget.named(backend)
    contract = checkpointer_contract(frozenset())
    stores = iter(range(10_000))

    async def open_store(path: Path) -> Checkpointer:
        return await target.open(path)

    @settings(QUICK, max_examples=40)
    @given(drawn=programs(contract, callers=3, calls=3))
    def racing(drawn: tuple[tuple[Call, ...], ...]) -> None:
        path = root / f"store-{next(stores)}"
        path.mkdir()
        judge_history(contract, asyncio.run(run_programs(contract, open_store, path, drawn)))

    try:
        racing()
    except RuleViolation as violation:
        return violation
    return None


def test_concurrent_callers_of_a_reference_backend_are_linearizable(tmp_path: Path) -> None:
    assert _racing("sqlite", tmp_path) is None


@pytest.mark.skipif(stopper_unavailable() is not None, reason=str(stopper_unavailable()))
def test_a_file_writer_killed_at_every_system_call_loses_nothing_answered(tmp_path: Path) -> None:
    program = [
        Call("append", ("s1", ["a", "b"], 0)),
        Call("append", ("s1", ["c"], None)),
        Call("truncate", ("s1", 1, None)),
        Call("delete", ("s2",)),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    covered = asyncio.run(
        killed_at_each_call(
            "checkpointer_contracts:FILE", BackendTarget.named("file"), tmp_path, program, env=env
        )
    )
    assert covered.calls > len(program)
    assert covered.killed
