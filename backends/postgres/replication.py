"""A PostgreSQL primary and streaming standby on this machine, for the kit to break.

This module owns the PostgreSQL side of the kit's server checks: where a DSN
points and how to point it elsewhere (`server_address`, `dsn_via`: a proxy in
front of the server, NET-001), and `PostgresPair`, the `FailoverPair` that
`PostgresCheckpointer.start_failover_pair` starts for DUR-004: a throwaway
primary (``initdb``), a standby made from a base backup of it and streaming
from wherever the kit says (its proxy), the primary killed with SIGKILL (its
whole process group: postmaster and every server process at once) and the
standby promoted with ``pg_ctl promote``.

A pair replicates as the deployment under test promises: *synchronous*
(``synchronous_standby_names`` names the standby, ``synchronous_commit=on``),
where a commit is acknowledged only once the standby has flushed it, or
*asynchronous*, where the standby may lag behind acknowledged commits.

The servers run as the ``postgres`` (else ``nobody``) user when this runs as
root, in fresh ``0755`` temporary directories named like ``.ci/postgres.py``'s
(``checkpointspec-pg-*/cluster``, with a ``holder`` file naming this process),
so that a pair whose kit was killed is stopped by the next ``.ci/postgres.py``
start. Needs ``initdb``, ``pg_ctl`` and ``pg_basebackup`` on PATH or in
Debian's ``/usr/lib/postgresql/*/bin``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import time
from pathlib import Path
from typing import Final, Literal

import psycopg

from ...spec import ServerAddress
from .cluster import (
    ClusterError,
    alive,
    free_port,
    required_tool,
    run_as,
    server_owner,
    throwaway_directory,
)

__all__ = [
    "STANDBY_NAME",
    "PairError",
    "PostgresPair",
    "Replication",
    "dsn_via",
    "server_address",
]

Replication = Literal["synchronous", "asynchronous"]
"""How a pair's standby replicates: commits wait for it, or not."""

STANDBY_NAME: Final = "standby"
"""The standby's ``application_name``, which ``synchronous_standby_names`` names."""

_ROLE: Final = "checkpointspec"
_DEADLINE: Final = 30.0
"""Seconds a server may take to start, stream, die or be promoted."""
_SETTINGS: Final = (
    "shared_buffers=16MB",
    "max_connections=60",
    "fsync=on",
    "synchronous_commit=on",
    "listen_addresses=127.0.0.1",
    "wal_level=replica",
    "max_wal_senders=4",
    "hot_standby=on",
    # A standby whose upstream went away tries again soon, not after 5 s.
    "wal_retrieve_retry_interval=100ms",
    "wal_receiver_status_interval=1s",
)


class PairError(ClusterError):
    """Starting, killing or promoting a server of the pair failed; the message says which step."""


def server_address(dsn: str) -> ServerAddress | None:
    """The host and port ``dsn`` connects to; None for a unix socket or several hosts."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(params.get("host") or params.get("hostaddr") or "")
    if not host or host.startswith("/") or "," in host:
        return None
    return ServerAddress(host, int(str(params.get("port") or 5432)))


def dsn_via(dsn: str, address: ServerAddress) -> str:
    """``dsn`` with its host and port replaced by ``address``: the same database, reached there."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.pop("hostaddr", None)
    params.update(host=address.host, port=str(address.port))
    return psycopg.conninfo.make_conninfo("", **params)


