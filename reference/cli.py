"""The operator commands: list sessions and checkpoints, restore, compact, repair.

``checkpointspec sessions STORE``, ``checkpointspec checkpoints STORE SESSION``,
``checkpointspec restore STORE SESSION SEQ [--conversation-only | --files-only]
[--workspace DIR]``, ``checkpointspec compact STORE SESSION [--instructions
TEXT] [--summarizer module:factory]`` and ``checkpointspec repair file:DIR
[--session ID] [--apply]`` (`checkpointspec.backends.file.repair`; exit 1 when
a damaged log is left alone). STORE is ``sqlite:FILE``, ``file:DIR`` or
``module:function=DIR`` (see `checkpointspec.reference.store_arguments`); a
store that is not there is an error, never created.

Exit statuses: 0 done; 1 the operation ran and failed (a compaction that ended
in ``error``, a store that failed mid-way); 2 refused, with nothing changed: a
usage error, an unreachable store, an unknown session, a seq that is not a
checkpoint, any `RestoreError` (with its reason code and path), a session held
by another restore or compaction; 130 cancelled with Ctrl-C (SIGINT), files and
log as they were. Every refusal and failure is one line on stderr, no traceback.

Ctrl-C during ``restore`` or ``compact`` does not kill the command: it sets the
operation's cancel event, and the operation stops at its next step and undoes
what it did (restore puts the files back; compaction writes no summary).

`add_commands` puts the four subcommands on the ``checkpointspec`` parser and
`run_command` runs one of them; the kit's CLI dispatches here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ..backends.file.repair import RepairError, apply_repair, plan_repair
from ..backends.registry import BackendLoadError, import_object
from ..spec import (
    Capability,
    Checkpoint,
    Checkpointer,
    CheckpointError,
    CompactionProgress,
    InvalidArgumentError,
    RestoreError,
    RestoreProgress,
    RestoreReason,
    RestoreResult,
    SessionLockedError,
    Summarizer,
    UnsupportedOperationError,
)
from .checkpoints import list_checkpoints
from .compaction import compact
from .restore import restore
from .store_arguments import StoreError, open_store, parse_store
from .summarizers import ExtractiveSummarizer

__all__ = [
    "COMMANDS",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "add_commands",
    "run_command",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_REFUSED: Final = 2
EXIT_CANCELLED: Final = 130
"""128 + SIGINT, the shell's status for a command stopped by Ctrl-C."""

COMMANDS: Final = frozenset({"sessions", "checkpoints", "restore", "compact", "repair"})
"""The subcommands `add_commands` adds, by name."""

_STORE_HELP: Final = "sqlite:FILE, file:DIR or module:function=DIR (an existing store)"
_LISTED: Final = 8  # checkpoint seqs named in a not-a-checkpoint message
_FILES_SHOWN: Final = 5  # paths shown per checkpoint before "+N more"

_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


class _Refusal(Exception):
    """A command stops with one line on stderr and an exit status (nothing changed)."""

    def __init__(self, message: str, status: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.status = status


# -- arguments -------------------------------------------------------------------------------


def _seq(text: str) -> int:
    try:
        seq = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"SEQ {text!r} is not a number") from None
    if seq < 1:
        raise argparse.ArgumentTypeError(f"SEQ {seq}: a checkpoint's seq is 1 or more")
    return seq


