"""A throwaway PostgreSQL cluster for the PostgreSQL backend's tests, the kit and benchmarks.

    python .ci/postgres.py start DIR   # initdb into DIR, start it, print its DSN
    python .ci/postgres.py stop DIR    # stop it and remove DIR
    python .ci/postgres.py run -- COMMAND ...
        # COMMAND with CHECKPOINTSPEC_POSTGRES_DSN set: the variable's own value if
        # it is set, else a throwaway cluster's, stopped when COMMAND ends

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


def start(directory: Path) -> str:
    """Create and start a cluster in ``directory`` (which must not exist); return its DSN."""
    initdb, pg_ctl = find_tool("initdb"), find_tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError(
            "initdb/pg_ctl not found: install PostgreSQL (apt-get install postgresql)"
        )
    owner = _owner()
    directory.mkdir(parents=True)
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
    parent = Path(tempfile.mkdtemp(prefix="checkpointspec-pg-"))
    parent.chmod(0o755)  # the server's user must reach the cluster inside
    cluster = parent / "cluster"
    try:
        dsn = start(cluster)
        return subprocess.run(
            command, env={**os.environ, DSN_VARIABLE: dsn}, check=False
        ).returncode
    finally:
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
            print(start(directory))
        else:
            stop(directory)
    except RuntimeError as exc:
        print(f"postgres.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
