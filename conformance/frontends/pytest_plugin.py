"""The pytest plugin: ``pytest --checkpointer module:function`` runs the kit's checks
as test items inside a backend author's own suite (xdist-compatible).

Registered through the ``pytest11`` entry point; pytest itself comes with the
``pytest`` extra (``pip install 'checkpointspec[pytest]'``). Without
``--checkpointer`` it adds nothing to a run. Each check becomes one item named
after its rule (``checkpointspec[BACKEND]::APPEND-002::stale_...``), collected
like any other test (so pytest's "collected N items" counts them); a failure
shows the panel the CLI prints: the check and the rule it broke, the finding, the
failing steps and a replay command; the full traceback, the kit's frames
included, only with ``-vv``.

Its options are the CLI's ``run`` settings that a pytest session has use for,
``--checkpointer-`` before each, declared from the one table both front ends
share (`checkpointspec.conformance.frontends.settings`), with the same help.

The backend is loaded and probed once when pytest starts: a module that does not
import, a factory that raises or returns something that is not a Checkpointer,
an unknown ``--checkpointer-only`` selection or ``--checkpointer-xfail`` rule,
or a malformed option is a usage error (one line, exit status 4), as in the
CLI. ``--checkpointer-suite`` picks the suite (``storage``, the default; ``session``; ``all``) and
``--checkpointer-session-layer`` the session layer the session checks run; one
that cannot be loaded is a usage error too.

``--checkpointer-xfail RULE=REASON`` (repeatable) marks the checks of RULE
``xfail(strict=True, reason=REASON)``, as the CLI's ``--xfail RULE=REASON`` does for the
rule: a check that fails on RULE is reported xfailed, one that passes fails the
run as XPASS(strict); a failure on another rule still fails. An id that is not
in the catalog is a usage error naming it (`check_rule_id`, as in the CLI).

One seed serves the whole run: ``--checkpointer-seed``, or else one the
controller draws, hands to every pytest-xdist worker (``workerinput``) and
prints in the header, so that any failure replays with it. A failure found by
Hypothesis also carries its reproduce blob: ``--checkpointer-reproduce BLOB``
(with ``--checkpointer-only`` naming the one check) replays exactly that
example, as the CLI's ``--reproduce`` does; the failure shows both replay
commands. A blob that does not decode, was recorded by another Hypothesis
version, or comes with a selection of more than one check is a usage error.

``--checkpointer-summary FILE.md`` writes the CLI's Markdown summary
(`checkpointspec.conformance.frontends.summary`) at the end of the run, on the
controller when pytest-xdist runs the checks: each check's result rides on its
setup report (``checkpointspec_result``), which xdist carries back. Its rule
verdicts and levels are the CLI's over the checks pytest ran (``-k`` and
``--deselect`` narrow them like ``--only``). A path that cannot be written is a
usage error.

The check runs in the item's setup, so that its outcome maps onto pytest's: a
rule violation (or an exception the backend raised) is a test failure; an error
of the kit itself is a pytest *error*, which says the test could not be run, not
that the backend is wrong; skipped and not checked checks are skips.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ...backends.registry import BackendLoadError
from ..checks.base import Check
from ..engines.run.frameworks import FRAMEWORKS
from ..engines.run.kit_run import KitRun
from ..engines.search.replay import ReproduceError
from ..engines.target.session_layer import DEFAULT_SESSION_LAYER
from ..running.compare import compare_reports, render_comparison
from ..running.failures import panel, panel_body
from ..running.merge import MergeError, load_report
from ..running.plan import ReproduceNeedsOneCheck, RunSettingError, plan_run, selected_checks
from ..running.registry import DEFAULT_SUITE
from ..running.report import CheckResult
from ..running.runner import report_of, run_check
from ..running.slices import BudgetPlan
from .settings import (
    Setting,
    SettingValueError,
    add_plugin_options,
    flag,
    run_arguments,
    settings_of,
)
from .summary import render_summary

__all__ = ["CheckItem", "KitCollector"]

_WORKER_SEED = "checkpointspec_seed"
"""The `workerinput` key carrying the controller's seed to pytest-xdist workers."""

