"""The langgraph suite: a LangGraph checkpoint saver against the LangGraph saver contract.

Each check names the rule it verifies first:

- **scenarios**, one per rule of the operations and twins: a graph's calls written
  out (`Scenario`), made through each twin the saver offers and judged call by call
  against the model (`checkpointspec.spec.langgraph`), so that every rule is
  exercised on every run whatever the search draws. LangGraph's own conformance
  suite (0.0.2) is a subset of them (docs/langgraph.md maps it test by test);
- the **model-based machine** (`model_based`): random sequences of every operation the
  saver implements, through both twins, shrunk to the fewest calls that still
  diverge;
- **tasks at once** (`concurrent_tasks`, `tasks_in_processes`): parallel nodes'
  put_writes and reads, on one saver or each in a process of its own with a saver of
  one store, judged by the linearizability checker;
- **setup()** (`setup_runs_again`, `setup_at_once_on_a_fresh_store`,
  `setup_in_a_transaction`): again on a store in use, at once by several savers of a
  fresh store, inside a caller's transaction;
- **crashes** (`writer_killed_at_each_call`, `power_loss_at_each_operation`,
  `server_killed`, `connections_cut`): a graph's calls made by a writer killed right
  after each system call that changes a file under the store, traced and rebuilt
  after a power loss at any point, on a PostgreSQL server the kit kills, or through
  connections the kit cuts; what they left read back and judged like any history;
- **the serializer failing** (`serialising_fails`, `deserialising_fails`): the
  saver's serde made to fail at each value of a call in turn.

A check needing what the saver does not have (an extended operation, by LangGraph's
own detection: its method is not overridden; a second twin; setup(); data in files
under its store or on a server it takes from its options; a declaration) is skipped,
saying so, as LangGraph's suite reports a capability "not implemented"; the saver's
level is still attained.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from ...spec import BackendContext
from ...spec.langgraph import LANGGRAPH_RULES, SaverState, apply, difference, prepare, rule_for
from ..engines.contract.contract import Call, Returned, plain
from ..engines.contract.langgraph import (
    LANGGRAPH_CONTRACT,
    SaverHandle,
    Twin,
    langgraph_contract,
    open_saver,
)
from ..engines.contract.langgraph import (
    readback as _readback,
)
from ..engines.contract.violations import RuleViolation
from ..engines.history.linearizable import Diverged, Recorded, Undecided, check_linearizable
from ..engines.machines.contract import contract_machine
from ..engines.processes.contract_programs import record_calls
from ..engines.processes.contract_worker import run_programs_in_processes
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised
from ..engines.search.stateful import run_machine
from ..engines.target.fault_serde import FaultySerde
from ..engines.target.provenance import blame_backend
from . import _contract_servers as servers
from ._contract_crashes import killed_writer, power_cut_writer
from .base import Check, check

if TYPE_CHECKING:  # the postgres extra's; imported where a server is launched
    pass

__all__ = ["CHECKS", "SCENARIOS", "Scenario"]

Intent = tuple[str, tuple[object, ...]]


def _offers(h: Harness) -> dict[str, tuple[Twin, ...]]:
    """Per operation, the twins the saver offers it through, as the kit's probe found
    them before the run (`checkpointspec.conformance.running.plan.probe_saver`)."""
    return {op: cast("tuple[Twin, ...]", twins) for op, twins in h.run.probe.saver_offers.items()}


def _opener(
    h: Harness, options: Mapping[str, str] | None = None, twins: Sequence[Twin] | None = None
) -> Callable[[Path], Awaitable[SaverHandle]]:
    """How this check opens a saver on a store directory: the run's factory, given that
    directory's `BackendContext` with ``options`` added to the run's; the saver's twins
    found by asking it, or ``twins`` when given (`open_saver`)."""
    target = h.target
    factory = cast("Callable[[BackendContext], object]", target.factory())
    return lambda path: open_saver(factory, target.context(path, options=options), twins)


# -- scenarios -------------------------------------------------------------------------------

_META = {"source": "loop", "step": 1, "run_id": "run-1"}


def put(
    thread: str = "t1",
    ns: str = "",
    values: dict[str, object] | None = None,
    *,
    parent: str = "latest",
    removed: Sequence[str] = (),
    emptied: Sequence[str] = (),
    **metadata: object,
) -> Intent:
    """A put intent: the next checkpoint of ``thread``/``ns`` continuing its latest
    (``parent="none"``: a new root), setting ``values``, with ``metadata`` over the
    default ``source``, ``step`` and ``run_id``."""
    return (
        "put",
        (thread, ns, parent, dict(values or {}), list(removed), list(emptied), _META | metadata),
    )


def writes(
    task: str, *pairs: tuple[str, object], thread: str = "t1", ns: str = "", which: int = -1
) -> Intent:
    """A put_writes intent: ``task``'s writes to the checkpoint ``which`` (an index into
    the namespace's ids, oldest first; -1 the latest)."""
    return ("put_writes", (thread, ns, which, [list(p) for p in pairs], task))


def get(thread: str = "t1", ns: str = "", which: int | str | None = None) -> Intent:
    """A get_tuple intent: the latest (None), the checkpoint at index ``which``, or an
    id the saver never held (``"unknown"``)."""
    return ("get_tuple", (thread, ns, which))


