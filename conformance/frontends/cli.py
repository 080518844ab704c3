"""The ``checkpointspec`` command.

``checkpointspec run BACKEND`` runs the kit and exits 0 when every applicable
MUST rule passed, 1 when one failed (whatever else happened), 2 on a usage error,
and 3 when no rule failed but a check stopped on an error of the kit itself,
which proves nothing about the backend. ``checkpointspec rules`` prints the catalog,
``checkpointspec explain RULE`` one rule: its text, capability, level and checks.

A usage error is one line on stderr and exit 2, before any check runs: an
unknown backend; a backend module that does not import (its file, line and
error); a factory that raises or returns something that is not a Checkpointer
(the members it lacks); an unknown ``--xfail`` rule or ``--only`` selection; a
``-n`` below 1; a ``--report``/``--junit``/``--badge``/``--summary`` path that
cannot be written; with
``--suite session`` or ``all``, a ``--session-layer`` module that does not
import or lacks one of the session layer's names.

``--suite`` picks what is checked: ``storage`` (the default) the checkpointer
against the storage contract, ``session`` the session layer (``--session-layer``,
default ``checkpointspec.reference``) running on it, ``all`` both. The table
lists the rules of the suite run.

The progress bar and the summary count the same things: the selected checks,
each of which ends once (skipped ones included); one check may verify several
rules. The bar names the check(s) running now.

A failure panel leads with the check, the rule it broke and the finding, then
the failing steps and the replay command; the full traceback, the kit's own
frames included, only with ``--verbose``. The replay command of a failure found
by Hypothesis carries ``--reproduce BLOB``, which reruns exactly the failing
example; a blob that does not decode, was recorded by another Hypothesis
version, or comes without ``--only`` naming one check is a usage error.

Under the summary line, the conformance levels the run attained
(`checkpointspec.conformance.running.levels`). ``--badge FILE.svg`` writes a status
badge (`badge`), ``--summary FILE.md`` a Markdown summary for a CI job's page
(`summary`). ``--xfail RULE=REASON`` lists a rule expected to fail and why; the
reason is shown in the table and recorded in the report (``RULE`` alone works too).

``--lite-agent MODULE#FACTORY`` checks a checkpointer written for the lite-agent SDK's
``Checkpointer`` interface through the bridge shipped with the package
(`checkpointspec.backends.stdio.bridges`, docs/lite-agent.md): the run's header says
what the bridge found on the object and what ``--declare`` added; declaring
``truncate_without_expected_head`` lists TRUNC-003 as an expected failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeAlias, get_args

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ...backends.registry import BackendLoadError
from ...backends.stdio.bridges import LiteAgentBridgeError, describe_lite_agent
from ...reference import cli as operator
from ...spec import RULES
from ..checks.base import Check
from ..engines.run.frameworks import FRAMEWORKS
from ..engines.run.kit_run import KitRun, OutputName, ReportOutputs
from ..engines.search.budget import format_seconds
from ..engines.search.replay import HYPOTHESIS_VERSION
from ..engines.target.session_layer import DEFAULT_SESSION_LAYER
from ..running.compare import compare_reports, render_comparison
from ..running.failures import panel_body, rule_headline
from ..running.levels import describe_levels, level_of_rule
from ..running.merge import MergeError, load_report, merge_reports
from ..running.plan import CI_SEED, RunSettingError, check_outputs, plan_run
from ..running.report import (
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_KIT_ERROR,
    EXIT_PASSED,
    EXIT_USAGE,
    KIT_VERSION,
    CheckResult,
    KitReport,
    to_json,
    to_junit,
)
from ..running.runner import RunListener, run_kit
from .badge import badge_for, render_badge
from .explain import explain_rule
from .settings import add_cli_arguments, declared_names, rule_id_option, run_arguments
from .summary import render_summary

__all__ = ["main"]

_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "warning": "yellow",
    "skipped": "dim",
    "xfailed": "cyan",
    "xpassed": "bold magenta",
    "not_checked": "dim yellow",
    "not_run": "dim",
    "error": "bold white on red",
    "kit_checked": "dim cyan",
    "incomplete": "bold yellow",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``checkpointspec run: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_OUTPUT_FLAGS = (
    ("report", "FILE.json", "JSON report"),
    ("junit", "FILE.xml", "JUnit XML report"),
    ("badge", "FILE.svg", "SVG status badge"),
    ("summary", "FILE.md", "Markdown summary"),
)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="checkpointspec",
        description=(
            "Conformance kit for checkpointers, and operator commands for their sessions."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_run(commands)
    _add_merge(commands)
    _add_compare(commands)
    commands.add_parser("rules", help="print the rule catalog")
    _add_explain(commands)
    operator.add_commands(commands)  # sessions, checkpoints, restore, compact
    return parser


_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"
"""What ``add_subparsers`` returns: a subcommand is added to it."""


def _add_run(commands: _Commands) -> None:
    """``run``: every setting of the table (`settings`) the CLI offers."""
    run = commands.add_parser("run", help="run the kit against a backend")
    add_cli_arguments(run)


def _add_merge(commands: _Commands) -> None:
    merge = commands.add_parser(
        "merge", help="make the reports of one run's shards (--shard) one report"
    )
    merge.add_argument(
        "reports", nargs="+", metavar="REPORT.json", help="the shards' --report files"
    )
    for flag, meta, what in _OUTPUT_FLAGS:
        merge.add_argument(f"--{flag}", metavar=meta, help=f"write the merged {what}")


def _add_compare(commands: _Commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="what changed between two reports: exit 1 when a rule newly fails",
    )
    compare.add_argument("old", metavar="OLD.json", help="the report to compare against")
    compare.add_argument("new", metavar="NEW.json", help="the newer report")


def _add_explain(commands: _Commands) -> None:
    explain = commands.add_parser(
        "explain", help="print one rule: its text, capability, level and checks"
    )
    explain.add_argument("rule", type=rule_id_option, help="a rule id, e.g. APPEND-002")


def _rules_table(report: KitReport) -> Table:
    suite = "" if report.suite == "storage" else f" · suite {report.suite}"
    if report.session_layer is not None and report.session_layer != DEFAULT_SESSION_LAYER:
        suite += f" ({report.session_layer})"
    table = Table(
        title=f"checkpointspec · {report.backend}{suite} · profile {report.profile} "
        f"· seed {report.seed}"
    )
    table.add_column("rule", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("title / reason")
    for r in report.rules:
        if r.status == "not_run":
            continue
        note = f"{r.title} — {r.reason}" if r.reason else r.title
        if r.follows_from is not None:
            note += f"\nfollows from {r.follows_from}: fix that first"
        if r.first_failure:
            note += f"\n{rule_headline(report, r)}"
        table.add_row(r.id, r.strength.value, f"[{_STYLE[r.status]}]{r.status}[/]", escape(note))
    return table


def _print_findings(console: Console, report: KitReport, verbose: bool = False) -> None:
    """One panel per failed or errored check: the rule and the finding first, then the
    failing steps and the replay command; the kit's traceback only if ``verbose``.
    Then what passing checks say they covered (how many crash states), and warnings."""
    for result in sorted(report.checks, key=_roots_first):
        if result.status == "failed":
            rules = ", ".join(f.rule for f in result.findings) or str(result.violated_rule)
            title = f"[bold red]{escape(result.name)}[/] broke [bold]{rules}[/]"
        elif result.status == "error":
            title = (
                f"[bold]{escape(result.name)}[/] stopped on a [bold red]kit error[/]"
                " (no verdict on the backend)"
            )
        else:
            continue
        console.rule(title)
        console.print(escape(panel_body(result, verbose=verbose)), highlight=False)
    for result in report.checks:
        if result.status == "passed" and result.detail:
            console.print(f"[dim]covered[/] {escape(result.name)}: {escape(result.detail)}")
    for result in report.checks:
        if result.status != "passed":
            continue
        for rule_id, why in result.kit_checked.items():
            console.print(
                f"[dim cyan]checked by the kit, not the backend[/] {rule_id} in "
                f"{escape(result.name)}: {escape(why)}"
            )
    for result in report.checks:
        if result.status in ("incomplete", "skipped", "not_checked"):
            kind = result.status.replace("_", " ")
            console.print(f"[dim]{kind}[/] {escape(result.name)}: {escape(result.reason)}")
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {escape(warning)}")
    for left in report.left_behind:
        console.print(f"[bold yellow]left behind[/] {escape(left)}")


def _roots_first(result: CheckResult) -> bool:
    """Panels of checks whose first finding is a root come first (False sorts first)."""
    return bool(result.findings) and result.findings[0].follows_from is not None


_CHECK_STATUSES = ("passed", "failed", "error", "incomplete", "not_checked", "skipped")


def _summary(report: KitReport) -> str:
    """Rules by status, then the checks (what the progress bar counted) by status."""
    counts: dict[str, int] = {}
    for r in report.rules:
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    check_counts = {
        status: sum(c.status == status for c in report.checks) for status in _CHECK_STATUSES
    }
    checks = ", ".join(
        f"{n} {status}" for status, n in check_counts.items() if n or status in ("passed", "failed")
    )
    return f"rules: {parts} · {len(report.checks)} checks: {checks} · {report.duration:.1f}s"


_VERDICTS = {
    EXIT_PASSED: "[bold green]PASS[/]",
    EXIT_FAILED: "[bold red]FAIL[/]",
    EXIT_KIT_ERROR: "[bold white on red]KIT ERROR[/] no rule failed, but the kit broke off checks:",
    EXIT_INCOMPLETE: "[bold yellow]INCOMPLETE[/] no rule failed, but the time cap stopped checks "
    "before their counts (raise --budget, or pass --accept-incomplete):",
}


class _Live(RunListener):
    """The progress bar: how many of the selected checks ended, and which run now; and
    with ``lines`` (no terminal: a CI log), one line per check as it ends instead."""

    def __init__(self, progress: Progress, backend: str, lines: Console | None = None) -> None:
        self.progress = progress
        self.lines = lines
        self.idle = f"checking {escape(backend)}"
        self.task: TaskID = progress.add_task(self.idle, total=None)
        self.running: list[str] = []
        self.done = 0
        self.total = 0

    def selected(self, checks: list[Check]) -> None:
        self.total = len(checks)
        self.progress.update(self.task, total=len(checks))

    def started(self, check: Check) -> None:
        self.running.append(check.name)
        self._describe()

    def finished(self, result: CheckResult) -> None:
        if result.name in self.running:
            self.running.remove(result.name)
        self.done += 1
        self.progress.update(self.task, advance=1)
        self._describe()
        if self.lines is not None:
            self.lines.print(escape(self.progress_line(result)), highlight=False, soft_wrap=True)

    def progress_line(self, result: CheckResult) -> str:
        """``[12/53] KILL-001::commanded_workers passed in 8.1s: <what it covered>``."""
        what = {
            "failed": ", ".join(f.rule for f in result.findings) or str(result.violated_rule),
            "passed": result.detail,
        }.get(result.status, result.reason)
        line = f"[{self.done}/{self.total}] {result.name} {result.status} in {result.duration:.1f}s"
        return f"{line}: {what}" if what else line

    def _describe(self) -> None:
        names = ", ".join(escape(n) for n in self.running)
        if not self.running:
            description = self.idle
        elif len(self.running) == 1:
            description = names
        else:
            description = f"{len(self.running)} running: {names}"
        self.progress.update(self.task, description=description)


def _badge_svg(report: KitReport) -> bytes:
    return render_badge(badge_for(report)).encode()


def _summary_md(report: KitReport) -> bytes:
    return render_summary(report).encode()


_RENDERERS: dict[OutputName, Callable[[KitReport], bytes]] = {
    "report": to_json,
    "junit": to_junit,
    "badge": _badge_svg,
    "summary": _summary_md,
}
"""How each output file renders the report."""


def _write(path: Path, data: bytes) -> str | None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def _planned_run(args: argparse.Namespace) -> KitRun:
    """The run the command line asks for, every setting checked (`plan_run`)."""
    return plan_run(**run_arguments(vars(args), "cli"))


def _backend_named(args: argparse.Namespace) -> str:
    """What the command line names as the backend: its name, the ``--process`` command,
    the ``--lite-agent`` factory or a framework's (``--langgraph``, ``--openai-session``)."""
    frameworks = [getattr(args, f.setting) for f in FRAMEWORKS.values()]
    given = [a for a in (args.backend, args.process, args.lite_agent, *frameworks) if a is not None]
    if len(given) != 1:
        raise BackendLoadError(
            "name a backend, or give --process COMMAND, --lite-agent MODULE#FACTORY, "
            + ", ".join(f"{f.flag} MODULE:FACTORY" for f in FRAMEWORKS.values())
            + " (one of them)"
        )
    named: str = given[0]
    return named


