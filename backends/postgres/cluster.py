"""Throwaway PostgreSQL clusters: made, started, killed, copied and removed, for tests and the kit.

Everything that starts or stops a PostgreSQL server for this project lives here:
``.ci/postgres.py`` (the command line CI and ``tox`` use) loads this file by its
path, and the kit's server checks get a `Cluster` from
`PostgresCheckpointer.launch_server` as their
`checkpointspec.spec.ServerControl`. Standard library only: ``.ci/postgres.py``
runs before anything is installed, so this module imports nothing of the
package and nothing outside the standard library.

A cluster is a directory: ``data`` (the data directory), ``server.log``, the
unix socket, ``dsn`` and ``holder`` (the process it serves). It listens on
127.0.0.1 at a port chosen when it is made and kept across restarts, trusts
local connections, and is kept small for shared 2-core machines (`SETTINGS`).
PostgreSQL refuses to run as root: run as root, the cluster belongs to the
``postgres`` system user when there is one, else to ``nobody``. ``initdb``,
``pg_ctl`` and ``psql`` are looked up on PATH, then in Debian's
``/usr/lib/postgresql/*/bin``.

Nothing is left running for long: every `make_cluster` and `start` first stops
the clusters under the temporary directory and ``/dev/shm`` whose holder has
died (`reap_stale`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "KIT_SETTINGS",
    "SETTINGS",
    "STALE_PREFIX",
    "SUPERUSER",
    "Cluster",
    "ClusterError",
    "alive",
    "find_tool",
    "free_port",
    "make_cluster",
    "reap_stale",
    "required_tool",
    "run_as",
    "server_owner",
    "start",
    "stop",
    "throwaway_directory",
    "with_settings",
]

SUPERUSER: Final = "checkpointspec"
"""The cluster's superuser role; the DSN connects as it, to database ``postgres``."""

SETTINGS: Final = (
    "shared_buffers=32MB",
    "max_connections=100",
    "fsync=on",
    "synchronous_commit=on",
    "listen_addresses=127.0.0.1",
)
"""The server settings of every cluster: fsync stays on, so the backend's DURABLE
claim is tested as deployed."""


def with_settings(settings: Sequence[str], *changes: str) -> tuple[str, ...]:
    """``settings`` (``name=value`` each) with ``changes`` replacing those of the same
    name and adding the others."""
    names = {change.split("=", 1)[0] for change in changes}
    return (*(s for s in settings if s.split("=", 1)[0] not in names), *changes)


KIT_SETTINGS: Final = with_settings(
    SETTINGS, "autovacuum=off", "max_connections=20", "recovery_init_sync_method=syncfs"
)
"""The settings of the clusters the kit kills and traces: no autovacuum, whose
workers would write to the data directory while the kit takes its image of it;
few connections (a small shared memory segment, started fast); a restart after
a crash that syncs the file system once rather than file by file."""

STALE_PREFIX: Final = "checkpointspec-pg-"
"""The prefix of the temporary directories throwaway clusters are made in (as ``cluster``)."""

PATIENCE: Final = 120.0
"""Seconds a server may take to start, stop or die on a loaded machine."""


class ClusterError(RuntimeError):
    """A PostgreSQL tool failed, is missing, or a server did not do what it was told in time."""


def find_tool(name: str) -> str | None:
    """``initdb``, ``pg_ctl``, ``postgres``, ``psql``: on PATH, else the newest Debian install."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def required_tool(name: str) -> str:
    """`find_tool`'s path; `ClusterError` saying how to install it when there is none."""
    found = find_tool(name)
    if found is None:
        raise ClusterError(f"{name} not found: install PostgreSQL (apt-get install postgresql)")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_owner() -> str | None:
    """The unprivileged user to run the server as, or None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ClusterError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def run_as(argv: list[str], owner: str | None) -> str:
    """Run a PostgreSQL program as ``owner`` (None: this user); its stdout, or
    `ClusterError` with its output when it fails."""
    if owner is not None:
        argv = ["runuser", "-u", owner, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=PATIENCE)
    if result.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.stdout}")
    return result.stdout


def alive(pid: int) -> bool:
    """Whether ``pid`` names a process that has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # it exists, as another user's
            return True
        return True
    return state not in ("Z", "X")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in Path(task).read_text().split()]
    return found


