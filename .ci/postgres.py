"""A throwaway PostgreSQL cluster for the PostgreSQL backend's tests, the kit and benchmarks.

    python .ci/postgres.py start DIR   # initdb into DIR, start it, print its DSN
    python .ci/postgres.py stop DIR    # stop it and remove DIR
    python .ci/postgres.py run -- COMMAND ...
        # COMMAND with CHECKPOINTSPEC_POSTGRES_DSN set: the variable's own value if
        # it is set, else a throwaway cluster's, stopped when COMMAND ends (or when
        # this is interrupted or terminated)

Nothing is left running: every cluster records the process it serves (``holder``:
the caller of `start`, or the shell that ran ``start`` from the command line), and
every `start` first stops the clusters under the temporary directory whose holder
has died (`reap_stale`): a test run or ``tox`` killed before it could stop its
cluster leaves it behind until the next start, not for good.

The cluster listens on 127.0.0.1 at a free port (and a unix socket inside DIR),
trusts local connections, and is kept small for shared 2-core machines:
shared_buffers 32MB, max_connections 100. fsync stays on, so the backend's
DURABLE claim is tested as deployed. PostgreSQL refuses to run as root: run as
root, the cluster belongs to the ``postgres`` system user when there is one,
else to ``nobody``, and DIR is handed to that user. ``initdb`` and ``pg_ctl`` are
looked up on PATH, then in Debian's ``/usr/lib/postgresql/*/bin``.

The tests' session fixture (tests/backends/conftest.py) imports this file and
calls `start` / `stop` when ``CHECKPOINTSPEC_POSTGRES_DSN`` is not set. Standard
library only: it runs before anything is installed.
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
import sys
import tempfile
from pathlib import Path

SUPERUSER = "checkpointspec"
"""The cluster's superuser role; the DSN connects as it, to database ``postgres``."""

_SETTINGS = (
    "shared_buffers=32MB",
    "max_connections=100",
    "fsync=on",
    "synchronous_commit=on",
    "listen_addresses=127.0.0.1",
)


def find_tool(name: str) -> str | None:
    """``initdb`` or ``pg_ctl``: on PATH, else the newest Debian install."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _owner() -> str | None:
    """The unprivileged user to run the server as, or None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _run(argv: list[str], owner: str | None) -> None:
    if owner is not None:
        argv = ["runuser", "-u", owner, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.stdout}")


STALE_PREFIX = "checkpointspec-pg-"
"""The prefix of the temporary directories throwaway clusters are made in (as ``cluster``)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def reap_stale(root: Path | None = None) -> list[Path]:
    """Stop and remove every throwaway cluster under ``root`` (the temporary directory)
    whose holder process has died; return the clusters reaped."""
    reaped = []
    for cluster in sorted((root or Path(tempfile.gettempdir())).glob(f"{STALE_PREFIX}*/cluster")):
        try:
            holder = int((cluster / "holder").read_text())
        except (OSError, ValueError):
            continue  # still being made, or not one of ours
        if _alive(holder):
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
    initdb, pg_ctl = find_tool("initdb"), find_tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError(
            "initdb/pg_ctl not found: install PostgreSQL (apt-get install postgresql)"
        )
    owner = _owner()
    directory.mkdir(parents=True)
    (directory / "holder").write_text(f"{holder or os.getpid()}\n")
    data = directory / "data"
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
        # The server user must reach the directory through every parent.
        for parent in directory.parents:
            if parent.stat().st_mode & 0o001 == 0:
                raise RuntimeError(f"{parent} is not searchable by {owner}; pick another directory")
    _run(
        [initdb, "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"], owner
    )
    port = _free_port()
    options = " ".join(f"-c {setting}" for setting in _SETTINGS)
    options += f" -p {port} -c unix_socket_directories={directory}"
    _run(
        [
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(directory / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        ],
        owner,
    )
    dsn = f"postgresql://{SUPERUSER}@127.0.0.1:{port}/postgres"
    (directory / "dsn").write_text(dsn + "\n")
    return dsn


def stop(directory: Path) -> None:
    """Stop the cluster in ``directory`` (if it runs) and remove the directory."""
    pg_ctl = find_tool("pg_ctl")
    data = directory / "data"
    if pg_ctl is not None and (data / "postmaster.pid").exists():
        _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], _owner())
    shutil.rmtree(directory, ignore_errors=True)


DSN_VARIABLE = "CHECKPOINTSPEC_POSTGRES_DSN"


def run(command: list[str]) -> int:
    """Run ``command`` against a server: $CHECKPOINTSPEC_POSTGRES_DSN's, or a throwaway one.

    Without a DSN and without ``initdb`` the command is skipped with a message
    (exit 0), unless ``CI=true``: then it is an error (exit 1).
    """
    if os.environ.get(DSN_VARIABLE):
        return subprocess.run(command, check=False).returncode
    if find_tool("initdb") is None:
        message = f"{DSN_VARIABLE} is not set and initdb is not installed"
        if os.environ.get("CI", "").lower() == "true":
            print(f"postgres.py: {message}", file=sys.stderr)
            return 1
        print(f"postgres.py: skipped {' '.join(command)}: {message}", file=sys.stderr)
        return 0
    parent = Path(tempfile.mkdtemp(prefix=STALE_PREFIX))
    parent.chmod(0o755)  # the server's user must reach the cluster inside
    cluster = parent / "cluster"
    # A terminated run stops its cluster as an interrupted one does: through `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    command_process: subprocess.Popen[bytes] | None = None
    try:
        dsn = start(cluster)
        command_process = subprocess.Popen(command, env={**os.environ, DSN_VARIABLE: dsn})
        return command_process.wait()
    finally:
        if command_process is not None and command_process.poll() is None:
            command_process.terminate()
            try:
                command_process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                command_process.kill()
                command_process.wait()
        stop(cluster)
        parent.rmdir()


def main(argv: list[str]) -> int:
    if argv[:2] == ["run", "--"] and len(argv) > 2:
        try:
            return run(argv[2:])
        except RuntimeError as exc:
            print(f"postgres.py: {exc}", file=sys.stderr)
            return 1
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python .ci/postgres.py start|stop DIR | run -- COMMAND ...", file=sys.stderr)
        return 2
    directory = Path(argv[1]).resolve()
    try:
        if argv[0] == "start":
            # From the command line the cluster serves the shell that asked for it.
            print(start(directory, holder=os.getppid()))
        else:
            stop(directory)
    except RuntimeError as exc:
        print(f"postgres.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
