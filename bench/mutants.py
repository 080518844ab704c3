"""Judge the kit's verdicts on defects nobody here planted: mutants of a reference backend.

Run ``python bench/mutants.py`` (needs the ``mutation`` extra:
``pip install -e '.[mutation]'``). Options: ``--backend memory|sqlite|sqlite-worker``,
``--limit N`` (N mutants sampled with a fixed seed), ``--seeds 1,2,3``,
``--jobs J`` (mutants checked side by side), ``--function NAME`` (only that
function's mutants; repeatable), ``--output FILE.json``.

A mutant is the backend's module with one change a mutation-testing tool made:
cosmic-ray's operators (a comparison or an arithmetic operator replaced, a
condition negated, a number moved by one, a loop run zero times, ``True`` and
``False`` swapped, ...), each applied at one place of its parse tree. Only the
contract's code paths are mutated: the bodies of the functions of append, read,
head, list, delete, truncate and codec handling (`SUBJECTS`), never their
docstrings, annotations or logging calls. A mutant whose Python AST equals the
original's, or another mutant's, is equivalent as far as the tool can tell and
is not checked; one that does not compile is not checked either.

Each mutant is written in a temporary directory, and the kit runs on it the way
a user runs it on their store::

    checkpointspec run mutant_0007:make --profile quick --seed S --report R.json -q

once per seed, with ``PYTHONPATH`` set so the mutant imports in the kit's
process and in every worker process it starts. A subject whose module holds the
factory (``memory``, ``sqlite``: ``backends/sqlite/checkpointer.py``) becomes a
module of its own, ``mutant_0007.py``: the backend's module with its
package-relative imports made absolute, and the one change. A subject whose
module the factory's module imports from its own package (``sqlite-worker``:
``backends/sqlite/worker.py``, the SQL of every write round, read, head and
listing) becomes a package of its own, ``mutant_0007/``: a copy of the whole
``sqlite`` package with only that module changed, its imports within the
package kept relative and those leaving it made absolute, run as
``mutant_0007.checkpointer:make``, so the copied checkpointer uses the mutated
worker and nothing else. A mutant is
*killed* when a run exits 1 (a MUST rule failed), *survived* when every run
exits 0, and an *error* when a run exits 2 or 3 (a usage error or a kit error)
or does not end within its deadline, with the reason. For each mutant the JSON
output keeps its diff, the verdict, every seed's exit status, roots and time;
the table gives the kill rate, the share of killed mutants with exactly one
root, the share whose roots are the same set on every seed, the median number
of roots, and the worst verdicts (most roots, or roots that change with the
seed), each with its diff: one defect should be one root, on every seed.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cosmic_ray.mutating  # imported before cosmic_ray.plugins: parso's modules load in order
from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.plugins import get_operator, operator_names

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_SEED = 20261201
"""The seed of ``--limit``'s sample, fixed so a sample is the same on every run."""
RUN_DEADLINE = 600.0
"""Seconds one kit run may take before it is ended and the mutant counted an error."""
TESTING_EXCEPTION = "CosmicRayTestingException"
"""The name cosmic-ray's ExceptionReplacer puts in an ``except`` clause."""


@dataclass(frozen=True)
class Subject:
    """A reference backend's module, its package, and the functions whose bodies are mutated."""

    path: Path
    package: str
    functions: tuple[str, ...]
    entry: str | None = None
    """None when ``path`` holds the factory: a mutant is that module alone. Else the
    module of ``path``'s package whose ``make`` the kit runs: a mutant is a copy of
    the whole package with only ``path`` changed."""

    def source(self) -> str:
        """The module the mutants change, its imports rewritten to work where they are written.

        Alone, every package-relative import is made absolute; in a copy of its
        package, only those that leave the package are.
        """
        text = self.path.read_text(encoding="utf-8")
        return absolute_imports(text, self.package, within=self.entry is not None)


