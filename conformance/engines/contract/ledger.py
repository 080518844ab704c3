"""The event ledger: where every event the kit tried to append came from, and what became of it.

Every event the kit appends carries a marker no other event has
(`checkpointspec.conformance.engines.contract.outcomes.make_event`), so an event that
shows up where it must not — in another session, after it was deleted, from an
append that raised — can be traced to the call that carried it. The ledger
records each such call, either as it happens (the model-based machine) or after
the fact (the history checker), and answers two questions:

- `Ledger.intrusion`: this event is in a session's log although it must not be
  there; where does it come from, and which rule does its presence break?
- `Ledger.check_sequence`: does this sequence of events (a read, or a final log)
  hold each event once, only events appended to this session, and every batch
  whole and in order?

What the ledger does not decide: whether an acknowledged event of the session
sits at the right seq, or whether it should be gone by now for reasons of time
(a truncate that completed before a read began). That is the model's business,
or the history checker's.

A refused append's events carry the rule that keeps them out of every log
(`append_refusal_rule`): APPEND-002 for a conflict (GEN-002 for a generation
conflict), ARG-002 for an invalid argument other than the batch, APPEND-003 for
any other error (a batch is stored whole or not at all). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Literal, TypeVar

import msgspec

from ....spec import CheckpointConflictError, InvalidArgumentError

__all__ = [
    "Entry",
    "Fate",
    "Intrusion",
    "Ledger",
    "append_refusal_rule",
    "markers_text",
    "removal_rule",
]

W = TypeVar("W")

Fate = Literal["acknowledged", "refused", "unknown", "deleted", "truncated"]
"""What became of an event: its append returned (``acknowledged``) or raised
(``refused``), nobody knows (``unknown``: the writer was killed, or raised
something that may have written), or it was removed since."""

Removal = Literal["deleted", "truncated"]


class Entry(msgspec.Struct, Generic[W], frozen=True):
    """One event the kit tried to append, by its marker."""

    session_id: str
    writer: W
    """Who appended it: the handle in the machine, the `Operation` in a history."""
    batch: tuple[str, ...]
    """The markers of the whole append, in order."""
    slot: int
    """The event's place in ``batch``."""
    fate: Fate
    rule_id: str | None = None
    """For a refused append: the rule that says none of its events may be stored."""
    refusal: str = ""
    """For a refused append: the name of the error it raised."""


class Intrusion(msgspec.Struct, Generic[W], frozen=True):
    """An event found where it must not be, and the rule its presence breaks."""

    rule_id: str
    marker: str
    reason: str
    """Where it came from, as the end of a sentence: "which was deleted"."""
    entry: Entry[W] | None = None


def markers_text(markers: Sequence[str], limit: int = 6) -> str:
    """Markers as a short comma-separated list (long ones elided in the middle)."""
    if len(markers) <= limit:
        return ", ".join(markers)
    return f"{', '.join(markers[: limit - 2])}, …, {markers[-1]} ({len(markers)} events)"


def append_refusal_rule(error: BaseException) -> str:
    """The rule that keeps the events of an append that raised ``error`` out of every log."""
    if isinstance(error, CheckpointConflictError):
        return "GEN-002" if error.kind == "generation" else "APPEND-002"
    if isinstance(error, InvalidArgumentError) and error.argument != "events":
        # A refused argument other than the batch: the rule that refusal enforces.
        return error.rule_id or ("ARG-001" if error.argument == "session_id" else "ARG-002")
    return "APPEND-003"


def removal_rule(how: Removal) -> str:
    """The rule an event breaks by being read after it was deleted or truncated away."""
    return "DELETE-002" if how == "deleted" else "TRUNC-001"