def listing(
    thread: str | None = "t1",
    ns: str | None = "",
    *,
    which: int | None = None,
    filter: dict[str, object] | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> Intent:
    """A list intent; ``ns=None`` lists every namespace, ``thread=None`` every thread;
    ``which`` names one checkpoint, ``before`` the checkpoint whose id bounds it."""
    return ("list", (thread, ns, which, filter, before, limit))


def every(*threads: str) -> list[Intent]:
    """Read everything of ``threads``: each thread's listing across namespaces."""
    return [listing(t, None) for t in threads]


@dataclass(frozen=True)
class Scenario:
    """A graph's calls written out, judged call by call against the model."""

    rule: str
    name: str
    summary: str
    calls: tuple[Intent, ...]
    twins: tuple[Twin, ...] | None = None
    """The twin of each call, in turn (LGTWIN-001's mixes them); None: the whole
    scenario through each twin the saver offers."""

    def needs(self) -> frozenset[str]:
        return frozenset(op for op, _ in self.calls)


async def play(h: Harness, scenario: Scenario) -> None:
    """Make ``scenario``'s calls on a fresh saver per twin, each beside the model; the
    first answer the model does not give is a `RuleViolation` of the rule it breaks."""
    open_one = _opener(h)
    offers = _offers(h)
    missing = sorted(op for op in scenario.needs() if not offers.get(op))
    if missing:
        raise CheckSkipped(
            f"the saver does not implement {', '.join(missing)} (neither the async method nor "
            "the sync one is overridden from BaseCheckpointSaver, or its twin raises "
            "NotImplementedError)"
        )
    if scenario.twins is not None:
        if not all(
            twin in offers[op] for (op, _), twin in zip(scenario.calls, scenario.twins, strict=True)
        ):
            raise CheckSkipped("the saver offers one twin only: there is no other to agree with")
        rounds = [list(scenario.twins)]
    else:
        twins = sorted({t for op in scenario.needs() for t in offers[op]})
        rounds = [
            [twin] * len(scenario.calls)
            for twin in twins
            if all(twin in offers[op] for op in scenario.needs())
        ]
    for twins_of_calls in rounds:
        await _play_once(await open_one(h.new_store()), scenario, twins_of_calls)


async def _play_once(handle: SaverHandle, scenario: Scenario, twins: Sequence[Twin]) -> None:
    try:
        history = await record_calls(
            LANGGRAPH_CONTRACT, handle, prepared(scenario.calls, twins), process=0
        )
    finally:
        await handle.close()
    found = first_divergence(history, scenario.name)
    if found is not None:
        raise found


def prepared(intents: Sequence[Intent], twins: Sequence[Twin]) -> list[Call]:
    """``intents`` as the calls the model prepares, one after another, each through its
    twin in ``twins``."""
    state, calls = SaverState(), []
    for (operation, intent), twin in zip(intents, twins, strict=True):
        made = prepare(state, operation, (*intent, twin))
        if made is None:
            raise AssertionError(f"{operation}{intent} has nothing to act on")
        state, _ = apply(state, operation, made)
        calls.append(Call(operation, made))
    return calls


def first_divergence(history: Sequence[Recorded], where: str) -> RuleViolation | None:
    """The first call of ``history`` (made one at a time, in order) whose answer the
    model does not give, as the finding of the rule it breaks (``where`` says what the
    calls were); None if every answer is the model's."""
    state = SaverState()
    for recorded in history:
        call = recorded.call
        after, expected = apply(state, call.operation, call.arguments)
        want = plain(expected)
        got = recorded.answer.value if isinstance(recorded.answer, Returned) else None
        if recorded.raised or got != want:
            rule_id = rule_for(
                state, call.operation, call.arguments[:-1], want, got, answered=not recorded.raised
            )
            shape, said = difference(call.operation, want, got, raised=recorded.raised)
            return RuleViolation(rule_id, f"{where}: {_shown(call)} {said}", shape=shape)
        state = after
    return None


def _shown(call: Call) -> str:
    """A call as a finding shows it: a put by the checkpoint it puts, not its whole dict."""
    if call.operation == "put":
        thread, ns, parent, checkpoint = call.arguments[:4]
        cid = cast("dict[str, object]", checkpoint)["id"]
        return f"put({thread!r}, {ns!r}, parent={parent!r}, id={cid!r}, {call.arguments[-1]})"
    return str(call)


def _scenario_check(scenario: Scenario) -> Check:
    async def run(h: Harness) -> None:
        await play(h, scenario)

    run.__name__ = run.__qualname__ = scenario.name
    run.__doc__ = f"{scenario.rule}: {scenario.summary}"
    return check(scenario.rule)(run)


_TYPES: dict[str, object] = {
    "text": "naïve — 中文 \u2028 ",
    "bytes": b"\x00\xff raw",
    "float": 0.1,
    "large float": 1e16,  # JSON writes it 1e+16: a float, not the integer it equals
    "negative zero": -0.0,
    "integer": 2**62,
    "flag": True,
    "none": None,
    "nested": {"messages": [{"role": "user", "content": "hi"}, [1, 2.5, False]]},
}

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "LGPUT-001",
        "put_returns_its_config_and_is_found",
        "a put checkpoint is named by the config put returns, found by id, as the latest and listed",
        (
            put(values={"count": 1}),
            get(),
            get(which=0),
            listing(),
            put(values={"count": 2}),
            get(which=0),
            listing(),
        ),
    ),
    Scenario(
        "LGPUT-002",
        "metadata_reads_back",
        "metadata of every kind reads back as put, through get_tuple and list",
        (
            put(
                note="naïve 中文",
                parents={"": "00000000-0000-6000-8000-000000000000", "x": {"count": 1}},
                score=0.5,
                flag=False,
                nothing=None,
            ),
            get(),
            listing(),
        ),
    ),
    Scenario(
        "LGPUT-003",
        "parents_link_back",
        "each checkpoint's parent_config names the one its config named; a new root has none",
        (put(), put(), put(parent="none"), put(), every("t1")[0]),
    ),
    Scenario(
        "LGPUT-004",
        "threads_and_namespaces_apart",
        "checkpoints of other threads and namespaces are neither returned nor listed",
        (
            put("t1", "", {"a": 1}),
            put("t1", "child:1", {"a": 2}),
            put("t2", "", {"a": 3}),
            get("t1", ""),
            get("t1", "child:1"),
            get("t2", ""),
            get("t2", "child:1"),
            listing("t1", ""),
            listing("t1", "child:1"),
            listing("t2", None),
        ),
    ),
    Scenario(
        "LGCHAN-001",
        "values_read_back_as_of_their_versions",
        "values of every kind read back, and a channel not rewritten still reads its earlier value",
        (
            put(values=_TYPES),
            put(values={"count": 1}),
            put(values={"text": "changed"}),
            get(),
            get(which=0),
            listing(),
        ),
    ),
    Scenario(
        "LGCHAN-002",
        "removed_and_empty_channels_are_gone",
        "versions read back as put; a removed channel and one put empty have no value",
        (
            put(values={"a": 1, "b": 2, "c": 3}),
            put(values={"b": 4}, removed=["a"], emptied=["c"]),
            get(),
            get(which=0),
        ),
    ),
    Scenario(
        "LGWRITE-001",
        "writes_read_back_in_order",
        "pending writes of several tasks read back in (task_path, task_id, index) order",
        (
            put(),
            writes("task-b", ("messages", 1), ("count", 2)),
            writes("task-a", ("messages", 3)),
            writes("task-c", ("__interrupt__", "stop"), ("__error__", "boom")),
            get(),
            listing(),
        ),
    ),
    Scenario(
        "LGWRITE-002",
        "a_retried_task_writes_once",
        "a regular write put again by the same task keeps the first",
        (
            put(),
            writes("task-a", ("x", "first"), ("y", 1)),
            writes("task-a", ("x", "second"), ("y", 2)),
            get(),
        ),
    ),
    Scenario(
        "LGWRITE-003",
        "special_writes_replace",
        "a task's later error or interrupt replaces its earlier one; two in one call keep the last",
        (
            put(),
            writes("task-a", ("__error__", "first")),
            writes("task-a", ("__error__", "second")),
            writes("task-a", ("__interrupt__", "one"), ("__interrupt__", "two")),
            get(),
        ),
    ),
    Scenario(
        "LGWRITE-004",
        "writes_stay_with_their_checkpoint",
        "a new checkpoint starts with no writes, and writes of other checkpoints never show",
        (
            put(),
            writes("task-a", ("x", 1)),
            put(),
            get(),
            get(which=0),
            put("t1", "child:1"),
            writes("task-a", ("x", 2), ns="child:1"),
            get(),
            put("t2"),
            get("t2"),
        ),
    ),
    Scenario(
        "LGGET-001",
        "latest_is_the_greatest_id",
        "without an id, get_tuple returns the newest checkpoint, also after a fork from an older one",
        (put(), put(), get(), put(parent="none"), get()),
    ),
    Scenario(
        "LGGET-002",
        "unknown_is_none",
        "an unknown id, thread or namespace gives None",
        (get(), put(), get(which="unknown"), get("t9"), get("t1", "child:9")),
    ),
    Scenario(
        "LGGET-003",
        "the_tuple_names_its_checkpoint",
        "a tuple's config and checkpoint name the checkpoint asked for",
        (put(), put(), get(which=0), get(which=1), get()),
    ),
    Scenario(
        "LGLIST-001",
        "list_newest_first",
        "a thread's checkpoints are listed newest first, per namespace or all, or the one named",
        (
            put(),
            put(),
            put("t1", "child:1"),
            put(),
            listing(),
            listing("t1", None),
            listing(which=1),
            listing("t1", "child:1"),
        ),
    ),
    Scenario(
        "LGLIST-002",
        "filter_matches_metadata",
        "a filter keeps exactly the checkpoints whose metadata has every key and value",
        (
            put(source="input", step=-1),
            put(source="loop", step=0),
            put(source="loop", step=1),
            listing(filter={"source": "loop"}),
            listing(filter={"source": "loop", "step": 1}),
            listing(filter={"source": "update"}),
            listing(filter={"absent": "x"}),
            listing(filter={}),
        ),
    ),
    Scenario(
        "LGLIST-003",
        "before_lists_older_only",
        "before yields the checkpoints older than the one it names, never that one",
        (
            put(),
            put(),
            put(),
            listing(before=2),
            listing(before=0),
            listing(before=2, filter={"source": "loop"}),
        ),
    ),
    Scenario(
        "LGLIST-004",
        "limit_lists_the_first",
        "limit yields the first checkpoints the unlimited listing yields; limit 0 none",
        (
            put(),
            put(),
            put(),
            listing(limit=0),
            listing(limit=1),
            listing(limit=2),
            listing(limit=9),
            listing(before=2, limit=1),
        ),
    ),
    Scenario(
        "LGLIST-005",
        "list_none_lists_every_thread",
        "list(None) yields every checkpoint of every thread, filtered",
        (
            put("t1"),
            put("t2"),
            put("t2", "child:1"),
            listing(None),
            listing(None, filter={"source": "loop"}),
        ),
    ),
    Scenario(
        "LGDEL-001",
        "delete_thread_removes_it_whole",
        "delete_thread removes every namespace, value and write of the thread and nothing else",
        (
            put("t1", "", {"a": 1}),
            writes("task-a", ("x", 1)),
            put("t1", "child:1", {"a": 2}),
            put("t2", "", {"a": 3}),
            writes("task-a", ("x", 2), thread="t2"),
            ("delete_thread", ("t1",)),
            *every("t1", "t2"),
            get("t1"),
            ("delete_thread", ("t9",)),
            *every("t2"),
        ),
    ),
    Scenario(
        "LGRUNS-001",
        "delete_for_runs_removes_those_runs",
        "delete_for_runs removes the runs' checkpoints and writes everywhere, keeps every other value",
        (
            put("t1", "", {"a": 1, "b": 1}, run_id="run-1"),
            writes("task-a", ("x", 1)),
            put("t1", "", {"b": 2}, run_id="run-2"),
            put("t1", "child:1", {"a": 3}, run_id="run-1"),
            put("t2", "", {"a": 4}, run_id="run-2"),
            ("delete_for_runs", (["run-1"],)),
            *every("t1", "t2"),
            ("delete_for_runs", (["run-9"],)),
            ("delete_for_runs", ([],)),
            *every("t1", "t2"),
        ),
    ),
    Scenario(
        "LGCOPY-001",
        "copy_thread_copies_it_whole",
        "copy_thread makes the target read as the source did, and leaves the source as it was",
        (
            put("t1", "", {"a": 1, "b": 1}),
            writes("task-a", ("x", 1), ("__error__", "e")),
            put("t1", "", {"b": 2}),
            put("t1", "child:1", {"a": 3}),
            ("copy_thread", ("t1", "t3")),
            *every("t3", "t1"),
            get("t3"),
        ),
    ),
    Scenario(
        "LGPRUNE-001",
        "prune_keeps_the_latest_whole",
        "prune keeps each namespace's latest checkpoint with its values and writes, other threads untouched",
        (
            put("t1", "", {"a": 1, "b": 1}),
            put("t1", "", {"b": 2}),
            writes("task-a", ("x", 1)),
            put("t1", "child:1", {"a": 3}),
            put("t1", "child:1", {"a": 4}),
            put("t2", "", {"a": 5}),
            put("t2", "", {"a": 6}),
            ("prune", (["t1"], "keep_latest")),
            *every("t1", "t2"),
            ("prune", (["t9"], "keep_latest")),
            *every("t2"),
        ),
    ),
    Scenario(
        "LGPRUNE-002",
        "prune_delete_removes_the_threads",
        "prune with strategy delete removes the threads whole, other threads untouched",
        (
            put("t1", "", {"a": 1}),
            writes("task-a", ("x", 1)),
            put("t1", "child:1", {"a": 2}),
            put("t2", "", {"a": 3}),
            ("prune", (["t1"], "delete")),
            *every("t1", "t2"),
        ),
    ),
    Scenario(
        "LGTWIN-001",
        "twins_are_one_saver",
        "what the async methods store the sync ones read, and the other way round",
        (
            put(values={"a": 1}),
            get(),
            put(values={"a": 2}),
            writes("task-a", ("x", 1)),
            get(),
            listing(),
            writes("task-b", ("x", 2)),
            listing(),
        ),
        twins=("async", "sync", "sync", "async", "sync", "async", "sync", "async"),
    ),
)
"""Every scenario, in the catalog's order of rules."""