_MORE = "pytest -vv"
"""How a failure's full traceback (the kit's frames included) is asked for."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("checkpointspec", "checkpointer conformance kit")
    add_plugin_options(group.addoption)


class CheckFailed(Exception):
    """A check found a rule violation; carries the kit's result for the report."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.detail)
        self.result = result


class ExpectedViolation(CheckFailed):
    """A check broke a rule listed with ``--checkpointer-xfail``: the one exception
    the xfail mark accepts, so that a failure on another rule still fails."""


class _KitSetup(msgspec.Struct, frozen=True):
    """What `pytest_configure` learnt: the run, and the checks it selected."""

    run: KitRun
    checks: tuple[Check, ...]


_SETUP = pytest.StashKey[_KitSetup]()
_BUDGET_PLAN = pytest.StashKey["BudgetPlan"]()


def _budget_plan(item: CheckItem) -> BudgetPlan:
    """The run's budget plan (`BudgetPlan`) over the kit checks pytest kept after
    deselection, made when the first of them starts."""
    config = item.config
    if _BUDGET_PLAN not in config.stash:
        kept = [i.kit_check for i in item.session.items if isinstance(i, CheckItem)]
        config.stash[_BUDGET_PLAN] = BudgetPlan(item.run, kept)
    return config.stash[_BUDGET_PLAN]


class KitCollector(pytest.Collector):
    """Collects one item per selected kit check of the run."""

    def __init__(self, *, run: KitRun, checks: tuple[Check, ...], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.run = run
        self.checks = checks

    def collect(self) -> Iterator[CheckItem]:
        for kit_check in self.checks:
            yield CheckItem.from_parent(
                self, name=kit_check.name, kit_check=kit_check, run=self.run
            )


class CheckItem(pytest.Item):
    """One kit check of the run, run as a pytest test."""

    def __init__(self, *, kit_check: Check, run: KitRun, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.kit_check = kit_check
        self.run = run
        self.result: CheckResult | None = None
        self.expected_failures = {
            r: run.expected_failures[r] for r in kit_check.rules if r in run.expected_failures
        }
        for rule_id in kit_check.rules:
            self.add_marker(pytest.mark.checkpointspec_rule(rule_id))
        if self.expected_failures:
            reason = "; ".join(f"{r}: {why}" for r, why in self.expected_failures.items())
            self.add_marker(pytest.mark.xfail(strict=True, reason=reason, raises=ExpectedViolation))

    def setup(self) -> None:
        # pytest reports an exception raised in setup as an error and one raised in
        # runtest as a failure: running the check here lets only evidence against
        # the backend fail the test.
        self.user_properties.append(("checkpointspec_seed", self.run.seed))
        with tempfile.TemporaryDirectory(prefix="checkpointspec-") as root:
            try:
                given = _budget_plan(self).allowance_for(self.kit_check)
                result = self.result = run_check(self.kit_check, self.run, Path(root), given)
            except ReproduceError as exc:
                pytest.fail(f"--checkpointer-reproduce: {exc}", pytrace=False)
        if result.status == "error":
            pytest.fail(
                f"kit error, not evidence against the backend: {result.reason}\n"
                + panel_body(
                    result, verbose=self._verbose(), more=_MORE, also=self._pytest_replay()
                ),
                pytrace=False,
            )
        if result.status == "skipped":
            pytest.skip(result.reason)
        if result.status == "not_checked":
            pytest.skip(f"not checked: {result.reason}")
        if result.status == "incomplete":
            self.user_properties.append(("checkpointspec_incomplete", result.reason))

    def runtest(self) -> None:
        # The cap stopping a check short of its counts fails its test, as a test that
        # did less than it says: not an error of the test's own setting up.
        if (
            self.result is not None
            and self.result.status == "incomplete"
            and not self.run.accept_incomplete
        ):
            pytest.fail(
                f"incomplete, not passed: {self.result.reason} (raise "
                "--checkpointer-budget, or pass --checkpointer-accept-incomplete)",
                pytrace=False,
            )
        if self.result is not None and self.result.status == "failed":
            if self.result.violated_rule in self.expected_failures:
                raise ExpectedViolation(self.result)
            raise CheckFailed(self.result)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: object = None
    ) -> str:
        if isinstance(excinfo.value, CheckFailed):
            return panel(
                excinfo.value.result,
                verbose=self._verbose(),
                more=_MORE,
                also=self._pytest_replay(),
            )
        return str(super().repr_failure(excinfo))

    def _pytest_replay(self) -> tuple[str, ...]:
        """The pytest command that reruns this check as it ran, with its failure's blob."""
        if self.result is None or not self.result.replay:
            return ()
        run = self.run
        command = run.process_options.get("process")
        if command is not None:
            parts = ["pytest", "--checkpointer-process", command]
            if "validate_protocol" in run.process_options:
                parts.append("--checkpointer-validate-protocol")
        elif run.suite in FRAMEWORKS:
            parts = ["pytest", FRAMEWORKS[run.suite].plugin_flag, run.backend.name]
            claims = sorted(c.value for c in run.probe.capabilities)
            if claims:  # what its author declared, as the run was told
                parts += ["--checkpointer-declare", ",".join(claims)]
        else:
            parts = ["pytest", "--checkpointer", run.backend.name]
        if run.suite != DEFAULT_SUITE and run.suite not in FRAMEWORKS:
            parts += ["--checkpointer-suite", run.suite]
        if run.suite != "storage" and run.session_layer != DEFAULT_SESSION_LAYER:
            parts += ["--checkpointer-session-layer", run.session_layer]
        for key, value in run.options.items():
            parts += ["--checkpointer-option", f"{key}={value}"]
        parts += ["--checkpointer-only", self.kit_check.name]
        parts += ["--checkpointer-profile", run.profile.name]
        parts += ["--checkpointer-seed", str(run.seed)]
        if self.result.reproduce is not None:
            parts += ["--checkpointer-reproduce", self.result.reproduce]
        return (shlex.join(parts),)

    def _verbose(self) -> bool:
        return self.config.get_verbosity() >= 2

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.kit_check.name}: {self.kit_check.summary}"


