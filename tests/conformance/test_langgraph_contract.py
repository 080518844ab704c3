"""The LangGraph saver contract run by the generic model-based machine: a correct saver
written for the tests passes, each one-bug saver is named by the rule it breaks, and
the model and judge behave as the contract's rules say on calls written out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from checkpointspec.conformance.engines.contract.langgraph import (
    call_saver,
    langgraph_contract,
    offers_of,
    open_saver,
)
from checkpointspec.conformance.engines.contract.violations import RuleViolation
from checkpointspec.conformance.engines.machines.contract import contract_machine
from checkpointspec.spec import BackendContext
from checkpointspec.spec.langgraph import SaverState, apply, prepare, rule_for
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from langgraph_savers import KINDS

MACHINE = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
METADATA = {"source": "input", "step": 0, "run_id": "run-1"}


def _context(path: Path) -> BackendContext:
    return BackendContext(path=path, codec=None, options={})


def _machine_finding(kind: str, root: Path) -> RuleViolation | None:
    def factory(ctx: BackendContext) -> object:
        return KINDS[kind]()

    handle = asyncio.run(open_saver(factory, _context(root)))
    contract = langgraph_contract(offers_of(handle))
    machine = contract_machine(contract, lambda path: open_saver(factory, _context(path)), root)
    try:
        run_state_machine_as_test(machine, settings=MACHINE)
    except RuleViolation as violation:
        return violation
    return None


@pytest.mark.parametrize("kind", ["DictSaver", "SyncOnly"])
def test_a_correct_saver_passes_the_machine(kind: str, tmp_path: Path) -> None:
    assert _machine_finding(kind, tmp_path) is None


def test_the_machine_names_the_rule_a_saver_breaks(tmp_path: Path) -> None:
    found = _machine_finding("BeforeInclusive", tmp_path)
    assert found is not None
    assert found.rule_id == "LGLIST-003", found


@pytest.mark.parametrize(
    ("kind", "calls", "rule_id"),
    [
        (
            "LatestIsOldest",
            [("put", ()), ("put", ()), ("get_tuple", ("t", "", None, "async"))],
            "LGGET-001",
        ),
        (
            "SortsWritesByTaskId",
            [
                ("put", ()),
                ("put_writes", ("t", "", -1, [["x", 1]], "task-a", "async")),
                ("put_writes", ("t", "", -1, [["x", 2]], "task-b", "sync")),
                ("get_tuple", ("t", "", None, "async")),
            ],
            "LGWRITE-001",
        ),
        (
            "OverwritesRegularWrites",
            [
                ("put", ()),
                ("put_writes", ("t", "", -1, [["x", 1]], "task-a", "async")),
                ("put_writes", ("t", "", -1, [["x", 2]], "task-a", "async")),
                ("list", ("t", "", None, None, None, None, "sync")),
            ],
            "LGWRITE-002",
        ),
        (
            "DeleteThreadRootOnly",
            [
                ("put", ("t", "child", "latest", {}, [], [], METADATA, "async")),
                ("delete_thread", ("t", "async")),
                ("list", ("t", None, None, None, None, None, "async")),
            ],
            "LGDEL-001",
        ),
        (
            "PruneDropsLatestWrites",
            [
                ("put", ()),
                ("put_writes", ("t", "", -1, [["x", 1]], "task-a", "async")),
                ("prune", (["t"], "keep_latest", "async")),
                ("get_tuple", ("t", "", None, "async")),
            ],
            "LGPRUNE-001",
        ),
    ],
)
def test_the_judge_names_the_rule_a_saver_breaks(
    kind: str, calls: list[tuple[str, tuple[object, ...]]], rule_id: str
) -> None:
    written = [
        (op, intent or ("t", "", "latest", {"a": 1}, [], [], METADATA, "async"))
        for op, intent in calls
    ]
    state, seen = SaverState(), []

    async def run() -> None:
        nonlocal state
        handle = await open_saver(lambda ctx: KINDS[kind](), _context(Path(".")))
        for operation, intent in written:
            made = prepare(state, operation, intent)
            assert made is not None
            after, expected = apply(state, operation, made)
            got = await call_saver(handle, operation, made)
            if got != expected:
                seen.append(rule_for(state, operation, made[:-1], expected, got))
            state = after

    asyncio.run(run())
    assert seen == [rule_id]


def test_a_sync_only_saver_is_offered_through_its_sync_twin(tmp_path: Path) -> None:
    handle = asyncio.run(open_saver(lambda ctx: KINDS["SyncOnly"](), _context(tmp_path)))
    assert handle.twins == ("sync",)
    assert offers_of(handle)["put"] == ("sync",)


def _run(kind: str, calls: list[tuple[str, tuple[object, ...]]]) -> list[tuple[object, object]]:
    """Each intent prepared, applied to the model and made on the saver: the pairs of
    (model's answer, saver's answer)."""

    async def run() -> list[tuple[object, object]]:
        handle = await open_saver(lambda ctx: KINDS[kind](), _context(Path(".")))
        state, pairs = SaverState(), []
        for operation, intent in calls:
            made = prepare(state, operation, intent)
            assert made is not None
            state, expected = apply(state, operation, made)
            pairs.append((expected, await call_saver(handle, operation, made)))
        return pairs

    return asyncio.run(run())


def test_an_unchanged_channel_reads_back_from_the_parent_and_a_removed_one_does_not() -> None:
    pairs = _run(
        "DictSaver",
        [
            ("put", ("t", "", "latest", {"a": 1, "b": b"x"}, [], [], METADATA, "async")),
            ("put", ("t", "", "latest", {"b": 2.5}, ["a"], ["c"], METADATA, "sync")),
            ("get_tuple", ("t", "", None, "async")),
        ],
    )
    expected, got = pairs[-1]
    assert expected == got
    assert isinstance(got, dict)
    assert got["channel_values"] == {"b": {"$float": "2.5"}}
    assert set(got["channel_versions"]) == {"b", "c"}  # type: ignore[arg-type]


def test_a_special_write_replaces_and_a_regular_one_is_kept_once() -> None:
    pairs = _run(
        "DictSaver",
        [
            ("put", ("t", "", "latest", {}, [], [], METADATA, "async")),
            ("put_writes", ("t", "", -1, [["x", "first"]], "task-a", "async")),
            ("put_writes", ("t", "", -1, [["x", "second"]], "task-a", "async")),
            ("put_writes", ("t", "", -1, [["__error__", "e1"]], "task-a", "async")),
            ("put_writes", ("t", "", -1, [["__error__", "e2"]], "task-a", "async")),
            ("get_tuple", ("t", "", None, "async")),
        ],
    )
    expected, got = pairs[-1]
    assert expected == got
    assert isinstance(got, dict)
    # Each call's values carry its number (prepare stamps them): the last error, the first x.
    assert got["pending_writes"] == [
        ["task-a", "__error__", {"write": 4, "value": "e2"}],
        ["task-a", "x", {"write": 1, "value": "first"}],
    ]


def test_the_judge_names_a_checkpoint_a_delete_left_by_the_delete() -> None:
    state = SaverState()
    put = prepare(state, "put", ("t", "child", "latest", {}, [], [], METADATA, "async"))
    assert put is not None
    state, _ = apply(state, "put", put)
    state, _ = apply(state, "delete_thread", ("t", "async"))
    left = {"thread_id": "t", "checkpoint_ns": "child", "checkpoint_id": put[3]["id"]}  # type: ignore[index]
    assert rule_for(state, "get_tuple", ("t", "child", None), None, left) == "LGDEL-001"


def test_a_copy_onto_a_thread_in_use_or_of_nothing_is_not_drawn() -> None:
    state = SaverState()
    put = prepare(state, "put", ("t2", "", "latest", {}, [], [], METADATA, "async"))
    assert put is not None
    state, _ = apply(state, "put", put)
    assert prepare(state, "copy_thread", ("t1", "t2", "async")) is None
    assert prepare(state, "copy_thread", ("t2", "t3", "async")) == ("t2", "t3", "async")
    assert prepare(state, "copy_thread", ("t9", "t3", "async")) is None  # nothing to copy
