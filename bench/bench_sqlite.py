"""Benchmark the SQLite backend against raw sqlite3 measured in the same run.

Run ``python bench/bench_sqlite.py`` (``--quick`` for a smaller, noisier run).
Every figure is a ratio against a baseline from this run, so it means the same
on any machine; the targets are checked and printed in one table:

- durable single-event append, one writer (synchronous=FULL), vs raw sync
  sqlite3 doing BEGIN IMMEDIATE / INSERT / COMMIT with the same pragmas: >= 0.6x;
- 64 sessions appending concurrently in one process (FULL) vs that one writer: >= 5x;
- 4 processes appending to one session vs one process doing the same: >= 0.8x,
  no StoreBusyError, seqs contiguous;
- reading a 100k-event log: >= 200k events/s;
- append and read-since of a 100k-event log vs a 10-event log: <= 1.2x.

LangGraph's AsyncSqliteSaver is timed as well when ``langgraph-checkpoint-sqlite``
is installed (information only).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from checkpointspec.backends.sqlite import SqliteCheckpointer
from checkpointspec.spec import StoreBusyError
from log_measures import TEXT, best_read_rate, event, length_ratios
from results import Row, alternate, flatness_rows, paired, print_rows, timed

# -- baselines ------------------------------------------------------------------------


def raw_sqlite_appends(path: Path, count: int) -> float:
    """Appends/s of plain sqlite3: WAL, synchronous=FULL, one insert per transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
        " payload BLOB NOT NULL, PRIMARY KEY (session_id, seq))"
    )
    payload = b'{"type":"assistant_message","text":"' + TEXT.encode() + b'"}'
    started = time.perf_counter()
    for seq in range(1, count + 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO events VALUES (?, ?, ?)", ("s", seq, payload))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return count / elapsed


# -- backend measurements ---------------------------------------------------------------


async def one_writer(path: Path, count: int) -> float:
    async with SqliteCheckpointer(path) as cp:
        await cp.append("s", [event(0)])
        started = time.perf_counter()
        for n in range(count):
            await cp.append("s", [event(n)])
        return count / (time.perf_counter() - started)


async def many_sessions(path: Path, sessions: int, per_session: int) -> tuple[float, float]:
    """Appends/s with ``sessions`` tasks appending concurrently; and requests per commit."""
    async with SqliteCheckpointer(path) as cp:

        async def writer(sid: str) -> None:
            head = await cp.head(sid)
            for n in range(per_session):
                head = await cp.append(sid, [event(n)], expected_head=head)

        await asyncio.gather(*(cp.append(f"s{i}", [event(0)]) for i in range(sessions)))
        before = cp.group_commit_stats
        started = time.perf_counter()
        await asyncio.gather(*(writer(f"s{i}") for i in range(sessions)))
        elapsed = time.perf_counter() - started
        after = cp.group_commit_stats
        per_commit = (after.requests - before.requests) / (after.rounds - before.rounds)
        return sessions * per_session / elapsed, per_commit


def _process_writer(
    path: str,
    count: int,
    ready: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue[tuple[float, float, int]],
) -> None:
    async def run() -> tuple[float, float, int]:
        busy = 0
        async with SqliteCheckpointer(path) as cp:
            await cp.head("shared")
            ready.wait()
            # CLOCK_MONOTONIC is system-wide on Linux: comparable across processes.
            started = time.monotonic()
            done = 0
            while done < count:
                try:
                    await cp.append("shared", [event(os.getpid())])
                    done += 1
                except StoreBusyError:
                    busy += 1
            return started, time.monotonic(), busy

    out.put(asyncio.run(run()))


def processes(path: Path, workers: int, per_worker: int) -> tuple[float, int, bool]:
    """Appends/s of ``workers`` processes on one session; escaped busy errors; contiguity.

    Timed from the first writer's start to the last writer's last append, so
    process start-up and the final close are not counted.
    """
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(workers)
    out: multiprocessing.Queue[tuple[float, float, int]] = ctx.Queue()
    procs = [
        ctx.Process(target=_process_writer, args=(str(path), per_worker, ready, out))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = max(end for _, end, _ in results) - min(start for start, _, _ in results)
    conn = sqlite3.connect(path)
    seqs = [
        row[0]
        for row in conn.execute("SELECT seq FROM events WHERE session_id = 'shared' ORDER BY seq")
    ]
    conn.close()
    contiguous = seqs == list(range(1, workers * per_worker + 1))
    return workers * per_worker / elapsed, sum(busy for _, _, busy in results), contiguous


async def read_rate(path: Path, count: int) -> float:
    async with SqliteCheckpointer(path, synchronous="OFF") as cp:
        return await best_read_rate(cp, count)


async def flatness(path: Path, big: int, rounds: int, ops: int) -> tuple[float, float]:
    """Cost ratio (big log / 10-event log) of a single-event append and of read-since.

    synchronous=OFF: the question is whether the work grows with the log, and
    fsync and checkpoint latency would only add noise. Both sessions sit in the
    middle of the key space (neighbours on either side), so neither gets SQLite's
    cheaper append-at-the-right-edge path the other lacks.
    """
    async with SqliteCheckpointer(path, synchronous="OFF") as cp:
        return await length_ratios(cp, big, rounds, ops)


async def langgraph_rate(path: Path, count: int) -> float | None:
    """AsyncSqliteSaver puts/s, or None when LangGraph is not installed."""
    try:
        from langgraph.checkpoint.base import empty_checkpoint  # type: ignore[import-not-found]
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # type: ignore[import-not-found]
    except ImportError:
        return None
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        started = time.perf_counter()
        for n in range(count):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"m": f"{n} {TEXT}"}
            config = await saver.aput(config, checkpoint, {}, {})
        return count / (time.perf_counter() - started)


# -- driver ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, smaller counts")
    args = parser.parse_args()
    q = args.quick
    rounds = 1 if q else 3
    durable_rounds = 3 if q else 9
    n_durable = 300 if q else 500
    per_session = 30 if q else 100
    per_process = 150 if q else 500
    n_read = 100_000
    flat_big = 20_000 if q else 100_000
    rows: list[Row] = []

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("running (every rate is a median over rounds):", file=sys.stderr)
        raw, ours, durable_ratio = timed(
            "durable appends: raw sqlite3 and the backend, alternating",
            lambda: paired(
                durable_rounds,
                lambda r: raw_sqlite_appends(root / f"raw{r}.db", n_durable),
                lambda r: asyncio.run(one_writer(root / f"one{r}.db", n_durable)),
            ),
        )
        rows.append(Row("raw sqlite3, FULL, 1 insert/txn", f"{raw:,.0f}/s", None, "baseline", True))
        rows.append(
            Row(
                "append, 1 writer, FULL",
                f"{ours:,.0f}/s",
                durable_ratio,
                ">= 0.6x raw",
                durable_ratio >= 0.6,
            )
        )

        rate, per_commit = timed(
            "64 sessions", lambda: asyncio.run(many_sessions(root / "many.db", 64, per_session))
        )
        rows.append(
            Row(
                f"append, 64 sessions, FULL ({per_commit:.1f} requests/commit)",
                f"{rate:,.0f}/s",
                rate / ours,
                ">= 5x 1 writer",
                rate / ours >= 5,
            )
        )

        outcomes: dict[int, list[tuple[int, bool]]] = {1: [], 4: []}

        def procs(workers: int, r: int) -> float:
            rate, busy, contiguous = processes(
                root / f"p{workers}-{r}.db", workers, per_process * 4 // workers
            )
            outcomes[workers].append((busy, contiguous))
            return rate

        single, multi = (
            statistics.median(rates)
            for rates in timed(
                "1 process and 4 processes on one session, alternating",
                lambda: alternate(max(rounds, 2), partial(procs, 1), partial(procs, 4)),
            )
        )
        busy = sum(b for b, _ in outcomes[1] + outcomes[4])
        contiguous = all(c for _, c in outcomes[1] + outcomes[4])
        rows.append(Row("append, 1 process, 1 session", f"{single:,.0f}/s", None, "baseline", True))
        rows.append(
            Row(
                f"append, 4 processes, 1 session (busy {busy}, contiguous {contiguous})",
                f"{multi:,.0f}/s",
                multi / single,
                ">= 0.8x, 0 busy",
                multi / single >= 0.8 and busy == 0 and contiguous,
            )
        )

        read = timed("read 100k", lambda: asyncio.run(read_rate(root / "read.db", n_read)))
        rows.append(
            Row(f"read {n_read:,} events", f"{read:,.0f}/s", None, ">= 200k/s", read >= 200_000)
        )

        append_ratio, read_ratio = timed(
            "flatness", lambda: asyncio.run(flatness(root / "flat.db", flat_big, 7, 300))
        )
        rows += flatness_rows(flat_big, append_ratio, read_ratio)

        lg = timed("langgraph", lambda: asyncio.run(langgraph_rate(root / "lg.db", n_durable // 2)))
        if lg is None:
            rows.append(Row("LangGraph AsyncSqliteSaver put", "not installed", None, "info", True))
        else:
            rows.append(
                Row("LangGraph AsyncSqliteSaver put", f"{lg:,.0f}/s", lg / ours, "info", True)
            )

    return print_rows(rows)


if __name__ == "__main__":
    sys.exit(main())
