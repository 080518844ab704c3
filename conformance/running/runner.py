"""Running checks against a backend and collecting a `KitReport`.

`run_kit(run)` is the one entry point the CLI, the pytest plugin and Python callers
share; ``run`` is a `KitRun`, the whole run as one value, which `plan_run`
builds from the settings a user gave (re-exported here with `probe_backend`).
Each check gets its own empty directory under a temporary root, its own event
loop, and the run's seed; with ``workers > 1`` checks run in separate processes
(spawned, so each starts with a clean interpreter), each handed the same run.
`report_of` turns the results into the `KitReport`, for the CLI and the pytest
plugin alike.

How a check ends decides its status (`run_check`), and only evidence about the
backend may fail a rule:

- it returns: ``passed``, or ``incomplete`` when the run's time cap stopped it
  before its profile's counts (or before it started: it is then not run), its
  reason saying how far it got; it raises `CheckSkipped`: ``skipped``; it raises
  `NothingExercised` (its fault never happened): ``not_checked``, with the reason;
- it raises `RuleViolation`: ``failed``, blaming the violation's rule;
- an exception the backend raised escapes it (every handle the kit opens notes
  those, see `checkpointspec.conformance.engines.target.provenance`): ``failed``,
  blaming the check's own rule, with the backend's traceback. Either is made a
  `Finding` value by `checkpointspec.conformance.running.findings.findings_from`,
  which the report carries whole. Two exceptions:
  an `UnsupportedOperationError` for a capability the backend does not declare
  proves nothing about the check's rule: ``not_checked``, with the reason; one
  for a capability it does declare breaks that operation's own rule (a declared
  delete that refuses breaks DELETE-001, whichever check called it);
- Hypothesis reports that runs of one example went differently (a `Flaky`: the
  backend answered the same calls differently on a re-run): each rule violation
  or exception of the backend's that those runs raised is judged as above, every
  violation a finding of its own rule (`run_failures`, `violations_in`); a `Flaky`
  whose runs raised nothing is ``not_checked``, its reason naming the call that
  answered differently and both answers where a machine's transcripts show it
  (`answered_differently`), with Hypothesis' account of the runs as its detail. Its search could not complete, so the check's other rules
  are not checked by it (they pass only where another check passes them);
- any other exception is the kit's own (a bug in a check, an engine assertion,
  a worker that cannot start): ``error``, with its traceback, never a failure.

A failed or errored check's ``replay`` is the command that reruns it
(`KitRun.replay_command`): the check, the run's options, profile and seed, and for a failure found by
Hypothesis its reproduce blob (``--reproduce``, `CheckResult.reproduce`), which
replays exactly the failing example; ``replay_note`` says what of the check the
seed does not decide (`Check.replay_note`). See
`checkpointspec.conformance.engines.search.replay`.

The session suite checks a session layer on the backend (``session_layer``,
default ``checkpointspec.reference``). The layer's functions note the exceptions
they raise as the backend's handles do
(`checkpointspec.conformance.engines.target.session_layer`), so an exception the layer
raised fails the check's rule like one the backend raised. `plan_run` loads the
layer once before any check when the selection holds a session check: a layer
that does not import or lacks a name is a usage error.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import active_children, get_context
from pathlib import Path
from typing import TypeGuard

import msgspec
from hypothesis.errors import Flaky

from ...backends.registry import BackendLoadError
from ...spec import (
    Capability,
    UnsupportedOperationError,
)
from ..checks.base import Check
from ..engines.processes.groups import end_with_parent
from ..engines.run.frameworks import framework_of_suite
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised
from ..engines.run.kit_run import BackendProbe, KitRun
from ..engines.search.budget import Allowance, format_seconds
from ..engines.search.exploration import run_failures, violations_in
from ..engines.search.replay import (
    HYPOTHESIS_VERSION,
    ReplayPassed,
    ReproduceError,
    Reproduction,
    reproduction_of,
)
from ..engines.search.transcripts import answered_differently
from ..engines.target.provenance import open_checkpointer, raised_by
from ..engines.target.witness import note_divergence
from .failures import ANSWERED_DIFFERENTLY, full_traceback, hypothesis_lines, raised_at
from .findings import findings_from, with_findings
from .levels import judge_levels
from .plan import drop_or_say_why, drop_through_factory, selected_checks, skip_reason
from .registry import CHECKS_BY_NAME, is_session_check
from .report import (
    KIT_VERSION,
    REPORT_SCHEMA_VERSION,
    CheckResult,
    KitReport,
    ReplayKey,
    exit_status_for,
)
from .roots import judge
from .slices import BudgetPlan, longest_first

__all__ = [
    "REPLAY_PASSED",
    "RunListener",
    "replay_key_of",
    "report_of",
    "run_check",
    "run_kit",
]

REPLAY_PASSED = (
    "the recorded example (--reproduce) did not fail: the backend passes it now, or the "
    "blob was recorded for another check, backend or profile; only that example was run"
)
"""The reason of a check whose replayed example did not fail."""


def _with_reproduction(
    result: CheckResult, check: Check, found: Reproduction | None
) -> CheckResult:
    """An errored or not checked ``result`` with the reproduce blob ``found`` (the one
    Hypothesis recorded, or the one replayed) in the report and the replay command,
    and the check's `Check.replay_note` when the replay cannot be exact."""
    if found is None:
        return msgspec.structs.replace(result, replay_note=check.replay_note)
    return msgspec.structs.replace(
        result,
        reproduce=str(found),
        replay=f"{result.replay} --reproduce {found}",
        replay_note=check.replay_note,
    )


