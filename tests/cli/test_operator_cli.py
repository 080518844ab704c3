"""The operator commands end to end: ``checkpointspec sessions | checkpoints | restore | compact``.

Each test builds a store with the backends' own API, runs the command in a
subprocess (``python -m checkpointspec.conformance.frontends.cli``, the console
script's module) and reads the store back the same way. Refusals must exit 2
with one line on stderr and no traceback, and change nothing; Ctrl-C is a real
SIGINT sent once the command says (through a test fixture on PYTHONPATH) that
it reached the step to interrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from checkpointspec.backends import file as file_backend
from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.reference.store_arguments import (
    NoStoreError,
    StoreFactoryError,
    StoreSpec,
    StoreSpecError,
    StoreUnreachableError,
    UnknownSchemeError,
    check_store,
    open_store,
    parse_store,
)
from checkpointspec.spec import (
    AssistantMessage,
    BackendContext,
    Checkpointer,
    FileSnapshot,
    SessionEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    content_hash,
    make_snapshot,
)
from operator_fixtures import GATE_FD, READY

HERE = Path(__file__).resolve().parent
LOGO = b"\x89PNG\r\n\x1a\n\x00\xff\xfe"
TIMEOUT = 120  # a hung command fails the test instead of hanging the run; not a speed check


# -- building stores ----------------------------------------------------------------------------


def _call(tool: str, name: str = "write") -> ToolCall:
    return ToolCall(tool, name, "{}")


DEMO: list[SessionEvent] = [
    UserPrompt("Create the notes file\nwith some detail"),  # 1
    AssistantMessage("writing", (_call("t1"),)),  # 2
    ToolStarted("t1", "write"),  # 3
    make_snapshot("notes.txt", None, b"v1\n", tool_call_id="t1"),  # 4
    ToolResult("t1", "ok"),  # 5
    UserPrompt("Edit the notes and add a logo"),  # 6
    AssistantMessage("editing", (_call("t2"), _call("t3"))),  # 7
    make_snapshot("notes.txt", b"v1\n", b"v2\n", tool_call_id="t2"),  # 8
    make_snapshot("logo.bin", None, LOGO, tool_call_id="t3"),  # 9
    ToolResult("t2", "ok"),  # 10
    ToolResult("t3", "ok"),  # 11
    UserPrompt("Summarise what you did"),  # 12
    AssistantMessage("I wrote notes.txt and logo.bin."),  # 13
]
"""Checkpoints 1, 6, 12. Restoring to 6 puts notes.txt back to v1 and deletes logo.bin."""

PARTIAL: list[SessionEvent] = [
    UserPrompt("Rotate the log"),  # 1
    AssistantMessage("rotating", (_call("t9"),)),  # 2
    FileSnapshot("big.log", "the first part", truncated=True, hash_after=content_hash(b"new")),
    ToolResult("t9", "ok"),  # 4
]
"""One checkpoint whose file cannot be put back: its snapshot was truncated."""

LONG: list[SessionEvent] = [
    event
    for turn in range(8)
    for event in (
        UserPrompt(f"Question {turn}: explain part {turn} of the design"),
        AssistantMessage(f"Part {turn} works like this. " + "Details upon details. " * 100),
    )
]
"""A conversation long enough that a summary makes it shorter: compaction writes one."""


class Store:
    """A store built for one test, with the workspace the DEMO session left behind."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.path = root / ("sessions.db" if kind == "sqlite" else "sessions")
        self.text = f"{kind}:{self.path}"
        self.workspace = root / "workspace"

    async def _open(self) -> Checkpointer:
        if self.kind == "sqlite":
            return await SqliteCheckpointer(self.path).open()
        return file_backend.make(BackendContext(path=self.path))

    async def _build(self) -> None:
        checkpointer = await self._open()
        try:
            await checkpointer.append("demo", DEMO)
            await checkpointer.append("partial", PARTIAL)
            await checkpointer.append("long", LONG)
        finally:
            await checkpointer.close()

    async def _events(self, session: str) -> list[SessionEvent]:
        checkpointer = await self._open()
        try:
            return [stored.event async for stored in checkpointer.read(session)]
        finally:
            await checkpointer.close()

    def build(self) -> None:
        asyncio.run(self._build())
        self.workspace.mkdir()
        (self.workspace / "notes.txt").write_bytes(b"v2\n")
        (self.workspace / "logo.bin").write_bytes(LOGO)

    def events(self, session: str = "demo") -> list[SessionEvent]:
        return asyncio.run(self._events(session))

    def log_bytes(self, session: str = "demo") -> bytes:
        """The session's log, read back, as bytes: equal bytes mean an unchanged log."""
        return msgspec.json.encode(self.events(session))

    def files(self) -> dict[str, bytes]:
        """The workspace's files (restore keeps its journal in a folder of its own)."""
        return {p.name: p.read_bytes() for p in sorted(self.workspace.iterdir()) if p.is_file()}


