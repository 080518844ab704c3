"""Backends that keep their stores "elsewhere" (`ExternalStorage`), for the kit's
clean-up: `RemembersStores` is the memory reference backend that records, in a file
named by its ``ledger`` option, every store it opens and every directory the kit
asks it to drop; `CannotDrop` refuses to drop anything. The kit loads them by
``module:attribute``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.spec import BackendContext

__all__ = ["CannotDrop", "RemembersStores"]


OPENED_MARK = "opened-by-remembers-stores"
"""The file `RemembersStores` leaves in each store directory it opens."""


class RemembersStores(MemoryCheckpointer):
    """The memory backend, noting each store it opens (``opened PATH``) and each drop
    the kit asks for (``dropped DIRECTORY``) in the file ``ctx.options["ledger"]``."""

    ledger: Path

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """A handle on the process-wide store of ``ctx.path``, noted in the ledger."""
        if not ctx.path.is_dir():  # BackendContext: the path already exists
            raise FileNotFoundError(f"the store's directory {ctx.path} does not exist")
        handle = cls(store_for(ctx.path))
        (ctx.path / OPENED_MARK).touch()
        handle.ledger = Path(ctx.options["ledger"])
        with handle.ledger.open("a", encoding="utf-8") as noted:
            noted.write(f"opened {ctx.path}\n")
        return handle

    async def drop_stores(self, directory: Path) -> list[str]:
        """Note the drop and the store directories still there for it to find (``found
        PATH``: each one this class opened); a memory store has nothing outside to remove."""
        present = sorted(p.parent for p in directory.rglob(OPENED_MARK))
        with self.ledger.open("a", encoding="utf-8") as noted:
            noted.write(f"dropped {directory}\n")
            noted.writelines(f"found {p}\n" for p in present)
        return [str(directory)]


class CannotDrop(RemembersStores):
    """Refuses every drop, as a store whose server went away would."""

    async def drop_stores(self, directory: Path) -> list[str]:
        raise ConnectionError("the server is gone")