class Ledger(Generic[W]):
    """Every event the kit tried to append, by marker.

    ``W`` is whatever identifies a writer to its user: the machine records the
    handle that appended, the history checker the `Operation`.
    """

    def __init__(self) -> None:
        self._entries: dict[str, Entry[W]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, marker: object) -> bool:
        return marker in self._entries

    def get(self, marker: str | None) -> Entry[W] | None:
        """The entry of ``marker``; None for an event the kit never appended."""
        return None if marker is None else self._entries.get(marker)

    def writer(self, marker: str) -> W:
        """Who appended ``marker``; KeyError for an event the kit never appended."""
        return self._entries[marker].writer

    # -- recording -----------------------------------------------------------------
    def append(
        self, session_id: str, markers: Sequence[str], writer: W, fate: Fate = "acknowledged"
    ) -> None:
        """Record the events of one append that returned (or, with ``fate="unknown"``,
        that may or may not have taken effect)."""
        self._enter(session_id, markers, writer, fate)

    def refuse(
        self,
        session_id: str,
        markers: Sequence[str],
        writer: W,
        error: BaseException,
        rule_id: str | None = None,
    ) -> None:
        """Record the events of an append that raised ``error``: none of them may be
        stored, by `append_refusal_rule` unless ``rule_id`` names the rule."""
        rule_id = rule_id or append_refusal_rule(error)
        self._enter(session_id, markers, writer, "refused", rule_id, type(error).__name__)

    def _enter(
        self,
        session_id: str,
        markers: Sequence[str],
        writer: W,
        fate: Fate,
        rule_id: str | None = None,
        refusal: str = "",
    ) -> None:
        # Markers identify events only while each is used once.
        batch = tuple(markers)
        for slot, marker in enumerate(batch):
            if marker in self._entries:
                raise ValueError(f"marker {marker!r} is used by two appends")
            self._entries[marker] = Entry(session_id, writer, batch, slot, fate, rule_id, refusal)

    def remove(self, markers: Iterable[str | None], how: Removal) -> None:
        """These events were deleted or truncated away; markers never recorded are ignored."""
        for marker in markers:
            entry = self.get(marker)
            if marker is not None and entry is not None:
                self._entries[marker] = msgspec.structs.replace(entry, fate=how)

    # -- questions -----------------------------------------------------------------
    def intrusion(self, marker: str | None, session_id: str) -> Intrusion[W] | None:
        """Why the event ``marker`` must not be in ``session_id``'s log, or None.

        None means the ledger cannot tell: the event is not one the kit appended,
        or it was appended to this session and not refused or removed (whether it
        sits at the right seq is for the model to say).
        """
        entry = self.get(marker)
        if entry is None or marker is None:
            return None
        if entry.session_id != session_id:
            reason = f"which was appended to session {entry.session_id!r}"
            return Intrusion("ID-002", marker, reason, entry)
        if entry.fate == "deleted" or entry.fate == "truncated":
            how = "truncated away" if entry.fate == "truncated" else "deleted"
            return Intrusion(removal_rule(entry.fate), marker, f"which was {how}", entry)
        if entry.fate == "refused" and entry.rule_id is not None:
            reason = f"from an append that raised {entry.refusal}"
            return Intrusion(entry.rule_id, marker, reason, entry)
        return None

    def first_intrusion(
        self, markers: Iterable[str | None], session_id: str
    ) -> Intrusion[W] | None:
        """`intrusion` for the first of ``markers`` that has one."""
        for marker in markers:
            found = self.intrusion(marker, session_id)
            if found is not None:
                return found
        return None

    def check_sequence(
        self,
        markers: Sequence[str],
        session_id: str,
        *,
        where: str,
        broken_rule: str,
        torn_rule: str | None = None,
        may_cut: bool = False,
        may_start_inside: bool = False,
    ) -> Intrusion[W] | None:
        """The first thing wrong with the events ``markers`` as ``where`` shows them, or None.

        Each event must be one the kit appended (EVENT-001), to this session and
        not refused (`intrusion`), and appear once; batches must be whole, in
        order and contiguous. A duplicate or a broken batch is ``broken_rule``:
        APPEND-003 for a log, READ-003 for what one read returned; a batch seen
        partly is ``torn_rule`` when given (a read that shows part of a batch saw a
        batch stored partly: APPEND-003). With
        ``may_start_inside`` the sequence may begin inside a batch (a read since a
        seq cuts it); with ``may_cut`` a batch may also end early (a truncate may
        have kept only its first events).
        """
        torn = torn_rule or broken_rule
        seen: set[str] = set()
        previous: Entry[W] | None = None
        for place, marker in enumerate(markers):
            entry = self._entries.get(marker)
            if marker in seen:
                return Intrusion(
                    broken_rule,
                    marker,
                    f"{where} holds {marker} twice: an append takes effect at most once",
                    entry,
                )
            seen.add(marker)
            if entry is None:
                reason = f"{where} holds {marker}, which no process appended"
                return Intrusion("EVENT-001", marker, reason)
            found = self.intrusion(marker, session_id)
            if found is not None:
                return msgspec.structs.replace(
                    found, reason=f"{where} holds {marker}, {found.reason}"
                )
            starts_batch = previous is None or previous.batch is not entry.batch
            if previous is not None and starts_batch and not _ends(previous, may_cut):
                return Intrusion(
                    torn,
                    marker,
                    f"{where} holds only {markers_text(previous.batch[: previous.slot + 1])} of the "
                    f"batch {markers_text(previous.batch)}, followed by {marker}",
                    previous,
                )
            inside = (starts_batch and entry.slot != 0) and not (may_start_inside and place == 0)
            skips = not starts_batch and previous is not None and entry.slot != previous.slot + 1
            if inside or skips:
                return Intrusion(
                    torn,
                    marker,
                    f"{where} holds {marker} out of its batch's order or without the events "
                    f"before it ({markers_text(entry.batch)})",
                    entry,
                )
            previous = entry
        if previous is not None and not _ends(previous, may_cut):
            return Intrusion(
                torn,
                previous.batch[previous.slot],
                f"{where} ends with {markers_text(previous.batch[: previous.slot + 1])}, part of the "
                f"batch {markers_text(previous.batch)}",
                previous,
            )
        return None


def _ends(entry: Entry[W], may_cut: bool) -> bool:
    """May a sequence of events move on to another batch after ``entry``?"""
    return may_cut or entry.slot == len(entry.batch) - 1