# -- the model-based machine -------------------------------------------------------------------

MACHINE_RULES: tuple[str, ...] = tuple(
    r.id
    for r in LANGGRAPH_RULES
    if r.id.split("-")[0]
    not in (
        "LGRUNS",
        "LGCOPY",
        "LGPRUNE",
        "LGTWIN",
        "LGSETUP",
        "LGKILL",
        "LGMP",
        "LGPOWER",
        "LGCODEC",
        "LGSRV",
    )
)
"""The rules the machine judges on every saver: the base operations'. What it finds
of an extended operation's rule is reported under that rule, which its scenario
passes or skips."""


def model_based(h: Harness) -> None:
    """LGPUT-001: random sequences of the saver's operations through both twins agree with the model."""
    open_one = _opener(h)
    contract = langgraph_contract(_offers(h))
    machine = contract_machine(contract, open_one, h.root, keep_stores=h.run.probe.external_storage)
    run_machine(h, machine, examples=h.profile.stateful_examples, steps=h.profile.stateful_steps)


# -- concurrent tasks ---------------------------------------------------------------------------

TASKS_AT_ONCE = 4


def _tasks_history_calls(twin: Twin, round_: int) -> tuple[Call, list[list[Call]]]:
    """The first put and then each parallel task's calls, as the model prepares them."""
    per_task: list[Intent] = [
        intent
        for task in range(TASKS_AT_ONCE)
        for intent in (
            writes(f"task-{task}", ("messages", task), ("count", round_)),
            writes(f"task-{task}", ("__error__", f"error {task}")),
            get(),
        )
    ]
    base, *calls = prepared(
        [put(values={"round": round_}), *per_task], [twin] * (1 + len(per_task))
    )
    each = len(per_task) // TASKS_AT_ONCE
    return base, [calls[n : n + each] for n in range(0, len(calls), each)]


