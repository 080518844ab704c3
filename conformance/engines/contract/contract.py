"""A contract as a value: what the generic machines and the history checker take.

A contract says, for one store interface, everything the engines need to judge a
store of it and nothing about how they do it:

- its **rules** (`CatalogRule`: an id, a title, a statement), the only ids its
  findings may name;
- its **sequential model**: a pure transition ``step(state, call) -> (state,
  answer)`` from a hashable state, so that the history checker can try one state
  along several orders and remember the ones it has seen;
- its **operations** (`Operation`): a name, a Hypothesis strategy for the call's
  arguments, and how to make the call on an open store;
- how an **observation maps to a rule** (``judge``): given the model's state, a
  call, the answer the model gives and the answer the store gave, the rule the
  difference breaks;
- how an exception the store raised is named (``error_name``): a contract error
  is an answer like a value; anything else is not an answer the contract allows.

Nothing here does I/O or knows about a backend's package: a contract is handed
the store once it is open (`checkpointspec.conformance.engines.machines.contract`
opens it). The checkpointer contract of ``checkpointspec.spec`` is written against
its own machines today; a store interface of another agent framework is a value
of this type, and adding one adds modules, not changes to the machines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeAlias, TypeVar, cast

import msgspec
from hypothesis import strategies as st

from ....backends.stdio.wire import StdioProtocolError
from ....spec import BackendContext

__all__ = [
    "Answer",
    "Call",
    "CatalogRule",
    "Contract",
    "Operation",
    "Raised",
    "RecordedCall",
    "Returned",
    "answer_text",
    "plain",
]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)
JSONArgs: TypeAlias = tuple[object, ...]


class CatalogRule(Protocol):
    """What a contract's rule table holds: `checkpointspec.spec.Rule` is one."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def statement(self) -> str: ...


class Call(msgspec.Struct, frozen=True):
    """One call of an operation: its name and its arguments, plain data that a
    worker process can receive and a history can record."""

    operation: str
    arguments: JSONArgs = ()

    def __str__(self) -> str:
        return f"{self.operation}({', '.join(map(repr, self.arguments))})"


class Returned(msgspec.Struct, frozen=True, tag="returned"):
    """The call returned ``value``: plain data, as JSON has it (a tuple is a list), so
    that an answer compares the same made here, in another process or by the model."""

    value: object = None


class Raised(msgspec.Struct, frozen=True, tag="raised"):
    """The call raised the contract's error ``error`` (a name the contract gives it)."""

    error: str


Answer: TypeAlias = Returned | Raised


def plain(value: object) -> object:
    """``value`` as JSON has it (tuples become lists): how every answer is compared."""
    return msgspec.json.decode(msgspec.json.encode(value))


def answer_text(answer: Answer | None) -> str:
    """An answer in words: ``returned 3``, ``raised KeyMissing``, ``no answer``."""
    if answer is None:
        return "no answer"
    if isinstance(answer, Raised):
        return f"raised {answer.error}"
    return f"returned {answer.value!r}"


class RecordedCall(Protocol):
    """A call as a history records it (`checkpointspec.conformance.engines.history.
    linearizable.Recorded` is one): the call, and its answer (None: none came, or one
    the contract does not allow)."""

    @property
    def call(self) -> Call: ...

    @property
    def answer(self) -> Answer | None: ...


@dataclass(frozen=True)
class Operation(Generic[Store]):
    """One operation of a store interface.

    ``arguments`` draws the call's arguments (plain data, so that a failing run
    prints as steps a person can read and replay). ``call`` makes the call on an
    open store and returns its answer as plain data (what the model's answer is
    compared with). ``writes`` says whether the call may change the store: a
    write whose answer never came may have taken effect or not, a read whose
    answer never came is simply left out of a history.
    """

    name: str
    arguments: st.SearchStrategy[JSONArgs]
    call: Callable[[Store, JSONArgs], Awaitable[object]]
    writes: bool = True
    weight: int = 1


