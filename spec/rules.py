"""The rule catalog: every clause of the contract, numbered.

Each `Rule` has a stable id (``AREA-NNN``), a strength (MUST or SHOULD), the
capability it needs (None: every backend), the suite of the kit that checks it
(`RuleSuite`), the conformance level it counts towards (`ConformanceLevel`; None
for a SHOULD rule), a short title and the normative statement. The catalog is data:
``spec/SPEC.md``, the kit's suites and levels and its report tables are derived
from it, and the project's tests fail when a rule has no check or a check names
a rule that is not here. Ids are never reused or renumbered.

The checkpointer contract's rules (`CHECKPOINTER_RULES`, the storage and session
suites) are written out here; LangGraph checkpoint savers' are in
`checkpointspec.spec.langgraph.rules`, ids apart from these. The kinds a rule
is made of are in `checkpointspec.spec.rule_kinds`.
"""

from __future__ import annotations

from typing import Final

from .adk_session.rules import ADK_SESSION_RULES
from .capabilities import Capability
from .langgraph.rules import LANGGRAPH_RULES
from .openai_session.rules import OPENAI_SESSION_RULES
from .rule_kinds import (
    FRAMEWORK_LEVELS,
    LEVEL_MEANINGS,
    ConformanceLevel,
    Rule,
    RuleSuite,
    Strength,
)

__all__ = [
    "CHECKPOINTER_RULES",
    "FRAMEWORK_LEVELS",
    "LEVEL_MEANINGS",
    "RULES",
    "RULES_BY_ID",
    "ConformanceLevel",
    "Rule",
    "RuleSuite",
    "Strength",
    "rule",
]


_M, _S = Strength.MUST, Strength.SHOULD
_DEL, _L, _T, _D, _P, _C, _G, _MT, _R = (
    Capability.DELETE,
    Capability.LIST,
    Capability.TRUNCATE,
    Capability.DURABLE,
    Capability.MULTI_PROCESS,
    Capability.CODEC,
    Capability.GENERATION,
    Capability.MAINTENANCE,
    Capability.REPLICATED,
)