SUBJECTS = {
    "memory": Subject(
        ROOT / "backends" / "memory.py",
        "checkpointspec.backends",
        (
            "touch",
            "_check_expectations",
            "_check_writable",
            "append",
            "_append_arguments",
            "_stamp",
            "_store_batch",
            "read",
            "_read_arguments",
            "_events_since",
            "head",
            "_head",
            "list_sessions",
            "_listed",
            "delete",
            "truncate",
            "_truncate_arguments",
            "_truncate_target",
            "_cut",
        ),
    ),
    "sqlite": Subject(
        ROOT / "backends" / "sqlite" / "checkpointer.py",
        "checkpointspec.backends.sqlite",
        (
            "_encode",
            "_decode",
            "append",
            "read",
            "head",
            "list_sessions",
            "delete",
            "truncate",
        ),
    ),
    "sqlite-worker": Subject(
        ROOT / "backends" / "sqlite" / "worker.py",
        "checkpointspec.backends.sqlite",
        (
            "translate",
            "stamp",
            "apply",
            "run_round",
            "read_expectations",
            "read_log",
            "read_one",
            "list_sessions",
        ),
        entry="checkpointer",
    ),
}


@dataclass(frozen=True)
class Mutant:
    """One single-change variant of a subject's module."""

    subject: Subject
    name: str
    function: str
    operator: str
    occurrence: int
    line: int
    source: str
    diff: str


@dataclass
class Generated:
    """The mutants of a subject, and how many candidates were left out and why."""

    mutants: list[Mutant] = field(default_factory=list)
    equivalent: int = 0
    not_compiling: int = 0


@dataclass(frozen=True)
class SeedRun:
    """What one kit run on a mutant said."""

    seed: int
    exit_status: int
    roots: list[str]
    seconds: float
    reason: str = ""


@dataclass(frozen=True)
class Judged:
    """A mutant and the kit's verdict on it over the seeds."""

    name: str
    function: str
    operator: str
    line: int
    diff: str
    verdict: str
    """killed, survived or error."""
    reason: str
    roots: list[str]
    """The roots of the first seed that killed it (else the first seed's); its first is the headline."""
    stable: bool
    """Whether every seed gave the same set of roots."""
    seconds: float
    runs: list[SeedRun]


# -- generating mutants -------------------------------------------------------------


_RELATIVE_IMPORT = re.compile(r"^(\s*)from (\.+)([\w.]*) import ", re.MULTILINE)


def absolute_imports(source: str, package: str, *, within: bool = False) -> str:
    """``source`` with each ``from .x import`` resolved against ``package``.

    ``within``: imports from ``package`` itself (one dot) stay relative, for a
    module written into a copy of its package; only those leaving it are resolved.
    """

    def resolve(match: re.Match[str]) -> str:
        indent, dots, rest = match.groups()
        if within and len(dots) == 1:
            return match.group(0)
        parts = package.split(".")
        base = parts[: len(parts) - (len(dots) - 1)]
        module = ".".join([*base, rest] if rest else base)
        return f"{indent}from {module} import "

    return _RELATIVE_IMPORT.sub(resolve, source)


def _operators() -> Iterator[tuple[str, Any]]:
    """cosmic-ray's operators that take no arguments, by name, each instantiated."""
    for name in sorted(operator_names()):
        operator_class = get_operator(name)
        if not operator_class.arguments():
            yield name, operator_class()


def _site(node: Any, functions: Sequence[str]) -> Any:
    """The function of ``functions`` whose body holds ``node``, or None.

    None too for a node in the function's docstring, in an annotation (of a
    parameter, the return or a variable) or in a logging call.
    """
    child, parent = node, node.parent
    while parent is not None:
        if parent.type == "annassign" and child is parent.children[1]:
            return None  # the annotation of an annotated assignment, not its value
        if parent.type in ("power", "atom_expr") and _is_logger(parent.children[0]):
            return None
        if parent.type == "funcdef":
            if child is not parent.children[-1]:
                return None  # a parameter, a default or an annotation
            if parent.name.value in functions:
                return parent
        child, parent = parent, parent.parent
    return None