async def _tasks_round(h: Harness, twin: Twin, round_: int, *, at_once: bool) -> list[Recorded]:
    """One round: the first put, the tasks' calls (at once, or one task after another),
    and a last read of the checkpoint, every call recorded."""
    handle = await _opener(h)(h.new_store())
    contract = langgraph_contract(_offers(h))
    base, programs = _tasks_history_calls(twin, round_)
    try:
        history = await record_calls(contract, handle, [base], process=0)
        if at_once:
            histories = await asyncio.gather(
                *(record_calls(contract, handle, calls, p + 1) for p, calls in enumerate(programs))
            )
        else:
            histories = [
                await record_calls(contract, handle, calls, p + 1)
                for p, calls in enumerate(programs)
            ]
        final = await record_calls(contract, handle, [Call("get_tuple", ("t1", "", None, twin))], 0)
    finally:
        await handle.close()
    return history + [r for each in histories for r in each] + final


async def _tasks_in_processes_round(h: Harness, twin: Twin, round_: int) -> list[Recorded]:
    """One round with each task in a worker process of its own, each with a saver of
    one store: the first put and the last read made in this process."""
    contract = langgraph_contract(_offers(h))
    base, programs = _tasks_history_calls(twin, round_)
    path = h.new_store()
    handle = await _opener(h)(path)
    try:
        history = await record_calls(contract, handle, [base], len(programs))
    finally:
        await handle.close()
    history += await run_programs_in_processes(LANGGRAPH_CONTRACT_REF, h.target, path, programs)
    handle = await _opener(h)(path)
    try:
        final = Call("get_tuple", ("t1", "", None, twin))
        return history + await record_calls(contract, handle, [final], len(programs))
    finally:
        await handle.close()


