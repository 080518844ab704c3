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

import random
import shlex
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ...backends.registry import (
    BackendLoadError,
    BackendRef,
    parse_options,
    process_backend,
    resolve_backend,
)
from ..checks.base import Check
from ..engines.profiles import DEFAULT_PROFILE, PROFILES
from ..engines.replay import ReproduceError, Reproduction, parse_reproduction
from ..engines.session_layer import DEFAULT_SESSION_LAYER, load_session_layer
from ..running.failures import panel, panel_body
from ..running.levels import judge_levels
from ..running.registry import (
    DEFAULT_SUITE,
    SUITES,
    UnknownCheckError,
    UnknownRuleError,
    check_rule_id,
    is_session_check,
    rules_of_suite,
    select_checks,
)
from ..running.report import (
    REPORT_SCHEMA_VERSION,
    CheckResult,
    KitReport,
    exit_status_for,
    summarise_rules,
    unwritable,
)
from ..running.runner import BackendProbe, probe_backend, run_check
from .summary import render_summary

__all__ = ["CheckItem", "KitCollector"]

_WORKER_SEED = "checkpointspec_seed"
"""The `workerinput` key carrying the controller's seed to pytest-xdist workers."""

_MORE = "pytest -vv"
"""How a failure's full traceback (the kit's frames included) is asked for."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("checkpointspec", "checkpointer conformance kit")
    group.addoption(
        "--checkpointer",
        metavar="BACKEND",
        help="run the kit against BACKEND (memory, file, sqlite or module:function)",
    )
    group.addoption(
        "--checkpointer-process",
        metavar="COMMAND",
        help="run the kit against a backend in another process speaking the stdio "
        "protocol, e.g. 'node my-backend.js' (instead of --checkpointer)",
    )
    group.addoption(
        "--checkpointer-validate-protocol",
        action="store_true",
        help="with --checkpointer-process: check every message against the protocol's schema",
    )
    group.addoption(
        "--checkpointer-profile",
        choices=sorted(PROFILES),
        default=DEFAULT_PROFILE,
        help=f"kit profile (default: {DEFAULT_PROFILE}; quick for a CI gate)",
    )
    group.addoption(
        "--checkpointer-seed", type=int, default=None, help="seed for the kit's random choices"
    )
    group.addoption(
        "--checkpointer-only",
        action="append",
        default=[],
        metavar="CHECK_OR_RULE",
        help="run only these checks or rules",
    )
    group.addoption(
        "--checkpointer-suite",
        choices=list(SUITES),
        default=DEFAULT_SUITE,
        help=f"storage, session or all (default: {DEFAULT_SUITE})",
    )
    group.addoption(
        "--checkpointer-session-layer",
        default=DEFAULT_SESSION_LAYER,
        metavar="MODULE",
        help=f"session layer the session suite checks (default: {DEFAULT_SESSION_LAYER})",
    )
    group.addoption(
        "--checkpointer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (repeatable)",
    )
    group.addoption(
        "--checkpointer-xfail",
        action="append",
        default=[],
        metavar="RULE=REASON",
        help="a rule expected to fail, and why: its checks are xfail(strict=True), "
        "so a pass fails the run (repeatable)",
    )
    group.addoption(
        "--checkpointer-summary",
        metavar="FILE.md",
        help="write a Markdown summary of the kit's checks (e.g. to $GITHUB_STEP_SUMMARY)",
    )
    group.addoption(
        "--checkpointer-reproduce",
        default=None,
        metavar="BLOB",
        help="replay exactly this failing example of the one --checkpointer-only check "
        "(from a failure's replay command): no search, no shrinking",
    )


class CheckFailed(Exception):
    """A check found a rule violation; carries the kit's result for the report."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.detail)
        self.result = result


class ExpectedViolation(CheckFailed):
    """A check broke a rule listed with ``--checkpointer-xfail``: the one exception
    the xfail mark accepts, so that a failure on another rule still fails."""