def _lite_agent_header(args: argparse.Namespace, console: Console) -> None:
    """With ``--lite-agent``, print what the bridge found on the object and what was
    declared, before any check runs; a factory the bridge cannot serve is a usage error."""
    if args.lite_agent is None:
        return
    try:
        found = describe_lite_agent(
            args.lite_agent, declared_names(args.declare), dict(args.option)
        )
    except LiteAgentBridgeError as exc:
        raise BackendLoadError(str(exc)) from None
    console.print(escape(found.header()), highlight=False, soft_wrap=True)


def _run(args: argparse.Namespace, console: Console) -> int:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet or not console.is_terminal,
    )
    # Without a terminal (a CI log, a pipe) the bar is not drawn: a line per check instead.
    lines = console if not args.quiet and not console.is_terminal else None
    live = _Live(progress, _backend_named(args), lines)
    _lite_agent_header(args, console)
    with progress:  # shown while the backend is probed too
        run = _planned_run(args)
        header = run_header(run)
        for line in header[:1] if args.quiet else header:
            console.print(escape(line), highlight=False, soft_wrap=True)
        report = run_kit(run, live)
    return _show(report, run.outputs, console, verbose=args.verbose)


def run_header(run: KitRun) -> list[str]:
    """The lines a run prints before any check, piped or not, so that a log cut short
    (a CI job killed by its own timeout) still says what ran: the backend and what it
    declared, the profile, seed and cap, the replay key's versions, what CI mode
    changed, and the command that runs the same work again. ``--quiet`` prints the
    first line only."""
    cap = format_seconds(run.budget) if run.budget is not None else "none"
    declared = ", ".join(sorted(c.value for c in run.probe.capabilities)) or "nothing optional"
    lines = [
        f"checkpointspec {KIT_VERSION} · {run.backend.name} · suite {run.suite} · profile "
        f"{run.profile.name} · seed {run.seed} · cap {cap}",
        f"backend {run.backend.target} declares {declared}; hypothesis {HYPOTHESIS_VERSION}",
    ]
    if run.ci:
        lines.append(
            f"CI is set: the run is a gate: seed {CI_SEED} when no --seed is given "
            f"(not drawn), no example database, no per-example deadline, failing "
            f"examples printed as replay blobs; a check the cap stops is incomplete"
            + (" (accepted: --accept-incomplete)" if run.accept_incomplete else "")
        )
    lines.append(f"the same work again: {run.rerun_command()}")
    return lines


