"""The rule catalog: every clause of the contract, numbered.

Each `Rule` has a stable id (``AREA-NNN``), a strength (MUST or SHOULD), the
capability it needs (None: every backend), a short title and the normative
statement. The catalog is data: ``spec/SPEC.md`` and the kit's report tables are
generated from it, and the project's tests fail when a rule has no check or a
check names a rule that is not here. Ids are never reused or renumbered.
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

from .capabilities import Capability

__all__ = ["RULES", "RULES_BY_ID", "Rule", "Strength", "rule"]


class Strength(enum.StrEnum):
    """MUST rules decide the exit status; SHOULD rules are reported as warnings."""

    MUST = "MUST"
    SHOULD = "SHOULD"


class Rule(msgspec.Struct, frozen=True):
    """One numbered clause of the contract."""

    id: str
    strength: Strength
    capability: Capability | None
    title: str
    statement: str
    since: str = "0.1"


_M, _S = Strength.MUST, Strength.SHOULD
_DEL, _L, _T, _D, _P, _C, _G = (
    Capability.DELETE,
    Capability.LIST,
    Capability.TRUNCATE,
    Capability.DURABLE,
    Capability.MULTI_PROCESS,
    Capability.CODEC,
    Capability.GENERATION,
)

RULES: Final[tuple[Rule, ...]] = (
    # -- sequence numbers ---------------------------------------------------------
    Rule(
        "SEQ-001",
        _M,
        None,
        "Seqs are contiguous from 1",
        "The first event of a session has seq 1 and every later event the next "
        "integer: no gaps, no repeats, also across batches and after truncate.",
    ),
    Rule(
        "SEQ-002",
        _M,
        None,
        "Parent links",
        "Every stored event's parent_seq is seq - 1, and None for seq 1.",
    ),
    Rule(
        "SEQ-003",
        _M,
        None,
        "append returns the new head",
        "A successful append returns the seq of the last event of the log after it.",
    ),
    Rule(
        "SEQ-004",
        _M,
        None,
        "Stored events carry session id and UTC timestamp",
        "Every stored event carries the session id it was appended to and a ts that "
        "is an ISO 8601 timestamp with a UTC offset.",
    ),
    # -- events ----------------------------------------------------------------
    Rule(
        "EVENT-001",
        _M,
        None,
        "Events round-trip exactly",
        "read returns each appended event equal to the value appended: same kind, "
        "every field equal, including unicode text, empty strings and None.",
    ),
    Rule(
        "EVENT-002",
        _M,
        None,
        "Unstorable events are refused",
        "An event that cannot be stored exactly (e.g. text holding a lone "
        "surrogate) makes append raise InvalidArgumentError; nothing of the batch "
        "is written.",
    ),
    # -- append ----------------------------------------------------------------
    Rule(
        "APPEND-001",
        _M,
        None,
        "Empty appends write nothing",
        "Appending an empty batch writes nothing, creates no session, leaves mtime "
        "alone and returns the current head; expected_head is still checked.",
    ),
    Rule(
        "APPEND-002",
        _M,
        None,
        "Stale expected_head conflicts and writes nothing",
        "When expected_head is given and differs from the head, append raises "
        "CheckpointConflictError(session_id, expected, actual) with actual the head "
        "it saw, and the log is unchanged.",
    ),
    Rule(
        "APPEND-003",
        _M,
        None,
        "Batches are atomic",
        "After append returns or raises, either every event of the batch is in the "
        "log, contiguously, or none is.",
    ),
    Rule(
        "APPEND-004",
        _M,
        None,
        "Concurrent writers never fork a log",
        "Of several appends issued concurrently with the same expected_head, at "
        "most one succeeds; the others conflict. Appends without expected_head are "
        "all applied, each batch contiguous, no seq reused.",
    ),
    # -- arguments -------------------------------------------------------------
    Rule(
        "ARG-001",
        _M,
        None,
        "Bad session ids are refused",
        "A session id that is not a str, is empty, holds NUL, is longer than 256 "
        "characters or is not encodable as UTF-8 makes every operation raise "
        "InvalidArgumentError; nothing changes.",
    ),
    Rule(
        "ARG-002",
        _M,
        None,
        "Bad seq arguments are refused",
        "since_seq, to_seq, expected_head and expected_generation that are not int "
        "(bool included) or are negative raise InvalidArgumentError; nothing changes.",
    ),
    Rule(
        "ARG-003",
        _M,
        None,
        "Bad batches are refused whole",
        "An events argument that is not a sequence (or is str/bytes), or holds a "
        "value that is not a SessionEvent, raises InvalidArgumentError; nothing of "
        "the batch is written.",
    ),
    # -- session ids -----------------------------------------------------------
    Rule(
        "ID-001",
        _M,
        None,
        "Session ids are opaque",
        "Every valid id is stored, listed and read back exactly as given, whatever "
        "separators, dots, case, whitespace or unicode it holds.",
    ),
    Rule(
        "ID-002",
        _M,
        None,
        "Session ids are injective",
        "Distinct ids never share storage: writing to one never changes another "
        "('a/b' and 'a_b', 'A' and 'a', NFC and NFD forms, 'x' and 'x ').",
    ),
    Rule(
        "ID-003",
        _M,
        None,
        "No id escapes the store",
        "No session id makes the backend create, change or remove anything outside "
        "the store's own path ('../x', absolute paths, device names).",
    ),
    # -- read / head / list ----------------------------------------------------
    Rule(
        "READ-001",
        _M,
        None,
        "since_seq is exclusive",
        "read(session_id, since_seq) yields exactly the events with seq > since_seq, "
        "ascending; a since_seq at or past the head yields nothing.",
    ),
    Rule(
        "READ-002",
        _M,
        None,
        "Reading an unknown session creates nothing",
        "read and head of an unknown session yield nothing / 0 and create no session.",
    ),
    Rule(
        "READ-003",
        _M,
        None,
        "A read is a consistent snapshot",
        "The events one read yields equal the log at a single moment between the "
        "call and the end of iteration, even while other writers append, truncate or "
        "delete.",
    ),
    Rule(
        "HEAD-001",
        _M,
        None,
        "head is the last seq",
        "head returns the seq of the session's last event, and 0 for a session that "
        "is unknown, deleted or truncated to 0.",
    ),
    Rule(
        "LIST-001",
        _M,
        _L,
        "list_sessions lists exactly the existing sessions",
        "list_sessions returns each session that has been appended to and not "
        "deleted since, exactly once, and nothing else.",
    ),
    Rule(
        "LIST-002",
        _M,
        _L,
        "Most recently modified first",
        "list_sessions is ordered by mtime descending; sessions with equal mtime are "
        "ordered by id ascending.",
    ),
    Rule(
        "LIST-003",
        _S,
        _L,
        "mtime follows modification order",
        "mtime is seconds since the epoch of the last append or truncate that changed "
        "the session; a session modified later never gets an earlier mtime than one "
        "modified before it.",
    ),
    # -- delete ----------------------------------------------------------------
    Rule(
        "DELETE-001",
        _M,
        _DEL,
        "delete removes everything",
        "After delete, the session is not listed, head is 0 and read yields nothing. "
        "Deleting an unknown session does nothing and raises nothing.",
    ),
    Rule(
        "DELETE-002",
        _M,
        _DEL,
        "Re-appending after delete starts afresh",
        "Appending to a deleted session starts again at seq 1; no event of the "
        "deleted log ever reappears.",
    ),
    # -- truncate --------------------------------------------------------------
    Rule(
        "TRUNC-001",
        _M,
        _T,
        "truncate keeps exactly the prefix",
        "truncate(session_id, to_seq) keeps events 1..to_seq unchanged, removes the "
        "rest and returns to_seq; the next append continues at to_seq + 1.",
    ),
    Rule(
        "TRUNC-002",
        _M,
        _T,
        "to_seq beyond the head is refused",
        "truncate with to_seq greater than the head raises InvalidArgumentError and "
        "changes nothing.",
    ),
    Rule(
        "TRUNC-003",
        _M,
        _T,
        "truncate honours expected_head",
        "truncate with an expected_head different from the head raises "
        "CheckpointConflictError and changes nothing.",
    ),
    Rule(
        "TRUNC-004",
        _M,
        _T,
        "No phantom sessions",
        "Truncating an unknown session (to 0) creates no session: it is not listed afterwards.",
    ),
    Rule(
        "TRUNC-005",
        _M,
        _T,
        "Truncating to the head changes nothing",
        "truncate to the current head removes nothing and leaves mtime alone; "
        "truncating to 0 keeps the session listed, empty.",
    ),
    Rule(
        "TRUNC-006",
        _S,
        None,
        "Backends offer a generation against the ABA hazard",
        "truncate followed by appends can bring the head back to a value a stale "
        "writer remembers, so expected_head alone cannot catch that writer. Backends "
        "with TRUNCATE should declare GENERATION.",
    ),
    Rule(
        "CAP-001",
        _M,
        None,
        "Undeclared operations refuse loudly",
        "An operation whose capability is not declared raises "
        "UnsupportedOperationError and changes nothing; it never silently succeeds.",
    ),
    # -- generation ------------------------------------------------------------
    Rule(
        "GEN-001",
        _M,
        _G,
        "Generations only grow",
        "generation(session_id) is 0 until the first truncate that removes events or "
        "delete of an existing session, grows by exactly 1 with each, is unchanged "
        "by append, and survives delete and re-append.",
    ),
    Rule(
        "GEN-002",
        _M,
        _G,
        "expected_generation is checked",
        "append or truncate with expected_generation different from the current "
        "generation raises CheckpointConflictError with kind 'generation' and "
        "changes nothing.",
    ),
    # -- handles, concurrency, close -------------------------------------------
    Rule(
        "HANDLE-001",
        _M,
        None,
        "Handles to one store share one log",
        "Several handles opened on the same path see one log: a write acknowledged "
        "through one is visible through every other, and expected_head conflicts are "
        "detected across handles.",
    ),
    Rule(
        "CLOSE-001",
        _M,
        None,
        "Operations after close fail clearly",
        "After close, every operation raises CheckpointerClosedError (read no later "
        "than its first iteration step); close itself is idempotent.",
    ),
    Rule(
        "CLOSE-002",
        _M,
        None,
        "Closing one handle leaves the others working",
        "Closing a handle neither loses acknowledged data nor disturbs other open "
        "handles to the same store.",
    ),
    # -- durability and processes ----------------------------------------------
    Rule(
        "DUR-001",
        _M,
        _D,
        "Acknowledged writes survive reopen",
        "After close and reopening the same path through the factory, every "
        "acknowledged append, truncate and delete is in effect.",
    ),
    Rule(
        "DUR-002",
        _M,
        _D,
        "Acknowledged writes survive a process kill",
        "After the writing process is killed (SIGKILL) at any point, reopening "
        "shows every acknowledged append, no partially visible batch, contiguous "
        "seqs, and check_integrity reports ok.",
    ),
    Rule(
        "DUR-003",
        _M,
        _D,
        "Acknowledged writes survive power loss",
        "After a power loss at any point, where only what was made durable survives "
        "and unsynced writes may be lost, reordered or torn (cut short or "
        "zero-filled), reopening shows every acknowledged append, truncate and "
        "delete in effect and the interrupted operation wholly or not at all: no "
        "partially visible batch, contiguous seqs with correct parent links, and "
        "check_integrity reports ok; cutting off a torn tail is allowed. A write "
        "torn into garbage may instead make reads of the damaged session raise "
        "CorruptStoreError, with check_integrity reporting it, but never return "
        "wrong events.",
    ),
    Rule(
        "KILL-001",
        _M,
        _P,
        "A killed writer leaves nothing half-done",
        "A process killed at any point of a write leaves that write wholly applied or "
        "wholly absent, and releases everything it held: other processes carry on "
        "without waiting for it.",
    ),
    Rule(
        "MP-001",
        _M,
        _P,
        "Processes share one log safely",
        "Handles in different processes see each other's acknowledged writes, and "
        "APPEND-004 holds across processes: no lost update, no forked log.",
    ),
    # -- integrity and schema ----------------------------------------------------
    Rule(
        "INTEG-001",
        _M,
        None,
        "A healthy store reports ok",
        "check_integrity on a store written only through the contract reports ok "
        "and changes nothing.",
    ),
    Rule(
        "INTEG-002",
        _M,
        None,
        "Damage is reported, not hidden",
        "check_integrity on a damaged store reports ok=False with a detail naming "
        "what is wrong; reads of damaged data raise CorruptStoreError rather than "
        "returning wrong events.",
    ),
    Rule(
        "SCHEMA-001",
        _M,
        None,
        "Newer stores are refused untouched",
        "Opening a store written by a newer, incompatible format raises "
        "SchemaVersionError and leaves every byte of it unchanged.",
    ),
    # -- codecs --------------------------------------------------------------------
    Rule(
        "CODEC-001",
        _M,
        _C,
        "Payloads pass through the codec",
        "With a codec configured, every event round-trips through encode and decode "
        "and reopening with the same codec reads it back.",
    ),
    Rule(
        "CODEC-002",
        _M,
        _C,
        "Encode failure writes nothing",
        "When the codec fails to encode any event of a batch, append raises "
        "CodecError, nothing of the batch is written and the head is unchanged.",
    ),
    Rule(
        "CODEC-003",
        _M,
        _C,
        "Decode failure is raised, never repaired",
        "When the codec fails to decode a stored payload, read raises CodecError; no "
        "event is skipped, repaired or rewritten, and the store's bytes are "
        "unchanged. It is never treated as a torn tail.",
    ),
    Rule(
        "CODEC-004",
        _M,
        _C,
        "No plaintext fallback",
        "A payload the configured codec cannot decode is never returned as if it "
        "were plaintext or decoded some other way.",
    ),
    Rule(
        "CODEC-005",
        _M,
        _C,
        "No plaintext at rest",
        "With a codec configured, no event payload appears in plaintext in any file "
        "under the store's path.",
    ),
)

RULES_BY_ID: Final[dict[str, Rule]] = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with this id; KeyError names the unknown id."""
    try:
        return RULES_BY_ID[rule_id]
    except KeyError:
        raise KeyError(f"no rule {rule_id!r} in the catalog") from None
