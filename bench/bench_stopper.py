"""Benchmark: what holding a writer at its store calls costs, against the writer untraced.

Run ``python bench/bench_stopper.py`` (``--framework adk`` or ``openai``, default
whichever is installed, ADK first; ``--repeats N``, default 5). It needs the
framework's extra (``pip install -e '.[adk]'`` or ``'.[openai-agents]'``) and runs
from the repository's root (the recipes are in ``examples/``).

The crash checks of the framework suites (ADKKILL-001, OASKILL-001, LGKILL-001)
run one writer program in a worker process once per kill point, traced by the
stopper (`checkpointspec.conformance.engines.crash.stopper`) to be held after its
Nth store-changing system call. This measures, in one run, the seconds the suite's
own writer program takes on the SQLite recipe of the framework (median of
``--repeats``, each on a fresh store, the worker forked and its store open first):

- **untraced**: the raw baseline, the program in the same worker with no tracer;
- **every call**: traced with ``PTRACE_SYSCALL``, stopping at each of the program's
  system calls (futexes, polls, reads included) twice;
- **filtered**: the worker under `store_call_filter`, stopping only at the calls
  that may count (how the contract kill checks run it);

and prints each with its ratio to the untraced time, and the store calls counted
(the same in both traced modes, or the filter would change what is checked).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

from checkpointspec.backends.registry import BackendTarget, resolve_backend
from checkpointspec.conformance.engines.contract.contract import Call
from checkpointspec.conformance.engines.crash.stopper import SyscallStopper, store_call_filter
from checkpointspec.conformance.engines.processes.contract_worker import ContractWorker

CONTRACTS = "checkpointspec.conformance.engines.contract"
FRAMEWORKS: dict[str, tuple[str, str, str, str]] = {
    "adk": (
        "google.adk",
        f"{CONTRACTS}.adk_session:ADK_SESSION_CONTRACT",
        "examples.adk_sessions.recipes:sqlite",
        "checkpointspec.conformance.checks.adk_session",
    ),
    "openai": (
        "agents",
        f"{CONTRACTS}.openai_session:OPENAI_SESSION_CONTRACT",
        "examples.openai_sessions.recipes:sqlite",
        "checkpointspec.conformance.checks.openai_session",
    ),
}
"""Per framework: the module that tells it is installed, the contract, the recipe,
and the suite whose ``WRITER_PROGRAM`` the kill checks run."""
MODES = ("untraced", "every call", "filtered")


async def _once(
    mode: str, contract: str, target: BackendTarget, program: tuple[Call, ...], root: Path
) -> tuple[float, int]:
    """Seconds the program took in ``mode``, and the store calls counted (0 untraced)."""
    path = Path(tempfile.mkdtemp(dir=root))
    worker = await ContractWorker.start(0, contract, target, path)
    stopper = None
    if mode != "untraced":
        stopper = await SyscallStopper.start(worker.pid, [path], 10**9, filtered=mode == "filtered")
    started = time.perf_counter()
    await worker.send(program, call_filter=store_call_filter() if mode == "filtered" else None)
    await worker.records()
    seconds = time.perf_counter() - started
    counted = len(await stopper.finish()) if stopper is not None else 0
    await worker.kill()
    return seconds, counted


async def measure(framework: str, repeats: int) -> None:
    _, contract, recipe, suite = FRAMEWORKS[framework]
    target = BackendTarget(resolve_backend(recipe))
    program = tuple(__import__(suite, fromlist=["WRITER_PROGRAM"]).WRITER_PROGRAM)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        await _once("untraced", contract, target, program, root)  # the fork server, warm
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        counts: dict[str, set[int]] = {mode: set() for mode in MODES}
        for _ in range(repeats):
            for mode in MODES:
                seconds, counted = await _once(mode, contract, target, program, root)
                times[mode].append(seconds)
                counts[mode].add(counted)
    raw = statistics.median(times["untraced"])
    print(f"{framework}: {recipe}, {len(program)} calls, median of {repeats}")
    for mode in MODES:
        median = statistics.median(times[mode])
        listed = ", ".join(str(c) for c in sorted(counts[mode]))
        said = f", store calls counted: {listed}" if mode != "untraced" else ""
        print(f"  {mode:10} {median:6.3f} s  {median / raw:5.1f}x{said}")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    framework = args.framework or next(
        (name for name, (module, *_) in FRAMEWORKS.items() if _installed(module)),
        None,
    )
    if framework is None:
        sys.exit("neither google-adk nor openai-agents is installed: see the module's docstring")
    asyncio.run(measure(framework, args.repeats))


if __name__ == "__main__":
    main()
