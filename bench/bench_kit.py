"""Benchmark the kit's quick profile on each kind of backend, in one run.

Run ``python bench/bench_kit.py`` (``--quick`` for the memory backend alone,
``--backend NAME`` to pick). Each backend gets the same command, the one a CI
gate runs::

    checkpointspec run TARGET --profile quick -q --seed 1 --report FILE

on the memory, file and SQLite reference backends, on the Node.js example over
the stdio protocol (``--process 'node examples/node_backend/file_backend.js'``;
skipped, saying so, when ``node`` is not on PATH), and on
``slow_import_backend:make`` (``bench/slow_import_backend.py``): the file
backend behind a module that sleeps 3 s on import, the way a backend built on a
heavy library pays its imports in every process that loads it.

Printed per backend: the wall time against its target (quick on a reference
backend within 60 s, on the slow-import backend within 90 s, on 2 cores), the
CPU time of the whole process tree, the wall time as a ratio to the memory
backend's in the same run (the kit's own cost with a backend that costs
nothing), the five longest checks from the report, every check that neither
passed nor was skipped with its reason, and how many processes and
threads the run created and which programs it started.

Processes are counted with ``perf record`` on the ``task:task_newtask`` and
``sched:sched_process_exec`` tracepoints of the run's process tree: a new task
without ``CLONE_THREAD`` is a process, with it a thread. Not with ``strace -f``:
a process traced by it cannot be traced again, so the kit's own crash checks
(which run workers under strace) would be reported not checked and the run
would not be the one measured. Without a usable ``perf`` nothing is counted and
the table says so.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

BENCH = Path(__file__).resolve().parent
NODE_EXAMPLE = BENCH.parent / "examples" / "node_backend" / "file_backend.js"
CLONE_THREAD = 0x10000
SEED = "1"


@dataclass(frozen=True)
class Backend:
    """A backend the quick profile runs on, and the wall time it should fit in."""

    name: str
    arguments: list[str]
    target_seconds: float
    extra_path: Path | None = None


@dataclass
class Measured:
    """What one run of the quick profile took."""

    wall: float
    cpu: float
    exit_status: int
    longest_checks: list[tuple[str, float, str]]
    statuses: Counter[str]
    errors: list[tuple[str, str, str]]
    """Every check that neither passed nor was skipped: name, status, reason."""
    processes: int | None = None
    threads: int | None = None
    programs: Counter[str] = field(default_factory=Counter)


def backends(node: str | None) -> list[Backend]:
    """Every backend this benchmark knows, the Node example only when ``node`` is there."""
    known = [
        Backend("memory", ["memory"], 60.0),
        Backend("file", ["file"], 60.0),
        Backend("sqlite", ["sqlite"], 60.0),
        Backend("slow-import", ["slow_import_backend:make"], 90.0, extra_path=BENCH),
    ]
    if node is not None:
        process = f"{shlex.quote(node)} {shlex.quote(str(NODE_EXAMPLE))}"
        known.insert(3, Backend("node-stdio", ["--process", process], 60.0))
    return known


def perf_usable() -> bool:
    """Whether ``perf record`` can count this machine's task tracepoints."""
    perf = shutil.which("perf")
    if perf is None:
        return False
    with tempfile.TemporaryDirectory() as scratch:
        probe = subprocess.run(
            [
                perf,
                "record",
                "-q",
                "-o",
                f"{scratch}/probe.data",
                "-e",
                "task:task_newtask",
                "--",
                "true",
            ],
            capture_output=True,
            check=False,
        )
    return probe.returncode == 0


_NEWTASK = re.compile(r"task:task_newtask: .*clone_flags=([0-9a-f]+)")
_EXEC = re.compile(r"sched:sched_process_exec: filename=(\S+)")


