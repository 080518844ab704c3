"""The checkpointer contract as a `Contract` value, for the generic engines.

The checkpointer contract (`checkpointspec.spec`: its rules, `SpecModel`) has
engines of its own that know more of it than a generic engine can: which handle
wrote an event, which rule an event's presence breaks (`ledger`), list order by
modification time. This value states the same contract the way every other
contract is stated, so that the generic engines run it too: the model-based
machine of any contract (`checkpointspec.conformance.engines.machines.contract`),
concurrent programs judged by the linearizability checker, writers killed and
power lost at every system call. It is the first contract value; a store
interface of another agent framework is another one beside it.

Calls carry plain data: an append's events are user prompts with the given
texts, a read answers ``(seq, parent_seq, text)`` triples, a listing the ids in
sorted order (its order is the checkpointer machine's to judge). The model's
state is a `SpecModel` behind a hashable key (`ModelState`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import msgspec
from hypothesis import strategies as st

from ....spec import (
    RULES,
    Capability,
    Checkpointer,
    CheckpointError,
    ModelEvent,
    SpecModel,
    StoredEvent,
    UserPrompt,
)
from ....spec.divergences import of_read
from .contract import Answer, Call, Contract, JSONArgs, Operation, Raised, Returned, plain
from .outcomes import PRIMARY_RULE, rule_for_expected_error

__all__ = ["ModelState", "checkpointer_contract"]

SESSIONS = ("s1", "s2")
"""The session ids calls are drawn from: few, so that logs grow and calls collide."""


class ModelState:
    """A `SpecModel`, hashable by what decides the answers: the logs and generations."""

    __slots__ = ("key", "model")

    def __init__(self, model: SpecModel) -> None:
        self.model = model
        logs = tuple(
            (sid, msgspec.json.encode(model.log(sid))) for sid in sorted(model.session_ids())
        )
        generations = (
            tuple((sid, model.generation(sid)) for sid in SESSIONS)
            if Capability.GENERATION in model.capabilities
            else ()
        )
        self.key = (logs, generations)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelState) and other.key == self.key


def _rows(events: Sequence[StoredEvent | ModelEvent]) -> list[tuple[int, int | None, str]]:
    """A read as plain data: ``(seq, parent_seq, text)`` for each event."""
    return [
        (e.seq, e.parent_seq, e.event.text if isinstance(e.event, UserPrompt) else repr(e.event))
        for e in events
    ]


def _on_model(model: SpecModel, call: Call) -> object:
    args = call.arguments
    sid = str(args[0]) if args else ""
    if call.operation == "append":
        texts, expected = args[1], args[2]
        assert isinstance(texts, list | tuple)
        return model.append(sid, [UserPrompt(str(t)) for t in texts], expected)
    if call.operation == "read":
        return _rows(model.read(sid, args[1]))
    if call.operation == "head":
        return model.head(sid)
    if call.operation == "list_sessions":
        return sorted(model.session_ids())
    if call.operation == "delete":
        model.delete(sid)
        return None
    return model.truncate(sid, args[1], args[2])


def _step(state: ModelState, call: Call) -> tuple[ModelState, Answer]:
    model = state.model.copy()
    try:
        value = _on_model(model, call)
    except CheckpointError as refused:
        return state, Raised(type(refused).__name__)
    return ModelState(model), Returned(plain(value))


def _judge(state: ModelState, call: Call, expected: Answer, actual: Answer | None) -> str:
    """The rule a store's different answer breaks: the rule requiring the model's
    refusal, or the rule of what the operation returns."""
    if isinstance(expected, Raised):
        try:
            _on_model(state.model.copy(), call)
        except CheckpointError as refused:
            return rule_for_expected_error(call.operation, refused)
    if call.operation == "append" and isinstance(actual, Returned):
        return "SEQ-003"
    if call.operation == "append" and isinstance(actual, Raised):
        return "APPEND-002"
    if call.operation == "read" and isinstance(actual, Returned):
        return _read_rule(call, expected, actual)
    return PRIMARY_RULE[call.operation]


def _rows_of(answer: Answer) -> list[tuple[object, ...]]:
    value = answer.value if isinstance(answer, Returned) else None
    if not isinstance(value, list):
        return []
    return [tuple(row) for row in value if isinstance(row, list | tuple)]


def _events(rows: Sequence[tuple[object, ...]], sid: str) -> list[StoredEvent]:
    """A read's plain rows as the events they stand for (no timestamps: not judged here)."""
    return [
        StoredEvent(seq=seq, session_id=sid, parent_seq=parent, ts="", event=UserPrompt(str(text)))
        for seq, parent, text, *_ in rows
        if isinstance(seq, int) and (parent is None or isinstance(parent, int))
    ]


