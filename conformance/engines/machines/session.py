"""The session machine: one session and a real workspace, driven through the session layer.

A Hypothesis state machine plays an agent session on top of the backend under
test: user prompts (some block-form), assistant turns whose tool calls write,
create and delete files through the layer's ``Workspace`` (text, bytes, binary
and oversized content, nested and non-canonical paths), an occasional call left
unfinished and later repaired, runtime reminders, background completions,
refused paths (unsafe, reserved, through a symlink that leaves the root), a
workspace whose handle is closed, snapshots some other tool wrote, edits made
behind the session's back, restores to any checkpoint with every flag
combination (and to seqs that are none), compactions (some cancelled at a
chosen stage, some raced by an append), recovery and reopening.

Beside it the machine keeps its own model, built from ``spec`` alone and never
from the layer it judges: the events the log must hold and the workspace as a
mapping path -> bytes. What a restore or a compaction must do is what the
spec's oracles say (`plan_restore` and `apply_plan`, `compaction_boundary`).
After every step the backend's log must equal the model's events (seq and
event; ts is the backend's), the layer's ``fold`` and ``list_checkpoints`` must
equal `fold_model` and `checkpoints_model` of that log, and the workspace
directory (the reserved ``.checkpointspec/`` folder aside) must equal the
model's mapping. A difference is blamed on the rule of the step that made it.

Every step notes the calls it made, so a shrunk failure reads as the program
that broke the rule. What the steps stand on (the loop, the handle, the model,
the comparisons) is `session_runtime`'s. The machine needs the backend's TRUNCATE for restores; a
machine built with ``restores=False`` leaves them out and checks the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import NamedTuple

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from ....spec import (
    STAGES,
    AssistantMessage,
    BackgroundCompletion,
    Capability,
    CompactionError,
    CompactionProgress,
    CompactionReason,
    FileSnapshot,
    ReasonCode,
    RepairMessage,
    RestoreError,
    RuntimeReminder,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    WorkspaceArgument,
    apply_plan,
    canonical_path,
    compaction_boundary,
    content_hash,
    encode_content,
    plan_restore,
)
from ..contract.outcomes import Err, read_all, run_backend
from ..contract.violations import RuleViolation, expect
from ..search.exploration import initialize, invariant, rule
from .session_runtime import (
    SESSION_ID,
    SNAPSHOT_LIMIT,
    Action,
    Blame,
    SessionMachineBase,
    SessionMachineEnv,
    check_compaction_progress,
    compare_events,
    compare_files,
    describe,
    restore_refusal_rule,
    walk_workspace,
)

__all__ = [
    "Action",
    "Edit",
    "Interrupt",
    "RestoreCall",
    "SessionMachine",
    "SessionMachineEnv",
]

_UNKNOWN_SESSION = "never-written"
# Long enough that a summary of a few turns is shorter than the turns: compactions reduce.
_FILLER = "Words a model reads and a summary need not repeat, " * 3
# Paths a tool names, aliases of canonical ones included: the log must hold the canonical form.
_PATHS = ("a.txt", "b.bin", "dir/c.txt", "dir/sub/d.txt", "./a.txt", "dir//sub/./d.txt")
_UNSAFE_PATHS = (
    "../escape.txt",
    "/etc/absolute.txt",
    "dir/../../up.txt",
    "",
    "nul\x00.txt",
    ".checkpointspec/journal",
)
_CONTENT = ("text", "bytes", "binary", "oversized", "empty")


class Edit(NamedTuple):
    """An edit behind the session's back: the ``which``-th path the log names, the most
    recently snapshotted first (modulo their number), gets content of kind ``content``,
    or is removed."""

    which: int
    content: str


class RestoreCall(NamedTuple):
    """A restore to the ``checkpoint``-th checkpoint (modulo their number), with its flags
    and how the workspace is passed (the Workspace object, its path, or none)."""

    checkpoint: int
    files: bool
    conversation: bool
    workspace: str


# Keyword arguments, so that a failing run prints them by name.
_ACTION = st.builds(
    Action,
    op=st.sampled_from(("write", "delete")),
    path=st.sampled_from(_PATHS),
    content=st.sampled_from(_CONTENT),
)
_CALLS = st.lists(st.lists(_ACTION, min_size=1, max_size=3), max_size=2)
_EDIT = st.builds(
    Edit,
    which=st.integers(min_value=0, max_value=3),
    content=st.sampled_from((*_CONTENT, "remove")),
)
_RESTORE = st.builds(
    RestoreCall,
    checkpoint=st.integers(min_value=0, max_value=9),
    files=st.booleans(),
    conversation=st.booleans(),
    workspace=st.sampled_from(("object", "path", "none")),
)


class Interrupt(NamedTuple):
    """What happens to a compaction when it reports stage ``at`` ("start": before it
    starts): ``cancel`` sets its cancel event, ``append`` appends an event to the log."""

    kind: str
    at: str


_INTERRUPT = st.one_of(
    st.builds(Interrupt, kind=st.just("cancel"), at=st.sampled_from(("start", *STAGES))),
    st.builds(Interrupt, kind=st.just("append"), at=st.sampled_from(STAGES)),
)


class SessionMachine(SessionMachineBase):
    """One session of the backend under test and one real workspace, beside the model.

    Hypothesis builds one machine per example:
    ``run_state_machine_as_test(lambda: SessionMachine(env))``.
    """

    # -- rules: the conversation -----------------------------------------------------
    # Hypothesis tries rules with fewer arguments first and more often, so the rules that
    # build a session take one composite argument each; the rarer ones take two.
    @initialize(calls=_CALLS)
    def first_turn(self, calls: list[list[Action]]) -> None:
        """A session starts with a prompt and its answer (an empty log comes back when a
        restore empties it)."""
        self.agent_turn(calls)

    @rule(calls=_CALLS)
    def agent_turn(self, calls: list[list[Action]]) -> None:
        """A user prompt (a checkpoint; every third one block-form) and the assistant's
        answer, asking for ``calls``: each started, run through the workspace and answered."""
        n = next(self.counter)
        text = f"prompt {n}\n{_FILLER}"
        self.append(UserPrompt(text, tuple(f"prompt {n} block {i}" for i in range(n % 3))))
        self.assistant_turn(calls)

    @rule(calls=_CALLS)
    def assistant_turn(self, calls: list[list[Action]], unfinished: bool = False) -> None:
        """An assistant message and its tool calls, each started, run through the workspace
        and answered; with ``unfinished`` the last call never gets its result."""
        ids = [self.unique("call").replace(" ", "-") for _ in calls]
        tool_calls = tuple(ToolCall(i, "edit", f'{{"n": {n}}}') for n, i in enumerate(ids))
        answer = f"{self.unique('answer')}\n{_FILLER}" if len(ids) != 1 else ""
        self.append(AssistantMessage(answer, tool_calls))
        for n, (call_id, actions) in enumerate(zip(ids, calls, strict=True)):
            self.append(ToolStarted(call_id, "edit"))
            for action in actions:
                self.tool_action(action, call_id)
            if unfinished and n == len(ids) - 1:
                return
            self.append(ToolResult(call_id, self.unique("result"), is_error=n % 2 == 1))

    @rule(actions=st.lists(_ACTION, max_size=2))
    @precondition(lambda self: not self.open_calls())
    def crash_in_tool(self, actions: list[Action]) -> None:
        """An assistant turn whose one tool call never gets its result (the tool died)."""
        self.assistant_turn([actions], unfinished=True)

    @rule(action=_ACTION)
    def file_tool(self, action: Action) -> None:
        """A file operation through the workspace outside any tool call (SNAP-001, SNAP-002)."""
        self.tool_action(action, None)

    @rule(kind=st.sampled_from(("reminder", "background", "repair")))
    def runtime_message(self, kind: str) -> None:
        """A runtime reminder, a background completion, or a repair message (the answer to the
        first open tool call, or a free-standing one): messages, never checkpoints
        (FOLD-005, CKPT-001)."""
        if kind == "reminder":
            self.append(RuntimeReminder(self.unique("reminder")))
        elif kind == "background":
            self.append(BackgroundCompletion(self.unique("task"), self.unique("finished")))
        else:
            pending = self.open_calls()
            self.append(RepairMessage(self.unique("repair"), pending[0] if pending else None))

    # The rules below are enabled at some log lengths only: they change little, or spoil
    # every restore to an earlier checkpoint, so they stay rare.
    @rule(path=st.sampled_from(_UNSAFE_PATHS), delete=st.booleans())
    @precondition(lambda self: len(self.events) % 4 == 1)
    def unsafe_tool(self, path: str, delete: bool) -> None:
        """SNAP-003: a path outside the workspace is refused, recording and writing nothing."""
        self.blame = Blame("SNAP-003", "SNAP-003")
        if delete:
            call = f"workspace.delete({path!r})"
            op: Callable[[], Awaitable[object]] = partial(self.workspace.delete, path)
        else:
            call = f"workspace.write({path!r}, b'x')"
            op = partial(self.workspace.write, path, b"x")
        self.expect_refusal(call, op, ReasonCode.UNSAFE_PATH, "SNAP-003")

    # -- rules: behind the session's back ---------------------------------------------
    @rule(edit=_EDIT)
    @precondition(lambda self: self.session_paths())
    def out_of_band(self, edit: Edit) -> None:
        """Someone edits (or removes) a file the session wrote, directly: the model's workspace
        changes, the log does not."""
        paths = self.session_paths()
        self.edit_behind(paths[edit.which % len(paths)], edit.content)

    @rule(
        flavour=st.sampled_from(("legacy", "unsafe", "undecodable")), path=st.sampled_from(_PATHS)
    )
    @precondition(lambda self: len(self.events) % 5 == 3)
    def foreign_snapshot(self, flavour: str, path: str) -> None:
        """A snapshot some other tool wrote: without hash_after (then the file changes), for an
        unsafe path, or with content that does not decode (CKPT-003, RESTORE-003)."""
        key = canonical_path(path)
        before = self.files.get(key)
        if flavour == "unsafe":
            self.append(FileSnapshot("../" + key, None, hash_after=content_hash(None)))
            return
        if flavour == "undecodable":
            self.append(
                FileSnapshot(key, "not base64!", encoding="base64", hash_after=content_hash(before))
            )
            return
        if before is None:
            self.append(FileSnapshot(key, None))
        else:
            text, encoding = encode_content(before)
            self.append(FileSnapshot(key, text, encoding=encoding))
        self.edit_behind(key, "text")

    @rule(delete=st.booleans())
    @precondition(lambda self: len(self.events) % 5 == 1)
    def symlink_escape(self, delete: bool) -> None:
        """SNAP-003: a path through a symlink that leaves the workspace is refused, and the
        file outside stays as it was (the link is someone else's, and removed after)."""
        outside = self.home / "outside"
        outside.mkdir(exist_ok=True)
        (outside / "x.txt").write_bytes(b"outside")
        link = self.root / "link"
        link.symlink_to(outside, target_is_directory=True)
        try:
            self.blame = Blame("SNAP-003", "SNAP-003")
            if delete:
                call = "workspace.delete('link/x.txt')  # link -> a folder outside"
                op: Callable[[], Awaitable[object]] = partial(self.workspace.delete, "link/x.txt")
            else:
                call = "workspace.write('link/x.txt', b'x')  # link -> a folder outside"
                op = partial(self.workspace.write, "link/x.txt", b"x")
            self.expect_refusal(call, op, ReasonCode.UNSAFE_PATH, "SNAP-003")
            expect(
                (outside / "x.txt").read_bytes() == b"outside",
                "SNAP-003",
                f"{call} changed the file outside the workspace",
            )
        finally:
            link.unlink()

    @rule(path=st.sampled_from(_PATHS))
    @precondition(lambda self: len(self.events) % 5 == 4)
    def write_after_close(self, path: str) -> None:
        """SNAP-004: a workspace whose handle is closed cannot record a snapshot, so it
        raises and leaves the file as it was (a second handle, closed for this)."""
        self.blame = Blame("SNAP-004", "SNAP-004")
        cp = self.call("SNAP-004", "open a second handle", self.open_checkpointer)
        workspace = self.layer.Workspace(
            str(self.root), cp, SESSION_ID, snapshot_limit=SNAPSHOT_LIMIT
        )
        self.call("SNAP-004", "second handle: close()", cp.close)
        call = f"second workspace: write({path!r}, b'late') on its closed handle"
        outcome = self.run(run_backend(partial(workspace.write, path, b"late")))
        note(f"{call} -> {describe(outcome)}")
        expect(
            isinstance(outcome, Err),
            "SNAP-004",
            f"{call} {describe(outcome)}; the snapshot cannot be recorded",
        )

    # -- rules: restore ---------------------------------------------------------------
    @rule(call=_RESTORE)
    @precondition(lambda self: self.env.restores and self.checkpoint_seqs())
    def restore(self, call: RestoreCall) -> None:
        """RESTORE-001..004, RESTORE-007: a restore to a checkpoint has the outcome
        plan_restore and apply_plan predict."""
        # Newest first, those with files to put back before the others: what users restore
        # to most, and where files can have changed.
        seqs = self.checkpoint_seqs()[::-1]
        snapshots = [s for s, e in enumerate(self.events, 1) if isinstance(e, FileSnapshot)]
        seqs.sort(key=lambda seq: not any(s > seq for s in snapshots))
        seq = seqs[call.checkpoint % len(seqs)]
        self.restore_to(seq, call.files, call.conversation, call.workspace)

    # Enabled at some log lengths only (and on an empty log, where a restore emptied it):
    # a refusal teaches less than a restore.
    @rule(
        seq=st.integers(min_value=0, max_value=40),
        files=st.booleans(),
        conversation=st.booleans(),
        unknown=st.booleans(),
    )
    @precondition(lambda self: self.env.restores and (len(self.events) % 4 == 2 or not self.events))
    def restore_elsewhere(self, seq: int, files: bool, conversation: bool, unknown: bool) -> None:
        """RESTORE-002: a restore to a seq that is no checkpoint, or (``unknown``) of a
        session that has no events."""
        if unknown:
            self.restore_to(seq, files, conversation, "path", session_id=_UNKNOWN_SESSION)
        else:
            self.restore_to(seq, files, conversation, "object")

    def restore_to(
        self,
        seq: int,
        files: bool,
        conversation: bool,
        workspace: str,
        session_id: str = SESSION_ID,
    ) -> None:
        log = self.stored_model() if session_id == SESSION_ID else []
        current = None if workspace == "none" else self.files
        try:
            plan = plan_restore(
                session_id, log, seq, current, files=files, conversation=conversation
            )
            refusal: RestoreError | None = None
        except RestoreError as exc:
            refusal = exc
        arguments: dict[str, WorkspaceArgument | None] = {
            "object": self.workspace,
            "path": str(self.root),
            "none": None,
        }
        ws_arg = arguments[workspace]
        phases: list[object] = []  # what the layer reported, whatever it is
        call = (
            f"restore({session_id!r}, {seq}, workspace={workspace}, files={files}, "
            f"conversation={conversation})"
        )
        outcome = self.run(
            run_backend(
                partial(
                    self.layer.restore,
                    self.cp,
                    session_id,
                    seq,
                    workspace=ws_arg,
                    files=files,
                    conversation=conversation,
                    progress=phases.append,
                )
            )
        )
        note(f"{call} -> {describe(outcome)}")
        if refusal is not None:
            rule_id = restore_refusal_rule(refusal.reason_code)
            self.blame = Blame(rule_id, rule_id)
            got = outcome.error if isinstance(outcome, Err) else None
            expect(
                isinstance(got, RestoreError)
                and (got.reason_code, got.path) == (refusal.reason_code, refusal.path),
                rule_id,
                f"{call} {describe(outcome)}; expected RestoreError({refusal.reason_code.value}, "
                f"path={refusal.path!r})",
            )
            self.check_restore_progress(call, phases, None)
            return
        self.blame = Blame(
            "RESTORE-001" if conversation else "RESTORE-004",
            "RESTORE-001" if files else "RESTORE-004",
        )
        if isinstance(outcome, Err):
            # Refused for what a flag turned off: the flag was not honoured.
            rule_id = "RESTORE-001"
            if not (files and conversation):
                try:
                    plan_restore(session_id, log, seq, current, files=True, conversation=True)
                except RestoreError:
                    rule_id = "RESTORE-004"
            raise RuleViolation(
                rule_id, f"{call} {describe(outcome)}; the restore is possible"
            ) from outcome.error
        result = outcome.value
        restored = sorted(f.path for f in plan.files)
        expect(
            sorted(getattr(result, "restored_files", ())) == restored,
            self.blame.files,
            f"{call} reported restored_files={getattr(result, 'restored_files', None)!r}; "
            f"expected {restored}",
        )
        expect(
            getattr(result, "conversation_restored", None) == conversation,
            "RESTORE-004",
            f"{call} reported conversation_restored="
            f"{getattr(result, 'conversation_restored', None)!r}; expected {conversation}",
        )
        expect(
            tuple(getattr(result, "unchecked_files", ())) == plan.unchecked,
            "RESTORE-003",
            f"{call} reported unchecked_files={getattr(result, 'unchecked_files', None)!r}; "
            f"expected {plan.unchecked}",
        )
        self.check_restore_progress(call, phases, len(plan.files))
        self.files = apply_plan(self.files, plan)
        if plan.keep_through is not None:
            del self.events[plan.keep_through :]

    # -- rules: compaction -------------------------------------------------------------
    @rule(interrupt=st.none() | _INTERRUPT)
    def compact(self, interrupt: Interrupt | None) -> None:
        """COMPACT-001..003: a summary through compaction_boundary, or nothing for a no-op;
        COMPACT-002: the reports; COMPACT-004: cancelled at a stage, the log stays as it was;
        COMPACT-005: when another event is appended at a stage, no summary is written."""
        boundary = compaction_boundary(self.stored_model())
        head = len(self.events)
        if head == 0:
            interrupt = None  # a session without events is refused before anything can interrupt
        cancel = asyncio.Event()
        raced = RuntimeReminder(self.unique("reminder"))
        # Whether the interruption came before the summary was in the log, once it came.
        early: list[bool] = []
        raised: list[Exception] = []  # what the layer raised after its error report
        call = f"compact({SESSION_ID!r}, summarizer=ExtractiveSummarizer())"
        if interrupt is not None:
            call += f" with a {interrupt.kind} at {interrupt.at}"

        async def interrupt_now() -> None:
            assert interrupt is not None
            early.append(await self.cp.head(SESSION_ID) == head)
            if interrupt.kind == "cancel":
                cancel.set()
            elif early[0]:
                await self.cp.append(SESSION_ID, [raced], head)

        async def drive() -> list[CompactionProgress]:
            seen: list[CompactionProgress] = []
            if interrupt is not None and interrupt.at == "start":
                await interrupt_now()
            stream = self.layer.compact(
                self.cp, SESSION_ID, summarizer=self.layer.ExtractiveSummarizer(), cancel=cancel
            )
            try:
                async for progress in stream:
                    seen.append(progress)
                    if (
                        interrupt is not None
                        and not early
                        and progress.phase == "progress"
                        and progress.stage == interrupt.at
                    ):
                        await interrupt_now()
            except Exception as exc:
                # A layer may raise the failure after reporting it (COMPACT-002 holds).
                if not (seen and seen[-1].phase == "error"):
                    raise
                raised.append(exc)
            return seen

        rule_id = {None: "COMPACT-001", "cancel": "COMPACT-004", "append": "COMPACT-005"}[
            interrupt and interrupt.kind
        ]
        self.blame = Blame(rule_id, rule_id)
        seen = self.call(rule_id, call, drive)
        note(f"  progress: {[(p.phase, p.stage) for p in seen]}")
        check_compaction_progress(call, seen)
        if head == 0:
            # A session without events is an error, not a no-op (COMPACT-003).
            self.blame = Blame("COMPACT-003", "COMPACT-003")
            error = raised[0] if raised else None
            expect(
                seen[-1].phase == "error"
                and isinstance(error, CompactionError)
                and error.reason_code == CompactionReason.UNKNOWN_SESSION,
                "COMPACT-003",
                f"{call} on a session without events ended with {seen[-1].phase!r} and raised "
                f"{error!r}; expected error and CompactionError (unknown_session)",
            )
            return
        log = self.call(rule_id, f"read({SESSION_ID!r})", partial(read_all, self.cp, SESSION_ID))
        last = seen[-1]
        if interrupt is not None and early and early[0]:
            if interrupt.kind == "cancel":
                self.check_interrupted(call, "cancel", last, log, boundary)
                return
            self.events.append(raced)
            if last.phase != "done" or last.reduced is not True:
                self.check_interrupted(call, "append", last, log, boundary)
                return
            # The layer may not have read the log yet when the event came: then its summary
            # is that of the log with the event. Otherwise it must not write one.
            written = [e.event for e in log[head + 1 :]]
            stale = boundary
            boundary = compaction_boundary(self.stored_model())
            expect(
                not (
                    stale != boundary
                    and any(isinstance(e, Summary) and e.through_seq == stale for e in written)
                ),
                "COMPACT-005",
                f"{call} wrote a summary through seq {stale}, as if the log had not moved on",
            )
            self.check_compaction(call, last, log, head + 1, boundary, "COMPACT-001")
            return
        self.check_compaction(call, last, log, head, boundary, "COMPACT-001")

    # -- rules: recovery and reopening ------------------------------------------------
    @rule(recover_first=st.booleans())
    def reopen(self, recover_first: bool) -> None:
        """Close the handle (DURABLE backends; the others keep theirs) and the workspace, and
        open them again: ``Workspace.open`` recovers first and finds nothing to do. With
        ``recover_first``, ``recover`` is called on its own before."""
        if recover_first:
            self.recover()
        self.blame = Blame("RESTORE-006", "RESTORE-006")
        if Capability.DURABLE in self.env.capabilities:
            self.call("RESTORE-006", "close()", self.cp.close)
            self.cp = self.call("RESTORE-006", "open the store again", self.open_checkpointer)
        # Not in the interface, but a layer's workspace may hold something to release.
        close = getattr(self.workspace, "close", None)
        if close is not None:
            self.call("RESTORE-006", "workspace.close()", close)
        self.workspace = self.call(
            "RESTORE-006",
            f"Workspace.open(root, checkpointer, {SESSION_ID!r}, snapshot_limit={SNAPSHOT_LIMIT})",
            self.open_workspace,
        )

    def recover(self) -> None:
        """RESTORE-006: with no restore under way, recover finds nothing and changes nothing."""
        self.blame = Blame("RESTORE-006", "RESTORE-006")
        call = f"recover({SESSION_ID!r}, workspace)"
        outcome = self.call(
            "RESTORE-006", call, partial(self.layer.recover, self.cp, SESSION_ID, self.workspace)
        )
        expect(
            outcome == "nothing",
            "RESTORE-006",
            f"{call} returned {outcome!r} with no restore under way; expected 'nothing'",
        )

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def session_matches_model(self) -> None:
        """The log, its fold, its checkpoints and the workspace, against the model."""
        got = self.run(run_backend(partial(read_all, self.cp, SESSION_ID)))
        if isinstance(got, Err):
            raise RuleViolation(
                self.blame.log,
                f"read({SESSION_ID!r}) raised {type(got.error).__name__}: {got.error}",
            ) from got.error
        log = got.value
        compare_events(log, self.events, self.blame.log)
        self.check_fold(log)
        self.check_checkpoints(log)
        compare_files(walk_workspace(self.root), self.files, self.blame.files)
