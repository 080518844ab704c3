"""The openai_session suite: an OpenAI Agents ``Session`` store against its contract.

Each check names the rule it verifies first:

- **scenarios**, one or more per rule: a conversation's calls written out
  (`Scenario`), made on a fresh store and judged call by call against the model
  (`checkpointspec.spec.openai_session`), so that every rule is exercised on every
  run whatever the search draws;
- the **model-based machine** (`model_based`): random sequences of the four calls on
  sessions whose ids differ only in case, a separator or Unicode normalisation,
  through two Session objects per id, shrunk to the fewest calls that still diverge;
- **callers at once** (`callers_at_once`, `callers_in_processes`): turns of one
  conversation (adds, reads, racing pops and a clear) through Session objects of one
  store, in one process or each in a process of its own, judged by the
  linearizability checker;
- **crashes** (`writer_killed_at_each_call`, `power_loss_at_each_operation`): a
  conversation's calls made by a writer killed right after each system call that
  changes a file under the store, or traced and rebuilt after a power loss at any
  point; what they left read back and judged like any history.
- **servers** (`server_killed`, `connections_cut`, `server_power_cut`): for a store
  that takes its server from the ``dsn`` option, the same calls on a PostgreSQL
  cluster of the kit's own, its server killed, its connections cut, its host's power
  cut (`_contract_servers`).

A check needing what the store does not have (data in files under its store's
directory; a declaration) is skipped, saying so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ...spec.openai_session import OPENAI_SESSION_RULES, SessionsState, encoded, judge, step
from ..engines.contract.contract import Call, Returned, plain
from ..engines.contract.openai_session import (
    OPENAI_SESSION_CONTRACT,
    SESSION_IDS,
    SessionStore,
    confirm,
    open_sessions,
    partial_add,
    readback,
)
from ..engines.contract.violations import RuleViolation
from ..engines.history.linearizable import Diverged, Recorded, Undecided, check_linearizable
from ..engines.machines.contract import contract_machine
from ..engines.processes.contract_programs import record_calls
from ..engines.processes.contract_worker import run_programs_in_processes
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised
from ..engines.search.stateful import run_machine
from . import _contract_servers as servers
from ._contract_crashes import killed_writer, power_cut_writer
from .base import Check, check

__all__ = ["CHECKS", "SCENARIOS", "Scenario", "first_divergence"]

CONTRACT_REF: Final = (
    "checkpointspec.conformance.engines.contract.openai_session:OPENAI_SESSION_CONTRACT"
)


def _opener(h: Harness) -> Callable[[Path], Awaitable[SessionStore]]:
    """How this check opens a store of sessions on a directory: the run's factory, given
    that directory's `BackendContext`."""
    target = h.target
    factory = target.factory()
    return lambda path: open_sessions(factory, target.context(path))


def add(session: str = "conv-1", *items: dict[str, object], handle: int = 0) -> Call:
    return Call("add_items", (session, handle, list(items)))


def get(session: str = "conv-1", limit: int | None = None, handle: int = 0) -> Call:
    return Call("get_items", (session, handle, limit))


def pop(session: str = "conv-1", handle: int = 0) -> Call:
    return Call("pop_item", (session, handle))