def count_tasks(perf_data: Path, measured: Measured) -> None:
    """Fill in ``measured``'s process, thread and program counts from a perf recording."""
    script = subprocess.run(
        ["perf", "script", "-i", str(perf_data)], capture_output=True, text=True, check=True
    )
    processes = threads = 0
    for line in script.stdout.splitlines():
        if (task := _NEWTASK.search(line)) is not None:
            if int(task.group(1), 16) & CLONE_THREAD:
                threads += 1
            else:
                processes += 1
        elif (program := _EXEC.search(line)) is not None:
            measured.programs[Path(program.group(1)).name] += 1
    measured.processes, measured.threads = processes, threads


def run_quick(backend: Backend, count: bool, scratch: Path) -> Measured:
    """Run the quick profile on ``backend`` once and read back its report."""
    kit = Path(sys.executable).with_name("checkpointspec")
    report = scratch / f"{backend.name}.json"
    perf_data = scratch / f"{backend.name}.perf"
    command = [str(kit), "run", *backend.arguments, "--profile", "quick", "-q", "--seed", SEED]
    command += ["--report", str(report)]
    if count:
        tracepoints = ["-e", "task:task_newtask", "-e", "sched:sched_process_exec"]
        command = ["perf", "record", "-q", "-o", str(perf_data), *tracepoints, "--", *command]
    env = dict(os.environ)
    if backend.extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(backend.extra_path), env.get("PYTHONPATH")])
        )
    print(f"  {backend.name}: {shlex.join(command)}", file=sys.stderr, flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    decoded = msgspec.json.decode(report.read_bytes())
    checks = sorted(decoded["checks"], key=lambda check: -check["duration"])
    measured = Measured(
        wall=wall,
        cpu=cpu,
        exit_status=decoded["exit_status"],
        longest_checks=[(c["name"], c["duration"], c["status"]) for c in checks[:5]],
        statuses=Counter(c["status"] for c in decoded["checks"]),
        errors=[
            (c["name"], c["status"], c["reason"])
            for c in decoded["checks"]
            if c["status"] not in ("passed", "skipped")
        ],
    )
    if count:
        count_tasks(perf_data, measured)
    return measured


def print_backend(backend: Backend, measured: Measured, memory_wall: float | None) -> bool:
    """Print one backend's figures; True when its wall time met the target."""
    met = measured.wall <= backend.target_seconds
    ratio = f", {measured.wall / memory_wall:.1f}x memory's" if memory_wall else ""
    print(
        f"\n{backend.name}: {measured.wall:.1f} s wall (target <= {backend.target_seconds:.0f} s: "
        f"{'met' if met else 'NOT met'}{ratio}), {measured.cpu:.1f} s CPU, exit {measured.exit_status}, "
        f"checks {dict(measured.statuses)}"
    )
    for name, duration, status in measured.longest_checks:
        print(f"    {duration:6.1f} s  {name} ({status})")
    for name, status, reason in measured.errors:
        print(f"    {status}: {name}: {reason.splitlines()[0] if reason else '(no reason)'}")
    if measured.processes is None:
        print("    processes: not counted (perf record cannot trace here)")
    else:
        programs = ", ".join(f"{name} {n}" for name, n in measured.programs.most_common())
        print(
            f"    processes created: {measured.processes}, threads: {measured.threads}; programs started: {programs}"
        )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the memory backend alone")
    parser.add_argument(
        "--backend", action="append", default=[], help="run only this one (repeatable)"
    )
    parser.add_argument("--no-count", action="store_true", help="do not count processes with perf")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None:
        print("node-stdio: skipped, node is not on PATH", file=sys.stderr)
    chosen = backends(node)
    wanted = ["memory"] if args.quick else args.backend
    if wanted:
        chosen = [backend for backend in chosen if backend.name in wanted]
    count = not args.no_count and perf_usable()
    print(
        f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)"
    )
    memory_wall: float | None = None
    all_met = True
    with tempfile.TemporaryDirectory(prefix="bench-kit-") as scratch:
        for backend in chosen:
            measured = run_quick(backend, count, Path(scratch))
            if backend.name == "memory":
                memory_wall = measured.wall
            all_met &= print_backend(
                backend, measured, memory_wall if backend.name != "memory" else None
            )
    print(
        f"\nload after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
