"""A broken session layer for the RESTORE-006 checks: recover always rolls back.

Killed after the truncate, the files go back to before the restore while the
log stays cut: a mix the kit must report.
"""

from __future__ import annotations

import os
from typing import Any

from checkpointspec.backends.fsport import OsFileSystem
from checkpointspec.reference.journal import read_journal, remove_journal, roll_files
from checkpointspec.reference.restore import restore
from checkpointspec.spec import Checkpointer, FileSystem

__all__ = ["recover", "restore"]


async def recover(
    checkpointer: Checkpointer, session_id: str, workspace: Any, *, fs: FileSystem | None = None
) -> str:
    fs = fs or OsFileSystem()
    root = os.path.abspath(os.fspath(workspace))
    journal = read_journal(fs, root, session_id)
    if journal is None:
        return "nothing"
    roll_files(fs, root, journal.files, forward=False)
    remove_journal(fs, root, session_id)
    return "rolled_back"