class Cluster:
    """One PostgreSQL cluster in ``directory``: a `checkpointspec.spec.ServerControl`.

    ``settings`` are its server settings (``name=value``), given to every start.
    """

    def __init__(
        self, directory: Path, settings: Sequence[str] = SETTINGS, port: int | None = None
    ) -> None:
        self.directory = directory
        self.settings = tuple(settings)
        self.port = port or free_port()
        self._owner = server_owner()
        self._copied = False
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def data_directory(self) -> Path:
        """The data directory: everything the server keeps."""
        return self.directory / "data"

    @property
    def dsn(self) -> str:
        """The libpq URL of the cluster's ``postgres`` database, as its superuser."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    @property
    def options(self) -> Mapping[str, str]:
        """The backend options that point a handle at this cluster."""
        return {"dsn": self.dsn}

    def _hand_over(self, path: Path) -> None:
        """Give ``path`` (and, for the data directory, what it holds) to the server's user."""
        if self._owner is None:
            return
        entry = pwd.getpwnam(self._owner)
        os.chown(path, entry.pw_uid, entry.pw_gid)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)

    def initialise(self) -> None:
        """``initdb`` a new data directory in the existing, empty ``directory``."""
        self._hand_over(self.directory)
        if self._owner is not None:
            # The server user must reach the directory through every parent.
            for parent in self.directory.parents:
                if parent.stat().st_mode & 0o001 == 0:
                    raise ClusterError(
                        f"{parent} is not searchable by {self._owner}; pick another directory"
                    )
        initdb = required_tool("initdb")
        data = str(self.data_directory)
        run_as(
            [initdb, "-D", data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"],
            self._owner,
        )

    def _prepare(self) -> Path:
        data = self.data_directory
        if self._owner is not None and data.stat().st_uid != pwd.getpwnam(self._owner).pw_uid:
            self._hand_over(data)  # a copy the kit wrote: the server's user must own it
        data.chmod(0o700)
        if self._copied:
            # The lock file names the server the data was copied from, which may still run.
            (data / "postmaster.pid").unlink(missing_ok=True)
        return data

    def _server_arguments(self) -> list[str]:
        settings = [arg for setting in self.settings for arg in ("-c", setting)]
        return [*settings, "-p", str(self.port), "-c", f"unix_socket_directories={self.directory}"]

    def start(self) -> None:
        """Start the server as a child of this process on the data directory and return once
        it accepts connections (after a crash, once its recovery has run).

        A child, not a daemon: `crash` reaps the postmaster it kills, so no dead postmaster
        lingers as a zombie (where nothing reaps orphans, a zombie's process id passes for
        a live server and the next start refuses the data directory)."""
        data = self._prepare()
        argv = [required_tool("postgres"), "-D", str(data), *self._server_arguments()]
        log = self.directory / "server.log"
        entry = pwd.getpwnam(self._owner) if self._owner is not None else None
        with log.open("ab") as output:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=entry.pw_uid if entry is not None else None,
                group=entry.pw_gid if entry is not None else None,
                extra_groups=[] if entry is not None else None,
            )
        deadline = time.monotonic() + PATIENCE
        while not self._ready(self._process.pid):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.crash()
                tail = log.read_text(errors="replace").strip().splitlines()[-4:]
                raise ClusterError(f"the server did not start: {' | '.join(tail)}")
            time.sleep(0.01)  # polled, with the deadline above
        (self.directory / "dsn").write_text(self.dsn + "\n")

    def _ready(self, pid: int) -> bool:
        """Whether the postmaster ``pid`` says in its lock file that it accepts connections."""
        try:
            lines = (self.data_directory / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        return len(lines) > 7 and lines[0].strip() == str(pid) and lines[7].strip() == "ready"

    def start_detached(self) -> None:
        """Start the server as a daemon (``pg_ctl start``) that outlives this process, and
        return once it accepts connections: for a cluster a shell or another process holds."""
        data = self._prepare()
        options = " ".join(self._server_arguments())
        pg_ctl = required_tool("pg_ctl")
        log = str(self.directory / "server.log")
        run_as([pg_ctl, "-D", str(data), "-l", log, "-o", options, "-w", "start"], self._owner)
        (self.directory / "dsn").write_text(self.dsn + "\n")

    def postmaster(self) -> int | None:
        """The postmaster's process id, or None when no server runs on the data directory."""
        try:
            pid = int((self.data_directory / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if alive(pid) else None

    def processes(self) -> list[int]:
        """Every server process: the postmaster, then each process it started."""
        postmaster = self.postmaster()
        if postmaster is None:
            return []
        found, queue = [postmaster], [postmaster]
        while queue:
            for child in _children(queue.pop()):
                if child not in found:
                    found.append(child)
                    queue.append(child)
        return found

    def crash(self) -> None:
        """SIGKILL every server process, the postmaster first (so it starts no more), and
        return once none is alive; what they had not written to the data directory is lost."""
        pids = self.processes()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + PATIENCE
        for pid in pids:
            while alive(pid):
                if time.monotonic() > deadline:
                    raise ClusterError(f"server process {pid} outlived SIGKILL for {PATIENCE:g}s")
                time.sleep(0.01)  # polled, with the deadline above
        if self._process is not None:
            self._process.wait(PATIENCE)  # the postmaster, reaped

    def settle(self) -> None:
        """Make everything the server has written durable (``CHECKPOINT``) and return
        with it idle until the next request."""
        psql = required_tool("psql")
        run_as([psql, "-X", "-q", "-d", self.dsn, "-c", "CHECKPOINT"], None)

    def stop(self) -> None:
        """Stop the server (immediately: no shutdown checkpoint) if it runs."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGQUIT)  # PostgreSQL's immediate shutdown
            self._process.wait(PATIENCE)
        elif self.postmaster() is not None:
            pg_ctl = required_tool("pg_ctl")
            data = str(self.data_directory)
            run_as([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], self._owner)

    def copy_at(self) -> Cluster:
        """A cluster with these settings in a new throwaway directory whose data directory
        does not exist yet: the caller writes one there, then starts it."""
        copy = Cluster(throwaway_directory(), self.settings)
        copy._hand_over(copy.directory)
        copy._copied = True
        return copy

    def remove(self) -> None:
        """Stop the server and remove its directory (and the throwaway parent it was made in)."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.directory.parent.name.startswith(STALE_PREFIX):
            with contextlib.suppress(OSError):
                self.directory.parent.rmdir()


MEMORY_ROOT: Final = Path("/dev/shm")
"""Where the kit's clusters go when it has room (`_kit_root`): a file system in memory."""

_MEMORY_ROOM: Final = 1 << 30
"""Bytes free that `MEMORY_ROOT` must have to be used: a cluster and a copy take ~100 MB."""


def _kit_root() -> Path:
    """Where the kit's clusters are made: `MEMORY_ROOT` when it has room, else the temporary
    directory. Each crash state the kit checks is a copy of a data directory of ~1,000
    files, written and removed again: in memory that takes a third of the time it takes
    on a disk, and what the kit judges does not depend on the medium (the crash states
    come from the server's system calls, not from what reaches a disk)."""
    with contextlib.suppress(OSError):
        stat = os.statvfs(MEMORY_ROOT)
        if stat.f_bavail * stat.f_frsize >= _MEMORY_ROOM and os.access(MEMORY_ROOT, os.W_OK):
            return MEMORY_ROOT
    return Path(tempfile.gettempdir())


def throwaway_directory(holder: int | None = None) -> Path:
    """A new ``cluster`` directory in a new parent the server's user can reach (under
    `_kit_root`), recording ``holder`` (default: this process) for `reap_stale`."""
    parent = Path(tempfile.mkdtemp(prefix=STALE_PREFIX, dir=_kit_root()))
    parent.chmod(0o755)  # the server's user must reach the cluster inside
    directory = parent / "cluster"
    directory.mkdir()
    (directory / "holder").write_text(f"{holder or os.getpid()}\n")
    return directory


def make_cluster(settings: Sequence[str] = SETTINGS) -> Cluster:
    """A new cluster with ``settings`` in a throwaway directory, started; `Cluster.remove`
    removes it, and `reap_stale` does once this process has died."""
    reap_stale()
    cluster = Cluster(throwaway_directory(), settings)
    try:
        cluster.initialise()
        cluster.start()
    except BaseException:
        cluster.remove()
        raise
    return cluster


def reap_stale(root: Path | None = None) -> list[Path]:
    """Stop and remove every throwaway cluster under ``root`` (default: the temporary
    directory and `MEMORY_ROOT`) whose holder process has died; return the clusters reaped."""
    reaped = []
    roots = [root] if root is not None else [Path(tempfile.gettempdir()), MEMORY_ROOT]
    found = sorted({c for r in roots for c in r.glob(f"{STALE_PREFIX}*/cluster")})
    for cluster in found:
        try:
            holder = int((cluster / "holder").read_text())
        except (OSError, ValueError):
            continue  # still being made, or not one of ours
        if alive(holder):
            continue
        stop(cluster)
        with contextlib.suppress(OSError):
            cluster.parent.rmdir()
        reaped.append(cluster)
    return reaped


def start(directory: Path, holder: int | None = None) -> str:
    """Create and start a cluster in ``directory`` (which must not exist); return its DSN.

    ``holder`` is the process the cluster serves (default: this one): once it has died,
    the next `start` stops the cluster if nobody did (`reap_stale`)."""
    reap_stale()
    for tool in ("initdb", "pg_ctl"):
        required_tool(tool)
    directory.mkdir(parents=True)
    (directory / "holder").write_text(f"{holder or os.getpid()}\n")
    cluster = Cluster(directory)
    cluster.initialise()
    cluster.start_detached()
    return cluster.dsn


def stop(directory: Path) -> None:
    """Stop the cluster in ``directory`` (if it runs) and remove the directory."""
    if (directory / "data").exists():
        Cluster(directory).stop()
    shutil.rmtree(directory, ignore_errors=True)