class _Server:
    """One server of the pair: its directory (``…/cluster``), port and data directory."""

    def __init__(self, owner: str | None) -> None:
        self.owner = owner
        self.home = throwaway_directory()
        if owner is not None:
            entry = pwd.getpwnam(owner)
            os.chown(self.home, entry.pw_uid, entry.pw_gid)
        self.data = self.home / "data"
        self.port = free_port()
        self.address = ServerAddress("127.0.0.1", self.port)

    def command(self, *argv: str) -> None:
        """Run a PostgreSQL tool as the server's user; `ClusterError` with its output if it fails."""
        run_as(list(argv), self.owner)

    def start(self, settings: tuple[str, ...]) -> None:
        options = " ".join(f"-c {setting}" for setting in settings)
        options += f" -p {self.port} -c unix_socket_directories={self.home}"
        log = str(self.home / "server.log")
        self.command(
            required_tool("pg_ctl"), "-D", str(self.data), "-l", log, "-o", options, "-w", "start"
        )

    def postmaster(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """SIGKILL the postmaster's process group (it leads one): every server process at once."""
        pid = self.postmaster()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + _DEADLINE
        while alive(pid):
            if time.monotonic() > deadline:
                raise PairError(f"the primary's postmaster {pid} outlived SIGKILL for {_DEADLINE}s")
            time.sleep(0.01)

    def remove(self) -> None:
        pid = self.postmaster()
        if pid is not None and alive(pid):
            with contextlib.suppress(ClusterError):
                self.command(
                    required_tool("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
                )
        shutil.rmtree(self.home.parent, ignore_errors=True)


class PostgresPair:
    """A throwaway primary and (after `start_standby`) its streaming standby: a `FailoverPair`.

    Made by `PostgresPair.start`; the kit drives it through the `FailoverPair`
    methods and must call `stop`. ``options`` is the kit factory's ``dsn``
    option naming both servers with ``target_session_attrs=read-write``: libpq
    connects to whichever accepts writes, the primary before the failover and
    the promoted standby after it.
    """

    def __init__(self, replication: Replication) -> None:
        self.replication: Replication = replication
        owner = server_owner()
        self._primary = _Server(owner)
        self._standby = _Server(owner)

    @classmethod
    async def start(cls, directory: Path, replication: Replication) -> PostgresPair:
        """Start the primary; ``directory`` (the kit's) records where the pair's servers are."""
        pair = cls(replication)
        (Path(directory) / "pair.txt").write_text(
            f"primary {pair._primary.home}\nstandby {pair._standby.home}\n"
        )
        try:
            await asyncio.to_thread(pair._start_primary)
        except BaseException:
            await pair.stop()
            raise
        return pair

    def _start_primary(self) -> None:
        server = self._primary
        server.command(
            required_tool("initdb"), "-D", str(server.data), "-U", _ROLE, "--auth=trust", "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip
        synchronous = self.replication == "synchronous"
        server.start(
            (*_SETTINGS, f"synchronous_standby_names={STANDBY_NAME}") if synchronous else _SETTINGS
        )

    @property
    def primary(self) -> ServerAddress:
        return self._primary.address

    @property
    def options(self) -> dict[str, str]:
        hosts = f"{self._primary.address},{self._standby.address}"
        return {"dsn": f"postgresql://{_ROLE}@{hosts}/postgres?target_session_attrs=read-write"}

    async def start_standby(self, upstream: ServerAddress) -> None:
        await asyncio.to_thread(self._start_standby, upstream)
        await self._until_streaming()

    def _start_standby(self, upstream: ServerAddress) -> None:
        standby = self._standby
        standby.command(
            required_tool("pg_basebackup"), "-h", self.primary.host, "-p", str(self.primary.port),
            "-U", _ROLE, "-D", str(standby.data), "-X", "stream", "--no-sync",
        )  # fmt: skip
        (standby.data / "standby.signal").write_text("")
        conninfo = (
            f"host={upstream.host} port={upstream.port} user={_ROLE} "
            f"application_name={STANDBY_NAME}"
        )
        with (standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"primary_conninfo = '{conninfo}'\n")
        standby.start(_SETTINGS)

    async def _until_streaming(self) -> None:
        """Wait until the primary streams to the standby (synchronously, for a synchronous pair)."""
        wanted = "sync" if self.replication == "synchronous" else "async"
        deadline = time.monotonic() + _DEADLINE
        dsn = f"postgresql://{_ROLE}@{self.primary}/postgres"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while True:
                cur = await conn.execute(
                    "SELECT sync_state FROM pg_stat_replication"
                    " WHERE application_name = %s AND state = 'streaming'",
                    (STANDBY_NAME,),
                )
                row = await cur.fetchone()
                if row is not None and row[0] == wanted:
                    return
                if time.monotonic() > deadline:
                    raise PairError(
                        f"the standby was not streaming ({wanted}) after {_DEADLINE}s: "
                        f"see {self._standby.home / 'server.log'}"
                    )
                await asyncio.sleep(0.02)

    async def lose_primary(self) -> None:
        await asyncio.to_thread(self._primary.kill)

    async def promote_standby(self) -> None:
        await asyncio.to_thread(
            self._standby.command,
            required_tool("pg_ctl"),
            "-D",
            str(self._standby.data),
            "-w",
            "promote",
        )

    async def stop(self) -> None:
        for server in (self._primary, self._standby):
            await asyncio.to_thread(server.remove)