def _is_logger(node: Any) -> bool:
    """Whether ``node`` names a logger, the head of a logging call."""
    return bool(node.type == "name" and node.value in ("log", "logger", "logging"))


def _within(node: Any, ancestor: Any) -> bool:
    """Whether ``node`` lies inside ``ancestor``."""
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _in_docstring(node: Any, function: Any) -> bool:
    """Whether ``node`` is ``function``'s docstring or inside it."""
    doc = function.get_doc_node()
    return doc is not None and _within(node, doc)


def generate(subject: Subject, functions: Sequence[str] | None = None) -> Generated:
    """Every single-change mutant of ``subject``'s contract functions (or of ``functions``)."""
    wanted = tuple(functions) if functions else subject.functions
    source = subject.source()
    tree = get_ast(source)
    nodes = list(ast_nodes(tree))
    seen = {ast.dump(ast.parse(source))}
    generated = Generated()
    for operator_name, operator in _operators():
        occurrence = 0
        for node in nodes:
            for _position in operator.mutation_positions(node):
                function = _site(node, wanted)
                if function is not None and not _in_docstring(node, function):
                    _add(
                        generated,
                        seen,
                        subject,
                        source,
                        operator_name,
                        operator,
                        occurrence,
                        node,
                        function,
                    )
                occurrence += 1
    return generated


def _add(
    generated: Generated,
    seen: set[str],
    subject: Subject,
    source: str,
    operator_name: str,
    operator: Any,
    occurrence: int,
    node: Any,
    function: Any,
) -> None:
    """Make the mutant at ``occurrence`` and keep it unless equivalent or not compiling."""
    mutated = cosmic_ray.mutating.mutate_code(source, operator, occurrence)
    if mutated is None or mutated == source:
        generated.equivalent += 1
        return
    try:
        dumped = ast.dump(ast.parse(mutated))
        compile(mutated, "<mutant>", "exec")
    except SyntaxError:
        generated.not_compiling += 1
        return
    if dumped in seen:
        generated.equivalent += 1
        return
    seen.add(dumped)
    diff = "\n".join(
        difflib.unified_diff(
            source.splitlines(), mutated.splitlines(), "original", "mutant", n=1, lineterm=""
        )
    )
    if TESTING_EXCEPTION in mutated and TESTING_EXCEPTION not in source:
        mutated += f"\n\nclass {TESTING_EXCEPTION}(Exception):\n    pass\n"
    generated.mutants.append(
        Mutant(
            subject=subject,
            name=f"mutant_{len(generated.mutants) + 1:04d}",
            function=function.name.value,
            operator=operator_name.removeprefix("core/"),
            occurrence=occurrence,
            line=node.start_pos[0],
            source=mutated,
            diff=diff,
        )
    )


def write_module(mutant: Mutant, directory: Path) -> str:
    """Write ``mutant`` into ``directory``; the kit's target.

    ``directory/NAME.py`` and ``NAME:make`` for a subject that holds the factory;
    else the package ``directory/NAME/``, a copy of the subject's package with
    only the subject's module changed, and ``NAME.ENTRY:make``.
    """
    subject = mutant.subject
    if subject.entry is None:
        (directory / f"{mutant.name}.py").write_text(mutant.source, encoding="utf-8")
        return f"{mutant.name}:make"
    copy = directory / mutant.name
    copy.mkdir()
    for module in sorted(subject.path.parent.glob("*.py")):
        text = module.read_text(encoding="utf-8")
        if module == subject.path:
            text = mutant.source
        else:
            text = absolute_imports(text, subject.package, within=True)
        (copy / module.name).write_text(text, encoding="utf-8")
    return f"{mutant.name}.{subject.entry}:make"


# -- checking them with the kit -----------------------------------------------------


def _kit() -> list[str]:
    """The ``checkpointspec`` command of this interpreter's environment."""
    beside = Path(sys.executable).parent / "checkpointspec"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("checkpointspec")
    if found is None:
        raise SystemExit("checkpointspec is not installed: pip install -e '.[mutation]'")
    return [found]


