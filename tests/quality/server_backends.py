"""PostgreSQL backends that declare DURABLE on a server that cannot keep the promise.

Each is the PostgreSQL reference backend, unchanged, whose throwaway servers
(`PostgresCheckpointer.launch_server`, the kit's server crash checks) run with one
setting that breaks durability: the backend's code is correct, its claim is not.
``violates`` names the rule the kit must report. Like the other broken backends,
every class is its own factory (``server_backends:FsyncOff.make``); the kit's
runs need a PostgreSQL server for the store the factory opens first
(``--option dsn=...`` or ``$CHECKPOINTSPEC_POSTGRES_DSN``) and ``initdb`` for
the servers it launches. Nothing here is correct on purpose.
"""

from __future__ import annotations

from typing import ClassVar, Self

from checkpointspec.backends.postgres import PostgresCheckpointer, open_store
from checkpointspec.backends.postgres.cluster import KIT_SETTINGS, with_settings
from checkpointspec.spec import BackendContext

__all__ = ["SERVED", "FsyncOff", "Served", "SynchronousCommitOff"]


class Served(PostgresCheckpointer):
    """A `PostgresCheckpointer` whose launched servers break durability; ``violates`` is the
    rule the kit must report."""

    violates: ClassVar[str]

    @classmethod
    async def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: the PostgreSQL factory's handle, of this class."""
        return await open_store(cls, ctx)


class SynchronousCommitOff(Served):
    """Bug: declares DURABLE on a server with ``synchronous_commit=off``, which
    acknowledges a commit before its log is written: a server killed right after
    the acknowledgement loses it. The kit must report DUR-002."""

    violates = "DUR-002"
    server_settings = with_settings(KIT_SETTINGS, "synchronous_commit=off")


class FsyncOff(Served):
    """Bug: declares DURABLE on a server with ``fsync=off``, which writes its log but
    never syncs it: a killed server loses nothing (the page cache keeps it), a power
    cut loses acknowledged commits. The kit must report DUR-003."""

    violates = "DUR-003"
    server_settings = with_settings(KIT_SETTINGS, "fsync=off")


SERVED: dict[str, type[Served]] = {cls.__name__: cls for cls in (SynchronousCommitOff, FsyncOff)}
"""Every backend of this module, by class name."""
