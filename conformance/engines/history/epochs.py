"""What the history checker's stages share: the anomalies found so far, and epochs.

An *epoch* is the stretch of one session's history between two successful
truncates or deletes, with the chain of versions its appends built; see
`checkpointspec.conformance.engines.history` for how the stages use them.
Nothing here does I/O.
"""

from __future__ import annotations

from ..contract.ledger import removal_rule
from .causes import rank
from .records import Anomaly, Operation

__all__ = [
    "BEFORE",
    "NEVER",
    "AnomaliesFound",
    "ChainUndecided",
    "Epoch",
    "Findings",
    "done",
    "gone_rule",
    "removal_kind",
]

NEVER = 2**63
"""Later than any time a recorder reports: when a call that never returned completed."""
BEFORE = -(2**63)
"""Earlier than any time a recorder reports."""


def done(op: Operation) -> int:
    """When ``op`` returned; `NEVER` if it did not."""
    return NEVER if op.completed is None else op.completed


class ChainUndecided(Exception):
    """The chain cannot decide this session; the message says why."""


class AnomaliesFound(Exception):
    """Anomalies were recorded (see `Findings.anomalies`); later stages would only repeat them."""


class Findings:
    """The anomalies found in one session, at most ``limit`` of them."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.anomalies: list[Anomaly] = []

    def flag(
        self,
        rule_id: str,
        summary: str,
        *ops: Operation | None,
        also: tuple[str, ...] = (),
        expected: str = "",
    ) -> None:
        """Record an anomaly with the operations that show it (each once, in order), the
        first anomalous call first; a call already named by the same rule is not again."""
        unique: list[Operation] = []
        for op in ops:
            if op is not None and all(op is not u for u in unique):
                unique.append(op)
        if unique and any(
            a.rule_id == rule_id and a.operations and a.operations[0] is unique[0]
            for a in self.anomalies
        ):
            return
        self.anomalies.append(Anomaly(rule_id, self.name, summary, tuple(unique), also, expected))
        if len(self.anomalies) >= self.limit:
            raise AnomaliesFound

    def named(self, op: Operation) -> bool:
        """Is ``op`` the first anomalous call of an anomaly found already?"""
        return any(a.operations and a.operations[0] is op for a in self.anomalies)

    def stage_done(self) -> None:
        """End a stage: raise `AnomaliesFound` if it found any, unless every one is a lost
        update (`causes.rank` 0): what later stages find then are its symptoms."""
        if any(rank(a.rule_id) > 0 for a in self.anomalies):
            raise AnomaliesFound

    def all_done(self) -> None:
        """End the last stage: raise `AnomaliesFound` if any stage found any."""
        if self.anomalies:
            raise AnomaliesFound


class Epoch:
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


def removal_kind(epoch: Epoch) -> str:
    """What opened ``epoch``: "truncate", "delete", or "start" for the first one."""
    return epoch.removal.kind if epoch.removal is not None else "start"


def gone_rule(removal: Operation | None) -> str:
    """The rule an event breaks by being seen after ``removal`` removed it."""
    kind = removal.kind if removal is not None else "truncate"
    return removal_rule("deleted" if kind == "delete" else "truncated")