def _show(report: KitReport, outputs: ReportOutputs, console: Console, *, verbose: bool) -> int:
    """Print ``report`` (table, findings, verdict, roots, levels) and write ``outputs``;
    the exit status: the report's, or a usage error when a pass could not be written."""
    console.print(_rules_table(report))
    not_run = sum(r.status == "not_run" for r in report.rules)
    if not_run:
        console.print(f"[dim]{not_run} rules not run: no check selected by --only verifies them[/]")
    _print_findings(console, report, verbose)
    for result in report.checks:
        if result.status == "passed" and result.reason:  # a --reproduce that did not fail
            console.print(f"{escape(result.name)}: {escape(result.reason)}", highlight=False)
    status = report.exit_status
    for name, path in outputs.named().items():
        problem = _write(Path(path), _RENDERERS[name](report))
        if problem:
            _error(problem)
            # A verdict (1, 3) stands; a pass whose report was lost is not a pass to CI.
            status = EXIT_USAGE if status == EXIT_PASSED else status
    capped = sum(c.status == "incomplete" for c in report.checks)
    verdict = _VERDICTS[report.exit_status]
    if report.exit_status == EXIT_PASSED and capped:
        verdict += f" with {capped} incomplete checks accepted (--accept-incomplete):"
    console.print(f"{verdict} {_summary(report)}")
    if report.roots:
        console.print(escape(_roots_line(report)), highlight=False)
    console.print(escape(describe_levels(report.levels)), highlight=False)
    return status


