"""The history checker's fast path: one session decided from the order its events show.

Every appended event is unique, so the final log, the reads and the returned
heads say where each batch went; the order of versions is read off them, never
searched for (as Elle does). `SessionChain.run` checks one session in stages —
shapes, epochs, chains, real time; see `checkpointspec.conformance.engines.history` for
what each proves — and stops at the first stage that finds anomalies, since
later ones would only repeat them. When the order is not fixed by the events
(a truncate overlapping other calls, a removal that may or may not have
happened, an unseen seq before a truncate) it raises `ChainUndecided` and the
caller falls back to the search. Nothing here does I/O.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence

from .history_records import (
    Anomaly,
    Conflicted,
    Operation,
    Raised,
    Returned,
    Unknown,
    describe,
    markers_text,
    observer_rule,
)

__all__ = ["AnomaliesFound", "ChainUndecided", "SessionChain"]


_NEVER = 2**63
_BEFORE = -(2**63)


def _done(op: Operation) -> int:
    return _NEVER if op.completed is None else op.completed


class ChainUndecided(Exception):
    """The chain cannot decide this session; the message says why."""


class AnomaliesFound(Exception):
    """Anomalies were recorded (see `SessionChain.anomalies`); later stages would only repeat them."""


class _Epoch:
    """The calls between two successful truncates/deletes, and the chain they built."""

    def __init__(self, number: int, removal: Operation | None) -> None:
        self.number = number
        self.removal = removal
        self.ops: list[Operation] = []
        self.base = 0  # seqs 1..base were kept by the removal that opened the epoch
        self.chain: list[str] = []
        self.position: dict[str, int] = {}  # marker -> seq, for seqs beyond base
        self.batches: list[tuple[int, int, Operation]] = []  # (first, last seq, append)
        self.ends: list[int] = []  # the last seq of each batch, ascending
        self.version: dict[int, int] = {}  # head -> index of the version in the global chain
        self.uncertain = False  # an append that may have taken effect was never seen


class SessionChain:
    """Checks one session's calls against its final log.

    ``writers`` maps every marker of the whole history to its append and its
    place in the batch; ``limit`` caps the anomalies recorded.
    """

    def __init__(
        self,
        name: str,
        ops: list[Operation],
        final: list[str],
        writers: Mapping[str, tuple[Operation, int]],
        limit: int,
    ) -> None:
        self.name = name
        self.ops = ops
        self.final = final
        self.writers = writers
        self.limit = limit
        self.anomalies: list[Anomaly] = []
        self.resolved: list[str] = []
        self.epoch_of: dict[int, int] = {}  # id(append op) -> epoch number
        # A truncate may keep only the first events of a batch: then a log can
        # legally hold a batch's prefix, and wholeness is checked per epoch.
        self.may_cut = any(
            op.kind == "truncate" and not isinstance(op.outcome, Conflicted) for op in ops
        )

    def flag(self, rule_id: str, summary: str, *ops: Operation | None) -> None:
        unique: list[Operation] = []
        for op in ops:
            if op is not None and all(op is not u for u in unique):
                unique.append(op)
        self.anomalies.append(Anomaly(rule_id, self.name, summary, tuple(unique)))
        if len(self.anomalies) >= self.limit:
            raise AnomaliesFound

    def stage_done(self) -> None:
        if self.anomalies:
            raise AnomaliesFound

    # -- 1. shapes --------------------------------------------------------------------------
    def check_shapes(self) -> None:
        self.check_sequence(self.final, None)
        observed: dict[str, Operation | None] = dict.fromkeys(self.final)
        for op in self.ops:
            outcome = op.outcome
            if op.kind == "read" and isinstance(outcome, Returned):
                seqs = [seq for seq, _ in outcome.events]
                want = list(range(op.since_seq + 1, op.since_seq + 1 + len(seqs)))
                if seqs != want:
                    self.flag(
                        "READ-001",
                        f"a read since {op.since_seq} returned seqs {seqs[:8]}; "
                        f"it must return {want[:8]}",
                        op,
                    )
                markers = [m for _, m in outcome.events]
                self.check_sequence(markers, op)
                for marker in markers:
                    observed.setdefault(marker, op)
            elif isinstance(outcome, Conflicted):
                rule_id = "TRUNC-003" if op.kind == "truncate" else "APPEND-002"
                if op.expected_head != outcome.expected or outcome.actual == outcome.expected:
                    self.flag(
                        rule_id,
                        f"a conflict reported expected {outcome.expected} and actual "
                        f"{outcome.actual} for a call that passed expected_head {op.expected_head}",
                        op,
                    )
            elif op.kind == "truncate" and isinstance(outcome, Returned):
                if outcome.value != op.to_seq:
                    self.flag("TRUNC-001", f"truncate returned {outcome.value}", op)
            elif op.kind == "append" and isinstance(outcome, Returned) and op.markers:
                size = len(op.markers)
                if outcome.value < size or (
                    op.expected_head is not None and outcome.value != op.expected_head + size
                ):
                    must = (
                        f"; after expected_head {op.expected_head} it must be "
                        f"{op.expected_head + size}"
                        if op.expected_head is not None
                        else ""
                    )
                    self.flag(
                        "SEQ-003",
                        f"an append of {size} event{'s' if size != 1 else ''} returned head "
                        f"{outcome.value}{must}",
                        op,
                    )
        for op in self.ops:
            if op.kind == "append" and isinstance(op.outcome, Conflicted):
                seen = next((m for m in op.markers if m in observed), None)
                if seen is not None:
                    where = observed[seen]
                    self.flag(
                        "APPEND-002",
                        f"{seen} was written although its append raised a conflict"
                        + (" (the final log holds it)" if where is None else ""),
                        op,
                        where,
                    )
        self.stage_done()

    def check_sequence(self, markers: Sequence[str], reader: Operation | None) -> None:
        """Each marker once, appended to this session, every batch whole and in order.

        ``reader`` is the read that returned ``markers``, None for the final log. A
        read may start inside a batch (its since_seq cuts it), never end inside one
        — unless a truncate may have cut that batch.
        """
        where = "the final log" if reader is None else "a read"
        rule_id = "APPEND-003" if reader is None else "READ-003"
        seen: set[str] = set()
        previous: tuple[Operation, int] | None = None
        for place, marker in enumerate(markers):
            writer = self.writers.get(marker)
            if marker in seen:
                self.flag(
                    rule_id,
                    f"{where} holds {marker} twice: an append takes effect at most once",
                    reader,
                    writer[0] if writer else None,
                )
                return
            seen.add(marker)
            if writer is None:
                self.flag("EVENT-001", f"{where} holds {marker}, which no process appended", reader)
                return
            op, slot = writer
            if op.session != self.name:
                self.flag(
                    "ID-002",
                    f"{where} holds {marker}, appended to session {op.session!r}",
                    reader,
                    op,
                )
                return
            starts_batch = previous is None or previous[0] is not op
            if (
                previous is not None
                and starts_batch
                and previous[1] != len(previous[0].markers) - 1
                and not self.may_cut
            ):
                torn, upto = previous[0], previous[1]
                self.flag(
                    rule_id,
                    f"{where} holds only {markers_text(torn.markers[: upto + 1])} of the batch "
                    f"{markers_text(torn.markers)}, followed by {marker}",
                    reader,
                    torn,
                )
                return
            cut_by_since = reader is not None and place == 0
            if (starts_batch and slot != 0 and not cut_by_since) or (
                not starts_batch and previous is not None and slot != previous[1] + 1
            ):
                self.flag(
                    rule_id,
                    f"{where} holds {marker} out of its batch's order or without the events "
                    f"before it ({markers_text(op.markers)})",
                    reader,
                    op,
                )
                return
            previous = (op, slot)
        if (
            previous is not None
            and previous[1] != len(previous[0].markers) - 1
            and not self.may_cut
        ):
            torn, upto = previous
            self.flag(
                rule_id,
                f"{where} ends with {markers_text(torn.markers[: upto + 1])}, part of the batch "
                f"{markers_text(torn.markers)}",
                reader,
                torn,
            )

    # -- 2. epochs --------------------------------------------------------------------------
    def split_epochs(self) -> list[_Epoch]:
        removals: list[Operation] = []
        for op in self.ops:
            if op.kind not in ("truncate", "delete"):
                continue
            if isinstance(op.outcome, Returned):
                removals.append(op)
            elif not isinstance(op.outcome, Conflicted):
                raise ChainUndecided(
                    f"process {op.process}'s {op.kind} may or may not have happened"
                )
        for before, after in itertools.pairwise(removals):
            if _done(before) >= after.invoked:
                raise ChainUndecided("two truncates/deletes overlap")
        epochs = [_Epoch(0, None)] + [_Epoch(n + 1, r) for n, r in enumerate(removals)]
        ends = [_done(r) for r in removals]
        removal_ids = {id(r) for r in removals}
        for op in self.ops:
            if id(op) in removal_ids:
                continue
            number = bisect.bisect_left(ends, op.invoked)
            if number < len(removals) and _done(op) >= removals[number].invoked:
                raise ChainUndecided(
                    f"process {op.process}'s {op.kind} overlaps a {removals[number].kind}"
                )
            epochs[number].ops.append(op)
            if op.kind == "append":
                self.epoch_of[id(op)] = number
        return epochs

    # -- 3. chains --------------------------------------------------------------------------
    def build_chain(self, epoch: _Epoch, kept: list[str], last: bool) -> None:
        epoch.base = len(kept)
        removal = epoch.removal
        if last:
            if self.final[: epoch.base] != kept:
                self.flag(
                    "TRUNC-001",
                    f"the truncate to {epoch.base} kept {markers_text(kept)}, but the final log "
                    f"starts {markers_text(self.final[: epoch.base])}",
                    removal,
                )
                return
            epoch.chain = self.final
        else:
            epoch.chain = self.claimed_chain(epoch, kept)
        for seq in range(epoch.base + 1, len(epoch.chain) + 1):
            marker = epoch.chain[seq - 1]
            epoch.position[marker] = seq
            writer = self.writers[marker][0]
            home = self.epoch_of.get(id(writer))
            if home is not None and home > epoch.number:
                self.flag(
                    "READ-003",
                    f"a read saw {marker} at seq {seq} before the truncate/delete after which "
                    "it was appended",
                    writer,
                )
                return
            if home is not None and home < epoch.number:
                gone = epoch.removal
                self.flag(
                    "DELETE-002" if gone is not None and gone.kind == "delete" else "TRUNC-001",
                    f"{marker} is at seq {seq} after the {gone.kind if gone else 'removal'} "
                    f"that completed after its append (it should be gone)",
                    writer,
                    gone,
                )
                return
        # The chain is known; place every append of the epoch on it.
        for op in epoch.ops:
            if op.kind != "append" or not op.markers:
                continue
            outcome = op.outcome
            first = epoch.position.get(op.markers[0])
            if first is None:
                if isinstance(outcome, Returned):
                    self.flag(
                        "MP-001",
                        f"{markers_text(op.markers)} was acknowledged at head {outcome.value} but is "
                        "not in the final log",
                        op,
                    )
                elif isinstance(outcome, Unknown | Raised):
                    epoch.uncertain = epoch.uncertain or not last
                    if last and isinstance(outcome, Unknown):
                        self.resolved.append(
                            f"{describe(op)}: did not take effect (not in the final log)"
                        )
                continue
            end = first + len(op.markers) - 1
            if epoch.chain[first - 1 : end] != list(op.markers):
                self.flag(
                    "APPEND-003",
                    f"only part of the batch {markers_text(op.markers)} is stored, from seq {first}",
                    op,
                )
                continue
            if isinstance(outcome, Returned) and end != outcome.value:
                self.flag(
                    "SEQ-003",
                    f"the append returned head {outcome.value}, but its events are at seqs "
                    f"{first}..{end}",
                    op,
                )
                continue
            if isinstance(outcome, Unknown):
                self.resolved.append(f"{describe(op)}: took effect (stored at seqs {first}..{end})")
            epoch.batches.append((first, end, op))
        epoch.batches.sort(key=lambda b: b[0])
        epoch.ends = [end for _, end, _ in epoch.batches]

    def claimed_chain(self, epoch: _Epoch, kept: list[str]) -> list[str]:
        """An earlier epoch's chain, pieced together from acknowledgements and reads."""
        slots: list[str | None] = list(kept)
        claimant: dict[int, Operation | None] = dict.fromkeys(range(1, len(kept) + 1))

        def claim(seq: int, marker: str, op: Operation) -> None:
            while len(slots) < seq:
                slots.append(None)
            held = slots[seq - 1]
            if held is None:
                slots[seq - 1] = marker
                claimant[seq] = op
            elif held != marker:
                other = claimant.get(seq)
                self.flag(
                    "READ-003",
                    f"seq {seq} holds {marker} for one call and {held} for another, with no "
                    "truncate or delete between them",
                    other if other is not None else epoch.removal,
                    op,
                )

        for op in epoch.ops:
            outcome = op.outcome
            if op.kind == "append" and isinstance(outcome, Returned) and op.markers:
                for n, marker in enumerate(op.markers):
                    claim(outcome.value - len(op.markers) + 1 + n, marker, op)
        for op in epoch.ops:
            outcome = op.outcome
            if op.kind == "read" and isinstance(outcome, Returned):
                for seq, marker in outcome.events:
                    claim(seq, marker, op)
        self.stage_done()
        if None in slots:
            hole = slots.index(None) + 1
            raise ChainUndecided(f"nobody saw seq {hole} before a truncate/delete")
        return [s for s in slots if s is not None]

    def check_lost_updates(self, epoch: _Epoch) -> None:
        """No two appends of one epoch succeed from one head or at overlapping seqs."""
        by_head: dict[int, Operation] = {}
        ranges: list[tuple[int, int, Operation]] = []
        for op in epoch.ops:
            outcome = op.outcome
            if op.kind != "append" or not op.markers or not isinstance(outcome, Returned):
                continue
            if op.expected_head is not None:
                rival = by_head.setdefault(op.expected_head, op)
                if rival is not op:
                    self.flag(
                        "APPEND-004",
                        f"{describe(rival)} and {describe(op)}: lost update, two appends "
                        f"succeeded with expected_head {op.expected_head}",
                        rival,
                        op,
                    )
                    continue
            ranges.append((outcome.value - len(op.markers) + 1, outcome.value, op))
        ranges.sort(key=lambda r: r[0])
        for (_, end, first), (start, _, second) in itertools.pairwise(ranges):
            if start <= end:
                self.flag(
                    "APPEND-004",
                    f"{describe(first)} and {describe(second)}: forked log, both were "
                    f"acknowledged at seq {start}",
                    first,
                    second,
                )

    def check_removal(self, before: _Epoch, removal: Operation) -> list[str]:
        """What the removal opening the next epoch kept, checked against the chain it cut."""
        if removal.kind == "delete":
            return []
        head = len(before.chain)
        last_writer = before.batches[-1][2] if before.batches else None
        if removal.expected_head is not None and removal.expected_head != head:
            if removal.expected_head > head and before.uncertain:
                raise ChainUndecided("an unseen append may have moved the head before a truncate")
            self.flag(
                "TRUNC-003",
                f"the truncate with expected_head {removal.expected_head} succeeded, but the "
                f"head was {head}",
                removal,
                last_writer,
            )
        elif removal.to_seq > head:
            if before.uncertain:
                raise ChainUndecided("an unseen append may have moved the head before a truncate")
            self.flag(
                "TRUNC-002",
                f"the truncate to {removal.to_seq} succeeded, but the head was {head}",
                removal,
                last_writer,
            )
        return before.chain[: removal.to_seq]

    # -- 4. real time -----------------------------------------------------------------------
    def check_real_time(self, epochs: list[_Epoch]) -> None:
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
        seen_until = [_NEVER] * (len(steps) + 1)  # earliest response of a call that saw version v
        seen_until_by: list[Operation | None] = [None] * (len(steps) + 1)
        missed_after = [_BEFORE] * (len(steps) + 1)  # latest invocation of a call that saw v
        missed_after_by: list[Operation | None] = [None] * (len(steps) + 1)

        def saw(version: int, op: Operation, upper: bool = True) -> None:
            if upper and _done(op) < seen_until[version]:
                seen_until[version], seen_until_by[version] = _done(op), op
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

        at = [_BEFORE] * (len(steps) + 1)
        why: list[tuple[str, int, Operation | None]] = [("start", 0, None)] * (len(steps) + 1)
        for k in range(1, len(steps) + 1):
            op = steps[k - 1]
            earliest = op.invoked
            reason: tuple[str, int, Operation | None] = ("own", k, op)
            if at[k - 1] > earliest:
                earliest, reason = at[k - 1], ("chain", k - 1, None)
            if missed_after[k - 1] > earliest:
                earliest, reason = missed_after[k - 1], ("missed", k - 1, missed_after_by[k - 1])
            latest, late_by = _done(op), None
            if seen_until[k] < latest:
                latest, late_by = seen_until[k], seen_until_by[k]
            if earliest > latest:
                while reason[0] == "chain":
                    reason = why[reason[1]]
                self.explain_real_time(k, steps, lengths, reason, late_by)
                return
            at[k], why[k] = earliest, reason

    def observed_head(self, epoch: _Epoch, op: Operation) -> int | None:
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
                    f"a read since {op.since_seq} got nothing, but the {_kind(epoch)} before it "
                    f"kept seqs 1..{epoch.base}",
                    op,
                    epoch.removal,
                )
                return None
            return -op.since_seq - 1
        if not self.is_slice(epoch, op, outcome):
            return None
        return outcome.events[-1][0]

    def is_slice(self, epoch: _Epoch, op: Operation, outcome: Returned) -> bool:
        """Are the read's events the chain's events at those seqs? Flags it if not."""
        chain = epoch.chain
        for seq, marker in outcome.events:
            held = chain[seq - 1] if seq <= len(chain) else None
            if held == marker:
                continue
            writer = self.writers[marker][0]
            home = self.epoch_of.get(id(writer), epoch.number)
            if home < epoch.number and epoch.removal is not None:
                self.flag(
                    "DELETE-001" if epoch.removal.kind == "delete" else "TRUNC-001",
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
                f"a read ended at seq {outcome.events[-1][0]}, but the {_kind(epoch)} before it "
                f"kept seqs 1..{epoch.base}",
                op,
                epoch.removal,
            )
            return False
        return True

    def flag_missing_head(self, epoch: _Epoch, op: Operation, head: int) -> None:
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
                + (f" after the {_kind(epoch)}" if epoch.removal is not None else ""),
                op,
            )
        else:
            self.flag(
                rule_id,
                f"the call saw head {head}, but the {_kind(epoch)} before it kept seqs "
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

    # -- driver -------------------------------------------------------------------------------
    def run(self) -> str:
        """Decide the session; returns ``"chain"``, or raises `ChainUndecided` / `AnomaliesFound`."""
        self.check_shapes()
        epochs = self.split_epochs()
        kept: list[str] = []
        for n, epoch in enumerate(epochs):
            last = n == len(epochs) - 1
            self.check_lost_updates(epoch)
            self.stage_done()
            self.build_chain(epoch, kept, last)
            self.stage_done()
            if not last:
                removal = epochs[n + 1].removal
                assert removal is not None
                kept = self.check_removal(epoch, removal)
                self.stage_done()
        self.check_real_time(epochs)
        self.stage_done()
        return "chain"


def _kind(epoch: _Epoch) -> str:
    return epoch.removal.kind if epoch.removal is not None else "start"


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
