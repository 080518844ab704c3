"""The model-based machine of any contract: a store driven beside the contract's model.

`contract_machine` builds a Hypothesis state machine from a `Contract` value: one
rule per operation, named after it, whose arguments are the operation's strategy,
so that a failing run prints as the calls a person would make (``state.put(
arguments=('a', 1))``) and shrinks to the fewest of them. Each step makes the call
on the store and on the model; where the answers differ, the contract's ``judge``
names the rule, and the finding says the call, the answer the contract gives and
the one the store gave. The first call whose answer the model does not give is the
finding: later steps of that run are not taken.

This module knows no operation of any contract; the checkpointer contract's own
machine (`storage`) predates it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Generic, TypeVar

from hypothesis import note
from hypothesis.stateful import RuleBasedStateMachine

from ..contract.contract import Answer, Call, Contract, Operation, answer_text
from ..contract.violations import RuleViolation
from ..search.exploration import Diverging, rule

__all__ = ["ContractMachineBase", "contract_machine"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)


class ContractMachineBase(Diverging, RuleBasedStateMachine, Generic[Store, State]):
    """A fresh store under a fresh directory beside the contract's initial state.

    Subclasses made by `contract_machine` add the operations; ``open_store`` opens
    the store in the directory it is given (the target's factory, adapted to the
    contract's interface).
    """

    contract: Contract[Store, State]
    open_store: Callable[[Path], Awaitable[Store]]
    root: Path
    keep_stores: bool = False
    """The stores' data lives elsewhere (a database server): an example's directory
    stays for the check's end, where the factory drops what every directory names."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.path = Path(tempfile.mkdtemp(prefix="contract-", dir=self.root))
        self.state = self.contract.initial()
        self.store: Store = self.loop.run_until_complete(type(self).open_store(self.path))

    def make(self, call: Call) -> None:
        """Make ``call`` on the store and the model; a different answer is a finding."""
        if self.contract.prepare is not None:
            prepared = self.contract.prepare(self.state, call)
            if prepared is None:
                note(f"{call}: nothing to act on here, not made")
                return
            call = prepared
        next_state, expected = self.contract.step(self.state, call)
        got = self.loop.run_until_complete(self.contract.answer(self.store, call))
        actual: Answer | None = None if isinstance(got, BaseException) else got
        seen = answer_text(actual) if actual is not None else f"raised {type(got).__name__}: {got}"
        note(f"{call} {seen}")
        if actual != expected:
            rule_id = self.contract.judge(self.state, call, expected, actual)
            shape, said = "", f"{seen}; the contract's model {answer_text(expected)}"
            raised = "" if actual is not None else f"{type(got).__name__}: {got}"
            if self.contract.describe is not None:
                shape, said = self.contract.describe(self.state, call, expected, actual, raised)
            if self.contract.confirm is not None:
                looked = self.loop.run_until_complete(
                    self.contract.confirm(self.store, self.state, call, expected, actual, raised)
                )
                if looked is not None:
                    rule_id, shape, said = looked
            raise RuleViolation(
                rule_id,
                f"{call} {said}",
                catalog=self.contract.rules_by_id,
                shape=shape,
            )
        self.state = next_state

    def teardown(self) -> None:
        try:
            self.loop.run_until_complete(self.contract.close(self.store))
        finally:
            self.loop.close()
            if not self.keep_stores:
                shutil.rmtree(self.path, ignore_errors=True)


def _step(
    operation: Operation[Any], name: str
) -> Callable[[ContractMachineBase[Any, Any], Any], None]:
    def step(self: ContractMachineBase[Any, Any], arguments: Any) -> None:
        self.make(Call(operation.name, tuple(arguments)))

    step.__name__ = step.__qualname__ = name
    step.__doc__ = f"One call of {operation.name}, beside the model."
    return step


def contract_machine(
    contract: Contract[Store, State],
    open_store: Callable[[Path], Awaitable[Store]],
    root: Path,
    *,
    keep_stores: bool = False,
) -> type[ContractMachineBase[Store, State]]:
    """A state machine class driving stores of ``contract`` opened by ``open_store``
    in directories under ``root``; run it like any Hypothesis state machine (the
    kit's search drivers run it in rounds under a check's slice). ``keep_stores``:
    leave each example's directory for the check's end (`ContractMachineBase.keep_stores`)."""
    namespace: dict[str, object] = {
        "contract": contract,
        "open_store": staticmethod(open_store),
        "root": root,
        "keep_stores": keep_stores,
    }
    for operation in contract.operations:
        # A weight of n is n rules, each of its own name: Hypothesis switches rules off
        # per example by name (swarm testing), and copies of one name would be off
        # together, leaving the operation out of half the examples whatever its weight.
        for copy in range(operation.weight):
            key = operation.name if copy == 0 else f"{operation.name}__{copy + 1}"
            namespace[key] = rule(arguments=operation.arguments)(_step(operation, key))
    name = "".join(part.capitalize() for part in contract.name.replace("-", "_").split("_"))
    return type(f"{name}Machine", (ContractMachineBase,), namespace)