class _KitSetup(msgspec.Struct, frozen=True):
    """What `pytest_configure` learnt: the backend, its probe, the seed, the checks,
    and the reason of each rule expected to fail."""

    backend: BackendRef
    probe: BackendProbe
    seed: int
    checks: tuple[Check, ...]
    xfail: dict[str, str]
    reproduction: Reproduction | None = None


_SETUP = pytest.StashKey[_KitSetup]()


class KitCollector(pytest.Collector):
    """Collects one item per selected kit check for the configured backend."""

    def __init__(
        self,
        *,
        backend: BackendRef,
        probe: BackendProbe,
        seed: int,
        checks: tuple[Check, ...],
        xfail: dict[str, str] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.backend = backend
        self.probe = probe
        self.seed = seed
        self.checks = checks
        self.xfail = dict(xfail or {})

    def collect(self) -> Iterator[CheckItem]:
        for kit_check in self.checks:
            yield CheckItem.from_parent(
                self,
                name=kit_check.name,
                kit_check=kit_check,
                xfail={r: self.xfail[r] for r in kit_check.rules if r in self.xfail},
            )


class CheckItem(pytest.Item):
    """One kit check run as a pytest test."""

    def __init__(
        self, *, kit_check: Check, xfail: dict[str, str] | None = None, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.kit_check = kit_check
        self.result: CheckResult | None = None
        self.expected_failures = dict(xfail or {})
        for rule_id in kit_check.rules:
            self.add_marker(pytest.mark.checkpointspec_rule(rule_id))
        if self.expected_failures:
            reason = "; ".join(f"{r}: {why}" for r, why in self.expected_failures.items())
            self.add_marker(pytest.mark.xfail(strict=True, reason=reason, raises=ExpectedViolation))

    def setup(self) -> None:
        # pytest reports an exception raised in setup as an error and one raised in
        # runtest as a failure: running the check here lets only evidence against
        # the backend fail the test.
        parent = self.parent
        assert isinstance(parent, KitCollector)
        self.user_properties.append(("checkpointspec_seed", parent.seed))
        options = _run_options(self.config)
        profile = PROFILES[self.config.getoption("checkpointer_profile")]
        setup = self.config.stash[_SETUP]
        with tempfile.TemporaryDirectory(prefix="checkpointspec-") as root:
            try:
                result = self.result = run_check(
                    self.kit_check,
                    parent.backend,
                    parent.probe,
                    profile,
                    parent.seed,
                    Path(root),
                    options,
                    self.config.getoption("checkpointer_session_layer"),
                    setup.reproduction,
                )
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

    def runtest(self) -> None:
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
        option = self.config.getoption
        if option("checkpointer_process"):
            parts = ["pytest", "--checkpointer-process", option("checkpointer_process")]
            if option("checkpointer_validate_protocol"):
                parts.append("--checkpointer-validate-protocol")
        else:
            parts = ["pytest", "--checkpointer", option("checkpointer")]
        suite = option("checkpointer_suite")
        if suite != DEFAULT_SUITE:
            parts += ["--checkpointer-suite", suite]
        if suite != "storage" and option("checkpointer_session_layer") != DEFAULT_SESSION_LAYER:
            parts += ["--checkpointer-session-layer", option("checkpointer_session_layer")]
        for pair in option("checkpointer_option"):
            parts += ["--checkpointer-option", pair]
        parts += ["--checkpointer-only", self.kit_check.name]
        parts += ["--checkpointer-profile", option("checkpointer_profile")]
        parts += ["--checkpointer-seed", str(self.config.stash[_SETUP].seed)]
        if self.result.reproduce is not None:
            parts += ["--checkpointer-reproduce", self.result.reproduce]
        return (shlex.join(parts),)

    def _verbose(self) -> bool:
        return self.config.get_verbosity() >= 2

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.kit_check.name}: {self.kit_check.summary}"


def _options(pairs: list[str]) -> dict[str, str]:
    try:
        return parse_options(pairs)
    except BackendLoadError as exc:
        raise pytest.UsageError(f"--checkpointer-option: {exc}") from exc


def _backend(config: pytest.Config) -> BackendRef | None:
    """The backend named by --checkpointer or --checkpointer-process (None: neither)."""
    name = config.getoption("checkpointer")
    process = config.getoption("checkpointer_process")
    validate = config.getoption("checkpointer_validate_protocol")
    if name and process:
        raise pytest.UsageError("give --checkpointer or --checkpointer-process, not both")
    if validate and not process:
        raise pytest.UsageError(
            "--checkpointer-validate-protocol checks a --checkpointer-process backend's messages"
        )
    try:
        if process:
            return process_backend(process, validate=validate)[0]
        return resolve_backend(name) if name else None
    except BackendLoadError as exc:
        flag = "--checkpointer-process" if process else "--checkpointer"
        raise pytest.UsageError(f"{flag}: {exc}") from exc


def _run_options(config: pytest.Config) -> dict[str, str]:
    """--checkpointer-option values, with what a --checkpointer-process backend needs."""
    options = _options(config.getoption("checkpointer_option"))
    process = config.getoption("checkpointer_process")
    if process:
        validate = config.getoption("checkpointer_validate_protocol")
        options |= process_backend(process, validate=validate)[1]
    return options


def _expected_failures(pairs: list[str]) -> dict[str, str]:
    """``RULE=REASON`` entries as {rule: reason}; a bare ``RULE`` gets a stock reason.
    Raises a one-line `pytest.UsageError` naming an id the catalog lacks."""
    xfail: dict[str, str] = {}
    for pair in pairs:
        text, _, reason = pair.partition("=")
        try:
            rule_id = check_rule_id(text.strip())
        except UnknownRuleError as exc:
            raise pytest.UsageError(f"--checkpointer-xfail: {exc}") from None
        reason = reason.strip() or "listed with --checkpointer-xfail"
        previous = xfail.get(rule_id)
        xfail[rule_id] = f"{previous}; {reason}" if previous else reason
    return xfail


def _reproduction(text: str | None, checks: list[Check]) -> Reproduction | None:
    """``--checkpointer-reproduce``, checked: a one-line `pytest.UsageError` for a blob
    the kit cannot replay or a selection of other than one check."""
    if text is None:
        return None
    try:
        reproduction = parse_reproduction(text)
    except ReproduceError as exc:
        raise pytest.UsageError(f"--checkpointer-reproduce: {exc}") from None
    if len(checks) != 1:
        raise pytest.UsageError(
            f"--checkpointer-reproduce replays one check, and {len(checks)} are selected: "
            "name it with --checkpointer-only, as the failure's replay command does"
        )
    return reproduction


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "checkpointspec_rule(rule_id): the kit rule a check verifies"
    )
    backend = _backend(config)
    if backend is None:
        return
    summary = config.getoption("checkpointer_summary")
    if summary is not None and (problem := unwritable(summary)) is not None:
        raise pytest.UsageError(f"--checkpointer-summary: {problem}")
    xfail = _expected_failures(config.getoption("checkpointer_xfail"))
    options = _run_options(config)
    try:
        probe = probe_backend(backend, options)
    except BackendLoadError as exc:
        raise pytest.UsageError(f"--checkpointer: {exc}") from exc
    try:
        checks = select_checks(
            config.getoption("checkpointer_only"), suite=config.getoption("checkpointer_suite")
        )
    except UnknownCheckError as exc:
        raise pytest.UsageError(f"--checkpointer-only: {exc}") from exc
    if any(is_session_check(c) for c in checks):
        try:
            load_session_layer(config.getoption("checkpointer_session_layer"))
        except BackendLoadError as exc:
            raise pytest.UsageError(f"--checkpointer-session-layer: {exc}") from exc
    reproduction = _reproduction(config.getoption("checkpointer_reproduce"), checks)
    seed = config.getoption("checkpointer_seed")
    workerinput = getattr(config, "workerinput", None)  # set on a pytest-xdist worker
    if seed is None and workerinput is not None:
        seed = workerinput.get(_WORKER_SEED)
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    config.stash[_SETUP] = _KitSetup(backend, probe, seed, tuple(checks), xfail, reproduction)
    if summary is not None and workerinput is None:
        config.pluginmanager.register(
            _SummaryWriter(config, Path(summary)), "checkpointspec-summary"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: every worker gets the controller's seed, so
    the run has one seed (the header's) whichever worker runs a check."""
    setup = node.config.stash.get(_SETUP, None)
    if setup is not None:
        node.workerinput[_WORKER_SEED] = setup.seed


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
                name=f"checkpointspec[{setup.backend.name}]",
                nodeid=f"checkpointspec[{setup.backend.name}]",  # not "::checkpointspec[...]"
                backend=setup.backend,
                probe=setup.probe,
                seed=setup.seed,
                checks=setup.checks,
                xfail=setup.xfail,
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


class _SummaryWriter:
    """Collects the checks' results from their setup reports and writes the Markdown
    summary when the session ends (registered on the controller only)."""

    def __init__(self, config: pytest.Config, path: Path) -> None:
        self.config = config
        self.path = path
        self.results: dict[str, CheckResult] = {}
        self.started = time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        encoded = getattr(report, _RESULT_ATTRIBUTE, None)
        if report.when == "setup" and isinstance(encoded, str):
            result = msgspec.json.decode(encoded, type=CheckResult)
            self.results[result.name] = result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        setup = self.config.stash[_SETUP]
        report = self._report(setup)
        try:
            self.path.write_text(render_summary(report), encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(
                f"ERROR: --checkpointer-summary: cannot write {self.path}: {exc.strerror or exc}\n"
            )
            # As in the CLI: a verdict stands; a pass whose summary was lost is not a pass.
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def _report(self, setup: _KitSetup) -> KitReport:
        ordered = tuple(self.results[c.name] for c in setup.checks if c.name in self.results)
        suite = self.config.getoption("checkpointer_suite")
        declared = tuple(sorted(c.value for c in setup.probe.capabilities))
        rules = summarise_rules(
            ordered,
            declared,
            setup.xfail,
            narrowed=len(ordered) != len(SUITES[suite]),
            rule_ids=rules_of_suite(suite) | {r.violated_rule for r in ordered if r.violated_rule},
        )
        uses_session = any(is_session_check(c) for c in setup.checks)
        return KitReport(
            schema_version=REPORT_SCHEMA_VERSION,
            backend=setup.backend.name,
            target=setup.backend.target,
            suite=suite,
            session_layer=(
                self.config.getoption("checkpointer_session_layer") if uses_session else None
            ),
            profile=self.config.getoption("checkpointer_profile"),
            seed=setup.seed,
            capabilities=declared,
            duration=time.perf_counter() - self.started,
            checks=ordered,
            rules=rules,
            warnings=tuple(w for r in ordered for w in r.warnings),
            exit_status=exit_status_for(rules, ordered),
            levels=judge_levels(rules, declared),
            expected_failures=dict(setup.xfail),
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    name = config.getoption("checkpointer") or config.getoption("checkpointer_process")
    if not name:
        return None
    suite = config.getoption("checkpointer_suite")
    header = f"checkpointspec: backend {name}, profile {config.getoption('checkpointer_profile')}"
    if suite != DEFAULT_SUITE:
        header += f", suite {suite}"
    if suite != "storage":
        header += f", session layer {config.getoption('checkpointer_session_layer')}"
    setup = config.stash.get(_SETUP, None)
    if setup is not None:
        header += f", seed {setup.seed}"
        if setup.xfail:
            header += f", xfail {', '.join(sorted(setup.xfail))}"
    return header