def _read_rule(call: Call, expected: Answer, actual: Returned) -> str:
    """For a read whose events differ from the model's: the rule the table of
    divergences names (`checkpointspec.spec.divergences.of_read`)."""
    sid, since = str(call.arguments[0]), call.arguments[1]
    want = [
        ModelEvent(e.seq, e.session_id, e.parent_seq, e.event)
        for e in _events(_rows_of(expected), sid)
    ]
    divergence = of_read(
        since if isinstance(since, int) else 0, _events(_rows_of(actual), sid), want
    )
    return divergence.rule if divergence is not None else "READ-001"


async def _append(cp: Checkpointer, args: JSONArgs) -> object:
    sid, texts, expected = args
    assert isinstance(texts, list | tuple)
    return await cp.append(str(sid), [UserPrompt(str(t)) for t in texts], expected)  # type: ignore[arg-type]


async def _read(cp: Checkpointer, args: JSONArgs) -> object:
    sid, since = args
    return _rows([event async for event in cp.read(str(sid), since)])  # type: ignore[arg-type]


async def _head(cp: Checkpointer, args: JSONArgs) -> object:
    return await cp.head(str(args[0]))


async def _list(cp: Checkpointer, args: JSONArgs) -> object:
    return sorted(info.id for info in await cp.list_sessions())


async def _delete(cp: Checkpointer, args: JSONArgs) -> object:
    await cp.delete(str(args[0]))
    return None


async def _truncate(cp: Checkpointer, args: JSONArgs) -> object:
    sid, to_seq, expected = args
    return await cp.truncate(str(sid), to_seq, expected)  # type: ignore[arg-type]


async def _close(cp: Checkpointer) -> None:
    await cp.close()


def _error_name(raised: BaseException) -> str | None:
    return type(raised).__name__ if isinstance(raised, CheckpointError) else None


_sid = st.sampled_from(SESSIONS)
_seq = st.integers(min_value=0, max_value=5)
_expected = st.none() | _seq
_texts: st.SearchStrategy[list[str]] = st.lists(
    st.sampled_from(["a", "b", "c "]), min_size=1, max_size=3
) | st.just([])


def checkpointer_contract(
    capabilities: frozenset[Capability],
) -> Contract[Checkpointer, ModelState]:
    """The checkpointer contract for a backend declaring ``capabilities``: its
    optional operations are drawn only when declared."""
    operations: list[Operation[Checkpointer]] = [
        Operation("append", st.tuples(_sid, _texts, _expected), _append),
        Operation("read", st.tuples(_sid, _seq), _read, writes=False),
        Operation("head", st.tuples(_sid), _head, writes=False),
    ]
    optional: list[tuple[Capability, Operation[Checkpointer]]] = [
        (Capability.LIST, Operation("list_sessions", st.just(()), _list, writes=False)),
        (Capability.DELETE, Operation("delete", st.tuples(_sid), _delete)),
        (Capability.TRUNCATE, Operation("truncate", st.tuples(_sid, _seq, _expected), _truncate)),
    ]
    operations += [op for needed, op in optional if needed in capabilities]
    initial: Callable[[], ModelState] = partial(_initial, frozenset(capabilities))
    return Contract(
        name="checkpointer",
        rules=RULES,
        initial=initial,
        step=_step,
        operations=tuple(operations),
        judge=_judge,
        error_name=_error_name,
        close=_close,
        # A listing sees every session: with one, a history is judged whole.
        key=None if Capability.LIST in capabilities else _session_of,
        readback=lambda calls: tuple(Call("read", (sid, 0)) for sid in SESSIONS),
    )


def _initial(capabilities: frozenset[Capability]) -> ModelState:
    return ModelState(SpecModel(capabilities))


def _session_of(call: Call) -> object:
    return call.arguments[0]
