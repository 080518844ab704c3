"""Benchmark: the kit's own cost per kind of check, as a ratio to the backend's raw call rate.

Run ``python bench/bench_overhead.py`` (``--backend NAME``, repeatable; default
memory, file and sqlite; ``--seed N``, default 1). For each backend it measures, in
one process and one run:

- the **raw call rate**: a bare loop over one handle making the calls a model-based
  example makes most (an append of one to three events, a read of the session, its
  head), 3,000 calls, timed with nothing of the kit's around them;
- the **rate inside the kit** for each kind of check that calls the backend in the
  kit's own process: the model-based machine (``SEQ-001::model_based``), a property
  (``ARG-001::bad_session_ids_are_refused``, ``EVENT-001::every_event_kind_round_trips``)
  and the single scenarios (every ``single`` check of the storage suite), each run
  alone with ``--budget none``, counting every call that reaches the backend (the
  kit's handle wrapper, `BackendHandle._call`, the funnel of every operation);

and prints, per kind, the calls made, the seconds taken, the calls per second and
the **overhead**: the raw rate over the rate inside the kit (1.0 would be a kit that
costs nothing; 10 means nine tenths of the check's time is the kit's).

Kinds whose calls are made in worker processes do not pass through this process,
so they are measured by their units (`WORKER_KINDS`: the stress workers' calls,
kill states checked, writers held and killed), each check run alone with
``--budget none`` on a backend that declares ``multi_process`` and ``durable`` (a
check the backend's declarations skip says so):

- the **stress** workers' calls per second, all processes together, against the
  raw rate (the overhead as above: the workers' history recording, their pipes);
- for the **crash** and **holds** kinds, the seconds per unit against the
  **raw process**: a fresh interpreter that imports the backend, opens a store,
  appends one event and closes it (median of 3), the least a writer in a process
  of its own costs. 1.0 would be a kill state or held writer costing one such
  process; the crash states rebuilt from one trace cost a fraction of one.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkpointspec.backends.registry import resolve_backend
from checkpointspec.conformance.engines.target.provenance import BackendHandle
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME, SUITES
from checkpointspec.conformance.running.runner import run_check
from checkpointspec.spec import AssistantMessage, BackendContext, UserPrompt

RAW_CALLS = 3_000
KINDS: dict[str, tuple[str, ...]] = {
    "model": ("SEQ-001::model_based",),
    "property": (
        "ARG-001::bad_session_ids_are_refused",
        "EVENT-001::every_event_kind_round_trips",
    ),
    "single": tuple(c.name for c in SUITES["storage"] if c.kind == "single"),
}
WORKER_KINDS: dict[str, str] = {
    "stress": "MP-001::free_running_history",
    "crash": "DUR-002::killed_at_every_system_call",
    "holds": "KILL-001::killed_after_every_system_call",
}
"""A check of each kind that calls the backend in worker processes; the first number
of its detail ("1740 calls of 4 processes", "checked 100 kill states ...", "killed
writers right after 8 different system calls") is its count of units."""
RAW_PROCESS = """
import asyncio, sys, tempfile
from checkpointspec.backends.registry import resolve_backend
from checkpointspec.spec import BackendContext, UserPrompt

async def write() -> None:
    made = resolve_backend(sys.argv[1]).load()(BackendContext(path=sys.argv[2]))
    cp = await made if asyncio.iscoroutine(made) else made
    await cp.append("s", [UserPrompt("p")])
    await cp.close()

asyncio.run(write())
"""


def raw_rate(backend: str) -> float:
    """Calls per second of a bare loop of appends, reads and heads on one handle."""
    directory = Path(tempfile.mkdtemp(prefix="bench-overhead-"))

    async def loop() -> float:
        factory = resolve_backend(backend).load()
        made = factory(BackendContext(path=directory))
        cp = await made if asyncio.iscoroutine(made) else made
        calls = 0
        started = time.perf_counter()
        while calls < RAW_CALLS:
            size = 1 + calls % 3
            batch = [
                UserPrompt(f"p{calls}") if i % 2 == 0 else AssistantMessage(f"a{calls}")
                for i in range(size)
            ]
            await cp.append(f"s{calls % 5}", batch)
            _ = [e async for e in cp.read(f"s{calls % 5}")]
            await cp.head(f"s{calls % 5}")
            calls += 3
        seconds = time.perf_counter() - started
        await cp.close()
        return calls / seconds

    try:
        return asyncio.run(loop())
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def counting() -> tuple[list[int], Callable[[], None]]:
    """Count every call through the kit's handle wrapper; the counter and the undo."""
    count = [0]
    original = BackendHandle._call

    def counted(
        self: BackendHandle, operation: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        count[0] += 1
        return original(self, operation, args, kwargs)

    BackendHandle._call = counted  # type: ignore[method-assign]

    def undo() -> None:
        BackendHandle._call = original  # type: ignore[method-assign]

    return count, undo


def kit_rate(backend: str, checks: tuple[str, ...], seed: int) -> tuple[int, float]:
    """Calls made and seconds taken by ``checks`` run one after another on ``backend``."""
    count, undo = counting()
    seconds = 0.0
    try:
        for name in checks:
            run = plan_run(backend, profile="quick", seed=seed, only=(name,), budget=float("inf"))
            started = time.perf_counter()
            result = run_check(CHECKS_BY_NAME[name], run)
            seconds += time.perf_counter() - started
            if result.status not in ("passed", "skipped"):
                print(f"  note: {name} {result.status}: {result.reason or result.violated_rule}")
    finally:
        undo()
    return count[0], seconds


def raw_process_seconds(backend: str) -> float:
    """Seconds of a fresh interpreter that opens ``backend``, appends once and exits."""
    times = []
    for _ in range(3):
        directory = tempfile.mkdtemp(prefix="bench-overhead-process-")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", RAW_PROCESS, backend, directory], check=True)
        times.append(time.perf_counter() - started)
        shutil.rmtree(directory, ignore_errors=True)
    return statistics.median(times)


def worker_kind(backend: str, check: str, seed: int) -> tuple[int, float, str]:
    """The units ``check`` reached (its detail's first number), its seconds, its detail."""
    run = plan_run(backend, profile="quick", seed=seed, only=(check,), budget=float("inf"))
    started = time.perf_counter()
    result = run_check(CHECKS_BY_NAME[check], run)
    seconds = time.perf_counter() - started
    detail = result.detail or result.reason or ""
    if result.status != "passed":
        return 0, seconds, f"{check} {result.status}: {detail}"
    units = re.search(r"\d[\d,]*", detail)
    return (int(units.group().replace(",", "")) if units else 0), seconds, detail


def print_worker_kinds(backend: str, raw: float, seed: int) -> None:
    process = raw_process_seconds(backend)
    print(f"  raw process (open, append, close in a fresh interpreter): {process:.2f} s")
    print(f"  {'kind':<9} {'units':>7} {'seconds':>8} {'per unit':>9} {'overhead':>9}  detail")
    for kind, check in WORKER_KINDS.items():
        units, seconds, detail = worker_kind(backend, check, seed)
        if not units:
            print(f"  {kind:<9} {'-':>7} {seconds:>8.1f} {'-':>9} {'-':>9}  {detail}")
            continue
        if kind == "stress":
            rate = units / seconds
            per, overhead = f"{rate:,.0f}/s", raw / rate
        else:
            per, overhead = f"{seconds / units:.3f} s", seconds / units / process
        print(f"  {kind:<9} {units:>7} {seconds:>8.1f} {per:>9} {overhead:>8.1f}x  {detail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for backend in args.backend or ["memory", "file", "sqlite"]:
        raw = raw_rate(backend)
        print(f"{backend}: raw {raw:,.0f} calls/s ({RAW_CALLS} calls of append, read, head)")
        print(f"  {'kind':<9} {'calls':>7} {'seconds':>8} {'calls/s':>9} {'overhead':>9}")
        for kind, checks in KINDS.items():
            calls, seconds = kit_rate(backend, checks, args.seed)
            rate = calls / seconds if seconds else 0.0
            overhead = raw / rate if rate else float("inf")
            print(f"  {kind:<9} {calls:>7} {seconds:>8.1f} {rate:>9,.0f} {overhead:>8.1f}x")
        print_worker_kinds(backend, raw, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
