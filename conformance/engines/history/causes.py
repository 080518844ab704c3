"""Naming an anomaly by its cause: which broken rule comes first when one defect breaks several.

One defect shows in a concurrent history many times over. A store that checks
``expected_head`` outside its write lock lets an append through from a head
another writer has just moved: that append is stored after the other one, so
its returned head is not ``expected_head + len(batch)``; a read racing it may
show either writer at the seq both aimed for. Reported in the order the stages
met them, that is a SEQ-003 headline over the lost update that caused it. So
the checker names each anomaly by its cause and puts the causes first, by a
fixed precedence read off the rule statements (`checkpointspec.spec.rules`),
from what a write decides first to what a later call observes:

1. **A lost update: MP-001 across processes, APPEND-004 within one.** APPEND-004:
   of several appends issued concurrently with the same ``expected_head``, at most
   one succeeds, and no seq is reused; MP-001: APPEND-004 holds across processes,
   no lost update. An append that is stored from a head other than its
   ``expected_head`` while another write that moved the head was in flight made
   the first wrong decision there is: it was accepted at all. Where it lands,
   what it returns and what reads see afterwards follow from that. It breaks
   APPEND-002 too (a stale ``expected_head`` must conflict), and across
   processes APPEND-004 as well when the other write passed the same
   ``expected_head``: those are its ``also``. The other MP-001 anomalies (an
   acknowledged write missing from the final log, writes stored against real
   time) are lost writes of the same rank.
2. **APPEND-002, TRUNC-003: a condition decided wrongly** with no concurrent
   writer to blame: a stale head accepted by one call alone, a conflict's
   ``expected``/``actual`` that are not the call's, a refused batch stored.
3. **APPEND-003: a batch seen partly.** Once a write is accepted, its batch is
   stored whole or not at all; a torn or duplicated batch is decided where the
   events are stored, before any head is returned.
4. **TRUNC-002, TRUNC-001, DELETE-001, DELETE-002**: what a removal kept or let
   reappear, a write of its own kind.
5. **SEQ-001, SEQ-003: the head a write returns.** SEQ-003 says a successful
   append returns the seq of the last event of the log after it: a head that is
   wrong because the append was stored from a stale head is the lost update's
   symptom (the append really did end at that head; the decision to write it was
   wrong), so SEQ-003 is a cause only for a batch stored where its
   ``expected_head`` said, or with no ``expected_head``, whose returned head
   disagrees with where it is.
6. **READ-001, READ-003, HEAD-001: what an observer saw.** A read or head that
   only looks at the log shows what the writes made of it; seqs outside
   ``since_seq``'s range (READ-001) are the read's own arguments broken, before
   what it shows is compared with the log (READ-003), and a head (HEAD-001) says
   the least.

Rules this table does not name rank after it, all alike.
`ordered` sorts a history's anomalies by that rank, then by real time: of two
anomalies of one rank, the one whose first anomalous call (``operations[0]``)
was invoked first leads; a tie in time goes to the lower process number, then to
the earlier call of that process, then to the session's name. The sort never looks at the
order the stages met them, so whichever anomaly the history happened to show
first, the same defect is named by the same rule. The first is the finding; the
others are listed after it as what followed (`HistoryVerdict.report`). Nothing
here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import Anomaly, Operation, Raised

__all__ = ["PRECEDENCE", "lost_update_rules", "ordered", "rank", "unheeded_expectation"]

PRECEDENCE: tuple[tuple[str, ...], ...] = (
    ("MP-001", "APPEND-004"),
    ("APPEND-002", "TRUNC-003"),
    ("APPEND-003",),
    ("TRUNC-002", "TRUNC-001", "DELETE-001", "DELETE-002"),
    ("SEQ-001", "SEQ-003"),
    ("READ-001",),
    ("READ-003",),
    ("HEAD-001",),
)
"""Causes first, symptoms last: a rule's rank is the index of the group that names it."""

_RANK = {rule: n for n, group in enumerate(PRECEDENCE) for rule in group}


def rank(rule_id: str) -> int:
    """Where ``rule_id`` stands in `PRECEDENCE` (a rule it does not name, after it)."""
    return _RANK.get(rule_id, len(PRECEDENCE))


def _key(anomaly: Anomaly) -> tuple[int, float, int, int, str]:
    first = anomaly.operations[0] if anomaly.operations else None
    if first is None:
        return (rank(anomaly.rule_id), float("inf"), 0, 0, anomaly.session)
    return (rank(anomaly.rule_id), first.invoked, first.process, first.index, anomaly.session)


def ordered(anomalies: Iterable[Anomaly]) -> tuple[Anomaly, ...]:
    """``anomalies``, the cause first: by rank, then real time (see the module's docstring)."""
    return tuple(sorted(anomalies, key=_key))


def lost_update_rules(
    stale: Operation, rival: Operation, across_processes: bool
) -> tuple[str, tuple[str, ...]]:
    """The rule a lost update breaks and its ``also``: ``stale`` was stored from a head
    ``rival``, in flight with it, had moved (or both claim one seq).

    MP-001 when the two calls came from different processes (and the recorder's
    processes are processes, ``across_processes``), APPEND-004 otherwise. ``stale``
    breaks APPEND-002 when it passed an ``expected_head``; across processes, two
    appends acknowledged from the same ``expected_head`` (or at one seq without one)
    break APPEND-004's own statement as well.
    """
    apart = across_processes and stale.process != rival.process
    same_head = stale.expected_head is not None and stale.expected_head == rival.expected_head
    unconditional = stale.expected_head is None and rival.expected_head is None
    also = []
    if apart and (same_head or unconditional):
        also.append("APPEND-004")
    if stale.expected_head is not None:
        also.append("APPEND-002")
    return ("MP-001" if apart else "APPEND-004"), tuple(also)


def unheeded_expectation(op: Operation) -> tuple[str, str] | None:
    """For ``op``, a call that raised an error contention does not explain: the rule and
    shape of its cause when the error shows its ``expected_head`` was never compared.

    A store compares a call's expectations before its bounds (`check_expectations`
    before `check_truncate_bound`). A truncate to ``to_seq`` no greater than its
    ``expected_head`` that is refused as beyond the head found the head below
    ``to_seq``, so below ``expected_head``: the conflict was due, and the refusal of
    the bound shows the expectation went unchecked (TRUNC-003). It follows that an
    earlier truncate with a stale head cut the log below where the workers knew it;
    the refusal is where the history shows it first. None for any other error.
    """
    if (
        op.kind == "truncate"
        and op.expected_head is not None
        and isinstance(op.outcome, Raised)
        and op.outcome.error == "InvalidArgumentError"
        and op.to_seq <= op.expected_head
    ):
        return "TRUNC-003", "truncate did not raise CheckpointConflictError (head conflict)"
    return None
