"""The throwaway PostgreSQL cluster leaves nothing running (.ci/postgres.py): a run that is
terminated stops its cluster and its command, and a cluster whose holder died without
stopping it is stopped at the next start. The kit's clusters (backends/postgres/cluster.py)
crash with every process gone and recover their commits, and a copy of a settled data
directory is a server of its own; a page the server finds damaged is reported by the
backend as a damaged store."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from checkpointspec.backends.postgres import MARKER_NAME, make
from checkpointspec.backends.postgres.cluster import KIT_SETTINGS, Cluster, make_cluster
from checkpointspec.spec import BackendContext, CorruptStoreError
from helpers import ev, run

PATIENCE = 120.0
"""Seconds a cluster may take to come up or go down on a loaded machine."""


def _clusters(helper: ModuleType) -> set[Path]:
    root = Path(tempfile.gettempdir())
    return set(root.glob(f"{helper.STALE_PREFIX}*/cluster"))


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"gave up after {PATIENCE:.0f}s waiting for {what}"
        time.sleep(0.1)


def test_a_terminated_run_stops_its_cluster_and_its_command(
    tmp_path: Path, cluster_helper: ModuleType
) -> None:
    helper = cluster_helper
    started = tmp_path / "dsn"
    pid_file = tmp_path / "pid"
    command = (
        "import os, pathlib, time;"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()));"
        f"pathlib.Path({str(started)!r}).write_text(os.environ['CHECKPOINTSPEC_POSTGRES_DSN']);"
        "time.sleep(600)"
    )
    env = {k: v for k, v in os.environ.items() if k != "CHECKPOINTSPEC_POSTGRES_DSN"}
    before = _clusters(helper)
    run = subprocess.Popen(
        [sys.executable, helper.__file__, "run", "--", sys.executable, "-c", command], env=env
    )
    try:
        _wait_for(started.exists, "the command to start with its cluster's DSN")
        dsn = started.read_text()
        ours = {
            c
            for c in _clusters(helper) - before
            if (c / "dsn").exists() and (c / "dsn").read_text().strip() == dsn
        }
        assert len(ours) == 1
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=PATIENCE) == 128 + signal.SIGTERM
    finally:
        if run.poll() is None:
            run.kill()
    (cluster,) = ours
    assert not cluster.exists()
    command_pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(command_pid, 0)


def test_a_cluster_whose_holder_died_is_stopped_at_the_next_start(
    tmp_path: Path, cluster_helper: ModuleType
) -> None:
    helper = cluster_helper
    # The holder lives while the cluster is made (another test's start would reap it
    # otherwise), then dies without stopping it.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    parent = Path(tempfile.gettempdir()) / f"{helper.STALE_PREFIX}{tmp_path.name}"
    parent.mkdir()
    parent.chmod(0o755)
    cluster = parent / "cluster"
    try:
        helper.start(cluster, holder=holder.pid)
        assert (cluster / "data" / "postmaster.pid").exists()
        assert cluster not in helper.reap_stale()
        holder.kill()
        holder.wait()
        # Any start reaps it now: this one, or another test's or run's that came first.
        helper.reap_stale()
        assert not cluster.exists()
        assert not parent.exists()
    finally:
        holder.kill()
        holder.wait()
        helper.stop(cluster)
        if parent.exists():
            parent.rmdir()


# -- the clusters the kit kills and copies (backends/postgres/cluster.py) ---------------------


@pytest.fixture
def kit_cluster(cluster_helper: ModuleType) -> Iterator[Cluster]:
    """A started cluster with the kit's settings, removed afterwards."""
    server = make_cluster(KIT_SETTINGS)
    try:
        yield server
    finally:
        server.remove()


def _rows(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT text FROM kept ORDER BY text")]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_a_crashed_cluster_leaves_no_process_and_recovers_its_commits(
    kit_cluster: Cluster,
) -> None:
    with psycopg.connect(kit_cluster.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (text text)")
        conn.execute("INSERT INTO kept VALUES ('committed')")
    processes = kit_cluster.processes()
    assert len(processes) >= 3  # the postmaster, its checkpointer, its WAL writer ...
    kit_cluster.crash()
    assert [pid for pid in processes if not _gone(pid)] == []
    assert kit_cluster.processes() == []
    kit_cluster.start()
    assert _rows(kit_cluster.dsn) == ["committed"]


def test_a_copy_of_a_settled_data_directory_serves_beside_the_original(
    kit_cluster: Cluster,
) -> None:
    with psycopg.connect(kit_cluster.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (text text)")
        conn.execute("INSERT INTO kept VALUES ('before the copy')")
    kit_cluster.settle()
    copy = kit_cluster.copy_at()
    try:
        shutil.copytree(kit_cluster.data_directory, copy.data_directory)
        copy.start()  # its lock file names the original, which still runs
        with psycopg.connect(kit_cluster.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO kept VALUES ('after the copy')")
        assert _rows(copy.dsn) == ["before the copy"]
        assert _rows(kit_cluster.dsn) == ["after the copy", "before the copy"]
    finally:
        copy.remove()
    assert not copy.directory.exists()


def test_a_page_the_server_finds_damaged_is_reported_as_a_damaged_store(
    kit_cluster: Cluster, tmp_path: Path
) -> None:
    """A power loss may leave a table's new page torn (DUR-003's garbage tears): the
    server refuses to read it (SQLSTATE XX001), and the backend says the store is
    damaged, in a call that meets the page (`CorruptStoreError`) and in
    `check_integrity`, not with a raw driver error."""

    async def go() -> None:
        cp = await make(BackendContext(path=tmp_path, options=kit_cluster.options))
        await cp.append("s", [ev(1), ev(2)])
        await cp.close()

    run(go())
    with psycopg.connect(kit_cluster.dsn, autocommit=True) as conn:
        schema = (tmp_path / MARKER_NAME).read_text().strip()
        row = conn.execute(f"SELECT pg_relation_filepath('{schema}.sessions')").fetchone()
        assert row is not None
    kit_cluster.settle()
    kit_cluster.stop()
    table = kit_cluster.data_directory / str(row[0])
    # The page a power loss tore as the table grew: zeros, then a garbage last sector.
    with table.open("ab") as grown:
        grown.write(bytes(8192 - 512) + bytes(0x80 | b for b in range(256)) * 2)
    kit_cluster.start()

    async def reopened() -> None:
        cp = await make(BackendContext(path=tmp_path, options=kit_cluster.options))
        try:
            report = await cp.check_integrity()
            assert not report.ok
            assert "damaged" in report.detail
            with pytest.raises(CorruptStoreError, match="damaged"):
                await cp.list_sessions()  # a scan of the whole table meets the page
        finally:
            await cp.close()

    run(reopened())