def add_commands(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Add ``sessions``, ``checkpoints``, ``restore``, ``compact`` and ``repair`` to ``commands``."""
    sessions = commands.add_parser("sessions", help="list the sessions of a store")
    sessions.add_argument("store", metavar="STORE", help=_STORE_HELP)

    checkpoints = commands.add_parser(
        "checkpoints", help="list a session's checkpoints (its user prompts) and their files"
    )
    checkpoints.add_argument("store", metavar="STORE", help=_STORE_HELP)
    checkpoints.add_argument("session", metavar="SESSION", help="the session id")

    rewind = commands.add_parser(
        "restore",
        help="roll a session back to just before a checkpoint: files and conversation",
        description="Roll SESSION back to just before the prompt at SEQ: put back the files "
        "the session changed since (in --workspace) and cut the conversation there. "
        "Everything is checked before anything changes; Ctrl-C undoes a restore in progress.",
    )
    rewind.add_argument("store", metavar="STORE", help=_STORE_HELP)
    rewind.add_argument("session", metavar="SESSION", help="the session id")
    rewind.add_argument("seq", metavar="SEQ", type=_seq, help="the checkpoint's seq")
    only = rewind.add_mutually_exclusive_group()
    only.add_argument(
        "--conversation-only",
        action="store_true",
        help="cut the conversation and leave every file as it is",
    )
    only.add_argument(
        "--files-only", action="store_true", help="put the files back and keep the conversation"
    )
    rewind.add_argument(
        "--workspace",
        metavar="DIR",
        type=Path,
        help="the directory the session's file paths are relative to (needed to restore files)",
    )

    shrink = commands.add_parser(
        "compact",
        help="replace a session's conversation so far by a summary",
        description="Append a summary of SESSION's conversation so far; the events stay, "
        "so every checkpoint remains restorable. Ctrl-C cancels and leaves the log unchanged.",
    )
    shrink.add_argument("store", metavar="STORE", help=_STORE_HELP)
    shrink.add_argument("session", metavar="SESSION", help="the session id")
    shrink.add_argument(
        "--instructions", metavar="TEXT", help="what the summary should keep or focus on"
    )
    shrink.add_argument(
        "--summarizer",
        metavar="MODULE:FACTORY",
        help="a function returning the Summarizer to use, called without arguments "
        "(default: the offline ExtractiveSummarizer)",
    )

    mend = commands.add_parser(
        "repair",
        help="cut the damaged tail of a file store's logs (a dry run unless --apply)",
        description="Find logs of a file store whose tail fails its checksums with no valid "
        "record after it (an append torn by a crash into garbage, which the backend refuses "
        "to open) and say what cutting would remove. With --apply, cut it, keeping every "
        "removed byte in DIR.repair-TIMESTAMP/. A record whose checksums hold is never removed.",
    )
    mend.add_argument("store", metavar="STORE", help="file:DIR (an existing file store)")
    mend.add_argument("--session", metavar="ID", help="only this session's log")
    mend.add_argument(
        "--apply", action="store_true", help="cut (default: only say what would be cut)"
    )


# -- output ----------------------------------------------------------------------------------


def _error(message: str) -> None:
    """One line on stderr, however long (rich would wrap it)."""
    line = " ".join(message.split())
    Console(stderr=True, soft_wrap=True, highlight=False).print(
        f"[bold red]checkpointspec: error:[/] {escape(line)}"
    )


def _note(message: str) -> None:
    Console(stderr=True, soft_wrap=True, highlight=False).print(
        f"[yellow]checkpointspec:[/] {escape(message)}"
    )


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _utc(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ts(ts: str) -> str:
    """An event's timestamp in UTC to the second, or as stored when it is not ISO 8601."""
    try:
        when = datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _brief(seqs: Sequence[int]) -> str:
    """``1, 4, 9`` or, for many, the first and last few and how many in all."""
    if len(seqs) <= _LISTED:
        return ", ".join(map(str, seqs))
    half = _LISTED // 2
    shown = [*map(str, seqs[:half]), "…", *map(str, seqs[-half:])]
    return f"{', '.join(shown)} ({len(seqs)} in all)"


def _paths(paths: Sequence[str]) -> str:
    shown = [escape(p) for p in paths[:_FILES_SHOWN]]
    if len(paths) > _FILES_SHOWN:
        shown.append(f"[dim]+{len(paths) - _FILES_SHOWN} more[/]")
    return "\n".join(shown)


def _progress(console: Console, *columns: ProgressColumn) -> Progress:
    return Progress(
        *columns,
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


# -- running a command -----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _opened(store: str) -> AsyncIterator[Checkpointer]:
    checkpointer = await open_store(store)
    try:
        yield checkpointer
    finally:
        await checkpointer.close()


async def _require_session(checkpointer: Checkpointer, session: str, store: str) -> int:
    """The session's head; `_Refusal` when it has no events (unknown, or truncated to nothing)."""
    head = await checkpointer.head(session)
    if head == 0:
        raise _Refusal(f"no session {session!r} in {store} (it has no events)")
    return head


@contextlib.contextmanager
def _ctrl_c(cancel: asyncio.Event) -> Iterator[None]:
    """Ctrl-C sets ``cancel`` instead of raising KeyboardInterrupt, while the block runs."""
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        if cancel.is_set():
            _note("still cancelling: waiting for the operation to undo its work")
        else:
            _note("cancelling…")
            cancel.set()

    loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _sessions(args: argparse.Namespace, console: Console) -> int:
    async with _opened(args.store) as checkpointer:
        if Capability.LIST not in checkpointer.capabilities:
            raise _Refusal(f"{args.store}: this backend cannot list sessions (no LIST capability)")
        infos = await checkpointer.list_sessions()
        heads = [await checkpointer.head(info.id) for info in infos]
    if not infos:
        console.print(f"no sessions in {escape(args.store)}")
        return EXIT_OK
    table = Table(title=f"sessions in {escape(args.store)}", caption="most recent first")
    table.add_column("session", overflow="fold")
    table.add_column("modified (UTC)", no_wrap=True)
    table.add_column("events", justify="right")
    for info, head in zip(infos, heads, strict=True):
        table.add_row(escape(info.id), _utc(info.mtime), str(head))
    console.print(table)
    return EXIT_OK


def _checkpoints_table(title: str, checkpoints: Sequence[Checkpoint]) -> Table:
    table = Table(title=title)
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("prompt")
    table.add_column("files it restores", overflow="fold")
    table.add_column("cannot restore", overflow="fold")
    for c in checkpoints:
        unavailable = [f"{u.path} ({u.reason})" for u in c.unavailable_files]
        table.add_row(
            str(c.seq),
            escape(_ts(c.ts)),
            escape(_first_line(c.prompt)),
            _paths(c.files) or "[dim]none[/]",
            _paths(unavailable),
        )
    return table


async def _checkpoints(args: argparse.Namespace, console: Console) -> int:
    async with _opened(args.store) as checkpointer:
        await _require_session(checkpointer, args.session, args.store)
        checkpoints = await list_checkpoints(checkpointer, args.session)
    if not checkpoints:
        console.print(f"session {escape(repr(args.session))} has no checkpoints (no user prompt)")
        return EXIT_OK
    title = f"checkpoints of {escape(repr(args.session))} in {escape(args.store)}"
    console.print(_checkpoints_table(title, checkpoints))
    console.print(
        f"[dim]restore one with: checkpointspec restore {escape(args.store)} "
        f"{escape(args.session)} SEQ {escape('[--workspace DIR]')}[/]"
    )
    return EXIT_OK


# -- restore ----------------------------------------------------------------------------------


class _RestoreView:
    """Restore progress: a bar per file on a terminal, one line per file otherwise."""

    def __init__(self, console: Console, progress: Progress) -> None:
        self.console = console
        self.progress = progress
        self.task: TaskID | None = None

    def __call__(self, event: RestoreProgress) -> None:
        if event.phase == "start":
            self.task = self.progress.add_task("restoring files", total=event.total)
        elif event.phase == "progress" and self.task is not None:
            self.progress.update(
                self.task,
                completed=event.completed,
                total=event.total,
                description=escape(event.path or ""),
            )
            if not self.console.is_terminal:
                count = f"[{event.completed}/{event.total}]"
                self.console.print(f"{escape(count)} {escape(event.path or '?')}")


def _restore_refusal(exc: RestoreError, args: argparse.Namespace, seqs: Sequence[int]) -> _Refusal:
    where = f" ({exc.path})" if exc.path is not None else ""
    reason = exc.reason_code
    if reason is RestoreReason.CANCELLED:
        return _Refusal("restore cancelled, files and log unchanged", EXIT_CANCELLED)
    if reason is RestoreReason.UNKNOWN_SESSION:
        return _Refusal(f"no session {args.session!r} in {args.store} (it has no events)")
    if reason is RestoreReason.NOT_A_CHECKPOINT:
        valid = f"its checkpoints: {_brief(seqs)}" if seqs else "it has no checkpoints"
        return _Refusal(f"seq {args.seq} is not a checkpoint of session {args.session!r}; {valid}")
    hint = ""
    if reason is RestoreReason.WORKSPACE_REQUIRED:
        hint = (
            "; give --workspace DIR to put the files back there, "
            "or --conversation-only to leave the files alone"
        )
    elif reason is RestoreReason.OUT_OF_BAND_CHANGE:
        hint = "; nothing was changed (--conversation-only leaves the files as they are)"
    return _Refusal(f"restore refused: {reason.value}{where}: {exc.detail}{hint}")


def _restore_summary(console: Console, args: argparse.Namespace, result: RestoreResult) -> None:
    console.print(
        f"[bold green]restored[/] session {escape(repr(args.session))} to just before seq {args.seq}"
    )
    if result.conversation_restored:
        console.print(f"  conversation: cut after seq {args.seq - 1}")
    else:
        console.print("  conversation: unchanged")
    root = args.workspace or Path()
    # A file that did not exist at the checkpoint was put back by removing it.
    removed = [p for p in result.restored_files if not os.path.lexists(root / p)]
    written = [p for p in result.restored_files if p not in removed]
    for label, paths in (("files put back", written), ("files removed", removed)):
        if paths:
            console.print(f"  {label} ({len(paths)}): {', '.join(escape(p) for p in paths)}")
    if not result.restored_files:
        console.print("  files: none changed")
    if result.unchecked_files:
        unchecked = ", ".join(escape(p) for p in result.unchecked_files)
        console.print(f"  [yellow]not checked for outside edits[/] (no hash recorded): {unchecked}")


async def _restore(args: argparse.Namespace, console: Console) -> int:
    workspace: Path | None = args.workspace
    if workspace is not None and not workspace.is_dir():
        raise _Refusal(f"--workspace {workspace}: no such directory")
    cancel = asyncio.Event()
    with _ctrl_c(cancel):
        async with _opened(args.store) as checkpointer:
            await _require_session(checkpointer, args.session, args.store)
            progress = _progress(
                console, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()
            )
            try:
                with progress:
                    result = await restore(
                        checkpointer,
                        args.session,
                        args.seq,
                        workspace=workspace,
                        files=not args.conversation_only,
                        conversation=not args.files_only,
                        cancel=cancel,
                        progress=_RestoreView(console, progress),
                    )
            except RestoreError as exc:
                seqs: list[int] = []
                if exc.reason_code is RestoreReason.NOT_A_CHECKPOINT:
                    seqs = [c.seq for c in await list_checkpoints(checkpointer, args.session)]
                raise _restore_refusal(exc, args, seqs) from exc
    _restore_summary(console, args, result)
    return EXIT_OK


# -- compact -----------------------------------------------------------------------------------


def _tokens(event: CompactionProgress) -> str:
    if event.tokens_before is None:
        return ""
    kind = event.token_count or "estimated"
    after = f" → {event.tokens_after:,}" if event.tokens_after is not None else ""
    return f"tokens {event.tokens_before:,}{after}, {kind}"


class _CompactView:
    """Compaction progress: a row per stage (archiving counts completed/total events, the
    others pulse until the next starts) and the token counts, measured or estimated."""

    def __init__(self, console: Console, progress: Progress) -> None:
        self.console = console
        self.progress = progress
        self.task = progress.add_task("starting", total=None, count="", tokens="")
        self.stage: str | None = None
        self.tokens = ""

    def _finish(self) -> None:
        total = self.progress.tasks[-1].total or 1
        self.progress.update(self.task, total=total, completed=total, tokens="")

    def __call__(self, event: CompactionProgress) -> None:
        self.tokens = _tokens(event) or self.tokens
        if event.stage is not None and event.stage != self.stage:
            self._finish()
            self.stage = event.stage
            self.task = self.progress.add_task(event.stage, total=None, count="", tokens="")
            if not self.console.is_terminal:
                self.console.print(f"{event.stage}  {self.tokens}".rstrip())
        counted = event.stage == "archiving" and event.total is not None
        self.progress.update(
            self.task,
            completed=event.completed or 0,
            total=event.total if counted else None,
            count=f"{event.completed or 0}/{event.total}" if counted else "",
            tokens=self.tokens,
        )
        if event.phase != "progress":
            self._finish()


def _summarizer(target: str | None) -> Summarizer:
    if target is None:
        return ExtractiveSummarizer()
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise _Refusal(f"--summarizer {target}: {target!r} is not module:name")
    try:
        factory = import_object(target)
    except BackendLoadError as exc:
        raise _Refusal(f"--summarizer {target}: {exc}") from exc
    if not callable(factory):
        raise _Refusal(f"--summarizer {target}: not callable")
    made = factory()
    if not isinstance(made, Summarizer):
        raise _Refusal(
            f"--summarizer {target} returned {type(made).__name__}, which has no summarize()"
        )
    return made


async def _compact(args: argparse.Namespace, console: Console) -> int:
    summarizer = _summarizer(args.summarizer)
    cancel = asyncio.Event()
    last: CompactionProgress | None = None
    with _ctrl_c(cancel):
        async with _opened(args.store) as checkpointer:
            await _require_session(checkpointer, args.session, args.store)
            progress = _progress(
                console,
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TextColumn("{task.fields[tokens]}"),
                TimeElapsedColumn(),
            )
            failure: Exception | None = None
            with progress:
                view = _CompactView(console, progress)
                reports = compact(
                    checkpointer,
                    args.session,
                    summarizer=summarizer,
                    instructions=args.instructions,
                    cancel=cancel,
                )
                try:
                    # aclosing: however this loop ends, the run ends now and releases the session.
                    async with contextlib.aclosing(reports):
                        async for event in reports:
                            view(event)
                            last = event
                except (SessionLockedError, InvalidArgumentError):
                    raise  # refusals: nothing was started
                except Exception as exc:
                    # After its ``error`` report compact raises the failure itself (a conflict
                    # with another writer, the summarizer's or the backend's error).
                    if last is None or last.phase != "error":
                        raise
                    failure = exc
    session = escape(repr(args.session))
    if failure is not None:
        raise _Refusal(f"compaction failed, log unchanged: {_one_line(failure)}", EXIT_FAILED)
    if last is None or last.phase not in ("done", "cancelled", "error"):
        raise _Refusal("compaction ended without a result", EXIT_FAILED)
    if last.phase == "cancelled":
        raise _Refusal("compaction cancelled, log unchanged", EXIT_CANCELLED)
    if last.phase == "error":
        raise _Refusal(
            f"compaction failed, log unchanged: {last.error or last.message}", EXIT_FAILED
        )
    tokens = _tokens(last) or view.tokens
    tokens = f" ({tokens})" if tokens else ""
    if not last.reduced:
        before, after = last.tokens_before, last.tokens_after
        if before is not None and after is not None and after >= before:
            why = "a summary would not make it shorter"
        else:
            why = "nothing new since the last summary"
        console.print(f"session {session} not compacted: {why}; log unchanged{tokens}")
        return EXIT_OK
    console.print(
        f"[bold green]compacted[/] session {session}: summary at seq {last.summary_seq}{tokens}"
    )
    return EXIT_OK


# -- dispatch ----------------------------------------------------------------------------------


async def _repair(args: argparse.Namespace, console: Console) -> int:
    spec = parse_store(args.store)
    if spec.scheme != "file":
        raise _Refusal(
            f"{args.store}: repair is for file stores (file:DIR); SQLite and PostgreSQL "
            "recover their own journals when opened"
        )
    try:
        plan = plan_repair(spec.path, args.session)
    except RepairError as exc:
        raise _Refusal(f"{args.store}: {exc}") from exc
    verb = "cut" if args.apply else "would cut"
    for cut in plan.cuts:
        console.print(
            f"{verb} {escape(cut.log)} (session {escape(repr(cut.session_id))}): "
            f"{cut.removed} bytes from offset {cut.offset}: {escape(cut.reason)}",
            highlight=False,
        )
    for refusal in plan.refusals:
        console.print(
            f"left alone {escape(refusal.log)}: {escape(refusal.reason)}", highlight=False
        )
    if args.apply:
        try:
            backup = apply_repair(plan)
        except RepairError as exc:
            raise _Refusal(f"{args.store}: {exc}") from exc
        if backup is not None:
            console.print(f"removed bytes kept in {escape(str(backup))}", highlight=False)
    elif plan.cuts:
        console.print("dry run: nothing changed; --apply cuts, keeping a backup", highlight=False)
    damaged = len(plan.cuts) + len(plan.refusals)
    console.print(f"{plan.checked} logs checked, {damaged} damaged", highlight=False)
    return EXIT_FAILED if plan.refusals else EXIT_OK


_RUN: Final[dict[str, Callable[[argparse.Namespace, Console], Coroutine[None, None, int]]]] = {
    "sessions": _sessions,
    "checkpoints": _checkpoints,
    "restore": _restore,
    "compact": _compact,
    "repair": _repair,
}


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def run_command(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run the subcommand ``args.command`` (one of `COMMANDS`); returns the exit status.

    Refusals and failures print one line on stderr (see the module docstring).
    """
    out = console or Console()
    try:
        return asyncio.run(_RUN[args.command](args, out))
    except _Refusal as exc:
        _error(str(exc))
        return exc.status
    except StoreError as exc:
        _error(str(exc))
        return EXIT_REFUSED
    except SessionLockedError as exc:
        _error(
            f"session {exc.session_id!r} is held by another restore or compaction; "
            "try again when it has finished"
        )
        return EXIT_REFUSED
    except (InvalidArgumentError, UnsupportedOperationError) as exc:
        _error(str(exc))
        return EXIT_REFUSED
    except CheckpointError as exc:  # the store failed part-way: report it, exit 1
        _error(f"{args.store}: {_one_line(exc)}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # Ctrl-C outside restore and compact: nothing was changing
        _error("interrupted")
        return EXIT_CANCELLED
