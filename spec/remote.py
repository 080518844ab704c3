"""Opt-ins of backends whose store lives on a server reached over TCP.

The kit checks what happens between such a backend and its server by standing
between them: it runs a loopback proxy that cuts, delays and resets the
connections (NET-001), and it loses the primary of a replicated pair and
promotes its standby (DUR-004). It cannot know how a backend names its server,
so the backend tells it through these protocols, implemented on the
checkpointer class; without them those rules are skipped with the protocol's
name as the reason.

Pure: no I/O here, only the shapes the kit and the backend agree on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

__all__ = ["FailoverPair", "Replicated", "ServerAddress", "ServerRouted"]


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
