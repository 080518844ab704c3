"""Benchmark the PostgreSQL backend against a raw psycopg loop measured in the same run.

Run ``python bench/bench_postgres.py`` (``--quick`` for a smaller, noisier run)
with ``CHECKPOINTSPEC_POSTGRES_DSN`` set, or without it to start a throwaway
cluster (``.ci/postgres.py``; needs ``initdb``). Every figure is a ratio against
a baseline from this run, so it means the same on any machine; the targets are
checked and printed in one table:

- durable single-event append, one writer, vs raw async psycopg doing the same
  transaction (lock the session row, insert the event, update the head,
  commit) on the same server: >= 0.7x (the backend is async, so the baseline
  is too; the same loop with sync psycopg is printed for context);
- 16 sessions appending concurrently in one process (pool of 16) vs one writer: >= 4x;
- 4 processes on one session, each appending with the head it read: zero lost
  updates, only clean conflicts, contiguous seqs; throughput reported;
- reading a 100k-event log: >= 150k events/s;
- append and read-since of a 100k-event log vs a 10-event log: <= 1.2x.

LangGraph's AsyncPostgresSaver put rate is measured on the same server in the
same run, as context: it runs in its own venv (``langgraph-checkpoint-postgres``
and its dependencies), created on first use under ``--langgraph-venv`` (default
``~/.cache/checkpointspec/bench-langgraph-postgres``) and reused afterwards;
``--no-langgraph`` skips it, and the table says why when it could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import multiprocessing
import multiprocessing.synchronize
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import psycopg
from checkpointspec.backends.postgres import PostgresCheckpointer
from checkpointspec.spec import CheckpointConflictError, StoreBusyError
from log_measures import TEXT, best_read_rate, event, length_ratios
from results import Row, flatness_rows, paired, print_rows, timed

DSN_VARIABLE: Final = "CHECKPOINTSPEC_POSTGRES_DSN"


def new_schema() -> str:
    return f"bench_{secrets.token_hex(6)}"


def drop(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- baseline -------------------------------------------------------------------------


_PAYLOAD: Final = b'{"type":"assistant_message","text":"' + TEXT.encode() + b'"}'


def _raw_tables(dsn: str) -> str:
    schema = new_schema()
    with psycopg.connect(dsn) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            f"CREATE TABLE {schema}.sessions (session_id text PRIMARY KEY, head bigint NOT NULL)"
        )
        conn.execute(
            f"CREATE TABLE {schema}.events (session_id text, seq bigint, payload bytea NOT NULL,"
            " PRIMARY KEY (session_id, seq))"
        )
        conn.execute(f"INSERT INTO {schema}.sessions VALUES ('s', 0)")
    return schema


def raw_sync_appends(dsn: str, count: int) -> float:
    """Appends/s of plain sync psycopg: the same transaction as an append, one event each."""
    schema = _raw_tables(dsn)
    with psycopg.connect(dsn) as conn:
        payload = _PAYLOAD
        started = time.perf_counter()
        for _ in range(count):
            cur = conn.execute(
                f"SELECT head FROM {schema}.sessions WHERE session_id = 's' FOR UPDATE"
            )
            row = cur.fetchone()
            assert row is not None
            head = int(row[0]) + 1
            conn.execute(f"INSERT INTO {schema}.events VALUES ('s', %s, %s)", (head, payload))
            conn.execute(f"UPDATE {schema}.sessions SET head = %s WHERE session_id = 's'", (head,))
            conn.commit()
        elapsed = time.perf_counter() - started
    drop(dsn, schema)
    return count / elapsed


async def raw_async_appends(dsn: str, count: int) -> float:
    """Appends/s of plain async psycopg: the same transaction as an append, one event each."""
    schema = _raw_tables(dsn)
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        started = time.perf_counter()
        for _ in range(count):
            cur = await conn.execute(
                f"SELECT head FROM {schema}.sessions WHERE session_id = 's' FOR UPDATE"
            )
            row = await cur.fetchone()
            assert row is not None
            head = int(row[0]) + 1
            await conn.execute(
                f"INSERT INTO {schema}.events VALUES ('s', %s, %s)", (head, _PAYLOAD)
            )
            await conn.execute(
                f"UPDATE {schema}.sessions SET head = %s WHERE session_id = 's'", (head,)
            )
            await conn.commit()
        elapsed = time.perf_counter() - started
    drop(dsn, schema)
    return count / elapsed


# -- backend measurements ---------------------------------------------------------------


async def one_writer(dsn: str, count: int) -> float:
    schema = new_schema()
    async with PostgresCheckpointer(dsn, schema=schema) as cp:
        await cp.append("s", [event(0)])
        started = time.perf_counter()
        for n in range(count):
            await cp.append("s", [event(n)])
        rate = count / (time.perf_counter() - started)
    drop(dsn, schema)
    return rate


async def many_sessions(dsn: str, sessions: int, per_session: int) -> float:
    """Appends/s with ``sessions`` tasks appending concurrently, one pool connection each."""
    schema = new_schema()
    async with PostgresCheckpointer(dsn, schema=schema, pool_size=sessions) as cp:

        async def writer(sid: str) -> None:
            head = await cp.head(sid)
            for n in range(per_session):
                head = await cp.append(sid, [event(n)], expected_head=head)

        await asyncio.gather(*(cp.append(f"s{i}", [event(0)]) for i in range(sessions)))
        started = time.perf_counter()
        await asyncio.gather(*(writer(f"s{i}") for i in range(sessions)))
        rate = sessions * per_session / (time.perf_counter() - started)
    drop(dsn, schema)
    return rate


def _process_writer(
    dsn: str,
    schema: str,
    count: int,
    ready: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue[tuple[float, float, int, int, int]],
) -> None:
    async def run() -> tuple[float, float, int, int, int]:
        conflicts = busy = bad = 0
        async with PostgresCheckpointer(dsn, schema=schema, create=False) as cp:
            head = await cp.head("shared")
            ready.wait()
            # CLOCK_MONOTONIC is system-wide on Linux: comparable across processes.
            started = time.monotonic()
            done = 0
            while done < count:
                try:
                    head = await cp.append("shared", [event(os.getpid())], expected_head=head)
                    done += 1
                except CheckpointConflictError as exc:
                    conflicts += 1
                    if exc.actual <= exc.expected:  # a conflict must name a newer head
                        bad += 1
                    head = exc.actual
                except StoreBusyError:
                    busy += 1
                    head = await cp.head("shared")
            return started, time.monotonic(), conflicts, busy, bad

    out.put(asyncio.run(run()))


def processes(dsn: str, workers: int, per_worker: int) -> tuple[float, int, int, int, bool]:
    """Successful appends/s of ``workers`` processes on one session, each with
    expected_head; conflicts, busy errors, unclean conflicts, and whether the log
    is exactly the successes with contiguous seqs."""
    schema = new_schema()

    async def create() -> None:
        async with PostgresCheckpointer(dsn, schema=schema):
            pass

    asyncio.run(create())
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(workers)
    out: multiprocessing.Queue[tuple[float, float, int, int, int]] = ctx.Queue()
    procs = [
        ctx.Process(target=_process_writer, args=(dsn, schema, per_worker, ready, out))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    with psycopg.connect(dsn) as conn:
        seqs = [
            int(row[0])
            for row in conn.execute(
                f"SELECT seq FROM {schema}.events WHERE session_id = 'shared' ORDER BY seq"
            )
        ]
    drop(dsn, schema)
    exact = seqs == list(range(1, workers * per_worker + 1))
    return (
        workers * per_worker / elapsed,
        sum(r[2] for r in results),
        sum(r[3] for r in results),
        sum(r[4] for r in results),
        exact,
    )


async def read_rate(dsn: str, count: int) -> float:
    schema = new_schema()
    async with PostgresCheckpointer(dsn, schema=schema) as cp:
        best = await best_read_rate(cp, count)
    drop(dsn, schema)
    return best


async def flatness(dsn: str, big: int, rounds: int, ops: int) -> tuple[float, float]:
    """Cost ratio (big log / 10-event log) of a single-event append and of read-since."""
    schema = new_schema()
    async with PostgresCheckpointer(dsn, schema=schema) as cp:
        ratios = await length_ratios(cp, big, rounds, ops)
    drop(dsn, schema)
    return ratios


# -- LangGraph, for context ------------------------------------------------------------


LANGGRAPH_PACKAGES: Final = ("langgraph-checkpoint-postgres==3.2.0", "psycopg[binary]")
DEFAULT_LANGGRAPH_VENV: Final = (
    Path.home() / ".cache" / "checkpointspec" / "bench-langgraph-postgres"
)

# Runs inside the LangGraph venv: one thread, sequential durable puts, the same
# payload size as the backend's events; prints puts/s. The saver's tables go to
# a schema of their own (search_path), dropped by the caller.
_LANGGRAPH_SCRIPT: Final = """
import asyncio, sys, time
import psycopg
from psycopg.rows import dict_row
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