def _roots_line(report: KitReport) -> str:
    """The defects to fix, at their roots: a line each, with its rule, what went wrong,
    the checks that saw it and the rules that follow from it (its symptoms)."""
    if not report.defects:  # a report of an older kit: roots only
        return f"fix first: {'; '.join(report.roots)}"
    lines = []
    for defect in report.defects:
        seen = f"seen by {len(defect.checks)} check{'s' if len(defect.checks) != 1 else ''}"
        symptoms = f"; explains {', '.join(defect.symptoms)}" if defect.symptoms else ""
        lines.append(f"{defect.rule}: {defect.shape} ({seen}{symptoms})")
    if len(lines) == 1:
        return f"fix first: {lines[0]}"
    return "\n".join([f"fix first ({len(lines)} defects):", *(f"  {line}" for line in lines)])


def _outputs(args: argparse.Namespace) -> ReportOutputs:
    """The output files ``merge`` was asked to write."""
    return ReportOutputs(
        report=args.report, junit=args.junit, badge=args.badge, summary=args.summary
    )


def _merge(args: argparse.Namespace, console: Console) -> int:
    """``checkpointspec merge``: the shards' reports as one, printed and written like a run's."""
    outputs = _outputs(args)
    try:
        check_outputs(outputs)
        report = merge_reports([load_report(Path(p)) for p in args.reports])
    except RunSettingError as exc:
        _error(f"--{exc.setting}: {exc}")
        return EXIT_USAGE
    except MergeError as exc:
        _error(str(exc))
        return EXIT_USAGE
    return _show(report, outputs, console, verbose=False)


