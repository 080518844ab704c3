"""Benchmark: the same seed gives the same verdict, quiet and under load.

Run ``python bench/bench_verdicts.py`` (``--backend NAME``, default ``sqlite``;
``--seed N``, default 4; ``--load N`` busy processes, default 8). ``NAME`` is a
backend of `bench_kit` (``memory``, ``file``, ``sqlite``, ``node-stdio``: the Node
example over the stdio protocol, ``slow-import``: the file backend behind a 3 s
import) or any target the CLI takes. It runs the command a CI gate runs twice::

    checkpointspec run BACKEND --profile quick -q --seed N --report FILE

first on the machine as it is, then with N processes spinning on the CPU beside
it (each a ``python -c 'while True: pass'``, killed at the end), and compares the
two reports: the same rules with the same statuses, the same roots and defects,
the same checks with the same statuses, and no check incomplete (the counts
reached in both runs, not cut by the time cap). It prints each run's wall time
and the load average before and during it, the checks that differ (with both
statuses), and the verdict of ``checkpointspec compare`` on the two reports:
"they differ only in timing" is the outcome a gate needs. Exit status 0 when
the verdicts are the same, 1 when they differ.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_kit import Backend, backends
from checkpointspec.conformance.running.compare import verdicts_of
from checkpointspec.conformance.running.merge import load_report

SPIN = "while True: pass"


def kit() -> list[str]:
    """The ``checkpointspec`` command of this interpreter's environment."""
    beside = Path(sys.executable).parent / "checkpointspec"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "checkpointspec"]


def chosen(name: str) -> Backend:
    """The backend `bench_kit` knows by ``name``, or ``name`` as the CLI's target."""
    known = {backend.name: backend for backend in backends(shutil.which("node"))}
    return known.get(name, Backend(name, [name], 60.0))


def run_quick(backend: Backend, seed: int, report: Path) -> tuple[float, int]:
    """One quick run; its wall time and exit status."""
    env = dict(os.environ)
    if backend.extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(backend.extra_path), env.get("PYTHONPATH")])
        )
    started = time.perf_counter()
    argv = ["run", *backend.arguments, "--profile", "quick", "-q", "--seed", str(seed)]
    done = subprocess.run(
        [*kit(), *argv, "--report", str(report)],
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--load", type=int, default=8)
    args = parser.parse_args()
    backend = chosen(args.backend)
    scratch = Path(tempfile.mkdtemp(prefix="bench-verdicts-"))
    quiet_report, loaded_report = scratch / "quiet.json", scratch / "loaded.json"
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min)")
    quiet_wall, quiet_status = run_quick(backend, args.seed, quiet_report)
    print(f"quiet:  {quiet_wall:6.1f} s, exit status {quiet_status}")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.load)]
    try:
        loaded_wall, loaded_status = run_quick(backend, args.seed, loaded_report)
        load = os.getloadavg()[0]
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(
        f"loaded: {loaded_wall:6.1f} s, exit status {loaded_status} "
        f"({args.load} busy processes; load {load:.2f} at the end)"
    )
    quiet, loaded = (verdicts_of(load_report(r)) for r in (quiet_report, loaded_report))
    same = True
    for what in quiet:
        if quiet[what] != loaded[what]:
            same = False
            print(f"differs in its {what}:")
            before, after = quiet[what], loaded[what]
            if isinstance(before, dict) and isinstance(after, dict):
                for key in sorted(set(before) | set(after)):
                    if before.get(key) != after.get(key):
                        print(f"  {key}: quiet {before.get(key)}, loaded {after.get(key)}")
            else:
                print(f"  quiet {before}, loaded {after}")
    incomplete = sorted(
        {
            name
            for verdict in (quiet, loaded)
            for name, status in verdict["checks"].items()
            if status == "incomplete"
        }
    )
    if incomplete:
        same = False
        print(f"incomplete (cut by the cap): {incomplete}")
    compared = subprocess.run(
        [*kit(), "compare", str(quiet_report), str(loaded_report)],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in compared.stdout.splitlines():
        if "replay key" in line:
            print(line)
    print("SAME VERDICT" if same else "DIFFERENT VERDICTS", f"(reports in {scratch})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