def clear(session: str = "conv-1", handle: int = 0) -> Call:
    return Call("clear_session", (session, handle))


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, object]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def tool_call(call_id: str) -> dict[str, object]:
    return {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": '{"q": 1}'}


def tool_output(call_id: str, output: str) -> dict[str, object]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


@dataclass(frozen=True)
class Scenario:
    """A conversation's calls written out, judged call by call against the model."""

    rule: str
    name: str
    summary: str
    calls: tuple[Call, ...]


async def first_divergence(
    store: SessionStore, calls: Sequence[Call], where: str, *, process: int = 0
) -> tuple[list[Recorded], RuleViolation | None]:
    """Make ``calls`` on ``store`` one after another beside the model, until the first
    whose answer the model does not give: the calls recorded, and that answer as the
    finding of the rule it breaks (``where`` says what the calls were; None if every
    answer is the model's). An answer that looks like a Session object's stale copy is
    asked again of a fresh object then, while the store is as the call left it
    (`confirm`)."""
    state, history = SessionsState(), []
    for call in calls:
        (recorded,) = await record_calls(OPENAI_SESSION_CONTRACT, store, [call], process)
        history.append(recorded)
        after, expected = step(state, call.operation, call.arguments)
        want = plain(expected)
        got = recorded.answer.value if isinstance(recorded.answer, Returned) else None
        if recorded.raised or got != want:
            found = judge(state, call.operation, call.arguments, want, got, raised=recorded.raised)
            rule, shape, said = found.rule, found.shape, found.sentence
            looked = await confirm(
                store, state, call, Returned(want), recorded.answer, recorded.raised
            )
            if looked is not None:
                rule, shape, said = looked
            return history, RuleViolation(rule, f"{where}: {call} {said}", shape=shape)
        state = after
    return history, None


async def play(h: Harness, scenario: Scenario) -> None:
    """Make ``scenario``'s calls on a fresh store beside the model; the first answer the
    model does not give is a `RuleViolation` of the rule it breaks."""
    store = await _opener(h)(h.new_store())
    try:
        _, found = await first_divergence(store, scenario.calls, scenario.name)
    finally:
        await store.close()
    if found is not None:
        raise found


def _scenario_check(scenario: Scenario) -> Check:
    async def run(h: Harness) -> None:
        await play(h, scenario)

    run.__name__ = run.__qualname__ = scenario.name
    run.__doc__ = f"{scenario.rule}: {scenario.summary}"
    return check(scenario.rule)(run)


EXACT_VALUES: Final[dict[str, object]] = {
    "text": "naïve — 中文 \u2028 emoji \U0001f600",
    "edges": " \t leading and trailing whitespace \n",
    "empty": "",
    "nul": "a\x00b",
    "integer": 2**53,
    "negative": -7,
    "float": 0.1,
    "whole float": 1.0,
    "large float": 1e16,
    "negative zero": -0.0,
    "flag": False,
    "none": None,
    "nested": {"list": [1, 2.5, "x", None, [True]], "object": {"k": {"deep": "v"}}},
}
"""One value of every kind an item may carry, each a way a store's encoding can change it."""

CONFUSABLE_IDS: Final[tuple[str, ...]] = (*SESSION_IDS, "conv%2F1", "x" * 300)
"""The machine's ids, an escaped separator and an id longer than a file name may be."""

SCENARIOS: Final[tuple[Scenario, ...]] = (
    Scenario(
        "OASADD-001",
        "added_items_are_kept_in_order",
        "items of several add_items read back in the order added",
        (
            add("conv-1", user("first"), assistant("second")),
            get(),
            add("conv-1", tool_call("c1"), tool_output("c1", "done"), user("third")),
            get(),
            add("conv-1"),
            get(),
        ),
    ),
    Scenario(
        "OASGET-001",
        "get_items_returns_the_whole_history",
        "get_items() returns every item, each once, oldest first, after pops and adds",
        (
            get(),
            add("conv-1", *(user(f"turn {n}") for n in range(12))),
            get(),
            pop(),
            add("conv-1", assistant("again")),
            get(),
        ),
    ),
    Scenario(
        "OASGET-002",
        "get_items_with_a_limit_returns_the_latest",
        "get_items(limit) returns the latest items, oldest first, or all when there are fewer",
        (
            add("conv-1", *(user(f"turn {n}") for n in range(5))),
            get(limit=1),
            get(limit=3),
            get(limit=5),
            get(limit=8),
            add("conv-1", assistant("six")),
            get(limit=2),
        ),
    ),
    Scenario(
        "OASITEM-001",
        "items_come_back_exactly",
        "values of every kind read back exactly, whole and through pop_item",
        (
            add(
                "conv-1",
                *({"type": "custom", "kind": k, "value": v} for k, v in EXACT_VALUES.items()),
            ),
            get(),
            pop(),
            get(limit=2),
            add("conv-1", {"z": 1, "a": 2, "m": {"y": 1, "b": 2}}),
            get(limit=1),
        ),
    ),
    Scenario(
        "OASPOP-001",
        "pop_item_removes_the_latest",
        "pop_item returns the latest item, removes it, then the one before, then None",
        (
            pop(),
            add("conv-1", user("a"), user("b"), user("c")),
            pop(),
            get(),
            pop(),
            pop(),
            pop(),
            get(),
            add("conv-1", user("d")),
            pop(),
        ),
    ),
    Scenario(
        "OASCLEAR-001",
        "clear_session_removes_only_its_items",
        "clear_session empties its session, leaves the others, and the session starts again",
        (
            clear("conv-1"),
            add("conv-1", user("a"), user("b")),
            add("conv-2", user("other")),
            clear("conv-1"),
            get("conv-1"),
            pop("conv-1"),
            get("conv-2"),
            add("conv-1", user("after")),
            get("conv-1"),
        ),
    ),
    Scenario(
        "OASISO-001",
        "confusable_session_ids_are_apart",
        "ids differing in case, separator, trailing space or normalisation hold their own items",
        tuple(add(sid, user(f"only in {n}")) for n, sid in enumerate(CONFUSABLE_IDS))
        + tuple(get(sid) for sid in CONFUSABLE_IDS)
        + (pop("Conv-1"), clear("conv_1"), get("conv-1"), get("conv:1")),
    ),
    Scenario(
        "OASSHARE-001",
        "session_objects_of_one_id_share_a_history",
        "what one Session object of an id adds, pops or clears, another reads at once",
        (
            get(handle=1),
            add("conv-1", user("a"), handle=0),
            get(handle=1),
            add("conv-1", user("b"), handle=1),
            get(handle=0),
            pop(handle=0),
            # Read through the object that removed it first: there a pop that removes
            # nothing shows as itself (OASPOP-001); only the other object can be stale.
            get(handle=0),
            get(handle=1),
            clear(handle=1),
            get(handle=1),
            get(handle=0),
            pop(handle=0),
        ),
    ),
)
"""Every scenario, in the catalog's order of rules."""


# -- a refused add_items -------------------------------------------------------------------------


class _NotJSON:
    """A value no JSON encoder takes: what a tool's raw output object would be."""

    def __repr__(self) -> str:
        return "<an object JSON cannot hold>"


async def refused_add_adds_nothing(h: Harness) -> None:
    """OASADD-002: an add_items that raises on its last item keeps none of the items before it."""
    store = await _opener(h)(h.new_store())
    good = [user("kept before"), assistant("the turn")]
    try:
        session = await store.session("conv-1")
        await session.add_items([user("already there")])  # type: ignore[attr-defined]
        try:
            await session.add_items([*good, {"type": "function_call_output", "output": _NotJSON()}])  # type: ignore[attr-defined]
        except Exception as exc:  # the refusal the rule is about: judged by what it left
            refused = f"{type(exc).__name__}: {exc}"
        else:
            refused = ""
        left = await (await store.session("conv-1", 1)).get_items()  # type: ignore[attr-defined]
    finally:
        await store.close()
    if not refused:
        raise CheckSkipped(
            "the store took an item JSON cannot hold without raising: it keeps more than "
            "JSON, so there is no refusal to judge"
        )
    if left != [user("already there")]:
        raise RuleViolation(
            "OASADD-002",
            f"add_items([{good[0]!r}, {good[1]!r}, <an item JSON cannot hold>]) raised {refused}, "
            f"and get_items() then returned {left!r} where the session held only "
            f"{user('already there')!r}",
            shape="a refused add_items changed the session",
        )
    h.measure("an add_items refusing its third item kept none of them")


# -- the model-based machine -------------------------------------------------------------------

MACHINE_RULES: Final[tuple[str, ...]] = tuple(
    r.id
    for r in OPENAI_SESSION_RULES
    if r.id
    in (
        "OASGET-001",
        "OASADD-001",
        "OASGET-002",
        "OASITEM-001",
        "OASPOP-001",
        "OASCLEAR-001",
        "OASISO-001",
        "OASSHARE-001",
    )
)
"""The rules the machine judges: every rule of the calls one at a time."""


def model_based(h: Harness) -> None:
    """OASADD-001: random sequences of the four calls, on confusable ids through two Session objects each, agree with the model."""
    machine = contract_machine(
        OPENAI_SESSION_CONTRACT, _opener(h), h.root, keep_stores=h.run.probe.external_storage
    )
    run_machine(h, machine, examples=h.profile.stateful_examples, steps=h.profile.stateful_steps)


# -- callers at once -------------------------------------------------------------------------------

CALLERS: Final = 4


def _turns(round_: int) -> tuple[list[Call], list[list[Call]]]:
    """What the callers do: the conversation so far, then per caller (each through a
    Session object of its own) a turn of two items and reads on ``conv-1``, two racing
    pops on ``conv-3``, and an add to ``conv-2`` (the last caller clears it). Pops have
    a session of their own so that the final read of ``conv-1`` shows every turn whole."""
    base = [
        add("conv-1", *(user(f"round {round_} item {n}") for n in range(4)), handle=0),
        add(
            "conv-3",
            *(assistant(f"round {round_} reply {n}") for n in range(2 * CALLERS)),
            handle=0,
        ),
    ]
    per_caller = [
        [
            add("conv-1", user(f"caller {c} asks"), assistant(f"caller {c} answers"), handle=c),
            pop("conv-3", handle=c),
            get("conv-1", limit=3, handle=c),
            pop("conv-3", handle=c),
            clear("conv-2", handle=c)
            if c == CALLERS - 1
            else add("conv-2", user(f"caller {c}"), handle=c),
            get("conv-1", handle=c),
        ]
        for c in range(CALLERS)
    ]
    return base, per_caller


FINAL_READS: Final[tuple[Call, ...]] = (get("conv-1"), get("conv-2"), get("conv-3"))
"""What is read once the callers are done: every session they used, whole."""


async def _round_in_one_process(
    h: Harness, round_: int, *, at_once: bool
) -> tuple[list[Recorded], RuleViolation | None]:
    """One round of the callers on one store, at once or one after another; with the
    latter, also the first divergence of its history (judged while the store is open)."""
    store = await _opener(h)(h.new_store())
    base, programs = _turns(round_)
    try:
        if not at_once:
            calls = [*base, *(c for program in programs for c in program), *FINAL_READS]
            return await first_divergence(store, calls, "callers one after another")
        history = await record_calls(OPENAI_SESSION_CONTRACT, store, base, process=0)
        histories = await asyncio.gather(
            *(
                record_calls(OPENAI_SESSION_CONTRACT, store, calls, p + 1)
                for p, calls in enumerate(programs)
            )
        )
        history += [r for each in histories for r in each]
        history += await record_calls(OPENAI_SESSION_CONTRACT, store, FINAL_READS, 0)
    finally:
        await store.close()
    return history, None


async def _round_in_processes(h: Harness, round_: int) -> list[Recorded]:
    base, programs = _turns(round_)
    path = h.new_store()
    store = await _opener(h)(path)
    try:
        history = await record_calls(OPENAI_SESSION_CONTRACT, store, base, len(programs))
    finally:
        await store.close()
    history += await run_programs_in_processes(CONTRACT_REF, h.target, path, programs)
    store = await _opener(h)(path)
    try:
        return history + await record_calls(
            OPENAI_SESSION_CONTRACT, store, FINAL_READS, len(programs)
        )
    finally:
        await store.close()


async def _judge_callers(
    h: Harness,
    rule_id: str,
    rounds: int,
    how: str,
    at_once: Callable[[int], Awaitable[list[Recorded]]],
) -> None:
    """``rounds`` rounds of the callers, made ``how`` by ``at_once``, each judged by the
    linearizability checker. Two pops returning one item is OASPOP-002's; anything else
    no order explains is ``rule_id``'s."""
    judged = 0
    for round_ in h.slice.within(range(rounds), f"rounds of callers {how} (of {rounds})"):
        # What the same calls do one at a time is the sequential rules' to judge.
        _, alone = await _round_in_one_process(h, round_, at_once=False)
        if alone is not None:
            raise alone
        history = await at_once(round_)
        verdict = check_linearizable(OPENAI_SESSION_CONTRACT, history)
        if isinstance(verdict, Diverged):
            torn = partial_add(history)
            if torn is not None:
                rule, shape, said = torn
                raise RuleViolation(rule, f"{CALLERS} callers {how}: {said}", shape=shape)
            popped_twice = _popped_twice(history)
            if popped_twice:
                raise RuleViolation(
                    "OASPOP-002",
                    f"{CALLERS} callers {how}: {popped_twice}",
                    shape="two racing pop_item calls returned one item",
                )
            raise RuleViolation(
                rule_id,
                f"{CALLERS} callers {how}: {verdict.message()}",
                shape=f"an outcome of callers {how} that no order of them gives",
            )
        if not isinstance(verdict, Undecided):
            judged += 1
    if judged == 0:
        raise NothingExercised(f"no history of callers {how} was decided before the run's cap")
    h.measure(f"{judged} rounds of {CALLERS} callers {how}")


def _popped_twice(history: Sequence[Recorded]) -> str:
    """Two pops of one session that returned the same item, in words ("" when none did).
    Every item the callers add is different, so one item popped twice is popped twice."""
    seen: dict[tuple[object, object], Recorded] = {}
    for recorded in history:
        if recorded.call.operation != "pop_item" or not isinstance(recorded.answer, Returned):
            continue
        item = recorded.answer.value
        if item is None:
            continue
        key = (recorded.call.arguments[0], item)
        if key in seen:
            return f"{seen[key]} and {recorded}: one item returned by both"
        seen[key] = recorded
    return ""


async def racing_pops(h: Harness) -> None:
    """OASPOP-002: pop_item calls made at once through Session objects of one session each return a different item."""
    rounds = max(1, h.profile.stateful_examples // 10)
    judged = 0
    for round_ in h.slice.within(range(rounds), f"rounds of racing pops (of {rounds})"):
        replies = [assistant(f"round {round_} reply {n}") for n in range(CALLERS)]
        fill = add("conv-3", *replies, handle=0)
        pops = [pop("conv-3", handle=c + 1) for c in range(CALLERS)]
        store = await _opener(h)(h.new_store())
        try:  # the same pops one after another are the sequential rules' to judge
            _, alone = await first_divergence(
                store, [fill, *pops, get("conv-3")], "pops one after another"
            )
        finally:
            await store.close()
        if alone is not None:
            raise alone
        store = await _opener(h)(h.new_store())
        try:
            await record_calls(OPENAI_SESSION_CONTRACT, store, [fill], 0)
            raced = await asyncio.gather(
                *(
                    record_calls(OPENAI_SESSION_CONTRACT, store, [p], n + 1)
                    for n, p in enumerate(pops)
                )
            )
            (left,) = await record_calls(OPENAI_SESSION_CONTRACT, store, [get("conv-3")], 0)
        finally:
            await store.close()
        history = [r for each in raced for r in each]
        twice = _popped_twice(history)
        if twice:
            raise RuleViolation(
                "OASPOP-002",
                f"{CALLERS} pops at once: {twice}",
                shape="two racing pop_item calls returned one item",
            )
        popped = [
            r.answer.value
            for r in history
            if isinstance(r.answer, Returned) and r.answer.value is not None
        ]
        remaining = left.answer.value if isinstance(left.answer, Returned) else None
        if isinstance(remaining, list) and sorted(map(str, popped + remaining)) != sorted(
            encoded(i) for i in replies
        ):
            raise RuleViolation(
                "OASPOP-002",
                f"{CALLERS} pops at once of a session of {CALLERS} items returned {popped!r} "
                f"and left {remaining!r}: an item removed without being returned, or returned and kept",
                shape="racing pop_item calls removed other items than they returned",
            )
        judged += 1
    if judged == 0:
        raise NothingExercised("no round of racing pops was made before the run's cap")
    h.measure(f"{judged} rounds of {CALLERS} pops at once")


async def callers_at_once(h: Harness) -> None:
    """OASMP-001: turns of one conversation made at once through Session objects of one store have the outcome of some order."""

    async def at_once(round_: int) -> list[Recorded]:
        history, _ = await _round_in_one_process(h, round_, at_once=True)
        return history

    rounds = max(1, h.profile.stateful_examples // 10)
    await _judge_callers(h, "OASMP-001", rounds, "at once in one process", at_once)


async def callers_in_processes(h: Harness) -> None:
    """OASMP-002: turns of one conversation made at once by processes with Session objects of one store lose nothing."""

    async def in_processes(round_: int) -> list[Recorded]:
        return await _round_in_processes(h, round_)

    await _judge_callers(
        h, "OASMP-002", h.profile.process_rounds, "each in a process of its own", in_processes
    )


# -- crashes ----------------------------------------------------------------------------------------

WRITER_PROGRAM: Final[tuple[Call, ...]] = (
    add("conv-1", user("hello"), assistant("hi, how can I help?")),
    add("conv-1", tool_call("c1"), tool_output("c1", "42"), assistant("it is 42")),
    add("conv-2", user("another conversation")),
    pop("conv-1"),
    clear("conv-2"),
    add("conv-1", user("thanks")),
)
"""What the crashed writer does: turns of two conversations, a pop and a clear. Its
values are JSON's: the program reaches the worker process as JSON."""


CAUSES: Final = frozenset({"OASADD-002"})
"""What a crash's history may be named by instead of the crash's rule: an add_items
kept in part is the same defect whether a refusal, a kill or a power loss cut it."""


async def _without_faults(h: Harness, program: Sequence[Call]) -> None:
    """``program`` once made and read back in this process with no fault: what the calls
    do then is the sequential rules' to judge (raised as found), so that only what a
    crash left, and the calls alone do not give, is the crash's rule's."""
    store = await _opener(h)(h.new_store())
    try:
        _, found = await first_divergence(
            store, [*program, *readback(program)], "the calls without a fault"
        )
    finally:
        await store.close()
    if found is not None:
        raise found


async def _writer_program(h: Harness) -> Sequence[Call]:
    """`WRITER_PROGRAM`, judged first without a fault (`_without_faults`)."""
    await _without_faults(h, WRITER_PROGRAM)
    return WRITER_PROGRAM


async def writer_killed_at_each_call(h: Harness) -> None:
    """OASKILL-001: a writer killed after each of its file-changing system calls leaves an order's prefix, each call whole."""
    await killed_writer(
        h, CONTRACT_REF, lambda: _writer_program(h), "OASKILL-001", what="the store", causes=CAUSES
    )


async def power_loss_at_each_operation(h: Harness) -> None:
    """OASPOWER-001: after a power loss at any point of a traced writer, every answered call reads back whole."""
    await power_cut_writer(
        h, CONTRACT_REF, lambda: _writer_program(h), "OASPOWER-001", what="the store", causes=CAUSES
    )


# -- the server killed, its connections cut, its host power-cut ----------------------------------


async def server_killed(h: Harness) -> None:
    """OASSRV-001: the session store's PostgreSQL server killed at a moment of its calls and started again keeps every answered call."""
    await servers.server_killed(
        h, OPENAI_SESSION_CONTRACT, await _writer_program(h), "OASSRV-001", what="the session store"
    )


async def connections_cut(h: Harness) -> None:
    """OASSRV-002: a session store whose connections to its server are cut at any byte keeps every answered call and halves none."""
    await servers.connections_cut(
        h, OPENAI_SESSION_CONTRACT, await _writer_program(h), "OASSRV-002", what="the session store"
    )


async def server_power_cut(h: Harness) -> None:
    """OASSRV-003: a power cut of the session store's PostgreSQL server's host at any point of its calls keeps every answered call."""
    await servers.server_power_cut(
        h,
        OPENAI_SESSION_CONTRACT,
        CONTRACT_REF,
        await _writer_program(h),
        "OASSRV-003",
        what="the session store",
    )


CHECKS: tuple[Check, ...] = (
    *(_scenario_check(s) for s in SCENARIOS),
    check("OASADD-002")(refused_add_adds_nothing),
    check(*MACHINE_RULES, kind="model")(model_based),
    check("OASPOP-002", kind="processes")(racing_pops),
    check("OASMP-001", "OASPOP-002", kind="processes")(callers_at_once),
    check(
        "OASMP-002",
        "OASPOP-002",
        kind="processes",
        replay_note="how the processes' calls interleave",
    )(callers_in_processes),
    check("OASKILL-001", kind="crash", replay_note="a kill at a moment of a real process")(
        writer_killed_at_each_call
    ),
    check("OASPOWER-001", kind="crash", replay_note="the system calls a real process made")(
        power_loss_at_each_operation
    ),
    check("OASSRV-001", kind="crash", replay_note="where in the server's work a kill lands")(
        server_killed
    ),
    check("OASSRV-002", kind="stress", replay_note="which call a cut lands in")(connections_cut),
    check("OASSRV-003", kind="crash", replay_note="the system calls a real server made")(
        server_power_cut
    ),
)
"""The openai_session suite, scenarios first, then the machine, the callers at once the crashes and the servers."""