def run_check(
    check: Check, run: KitRun, root: Path | None = None, allowance: Allowance | None = None
) -> CheckResult:
    """Run one check of ``run`` in this process and report how it went (see the module
    docstring). The check's store directories are made in a fresh directory under
    ``root`` (default: the system's temporary directory) and removed afterwards.
    ``allowance`` is what it may take of the run's time cap (`BudgetPlan`; None: no
    cap): a check the cap stops before its profile's counts, having found nothing,
    is ``incomplete`` (its reason says how far it got), and one whose cap was reached
    before it started is not started (``incomplete`` too).

    With ``run.reproduction`` the check's Hypothesis run replays that one recorded
    failing example instead of searching (``--reproduce``): a replay that does not
    fail is ``passed``, with `REPLAY_PASSED` as its reason. Raises `ReproduceError`
    when the check runs no Hypothesis test and ends without failing."""
    started = time.perf_counter()
    reason = skip_reason(check, run.probe)
    if reason is not None:
        return CheckResult(check.name, check.rules, "skipped", 0.0, reason=reason)
    if allowance is not None and allowance.cap is not None and allowance.cap <= 0:
        return _stopped_at_cap(check, run, started=False)
    workdir = Path(tempfile.mkdtemp(prefix=f"{check.rule_id}-", dir=root))
    made: list[Harness] = []
    try:
        result = _run_in(check, run, workdir, allowance, made, started)
    finally:
        left_behind = _drop_external_stores(run, made[0] if made else None, workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    if left_behind:
        result = msgspec.structs.replace(result, left_behind=left_behind)
    return result


def _run_in(
    check: Check,
    run: KitRun,
    workdir: Path,
    allowance: Allowance | None,
    made: list[Harness],
    started: float,
) -> CheckResult:
    """`run_check`'s run of ``check`` in ``workdir``; the harness it made goes in ``made``."""
    harness_made: Harness | None = None
    try:
        harness = harness_made = Harness(run, workdir, allowance)
        made.append(harness)
        if inspect.iscoroutinefunction(check.func):
            asyncio.run(_run_async(check, harness))
        else:
            check.func(harness)
    except CheckSkipped as skip:
        return CheckResult(
            check.name, check.rules, "skipped", time.perf_counter() - started, reason=str(skip)
        )
    except NothingExercised as idle:
        unexercised = CheckResult(
            check.name,
            check.rules,
            "not_checked",
            time.perf_counter() - started,
            reason=str(idle),
            detail="; ".join(harness_made.measured if harness_made is not None else ()),
        )
        return _with_slice(with_findings(unexercised, check, run, harness_made), harness_made)
    except ReplayPassed:
        return CheckResult(
            check.name,
            check.rules,
            "passed",
            time.perf_counter() - started,
            reason=REPLAY_PASSED,
        )
    except Exception as exc:
        if harness_made is not None:
            note_divergence(exc, harness_made.witness.first)
        replay = run.replay_command(check.name, session_check=is_session_check(check))
        found = reproduction_of(exc) or _replayed(harness_made)
        judged = _judge(check, exc, run.probe, time.perf_counter() - started, replay, found)
        # A failure's blob and replay are its findings'; a kit error keeps them itself.
        ended = judged if judged.findings else _with_reproduction(judged, check, found)
        return _with_slice(with_findings(ended, check, run, harness_made), harness_made)
    if harness.replay is not None and not harness.replay.used:
        raise ReproduceError(
            f"{check.name} draws no Hypothesis examples, so there is no blob to replay: "
            "replay it with --seed alone"
        )
    capped = harness.slice.incomplete
    passed = CheckResult(
        check.name,
        check.rules,
        "incomplete" if capped else "passed",
        time.perf_counter() - started,
        reason=harness.slice.coverage() if capped else "",
        detail="; ".join([*harness.measured, *filter(None, [harness.slice.coverage()])]),
        warnings=tuple(w.text for w in harness.warnings),
        warned=tuple(harness.warnings),
        kit_checked=harness.kit_checked,
    )
    return _with_slice(with_findings(passed, check, run, harness), harness)


def _with_slice(result: CheckResult, harness: Harness | None) -> CheckResult:
    """``result`` with what was left of the cap when its check started, and whether the
    cap (or a shrinking's share) left anything out."""
    if harness is None or harness.slice.seconds is None:
        return result
    return msgspec.structs.replace(
        result, budget=harness.slice.seconds, cut_short=harness.slice.cut_short
    )


def _replayed(harness: Harness | None) -> Reproduction | None:
    """The recorded example a check replayed (``--reproduce``), if it got that far."""
    replaying = harness.replay if harness is not None else None
    return replaying.reproduction if replaying is not None and replaying.used else None


def _drop_external_stores(run: KitRun, harness: Harness | None, workdir: Path) -> str:
    """Let a backend that keeps stores outside their directories (`ExternalStorage`, e.g.
    a database server) drop the check's stores, through the first handle the check
    opened, or one opened for it when the check opened none itself (a model-based
    machine's per-example stores, a worker's); a framework's store through its factory
    (`DropsStores`). "" when that worked or was not needed;
    else what failed, which the check's result keeps (`CheckResult.left_behind`): it
    says nothing about the rules, but a gate must say what it left on the server."""
    if not run.probe.external_storage:
        return ""
    if framework_of_suite(run.suite) is not None:  # the factory drops them (DropsStores)
        try:
            return asyncio.run(drop_through_factory(run.target, workdir))
        except Exception as exc:
            return f"the stores could not be dropped: {type(exc).__name__}: {exc}"
    specimen = harness.specimen if harness is not None else None

    async def drop() -> str:
        handle = specimen
        if handle is None:
            target = run.target
            # The contract's path already exists (BackendContext): make it so here too.
            spare = workdir / "dropping-the-check-s-stores"
            spare.mkdir(exist_ok=True)
            handle = await open_checkpointer(target.factory(), target.context(spare))
            await handle.close()
        return await drop_or_say_why(handle, workdir)

    try:
        return asyncio.run(drop())
    except Exception as exc:
        return f"the stores could not be dropped: {type(exc).__name__}: {exc}"


def _refused_undeclared(
    error: BaseException, declared: frozenset[Capability]
) -> TypeGuard[UnsupportedOperationError]:
    """True for an `UnsupportedOperationError` naming a capability the backend does not declare."""
    if not isinstance(error, UnsupportedOperationError):
        return False
    try:
        return Capability(error.capability) not in declared
    except ValueError:  # not a capability of the contract: a core operation refused
        return False


def _judge(
    check: Check,
    exc: Exception,
    probe: BackendProbe,
    duration: float,
    replay: str,
    found: Reproduction | None,
) -> CheckResult:
    """The result of a check that raised ``exc``; ``replay`` reruns the check, and
    ``found`` is the failing example Hypothesis recorded (or the one replayed), if any.

    A failure holds the findings of the evidence (`findings_from`: the violation, or
    what the backend raised), each with its failure panel
    (`checkpointspec.conformance.running.failures`); `with_findings` makes the first
    the result's headline. A kit error's ``detail`` is its panel. ``traceback``
    holds the full traceback, the kit's frames included, shown on request only
    (``--verbose``).
    """
    leaves = run_failures(exc)
    full = full_traceback(exc)
    violations = violations_in(exc)
    if violations:
        return CheckResult(
            check.name,
            check.rules,
            "failed",
            duration,
            findings=tuple(
                finding
                for violation in violations
                for finding in findings_from(check, violation, exc, replay, found)
            ),
            traceback=full,
        )
    if not leaves and isinstance(exc, Flaky):
        difference = answered_differently(exc)
        which = f" ({difference.sentence()})" if difference is not None else ""
        return CheckResult(
            check.name,
            check.rules,
            "not_checked",
            duration,
            reason=f"{ANSWERED_DIFFERENTLY}{which}; no run of it broke a rule, so the search "
            "stopped there",
            detail="\n".join(hypothesis_lines(exc)),
            replay=replay,
            traceback=full,
        )
    if any(raised_by(e) is None for e in leaves):
        kit_error = next(e for e in leaves if raised_by(e) is None)
        where = raised_at(kit_error)
        return CheckResult(
            check.name,
            check.rules,
            "error",
            duration,
            reason=f"the kit raised {type(kit_error).__name__}: {kit_error} "
            "(a bug in the kit or its setup, not evidence against the backend)",
            detail="\n".join(
                [
                    f"{type(kit_error).__name__}: {kit_error}",
                    *([f"raised at {where}"] if where else []),
                    *hypothesis_lines(exc, kit_error),
                ]
            ),
            replay=replay,
            traceback=full,
        )
    refusals = [e for e in leaves if _refused_undeclared(e, probe.capabilities)]
    evidence = [e for e in leaves if e not in refusals]
    if not evidence:
        refusal = refusals[0]
        return CheckResult(
            check.name,
            check.rules,
            "not_checked",
            duration,
            reason=f"the backend refuses {refusal.operation} (UnsupportedOperationError), "
            "which this check needs",
        )
    return CheckResult(
        check.name,
        check.rules,
        "failed",
        duration,
        findings=findings_from(check, evidence[0], exc, replay, found),
        traceback=full,
    )


async def _run_async(check: Check, harness: Harness) -> None:
    try:
        result = check.func(harness)
        assert inspect.isawaitable(result)
        await result
    finally:
        await harness.close_all()


def _run_in_worker(name: str, run: KitRun, root: str, allowance: Allowance | None) -> CheckResult:
    """`run_check` in a worker process, which finds the check by its name."""
    return run_check(CHECKS_BY_NAME[name], run, Path(root), allowance)


def _worker_failed(check: Check, exc: Exception) -> CheckResult:
    return CheckResult(
        check.name,
        check.rules,
        "error",
        0.0,
        reason=f"the process running the check failed: {type(exc).__name__}: {exc}",
        detail=f"{type(exc).__name__}: {exc}",
        traceback=full_traceback(exc),
    )


class RunListener:
    """What `run_kit` tells as it goes (the CLI's progress bar); every method does
    nothing here, so a listener overrides only what it follows."""

    def selected(self, checks: list[Check]) -> None:
        """The selected checks, before any runs: each ends in one `finished` call."""

    def started(self, check: Check) -> None:
        """A check starts (with workers, it is handed to a worker process)."""

    def finished(self, result: CheckResult) -> None:
        """A check ended, skipped ones included."""


def run_kit(run: KitRun, listener: RunListener | None = None) -> KitReport:
    """Run the checks of ``run`` (`checkpointspec.conformance.running.plan.plan_run`
    builds it) and report on its suite's rules and the levels they attain.

    Each check runs in a fresh directory under one temporary root, removed at the
    end; with ``run.workers > 1`` at most that many run at once, each in a spawned
    process, and ``listener`` hears of each as it starts and ends.

    Raises `BackendLoadError` when ``run.reproduction`` cannot be replayed by its
    check: the check runs no Hypothesis test, or the blob does not fit its examples.
    """
    started = time.perf_counter()
    told = listener or RunListener()
    checks = selected_checks(run)
    told.selected(checks)
    results: dict[str, CheckResult] = {}
    root = Path(tempfile.mkdtemp(prefix="checkpointspec-"))
    slices = BudgetPlan(run, checks)
    try:
        for result in _results(run, checks, root, told, slices):
            results[result.name] = result
            told.finished(result)
    except ReproduceError as exc:
        raise BackendLoadError(f"--reproduce: {exc}") from None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report_of(run, checks, results, time.perf_counter() - started)


def _results(
    run: KitRun, checks: list[Check], root: Path, listener: RunListener, slices: BudgetPlan
) -> Iterator[CheckResult]:
    """The result of each check as it ends. A replayed example runs here, in this process."""
    if run.workers > 1 and run.reproduction is None:
        yield from _in_workers(run, checks, root, listener, slices)
        return
    for check in checks:
        listener.started(check)
        yield run_check(check, run, root, slices.allowance_for(check))


def cap_grace(budget: float) -> float:
    """How long after the run's cap a check still running in a worker process is waited
    for before it is stopped: a tenth of the cap, between 5 and 30 s (what is under way
    at the cap finishes within it, a backend that stopped answering does not)."""
    return min(30.0, max(5.0, budget / 10))


def _stopped_at_cap(check: Check, run: KitRun, started: bool) -> CheckResult:
    """The result of ``check`` when the run's cap ended it (``started``) or came first."""
    cap = format_seconds(run.budget or 0)
    reason = (
        f"stopped: it was still running {format_seconds(cap_grace(run.budget or 0))} after "
        f"the run's time cap ({cap}), waiting for the backend"
        if started
        else f"not started: the run reached its time cap ({cap}) first"
    )
    return CheckResult(check.name, check.rules, "incomplete", 0.0, reason=reason, cut_short=True)


def _in_workers(
    run: KitRun, checks: list[Check], root: Path, listener: RunListener, slices: BudgetPlan
) -> Iterator[CheckResult]:
    """The checks run in ``run.workers`` spawned processes (a clean interpreter each).

    The cap holds whatever the backend does: checks still running `cap_grace` after
    it (a backend that stopped answering) are stopped, their worker processes killed,
    and are incomplete, as are the checks not started yet."""
    pool = ProcessPoolExecutor(
        max_workers=run.workers,
        mp_context=get_context("spawn"),
        initializer=end_with_parent,
        initargs=(os.getpid(),),
    )
    # Submitting no more than ``workers`` at a time keeps "started" true: a
    # submitted check is one a worker process is running.
    waiting = list(reversed(longest_first(checks, run)))
    running: dict[Future[CheckResult], Check] = {}
    try:
        while waiting or running:
            while waiting and len(running) < run.workers:
                check = waiting.pop()
                listener.started(check)
                given = slices.allowance_for(check)
                running[pool.submit(_run_in_worker, check.name, run, str(root), given)] = check
            left = slices.left()
            timeout = None if left is None or run.budget is None else left + cap_grace(run.budget)
            done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                for child in active_children():
                    child.kill()
                yield from (_stopped_at_cap(c, run, started=True) for c in running.values())
                yield from (_stopped_at_cap(c, run, started=False) for c in reversed(waiting))
                return
            for future in done:
                check = running.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # the worker process died or could not start
                    result = _worker_failed(check, exc)
                yield result
    finally:
        pool.shutdown(wait=not running, cancel_futures=True)


def report_of(
    run: KitRun,
    checks: Sequence[Check],
    results: Mapping[str, CheckResult],
    duration: float,
) -> KitReport:
    """The report of ``run`` over its selected ``checks``, from the ``results`` of those
    that ran (pytest may deselect some: the run is then narrowed, as by ``--only``).
    The CLI's report and the pytest plugin's summary are both this."""
    declared = tuple(sorted(c.value for c in run.probe.capabilities))
    ran, findings, roots, rules, defects = judge(
        [results[c.name] for c in checks if c.name in results],
        run.suite,
        declared,
        run.expected_failures,
    )
    uses_session = any(is_session_check(c) for c in checks)
    return KitReport(
        schema_version=REPORT_SCHEMA_VERSION,
        backend=run.backend.name,
        target=run.backend.target,
        suite=run.suite,
        session_layer=run.session_layer if uses_session else None,
        profile=run.profile.name,
        seed=run.seed,
        capabilities=declared,
        duration=duration,
        checks=ran,
        rules=rules,
        warnings=tuple(w for r in ran for w in r.warnings),
        exit_status=exit_status_for(rules, ran, accept_incomplete=run.accept_incomplete),
        levels=judge_levels(rules, declared),
        expected_failures=dict(run.expected_failures),
        findings=findings,
        roots=roots,
        defects=defects,
        shard=f"{run.shard[0]}/{run.shard[1]}" if run.shard is not None else None,
        budget=run.budget,
        accept_incomplete=run.accept_incomplete,
        ci=run.ci,
        left_behind=(
            *([f"the probe's store: {run.probe.left_behind}"] if run.probe.left_behind else []),
            *(f"{c.name}: {c.left_behind}" for c in ran if c.left_behind),
        ),
        replay_key=replay_key_of(run, declared, uses_session),
    )


def replay_key_of(run: KitRun, declared: tuple[str, ...], uses_session: bool) -> ReplayKey:
    """What fixes ``run``'s work (`ReplayKey`): the kit's and Hypothesis' versions, the
    profile, seed and cap, the backend as loaded and what it declared."""
    return ReplayKey(
        kit_version=KIT_VERSION,
        hypothesis_version=HYPOTHESIS_VERSION,
        profile=run.profile.name,
        seed=run.seed,
        budget=run.budget,
        backend=run.backend.target,
        capabilities=declared,
        suite=run.suite,
        session_layer=run.session_layer if uses_session else None,
    )
