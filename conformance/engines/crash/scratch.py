"""Store files a crash leaves nothing in that matters: declared by the backend, or known.

A file the backend maps shared and writable is written without a system call, so a
trace cannot say what a crash leaves in it, and a crash check cannot judge a store
that relies on one. A file the store rebuilds on open is *scratch*: whatever a crash
leaves in it is never read. A backend declares its scratch files
(`checkpointspec.spec.ScratchFiles`, the stdio hello's ``scratch_files``, a lite-agent
checkpointer's ``scratchFiles()``); the one every SQLite store in WAL mode has, in
any language, the kit knows without being told (`detected`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

__all__ = ["SQLITE_WAL_INDEX", "detected", "unseen"]

SQLITE_HEADER: Final = b"SQLite format 3\x00"

SQLITE_WAL_INDEX: Final = (
    "SQLite's WAL index: shared memory that the first connection after a crash rebuilds "
    "from the WAL (https://sqlite.org/walformat.html#the_wal_index_file)"
)


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def detected(store: Path, mapped: Iterable[str]) -> dict[str, str]:
    """The scratch files among ``mapped`` (paths relative to ``store``) the kit knows:
    ``X-shm`` beside a SQLite database ``X`` is its WAL index."""
    return {
        path: SQLITE_WAL_INDEX
        for path in mapped
        if path.endswith("-shm") and _is_sqlite(store / path.removesuffix("-shm"))
    }


def unseen(store: Path, mapped: Iterable[str], declared: Mapping[str, str]) -> list[str]:
    """The files of ``mapped`` neither ``declared`` scratch (glob patterns) nor detected
    as such (`detected`): what a trace cannot judge, sorted."""
    known = detected(store, mapped)
    return sorted(
        path
        for path in mapped
        if path not in known and not any(fnmatch.fnmatch(path, p) for p in declared)
    )