def _value(config: pytest.Config, setting: Setting) -> Any:
    """``setting``'s value on the command line, read (`Setting.read`): text the setting
    cannot use is a one-line `pytest.UsageError` naming the option."""
    assert setting.plugin is not None
    try:
        return setting.read(config.getoption(setting.plugin))
    except SettingValueError as exc:
        raise pytest.UsageError(f"{setting.plugin}: {exc}") from None


def _requested(config: pytest.Config) -> bool:
    """Whether the command line asks for a run: --checkpointer, --checkpointer-process or
    a framework's flag (--checkpointer-langgraph, --checkpointer-openai-session; one of
    them), or --checkpointer-validate-protocol, which only a run takes."""
    flags = ["--checkpointer", "--checkpointer-process"] + [
        f.plugin_flag for f in FRAMEWORKS.values()
    ]
    given = [f for f in flags if config.getoption(f.removeprefix("--").replace("-", "_"))]
    if len(given) > 1:
        raise pytest.UsageError(f"give one of {', '.join(flags[:-1])} and {flags[-1]}")
    return bool(given or config.getoption("checkpointer_validate_protocol"))


def _seed(config: pytest.Config, given: int | None) -> int | None:
    """--checkpointer-seed, or on a pytest-xdist worker the controller's (None: draw one)."""
    seed = given
    workerinput = getattr(config, "workerinput", None)  # set on a pytest-xdist worker
    if seed is None and workerinput is not None:
        seed = workerinput.get(_WORKER_SEED)
    return seed


def _planned_run(config: pytest.Config) -> KitRun:
    """The run the command line asks for (`plan_run`); a setting it refuses is a
    one-line `pytest.UsageError` naming the option."""
    values = {s.name: _value(config, s) for s in settings_of("pytest")}
    values["backend"] = values["backend"] or None  # an empty --checkpointer= names none
    values["process"] = values["process"] or None
    values["seed"] = _seed(config, values["seed"])
    try:
        arguments = run_arguments(values, "pytest", unexplained="listed with --checkpointer-xfail")
    except BackendLoadError as exc:  # settings that do not go together
        raise pytest.UsageError(str(exc)) from None
    try:
        return plan_run(**arguments)
    except ReproduceNeedsOneCheck as exc:
        raise pytest.UsageError(
            f"--checkpointer-reproduce replays one check, and {exc.selected} are selected: "
            "name it with --checkpointer-only, as the failure's replay command does"
        ) from None
    except RunSettingError as exc:
        option = flag(exc.setting, "pytest")
        if exc.setting == "backend" and values["process"]:
            option = flag("process", "pytest")
        raise pytest.UsageError(f"{option}: {exc}") from exc


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "checkpointspec_rule(rule_id): the kit rule a check verifies"
    )
    if not _requested(config):
        return
    run = _planned_run(config)
    config.stash[_SETUP] = _KitSetup(run, tuple(selected_checks(run)))
    summary = run.outputs.summary
    baseline = _baseline(config)
    wanted = summary is not None or baseline is not None
    if wanted and getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(
            _SessionReport(config, Path(summary) if summary else None, baseline),
            "checkpointspec-session-report",
        )


