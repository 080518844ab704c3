"""A broken session layer for the RESTORE-006 checks: restore writes files in place, no journal.

A kill between two files, or between the files and the truncate, leaves a mix
that nothing can repair; the kit must say so.
"""

from __future__ import annotations

import os
from typing import Any

from checkpointspec.reference.journal import read_file
from checkpointspec.spec import Checkpointer, FileSystem
from checkpointspec.spec.restoration import plan_restore


async def restore(
    checkpointer: Checkpointer,
    session_id: str,
    seq: int,
    *,
    workspace: Any = None,
    files: bool = True,
    conversation: bool = True,
    fs: FileSystem,
    fault_hook: Any = None,
    **_: object,
) -> None:
    root = os.fspath(workspace)
    log = [s async for s in checkpointer.read(session_id)]
    paths = {getattr(s.event, "path", None) for s in log} - {None}
    current = {}
    for path in paths:
        content = read_file(fs, os.path.join(root, str(path)))
        if content is not None:
            current[str(path)] = content
    plan = plan_restore(session_id, log, seq, current, files=files, conversation=conversation)
    for restore_ in plan.files:
        full = os.path.join(root, restore_.path)
        if restore_.content is None:
            if fs.stat(full) is not None:
                fs.unlink(full)
        else:
            fd = fs.open(full, create=True, truncate=True)
            try:
                fs.write(fd, restore_.content, 0)
                fs.fsync(fd)
            finally:
                fs.close(fd)
    if plan.keep_through is not None:
        await checkpointer.truncate(session_id, plan.keep_through, plan.expected_head)


async def recover(checkpointer: Checkpointer, session_id: str, workspace: Any, **_: object) -> str:
    return "nothing"
