"""What the session machine stands on: one session and a real workspace beside the model.

`SessionMachineBase` owns the event loop every call runs on (Hypothesis'
stateful testing is synchronous), the handle on the store, the layer's
workspace, and the model: the events the log must hold and the workspace as a
mapping path -> bytes. It appends events as an agent does, runs a tool's file
operation through the workspace next to the snapshot the spec says it records,
and judges: the log, the fold, the checkpoints and the workspace directory
against the model, a restore's reports, a compaction's outcome. Which steps
there are is `checkpointspec.conformance.engines.machines.session.SessionMachine`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec
from hypothesis import note
from hypothesis.stateful import RuleBasedStateMachine

from ....backends.registry import BackendTarget
from ....spec import (
    FOLD_RULE_OF_ORIGIN,
    STAGES,
    Capability,
    Checkpointer,
    CompactionProgress,
    FileSnapshot,
    InvalidArgumentError,
    Message,
    ReasonCode,
    RestoreReason,
    SessionEvent,
    SessionLayer,
    SessionWorkspace,
    StoredEvent,
    Summary,
    ToolCallLedger,
    ToolStarted,
    UserPrompt,
    canonical_path,
    checkpoints_model,
    fold_model,
    make_snapshot,
)
from ..contract.outcomes import Err, Ok, run_backend
from ..contract.violations import RuleViolation, expect
from ..search.exploration import Diverging
from ..search.transcripts import exchanged, new_run
from ..target.provenance import open_checkpointer
from .storage_runtime import answer_text

__all__ = [
    "RESERVED_FOLDER",
    "SESSION_ID",
    "SNAPSHOT_LIMIT",
    "Action",
    "Blame",
    "SessionMachineBase",
    "SessionMachineEnv",
    "check_compaction_progress",
    "compare_events",
    "compare_files",
    "describe",
    "not_smaller",
    "restore_refusal_rule",
    "short",
    "stable_answer",
    "sync_call",
    "walk_workspace",
]

T = TypeVar("T")

SESSION_ID = "session"
RESERVED_FOLDER = ".checkpointspec"
"""The workspace folder the session layer keeps for itself (the restore journal)."""
SNAPSHOT_LIMIT = 48
"""The machine's snapshot cap, in bytes: small, so that oversized files cost nothing."""


# Paths a tool names, aliases of canonical ones included: the log must hold the canonical form.
class Action(NamedTuple):
    """One file operation of a tool: ``op`` (write or delete) at ``path``, with new content
    of kind ``content`` (text, bytes, binary, oversized, empty)."""

    op: str
    path: str
    content: str


class SessionMachineEnv(msgspec.Struct):
    """What every session machine of one run is given.

    ``layer`` is the session layer under test; ``restores`` is False for a
    backend without TRUNCATE, whose machines then leave restores out.
    """

    target: BackendTarget
    capabilities: frozenset[Capability]
    root: Path
    layer: SessionLayer
    restores: bool = True
    keep_stores: bool = False
    """The backend keeps its stores' data elsewhere (a database server): an example's
    store directory stays for the check's end, where the backend drops what every
    directory names (`Harness.discard_store`)."""


class Blame(msgspec.Struct):
    """The rules a difference found by the invariants breaks, after the last step."""

    log: str = "RESTORE-001"
    files: str = "RESTORE-001"