@dataclass(frozen=True)
class Contract(Generic[Store, State]):
    """A store interface's contract, as the generic engines take it.

    ``key`` splits a history into independent parts (a key of a register, a
    session of a log) that the history checker judges one at a time; a contract
    whose calls all touch one shared state leaves it None.
    """

    name: str
    rules: tuple[CatalogRule, ...]
    initial: Callable[[], State]
    step: Callable[[State, Call], tuple[State, Answer]]
    operations: tuple[Operation[Store], ...]
    judge: Callable[[State, Call, Answer, Answer | None], str]
    """The rule broken when ``call``, made on a store in the model's ``state``,
    answered the second answer (None: no answer the contract allows) where the
    model gives the first."""
    error_name: Callable[[BaseException], str | None]
    """The contract's name of an error the store raised; None for any other exception."""
    close: Callable[[Store], Awaitable[None]]
    key: Callable[[Call], Hashable] | None = None
    readback: Callable[[Sequence[Call]], tuple[Call, ...]] | None = None
    """The reads that observe everything the given calls may have changed (a get of
    every key they touched): what the crash checks ask of the store after its
    writer was killed. A contract without it is not checked for kills."""
    adapt: Callable[[object], Awaitable[Store]] | None = None
    """How the object a backend's factory returns becomes the store the operations
    call (a framework's store wrapped, its sync methods run in a thread); the
    object itself when None."""
    opens: Callable[[Callable[..., object], BackendContext], Awaitable[Store]] | None = None
    """How the store is opened from the backend's factory and a store's context, for an
    interface whose factory is not ``factory(ctx)`` (one object per session id, made
    when a call first names it); None: ``factory(ctx)``, awaited, then ``adapt``."""
    describe: Callable[[State, Call, Answer, Answer | None, str], tuple[str, str]] | None = None
    """What differs between the model's answer and the store's (the last argument the
    exception the store raised instead, or ""): a shape free of the example's values
    (what makes two findings one defect) and a sentence with them. None: the finding
    shows both answers whole."""
    confirm: (
        Callable[
            [Store, State, Call, Answer, Answer | None, str], Awaitable[tuple[str, str, str] | None]
        ]
        | None
    ) = None
    """A second look at the open store before a divergence is named: given the model's
    state, the call, the model's answer, the store's (None: no answer the contract
    allows) and what it raised, the rule, shape and sentence to name it by instead, or
    None to keep the judge's (a Session object answering from a stale copy is told from
    a store answering wrong by asking a fresh object the same)."""
    history_cause: Callable[[Sequence[RecordedCall]], tuple[str, str, str] | None] | None = None
    """A cause the whole history shows that no single answer names (an add of several
    items found in part): its rule, its shape and a sentence; None when it shows none.
    The history checker asks it before naming the first call no order explains."""
    prepare: Callable[[State, Call], Call | None] | None = None
    """The call to make, from a drawn one and the model's state (a framework's call
    built as the framework would build it there: a put continuing its parent's
    versions); None when the drawn call has nothing to act on in that state, and
    the machine skips it. Calls are made as drawn when this is None."""
    rules_by_id: Mapping[str, CatalogRule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {rule.id: rule for rule in self.rules}
        if len(by_id) != len(self.rules):
            raise ValueError(f"contract {self.name!r}: a rule id is used twice")
        names = [op.name for op in self.operations]
        if len(set(names)) != len(names):
            raise ValueError(f"contract {self.name!r}: an operation name is used twice")
        object.__setattr__(self, "rules_by_id", by_id)

    def operation(self, name: str) -> Operation[Store]:
        """The operation called ``name``; KeyError names the contract's operations."""
        for op in self.operations:
            if op.name == name:
                return op
        raise KeyError(f"contract {self.name!r} has no operation {name!r}: {self.names()}")

    async def open_store(self, factory: Callable[..., object], ctx: BackendContext) -> Store:
        """The store the operations call, opened through a backend's ``factory`` on ``ctx``."""
        if self.opens is not None:
            return await self.opens(factory, ctx)
        made = factory(ctx)
        if asyncio.iscoroutine(made):
            made = await made
        if self.adapt is not None:
            return await self.adapt(made)
        return cast("Store", made)

    def names(self) -> list[str]:
        return [op.name for op in self.operations]

    async def answer(self, store: Store, call: Call) -> Answer | BaseException:
        """The store's answer to ``call``: a value, a contract error, or the exception
        that is neither (returned, never raised, so the caller can judge it). A breach
        of the stdio protocol is no answer: it propagates, its own finding (PROTO-001)."""
        try:
            value = await self.operation(call.operation).call(store, call.arguments)
            return Returned(plain(value))
        except StdioProtocolError:
            raise
        except Exception as exc:  # the store's exception is evidence, judged by the caller
            name = self.error_name(exc)
            return Raised(name) if name is not None else exc
