"""SqliteSessionService commits in a way a power loss can undo.

SqliteSessionService opens its database with SQLite's defaults: a rollback journal
(``journal_mode=DELETE``) and ``synchronous=FULL``. A transaction then commits when
its journal file is deleted; SQLite syncs the directory after that delete only with
``synchronous=EXTRA`` ("EXTRA provides additional durability if the commit is followed
closely by a power loss", https://sqlite.org/pragma.html#pragma_synchronous). Until
the directory reaches the disk, a power loss brings the journal back, and the next
open rolls the answered ``create_session`` back.

This runs one ``create_session`` under strace and shows it: the journal's unlink is
the commit's last step, and no fsync of the directory follows it (google-adk 2.13.0;
needs strace). Run: ``python sqlite_power_loss.py``.
"""

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path


async def create(db: str) -> None:
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    service = SqliteSessionService(db)
    await service.get_session(app_name="app", user_id="u", session_id="none")  # the schema
    os.write(2, b"--- create_session\n")  # where the trace of the call begins
    await service.create_session(app_name="app", user_id="u", session_id="s")


def main() -> None:
    if len(sys.argv) == 2:
        asyncio.run(create(sys.argv[1]))
        return
    directory = tempfile.mkdtemp()
    db = str(Path(directory) / "sessions.db")
    command = ["strace", "-f", "-e", "trace=openat,fsync,fdatasync,unlink,unlinkat,write"]
    trace = subprocess.run(
        [*command, sys.executable, __file__, db], capture_output=True, text=True, check=True
    ).stderr.splitlines()
    start = next(i for i, line in enumerate(trace) if "--- create_session" in line)
    steps = [
        line
        for line in trace[start:]
        if "sync(" in line
        or (
            ("unlink" in line or "openat(" in line)
            and ("sessions.db" in line or f'"{directory}"' in line)
        )
    ]
    print("\n".join(steps))
    unlinked = [i for i, line in enumerate(steps) if "unlink" in line and "-journal" in line]
    synced_after = unlinked and any("sync(" in line for line in steps[unlinked[-1] + 1 :])
    print(
        f"\nthe journal's unlink is step {unlinked[-1] + 1 if unlinked else None} of {len(steps)}: "
        f"{'an fsync follows it' if synced_after else 'no fsync of its directory follows it'}"
    )
    sys.exit(0 if synced_after else 1)


if __name__ == "__main__":
    main()
