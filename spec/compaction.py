"""Compaction: replacing a long conversation by a summary (rules COMPACT-001 to COMPACT-005).

A compaction appends one `Summary` event; it never deletes or rewrites
events, so every checkpoint before it stays restorable. The fold then shows the
summary in place of what it covers (FOLD-006).

What a compaction covers is decided here, without I/O: `compaction_boundary`
is the last *clean* seq of the log (no tool call open, see `ToolCallLedger`),
because a summary that swallowed a tool call but not its result would leave
the result dangling. The boundary also never falls inside a folded message:
tool results coalesce across invisible events (FOLD-003), so a tool-results
turn can hold a result on each side of a clean seq, and a summary covering the
first would remove the whole turn (FOLD-006), the later result with it,
although the summarizer never saw it. The messages a compaction replaces are
then exactly those of the log's fold whose events all lie at or before the
boundary. When those are nothing but summaries (none at all included),
compaction is a no-op (COMPACT-003).

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

    The boundary is the last seq at which no tool call is open and no message
    of the log's fold holds events on both sides (a seq *s* is inside a message
    whose first seq is at most *s* and whose last is greater). It is a no-op
    when the messages the summary would replace, those of the fold whose seqs
    all lie at or before the boundary, are nothing but summaries (nothing new
    to summarise; an empty log included).
    """
    log = list(events)
    ledger = ToolCallLedger()
    clean: list[int] = []
    for stored in log:
        ledger.feed(stored.event)
        if not ledger.open_calls:
            clean.append(stored.seq)
    messages = fold_model(log)
    inside: set[int] = set()
    for message in messages:
        inside.update(range(message.seqs[0], message.seqs[-1]))
    boundary = next((seq for seq in reversed(clean) if seq not in inside), None)
    if boundary is None:
        return None
    replaced = [m for m in messages if m.seqs[-1] <= boundary]
    if all(m.origin == "summary" for m in replaced):
        return None
    return boundary
