"""The server port: how a backend whose data lives in a database server lets the kit crash it.

A file backend's crashes can be rebuilt from its own writes; a server backend's
data is written by another program, the server, which the kit cannot reach
through the backend's handle. `ServerLaunching` is the opt-in that closes the
gap: the handle starts a throwaway server of the kind it talks to and hands the
kit a `ServerControl` for it. The kit then checks DUR-002 by killing every
server process and DUR-003 by tracing the server's writes to its data directory
and starting a server on a copy of each crash state of that directory.

This module only defines the types; it performs no I/O and knows no server.
PostgreSQL's implementation is `checkpointspec.backends.postgres.cluster.Cluster`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["ServerControl", "ServerLaunching"]


class ServerControl(Protocol):
    """One running (or stopped) throwaway server, with every file it keeps in one directory.

    Every method returns once the server is in the state it names, or raises
    (an ``OSError`` or ``RuntimeError`` saying what did not happen in time).
    """

    @property
    def options(self) -> Mapping[str, str]:
        """The backend options (``BackendContext.options``) that point a handle at this
        server, e.g. ``{"dsn": "postgresql://..."}``: the address it serves. They stay
        the same across `crash` and `start`."""
        ...

    @property
    def data_directory(self) -> Path:
        """The directory that holds everything the server keeps; a copy of it, made
        while no server runs on it, is a server of its own (see `copy_at`)."""
        ...

    def processes(self) -> list[int]:
        """The process ids of every server process, the main one first; empty when it is down."""
        ...

    def start(self) -> None:
        """Start the server on `data_directory` and return once it accepts connections
        (after a crash: once its recovery is done)."""
        ...

    def crash(self) -> None:
        """SIGKILL every server process and return once none is alive: what the server
        had not written to `data_directory` is lost, as in a crash of the server's host
        that kept its page cache."""
        ...

    def settle(self) -> None:
        """Make everything written so far durable and return with the server idle until the
        next request: its files are then an image a crash may start from."""
        ...

    def copy_at(self) -> ServerControl:
        """A stopped server with the same settings whose `data_directory` does not exist
        yet: the kit writes a crash state there and calls `start`."""
        ...

    def remove(self) -> None:
        """Stop the server if it runs and remove every file it kept."""
        ...


@runtime_checkable
class ServerLaunching(Protocol):
    """Opt-in for the server crash checks (DUR-002 and DUR-003 of a server backend).

    A backend whose store lives in a server implements ``launch_server`` on its
    handles. The kit calls it on a handle the factory opened, then opens handles
    through the factory with `ServerControl.options` added to the run's options,
    so that they store into the new server, which it kills, restarts and copies.
    Without this protocol the server crash checks are skipped with that reason.
    """

    def launch_server(self) -> ServerControl:
        """A new throwaway server of the kind this handle talks to, started, with the
        settings its durability claim rests on; the kit removes it (`ServerControl.remove`)."""
        ...