class SessionMachineBase(Diverging, RuleBasedStateMachine):
    """A fresh store and workspace under ``env.root``, one handle and one workspace on them."""

    def __init__(self, env: SessionMachineEnv) -> None:
        super().__init__()
        new_run()
        self.env = env
        self.layer = env.layer
        self.loop = asyncio.new_event_loop()
        self.factory = env.target.factory()
        self.home = Path(tempfile.mkdtemp(prefix="session-", dir=env.root))
        self.store = self.home / "store"
        self.root = self.home / "workspace"
        self.store.mkdir()
        self.root.mkdir()
        self.counter = itertools.count(1)
        # The model: what the log must hold, and what the workspace must hold.
        self.events: list[SessionEvent] = []
        self.files: dict[str, bytes] = {}
        self.blame = Blame()
        self.cp: Checkpointer = self.run(self.open_checkpointer())
        self.workspace: SessionWorkspace = self.run(self.open_workspace())

    # -- running ---------------------------------------------------------------------
    def run(self, coro: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await coro

        return self.loop.run_until_complete(wrapped())

    def call(self, rule_id: str, call: str, op: Callable[[], Awaitable[T]]) -> T:
        """Run one call of the layer; anything it raises breaks ``rule_id``."""
        outcome = self.run(run_backend(op))
        exchanged(call, stable_answer(outcome))
        if isinstance(outcome, Err):
            note(f"{call} -> raised {type(outcome.error).__name__}: {outcome.error}")
            raise RuleViolation(
                rule_id, f"{call} raised {type(outcome.error).__name__}: {outcome.error}"
            ) from outcome.error
        note(f"{call} -> {short(outcome.value)}")
        return outcome.value

    async def open_checkpointer(self) -> Checkpointer:
        return await open_checkpointer(self.factory, self.env.target.context(self.store))

    async def open_workspace(self) -> SessionWorkspace:
        return await self.layer.Workspace.open(
            str(self.root), self.cp, SESSION_ID, snapshot_limit=SNAPSHOT_LIMIT
        )

    def teardown(self) -> None:
        try:
            self.run(run_backend(self.cp.close))
        finally:
            self.loop.close()
            if not self.env.keep_stores:
                shutil.rmtree(self.home, ignore_errors=True)

    # -- the model -------------------------------------------------------------------
    def stored_model(self) -> list[StoredEvent]:
        """The model's events as a log (ts is not the model's to know; the oracles ignore it)."""
        return [
            StoredEvent(seq, SESSION_ID, seq - 1 or None, "", event)
            for seq, event in enumerate(self.events, 1)
        ]

    def open_calls(self) -> tuple[str, ...]:
        ledger = ToolCallLedger()
        for event in self.events:
            ledger.feed(event)
        return ledger.open_calls

    def unique(self, what: str) -> str:
        return f"{what} {next(self.counter)}"

    def content(self, kind: str) -> bytes | str:
        """Fresh content of ``kind``: str for text, bytes for the rest."""
        n = next(self.counter)
        if kind == "text":
            return f"text {n}\n"
        if kind == "bytes":
            return f"bytes {n}\n".encode()
        if kind == "binary":
            return b"\xff\xfe\x00" + n.to_bytes(4, "big")
        if kind == "oversized":
            return f"{n} ".ljust(SNAPSHOT_LIMIT + 16, "x")
        return b""

    # -- acting as the agent, and behind its back -------------------------------------
    def append(self, *events: SessionEvent) -> None:
        """Append ``events`` as the agent would, at the model's head."""
        head = len(self.events)
        kinds = ", ".join(type(e).__name__ for e in events)
        self.blame = Blame("RESTORE-001", "RESTORE-001")
        got = self.call(
            "RESTORE-001",
            f"append({kinds}, expected_head={head})",
            partial(self.cp.append, SESSION_ID, list(events), head),
        )
        self.events.extend(events)
        expect(
            got == len(self.events),
            "RESTORE-001",
            f"append returned head {got}; the log has {len(self.events)} events",
        )

    def tool_action(self, action: Action, tool_call_id: str | None) -> None:
        """One file operation of a tool, through the workspace, and what the model expects."""
        op, path, kind = action
        key = canonical_path(path)
        before = self.files.get(key)
        self.blame = Blame("SNAP-001", "SNAP-001")
        if op == "delete":
            call = f"workspace.delete({path!r}, tool_call_id={tool_call_id!r})"
            if before is None:
                self.expect_refusal(
                    call,
                    partial(self.workspace.delete, path, tool_call_id=tool_call_id),
                    ReasonCode.NO_SUCH_FILE,
                    "SNAP-001",
                )
                return
            after: bytes | None = None
            got = self.call(
                "SNAP-001", call, partial(self.workspace.delete, path, tool_call_id=tool_call_id)
            )
        else:
            content = self.content(kind)
            after = content.encode() if isinstance(content, str) else content
            call = f"workspace.write({path!r}, {short(content)}, tool_call_id={tool_call_id!r})"
            got = self.call(
                "SNAP-001",
                call,
                partial(self.workspace.write, path, content, tool_call_id=tool_call_id),
            )
        snapshot = make_snapshot(
            key, before, after, limit=SNAPSHOT_LIMIT, tool_call_id=tool_call_id
        )
        rule_id = "SNAP-002" if snapshot.truncated else "SNAP-001"
        self.blame = Blame(rule_id, "SNAP-001")
        expect(
            got == snapshot,
            rule_id,
            f"{call} returned {got!r}; the snapshot is {snapshot!r}",
        )
        self.events.append(snapshot)
        if after is None:
            self.files.pop(key, None)
        else:
            self.files[key] = after

    def expect_refusal(
        self, call: str, op: Callable[[], Awaitable[object]], reason: ReasonCode, rule_id: str
    ) -> None:
        outcome = self.run(run_backend(op))
        exchanged(call, stable_answer(outcome))
        note(f"{call} -> {describe(outcome)}")
        refused = (
            isinstance(outcome, Err)
            and isinstance(outcome.error, InvalidArgumentError)
            and outcome.error.reason_code == reason
        )
        expect(
            refused,
            rule_id,
            f"{call} {describe(outcome)}; expected InvalidArgumentError ({reason.value})",
        )

    def session_paths(self) -> list[str]:
        """The safe paths the log holds snapshots of, the most recently snapshotted first
        (the files a restore to the newest checkpoints puts back)."""
        found: dict[str, None] = {}
        for event in reversed(self.events):
            if isinstance(event, FileSnapshot):
                with contextlib.suppress(InvalidArgumentError):
                    found.setdefault(canonical_path(event.path), None)
        return list(found)

    def edit_behind(self, key: str, kind: str) -> None:
        target = self.root / key
        self.blame = Blame("RESTORE-003", "RESTORE-003")
        if kind == "remove":
            note(f"out of band: remove {key!r}")
            if target.is_file():
                target.unlink()
            self.files.pop(key, None)
            return
        content = self.content(kind)
        data = content.encode() if isinstance(content, str) else content
        note(f"out of band: write {key!r} {short(data)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.files[key] = data

    def checkpoint_seqs(self) -> list[int]:
        return [s for s, e in enumerate(self.events, 1) if isinstance(e, UserPrompt)]

    # -- judging -----------------------------------------------------------------------
    def check_restore_progress(
        self, call: str, phases: Sequence[object], files: int | None
    ) -> None:
        """RESTORE-007: start first, one progress per file, done (error, for a refusal) last."""
        names = [getattr(p, "phase", None) for p in phases]
        last = "error" if files is None else "done"
        expect(
            len(names) >= 2 and names[0] == "start" and names[-1] == last,
            "RESTORE-007",
            f"{call} reported phases {names}; expected start first and {last} last",
        )
        if files is not None:
            expect(
                names.count("progress") == files,
                "RESTORE-007",
                f"{call} reported {names.count('progress')} progress events for {files} files",
            )

    def check_interrupted(
        self,
        call: str,
        kind: str,
        last: CompactionProgress,
        log: list[StoredEvent],
        boundary: int | None,
    ) -> None:
        """COMPACT-004 and COMPACT-005: a compaction interrupted before its summary was in the
        log writes none and says so; only a no-op may finish first."""
        rule_id = "COMPACT-004" if kind == "cancel" else "COMPACT-005"
        ending = "cancelled" if kind == "cancel" else "error"
        declined = (
            last.phase == "done"
            and last.reduced is False
            and (boundary is None or not_smaller(last))
        )
        expect(
            last.phase == ending or declined,
            rule_id,
            f"{call} ended with {last.phase!r} reduced={last.reduced}; expected {ending}",
        )
        compare_events(log, self.events, rule_id)

    def check_compaction(
        self,
        call: str,
        last: CompactionProgress,
        log: list[StoredEvent],
        head: int,
        boundary: int | None,
        rule_id: str,
    ) -> None:
        """COMPACT-001 and COMPACT-003: one summary through the boundary, or nothing; a wrong
        summary breaks ``rule_id``."""
        if boundary is None:
            self.blame = Blame("COMPACT-003", "COMPACT-003")
            expect(
                last.phase == "done" and last.reduced is False and len(log) == head,
                "COMPACT-003",
                f"{call} ended with {last.phase!r} reduced={last.reduced} and the log went from "
                f"{head} to {len(log)} events; nothing needs summarising",
            )
            return
        if last.phase == "done" and last.reduced is False and len(log) == head:
            # A summary need not be written when it would not make the conversation smaller,
            # which only the summarizer's text decides; the report must show it.
            expect(
                not_smaller(last),
                "COMPACT-001",
                f"{call} wrote no summary through seq {boundary} and reported tokens "
                f"{last.tokens_before} -> {last.tokens_after}, no reason not to",
            )
            return
        expect(
            last.phase == "done" and last.reduced is True,
            rule_id,
            f"{call} ended with {last.phase!r} reduced={last.reduced}; expected a summary "
            f"through seq {boundary}",
        )
        written = [s.event for s in log[head:]]
        summary = written[0] if len(written) == 1 else None
        expect(
            isinstance(summary, Summary) and summary.through_seq == boundary,
            rule_id,
            f"{call} appended {[short(e) for e in written]}; expected one Summary through seq "
            f"{boundary}",
        )
        expect(
            last.summary_seq == head + 1,
            rule_id,
            f"{call} reported summary_seq={last.summary_seq}; the summary is seq {head + 1}",
        )
        assert isinstance(summary, Summary)
        self.events.append(summary)

    def check_fold(self, log: list[StoredEvent]) -> None:
        """FOLD-001..006: the layer's fold of the log is the spec's."""
        outcome = self.run(run_backend(sync_call(self.layer.fold, log)))
        if isinstance(outcome, Err):
            raise RuleViolation(
                "FOLD-001", f"fold(log) raised {type(outcome.error).__name__}: {outcome.error}"
            ) from outcome.error
        got, want = list(outcome.value), fold_model(log)
        if got == want:
            return
        i = first_difference(got, want)
        raise RuleViolation(
            self.fold_rule(log, got, want, i),
            f"fold(log) differs from the spec's fold at message {i}: got "
            f"{got[i] if i < len(got) else 'nothing'!r}, expected "
            f"{want[i] if i < len(want) else 'nothing'!r} ({len(got)} messages, expected {len(want)})",
        )

    def fold_rule(
        self, log: list[StoredEvent], got: list[Message], want: list[Message], i: int
    ) -> str:
        """The FOLD rule broken by a fold that first differs from the spec's at message ``i``.

        FOLD-004 when the fold of the log without its invisible events (snapshots, tool
        starts) is right: they made the difference. Otherwise the rule of the message
        expected where the folds part (or found, past the expected end)."""
        visible = [s for s in log if not isinstance(s.event, FileSnapshot | ToolStarted)]
        if len(visible) < len(log):
            again = self.run(run_backend(sync_call(self.layer.fold, visible)))
            if isinstance(again, Ok) and list(again.value) == fold_model(visible):
                return "FOLD-004"
        culprit = want[i] if i < len(want) else got[i]
        return FOLD_RULE_OF_ORIGIN.get(culprit.origin, "FOLD-001")

    def check_checkpoints(self, log: list[StoredEvent]) -> None:
        """CKPT-001..003: the layer's checkpoints are the spec's, with the stored prompts' ts."""
        outcome = self.run(run_backend(partial(self.layer.list_checkpoints, self.cp, SESSION_ID)))
        if isinstance(outcome, Err):
            raise RuleViolation(
                "CKPT-001",
                f"list_checkpoints raised {type(outcome.error).__name__}: {outcome.error}",
            ) from outcome.error
        got, want = list(outcome.value), checkpoints_model(log)
        if got == want:
            return
        rule_id = "CKPT-001"
        if len(got) == len(want):
            g, w = next((g, w) for g, w in zip(got, want, strict=True) if g != w)
            if (g.seq, g.prompt, g.ts) == (w.seq, w.prompt, w.ts):
                rule_id = "CKPT-002" if g.files != w.files else "CKPT-003"
        raise RuleViolation(
            rule_id, f"list_checkpoints returned {got!r}; the spec's checkpoints are {want!r}"
        )


# -- comparing ----------------------------------------------------------------------
def first_difference(got: Sequence[object], want: Sequence[object]) -> int:
    """The index of the first item where ``got`` and ``want`` differ (the shorter one's
    length when one is a prefix of the other)."""
    return next(
        (n for n, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
        min(len(got), len(want)),
    )


def compare_events(
    log: Sequence[StoredEvent], events: Sequence[SessionEvent], rule_id: str
) -> None:
    """The stored log holds exactly ``events`` at seqs 1, 2, ... (ts is not compared)."""
    got = [(s.seq, s.event) for s in log]
    want = list(enumerate(events, 1))
    if got == want:
        return
    i = first_difference(got, want)
    raise RuleViolation(
        rule_id,
        f"the log holds {len(got)} events, the model {len(want)}; first difference at position "
        f"{i + 1}: stored {short(got[i]) if i < len(got) else 'nothing'}, expected "
        f"{short(want[i]) if i < len(want) else 'nothing'}",
    )


def compare_files(got: dict[str, bytes], want: dict[str, bytes], rule_id: str) -> None:
    """The workspace directory holds exactly the model's files."""
    if got == want:
        return
    differ = sorted(p for p in set(got) | set(want) if got.get(p) != want.get(p))
    detail = "; ".join(
        f"{p}: {short(got.get(p))} on disk, {short(want.get(p))} expected" for p in differ[:4]
    )
    raise RuleViolation(rule_id, f"the workspace differs from the model: {detail}")


def walk_workspace(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` by canonical relative path, the reserved folder aside."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root and RESERVED_FOLDER in dirnames:
            dirnames.remove(RESERVED_FOLDER)
        for name in filenames:
            full = here / name
            if full.is_file() and not full.is_symlink():
                found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found


def check_compaction_progress(call: str, seen: Sequence[CompactionProgress]) -> None:
    """COMPACT-002: start first, stages in order, one terminal phase last; counts labelled."""
    phases = [p.phase for p in seen]
    expect(
        len(seen) >= 2
        and phases[0] == "start"
        and phases[-1] in ("done", "error", "cancelled")
        and all(p == "progress" for p in phases[1:-1]),
        "COMPACT-002",
        f"{call} reported phases {phases}; expected start, progress..., then done, error or cancelled",
    )
    order = [STAGES.index(p.stage) for p in seen[1:-1] if p.stage is not None]
    expect(
        order == sorted(order),
        "COMPACT-002",
        f"{call} reported stages {[p.stage for p in seen[1:-1]]} out of order",
    )
    for p in seen:
        counted = p.tokens_before is not None or p.tokens_after is not None
        expect(
            not counted or p.token_count in ("measured", "estimated"),
            "COMPACT-002",
            f"{call} reported token counts without saying measured or estimated: {p!r}",
        )


def not_smaller(report: CompactionProgress) -> bool:
    """Whether a report shows a summary that would not make the conversation smaller."""
    before, after = report.tokens_before, report.tokens_after
    return before is not None and after is not None and after >= before


def restore_refusal_rule(reason: RestoreReason) -> str:
    if reason in (RestoreReason.UNKNOWN_SESSION, RestoreReason.NOT_A_CHECKPOINT):
        return "RESTORE-002"
    return "RESTORE-003"


def sync_call(func: Callable[[T], Any], arg: T) -> Callable[[], Awaitable[Any]]:
    """A synchronous call, shaped for `run_backend`."""

    async def call() -> Any:
        return func(arg)

    return call


def stable_answer(outcome: Ok[Any] | Err) -> str:
    """What a call came to, as far as a re-run of the same steps on a correct backend
    answers it the same (the run's transcript, `exchanged`): an error's type (and a
    conflict's actual head), a count, flag or nothing as itself, a sequence's length,
    any other value's type. Not a value's text, which names the run's directories and
    carries the clock's times."""
    if isinstance(outcome, Err):
        return answer_text(outcome)
    value = outcome.value
    if value is None or isinstance(value, bool | int):
        return f"returned {value!r}"
    if isinstance(value, list | tuple):
        return f"returned {len(value)} items"
    return f"returned a {type(value).__name__}"


def describe(outcome: Ok[Any] | Err) -> str:
    if isinstance(outcome, Err):
        return f"raised {type(outcome.error).__name__}: {outcome.error}"
    return f"returned {short(outcome.value)}"


def short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