async def main(dsn, schema, count, text):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
        options=f"-c search_path={schema}",
    ) as conn:
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        started = time.perf_counter()
        for n in range(count):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"m": f"{n} {text}"}
            config = await saver.aput(config, checkpoint, {}, {"m": checkpoint["id"]})
        print(count / (time.perf_counter() - started))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""


def langgraph_python(venv: Path) -> tuple[Path | None, str]:
    """The LangGraph venv's interpreter, creating the venv when missing; or None and why."""
    python = venv / "bin" / "python"
    if python.exists():
        return python, ""
    print(f"  creating {venv} for LangGraph ...", file=sys.stderr, flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *LANGGRAPH_PACKAGES],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        return None, f"venv failed: {exc}"
    return python, ""


def langgraph_rate(dsn: str, venv: Path, count: int) -> tuple[float | None, str]:
    """AsyncPostgresSaver puts/s on this server, or None and the reason it did not run."""
    python, why = langgraph_python(venv)
    if python is None:
        return None, why
    schema = new_schema()
    try:
        done = subprocess.run(
            [str(python), "-c", _LANGGRAPH_SCRIPT, dsn, schema, str(count), TEXT],
            capture_output=True,
            text=True,
        )
    finally:
        drop(dsn, schema)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"failed: {last}"
    return float(done.stdout.strip()), ""


