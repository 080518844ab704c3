"""What a check tells an author to write, in the author's language, and the scratch
files the kit knows without being told (SQLite's WAL index, in any language)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from checkpointspec.backends.stdio.client import StdioCheckpointer
from checkpointspec.backends.stdio.messages import HelloResult
from checkpointspec.conformance.engines.crash.recorder import tracer_unavailable
from checkpointspec.conformance.engines.crash.scratch import SQLITE_WAL_INDEX, detected, unseen
from checkpointspec.conformance.engines.target.authoring import (
    how_to_declare_scratch,
    how_to_give_store_hooks,
    missing_python_protocol,
    why_no_simulated_disk,
)
from checkpointspec.conformance.engines.target.provenance import BackendHandle
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit


def _stdio_handle(name: str) -> StdioCheckpointer:
    # Only the hello is read: no child process is needed to ask what it was called.
    handle = StdioCheckpointer.__new__(StdioCheckpointer)
    handle._hello = HelloResult(protocol=1, capabilities=[], name=name)
    return handle


def test_each_author_is_told_in_their_own_terms() -> None:
    python, protocol = how_to_declare_scratch(object()), how_to_declare_scratch(_stdio_handle("x"))
    lite_agent = how_to_declare_scratch(_stdio_handle("lite-agent make (./store.mjs)"))
    assert "ScratchFiles.scratch_files()" in python
    assert '"scratch_files"' in protocol
    assert "ScratchFiles" not in protocol
    assert "scratchFiles()" in lite_agent
    assert "ScratchFiles" not in lite_agent
    assert "FileSystemPorted" in why_no_simulated_disk(object())
    held = BackendHandle.wrap(_stdio_handle("lite-agent make (./s.mjs)"))  # as checks hold it
    assert "scratchFiles()" in how_to_declare_scratch(held)
    for handle in (_stdio_handle("x"), _stdio_handle("lite-agent make (./s.mjs)")):
        said = why_no_simulated_disk(handle)
        assert "FileSystemPorted" not in said
        assert "DUR-003::power_loss_after_every_system_call" in said


def test_store_hooks_are_asked_for_in_each_language() -> None:
    assert "StoreHooks" in how_to_give_store_hooks(object())
    assert '"store_hooks": true' in how_to_give_store_hooks(_stdio_handle("x"))
    lite_agent = how_to_give_store_hooks(_stdio_handle("lite-agent make (./s.mjs)"))
    assert "markNewerSchema(options)" in lite_agent
    assert "StoreHooks" not in lite_agent


def test_a_python_only_check_says_so_to_other_languages() -> None:
    needs, protocol = "a server it may kill", "ServerLaunching (launch_server())"
    assert "does not implement ServerLaunching" in missing_python_protocol(
        object(), needs, protocol
    )
    for handle in (_stdio_handle("x"), _stdio_handle("lite-agent make (./s.mjs)")):
        said = missing_python_protocol(handle, needs, protocol)
        assert "ServerLaunching" not in said
        assert "written in Python" in said


def test_sqlites_wal_index_is_known_scratch_beside_a_sqlite_database(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        db.execute("CREATE TABLE t (x)")
    (tmp_path / "notes").write_text("not a database", encoding="utf-8")
    mapped = {"sessions.db-shm", "notes-shm", "cache.mmap"}
    assert detected(tmp_path, mapped) == {"sessions.db-shm": SQLITE_WAL_INDEX}
    assert unseen(tmp_path, mapped, {}) == ["cache.mmap", "notes-shm"]
    assert unseen(tmp_path, mapped, {"*.mmap": "rebuilt on open"}) == ["notes-shm"]


def test_a_sqlite_store_that_declares_nothing_is_judged_at_system_call_precision() -> None:
    if tracer_unavailable() is not None:
        pytest.skip(f"no tracer here: {tracer_unavailable()}")
    run = plan_run(
        "undeclared_sqlite:make",
        profile="quick",
        seed=1,
        workers=1,
        only=("DUR-002::killed_at_every_system_call",),
    )
    (result,) = run_kit(run).checks
    assert result.status == "passed", result.reason