def run_kit(target: str, directory: Path, seed: int) -> SeedRun:
    """One quick-profile run of the kit on ``target`` (a module or package in ``directory``)."""
    report = directory / f"{target.split(':')[0]}.seed{seed}.json"
    command = [
        *_kit(),
        "run",
        target,
        "--profile",
        "quick",
        "--seed",
        str(seed),
        "--report",
        str(report),
        "--quiet",
    ]
    path = os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=directory,
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=RUN_DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return SeedRun(seed, -1, [], time.monotonic() - started, f"no end in {RUN_DEADLINE:.0f} s")
    seconds = time.monotonic() - started
    roots: list[str] = []
    if report.exists():
        roots = list(json.loads(report.read_text(encoding="utf-8")).get("roots", []))
    reason = ""
    if process.returncode not in (0, 1):
        reason = _error_reason(report, stderr)
    return SeedRun(seed, process.returncode, roots, seconds, reason)


def _error_reason(report: Path, stderr: str) -> str:
    """Why a run neither passed nor failed: its errored checks, else stderr's last line."""
    if report.exists():
        checks = json.loads(report.read_text(encoding="utf-8")).get("checks", [])
        errored = [
            f"{check.get('name')}: {str(check.get('reason') or check.get('detail') or '')[:160]}"
            for check in checks
            if check.get("status") == "error"
        ]
        if errored:
            return "; ".join(errored)
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def judge(mutant: Mutant, directory: Path, seeds: Sequence[int]) -> Judged:
    """The kit's verdict on ``mutant`` over ``seeds``."""
    target = write_module(mutant, directory)
    runs = [run_kit(target, directory, seed) for seed in seeds]
    print(
        f"  {mutant.name} {mutant.function}:{mutant.line} {mutant.operator}: "
        + ", ".join(f"seed {run.seed} exit {run.exit_status} {run.roots}" for run in runs),
        file=sys.stderr,
        flush=True,
    )
    errors = [run for run in runs if run.exit_status not in (0, 1)]
    if errors:
        verdict, reason = "error", f"seed {errors[0].seed}: {errors[0].reason}"
    elif any(run.exit_status == 1 for run in runs):
        verdict, reason = "killed", ""
    else:
        verdict, reason = "survived", ""
    return Judged(
        name=mutant.name,
        function=mutant.function,
        operator=mutant.operator,
        line=mutant.line,
        diff=mutant.diff,
        verdict=verdict,
        reason=reason,
        roots=next((run.roots for run in runs if run.exit_status == 1), runs[0].roots),
        stable=len({frozenset(run.roots) for run in runs}) == 1,
        seconds=sum(run.seconds for run in runs),
        runs=runs,
    )


def judge_all(mutants: Sequence[Mutant], seeds: Sequence[int], jobs: int) -> list[Judged]:
    """Every mutant judged, ``jobs`` at a time, in ``mutants``' order."""
    with tempfile.TemporaryDirectory(prefix="checkpointspec-mutants-") as scratch:
        directory = Path(scratch)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(lambda mutant: judge(mutant, directory, seeds), mutants))


# -- the summary --------------------------------------------------------------------


def summary(judged: Sequence[Judged]) -> dict[str, Any]:
    """The figures: counts, kill rate, one-root and stable shares, median roots."""
    killed = [one for one in judged if one.verdict == "killed"]
    survived = [one for one in judged if one.verdict == "survived"]
    errors = [one for one in judged if one.verdict == "error"]
    decided = len(killed) + len(survived)
    return {
        "checked": len(judged),
        "killed": len(killed),
        "survived": len(survived),
        "errors": len(errors),
        "kill_rate": len(killed) / decided if decided else None,
        "one_root": _share([one for one in killed if len(one.roots) == 1], killed),
        "stable": _share([one for one in killed if one.stable], killed),
        "median_roots": statistics.median(len(one.roots) for one in killed) if killed else None,
    }


def _share(part: Sequence[Judged], whole: Sequence[Judged]) -> float | None:
    return len(part) / len(whole) if whole else None