async def _judge_tasks(
    h: Harness,
    rule_id: str,
    rounds: int,
    how: str,
    at_once: Callable[[Twin, int], Awaitable[list[Recorded]]],
) -> None:
    """``rounds`` rounds of the tasks through each twin, made ``how`` by ``at_once``,
    each judged by the linearizability checker; a finding is ``rule_id``'s."""
    offers = _offers(h)
    twins = [t for t in offers["put_writes"] if t in offers["get_tuple"] and t in offers["put"]]
    if not twins:
        raise CheckSkipped("the saver offers no twin with put, put_writes and get_tuple")
    contract = langgraph_contract(offers)
    judged = 0
    for round_ in h.slice.within(range(rounds), f"rounds of tasks {how} (of {rounds})"):
        for twin in twins:
            # What the same calls do one at a time is the sequential contract's to judge:
            # only what they do at once, and not one after another, is a concurrency defect.
            alone = first_divergence(
                await _tasks_round(h, twin, round_, at_once=False), "tasks one after another"
            )
            if alone is not None:
                raise alone
            verdict = check_linearizable(contract, await at_once(twin, round_))
            if isinstance(verdict, Diverged):
                raise RuleViolation(
                    rule_id,
                    f"{TASKS_AT_ONCE} tasks through the {twin} twin, {how}: {verdict.message()}",
                    shape=f"an outcome of tasks {how} that no order of them gives",
                )
            if not isinstance(verdict, Undecided):
                judged += 1
    if judged == 0:
        raise NothingExercised(f"no history of tasks {how} was decided before the run's cap")
    h.measure(f"{judged} rounds of {TASKS_AT_ONCE} tasks {how}")