CHECKPOINTER_RULES: Final[tuple[Rule, ...]] = (
    # -- sequence numbers ---------------------------------------------------------
    Rule(
        "SEQ-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Seqs are contiguous from 1",
        "The first event of a session has seq 1 and every later event the next "
        "integer: no gaps, no repeats, also across batches and after truncate.",
    ),
    Rule(
        "SEQ-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Parent links",
        "Every stored event's parent_seq is seq - 1, and None for seq 1.",
    ),
    Rule(
        "SEQ-003",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "append returns the new head",
        "A successful append returns the seq of the last event of the log after it.",
    ),
    Rule(
        "SEQ-004",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Stored events carry session id and UTC timestamp",
        "Every stored event carries the session id it was appended to and a ts that "
        "is an ISO 8601 timestamp with a UTC offset.",
    ),
    # -- events ----------------------------------------------------------------
    Rule(
        "EVENT-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Events round-trip exactly",
        "read returns each appended event equal to the value appended: same kind, "
        "every field equal, including unicode text, empty strings and None.",
    ),
    Rule(
        "EVENT-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
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
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Empty appends write nothing",
        "Appending an empty batch writes nothing, creates no session, leaves mtime "
        "alone and returns the current head; expected_head is still checked.",
    ),
    Rule(
        "APPEND-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Stale expected_head conflicts and writes nothing",
        "When expected_head is given and differs from the head, append raises "
        "CheckpointConflictError(session_id, expected, actual) with actual the head "
        "it saw, and the log is unchanged.",
    ),
    Rule(
        "APPEND-003",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Batches are atomic",
        "After append returns or raises, either every event of the batch is in the "
        "log, contiguously, or none is.",
    ),
    Rule(
        "APPEND-004",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
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
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Bad session ids are refused",
        "A session id that is not a str, is empty, holds NUL, is longer than 256 "
        "characters or is not encodable as UTF-8 makes every operation raise "
        "InvalidArgumentError; nothing changes.",
    ),
    Rule(
        "ARG-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Bad seq arguments are refused",
        "since_seq, to_seq, expected_head and expected_generation that are not int "
        "(bool included) or are negative raise InvalidArgumentError; nothing changes.",
    ),
    Rule(
        "ARG-003",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
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
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Session ids are opaque",
        "Every valid id is stored, listed and read back exactly as given, whatever "
        "separators, dots, case, whitespace or unicode it holds.",
    ),
    Rule(
        "ID-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Session ids are injective",
        "Distinct ids never share storage: writing to one never changes another, "
        "whatever a store maps, escapes, folds or cuts ('a/b' and 'a_b', 'a:b' and "
        "'a_b', 'a.b' and 'ab', 'A' and 'a', NFC and NFD forms, 'x' and 'x ', two "
        "long ids that differ only in their last character).",
    ),
    Rule(
        "ID-003",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "No id escapes the store",
        "No session id makes the backend create, change or remove anything outside "
        "the store's own path ('../x', absolute paths, device names).",
    ),
    # -- read / head / list ----------------------------------------------------
    Rule(
        "READ-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "since_seq is exclusive",
        "read(session_id, since_seq) yields exactly the events with seq > since_seq, "
        "ascending; a since_seq at or past the head yields nothing.",
    ),
    Rule(
        "READ-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Reading an unknown session creates nothing",
        "read and head of an unknown session yield nothing / 0 and create no session.",
    ),
    Rule(
        "READ-003",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "A read is a consistent snapshot",
        "The events one read yields equal the log at a single moment between the "
        "call and the end of iteration, even while other writers append, truncate or "
        "delete.",
    ),
    Rule(
        "HEAD-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "head is the last seq",
        "head returns the seq of the session's last event, and 0 for a session that "
        "is unknown, deleted or truncated to 0.",
    ),
    Rule(
        "LIST-001",
        _M,
        _L,
        RuleSuite.STORAGE,
        ConformanceLevel.LIST,
        "list_sessions lists exactly the existing sessions",
        "list_sessions returns each session that has been appended to and not "
        "deleted since, exactly once, and nothing else.",
    ),
    Rule(
        "LIST-002",
        _M,
        _L,
        RuleSuite.STORAGE,
        ConformanceLevel.LIST,
        "Most recently modified first",
        "list_sessions is ordered by mtime descending; sessions with equal mtime are "
        "ordered by id ascending.",
    ),
    Rule(
        "LIST-003",
        _S,
        _L,
        RuleSuite.STORAGE,
        None,
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
        RuleSuite.STORAGE,
        ConformanceLevel.DELETE,
        "delete removes everything",
        "After delete, the session is not listed, head is 0 and read yields nothing. "
        "Deleting an unknown session does nothing and raises nothing.",
    ),
    Rule(
        "DELETE-002",
        _M,
        _DEL,
        RuleSuite.STORAGE,
        ConformanceLevel.DELETE,
        "Re-appending after delete starts afresh",
        "Appending to a deleted session starts again at seq 1; no event of the "
        "deleted log ever reappears.",
    ),
    # -- truncate --------------------------------------------------------------
    Rule(
        "TRUNC-001",
        _M,
        _T,
        RuleSuite.STORAGE,
        ConformanceLevel.TRUNCATE,
        "truncate keeps exactly the prefix",
        "truncate(session_id, to_seq) keeps events 1..to_seq unchanged, removes the "
        "rest and returns to_seq; the next append continues at to_seq + 1.",
    ),
    Rule(
        "TRUNC-002",
        _M,
        _T,
        RuleSuite.STORAGE,
        ConformanceLevel.TRUNCATE,
        "to_seq beyond the head is refused",
        "truncate with to_seq greater than the head raises InvalidArgumentError and "
        "changes nothing.",
    ),
    Rule(
        "TRUNC-003",
        _M,
        _T,
        RuleSuite.STORAGE,
        ConformanceLevel.TRUNCATE,
        "truncate honours expected_head",
        "truncate with an expected_head different from the head raises "
        "CheckpointConflictError and changes nothing.",
    ),
    Rule(
        "TRUNC-004",
        _M,
        _T,
        RuleSuite.STORAGE,
        ConformanceLevel.TRUNCATE,
        "No phantom sessions",
        "Truncating an unknown session (to 0) creates no session: it is not listed afterwards.",
    ),
    Rule(
        "TRUNC-005",
        _M,
        _T,
        RuleSuite.STORAGE,
        ConformanceLevel.TRUNCATE,
        "Truncating to the head changes nothing",
        "truncate to the current head removes nothing and leaves mtime alone; "
        "truncating to 0 keeps the session listed, empty.",
    ),
    Rule(
        "TRUNC-006",
        _S,
        None,
        RuleSuite.STORAGE,
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
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Undeclared operations refuse loudly",
        "An operation whose capability is not declared raises "
        "UnsupportedOperationError and changes nothing; it never silently succeeds.",
    ),
    # -- generation ------------------------------------------------------------
    Rule(
        "GEN-001",
        _M,
        _G,
        RuleSuite.STORAGE,
        ConformanceLevel.GENERATION,
        "Generations only grow",
        "generation(session_id) is 0 until the first truncate that removes events or "
        "delete of an existing session, grows by exactly 1 with each, is unchanged "
        "by append, and survives delete and re-append.",
    ),
    Rule(
        "GEN-002",
        _M,
        _G,
        RuleSuite.STORAGE,
        ConformanceLevel.GENERATION,
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
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Handles to one store share one log",
        "Several handles opened on the same path see one log: a write acknowledged "
        "through one is visible through every other, and expected_head conflicts are "
        "detected across handles.",
    ),
    Rule(
        "CLOSE-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Operations after close fail clearly",
        "After close, every operation raises CheckpointerClosedError (read no later "
        "than its first iteration step); close itself is idempotent.",
    ),
    Rule(
        "CLOSE-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "Closing one handle leaves the others working",
        "Closing a handle neither loses acknowledged data nor disturbs other open "
        "handles to the same store.",
    ),
    # -- durability and processes ----------------------------------------------
    Rule(
        "DUR-001",
        _M,
        _D,
        RuleSuite.STORAGE,
        ConformanceLevel.DURABLE,
        "Acknowledged writes survive reopen",
        "After close and reopening the same path through the factory, every "
        "acknowledged append, truncate and delete is in effect.",
    ),
    Rule(
        "DUR-002",
        _M,
        _D,
        RuleSuite.STORAGE,
        ConformanceLevel.DURABLE,
        "Acknowledged writes survive a process kill",
        "After the writing process is killed (SIGKILL) at any point, reopening "
        "shows every acknowledged append, no partially visible batch, contiguous "
        "seqs, and check_integrity reports ok.",
    ),
    Rule(
        "DUR-003",
        _M,
        _D,
        RuleSuite.STORAGE,
        ConformanceLevel.DURABLE,
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
        "DUR-004",
        _M,
        _R,
        RuleSuite.STORAGE,
        ConformanceLevel.REPLICATED,
        "Acknowledged writes survive the loss of the primary",
        "When the primary server is lost at any point of a workload and its standby is "
        "promoted in its place, reopening shows every acknowledged append at the seqs "
        "its head said, each once, seqs contiguous from 1 and no event of a write that "
        "was refused: nothing acknowledged is lost and the log does not fork.",
    ),
    Rule(
        "KILL-001",
        _M,
        _P,
        RuleSuite.STORAGE,
        ConformanceLevel.MULTI_PROCESS,
        "A killed writer leaves nothing half-done",
        "A process killed at any point of a write leaves that write wholly applied or "
        "wholly absent, and releases everything it held: other processes carry on "
        "without waiting for it.",
    ),
    Rule(
        "MP-001",
        _M,
        _P,
        RuleSuite.STORAGE,
        ConformanceLevel.MULTI_PROCESS,
        "Processes share one log safely",
        "Handles in different processes see each other's acknowledged writes, and "
        "APPEND-004 holds across processes: no lost update, no forked log.",
    ),
    # -- lost connections (server backends, through the ServerRouted opt-in) ---------
    Rule(
        "NET-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.CONNECTION_LOSS,
        "A lost connection loses nothing and applies nothing twice",
        "When connections to the server are cut at any byte of either direction, "
        "delayed or reset, every operation ends in success, a contract error, or "
        "ConnectionLostError (outcome unknown); a write refused with any other contract "
        "error wrote nothing, every acknowledged write is in effect, and every write "
        "takes effect at most once, however often it was sent again.",
    ),
    # -- the stdio protocol (backends served over it, --process) ----------------------
    Rule(
        "PROTO-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.STDIO_PROTOCOL,
        "The stdio protocol is spoken exactly",
        "A backend served over the stdio protocol answers every request with exactly "
        "one well-formed reply carrying the request's id (a read's events replies and "
        "a fault report before it), sends nothing unsolicited, and does not exit while "
        "a request is in flight. A backend not served over the protocol cannot break "
        "it: the rule does not apply to it.",
    ),
    # -- maintenance lock ------------------------------------------------------------
    Rule(
        "MAINT-001",
        _M,
        _MT,
        RuleSuite.STORAGE,
        ConformanceLevel.MAINTENANCE,
        "The maintenance lock shuts other writers out",
        "While a handle holds a session's maintenance lock, append, truncate and "
        "delete of that session through any other handle raise SessionLockedError "
        "at once and write nothing.",
    ),
    Rule(
        "MAINT-002",
        _M,
        _MT,
        RuleSuite.STORAGE,
        ConformanceLevel.MAINTENANCE,
        "The holder writes, everyone reads",
        "While a handle holds a session's maintenance lock, writes through that "
        "handle succeed, reads through every handle succeed, and other sessions "
        "are written as usual.",
    ),
    Rule(
        "MAINT-003",
        _M,
        _MT,
        RuleSuite.STORAGE,
        ConformanceLevel.MAINTENANCE,
        "One holder at a time, until release or close",
        "acquire_maintenance of a held session raises SessionLockedError, through "
        "any handle including the holder's. After release_maintenance or close of "
        "the holding handle, every handle may write and acquire again.",
    ),
    Rule(
        "MAINT-004",
        _M,
        _MT,
        RuleSuite.STORAGE,
        ConformanceLevel.MAINTENANCE,
        "Across processes, and a dead holder frees the lock",
        "With MULTI_PROCESS, the lock shuts out writers in every process, and a "
        "lock whose holding process died (SIGKILL) is released: the next write "
        "or acquire succeeds.",
    ),
    # -- the session layer: fold ------------------------------------------------------
    Rule(
        "FOLD-001",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A prompt is a user turn of its own",
        "fold turns each user prompt into one user message (origin prompt): its "
        "text, then one text block per extra block of a block-form prompt.",
    ),
    Rule(
        "FOLD-002",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "An assistant message keeps its tool calls",
        "fold turns each assistant message into one assistant message: its text "
        "(left out when empty), then one tool_use block per tool call, in order.",
    ),
    Rule(
        "FOLD-003",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Consecutive tool results share one user turn",
        "Tool results with only invisible events between them are coalesced into "
        "one user message (origin tool_results), in log order.",
    ),
    Rule(
        "FOLD-004",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Snapshots and tool starts are invisible",
        "File snapshots and tool_started events never enter the conversation and "
        "do not separate tool results.",
    ),
    Rule(
        "FOLD-005",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Reminders, repairs and background completions",
        "A runtime reminder becomes a user message of origin reminder; a background "
        "completion one of origin background with the task id as ref; a repair "
        "message naming a tool call becomes an error tool result for that call, "
        "and one naming none a user message of origin repair.",
    ),
    Rule(
        "FOLD-006",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A summary replaces what it covers",
        "A summary at seq s covers the events up to min(through_seq, s - 1): every "
        "message holding one is removed, and one user message of origin summary "
        "takes the place of the first removed (the front when none was).",
    ),
    # -- the session layer: checkpoints -----------------------------------------------
    Rule(
        "CKPT-001",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "One checkpoint per user prompt",
        "list_checkpoints returns one checkpoint per user prompt, block-form "
        "included, in seq order, with the prompt's seq, text and ts; reminders, "
        "repairs and background completions are never checkpoints.",
    ),
    Rule(
        "CKPT-002",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A checkpoint lists the files a restore puts back",
        "A checkpoint's files are the paths snapshotted after it whose earliest "
        "snapshot after it can be restored, sorted.",
    ),
    Rule(
        "CKPT-003",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "and the files it cannot, with why",
        "A checkpoint's unavailable_files are the other paths snapshotted after it, "
        "each with its reason (truncated, unsafe_path, undecodable), sorted and "
        "disjoint from files.",
    ),
    # -- the session layer: file snapshots ---------------------------------------------
    Rule(
        "SNAP-001",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A tool records the file before changing it",
        "Workspace.write and Workspace.delete append a FileSnapshot (canonical "
        "path, content before or None when absent, UTF-8 text or base64, "
        "hash_after of what is left, the tool call id) and only then change the "
        "file. Deleting a missing file is InvalidArgumentError (no_such_file).",
    ),
    Rule(
        "SNAP-002",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Oversized content is marked truncated",
        "Content larger than the workspace's snapshot limit is recorded with "
        "truncated=True and content_before empty; the write itself goes ahead.",
    ),
    Rule(
        "SNAP-003",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Paths stay inside the workspace",
        "Workspace refuses an absolute path, a '..' component, NUL, an empty path, "
        "a path in the reserved .checkpointspec/ folder and a path resolving "
        "through a symlink outside its root with InvalidArgumentError "
        "(unsafe_path), recording and writing nothing.",
    ),
    Rule(
        "SNAP-004",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "No snapshot, no change",
        "When the snapshot cannot be appended (conflict, locked session, closed "
        "handle, storage error) the file is left unchanged and the error raised.",
    ),
    # -- the session layer: restore ---------------------------------------------------
    Rule(
        "RESTORE-001",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Restore rolls files and log back to just before the prompt",
        "restore(session, seq) leaves the log holding events 1..seq-1 and every "
        "path snapshotted after seq with the content of its earliest snapshot "
        "after seq (deleted when it did not exist); restored_files names them.",
    ),
    Rule(
        "RESTORE-002",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "The target is validated",
        "A restore of an unknown session or to a seq that is not a user prompt "
        "raises RestoreError (unknown_session, not_a_checkpoint) and changes "
        "nothing.",
    ),
    Rule(
        "RESTORE-003",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Everything is preflighted before anything is touched",
        "An unfinished tool call before the target, a missing workspace, an unsafe "
        "path, a truncated or undecodable snapshot, and a file changed out-of-band "
        "(its hash differs from the last recorded hash_after) each raise "
        "RestoreError with that reason and the path, with files and log unchanged. "
        "Snapshots without hash_after are reported as unchecked.",
    ),
    Rule(
        "RESTORE-004",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "files=False and conversation=False do what they say",
        "With files=False no file is touched; with conversation=False the log is "
        "not truncated; the result reports exactly what was restored.",
    ),
    Rule(
        "RESTORE-005",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A failed or cancelled restore puts everything back",
        "A write that fails mid-restore (disk full, permission denied), a truncate "
        "conflict and a cancellation leave every file and the log as they were "
        "before the restore, and raise RestoreError (apply_failed, log_changed, "
        "cancelled).",
    ),
    Rule(
        "RESTORE-006",
        _M,
        _D,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A killed restore is rolled back or forward on the next open",
        "A restore killed at any point (SIGKILL, or a power loss for a file "
        "system the kit can simulate) leaves, once recovered (recover, which "
        "Workspace.open and restore run first), either the complete pre-restore "
        "or the complete post-restore state of files and log, never a mix.",
    ),
    Rule(
        "RESTORE-007",
        _M,
        _T,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Restore reports its progress",
        "restore reports start first, one progress per file put back with "
        "completed/total, and done (or error, for a refusal or failure) last.",
    ),
    # -- the session layer: compaction -----------------------------------------------
    Rule(
        "COMPACT-001",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Compaction appends one summary through the last clean boundary",
        "A compaction that reduces appends exactly one Summary whose through_seq "
        "is the last seq with no tool call open and no folded message holding "
        "events on both sides of it, with expected_head set to the head it read; "
        "the fold then shows the summary in place of what it covers.",
    ),
    Rule(
        "COMPACT-002",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Compaction reports honest progress",
        "compact yields start first, then progress through the stages in order "
        "(measurement, archiving, normalization, summarization, projection, "
        "persistence) with archiving counting completed/total events, and last "
        "one of done, error, cancelled. Token counts say measured or estimated.",
    ),
    Rule(
        "COMPACT-003",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Nothing to summarise is a no-op",
        "When the messages a summary through the boundary would replace are none "
        "or only summaries, or when the summary would not make the conversation "
        "smaller (tokens_after >= tokens_before), compact finishes with done, "
        "reduced=False, and writes nothing. A session without events is not a no-op but an error: compact "
        "reports error and raises CompactionError (unknown_session), writing nothing.",
    ),
    Rule(
        "COMPACT-004",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "Cancellation leaves the log unchanged",
        "A compaction cancelled at any stage before its summary is acknowledged "
        "ends with cancelled and leaves the log as it was.",
    ),
    Rule(
        "COMPACT-005",
        _M,
        None,
        RuleSuite.SESSION,
        ConformanceLevel.SESSION,
        "A concurrent writer is never lost",
        "When the log moves on during a compaction, the summary is not written: "
        "compact ends with error and the other writer's events stay.",
    ),
    # -- integrity and schema ----------------------------------------------------
    Rule(
        "INTEG-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.BASE,
        "A healthy store reports ok",
        "check_integrity on a store written only through the contract reports ok "
        "and changes nothing.",
    ),
    Rule(
        "INTEG-002",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.STORE_HOOKS,
        "Damage is reported, not hidden",
        "check_integrity on a damaged store reports ok=False with a detail naming "
        "what is wrong; reads of damaged data raise CorruptStoreError rather than "
        "returning wrong events. Neither changes a byte of the store: damaged data "
        "is never repaired away.",
    ),
    Rule(
        "SCHEMA-001",
        _M,
        None,
        RuleSuite.STORAGE,
        ConformanceLevel.STORE_HOOKS,
        "Newer stores are refused untouched",
        "Opening a store written by a newer, incompatible format raises "
        "SchemaVersionError and leaves every byte of it unchanged.",
    ),
    # -- codecs --------------------------------------------------------------------
    Rule(
        "CODEC-001",
        _M,
        _C,
        RuleSuite.STORAGE,
        ConformanceLevel.CODEC,
        "Payloads pass through the codec",
        "With a codec configured, every event round-trips through encode and decode "
        "and reopening with the same codec reads it back.",
    ),
    Rule(
        "CODEC-002",
        _M,
        _C,
        RuleSuite.STORAGE,
        ConformanceLevel.CODEC,
        "Encode failure writes nothing",
        "When the codec fails to encode any event of a batch, append raises "
        "CodecError, nothing of the batch is written and the head is unchanged.",
    ),
    Rule(
        "CODEC-003",
        _M,
        _C,
        RuleSuite.STORAGE,
        ConformanceLevel.CODEC,
        "Decode failure is raised, never repaired",
        "When the codec fails to decode a stored payload, read raises CodecError; no "
        "event is skipped, repaired or rewritten, and the store's bytes are "
        "unchanged. It is never treated as a torn tail.",
    ),
    Rule(
        "CODEC-004",
        _M,
        _C,
        RuleSuite.STORAGE,
        ConformanceLevel.CODEC,
        "No plaintext fallback",
        "A payload the configured codec cannot decode is never returned as if it "
        "were plaintext or decoded some other way.",
    ),
    Rule(
        "CODEC-005",
        _M,
        _C,
        RuleSuite.STORAGE,
        ConformanceLevel.CODEC,
        "No plaintext at rest",
        "With a codec configured, no event payload appears in plaintext in any file "
        "under the store's path.",
    ),
)

"""The rules of the checkpointer contract: the storage and session suites."""

RULES: Final[tuple[Rule, ...]] = (
    CHECKPOINTER_RULES + LANGGRAPH_RULES + OPENAI_SESSION_RULES + ADK_SESSION_RULES
)
"""Every rule of every contract the kit checks, each id once."""

RULES_BY_ID: Final[dict[str, Rule]] = {r.id: r for r in RULES}
assert len(RULES_BY_ID) == len(RULES), "a rule id is used twice"
assert len(RULES_BY_ID) == len(RULES), "a rule id is used twice"


def rule(rule_id: str) -> Rule:
    """The rule with this id; KeyError names the unknown id."""
    try:
        return RULES_BY_ID[rule_id]
    except KeyError:
        raise KeyError(f"no rule {rule_id!r} in the catalog") from None