def worst(judged: Sequence[Judged], count: int = 5) -> list[Judged]:
    """The killed mutants furthest from one stable root: unstable first, then most roots."""
    killed = [one for one in judged if one.verdict == "killed"]
    bad = [one for one in killed if not one.stable or len(one.roots) != 1]
    return sorted(bad, key=lambda one: (one.stable, -len(one.roots), one.name))[:count]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_summary(backend: str, generated: Generated, judged: Sequence[Judged]) -> None:
    """The table, the worst verdicts with their diffs, the survivors and the errors."""
    figures = summary(judged)
    rows = [
        ("mutants generated", str(len(generated.mutants))),
        (
            "left out as equivalent / not compiling",
            f"{generated.equivalent} / {generated.not_compiling}",
        ),
        ("checked", str(figures["checked"])),
        (
            "killed / survived / error",
            f"{figures['killed']} / {figures['survived']} / {figures['errors']}",
        ),
        ("kill rate", _percent(figures["kill_rate"])),
        ("killed with exactly one root", _percent(figures["one_root"])),
        ("killed with the same roots on every seed", _percent(figures["stable"])),
        ("median roots of a killed mutant", str(figures["median_roots"] if judged else "-")),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"mutants of the {backend} backend")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for one in worst(judged):
        print(f"\n{one.name} ({one.function}, line {one.line}, {one.operator}):")
        for run in one.runs:
            print(f"  seed {run.seed}: exit {run.exit_status}, roots {run.roots}")
        print("\n".join(f"    {line}" for line in one.diff.splitlines()[2:]))
    for one in judged:
        if one.verdict != "killed":
            print(
                f"\n{one.verdict}: {one.name} ({one.function}, line {one.line}, {one.operator}) {one.reason}"
            )
            print("\n".join(f"    {line}" for line in one.diff.splitlines()[2:]))


# -- the command --------------------------------------------------------------------


def sample(mutants: Sequence[Mutant], limit: int | None) -> list[Mutant]:
    """``limit`` of ``mutants`` drawn with `SAMPLE_SEED`, in their order; all without a limit."""
    if limit is None or limit >= len(mutants):
        return list(mutants)
    chosen = set(random.Random(SAMPLE_SEED).sample(range(len(mutants)), limit))
    return [mutant for index, mutant in enumerate(mutants) if index in chosen]


def _seeds(text: str) -> list[int]:
    return [int(seed) for seed in text.split(",") if seed.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=sorted(SUBJECTS), default="memory")
    parser.add_argument("--limit", type=int, default=None, help="check N sampled mutants")
    parser.add_argument("--seeds", type=_seeds, default=[1, 2, 3], help="e.g. 1,2,3")
    parser.add_argument("--jobs", type=int, default=1, help="mutants checked side by side")
    parser.add_argument("--function", action="append", default=None, help="only this function")
    parser.add_argument("--output", type=Path, default=None, help="default mutants-BACKEND.json")
    arguments = parser.parse_args(argv)
    subject = SUBJECTS[arguments.backend]
    generated = generate(subject, arguments.function)
    chosen = sample(generated.mutants, arguments.limit)
    print(
        f"{len(generated.mutants)} mutants of {subject.path.relative_to(ROOT)}; "
        f"checking {len(chosen)} on seeds {arguments.seeds}",
        file=sys.stderr,
        flush=True,
    )
    judged = judge_all(chosen, arguments.seeds, arguments.jobs)
    output = arguments.output or Path(f"mutants-{arguments.backend}.json")
    output.write_text(
        json.dumps(
            {
                "backend": arguments.backend,
                "seeds": arguments.seeds,
                "limit": arguments.limit,
                "generated": len(generated.mutants),
                "equivalent": generated.equivalent,
                "not_compiling": generated.not_compiling,
                "summary": summary(judged),
                "mutants": [asdict(one) for one in judged],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    print_summary(arguments.backend, generated, judged)
    print(f"\nwritten {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
