"""Holding a session for restore or compaction: the maintenance lock, whatever the backend.

Restore and compaction read a session, decide, and write; a writer appending
in between would be cut off by the truncate or left out of the summary. They
hold the session through `maintenance`:

- a backend that declares MAINTENANCE provides the lock (`MaintenanceLockable`):
  every other handle, in any process, is refused with `SessionLockedError`;
- any other backend gets a lock local to this process. Writers elsewhere are
  then not shut out, but they are not lost either: restore and compaction
  write with ``expected_head``, so a concurrent append turns into a conflict
  that undoes the maintenance, never into a lost event.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator

from ..spec import Capability, Checkpointer, MaintenanceLockable, SessionLockedError

__all__ = ["maintenance"]

_local: weakref.WeakKeyDictionary[Checkpointer, set[str]] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def maintenance(checkpointer: Checkpointer, session_id: str) -> AsyncIterator[None]:
    """Hold ``session_id`` for the duration of the block.

    Raises `SessionLockedError` at once when the session is already held (by a
    restore or compaction through this process or, with MAINTENANCE, any
    other). The lock is released when the block ends, however it ends.
    """
    if Capability.MAINTENANCE in checkpointer.capabilities and isinstance(
        checkpointer, MaintenanceLockable
    ):
        await checkpointer.acquire_maintenance(session_id)
        try:
            yield
        finally:
            await checkpointer.release_maintenance(session_id)
        return
    held = _local.setdefault(checkpointer, set())
    if session_id in held:
        raise SessionLockedError(session_id, "maintenance")
    held.add(session_id)
    try:
        yield
    finally:
        held.discard(session_id)