async def concurrent_tasks(h: Harness) -> None:
    """LGMP-001: parallel tasks' put_writes and reads made at once on one saver have the outcome of some order."""

    async def at_once(twin: Twin, round_: int) -> list[Recorded]:
        return await _tasks_round(h, twin, round_, at_once=True)

    rounds = max(1, h.profile.stateful_examples // 10)
    await _judge_tasks(h, "LGMP-001", rounds, "at once on one saver", at_once)


async def tasks_in_processes(h: Harness) -> None:
    """LGMP-002: parallel tasks, each in a process of its own with a saver of one store, lose nothing."""

    async def in_processes(twin: Twin, round_: int) -> list[Recorded]:
        return await _tasks_in_processes_round(h, twin, round_)

    how = "in processes of their own, with savers of one store"
    await _judge_tasks(h, "LGMP-002", h.profile.process_rounds, how, in_processes)


# -- setup() again -----------------------------------------------------------------------------

SETUP_PROGRAM: tuple[Intent, ...] = (
    put(values={"count": 1}),
    writes("task-a", ("messages", "kept")),
    put("t1", "child:1", {"count": 2}),
)


async def _setup(handle: SaverHandle) -> None:
    """Call the saver's setup(), awaited if it is a coroutine, in a thread if it is not."""
    setup = getattr(handle.saver, "setup", None)
    assert callable(setup), "the check asked whether the saver has setup() first"
    try:
        if inspect.iscoroutinefunction(setup):
            await setup()
        else:
            await asyncio.to_thread(setup)
    except Exception as exc:  # what setup() raises is the saver's, evidence for LGSETUP-001
        blame_backend(exc, "setup()")
        raise


async def setup_runs_again(h: Harness) -> None:
    """LGSETUP-001: setup() again on a saver in use, and on two savers of one store at once, keeps everything."""
    open_one = _opener(h)
    path = h.new_store()
    first = await open_one(path)
    try:
        if not callable(getattr(first.saver, "setup", None)):
            raise CheckSkipped("the saver has no setup()")
        twin = next((t for t in first.twins if "put_writes" in first.operations[t]), None)
        if twin is None:
            raise CheckSkipped("the saver offers no twin with put and put_writes")
        program = prepared(SETUP_PROGRAM, [twin] * len(SETUP_PROGRAM))
        history = await record_calls(LANGGRAPH_CONTRACT, first, program, 0)
        await _setup(first)
        await _setup(first)
        second = await open_one(path)
        try:
            await asyncio.gather(_setup(first), _setup(second))
            reads = list(_readback(program))
            history += await record_calls(LANGGRAPH_CONTRACT, first, reads, 0)
            shared = await record_calls(LANGGRAPH_CONTRACT, second, reads, 1)
        finally:
            await second.close()
    finally:
        await first.close()
    found = first_divergence(history, "setup() again")
    if found is not None:
        raise RuleViolation(
            "LGSETUP-001",
            f"after setup() ran again on the saver in use and on a second saver at once: {found.message}",
            shape="setup() run again lost or changed what the store held",
        )
    if any(r.answer != Returned([]) and r.answer != Returned(None) for r in shared):
        found = first_divergence([*history[: len(program)], *shared], "setup() again")
        if found is not None:
            raise RuleViolation(
                "LGSETUP-001",
                f"read through the second saver after both ran setup() at once: {found.message}",
                shape="setup() run again lost or changed what the store held",
            )
        h.measure("setup() ran again on a saver in use and on two savers of one store at once")
    else:
        h.measure("setup() ran again on a saver in use; a second saver does not share its store")


SETUP_AT_ONCE = 4
"""How many savers of one fresh store run setup() at once."""

LEAVE_SETUP: Final = {"setup": "caller"}
"""The option telling a factory to leave setup() to the kit."""


async def _fresh_savers(h: Harness, path: Path, count: int) -> list[SaverHandle]:
    """``count`` savers of the store in ``path``, their factory told to leave setup() to
    the kit; their twins are those the run's probe found (a store not set up may answer
    nothing)."""
    open_one = _opener(h, LEAVE_SETUP, _offers(h)["get_tuple"])
    return [await open_one(path) for _ in range(count)]


async def _leaves_setup_to_the_kit(h: Harness) -> None:
    """Skip unless a saver whose factory was told to leave setup() to the kit cannot
    store yet: if it can, the factory set the store up anyway, or the saver does on
    first use, and there is no fresh store to set up."""
    (handle,) = await _fresh_savers(h, h.new_store(), 1)
    try:
        if not callable(getattr(handle.saver, "setup", None)):
            raise CheckSkipped("the saver has no setup()")
        twin = handle.twins_of("put")[0]
        (stored,) = await record_calls(
            LANGGRAPH_CONTRACT, handle, prepared(SETUP_PROGRAM[:1], [twin]), 0
        )
    finally:
        with contextlib.suppress(Exception):  # a saver on a store it could not use
            await handle.close()
    if not stored.raised:
        raise CheckSkipped(
            "a saver opened with setup=caller in its options stores before setup() runs: "
            "its factory sets the store up itself, or the saver does on first use"
        )


async def _stores_and_reads(writer: SaverHandle, reader: SaverHandle) -> list[Recorded]:
    """`SETUP_PROGRAM` made through ``writer`` and read back through ``reader``."""
    twin = next((t for t in writer.twins if "put_writes" in writer.operations[t]), None)
    if twin is None:
        raise CheckSkipped("the saver offers no twin with put and put_writes")
    program = prepared(SETUP_PROGRAM, [twin] * len(SETUP_PROGRAM))
    history = await record_calls(LANGGRAPH_CONTRACT, writer, program, 0)
    return history + await record_calls(LANGGRAPH_CONTRACT, reader, list(_readback(program)), 1)


async def setup_at_once_on_a_fresh_store(h: Harness) -> None:
    """LGSETUP-002: setup() run at once by several savers of a fresh store raises in none and leaves it complete."""
    await _leaves_setup_to_the_kit(h)
    path = h.new_store()
    savers = await _fresh_savers(h, path, SETUP_AT_ONCE)
    try:
        raised = [
            exc
            for exc in await asyncio.gather(*(_setup(s) for s in savers), return_exceptions=True)
            if isinstance(exc, Exception)
        ]
        if raised:
            said = "; ".join(sorted({f"{type(e).__name__}: {e}".splitlines()[0] for e in raised}))
            raise RuleViolation(
                "LGSETUP-002",
                f"{len(raised)} of {SETUP_AT_ONCE} savers running setup() at once on a fresh "
                f"store raised: {said}",
                shape="setup() at once on a fresh store raised",
            )
        history = await _stores_and_reads(savers[0], savers[-1])
    finally:
        for saver in savers:
            await saver.close()
    found = first_divergence(history, f"after {SETUP_AT_ONCE} savers ran setup() at once")
    if found is not None:
        raise RuleViolation(
            "LGSETUP-002", found.message, shape="setup() at once left a store that loses calls"
        )
    h.measure(f"{SETUP_AT_ONCE} savers ran setup() at once on a fresh store, which then works")


async def _setup_in_a_transaction(handle: SaverHandle) -> BaseException | None:
    """Run the saver's setup() inside a transaction opened on its ``conn`` (psycopg's
    ``transaction()``); what it raised, None if it completed. Skipped for a saver with
    no such connection."""
    conn = getattr(handle.saver, "conn", None)
    transaction = getattr(conn, "transaction", None)
    if not callable(transaction):
        raise CheckSkipped(
            "the saver has no conn with transaction() (a psycopg connection) to open a "
            "caller's transaction on"
        )
    setup = getattr(handle.saver, "setup", None)
    assert callable(setup), "the check asked whether the saver needs setup() first"
    try:
        if inspect.iscoroutinefunction(setup):
            async with transaction():
                await setup()
        else:

            def in_transaction() -> None:
                with transaction():
                    setup()

            await asyncio.to_thread(in_transaction)
    except Exception as exc:  # what setup() raised is the saver's, and allowed
        return exc
    return None


async def setup_in_a_transaction(h: Harness) -> None:
    """LGSETUP-003: setup() inside a caller's transaction completes, or raises and leaves the store as it was."""
    await _leaves_setup_to_the_kit(h)
    (handle,) = await _fresh_savers(h, h.new_store(), 1)
    try:
        raised = await _setup_in_a_transaction(handle)
        what = "raised " + f"{type(raised).__name__}" if raised is not None else "completed"
        try:
            await _setup(handle)
        except Exception as exc:
            raise RuleViolation(
                "LGSETUP-003",
                f"setup() in a caller's transaction {what}; setup() outside one then raised "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                shape="setup() in a caller's transaction left a store setup() cannot finish",
            ) from exc
        history = await _stores_and_reads(handle, handle)
    finally:
        with contextlib.suppress(Exception):
            await handle.close()
    found = first_divergence(
        history, f"after setup() in a caller's transaction {what} and again outside"
    )
    if found is not None:
        raise RuleViolation(
            "LGSETUP-003",
            found.message,
            shape="setup() in a caller's transaction left a store that loses calls",
        )
    h.measure(f"setup() in a caller's transaction {what}; the store then works")


# -- a writer killed -------------------------------------------------------------------------

KILLED_PROGRAM: tuple[Intent, ...] = (
    put(values={"messages": ["hi"], "count": 1}),
    writes("task-a", ("messages", "a"), ("count", 2)),
    writes("task-b", ("__interrupt__", "wait")),
    put(values={"count": 3}),
    put("t1", "child:1", {"payload": "raw"}),
    writes("task-a", ("scratch", {"k": 1}), ns="child:1"),
)
"""What the killed writer does: a graph's steps, values carried, writes of two tasks.
Its values are JSON's kinds only: the program reaches the worker process as JSON."""


def _writer_twin(h: Harness) -> Twin:
    """The twin a crashed writer calls through: one with put and put_writes."""
    offers = _offers(h)
    twin = next((t for t in offers["put"] if t in offers["put_writes"]), None)
    if twin is None or not offers["list"]:
        raise CheckSkipped("the saver offers no twin with put and put_writes")
    return twin


async def _without_faults(h: Harness, intents: Sequence[Intent], twin: Twin) -> list[Call]:
    """``intents`` through ``twin``, once made and read back in this process with no
    fault: what the calls do then is the sequential rules' to judge (raised as found),
    so only what a crash or a failing serializer left, and the calls alone do not
    give, is the fault's rule's."""
    program = prepared(intents, [twin] * len(intents))
    alone = await _opener(h)(h.new_store())
    history = await record_calls(LANGGRAPH_CONTRACT, alone, program, 0)
    try:
        history += await record_calls(LANGGRAPH_CONTRACT, alone, list(_readback(program)), 0)
    finally:
        await alone.close()
    found = first_divergence(history, "the calls without a fault")
    if found is not None:
        raise found
    return program


async def _writer_program(h: Harness, twin: Twin) -> list[Call]:
    """`KILLED_PROGRAM` through ``twin``, judged first without a fault (`_without_faults`)."""
    return await _without_faults(h, KILLED_PROGRAM, twin)


async def writer_killed_at_each_call(h: Harness) -> None:
    """LGKILL-001: a writer killed after each of its file-changing system calls leaves an order's prefix."""
    await killed_writer(
        h,
        LANGGRAPH_CONTRACT_REF,
        lambda: _writer_program(h, _writer_twin(h)),
        "LGKILL-001",
        what="the saver",
    )


async def power_loss_at_each_operation(h: Harness) -> None:
    """LGPOWER-001: after a power loss at any point of a traced writer, every answered call reads back whole."""
    await power_cut_writer(
        h,
        LANGGRAPH_CONTRACT_REF,
        lambda: _writer_program(h, _writer_twin(h)),
        "LGPOWER-001",
        what="the saver",
    )


LANGGRAPH_CONTRACT_REF = "checkpointspec.conformance.engines.contract.langgraph:LANGGRAPH_CONTRACT"


# -- the server killed, its connections cut, its host power-cut ----------------------------------


async def server_killed(h: Harness) -> None:
    """LGSRV-001: the saver's PostgreSQL server killed at a moment of its calls and started again keeps every answered call."""
    program = await _writer_program(h, _writer_twin(h))
    await servers.server_killed(
        h, LANGGRAPH_CONTRACT, program, "LGSRV-001", what="the saver", shown=_shown
    )


async def server_power_cut(h: Harness) -> None:
    """LGSRV-003: a power cut of the saver's PostgreSQL server's host at any point of its calls keeps every answered call."""
    program = await _writer_program(h, _writer_twin(h))
    await servers.server_power_cut(
        h, LANGGRAPH_CONTRACT, LANGGRAPH_CONTRACT_REF, program, "LGSRV-003", what="the saver"
    )


async def connections_cut(h: Harness) -> None:
    """LGSRV-002: a saver whose connections to its server are cut at any byte keeps every answered call and halves none."""
    program = await _writer_program(h, _writer_twin(h))
    await servers.connections_cut(h, LANGGRAPH_CONTRACT, program, "LGSRV-002", what="the saver")


# -- the serializer failing ---------------------------------------------------------------------

SERDE_PROGRAM: tuple[Intent, ...] = (
    put(values={"messages": ["hi"], "count": 1}),
    writes("task-a", ("messages", "a"), ("count", 2)),
)
"""What the saver holds before its serializer fails."""

SERDE_FAILING: tuple[Intent, ...] = (
    put(values={"count": 3, "messages": ["more"], "payload": {"k": [1, 2]}}),
    writes("task-b", ("messages", "b"), ("count", 4), ("payload", "c")),
    writes("task-c", ("__interrupt__", "wait"), ("__error__", "boom")),
)
"""The calls made with the serializer failing at each value in turn, then once more
with it working: a graph's step, a task's writes, a task's special writes."""

MOST_VALUES = 64
"""The most values one call is failed at: a bound, should a saver serialise without end."""


_SERDE_SHAPES = {
    "LGCODEC-001": "a call whose serializer failed left part of it stored, or answered",
    "LGCODEC-002": "a read whose serializer failed answered without the value, or changed the store",
}


class _SerdeRun:
    """One saver with a `FaultySerde` in place of its own: its calls made through one
    twin, the model taking those that were answered, everything judged as it goes."""

    def __init__(self, handle: SaverHandle, serde: FaultySerde, twin: Twin) -> None:
        self.handle, self.serde, self.twin = handle, serde, twin
        self.state = SaverState()
        self.history: list[Recorded] = []
        self.made: list[Call] = []
        self.dumps = self.loads = 0
        """How many values the last call serialised, and read."""

    def prepared(self, intent: Intent) -> Call:
        """``intent`` as the call the model prepares in its state now."""
        operation, arguments = intent
        made = prepare(self.state, operation, (*arguments, self.twin))
        assert made is not None, f"{operation}{arguments} has nothing to act on"
        return Call(operation, made)

    async def make(
        self, call: Call, *, fail_dumps: int | None = None, fail_loads: int | None = None
    ) -> Recorded:
        """Make ``call`` with the serializer failing as told; the recorded call."""
        self.serde.fail_at(dumps=fail_dumps, loads=fail_loads)
        try:
            (recorded,) = await record_calls(LANGGRAPH_CONTRACT, self.handle, [call], 0)
        finally:
            self.dumps, self.loads = self.serde.dumps, self.serde.loads
            self.serde.fail_at()
        return recorded

    def taken(self, recorded: Recorded) -> None:
        """``recorded`` was made whole: the model takes it, the history holds it."""
        call = recorded.call
        self.history.append(recorded)
        if call.operation in ("put", "put_writes"):
            self.state, _ = apply(self.state, call.operation, call.arguments)
            self.made.append(call)

    async def read_back(self, rule_id: str, after: str) -> None:
        """Read everything back with the serializer working; the first answer the model
        does not give (this one or any before) is a finding of ``rule_id``."""
        self.history += await record_calls(
            LANGGRAPH_CONTRACT, self.handle, list(_readback(self.made)), 0
        )
        found = first_divergence(self.history, after)
        if found is not None:
            raise RuleViolation(rule_id, found.message, shape=_SERDE_SHAPES[rule_id]) from found


async def _serialising_fails(run: _SerdeRun, intent: Intent) -> int:
    """Make ``intent``'s call with the serializer failing at its 1st value, its 2nd, …,
    then whole: each failed call must raise and leave the store as it was (LGCODEC-001).
    Returns how many values the call serialises."""
    for value in range(1, MOST_VALUES + 1):
        call = run.prepared(intent)
        recorded = await run.make(call, fail_dumps=value)
        if run.dumps < value:  # it serialised fewer values: made whole
            run.taken(recorded)
            return value - 1
        shown = f"{_shown(call)} whose serializer failed at its value {value}"
        if not recorded.raised:
            raise RuleViolation(
                "LGCODEC-001",
                f"{shown} answered {recorded.answer}: the graph is told it was stored",
                shape=_SERDE_SHAPES["LGCODEC-001"],
            )
        await run.read_back("LGCODEC-001", f"after {shown} (it raised {recorded.raised})")
    return MOST_VALUES


async def _deserialising_fails(run: _SerdeRun, read: Call) -> int:
    """Make ``read`` with the serializer failing at its 1st value read, its 2nd, …, then
    whole: each must raise or answer as the model does, and the store read whole after
    it (LGCODEC-002). Returns how many values the read deserialises."""
    for value in range(1, MOST_VALUES + 1):
        recorded = await run.make(read, fail_loads=value)
        if run.loads < value:
            run.taken(recorded)
            return value - 1
        shown = f"{_shown(read)} whose serializer failed at its value {value}"
        if not recorded.raised:  # an answer despite the failure is judged like any other
            run.taken(recorded)
        await run.read_back("LGCODEC-002", f"{shown}, and reading again")
    return MOST_VALUES


@contextlib.asynccontextmanager
async def _serde_run(h: Harness) -> AsyncIterator[_SerdeRun]:
    """A fresh saver with a `FaultySerde` in place of its own, holding `SERDE_PROGRAM`;
    skipped for a saver whose serializer the kit cannot reach."""
    twin = _writer_twin(h)
    await _without_faults(h, (*SERDE_PROGRAM, *SERDE_FAILING), twin)
    handle = await _opener(h)(h.new_store())
    try:
        own = getattr(handle.saver, "serde", None)
        if not callable(getattr(own, "dumps_typed", None)):
            raise CheckSkipped(
                "the saver has no serde with dumps_typed: the kit reaches a saver's "
                "serializer through the serde attribute BaseCheckpointSaver sets"
            )
        serde = FaultySerde(own)
        try:
            setattr(handle.saver, "serde", serde)  # noqa: B010 - the saver's, untyped
        except (AttributeError, TypeError) as exc:
            raise CheckSkipped(f"the saver's serde cannot be replaced: {exc}") from exc
        run = _SerdeRun(handle, serde, twin)
        serialised = 0
        for intent in SERDE_PROGRAM:
            run.taken(await run.make(run.prepared(intent)))
            serialised += run.dumps
        if serialised == 0:
            raise NothingExercised(
                "the saver serialised no value through its serde attribute: it keeps "
                "another serializer, which the kit cannot reach"
            )
        yield run
    finally:
        await handle.close()


async def serialising_fails(h: Harness) -> None:
    """LGCODEC-001: a put or put_writes whose serializer fails at any of its values raises and stores nothing."""
    async with _serde_run(h) as run:
        values = [await _serialising_fails(run, intent) for intent in SERDE_FAILING]
        await run.read_back("LGCODEC-001", "after the calls whose serializer failed")
    h.measure(f"{len(values)} calls failed at each of their {sum(values)} values serialised")


async def deserialising_fails(h: Harness) -> None:
    """LGCODEC-002: a read whose serializer fails at any of its values answers nothing wrong and changes nothing."""
    async with _serde_run(h) as run:
        for intent in SERDE_FAILING:
            run.taken(await run.make(run.prepared(intent)))
        reads = list(_readback(run.made))
        values = [await _deserialising_fails(run, read) for read in reads]
    h.measure(f"{len(reads)} reads failed at each of their {sum(values)} values read")


CHECKS: tuple[Check, ...] = (
    *(_scenario_check(s) for s in SCENARIOS),
    check(*MACHINE_RULES, kind="model")(model_based),
    check("LGSETUP-001")(setup_runs_again),
    check("LGSETUP-002", kind="processes")(setup_at_once_on_a_fresh_store),
    check("LGSETUP-003")(setup_in_a_transaction),
    check("LGKILL-001", kind="crash", replay_note="a kill at a moment of a real process")(
        writer_killed_at_each_call
    ),
    check("LGMP-001", kind="processes")(concurrent_tasks),
    check("LGMP-002", kind="processes", replay_note="how the processes' calls interleave")(
        tasks_in_processes
    ),
    check("LGSRV-001", kind="crash", replay_note="where in the server's work a kill lands")(
        server_killed
    ),
    check("LGSRV-002", kind="stress", replay_note="which call a cut lands in")(connections_cut),
    check("LGSRV-003", kind="crash", replay_note="the system calls a real server made")(
        server_power_cut
    ),
    check("LGCODEC-001")(serialising_fails),
    check("LGCODEC-002")(deserialising_fails),
    check("LGPOWER-001", kind="crash", replay_note="the system calls a real process made")(
        power_loss_at_each_operation
    ),
)
"""The langgraph suite, scenarios first (one or more per rule), then the machine and
the concurrent tasks."""
