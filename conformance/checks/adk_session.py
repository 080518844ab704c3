"""The adk_session suite: an ADK ``BaseSessionService`` against its contract.

Each check names the rule it verifies first:

- **scenarios**, one or more per rule: a conversation's calls written out
  (`Scenario`), made on a fresh service and judged call by call against the model
  (`checkpointspec.spec.adk_session`), so that every rule is exercised on every run
  whatever the search draws;
- **generated ids** (`generated_ids_are_distinct`): sessions created without an id;
- the **model-based machine** (`model_based`): random sequences of the five calls on
  apps, users and sessions whose names differ only in case, a separator or Unicode
  normalisation, appends through session objects callers hold, shrunk to the fewest
  calls that still diverge;
- **callers at once** (`callers_at_once`, `callers_in_processes`): callers each reading
  a session and appending through what they read, on one shared session and one of
  their own, in one process or each in a process of its own, judged by the
  linearizability checker (a persistent service refuses all but one of the appends
  made through objects of one reading: ADKSTALE-001, which `racing_appends` checks
  with every read made before any append);
- **crashes** (`writer_killed_at_each_call`, `power_loss_at_each_operation`): a
  conversation's calls made by a writer killed right after each system call that
  changes a file under the store, or traced and rebuilt after a power loss.
- **servers** (`server_killed`, `connections_cut`, `server_power_cut`): for a service
  that takes its server from the ``dsn`` option, the same calls on a PostgreSQL
  cluster of the kit's own, its server killed, its connections cut, its host's power
  cut (`_contract_servers`).

A service declared durable is judged as a persistent one (stale appends refused,
`ADK_SESSION_CONTRACT`), any other as ``InMemorySessionService`` behaves
(`ADK_SESSION_CONTRACT_IN_MEMORY`). A check needing what the service does not have
(data in files under its store's directory; a declaration) is skipped, saying so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ...spec import Capability
from ...spec.adk_session import AdkState
from ..engines.contract.adk_session import (
    ADK_SESSION_CONTRACT,
    ADK_SESSION_CONTRACT_IN_MEMORY,
    APPS,
    SESSION_IDS,
    USERS,
    ServiceHandle,
    event_id,
    readback,
    torn_read,
)
from ..engines.contract.contract import Call, Contract, Returned
from ..engines.contract.violations import RuleViolation
from ..engines.history.linearizable import Diverged, Recorded, Undecided, check_linearizable
from ..engines.machines.contract import contract_machine
from ..engines.processes.contract_programs import record_calls
from ..engines.processes.contract_worker import run_programs_in_processes
from ..engines.run.harness import Harness, NothingExercised
from ..engines.search.stateful import run_machine
from . import _contract_servers as servers
from ._contract_crashes import killed_writer, power_cut_writer
from .base import Check, check

__all__ = ["CHECKS", "SCENARIOS", "Scenario", "first_divergence"]

_MODULE: Final = "checkpointspec.conformance.engines.contract.adk_session"


def contract_of(h: Harness) -> Contract[ServiceHandle, AdkState]:
    """The contract the service is judged by: a persistent service's when it is declared
    durable, ``InMemorySessionService``'s otherwise."""
    return ADK_SESSION_CONTRACT if h.has(Capability.DURABLE) else ADK_SESSION_CONTRACT_IN_MEMORY


def _contract_ref(h: Harness) -> str:
    name = "ADK_SESSION_CONTRACT" if h.has(Capability.DURABLE) else "ADK_SESSION_CONTRACT_IN_MEMORY"
    return f"{_MODULE}:{name}"


def _opener(h: Harness) -> Callable[[Path], Awaitable[ServiceHandle]]:
    """How this check opens a service on a directory: the run's factory, given that
    directory's `BackendContext`, adapted by the contract."""
    target = h.target
    factory = target.factory()
    contract = contract_of(h)
    return lambda path: contract.open_store(factory, target.context(path))


# -- calls, written as a reader reads them -------------------------------------------------

APP, USER, SID = "app", "u1", "s1"


def create(
    sid: str = SID, state: dict[str, object] | None = None, *, app: str = APP, user: str = USER
) -> Call:
    return Call("create_session", (app, user, sid, state or {}))


def get(
    sid: str = SID,
    *,
    app: str = APP,
    user: str = USER,
    handle: int | None = None,
    recent: int | None = None,
    after: int | None = None,
) -> Call:
    return Call("get_session", (app, user, sid, handle, recent, after))


