"""The verdict of the server checks (`checkpointspec.conformance.engines.network.recorded.judge`).

A memory store holds what a server would hold after the kit broke its
connections; the operations are the history the writers would have recorded.
Each finding the judge can make is shown by the smallest history that needs it,
and a history the contract explains gives none.
"""

from __future__ import annotations

import asyncio

from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.history import Operation, OperationOutcome, Raised, Returned
from checkpointspec.conformance.engines.network.recorded import judge
from checkpointspec.spec import UserPrompt


def _append(index: int, markers: tuple[str, ...], outcome: OperationOutcome) -> Operation:
    return Operation(
        process=0,
        index=index,
        kind="append",
        session="s0",
        invoked=index * 10,
        completed=index * 10 + 5,
        outcome=outcome,
        markers=markers,
    )


def _judged(stored: list[str], operations: list[Operation]) -> list[str]:
    async def go() -> list[str]:
        cp = MemoryCheckpointer()
        for marker in stored:
            await cp.append("s0", [UserPrompt(marker)])
        return (await judge(cp, operations)).findings

    return asyncio.run(go())


def test_an_explained_history_has_no_finding() -> None:
    operations = [
        _append(0, ("a",), Returned(1)),
        _append(1, ("b",), Raised("ConnectionLostError", "outcome unknown")),
        _append(2, ("c",), Raised("ConnectionLostError", "outcome unknown")),
        _append(3, ("d",), Returned(3)),
    ]
    # b took effect, c did not: an unknown outcome may go either way.
    assert _judged(["a", "b", "d"], operations) == []


def test_an_acknowledged_append_missing_is_a_finding() -> None:
    operations = [_append(0, ("a",), Returned(1)), _append(1, ("b",), Returned(2))]
    findings = _judged(["a"], operations)
    assert findings[0].startswith("1 acknowledged appends are missing from the store: ")
    assert "appended b" in findings[0]


def test_an_append_applied_twice_is_a_finding() -> None:
    findings = _judged(["a", "a"], [_append(0, ("a",), Returned(2))])
    assert any("holds a twice" in finding for finding in findings), findings


def test_a_refused_append_that_took_effect_is_a_finding() -> None:
    operations = [_append(0, ("a",), Raised("StoreBusyError", "store still busy"))]
    findings = _judged(["a"], operations)
    assert findings[0].startswith("1 appends refused with a contract error took effect: ")


def test_an_exception_outside_the_contract_is_a_finding() -> None:
    operations = [_append(0, ("a",), Raised("OperationalError", "the connection is lost"))]
    findings = _judged([], operations)
    assert findings == [
        "1 calls ended in an exception that is neither a contract error nor "
        "ConnectionLostError: process 0 appended a without expected_head "
        "(raised OperationalError): the connection is lost"
    ]


def test_anomalies_no_fault_touched_are_one_violation_of_their_cause() -> None:
    # Two writers (tasks of one process) both acknowledged from expected_head 0, and a
    # read that saw the one the store lost: one lost update, APPEND-004 within one
    # process, the read listed under it, not a root of its own.
    lost = Operation(1, 0, "append", "s0", 1, 11, Returned(1), ("b",), expected_head=0)
    operations = [
        Operation(0, 0, "append", "s0", 0, 10, Returned(1), ("a",), expected_head=0),
        lost,
        Operation(2, 0, "read", "s0", 20, 30, Returned(0, ((1, "b"),))),
    ]

    async def go() -> list[RuleViolation]:
        cp = MemoryCheckpointer()
        await cp.append("s0", [UserPrompt("a")])
        return (await judge(cp, operations, lambda _op: False)).apart

    apart = asyncio.run(go())
    assert [v.rule_id for v in apart] == ["APPEND-004"], apart
    assert apart[0].also == ("APPEND-002",)
    assert apart[0].call == "process 1: append('s0', [b], expected_head=0)"
    assert "then, as READ-003:" in apart[0].message
