"""The history checker's fast path: one session decided from the order its events show.

Every appended event is unique, so the final log, the reads and the returned
heads say where each batch went; the order of versions is read off them, never
searched for (as Elle does). `SessionChain.run` checks one session in stages —
shapes, epochs, chains, then real time (`realtime`); see
`checkpointspec.conformance.engines.history` for what each proves — and stops at
the first stage that finds anomalies, since later ones would only repeat them.
Where an event came from, and whether a sequence of them holds whole batches,
is the ledger's to say (`Ledger.check_sequence`). When the order is not fixed by the events
(a truncate overlapping other calls, a removal that may or may not have
happened, an unseen seq before a truncate) it raises `ChainUndecided` and the
caller falls back to the search. Nothing here does I/O.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

from ..contract.ledger import Ledger, markers_text
from .causes import lost_update_rules
from .epochs import (
    AnomaliesFound,
    ChainUndecided,
    Epoch,
    Findings,
    done,
    gone_rule,
)
from .realtime import RealTime
from .records import (
    Conflicted,
    Operation,
    Raised,
    Returned,
    Unknown,
    describe,
)

__all__ = ["AnomaliesFound", "ChainUndecided", "SessionChain"]


class SessionChain(Findings):
    """Checks one session's calls against its final log.

    ``ledger`` holds every marker of the whole history with the append that
    carried it; ``limit`` caps the anomalies recorded. ``across_processes`` says
    the recorder's processes are processes (a lost update between two of them is
    MP-001), not handles of one (APPEND-004).
    """

    def __init__(
        self,
        name: str,
        ops: list[Operation],
        final: list[str],
        ledger: Ledger[Operation],
        limit: int,
        across_processes: bool = True,
    ) -> None:
        super().__init__(name, limit)
        self.ops = ops
        self.final = final
        self.ledger = ledger
        self.across_processes = across_processes
        # Where each event was seen stored: a seq never moves, so the final log and
        # every read say where its batch was written (the final log first).
        self.seen_at: dict[str, int] = {}
        for op in ops:
            if op.kind == "read" and isinstance(op.outcome, Returned):
                self.seen_at.update((marker, seq) for seq, marker in op.outcome.events)
        self.seen_at.update((marker, seq) for seq, marker in enumerate(final, 1))
        self.resolved: list[str] = []
        self.epoch_of: dict[int, int] = {}  # id(append op) -> epoch number
        # A truncate may keep only the first events of a batch: then a log can
        # legally hold a batch's prefix, and wholeness is checked per epoch.
        self.may_cut = any(
            op.kind == "truncate" and not isinstance(op.outcome, Conflicted) for op in ops
        )

    # -- 1. shapes --------------------------------------------------------------------------
    def check_shapes(self) -> None:
        self.check_sequence(self.final, None)
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
                self.check_sequence([m for _, m in outcome.events], op)
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
                if outcome.value < size:
                    self.flag(
                        "SEQ-003",
                        f"an append of {size} event{'s' if size != 1 else ''} returned head "
                        f"{outcome.value}",
                        op,
                        expected=f"a head of at least {size}",
                    )
                elif op.expected_head is not None and outcome.value != op.expected_head + size:
                    self.check_stale_head(op, op.expected_head, outcome.value)
        self.stage_done()

    def check_stale_head(self, op: Operation, expected: int, value: int) -> None:
        """An append with ``expected_head`` acknowledged at a head other than
        ``expected + len(batch)``: stored from a stale head (a lost update when a write
        that moved the head was in flight with it, else APPEND-002), the wrong head it
        returned then a symptom; or stored where ``expected`` said, its returned head
        alone wrong (SEQ-003). Where its events were seen decides (`causes`)."""
        size = len(op.markers)
        seen = self.seen_at.get(op.markers[0])
        stored_from = seen - 1 if seen is not None else value - size
        if stored_from == expected:
            self.flag(
                "SEQ-003",
                f"an append of {size} event{'s' if size != 1 else ''} with expected_head "
                f"{expected} is stored at seqs {expected + 1}..{expected + size}, yet returned "
                f"head {value}",
                op,
                expected=f"head {expected + size}",
            )
            return
        conflict = (
            f"CheckpointConflictError(expected {expected}, actual {stored_from}), the log unchanged"
        )
        rival = self.mover(op, expected)
        if rival is None:
            self.flag(
                "APPEND-002",
                f"{describe(op)} was stored from head {stored_from}, not its expected_head "
                f"{expected}, with no other write in flight: a stale expected_head was accepted",
                op,
                expected=conflict,
            )
        else:
            rule_id, also = lost_update_rules(op, rival, self.across_processes)
            both = (
                f"two appends succeeded with expected_head {expected}"
                if rival.expected_head == expected
                else f"{describe(rival)}, in flight with it, had moved the head from {expected}"
            )
            self.flag(
                rule_id,
                f"lost update: {describe(op)} was stored from head {stored_from}, not its "
                f"expected_head {expected}: {both}",
                op,
                rival,
                also=also,
                expected=conflict,
            )
        if value != stored_from + size:
            self.flag(
                "SEQ-003",
                f"the append stored at seqs {stored_from + 1}..{stored_from + size} returned "
                f"head {value}",
                op,
                expected=f"head {stored_from + size}",
            )

    def mover(self, op: Operation, head: int) -> Operation | None:
        """The write in flight with ``op`` that moved the head from ``head``: one whose batch
        was seen or acknowledged covering seq ``head + 1``, else any append in flight with
        it that may have taken effect; the earliest invoked; None if there is none."""
        in_flight = [
            other
            for other in self.ops
            if other.kind == "append"
            and other.markers
            and other is not op
            and not isinstance(other.outcome, Conflicted)
            and other.invoked <= done(op)
            and done(other) >= op.invoked
        ]

        def covers(other: Operation) -> bool:
            seen = self.seen_at.get(other.markers[0])
            starts = [seen] if seen is not None else []
            if isinstance(other.outcome, Returned):
                starts.append(other.outcome.value - len(other.markers) + 1)
            return any(start <= head + 1 < start + len(other.markers) for start in starts)

        movers = [other for other in in_flight if covers(other)] or in_flight
        return min(movers, key=lambda other: (other.invoked, other.process), default=None)

    def check_sequence(self, markers: Sequence[str], reader: Operation | None) -> None:
        """Each marker once, appended to this session and not refused, every batch whole
        and in order (`Ledger.check_sequence`).

        ``reader`` is the read that returned ``markers``, None for the final log. A
        read may start inside a batch (its since_seq cuts it), never end inside one
        — unless a truncate may have cut that batch; a batch it shows partly is
        APPEND-003 (a batch seen partly was stored partly, `causes`), an event it
        shows twice READ-003.
        """
        found = self.ledger.check_sequence(
            markers,
            self.name,
            where="the final log" if reader is None else "a read",
            broken_rule="APPEND-003" if reader is None else "READ-003",
            torn_rule="APPEND-003",
            may_cut=self.may_cut,
            may_start_inside=reader is not None,
        )
        if found is not None:
            writer = found.entry.writer if found.entry is not None else None
            self.flag(found.rule_id, found.reason, reader, writer)

    # -- 2. epochs --------------------------------------------------------------------------
    def split_epochs(self) -> list[Epoch]:
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
            if done(before) >= after.invoked:
                raise ChainUndecided("two truncates/deletes overlap")
        epochs = [Epoch(0, None)] + [Epoch(n + 1, r) for n, r in enumerate(removals)]
        ends = [done(r) for r in removals]
        removal_ids = {id(r) for r in removals}
        for op in self.ops:
            if id(op) in removal_ids:
                continue
            number = bisect.bisect_left(ends, op.invoked)
            if number < len(removals) and done(op) >= removals[number].invoked:
                raise ChainUndecided(
                    f"process {op.process}'s {op.kind} overlaps a {removals[number].kind}"
                )
            epochs[number].ops.append(op)
            if op.kind == "append":
                self.epoch_of[id(op)] = number
        return epochs

    # -- 3. chains --------------------------------------------------------------------------
    def build_chain(self, epoch: Epoch, kept: list[str], last: bool) -> None:
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
            writer = self.ledger.writer(marker)
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
                    gone_rule(gone),
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
                if isinstance(outcome, Returned) and not self.named(op):
                    # (a lost update's stale append, named already, is missing by it)
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

    def claimed_chain(self, epoch: Epoch, kept: list[str]) -> list[str]:
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

    def check_lost_updates(self, epoch: Epoch) -> None:
        """No two appends of one epoch succeed from one head or at overlapping seqs.

        Of the two, the one not seen stored where its acknowledgement says (else the later
        invoked) is the anomalous call; a call named already is not named again."""
        by_head: dict[int, Operation] = {}
        ranges: list[tuple[int, int, Operation]] = []
        for op in epoch.ops:
            outcome = op.outcome
            if op.kind != "append" or not op.markers or not isinstance(outcome, Returned):
                continue
            if op.expected_head is not None:
                rival = by_head.setdefault(op.expected_head, op)
                if rival is not op:
                    stale, other = self.stale_of(rival, op)
                    if not (self.named(stale) or self.named(other)):
                        rule_id, also = lost_update_rules(stale, other, self.across_processes)
                        self.flag(
                            rule_id,
                            f"{describe(other)} and {describe(stale)}: lost update, two appends "
                            f"succeeded with expected_head {op.expected_head}",
                            stale,
                            other,
                            also=also,
                            expected=f"CheckpointConflictError(expected {op.expected_head}, "
                            f"actual {op.expected_head + len(other.markers)}), the log unchanged",
                        )
                    continue
            ranges.append((outcome.value - len(op.markers) + 1, outcome.value, op))
        ranges.sort(key=lambda r: r[0])
        for (_, end, first), (start, _, second) in itertools.pairwise(ranges):
            if start <= end and not (self.named(first) or self.named(second)):
                stale, other = self.stale_of(first, second)
                rule_id, also = lost_update_rules(stale, other, self.across_processes)
                self.flag(
                    rule_id,
                    f"{describe(other)} and {describe(stale)}: forked log, both were "
                    f"acknowledged at seq {start}",
                    stale,
                    other,
                    also=also,
                    expected=f"seqs after {describe(other)}'s, none reused",
                )

    def stale_of(self, one: Operation, two: Operation) -> tuple[Operation, Operation]:
        """Of two appends acknowledged from one head or at one seq: (the one not seen stored
        where it was acknowledged, else the later invoked; the other)."""

        def where_acknowledged(op: Operation) -> bool:
            seen = self.seen_at.get(op.markers[0])
            assert isinstance(op.outcome, Returned)
            return seen == op.outcome.value - len(op.markers) + 1

        early, late = sorted((one, two), key=lambda op: (op.invoked, op.process, op.index))
        if where_acknowledged(late) and not where_acknowledged(early):
            return early, late
        return late, early

    def check_removal(self, before: Epoch, removal: Operation) -> list[str]:
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
        RealTime(self, self.ledger, self.epoch_of).check(epochs)
        self.all_done()
        return "chain"
