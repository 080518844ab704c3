"""Compaction: replacing a long conversation by a summary (rules COMPACT-001 to COMPACT-005).

A compaction appends one `Summary` event; it never deletes or rewrites
events, so every checkpoint before it stays restorable. The fold then shows the
summary in place of what it covers (FOLD-006).

What a compaction covers is decided here, without I/O: `compaction_boundary`
is the last *clean* seq of the log (no tool call open, see `ToolCallLedger`),
because a summary that swallowed a tool call but not its result would leave
the result dangling. When the boundary covers nothing the fold does not already
show as a summary, compaction is a no-op (COMPACT-003).

The summarizer is a protocol: `Summarizer.summarize` turns the folded
conversation into text. One that can count tokens with its model's tokenizer
also implements `TokenCounter`, and compaction then reports its counts as
``measured``; otherwise they come from `estimate_tokens` and are reported as
``estimated`` (COMPACT-002). No count is ever a made-up percentage.

Progress is a stream of `CompactionProgress` values: ``start`` first; then
``progress`` for the stages in the order of `STAGES`; last exactly one of
``done``, ``error`` or ``cancelled`` (COMPACT-002).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal, Protocol, TypeAlias, runtime_checkable

import msgspec

from .conversation import Message, ToolCallLedger, fold_model
from .records import StoredEvent

__all__ = [
    "STAGES",
    "CompactionPhase",
    "CompactionProgress",
    "CompactionStage",
    "Summarizer",
    "TokenCountKind",
    "TokenCounter",
    "compaction_boundary",
]

CompactionPhase: TypeAlias = Literal["start", "progress", "done", "error", "cancelled"]
CompactionStage: TypeAlias = Literal[
    "measurement", "archiving", "normalization", "summarization", "projection", "persistence"
]
TokenCountKind: TypeAlias = Literal["measured", "estimated"]

STAGES: Final[tuple[CompactionStage, ...]] = (
    "measurement",
    "archiving",
    "normalization",
    "summarization",
    "projection",
    "persistence",
)
"""The stages of a compaction, in the order they run."""


class CompactionProgress(msgspec.Struct, frozen=True, kw_only=True):
    """One report of a running compaction.

    ``stage`` is None for ``start`` and for a no-op ``done``. ``completed`` /
    ``total`` count the stage's items (events archived, for ``archiving``);
    ``tokens_before`` / ``tokens_after`` are the conversation's size before and
    after, as soon as known, and ``token_count`` says whether they were
    measured or estimated. ``done`` carries ``reduced`` (whether a summary was
    written) and, when it was, ``summary_seq``; ``error`` carries ``error``, the
    failure in one line.
    """

    phase: CompactionPhase
    stage: CompactionStage | None = None
    completed: int | None = None
    total: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    token_count: TokenCountKind | None = None
    reduced: bool | None = None
    summary_seq: int | None = None
    message: str = ""
    error: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a conversation into the text of a `Summary`."""

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        """A summary of ``messages`` (a folded conversation), following ``instructions``."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Optional for a summarizer: counts tokens the way its model does."""

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens ``messages`` take."""
        ...


def compaction_boundary(events: Iterable[StoredEvent]) -> int | None:
    """The ``through_seq`` a compaction of this log writes, or None for a no-op.

    The boundary is the last seq at which no tool call is open. It is a no-op
    when the fold of the log up to the boundary shows nothing but summaries
    (nothing new to summarise; an empty log included).
    """
    log = list(events)
    ledger = ToolCallLedger()
    boundary = 0
    for stored in log:
        ledger.feed(stored.event)
        if not ledger.open_calls:
            boundary = stored.seq
    if boundary == 0:
        return None
    visible = fold_model(e for e in log if e.seq <= boundary)
    if all(m.origin == "summary" for m in visible):
        return None
    return boundary