def listed(app: str = APP, user: str | None = USER) -> Call:
    return Call("list_sessions", (app, user))


def delete(sid: str = SID, *, app: str = APP, user: str = USER) -> Call:
    return Call("delete_session", (app, user, sid))


def event(
    number: int,
    text: str,
    delta: dict[str, object] | None = None,
    *,
    author: str = "user",
    invocation: str = "inv-1",
) -> dict[str, object]:
    return {
        "id": event_id(number),
        "author": author,
        "invocation_id": invocation,
        "text": text,
        "state_delta": delta or {},
    }


def append(
    sid: str,
    made: dict[str, object],
    *,
    app: str = APP,
    user: str = USER,
    handle: int | None = None,
) -> Call:
    return Call("append_event", (app, user, sid, handle, made))


@dataclass(frozen=True)
class Scenario:
    """A conversation's calls written out, judged call by call against the model."""

    rule: str
    name: str
    summary: str
    calls: tuple[Call, ...]


async def first_divergence(
    contract: Contract[ServiceHandle, AdkState],
    store: ServiceHandle,
    calls: Sequence[Call],
    where: str,
    *,
    process: int = 0,
) -> tuple[list[Recorded], RuleViolation | None]:
    """Make ``calls`` on ``store`` one after another beside ``contract``'s model, until
    the first whose answer the model does not give: the calls recorded, and that answer
    as the finding of the rule it breaks (``where`` says what the calls were; None if
    every answer is the model's), after the contract's second look (`Contract.confirm`)."""
    state, history = contract.initial(), []
    for call in calls:
        (recorded,) = await record_calls(contract, store, [call], process)
        history.append(recorded)
        after, expected = contract.step(state, call)
        if recorded.answer != expected:
            rule = contract.judge(state, call, expected, recorded.answer)
            shape, said = "", f"{recorded}"
            if contract.describe is not None:
                shape, said = contract.describe(
                    state, call, expected, recorded.answer, recorded.raised
                )
            if contract.confirm is not None:  # a second look while the store is as it was
                looked = await contract.confirm(
                    store, state, call, expected, recorded.answer, recorded.raised
                )
                if looked is not None:
                    rule, shape, said = looked
            return history, RuleViolation(rule, f"{where}: {call} {said}", shape=shape)
        state = after
    return history, None


async def play(h: Harness, scenario: Scenario) -> None:
    """Make ``scenario``'s calls on a fresh service beside the model; the first answer the
    model does not give is a `RuleViolation` of the rule it breaks."""
    store = await _opener(h)(h.new_store())
    contract = contract_of(h)
    try:
        _, found = await first_divergence(contract, store, scenario.calls, scenario.name)
    finally:
        await contract.close(store)
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
    "sum": 0.1 + 0.2,
    "whole float": 1.0,
    "large float": 1e16,
    "negative zero": -0.0,
    "flag": False,
    "none": None,
    "nested": {"list": [1, 2.5, "x", None, [True]], "object": {"k": {"deep": "v"}}},
}
"""One value of every kind a state holds, each a way a service's encoding can change it."""

CONFUSABLE_NAMES: Final[tuple[tuple[str, str, str], ...]] = (
    *((APP, USER, sid) for sid in SESSION_IDS),
    *((APP, user, SID) for user in USERS[1:]),
    *((app, USER, SID) for app in APPS[1:]),
    (APP, USER, "s%3A1"),
    (APP, USER, "x" * 128),
)
"""Sessions whose names differ from another's only in case, a separator or Unicode
normalisation, an escaped separator, and the longest id ADK's own database schema
takes (128 characters: a store may refuse a longer one, which is no breach)."""

