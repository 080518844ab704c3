"""Opt-ins of backends whose store lives on a server: what such a backend lets the kit do to it.

The kit's checks of a file backend reach its files; a server backend's data is
written by another program, the server, which the kit cannot reach through the
backend's handle. These protocols, implemented on the checkpointer class, close
the gap; without them the rules they serve are skipped with the protocol's name
as the reason.

- `ServerLaunching`: the handle starts a throwaway server of the kind it talks to
  and hands the kit a `ServerControl` for it. The kit checks DUR-002 by killing
  every server process and DUR-003 by tracing the server's writes to its data
  directory and starting a server on a copy of each crash state of that directory.
- `ServerRouted`: the handle says where its server is (a `ServerAddress`) and how
  to reach the same store through another address: the kit runs a loopback proxy
  there that cuts, delays and resets the connections (NET-001).
- `Replicated`: the handle starts a throwaway primary and standby (a
  `FailoverPair`); the kit loses the primary and promotes the standby (DUR-004).

This module only defines the types; it performs no I/O and knows no server.
PostgreSQL's implementations are in `checkpointspec.backends.postgres`
(`cluster.Cluster`, `replication.PostgresPair`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

__all__ = [
    "FailoverPair",
    "Replicated",
    "ServerAddress",
    "ServerControl",
    "ServerLaunching",
    "ServerRouted",
]


class ServerAddress(msgspec.Struct, frozen=True):
    """A TCP endpoint: the server a handle connects to, or a proxy in front of it."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@runtime_checkable
class ServerRouted(Protocol):
    """Optional: the handle says where its server is, and how to reach the same store elsewhere.

    The kit opens a handle through the factory, asks it for ``server_address()``,
    starts a proxy in front of that address and opens the same store again
    through the factory with ``options_via(options, proxy)``: every connection of
    that second handle must go through the proxy (NET-001). A PostgreSQL backend
    rewrites the host and port of its DSN; a backend for another server rewrites
    whatever option names its endpoint.
    """

    def server_address(self) -> ServerAddress | None:
        """The TCP endpoint this handle's connections go to; None when it is not one
        (a unix socket), which skips the rules that need a proxy."""
        ...

    def options_via(self, options: Mapping[str, str], address: ServerAddress) -> dict[str, str]:
        """The factory options (``BackendContext.options``) that open the same store,
        every connection going to ``address`` instead of `server_address`."""
        ...


class FailoverPair(Protocol):
    """A primary server and a standby the kit may break: made by `Replicated`.

    The kit calls, in this order: `start_standby` once, then runs a workload on
    handles opened with ``options``, then `lose_primary`, `promote_standby`, and
    at the end `stop` (also after a failure).
    """

    @property
    def primary(self) -> ServerAddress:
        """Where the primary listens for replication (the kit puts a proxy in front of it)."""
        ...

    @property
    def options(self) -> dict[str, str]:
        """The factory options that open stores on the pair: whichever of the two is
        the writable primary, before and after the failover."""
        ...

    async def start_standby(self, upstream: ServerAddress) -> None:
        """Start the standby from a copy of the primary, streaming from ``upstream``
        (the kit's proxy to `primary`); return once it streams, and for a synchronous
        standby once the primary waits for it on every commit."""
        ...

    async def lose_primary(self) -> None:
        """Kill the primary at once, as a crashed host would be lost: no shutdown,
        nothing more sent to the standby. Return once it is gone."""
        ...

    async def promote_standby(self) -> None:
        """Make the standby the writable primary; return once it accepts writes."""
        ...

    async def stop(self) -> None:
        """Stop whatever of the pair still runs and remove what it left on disk."""
        ...


@runtime_checkable
class Replicated(Protocol):
    """Optional, with `checkpointspec.spec.Capability.REPLICATED`: a failover pair to break.

    DUR-004 needs a primary and a standby replicating as the backend's
    deployment does, which the kit is allowed to kill and promote: the backend
    starts one, configured as it promises (synchronous replication for a
    PostgreSQL backend), on this machine.
    """

    async def start_failover_pair(self, directory: Path) -> FailoverPair:
        """Start a primary keeping its files under ``directory`` (empty, the kit's);
        the standby starts with `FailoverPair.start_standby`."""
        ...


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