# -- driver ---------------------------------------------------------------------------


def benchmark(dsn: str, quick: bool, langgraph_venv: Path | None) -> int:
    durable_rounds = 3 if quick else 7
    n_durable = 300 if quick else 1000
    per_session = 30 if quick else 100
    per_process = 100 if quick else 250
    n_read = 100_000
    flat_big = 20_000 if quick else 100_000
    rows: list[Row] = []
    print("running (every rate is a median over rounds):", file=sys.stderr)
    raw, ours, durable_ratio = timed(
        "durable appends: raw async psycopg and the backend, alternating",
        lambda: paired(
            durable_rounds,
            lambda r: asyncio.run(raw_async_appends(dsn, n_durable)),
            lambda r: asyncio.run(one_writer(dsn, n_durable)),
        ),
    )
    raw_sync = timed("raw sync psycopg", lambda: raw_sync_appends(dsn, n_durable))
    rows.append(
        Row("raw async psycopg, lock/insert/update/commit", f"{raw:,.0f}/s", None, "baseline", True)
    )
    rows.append(
        Row("raw sync psycopg, the same", f"{raw_sync:,.0f}/s", ours / raw_sync, "context", True)
    )
    rows.append(
        Row(
            "append, 1 writer", f"{ours:,.0f}/s", durable_ratio, ">= 0.7x raw", durable_ratio >= 0.7
        )
    )
    rate = timed("16 sessions", lambda: asyncio.run(many_sessions(dsn, 16, per_session)))
    rows.append(
        Row(
            "append, 16 sessions, 1 process",
            f"{rate:,.0f}/s",
            rate / ours,
            ">= 4x 1 writer",
            rate / ours >= 4,
        )
    )
    multi, conflicts, busy, bad, exact = timed(
        "4 processes on one session", lambda: processes(dsn, 4, per_process)
    )
    rows.append(
        Row(
            f"4 processes, 1 session, expected_head ({conflicts} conflicts, {bad} unclean,"
            f" {busy} busy, log exact {exact})",
            f"{multi:,.0f}/s",
            multi / ours,
            "0 lost, clean",
            exact and bad == 0,
        )
    )
    read = timed("read 100k", lambda: asyncio.run(read_rate(dsn, n_read)))
    rows.append(
        Row(f"read {n_read:,} events", f"{read:,.0f}/s", None, ">= 150k/s", read >= 150_000)
    )
    append_ratio, read_ratio = timed(
        "flatness", lambda: asyncio.run(flatness(dsn, flat_big, 5, 200))
    )
    rows += flatness_rows(flat_big, append_ratio, read_ratio)
    name = "LangGraph AsyncPostgresSaver put, 1 thread"
    if langgraph_venv is None:
        rows.append(Row(name, "skipped", None, "info", True))
    else:
        lg, why = timed(
            "LangGraph AsyncPostgresSaver", lambda: langgraph_rate(dsn, langgraph_venv, n_durable)
        )
        if lg is None:
            rows.append(Row(f"{name} ({why})", "not run", None, "info", True))
        else:
            rows.append(Row(name, f"{lg:,.0f}/s", lg / ours, "info", True))

    return print_rows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, smaller counts")
    parser.add_argument(
        "--langgraph-venv",
        type=Path,
        default=DEFAULT_LANGGRAPH_VENV,
        help="venv for LangGraph's AsyncPostgresSaver, created when missing",
    )
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph comparison")
    args = parser.parse_args()
    venv: Path | None = None if args.no_langgraph else args.langgraph_venv
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return benchmark(dsn, args.quick, venv)
    helper_path = Path(__file__).resolve().parent.parent / ".ci" / "postgres.py"
    spec = importlib.util.spec_from_file_location("_ci_postgres", helper_path)
    assert spec is not None
    assert spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    parent = Path(tempfile.mkdtemp(prefix="checkpointspec-pg-"))
    parent.chmod(0o755)  # the server's user must reach the cluster inside
    try:
        return benchmark(helper.start(parent / "cluster"), args.quick, venv)
    finally:
        helper.stop(parent / "cluster")
        parent.rmdir()


if __name__ == "__main__":
    sys.exit(main())
