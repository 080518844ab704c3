"""The ``checkpointspec`` command.

``checkpointspec run BACKEND`` runs the kit and exits 0 when every applicable
MUST rule passed, 1 when one failed (whatever else happened), 2 on a usage error
(unknown backend, factory that cannot be imported or raises, bad option), and 3
when no rule failed but a check stopped on an error of the kit itself, which
proves nothing about the backend. ``checkpointspec rules`` prints the catalog.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ...spec import RULES
from ..checks.base import Check
from ..checks.profiles import PROFILES
from ..engines.loading import BackendLoadError, parse_options
from .report import (
    EXIT_FAILED,
    EXIT_KIT_ERROR,
    EXIT_PASSED,
    EXIT_USAGE,
    CheckResult,
    KitReport,
    to_json,
    to_junit,
)
from .runner import run_kit

__all__ = ["main"]

_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "warning": "yellow",
    "skipped": "dim",
    "xfailed": "cyan",
    "xpassed": "bold magenta",
    "not_checked": "dim yellow",
    "error": "bold white on red",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="checkpointspec", description="Conformance kit for checkpointers."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the kit against a backend")
    run.add_argument(
        "backend", help="memory, file, sqlite, or module:function returning a Checkpointer"
    )
    run.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="how hard to try (default: default)",
    )
    run.add_argument(
        "--seed", type=int, help="seed for every random choice; printed with each failure"
    )
    run.add_argument(
        "-n", "--workers", type=int, default=1, help="run checks in this many processes"
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="CHECK_OR_RULE",
        help="run only checks whose name starts with this or that verify this rule (repeatable)",
    )
    run.add_argument(
        "--xfail",
        action="append",
        default=[],
        metavar="RULE",
        help="a rule expected to fail; it is an error if it passes (repeatable)",
    )
    run.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option passed in BackendContext.options (repeatable)",
    )
    run.add_argument(
        "--report", type=Path, metavar="FILE.json", help="write the machine-readable report"
    )
    run.add_argument("--junit", type=Path, metavar="FILE.xml", help="write a JUnit XML report")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    commands.add_parser("rules", help="print the rule catalog")
    return parser


def _rules_table(report: KitReport) -> Table:
    table = Table(
        title=f"checkpointspec · {report.backend} · profile {report.profile} · seed {report.seed}"
    )
    table.add_column("rule", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("title / reason")
    for r in report.rules:
        note = r.title if r.status == "passed" else f"{r.title} — {r.reason}"
        if r.first_failure:
            note += f"\n{r.first_failure.splitlines()[0]}"
        table.add_row(r.id, r.strength.value, f"[{_STYLE[r.status]}]{r.status}[/]", escape(note))
    return table


def _print_failures(console: Console, report: KitReport) -> None:
    for result in report.checks:
        if result.status == "failed":
            title = f"[bold red]{escape(result.name)}[/] broke [bold]{result.violated_rule}[/]"
        elif result.status == "error":
            title = (
                f"[bold]{escape(result.name)}[/] stopped on a [bold red]kit error[/]"
                " (no verdict on the backend)"
            )
        else:
            continue
        console.rule(title)
        console.print(escape(result.detail), highlight=False)
        console.print(f"[dim]replay:[/] {escape(result.replay)}")
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {escape(warning)}")


def _summary(report: KitReport) -> str:
    counts: dict[str, int] = {}
    for r in report.rules:
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    check_counts = {
        status: sum(c.status == status for c in report.checks)
        for status in ("passed", "failed", "error", "not_checked")
    }
    checks = ", ".join(
        f"{n} {status}" for status, n in check_counts.items() if n or status in ("passed", "failed")
    )
    return f"rules: {parts} · checks: {checks} · {report.duration:.1f}s"


_VERDICTS = {
    EXIT_PASSED: "[bold green]PASS[/]",
    EXIT_FAILED: "[bold red]FAIL[/]",
    EXIT_KIT_ERROR: "[bold white on red]KIT ERROR[/] no rule failed, but the kit broke off checks:",
}


def _run(args: argparse.Namespace, console: Console) -> int:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        disable=args.quiet or not console.is_terminal,
    )
    task = progress.add_task(f"checking {args.backend}", total=None, last="")

    def started(selected: list[Check]) -> None:
        progress.update(task, total=len(selected))

    def finished(result: CheckResult) -> None:
        progress.update(task, advance=1, last=f"[{_STYLE[result.status]}]{escape(result.name)}[/]")

    with progress:
        report = run_kit(
            args.backend,
            profile=args.profile,
            seed=args.seed,
            workers=args.workers,
            only=args.only,
            expected_failures=args.xfail,
            options=parse_options(args.option),
            on_result=finished,
            on_start=started,
        )
    console.print(_rules_table(report))
    _print_failures(console, report)
    if args.report:
        args.report.write_bytes(to_json(report))
    if args.junit:
        args.junit.write_bytes(to_junit(report))
    console.print(f"{_VERDICTS[report.exit_status]} {_summary(report)}")
    return report.exit_status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``checkpointspec`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console()
    if args.command == "rules":
        table = Table(title="checkpointspec rule catalog")
        for column in ("rule", "", "needs", "title"):
            table.add_column(column)
        for r in RULES:
            table.add_row(
                r.id, r.strength.value, r.capability.value if r.capability else "", r.title
            )
        console.print(table)
        return 0
    try:
        return _run(args, console)
    except BackendLoadError as exc:
        Console(stderr=True).print(f"[bold red]checkpointspec: error:[/] {escape(str(exc))}")
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