SCENARIOS: Final[tuple[Scenario, ...]] = (
    Scenario(
        "ADKCREATE-001",
        "create_session_makes_the_session_once",
        "a session is created with its state by scope, then its id is refused",
        (
            get(),
            create(SID, {"topic": "weather", "app:theme": "dark", "user:lang": "fr", "temp:x": 1}),
            get(),
            create(SID, {"topic": "overwritten"}),
            get(),
            create("s2"),
            get("s2"),
            listed(),
        ),
    ),
    Scenario(
        "ADKAPPEND-001",
        "appended_events_are_kept_in_order",
        "events appended read back in order; an append to a missing session is refused",
        (
            create(),
            append(SID, event(1, "hello")),
            append(SID, event(2, "hi, how can I help?", author="agent")),
            get(),
            append("missing", event(3, "to nowhere")),
            get("missing"),
            append(SID, event(4, "thanks")),
            get(),
        ),
    ),
    Scenario(
        "ADKGET-001",
        "get_session_returns_every_event_in_order",
        "get_session returns every event, each once, oldest first, beside other sessions",
        (
            create(),
            create("s2"),
            *(append(SID if n % 3 else "s2", event(n, f"turn {n}")) for n in range(1, 13)),
            get(),
            get("s2"),
        ),
    ),
    Scenario(
        "ADKGET-002",
        "get_session_filters_return_the_latest",
        "num_recent_events and after_timestamp return the latest events asked for",
        (
            create(),
            *(append(SID, event(n, f"turn {n}")) for n in range(1, 6)),
            get(recent=1),
            get(recent=3),
            get(recent=0),
            get(recent=8),
            get(after=3),
            get(after=3, recent=1),
            get(after=9),
        ),
    ),
    Scenario(
        "ADKITEM-001",
        "events_and_state_come_back_exactly",
        "values of every kind read back exactly, in an event's delta and in the state",
        (
            create(SID, {f"v {k}": v for k, v in EXACT_VALUES.items()}),
            get(),
            append(SID, event(1, " \t edges \n", {f"e {k}": v for k, v in EXACT_VALUES.items()})),
            append(
                SID,
                event(
                    2, "naïve — 中文 \u2028 emoji \U0001f600", {"app:x": 0.1 + 0.2, "user:y": -0.0}
                ),
            ),
            get(),
        ),
    ),
    Scenario(
        "ADKSTATE-001",
        "state_deltas_apply_by_scope",
        "app:, user:, temp: and session keys reach the sessions their scope names",
        (
            create(SID, {"app:a": 1, "user:u": 1, "own": 1}),
            create("s2", {"own": 2}),
            create(SID, {"own": 3}, user="u2"),
            append(SID, event(1, "set", {"app:a": 2, "user:u": 2, "own": 4, "temp:t": 5})),
            get(),
            get("s2"),
            get(SID, user="u2"),
            create("s3", {"user:u": 9}, user="u2"),
            get(SID),
            get(SID, user="u2"),
            create(SID, {}, app="other"),
            get(SID, app="other"),
        ),
    ),
    Scenario(
        "ADKLIST-001",
        "list_sessions_lists_each_session_once",
        "each session of the app and user is listed once, of every user with no user",
        (
            listed(),
            create(SID),
            create("s2"),
            create(SID, user="u2"),
            create(SID, app="other"),
            listed(),
            listed(user=None),
            listed("other", None),
            delete("s2"),
            listed(),
        ),
    ),
    Scenario(
        "ADKDEL-001",
        "delete_session_deletes_only_its_session",
        "a deleted session reads None, is not listed, takes no append and starts again empty",
        (
            create(SID, {"own": 1, "app:a": 1, "user:u": 1}),
            create("s2", {"own": 2}),
            append(SID, event(1, "first")),
            append("s2", event(2, "other")),
            delete(),
            get(),
            listed(),
            append(SID, event(3, "after delete")),
            get("s2"),
            create(SID),
            get(),
            delete("never-created"),
            get("s2"),
        ),
    ),
    Scenario(
        "ADKISO-001",
        "resembling_names_are_apart",
        "apps, users and sessions differing in case, separator or normalisation are apart",
        tuple(
            create(sid, {"own": n, "user:u": n}, app=app, user=user)
            for n, (app, user, sid) in enumerate(CONFUSABLE_NAMES)
        )
        + tuple(
            append(sid, event(n + 1, f"only in {n}"), app=app, user=user)
            for n, (app, user, sid) in enumerate(CONFUSABLE_NAMES)
        )
        + tuple(get(sid, app=app, user=user) for app, user, sid in CONFUSABLE_NAMES)
        + (
            delete("S1"),
            get(SID),
            listed(),
            listed(APP, "U1"),
        ),
    ),
    Scenario(
        "ADKSTALE-001",
        "an_append_through_a_stale_object_is_refused",
        "of two objects read at once, the second to append is refused and stores nothing",
        (
            create(),
            get(handle=1),
            get(handle=2),
            append(SID, event(1, "first caller"), handle=1),
            append(SID, event(2, "second caller", {"own": "lost?"}), handle=2),
            get(),
            get(handle=2),
            append(SID, event(3, "second caller again"), handle=2),
            get(),
        ),
    ),
)
"""Every scenario, in the catalog's order of rules."""