def _compare(args: argparse.Namespace, console: Console) -> int:
    """``checkpointspec compare OLD NEW``: exit 1 when a rule newly fails."""
    try:
        old, new = load_report(Path(args.old)), load_report(Path(args.new))
    except MergeError as exc:
        _error(str(exc))
        return EXIT_USAGE
    comparison = compare_reports(old, new)
    console.print(escape(render_comparison(comparison)), highlight=False, soft_wrap=True)
    return EXIT_FAILED if comparison.regressed else EXIT_PASSED


def _error(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]checkpointspec: error:[/] {escape(message)}", highlight=False
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``checkpointspec`` console script; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2, already printed)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    console = Console()
    if args.command in operator.COMMANDS:
        return operator.run_command(args, console)
    if args.command == "rules":
        table = Table(title="checkpointspec rule catalog")
        for column in ("rule", "", "needs", "level", "title"):
            table.add_column(column)
        for r in RULES:
            level = level_of_rule(r.id)
            table.add_row(
                r.id,
                r.strength.value,
                r.capability.value if r.capability else "",
                level.name if level else "",
                r.title,
            )
        console.print(table)
        return 0
    if args.command == "merge":
        return _merge(args, console)
    if args.command == "compare":
        return _compare(args, console)
    if args.command == "explain":
        console.print(escape(explain_rule(args.rule)), highlight=False, end="", soft_wrap=True)
        return 0
    try:
        return _run(args, console)
    except RunSettingError as exc:
        # plan_run checks the output files before the backend is opened; name the flag.
        flag = f"--{exc.setting}: " if exc.setting in get_args(OutputName) else ""
        _error(f"{flag}{exc}")
        return EXIT_USAGE
    except BackendLoadError as exc:
        _error(str(exc))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
