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
calls `start` / `stop` when ``CHECKPOINTSPEC_POSTGRES_DSN`` is not set. The
clusters themselves are made, started and stopped by
``backends/postgres/cluster.py``, which this file loads by its path (so do the
kit's server checks, through the package): standard library only, both run
before anything is installed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def _load_cluster_module() -> ModuleType:
    """The package's cluster control, loaded by its path: nothing is installed yet."""
    path = Path(__file__).resolve().parents[1] / "backends" / "postgres" / "cluster.py"
    spec = importlib.util.spec_from_file_location("_checkpointspec_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cluster = _load_cluster_module()
SUPERUSER: str = _cluster.SUPERUSER
STALE_PREFIX: str = _cluster.STALE_PREFIX
find_tool = _cluster.find_tool
reap_stale = _cluster.reap_stale
start = _cluster.start
stop = _cluster.stop


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
