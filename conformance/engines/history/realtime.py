"""The history checker's last stage: real time, once the order of versions is known.

Each append, truncate and delete must take effect at one instant inside its
call, in the order the chain fixed, and every read, head and conflict must see
the log at one instant inside its own call. With the order fixed, that is a
chain of interval constraints which one greedy pass (the earliest possible
instant for each step) settles exactly; when it fails, the two facts that clash
are reported. See `checkpointspec.conformance.engines.history` for the stages
before it. Nothing here does I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from ..contract.ledger import Ledger, markers_text
from .epochs import BEFORE, NEVER, Epoch, Findings, done, gone_rule, removal_kind
from .records import Conflicted, Operation, Returned, describe, observer_rule

__all__ = ["RealTime"]


class RealTime:
    """Checks the real-time order of one session whose epochs and chains are built.

    ``epoch_of`` maps ``id(append)`` to the number of the epoch it ran in.
    """

    def __init__(
        self, findings: Findings, ledger: Ledger[Operation], epoch_of: Mapping[int, int]
    ) -> None:
        self.flag = findings.flag
        self.stage_done = findings.stage_done
        self.ledger = ledger
        self.epoch_of = epoch_of

    def check(self, epochs: list[Epoch]) -> None:
        """Place every step at one instant inside its call, in chain order; flag what cannot be."""
        steps: list[Operation] = []  # step k (from 1) makes version k
        lengths = [0]
        for epoch in epochs:
            if epoch.removal is not None:
                steps.append(epoch.removal)
                lengths.append(epoch.base)
            epoch.version[epoch.base] = len(steps)
            for _, end, op in epoch.batches:
                steps.append(op)
                lengths.append(end)
                epoch.version[end] = len(steps)
        seen_until = [NEVER] * (len(steps) + 1)  # earliest response of a call that saw version v
        seen_until_by: list[Operation | None] = [None] * (len(steps) + 1)
        missed_after = [BEFORE] * (len(steps) + 1)  # latest invocation of a call that saw v
        missed_after_by: list[Operation | None] = [None] * (len(steps) + 1)

        def saw(version: int, op: Operation, upper: bool = True) -> None:
            if upper and done(op) < seen_until[version]:
                seen_until[version], seen_until_by[version] = done(op), op
            if op.invoked > missed_after[version]:
                missed_after[version], missed_after_by[version] = op.invoked, op

        for epoch in epochs:
            for op in epoch.ops:
                head = self.observed_head(epoch, op)
                if head is None:
                    continue
                if head < 0:
                    # An empty read since s: the step that first put an event at s + 1
                    # cannot have happened before the read began.
                    cover = bisect.bisect_right(epoch.ends, -head - 1)
                    if cover < len(epoch.ends):
                        saw(epoch.version[epoch.ends[cover]] - 1, op, upper=False)
                    continue
                version = epoch.version.get(head)
                if version is None:
                    self.flag_missing_head(epoch, op, head)
                    continue
                saw(version, op)
        self.stage_done()

        at = [BEFORE] * (len(steps) + 1)
        why: list[tuple[str, int, Operation | None]] = [("start", 0, None)] * (len(steps) + 1)
        for k in range(1, len(steps) + 1):
            op = steps[k - 1]
            earliest = op.invoked
            reason: tuple[str, int, Operation | None] = ("own", k, op)
            if at[k - 1] > earliest:
                earliest, reason = at[k - 1], ("chain", k - 1, None)
            if missed_after[k - 1] > earliest:
                earliest, reason = missed_after[k - 1], ("missed", k - 1, missed_after_by[k - 1])
            latest, late_by = done(op), None
            if seen_until[k] < latest:
                latest, late_by = seen_until[k], seen_until_by[k]
            if earliest > latest:
                while reason[0] == "chain":
                    reason = why[reason[1]]
                self.explain_real_time(k, steps, lengths, reason, late_by)
                return
            at[k], why[k] = earliest, reason

    def observed_head(self, epoch: Epoch, op: Operation) -> int | None:
        """The head a call saw, -(s + 1) for an empty read since s, None if it saw none."""
        outcome = op.outcome
        if isinstance(outcome, Conflicted):
            return outcome.actual
        if not isinstance(outcome, Returned):
            return None
        if op.kind == "head" or (op.kind == "append" and not op.markers):
            return outcome.value
        if op.kind != "read":
            return None
        if not outcome.events:
            if op.since_seq < epoch.base:
                self.flag(
                    "READ-003",
                    f"a read since {op.since_seq} got nothing, but the {removal_kind(epoch)} before it "
                    f"kept seqs 1..{epoch.base}",
                    op,
                    epoch.removal,
                )
                return None
            return -op.since_seq - 1
        if not self.is_slice(epoch, op, outcome):
            return None
        return outcome.events[-1][0]

    def is_slice(self, epoch: Epoch, op: Operation, outcome: Returned) -> bool:
        """Are the read's events the chain's events at those seqs? Flags it if not."""
        chain = epoch.chain
        for seq, marker in outcome.events:
            held = chain[seq - 1] if seq <= len(chain) else None
            if held == marker:
                continue
            writer = self.ledger.writer(marker)
            home = self.epoch_of.get(id(writer), epoch.number)
            if home < epoch.number and epoch.removal is not None:
                self.flag(
                    gone_rule(epoch.removal),
                    f"a read returned {marker} at seq {seq}, after the {epoch.removal.kind} "
                    "that removed it had completed",
                    op,
                    epoch.removal,
                    writer,
                )
            else:
                there = f"holds {held}" if held is not None else "has no event"
                self.flag(
                    "READ-003",
                    f"a read returned {marker} at seq {seq}, but the log {there} there: the "
                    "read is not a slice of the log",
                    op,
                    writer,
                )
            return False
        if outcome.events[-1][0] < epoch.base:
            self.flag(
                "READ-003",
                f"a read ended at seq {outcome.events[-1][0]}, but the {removal_kind(epoch)} before it "
                f"kept seqs 1..{epoch.base}",
                op,
                epoch.removal,
            )
            return False
        return True

    def flag_missing_head(self, epoch: Epoch, op: Operation, head: int) -> None:
        rule_id = observer_rule(op)
        inside = next((b for b in epoch.batches if b[0] <= head < b[1]), None)
        if inside is not None:
            self.flag(
                rule_id,
                f"the call saw head {head}, inside the batch at seqs {inside[0]}..{inside[1]}, "
                "a head the log never had",
                op,
                inside[2],
            )
        elif head > len(epoch.chain):
            self.flag(
                rule_id,
                f"the call saw head {head}, but the log never held more than "
                f"{len(epoch.chain)} events"
                + (f" after the {removal_kind(epoch)}" if epoch.removal is not None else ""),
                op,
            )
        else:
            self.flag(
                rule_id,
                f"the call saw head {head}, but the {removal_kind(epoch)} before it kept seqs "
                f"1..{epoch.base}",
                op,
                epoch.removal,
            )

    def explain_real_time(
        self,
        k: int,
        steps: list[Operation],
        lengths: list[int],
        reason: tuple[str, int, Operation | None],
        late_by: Operation | None,
    ) -> None:
        """Say why step ``k`` has no instant left, from the two facts that clash.

        ``reason`` is what forced the earliest instant (an append's own invocation,
        or a call that began later and did not see a step); ``late_by`` is a call
        that saw step ``k`` and returned before that instant, None when step
        ``k``'s own completion is the limit.
        """
        step = steps[k - 1]
        kind, origin, source = reason
        first = steps[origin - 1] if kind == "own" else steps[origin]  # the earlier step
        if late_by is not None and kind == "own":
            self.flag(
                observer_rule(late_by),
                f"{describe(late_by)} returned before {describe(first)} began, yet "
                f"{_saw(late_by, lengths[k], only=False)}, which includes {_what(first)}: it saw a write "
                "before the write was made",
                late_by,
                first,
            )
        elif late_by is not None:
            assert source is not None
            self.flag(
                observer_rule(source),
                f"{describe(late_by)} returned before {describe(source)} began, yet the later "
                f"call {_saw(source, lengths[origin])}, without {_what(first)}, which the "
                f"earlier one had seen: stale",
                source,
                late_by,
                first,
            )
        elif kind == "own":
            rule_id = next(
                (
                    "DELETE-001" if s.kind == "delete" else "TRUNC-001"
                    for s in (first, step)
                    if s.kind != "append"
                ),
                "MP-001",
            )
            self.flag(
                rule_id,
                f"{describe(step)} completed before {describe(first)} began, yet the log has "
                f"{_what(first)} before {_what(step)}: real-time order is broken",
                step,
                first,
            )
        else:
            assert source is not None
            self.flag(
                observer_rule(source),
                f"{describe(source)} began after {describe(step)} completed, yet "
                f"{_saw(source, lengths[origin])}, without {_what(first)}: stale",
                source,
                step,
                first if first is not step else None,
            )


def _saw(op: Operation, head: int, only: bool = True) -> str:
    """What a call that only looks at the log saw, in words."""
    if op.kind == "read":
        return f"it saw the log {'only ' if only else ''}up to seq {head}"
    if op.kind == "head":
        return f"it got head {head}"
    return f"it reported actual head {head}"


def _what(op: Operation) -> str:
    if op.kind == "append":
        return markers_text(op.markers)
    return f"the {op.kind} by process {op.process}"