def _baseline(config: pytest.Config) -> Path | None:
    """``--checkpointer-compare``'s report, read once now so that a bad one is a usage
    error before any check runs, not a surprise at the end."""
    given = config.getoption("--checkpointer-compare")
    if given is None:
        return None
    try:
        load_report(Path(given))
    except MergeError as exc:
        raise pytest.UsageError(f"--checkpointer-compare: {exc}") from exc
    return Path(given)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: every worker gets the controller's seed, so
    the run has one seed (the header's) whichever worker runs a check."""
    setup = node.config.stash.get(_SETUP, None)
    if setup is not None:
        node.workerinput[_WORKER_SEED] = setup.run.seed


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Add the kit's collector to the session's: pytest then collects its items like
    any others, reports them in "collected N items", and -k/--deselect apply."""
    report = yield
    setup = collector.config.stash.get(_SETUP, None)
    if setup is not None and isinstance(collector, pytest.Session) and report.passed:
        report.result.append(
            KitCollector.from_parent(
                collector,
                name=f"checkpointspec[{setup.run.backend.name}]",
                nodeid=f"checkpointspec[{setup.run.backend.name}]",  # not "::checkpointspec[...]"
                run=setup.run,
                checks=setup.checks,
            )
        )
    return report


_RESULT_ATTRIBUTE = "checkpointspec_result"
"""The setup report's attribute holding the check's `CheckResult` as JSON (xdist carries it)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "setup" and isinstance(item, CheckItem) and item.result is not None:
        setattr(report, _RESULT_ATTRIBUTE, msgspec.json.encode(item.result).decode())
    return report


class _SessionReport:
    """Collects the checks' results from their setup reports and, when the session ends,
    writes the Markdown summary and compares with a stored report (registered on the
    controller only, when either is asked for)."""

    def __init__(self, config: pytest.Config, summary: Path | None, baseline: Path | None) -> None:
        self.config = config
        self.summary = summary
        self.baseline = baseline
        self.results: dict[str, CheckResult] = {}
        self.started = time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        encoded = getattr(report, _RESULT_ATTRIBUTE, None)
        if report.when == "setup" and isinstance(encoded, str):
            result = msgspec.json.decode(encoded, type=CheckResult)
            self.results[result.name] = result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        setup = self.config.stash[_SETUP]
        report = report_of(
            setup.run, setup.checks, self.results, time.perf_counter() - self.started
        )
        if self.summary is not None:
            try:
                self.summary.write_text(render_summary(report), encoding="utf-8")
            except OSError as exc:
                sys.stderr.write(
                    "ERROR: --checkpointer-summary: cannot write "
                    f"{self.summary}: {exc.strerror or exc}\n"
                )
                # As in the CLI: a verdict stands; a pass whose summary was lost is not a pass.
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if self.baseline is not None:
            comparison = compare_reports(load_report(self.baseline), report)
            sys.stdout.write(f"\ncheckpointspec compare {self.baseline}:\n")
            sys.stdout.write(render_comparison(comparison) + "\n")
            if comparison.regressed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header(config: pytest.Config) -> str | None:
    setup = config.stash.get(_SETUP, None)
    if setup is None:
        return None
    run = setup.run
    name = run.process_options.get("process", run.backend.name)
    header = f"checkpointspec: backend {name}, profile {run.profile.name}"
    if run.suite != DEFAULT_SUITE:
        header += f", suite {run.suite}"
    if run.suite != "storage":
        header += f", session layer {run.session_layer}"
    header += f", seed {run.seed}"
    if run.expected_failures:
        header += f", xfail {', '.join(sorted(run.expected_failures))}"
    return header
