"""Holds and kill states are allotted per kind of write, and spread over each write's calls.

KILL-001 and READ-003 hold writers at ``profile.held_writes`` system calls (8 in
quick). Every kind of write the crash workload makes (an append to a session
that has events, a truncate, a delete, a session's first append) must get at
least one, or a backend whose only atomicity bug is in a truncate passes; and
the holds of one write must reach its middle, where a write done in pieces
shows them.
"""

from __future__ import annotations

import random

import pytest
from checkpointspec.conformance.engines.crash.holds import spread, targets
from checkpointspec.conformance.engines.crash.verdicts import allot, kind_of, plan_workload
from checkpointspec.spec import Capability

KINDS = ["append", "truncate", "delete", "first append"]


@pytest.mark.parametrize("seed", range(20))
def test_the_workload_has_every_kind_of_write_and_its_truncate_cuts_two_events(seed: int) -> None:
    _, calls = plan_workload(random.Random(seed), frozenset(Capability), 0)
    assert sorted({kind_of(calls, t) for t in range(len(calls))}) == sorted(KINDS)
    (t,) = [t for t, call in enumerate(calls) if call.kind == "truncate"]
    before = calls[t - 1].after.logs[calls[t].session]
    assert len(before) - calls[t].to_seq >= 2, (before, calls[t])


def test_targets_group_the_writes_by_kind_in_allotment_order() -> None:
    _, calls = plan_workload(random.Random(0), frozenset(Capability), 0)
    groups = targets(random.Random(0), calls)
    assert list(groups) == KINDS
    assert sorted(t for group in groups.values() for t in group) == list(range(len(calls)))
    for kind, group in groups.items():
        assert {kind_of(calls, t) for t in group} == {kind}


@pytest.mark.parametrize(
    ("budget", "kinds", "shares"),
    [
        (8, KINDS, {"append": 4, "truncate": 2, "delete": 1, "first append": 1}),
        (40, KINDS, {"append": 20, "truncate": 10, "delete": 5, "first append": 5}),
        (8, ["first append", "append"], {"append": 6, "first append": 2}),
        (2, KINDS, {"append": 1, "truncate": 1, "delete": 0, "first append": 0}),
        (5, ["close", "append"], {"append": 4, "close": 1}),
    ],
)
def test_every_kind_gets_a_share_of_the_budget(
    budget: int, kinds: list[str], shares: dict[str, int]
) -> None:
    assert allot(budget, kinds) == shares


@pytest.mark.parametrize(("counted", "take"), [(12, 2), (12, 3), (7, 4), (100, 4), (5, 4)])
def test_holds_are_drawn_one_from_each_stretch_of_a_write(counted: int, take: int) -> None:
    for seed in range(30):
        chosen = spread(random.Random(seed), counted, take)
        assert len(chosen) == take
        for i, n in enumerate(chosen):
            # The i-th of ``take`` near-equal stretches of 1..counted.
            assert 1 + counted * i // take <= n < 1 + counted * (i + 1) // take, (chosen, i)


def test_a_write_with_fewer_calls_than_holds_is_held_at_each() -> None:
    assert spread(random.Random(0), 3, 4) == [1, 2, 3]


@pytest.mark.parametrize(("counted", "take"), [(12, 2), (13, 2), (12, 3), (7, 4), (100, 4)])
def test_two_holds_or_more_always_hold_a_write_at_its_middle(counted: int, take: int) -> None:
    """A write made of equal pieces has its first piece done and its last not at the
    middle call: every seed holds it there, so a write done in pieces shows on all."""
    middle = 1 + counted // 2
    for seed in range(30):
        assert middle in spread(random.Random(seed), counted, take)


def test_a_single_hold_is_drawn_anywhere_in_the_write() -> None:
    assert len({spread(random.Random(seed), 12, 1)[0] for seed in range(30)}) > 1
