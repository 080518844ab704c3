"""Concurrent programs of any contract's calls, run at once and judged as a history.

A *program* is the calls one caller makes, in order; a test draws a few programs
(`programs`, a Hypothesis strategy, so that a failure shrinks to the fewest and
shortest programs that still show it), runs them at the same time, each on its
own handle of one store (`run_programs`), records every call with the times it
was invoked and answered, and asks `checkpointspec.conformance.engines.history.
linearizable` whether one order of the calls explains every answer
(`judge_history`). What no order explains is a finding of the rule the
contract's ``judge`` names for the first call that could not be placed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

from hypothesis import strategies as st

from ..contract.contract import Call, Contract, JSONArgs
from ..contract.violations import RuleViolation
from ..history.linearizable import Diverged, Recorded, Undecided, check_linearizable

__all__ = ["HistoryUndecided", "judge_history", "programs", "record_calls", "run_programs"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)
Programs = tuple[tuple[Call, ...], ...]


class HistoryUndecided(Exception):
    """The history was too tangled for the search's bound: neither a pass nor a finding."""


def _call_of(name: str) -> Callable[[JSONArgs], Call]:
    return lambda arguments: Call(name, tuple(arguments))


def programs(
    contract: Contract[Store, State], *, callers: int = 3, calls: int = 4
) -> st.SearchStrategy[Programs]:
    """Two to ``callers`` programs of one to ``calls`` calls of ``contract``'s operations."""
    one_call = st.one_of([op.arguments.map(_call_of(op.name)) for op in contract.operations])
    program = st.lists(one_call, min_size=1, max_size=calls).map(tuple)
    return st.lists(program, min_size=2, max_size=callers).map(tuple)


async def record_calls(
    contract: Contract[Store, State],
    store: Store,
    calls: Sequence[Call],
    process: int,
    each: Callable[[Recorded], None] | None = None,
) -> list[Recorded]:
    """Make ``calls`` on ``store`` one after another, each recorded with the times read
    just before and after it (``each`` is told of each as it is recorded). A call
    that raises what the contract does not name is recorded with no answer and
    what it raised."""
    history: list[Recorded] = []
    for call in calls:
        invoked = time.monotonic()
        got = await contract.answer(store, call)
        completed = time.monotonic()
        if isinstance(got, BaseException):
            said = f"{type(got).__name__}: {got}"
            recorded = Recorded(process, call, invoked, completed, None, said)
        else:
            recorded = Recorded(process, call, invoked, completed, got)
        history.append(recorded)
        if each is not None:
            each(recorded)
    return history


async def run_programs(
    contract: Contract[Store, State],
    open_store: Callable[[Path], Awaitable[Store]],
    path: Path,
    drawn: Programs,
) -> list[Recorded]:
    """Run each program on its own handle of the store in ``path``, all at once, and
    record every call (`record_calls`)."""
    stores = [await open_store(path) for _ in drawn]
    try:
        histories = await asyncio.gather(
            *(record_calls(contract, stores[p], program, p) for p, program in enumerate(drawn))
        )
    finally:
        for store in stores:
            await contract.close(store)
    return [recorded for history in histories for recorded in history]


def judge_history(
    contract: Contract[Store, State], history: Sequence[Recorded], after: str = ""
) -> None:
    """Raise the finding of a history no order of the contract's model explains
    (`RuleViolation`), or `HistoryUndecided`; return when one order explains it.
    ``after`` says what the history followed (a kill, a power loss), for both."""
    verdict = check_linearizable(contract, history)
    where = f"after {after}: " if after else ""
    if isinstance(verdict, Diverged):
        cause = contract.history_cause(history) if contract.history_cause is not None else None
        if cause is not None:
            rule_id, shape, said = cause
            raise RuleViolation(
                rule_id, f"{where}{said}", catalog=contract.rules_by_id, shape=shape
            )
        message = f"{where}{verdict.message()}"
        raise RuleViolation(verdict.rule_id, message, catalog=contract.rules_by_id)
    if isinstance(verdict, Undecided):
        raise HistoryUndecided(
            f"{where}the history of {len(history)} calls was not decided within "
            f"{verdict.states} states (part {verdict.part})"
        )
