"""Which power cuts of a server's data directory the server check builds (`durability_server`).

The power cut right after each acknowledgement comes first; the rest are drawn
from every state but tears that fill an overwrite with zeros or garbage: a server
rewrites its files in place, and a write stopped short leaves the sectors it did
not reach as they were. A tear of a write that grows a file keeps every fill.
"""

from __future__ import annotations

import random

from checkpointspec.conformance.checks.durability_server import _cut_after_acknowledgements
from checkpointspec.conformance.engines.crash.states import CrashPlan, Image, Op, append_op
from checkpointspec.conformance.engines.crash.verdicts import Expected, Round, Step

NOTHING = Expected({}, frozenset())


def _round(ops: list[Op]) -> Round:
    base = Image({"wal": 1}, {1: bytes(4096)}, frozenset())
    steps = (Step("append('a', 1 events)", 0, 2, NOTHING), Step("close()", 2, len(ops), NOTHING))
    return Round(0, CrashPlan(base, ops), steps, ("a",))


def _fills(rnd: Round, budget: int) -> set[str]:
    chosen = _cut_after_acknowledgements(rnd, random.Random(0), budget)
    return {t.fill for spec in chosen if (t := rnd.plan.tear_of(spec)) is not None}


def test_the_cut_right_after_each_acknowledgement_comes_first() -> None:
    ops: list[Op] = []
    append_op(ops, "write", "wal", ino=1, offset=0, data=b"r" * 1024)
    append_op(ops, "fsync", "wal", ino=1)
    append_op(ops, "write", "wal", ino=1, offset=1024, data=b"s" * 1024)
    chosen = _cut_after_acknowledgements(_round(ops), random.Random(0), 3)
    assert chosen[0].point == 2
    assert chosen[0].kind == "durable"
    assert len(chosen) == 3


def test_an_overwrite_is_torn_only_at_its_sectors() -> None:
    ops: list[Op] = []
    append_op(ops, "write", "wal", ino=1, offset=0, data=b"r" * 1024)
    append_op(ops, "fsync", "wal", ino=1)
    append_op(ops, "write", "wal", ino=1, offset=0, data=b"r" * 1024 + b"s" * 1024)
    assert _fills(_round(ops), 1000) == {""}


def test_a_write_that_grows_the_file_is_torn_every_way() -> None:
    ops: list[Op] = []
    append_op(ops, "write", "wal", ino=1, offset=0, data=b"r" * 1024)
    append_op(ops, "fsync", "wal", ino=1)
    append_op(ops, "write", "wal", ino=1, offset=4096, data=b"s" * 1024)
    assert _fills(_round(ops), 1000) == {"", "zeros", "garbage"}
