"""The SQLite reference backend with its scratch files left undeclared.

A store on SQLite in WAL mode written by an author who never heard of the kit's
`ScratchFiles`: the kit must know SQLite's WAL index (``sessions.db-shm``) without
being told, as it must for a store in any language.
"""

from __future__ import annotations

from typing import Any

from checkpointspec.backends.sqlite.checkpointer import make as make_sqlite
from checkpointspec.spec import BackendContext


class Undeclared:
    """Every call forwarded to the SQLite backend, but no ``scratch_files``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "scratch_files" or name.startswith("__"):  # its own protocols only
            raise AttributeError(name)
        return getattr(self._inner, name)


async def make(ctx: BackendContext) -> Any:
    return Undeclared(await make_sqlite(ctx))
