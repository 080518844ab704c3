"""A check whose fault never happened ends ``not_checked`` with the reason, never passed.

Each stand-in makes the fault not happen (a workload of no calls, no failover round,
no hold) and the check must say so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.backends.registry import BackendRef, BackendTarget, resolve_backend
from checkpointspec.conformance.checks import failover, kill, processes, reading
from checkpointspec.conformance.checks.base import Check
from checkpointspec.conformance.engines.crash.holds import Hold
from checkpointspec.conformance.engines.history import Operation, Returned, Unknown
from checkpointspec.conformance.engines.processes.messages import Acked
from checkpointspec.conformance.engines.processes.stress import overlapping_calls
from checkpointspec.conformance.engines.run.kit_run import KitRun
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.running.plan import probe_backend
from checkpointspec.conformance.running.report import CheckResult
from checkpointspec.conformance.running.runner import run_check
from checkpointspec.spec import BackendContext, Capability, FailoverPair


class _Replicated(MemoryCheckpointer):
    """Declares a failover pair it never has to start: the profile runs no round."""

    capabilities = MemoryCheckpointer.capabilities | {Capability.REPLICATED}

    async def start_failover_pair(self, directory: Path) -> FailoverPair:
        raise AssertionError("a profile of no failover round starts no pair")


def make_replicated(ctx: BackendContext) -> MemoryCheckpointer:
    return _Replicated(store_for(ctx.path))


def _run(kit_check: Check, tmp_path: Path, backend: BackendRef, **profile: int) -> CheckResult:
    run = KitRun(
        backend=backend,
        probe=probe_backend(BackendTarget(backend)),
        profile=msgspec.structs.replace(PROFILES["quick"], **profile),
        seed=1,
        suite="storage",
    )
    return run_check(kit_check, run, tmp_path)


def _op(process: int, invoked: int, completed: int | None) -> Operation:
    outcome = Returned(0) if completed is not None else Unknown()
    return Operation(process, 0, "head", "s0", invoked, completed, outcome)


def test_calls_one_process_after_another_do_not_overlap() -> None:
    assert overlapping_calls([_op(0, 0, 10), _op(1, 10, 20), _op(0, 25, 30)]) == 0


def test_a_call_begun_while_another_process_s_is_in_flight_overlaps() -> None:
    assert overlapping_calls([_op(0, 0, 10), _op(1, 5, 20), _op(0, 12, 13)]) == 2


def test_a_call_without_an_outcome_is_in_flight_to_the_end() -> None:
    assert overlapping_calls([_op(0, 0, None), _op(1, 100, 200)]) == 1


def test_a_call_of_the_same_process_is_no_overlap() -> None:
    assert overlapping_calls([_op(0, 0, 10), _op(0, 5, 20)]) == 0


def test_the_failover_check_with_no_failover_round_is_not_checked(tmp_path: Path) -> None:
    backend = resolve_backend(f"{__name__}:make_replicated")
    result = _run(failover.acknowledged_writes_survive_failover, tmp_path, backend, failovers=0)
    assert result.status == "not_checked"
    assert result.reason.startswith("no failover happened")


def test_only_appends_acknowledged_before_the_primary_was_lost_count() -> None:
    append = Operation(0, 0, "append", "s0", 0, 10, Returned(1), ("m",))
    late = Operation(0, 1, "append", "s0", 11, 30, Returned(2), ("n",))
    cut = Operation(1, 0, "append", "s0", 5, None, Unknown(), ("o",))
    read = Operation(1, 1, "read", "s0", 0, 5, Returned(0))
    assert failover._acknowledged_before([append, late, cut, read], 20) == 1


def test_the_stress_check_with_no_calls_is_not_checked(tmp_path: Path) -> None:
    result = _run(
        processes.free_running_history,
        tmp_path,
        resolve_backend("sqlite"),
        stress_operations=0,
        stress_kills=0,
    )
    assert result.status == "not_checked"
    assert result.reason.startswith("no call completed")


def test_the_stress_check_whose_calls_never_overlapped_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "overlapping_calls", lambda _operations: 0)
    result = _run(processes.free_running_history, tmp_path, resolve_backend("sqlite"))
    assert result.status == "not_checked"
    assert result.reason.startswith("no two processes' calls overlapped in time")


def test_racing_processes_with_no_batch_are_not_checked(tmp_path: Path) -> None:
    result = _run(
        processes.processes_share_one_log, tmp_path, resolve_backend("sqlite"), process_rounds=0
    )
    assert result.status == "not_checked"
    assert result.reason.startswith("no append completed")


def test_racing_processes_that_ran_one_after_another_race_again_then_are_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each race's writers answered one after another (w0's batches, then w1's): the
    # check races again on a fresh session, and after RACES such races it says so.
    raced: list[str] = []

    async def in_turn(_clients: object, session: str, *_args: object) -> dict[str, list[Acked]]:
        raced.append(session)
        return {"w0": [Acked(0, 2, 0), Acked(1, 4, 2)], "w1": [Acked(0, 6, 4), Acked(1, 8, 6)]}

    async def nothing_to_judge(*_args: object) -> None:
        return None

    monkeypatch.setattr(processes, "_race", in_turn)
    monkeypatch.setattr(processes, "_judge_race", nothing_to_judge)
    result = _run(processes.processes_share_one_log, tmp_path, resolve_backend("sqlite"))
    assert raced == ["shared", "shared-1", "shared-2"][: processes.RACES]
    assert result.status == "not_checked"
    assert result.reason.startswith(
        f"no two processes' appends overlapped in time in {processes.RACES} races"
    )


async def _no_holds(*_args: object) -> AsyncIterator[Hold]:
    return
    yield  # an async generator that holds nothing


def test_a_read_with_no_writer_held_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "needs_holding", lambda: None)
    monkeypatch.setattr(reading, "holds", _no_holds)
    result = _run(reading.read_while_a_writer_is_held, tmp_path, resolve_backend("sqlite"))
    assert result.status == "not_checked"
    assert result.reason.startswith("no read happened while a writer was held")


def test_a_kill_with_no_writer_waiting_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def counted(*_args: object) -> tuple[int, bool]:
        return 0, False

    monkeypatch.setattr(kill, "needs_holding", lambda: None)
    monkeypatch.setattr(kill, "counted_write", counted)
    monkeypatch.setattr(kill, "spread", lambda *_args: [])
    result = _run(kill.killed_while_waiting_for_another_writer, tmp_path, resolve_backend("sqlite"))
    assert result.status == "not_checked"
    assert result.reason.startswith("no writer was held while waiting for another")
