"""SQLAlchemySession on SQLite (openai-agents 0.6.0) commits in a way a power loss can undo.

Found by ``checkpointspec run --openai-session`` (OASPOWER-001) on openai-agents 0.6.0;
0.24.0 opens SQLite in WAL mode and no longer does it. 0.6.0 keeps SQLite's defaults:
a rollback journal (``journal_mode=DELETE``) and ``synchronous=FULL``. A transaction
then commits when its journal file is deleted, and SQLite syncs the directory after
that delete only with ``synchronous=EXTRA`` ("EXTRA provides additional durability if
the commit is followed closely by a power loss",
https://sqlite.org/pragma.html#pragma_synchronous). Until the directory reaches the
disk, a power loss brings the journal back, and the next open rolls the answered
``add_items`` back.

This runs one ``add_items`` under strace and shows it: the journal's unlink is the
commit's last step, and no fsync follows it. Run with ``pip install
'openai-agents==0.6.0' 'sqlalchemy[asyncio]' aiosqlite`` and ``python
sqlalchemy_sqlite_power_loss.py`` (needs strace); it exits 1 when nothing syncs the
journal's removal.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path


async def add(db: str) -> None:
    from agents.extensions.memory import SQLAlchemySession

    url = f"sqlite+aiosqlite:///{db}"
    session = SQLAlchemySession.from_url("conv", url=url, create_tables=True)
    await session.get_items()  # the tables
    os.write(2, b"--- add_items\n")  # where the trace of the call begins
    await session.add_items([{"role": "user", "content": "hello"}])
    await session.engine.dispose()


def main() -> None:
    if len(sys.argv) == 2:
        asyncio.run(add(sys.argv[1]))
        return
    directory = tempfile.mkdtemp()
    db = str(Path(directory) / "sessions.db")
    command = ["strace", "-f", "-e", "trace=openat,fsync,fdatasync,unlink,unlinkat,write"]
    trace = subprocess.run(
        [*command, sys.executable, __file__, db], capture_output=True, text=True, check=True
    ).stderr.splitlines()
    start = next(i for i, line in enumerate(trace) if "--- add_items" in line)
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
    if not unlinked:
        print("\nno rollback journal was removed: the commit is not a journal's unlink (WAL)")
        sys.exit(0)
    synced_after = any("sync(" in line for line in steps[unlinked[-1] + 1 :])
    print(
        f"\nthe journal's unlink is step {unlinked[-1] + 1} of {len(steps)}: "
        f"{'an fsync follows it' if synced_after else 'no fsync of its directory follows it'}"
    )
    sys.exit(0 if synced_after else 1)


if __name__ == "__main__":
    main()
