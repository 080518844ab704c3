"""Is a concurrent history of any contract's calls explained by its sequential model?

The checkpointer contract has its own checker (`checker`), which knows what an
append's markers say and names an anomaly by its cause. This one knows nothing of
any operation: it takes a `Contract` and the calls several processes or tasks
made, each with when it was invoked, when it returned and what it answered, and
searches for one order of the calls that (1) keeps every call that returned
before another was invoked ahead of it and (2) gives, stepped through the
contract's model, every recorded answer (linearizability; Wing and Gong's search
with Lowe's memo of the states already tried).

A call with no answer (its process was killed, its connection cut, or it raised
something that is no answer of the contract) may have taken effect at any point
after it was invoked, or never: a write is placed wherever it explains the rest,
or left out; a read with no answer tells nothing and is dropped.

When no order exists, the verdict names the **first divergence**: the call, of
those the deepest order could not place, that was invoked first, what the model
answers there and what the store answered; the contract's ``judge`` names its rule.
The search is bounded (``most_states``): a history too tangled to decide within
it is undecided, never passed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from ..contract.contract import Answer, Call, Contract, answer_text

__all__ = [
    "Diverged",
    "Linearized",
    "Recorded",
    "Undecided",
    "check_linearizable",
]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)

MOST_STATES = 200_000
"""States the search visits in one part of a history before it gives up undecided."""


class Recorded(msgspec.Struct, frozen=True):
    """One call one process made: ``invoked`` and ``completed`` read from one
    monotonic clock all the processes share; ``completed`` and ``answer`` are None
    when no answer came, and ``answer`` alone when the call raised something the
    contract does not name (``raised`` says what)."""

    process: int
    call: Call
    invoked: float
    completed: float | None = None
    answer: Answer | None = None
    raised: str = ""

    def __str__(self) -> str:
        said = answer_text(self.answer) if self.answer is not None else self.raised or "no answer"
        return f"process {self.process}: {self.call} {said}"


class Linearized(msgspec.Struct, frozen=True):
    """Every part of the history has an order the model explains; ``states`` is
    how many the search visited."""

    states: int


class Diverged(msgspec.Struct, frozen=True):
    """No order explains the history.

    ``call`` is the first call the deepest order could not place, ``expected`` the
    answer the model gives it there, ``recorded`` the call as it was recorded,
    ``before`` the calls that order placed ahead of it, ``rule_id`` the rule its
    contract's ``judge`` names.
    """

    rule_id: str
    call: Call
    expected: Answer
    recorded: Recorded
    before: tuple[Call, ...]

    def message(self) -> str:
        placed = "; ".join(map(str, self.before[-6:])) or "nothing"
        return (
            f"{self.recorded}, but in no order of the concurrent calls does the "
            f"model give that: after {placed} it {answer_text(self.expected)}"
        )


class Undecided(msgspec.Struct, frozen=True):
    """The search gave up after ``states`` states: neither a pass nor a finding."""

    states: int
    part: str


Verdict = Linearized | Diverged | Undecided


@dataclass
class _Search(Generic[Store, State]):
    contract: Contract[Store, State]
    calls: Sequence[Recorded]
    most_states: int
    visited: int = 0
    deepest: int = -1
    stuck: tuple[State, tuple[int, ...]] | None = None
    """The state and order of the deepest placement (``deepest`` answered calls placed)."""

    def run(self) -> Verdict | None:
        known = [i for i, r in enumerate(self.calls) if r.answer is not None]
        # A call with no answer may never take effect, so it holds no other call back.
        ends = [
            r.completed if r.completed is not None and r.answer is not None else float("inf")
            for r in self.calls
        ]
        all_known = frozenset(known)
        seen: set[tuple[frozenset[int], State]] = set()
        # Depth first, iteratively: each frame is (placed calls, state, order so far).
        stack: list[tuple[frozenset[int], State, tuple[int, ...]]] = [
            (frozenset(), self.contract.initial(), ())
        ]
        while stack:
            placed, state, order = stack.pop()
            if all_known <= placed:
                return None
            if (placed, state) in seen:
                continue
            seen.add((placed, state))
            self.visited += 1
            if self.visited > self.most_states:
                return Undecided(self.visited, "")
            # A call can come next only if no call still unplaced returned before it began.
            horizon = min(ends[i] for i in range(len(self.calls)) if i not in placed)
            depth = len(placed & all_known)
            if depth > self.deepest:
                self.deepest, self.stuck = depth, (state, order)
            for i in sorted(
                (i for i in range(len(self.calls)) if i not in placed),
                key=lambda i: self.calls[i].invoked,
                reverse=True,
            ):
                recorded = self.calls[i]
                if recorded.invoked > horizon:
                    continue
                after, answer = self.contract.step(state, recorded.call)
                if recorded.answer is None or answer == recorded.answer:
                    stack.append((placed | {i}, after, (*order, i)))
        return self._diverged()

    def _diverged(self) -> Diverged:
        assert self.stuck is not None
        state, order = self.stuck
        placed = set(order)
        waiting = sorted(
            (
                i
                for i in range(len(self.calls))
                if i not in placed and self.calls[i].answer is not None
            ),
            key=lambda i: self.calls[i].invoked,
        )
        first = (
            waiting[0] if waiting else next(i for i in range(len(self.calls)) if i not in placed)
        )
        recorded = self.calls[first]
        _, expected = self.contract.step(state, recorded.call)
        return Diverged(
            rule_id=self.contract.judge(state, recorded.call, expected, recorded.answer),
            call=recorded.call,
            expected=expected,
            recorded=recorded,
            before=tuple(self.calls[i].call for i in order),
        )


def check_linearizable(
    contract: Contract[Store, State],
    history: Sequence[Recorded],
    *,
    most_states: int = MOST_STATES,
) -> Verdict:
    """The verdict on ``history`` (see the module): each part (``contract.key``) is
    searched on its own; the first part that diverges, or is undecided, decides."""
    kept = [
        r for r in history if r.answer is not None or contract.operation(r.call.operation).writes
    ]
    parts: dict[Hashable, list[Recorded]] = {}
    for recorded in kept:
        part = contract.key(recorded.call) if contract.key is not None else None
        parts.setdefault(part, []).append(recorded)
    visited = 0
    for part, calls in parts.items():
        search = _Search(contract, sorted(calls, key=lambda r: r.invoked), most_states)
        verdict = search.run()
        visited += search.visited
        if isinstance(verdict, Undecided):
            return Undecided(verdict.states, repr(part))
        if verdict is not None:
            return verdict
    return Linearized(visited)
