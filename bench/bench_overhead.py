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
costs nothing; 10 means nine tenths of the check's time is the kit's). Kinds whose
calls are made in worker processes (crash states, holds, processes, stress) are
not counted here: their calls do not pass through this process.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