WORKSPACE_AFTER_DEMO = {"logo.bin": LOGO, "notes.txt": b"v2\n"}


@pytest.fixture(params=["sqlite", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    built = Store(request.param, tmp_path)
    built.build()
    return built


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    built = Store("sqlite", tmp_path)
    built.build()
    return built


# -- running the command --------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **extra}


def _command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "checkpointspec.conformance.frontends.cli", *map(str, args)]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*args), env=_env(), capture_output=True, text=True, timeout=TIMEOUT
    )


def refused(done: subprocess.CompletedProcess[str], *phrases: str) -> str:
    """Assert exit 2, one line on stderr containing ``phrases`` and no traceback."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def test_help_lists_the_operator_commands() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    for command in ("sessions", "checkpoints", "restore", "compact"):
        assert f"    {command} " in done.stdout


# -- sessions and checkpoints ---------------------------------------------------------------------


def test_sessions_lists_every_session_with_its_mtime(store: Store) -> None:
    done = run("sessions", store.text)
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout
    assert "partial" in done.stdout
    assert "long" in done.stdout
    assert "modified (UTC)" in done.stdout
    assert " 13 " in done.stdout  # the demo session's events


def test_checkpoints_lists_prompts_files_and_unavailable_files(store: Store) -> None:
    done = run("checkpoints", store.text, "demo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Create the notes file" in out
    assert "with some detail" not in out  # the prompt's first line only
    assert "Edit the notes and add a logo" in out
    assert "logo.bin" in out
    assert "notes.txt" in out
    partial = run("checkpoints", store.text, "partial")
    assert partial.returncode == 0, partial.stderr
    assert "big.log (truncated)" in partial.stdout


def test_checkpoints_of_an_unknown_session_is_refused(store: Store) -> None:
    refused(run("checkpoints", store.text, "nobody"), "no session 'nobody'")
    refused(run("checkpoints", store.text, ""), "session_id")


def test_sessions_of_an_empty_store(tmp_path: Path) -> None:
    asyncio.run(file_backend.make(BackendContext(path=tmp_path / "empty")).close())
    done = run("sessions", f"file:{tmp_path / 'empty'}")
    assert done.returncode == 0, done.stderr
    assert "no sessions in" in done.stdout


# -- restore ------------------------------------------------------------------------------------------


def test_restore_puts_files_back_and_cuts_the_log(store: Store) -> None:
    done = run("restore", store.text, "demo", "6", "--workspace", store.workspace)
    assert done.returncode == 0, done.stderr
    assert store.files() == {"notes.txt": b"v1\n"}  # logo.bin did not exist at seq 6
    assert store.events() == DEMO[:5]
    assert "restored session 'demo' to just before seq 6" in done.stdout
    assert "files put back (1): notes.txt" in done.stdout
    assert "files removed (1): logo.bin" in done.stdout
    assert "[2/2] notes.txt" in done.stdout  # one line per file when not on a terminal


def test_restore_conversation_only_leaves_the_files(store: Store) -> None:
    done = run("restore", store.text, "demo", "6", "--conversation-only")
    assert done.returncode == 0, done.stderr
    assert store.files() == WORKSPACE_AFTER_DEMO
    assert store.events() == DEMO[:5]
    assert "conversation: cut after seq 5" in done.stdout


def test_restore_files_only_keeps_the_conversation(store: Store) -> None:
    done = run("restore", store.text, "demo", "1", "--files-only", "--workspace", store.workspace)
    assert done.returncode == 0, done.stderr
    assert store.files() == {}
    assert store.events() == DEMO
    assert "conversation: unchanged" in done.stdout


def test_restore_without_a_workspace_says_how_to_go_on(store: Store) -> None:
    before = store.log_bytes()
    line = refused(run("restore", store.text, "demo", "6"), "workspace_required")
    assert "--workspace" in line
    assert "--conversation-only" in line
    assert store.log_bytes() == before
    assert store.files() == WORKSPACE_AFTER_DEMO


def test_restore_to_a_seq_that_is_not_a_checkpoint_names_the_valid_ones(store: Store) -> None:
    before = store.log_bytes()
    refused(
        run("restore", store.text, "demo", "7", "--workspace", store.workspace),
        "seq 7 is not a checkpoint",
        "1, 6, 12",
    )
    assert store.log_bytes() == before


def test_restore_refusal_names_its_reason_code_and_path(store: Store) -> None:
    (store.workspace / "notes.txt").write_bytes(b"edited by hand\n")
    before = store.log_bytes()
    refused(
        run("restore", store.text, "demo", "6", "--workspace", store.workspace),
        "out_of_band_change",
        "notes.txt",
    )
    assert store.log_bytes() == before
    assert (store.workspace / "notes.txt").read_bytes() == b"edited by hand\n"
    refused(
        run("restore", store.text, "partial", "1", "--workspace", store.workspace),
        "snapshot_truncated",
        "big.log",
    )


def test_restore_of_an_unknown_session_is_refused(store: Store) -> None:
    refused(run("restore", store.text, "nobody", "1", "--conversation-only"), "no session")


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["demo", "0"], "SEQ 0"),
        (["demo", "six"], "SEQ 'six'"),
        (["demo", "6", "--conversation-only", "--files-only"], "not allowed with"),
        (["demo", "6", "--workspace", "/no/such/dir"], "no such directory"),
    ],
)
def test_restore_usage_errors(sqlite_store: Store, args: list[str], phrase: str) -> None:
    before = sqlite_store.log_bytes()
    refused(run("restore", sqlite_store.text, *args), phrase)
    assert sqlite_store.log_bytes() == before


# -- compact ------------------------------------------------------------------------------------------


def test_compact_appends_a_summary_and_reports_estimated_tokens(store: Store) -> None:
    done = run("compact", store.text, "long", "--instructions", "keep the part numbers")
    assert done.returncode == 0, done.stderr
    events = store.events("long")
    assert events[: len(LONG)] == LONG
    assert len(events) == len(LONG) + 1
    summary = events[-1]
    assert isinstance(summary, Summary)
    assert summary.through_seq == len(LONG)
    assert "compacted session 'long': summary at seq 17" in done.stdout
    assert f"tokens {summary.tokens_before:,} → {summary.tokens_after:,}, estimated" in done.stdout
    assert "archiving" in done.stdout  # stages are printed as they start


def test_compact_of_a_compacted_session_writes_nothing(store: Store) -> None:
    assert run("compact", store.text, "long").returncode == 0
    before = store.log_bytes("long")
    done = run("compact", store.text, "long")
    assert done.returncode == 0, done.stderr
    assert "not compacted: nothing new since the last summary; log unchanged" in done.stdout
    assert store.log_bytes("long") == before


def test_compact_of_an_unknown_session_is_refused(store: Store) -> None:
    refused(run("compact", store.text, "nobody"), "no session 'nobody'")


def test_compact_with_a_summarizer_that_does_not_import_is_refused(sqlite_store: Store) -> None:
    before = sqlite_store.log_bytes()
    refused(
        run("compact", sqlite_store.text, "demo", "--summarizer", "no_such_module_xyz:make"),
        "--summarizer",
        "cannot import",
    )
    assert sqlite_store.log_bytes() == before


def test_compact_whose_summarizer_fails_exits_1_with_the_log_unchanged(store: Store) -> None:
    before = store.log_bytes("long")
    done = run("compact", store.text, "long", "--summarizer", "operator_fixtures:failing")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "compaction failed, log unchanged: ConnectionError" in done.stderr
    assert store.log_bytes("long") == before


def test_compact_with_something_that_is_not_a_summarizer_is_refused(sqlite_store: Store) -> None:
    refused(
        run("compact", sqlite_store.text, "long", "--summarizer", "builtins:object"),
        "has no summarize()",
    )


# -- Ctrl-C ---------------------------------------------------------------------------------------------


@pytest.fixture
def gate() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def _wait_for_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == READY:
            return
    raise AssertionError(f"the command ended before it was ready: {proc.wait()}")


def test_ctrl_c_cancels_a_compaction_and_leaves_the_log_unchanged(store: Store) -> None:
    before = store.log_bytes()
    with subprocess.Popen(
        _command("compact", store.text, "demo", "--summarizer", "operator_fixtures:blocking"),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        _wait_for_ready(proc)  # the summarizer runs: the command is inside the compaction
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "cancelled, log unchanged" in err
    assert store.log_bytes() == before


def test_ctrl_c_cancels_a_restore_and_leaves_files_and_log(
    tmp_path: Path, gate: tuple[int, int]
) -> None:
    built = Store("file", tmp_path)
    built.build()
    before = built.log_bytes()
    read_end, write_end = gate
    with subprocess.Popen(
        _command(
            "restore",
            f"operator_fixtures:gated={built.path}",
            "demo",
            "6",
            "--workspace",
            built.workspace,
        ),
        env=_env(**{GATE_FD: str(read_end)}),
        pass_fds=(read_end,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        _wait_for_ready(proc)  # the restore is reading the log
        proc.send_signal(signal.SIGINT)
        assert "cancelling" in proc.stderr.readline()  # the handler set the cancel event
        os.write(write_end, b"go")  # let the restore go on: it finds itself cancelled
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "restore cancelled, files and log unchanged" in err
    assert built.log_bytes() == before
    assert built.files() == WORKSPACE_AFTER_DEMO


# -- unreachable stores ---------------------------------------------------------------------------------


def test_a_store_that_is_not_there_is_refused_and_not_created(tmp_path: Path) -> None:
    for text in (f"sqlite:{tmp_path}/typo.db", f"file:{tmp_path}/typo"):
        for command, *rest in (["sessions"], ["checkpoints", "demo"], ["compact", "demo"]):
            refused(run(command, text, *rest), "no store at")
        refused(run("restore", text, "demo", "1", "--conversation-only"), "no store at")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("store", "phrase"),
    [
        ("sessions.db", "no scheme"),
        ("mysql://localhost/db", "unknown scheme 'mysql'"),
        ("postgres://localhost/db", "not a PostgreSQL connection string"),
        ("sqlite:", "sqlite: needs a database file"),
    ],
)
def test_a_malformed_store_is_refused(store: str, phrase: str) -> None:
    refused(run("sessions", store), phrase)


def test_a_store_of_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    store = Store("file", tmp_path)
    store.build()
    marker = store.path / "format.json"
    marker.write_text('{"format": "checkpointspec.file", "version": 99}\n')
    before = {p: p.read_bytes() for p in sorted(store.path.rglob("*")) if p.is_file()}
    refused(run("sessions", store.text), "newer version", "schema 99")
    assert {p: p.read_bytes() for p in sorted(store.path.rglob("*")) if p.is_file()} == before


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_bytes(b"just some notes\n" * 20)
    refused(run("sessions", f"sqlite:{notes}"), "not an SQLite database")
    assert notes.read_bytes() == b"just some notes\n" * 20


# -- parsing STORE (reference/store_arguments.py) ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sqlite:./sessions.db", StoreSpec("sqlite:./sessions.db", "sqlite", Path("sessions.db"))),
        ("file:./sessions/", StoreSpec("file:./sessions/", "file", Path("sessions"))),
        ("sqlite:/a=b.db", StoreSpec("sqlite:/a=b.db", "sqlite", Path("/a=b.db"))),
        (
            "mypkg.backend:make=./store",
            StoreSpec("mypkg.backend:make=./store", "module", Path("store"), "mypkg.backend:make"),
        ),
        (
            "m:Factory.make=/x=y",
            StoreSpec("m:Factory.make=/x=y", "module", Path("/x=y"), "m:Factory.make"),
        ),
    ],
)
def test_parse_store(text: str, expected: StoreSpec) -> None:
    assert parse_store(text) == expected


def test_parse_store_expands_the_home_directory() -> None:
    assert parse_store("file:~/sessions").path == Path.home() / "sessions"


@pytest.mark.parametrize(
    ("text", "error", "reason"),
    [
        ("sessions.db", StoreSpecError, "no scheme"),
        ("sqlite:", StoreSpecError, "sqlite: needs a database file"),
        ("file:", StoreSpecError, "file: needs a directory"),
        ("mysql:db", UnknownSchemeError, "unknown scheme 'mysql'"),
        ("postgres:", StoreSpecError, "postgres: needs a DSN"),
        ("mypkg.backend:make", UnknownSchemeError, "unknown scheme 'mypkg.backend'"),
        ("my-pkg:make=/x", UnknownSchemeError, "unknown scheme 'my-pkg'"),
        ("mypkg:not-a-name=/x", StoreSpecError, "'not-a-name' is not a function name"),
        ("mypkg:make=", StoreSpecError, "mypkg:make= needs a directory"),
    ],
)
def test_parse_store_refuses_malformed_text(
    text: str, error: type[StoreSpecError], reason: str
) -> None:
    with pytest.raises(error) as caught:
        parse_store(text)
    assert type(caught.value) is error
    assert reason in str(caught.value)
    assert caught.value.store == text


def test_unknown_scheme_carries_the_scheme() -> None:
    with pytest.raises(UnknownSchemeError) as caught:
        parse_store("redis:x")
    assert caught.value.scheme == "redis"


def test_check_store_refuses_missing_parents_directories_and_empty_databases(
    tmp_path: Path,
) -> None:
    with pytest.raises(NoStoreError, match=r"directory .*nowhere does not exist"):
        check_store(parse_store(f"sqlite:{tmp_path}/nowhere/s.db"))
    with pytest.raises(StoreUnreachableError, match="is a directory") as caught:
        check_store(parse_store(f"sqlite:{tmp_path}"))
    assert "?" not in caught.value.reason
    (tmp_path / "checkpoints.db").write_bytes(b"")
    with pytest.raises(StoreUnreachableError, match=r"\(sqlite:.*/checkpoints\.db\?\)"):
        check_store(parse_store(f"sqlite:{tmp_path}"))
    (tmp_path / "checkpoints.db").unlink()
    with pytest.raises(NoStoreError, match=r"holds no format\.json"):
        check_store(parse_store(f"file:{tmp_path}"))
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("VACUUM").connection.close()
    with pytest.raises(NoStoreError, match="an empty SQLite database"):
        check_store(parse_store(f"sqlite:{empty}"))
    with pytest.raises(NoStoreError, match="no store at"):
        check_store(parse_store(f"mod:make={tmp_path}/missing"))


def test_open_store_refuses_a_newer_schema_untouched(sqlite_store: Store) -> None:
    with sqlite3.connect(sqlite_store.path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = sqlite_store.path.read_bytes()
    with pytest.raises(StoreUnreachableError, match="newer version") as caught:
        asyncio.run(open_store(sqlite_store.text))
    assert caught.value.location == str(sqlite_store.path)
    assert sqlite_store.path.read_bytes() == before


def test_open_store_refuses_a_factory_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(StoreFactoryError, match="cannot import"):
        asyncio.run(open_store(f"no_such_module_xyz:make={tmp_path}"))
    with pytest.raises(StoreFactoryError, match="not a Checkpointer"):
        asyncio.run(open_store(f"builtins:str={tmp_path}"))


def test_open_store_opens_a_module_factory_store(tmp_path: Path) -> None:
    async def sessions() -> list[str]:
        made = file_backend.make(BackendContext(path=tmp_path))
        await made.append("s", [UserPrompt("hi")])
        await made.close()
        opened = await open_store(f"checkpointspec.backends.file:make={tmp_path}")
        try:
            return [info.id for info in await opened.list_sessions()]
        finally:
            await opened.close()

    assert asyncio.run(sessions()) == ["s"]