async def generated_ids_are_distinct(h: Harness) -> None:
    """ADKCREATE-002: sessions created without a session_id each get an id no other session has."""
    contract = contract_of(h)
    store = await _opener(h)(h.new_store())
    count = 20
    try:
        ids = []
        for _ in range(count):
            made = await store.service.create_session(app_name=APP, user_id=USER)  # type: ignore[attr-defined]
            ids.append(str(made.id))
        listed_ids = await store.service.list_sessions(app_name=APP, user_id=USER)  # type: ignore[attr-defined]
        stored = sorted(str(s.id) for s in listed_ids.sessions)
    finally:
        await contract.close(store)
    if len(set(ids)) != count or stored != sorted(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise RuleViolation(
            "ADKCREATE-002",
            f"{count} create_session calls without a session_id returned the ids {ids!r} "
            f"(given twice: {twice!r}) and list_sessions then listed {stored!r}",
            shape="sessions created without an id share an id",
        )
    h.measure(f"{count} sessions created without an id, each its own")


# -- the model-based machine ------------------------------------------------------------------

MACHINE_RULES: Final[tuple[str, ...]] = (
    "ADKGET-001",
    "ADKCREATE-001",
    "ADKAPPEND-001",
    "ADKGET-002",
    "ADKITEM-001",
    "ADKSTATE-001",
    "ADKLIST-001",
    "ADKDEL-001",
    "ADKISO-001",
)
"""The rules the machine judges: every rule of the calls one at a time."""


def model_based(h: Harness) -> None:
    """ADKGET-001: random sequences of the five calls, on resembling names through held session objects, agree with the model."""
    machine = contract_machine(
        contract_of(h), _opener(h), h.root, keep_stores=h.run.probe.external_storage
    )
    run_machine(h, machine, examples=h.profile.stateful_examples, steps=h.profile.stateful_steps)


# -- callers at once -------------------------------------------------------------------------------

CALLERS: Final = 4


def _turns(round_: int) -> tuple[list[Call], list[list[Call]]]:
    """What the callers do: the shared session and one per caller created, then per
    caller a turn on the shared session through what it read, a turn on its own
    session, and reads. Event numbers are the round's, each caller's apart, and so are
    the handles of the objects each holds: the model's handles name one object each,
    whichever caller or process holds it."""
    base_number = round_ * 100
    base = [create(SID, {"user:turns": 0}), *(create(f"own-{c}") for c in range(CALLERS))]
    per_caller = [
        [
            get(SID, handle=c + 1),
            append(
                SID,
                event(base_number + 10 * c + 1, f"caller {c} asks", {"last": c, "app:seen": c}),
                handle=c + 1,
            ),
            get(f"own-{c}", handle=CALLERS + c + 1),
            append(
                f"own-{c}",
                event(base_number + 10 * c + 2, f"caller {c} alone"),
                handle=CALLERS + c + 1,
            ),
            get(f"own-{c}"),
            listed(),
        ]
        for c in range(CALLERS)
    ]
    return base, per_caller


FINAL_READS: Final[tuple[Call, ...]] = (
    get(SID),
    *(get(f"own-{c}") for c in range(CALLERS)),
    listed(),
)
"""What is read once the callers are done: every session they used, whole, and the list."""


async def _round_in_one_process(h: Harness, round_: int) -> list[Recorded]:
    contract = contract_of(h)
    store = await _opener(h)(h.new_store())
    base, programs = _turns(round_)
    try:
        history = await record_calls(contract, store, base, process=0)
        histories = await asyncio.gather(
            *(record_calls(contract, store, calls, p + 1) for p, calls in enumerate(programs))
        )
        history += [r for each in histories for r in each]
        history += await record_calls(contract, store, FINAL_READS, 0)
    finally:
        await contract.close(store)
    return history


async def _round_in_processes(h: Harness, round_: int) -> list[Recorded]:
    contract = contract_of(h)
    base, programs = _turns(round_)
    path = h.new_store()
    store = await _opener(h)(path)
    try:
        history = await record_calls(contract, store, base, len(programs))
    finally:
        await contract.close(store)
    # Each caller's read of the shared session first, in every process; then, told to
    # go at once, the rest, its append through what it read first: the appends race
    # across processes as `_racing_appends` makes them race in one.
    history += await run_programs_in_processes(
        _contract_ref(h),
        h.target,
        path,
        [program[:1] for program in programs],
        then=[program[1:] for program in programs],
    )
    store = await _opener(h)(path)
    try:
        return history + await record_calls(contract, store, FINAL_READS, len(programs))
    finally:
        await contract.close(store)


async def _racing_appends(h: Harness, round_: int) -> tuple[str, int]:
    """Callers each read a session, every read done before any append, then append
    through what they read, all at once: a persistent service stores one of them and
    refuses the others as stale. What was stored more than that, in words ("" when
    nothing was), and how many appends were stored."""
    contract = contract_of(h)
    store = await _opener(h)(h.new_store())
    first = round_ * 100 + 1
    try:
        await record_calls(contract, store, [create(SID)], 0)
        for c in range(CALLERS):
            await record_calls(contract, store, [get(SID, handle=c + 1)], c + 1)
        raced = await asyncio.gather(
            *(
                record_calls(
                    contract,
                    store,
                    [append(SID, event(first + c, f"caller {c} at once"), handle=c + 1)],
                    c + 1,
                )
                for c in range(CALLERS)
            )
        )
        (final,) = await record_calls(contract, store, [get(SID)], 0)
    finally:
        await contract.close(store)
    appends = [r for each in raced for r in each]
    stored = [r for r in appends if isinstance(r.answer, Returned)]
    if len(stored) <= 1:
        return "", len(stored)
    kept = final.answer.value if isinstance(final.answer, Returned) else None
    events = len(kept["events"]) if isinstance(kept, dict) else "no"
    return (
        f"{CALLERS} callers read {SID!r}, every read before any append, then appended through "
        f"what they read at once: {len(stored)} appends were stored ({'; '.join(map(str, stored))}) "
        f"and the session then held {events} events, where a persistent service stores one "
        "and refuses the others as stale"
    ), len(stored)


async def racing_appends(h: Harness) -> None:
    """ADKSTALE-001: of appends made at once through objects of one reading, one is stored and the others refused as stale."""
    rounds = max(1, h.profile.stateful_examples // 10)
    judged = 0
    for round_ in h.slice.within(range(rounds), f"rounds of racing appends (of {rounds})"):
        twice, stored = await _racing_appends(h, round_)
        if twice:
            raise RuleViolation(
                "ADKSTALE-001", twice, shape="appends through objects of one reading all stored"
            )
        if stored == 0:
            raise RuleViolation(
                "ADKAPPEND-001",
                f"{CALLERS} appends made at once through objects of one reading of {SID!r} "
                "were all refused: none was made before the others, so one of them is current",
                shape="racing appends through objects of one reading all refused",
            )
        judged += 1
    if judged == 0:
        raise NothingExercised("no round of racing appends was made before the run's cap")
    h.measure(f"{judged} rounds of {CALLERS} appends at once through objects of one reading")


async def _judge_callers(
    h: Harness,
    rule_id: str,
    rounds: int,
    how: str,
    at_once: Callable[[int], Awaitable[list[Recorded]]],
) -> None:
    """``rounds`` rounds of the callers, made ``how`` by ``at_once``, each judged by the
    linearizability checker. Appends through objects of one reading all stored is
    ADKSTALE-001's on a persistent service; anything else no order explains is
    ``rule_id``'s."""
    contract = contract_of(h)
    judged = 0
    for round_ in h.slice.within(range(rounds), f"rounds of callers {how} (of {rounds})"):
        history = await at_once(round_)
        verdict = check_linearizable(contract, history)
        if isinstance(verdict, Diverged):
            # A stale check that lets racing appends through is the likeliest cause of an
            # outcome no order gives, and one the history cannot show by itself: the
            # same appends are raced again with every read done first.
            twice = (await _racing_appends(h, round_))[0] if h.has(Capability.DURABLE) else ""
            if twice:
                raise RuleViolation(
                    "ADKSTALE-001",
                    f"{CALLERS} callers {how} gave an outcome no order of them gives "
                    f"({verdict.message()}); {twice}",
                    shape="appends through objects of one reading all stored",
                )
            torn = torn_read(history)
            if torn is not None:
                shape, said = torn
                raise RuleViolation(rule_id, f"{CALLERS} callers {how}: {said}", shape=shape)
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


async def callers_at_once(h: Harness) -> None:
    """ADKMP-001: callers appending at once through what they read, in one process, have the outcome of some order."""

    async def at_once(round_: int) -> list[Recorded]:
        return await _round_in_one_process(h, round_)

    rounds = max(1, h.profile.stateful_examples // 10)
    await _judge_callers(h, "ADKMP-001", rounds, "at once in one process", at_once)


async def callers_in_processes(h: Harness) -> None:
    """ADKMP-002: callers appending at once through what they read, each in a process of its own, lose nothing."""

    async def in_processes(round_: int) -> list[Recorded]:
        return await _round_in_processes(h, round_)

    # As many rounds as callers in one process: a stale check that is one process's
    # lock only lets appends through when they overlap, which on a busy machine
    # (processes run one after another) a round may not give.
    rounds = max(h.profile.process_rounds, h.profile.stateful_examples // 10)
    await _judge_callers(h, "ADKMP-002", rounds, "each in a process of its own", in_processes)


# -- crashes ----------------------------------------------------------------------------------------

WRITER_PROGRAM: Final[tuple[Call, ...]] = (
    create(SID, {"topic": "weather", "app:theme": "dark"}),
    append(SID, event(1, "hello", {"user:name": "Ada"})),
    append(SID, event(2, "hi, how can I help?", {"turns": 1}, author="agent")),
    create("s2"),
    append("s2", event(3, "another conversation")),
    delete("s2"),
    append(SID, event(4, "thanks", {"turns": 2, "app:theme": "light"})),
)
"""What the crashed writer does: two conversations with state of every scope, a delete."""


async def _writer_program(h: Harness) -> Sequence[Call]:
    """`WRITER_PROGRAM`, judged first without a fault: what the calls do then is the
    sequential rules' to judge (raised as found), so that only what a crash left is
    the crash's rule's."""
    contract = contract_of(h)
    store = await _opener(h)(h.new_store())
    try:
        _, found = await first_divergence(
            contract,
            store,
            [*WRITER_PROGRAM, *readback(WRITER_PROGRAM)],
            "the calls without a fault",
        )
    finally:
        await contract.close(store)
    if found is not None:
        raise found
    return WRITER_PROGRAM


async def writer_killed_at_each_call(h: Harness) -> None:
    """ADKKILL-001: a writer killed after each of its file-changing system calls leaves an order's prefix, each call whole."""
    await killed_writer(
        h, _contract_ref(h), lambda: _writer_program(h), "ADKKILL-001", what="the service"
    )


async def power_loss_at_each_operation(h: Harness) -> None:
    """ADKPOWER-001: after a power loss at any point of a traced writer, every answered call reads back whole."""
    await power_cut_writer(
        h, _contract_ref(h), lambda: _writer_program(h), "ADKPOWER-001", what="the service"
    )


# -- the server killed, its connections cut, its host power-cut ----------------------------------


async def server_killed(h: Harness) -> None:
    """ADKSRV-001: the session service's PostgreSQL server killed at a moment of its calls and started again keeps every answered call."""
    await servers.server_killed(
        h, contract_of(h), await _writer_program(h), "ADKSRV-001", what="the session service"
    )


async def connections_cut(h: Harness) -> None:
    """ADKSRV-002: a session service whose connections to its server are cut at any byte keeps every answered call and halves none."""
    await servers.connections_cut(
        h, contract_of(h), await _writer_program(h), "ADKSRV-002", what="the session service"
    )


async def server_power_cut(h: Harness) -> None:
    """ADKSRV-003: a power cut of the session service's PostgreSQL server's host at any point of its calls keeps every answered call."""
    await servers.server_power_cut(
        h,
        contract_of(h),
        _contract_ref(h),
        await _writer_program(h),
        "ADKSRV-003",
        what="the session service",
    )


CHECKS: tuple[Check, ...] = (
    *(_scenario_check(s) for s in SCENARIOS),
    check("ADKCREATE-002")(generated_ids_are_distinct),
    check(*MACHINE_RULES, kind="model")(model_based),
    check("ADKSTALE-001", kind="processes")(racing_appends),
    check("ADKMP-001", "ADKSTALE-001", kind="processes")(callers_at_once),
    check(
        "ADKMP-002",
        "ADKSTALE-001",
        kind="processes",
        replay_note="how the processes' calls interleave",
    )(callers_in_processes),
    check("ADKKILL-001", kind="crash", replay_note="a kill at a moment of a real process")(
        writer_killed_at_each_call
    ),
    check("ADKPOWER-001", kind="crash", replay_note="the system calls a real process made")(
        power_loss_at_each_operation
    ),
    check("ADKSRV-001", kind="crash", replay_note="where in the server's work a kill lands")(
        server_killed
    ),
    check("ADKSRV-002", kind="stress", replay_note="which call a cut lands in")(connections_cut),
    check("ADKSRV-003", kind="crash", replay_note="the system calls a real server made")(
        server_power_cut
    ),
)
"""The adk_session suite, scenarios first, then the machine, the callers at once the crashes and the servers."""
