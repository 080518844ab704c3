"""Running checks against a backend and collecting a `KitReport`.

`run_kit` is the one entry point the CLI, the pytest plugin and Python callers
share. Each check gets its own empty directory under a temporary root, its own
event loop, and the run's seed; with ``workers > 1`` checks run in separate
processes (spawned, so each starts with a clean interpreter).

How a check ends decides its status (`run_check`), and only evidence about the
backend may fail a rule:

- it returns: ``passed``; it raises `CheckSkipped`: ``skipped``;
- it raises `RuleViolation`: ``failed``, blaming the violation's rule;
- an exception the backend raised escapes it (every handle the kit opens notes
  those, see `checkpointspec.conformance.engines.provenance`): ``failed``,
  blaming the check's own rule, with the backend's traceback. Two exceptions:
  an `UnsupportedOperationError` for a capability the backend does not declare
  proves nothing about the check's rule: ``not_checked``, with the reason; one
  for a capability it does declare breaks that operation's own rule (a declared
  delete that refuses breaks DELETE-001, whichever check called it);
- any other exception is the kit's own (a bug in a check, an engine assertion,
  a worker that cannot start): ``error``, with its traceback, never a failure.

A failed or errored check's ``replay`` is the command that reruns it: the
check, the run's options, profile and seed, and for a failure found by
Hypothesis its reproduce blob (``--reproduce``, `CheckResult.reproduce`), which
replays exactly the failing example; ``replay_note`` says what of the check the
seed does not decide (`Check.replay_note`). See
`checkpointspec.conformance.engines.replay`.

The session suite checks a session layer on the backend (``session_layer``,
default ``checkpointspec.reference``). The layer's functions note the exceptions
they raise as the backend's handles do
(`checkpointspec.conformance.engines.session_layer`), so an exception the layer
raised fails the check's rule like one the backend raised. `run_kit` loads the
layer once before any check when the selection holds a session check: a layer
that does not import or lacks a name is a usage error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import TypeGuard

import msgspec

from ...backends.registry import (
    BackendLoadError,
    BackendRef,
    FactoryFailedError,
    process_backend,
    resolve_backend,
)
from ...spec import (
    CAPABILITY_REASONS,
    BackendContext,
    Capability,
    ExternalStorage,
    StoreHooks,
    UnsupportedOperationError,
)
from ..checks.base import Check
from ..engines.harness import CheckSkipped, Harness
from ..engines.profiles import DEFAULT_PROFILE, PROFILES, Profile
from ..engines.provenance import backend_operation, open_checkpointer
from ..engines.replay import (
    Replay,
    ReplayPassed,
    ReproduceError,
    Reproduction,
    parse_reproduction,
    reproduction_of,
)
from ..engines.session_layer import DEFAULT_SESSION_LAYER, load_session_layer
from ..engines.violations import RuleViolation
from .failures import backend_frames, full_traceback, hypothesis_lines, raised_at
from .levels import judge_levels
from .registry import (
    CHECKS_BY_NAME,
    DEFAULT_SUITE,
    SUITES,
    Suite,
    UnknownCheckError,
    is_session_check,
    rules_of_suite,
    select_checks,
)
from .report import (
    REPORT_SCHEMA_VERSION,
    CheckResult,
    KitReport,
    exit_status_for,
    summarise_rules,
)

__all__ = ["REPLAY_PASSED", "BackendProbe", "probe_backend", "run_check", "run_kit"]

REPLAY_PASSED = (
    "the recorded example (--reproduce) did not fail: the backend passes it now, or the "
    "blob was recorded for another check, backend or profile; only that example was run"
)
"""The reason of a check whose replayed example did not fail."""


class BackendProbe(msgspec.Struct, frozen=True):
    """What the kit learns by opening one handle: capabilities and optional hooks."""

    capabilities: frozenset[Capability]
    has_hooks: bool


def probe_backend(backend: BackendRef, options: dict[str, str] | None = None) -> BackendProbe:
    """Open and close one handle on a scratch store. Raises `BackendLoadError` if that
    fails: the module does not import, the factory raises, or what it returns is not a
    Checkpointer (the message names the members it lacks)."""
    factory = backend.load()
    scratch = Path(tempfile.mkdtemp(prefix="checkpointspec-probe-"))

    async def probe() -> BackendProbe:
        cp = await open_checkpointer(
            factory, BackendContext(path=scratch, options=dict(options or {}))
        )
        try:
            capabilities = frozenset(Capability(c) for c in cp.capabilities)
            return BackendProbe(capabilities, isinstance(cp, StoreHooks))
        finally:
            await cp.close()

    try:
        return asyncio.run(probe())
    except BackendLoadError:  # NotACheckpointerError among them
        raise
    except Exception as exc:
        raise FactoryFailedError(backend.target, exc) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _skip_reason(check: Check, probe: BackendProbe) -> str | None:
    missing = sorted(check.needs - probe.capabilities)
    if missing:
        return "; ".join(
            f"needs {c.name} ({CAPABILITY_REASONS[c]}), which the backend does not declare"
            for c in missing
        )
    if check.hooks and not probe.has_hooks:
        return (
            "needs StoreHooks (mark_newer_schema, damage_store), which the backend does not offer"
        )
    return None


def _replay(
    backend: BackendRef,
    check: Check,
    profile: Profile,
    seed: int,
    session_target: str,
    options: dict[str, str] | None = None,
) -> str:
    """The command that reruns ``check`` as this run ran it: the same backend, options,
    profile and seed (`_with_reproduction` adds a failure's blob)."""
    # A name is what the command line said: module:function, a built-in, or a
    # ``--process`` backend's options, quoted already.
    command = f"checkpointspec run {backend.name}"
    if is_session_check(check):
        command += " --suite session"
        if session_target != DEFAULT_SESSION_LAYER:
            command += f" --session-layer {shlex.quote(session_target)}"
    for key, value in sorted(_given_options(backend, options or {}).items()):
        command += f" --option {shlex.quote(f'{key}={value}')}"
    return f"{command} --only {check.name} --profile {profile.name} --seed {seed}"


def _given_options(backend: BackendRef, options: dict[str, str]) -> dict[str, str]:
    """The run's ``--option``s, without those a ``--process`` backend adds itself (its
    command, schema validation), which its name already says."""
    command = options.get("process")
    if command is None:
        return options
    try:
        own_ref, own = process_backend(command, validate="validate_protocol" in options)
    except BackendLoadError:
        return options
    if own_ref != backend:
        return options
    return {key: value for key, value in options.items() if own.get(key) != value}


def _with_reproduction(
    result: CheckResult, check: Check, exc: BaseException, replayed: Reproduction | None
) -> CheckResult:
    """A failed or errored ``result`` with its reproduce blob (the one Hypothesis
    recorded, or the one replayed) in the report and the replay command, and the
    check's `Check.replay_note` when the replay cannot be exact."""
    found = reproduction_of(exc) or replayed
    if found is None:
        return msgspec.structs.replace(result, replay_note=check.replay_note)
    return msgspec.structs.replace(
        result,
        reproduce=str(found),
        replay=f"{result.replay} --reproduce {found}",
        replay_note=check.replay_note,
    )


def run_check(
    check: Check,
    backend: BackendRef,
    probe: BackendProbe,
    profile: Profile,
    seed: int,
    root: Path,
    options: dict[str, str] | None = None,
    session_target: str = DEFAULT_SESSION_LAYER,
    reproduce: Reproduction | None = None,
) -> CheckResult:
    """Run one check in this process and report how it went (see the module docstring).

    ``session_target`` is the session layer a session check reaches through
    `Harness.session`. ``reproduce`` replays one recorded failing example of the
    check's Hypothesis run instead of searching (``--reproduce``): a replay that
    does not fail is ``passed``, with `REPLAY_PASSED` as its reason. Raises
    `ReproduceError` when the check runs no Hypothesis test and ends without
    failing."""
    started = time.perf_counter()
    replay = _replay(backend, check, profile, seed, session_target, options)
    reason = _skip_reason(check, probe)
    if reason is not None:
        return CheckResult(check.name, check.rules, "skipped", 0.0, reason=reason)
    replaying = Replay(reproduce) if reproduce is not None else None
    workdir: Path | None = None
    harness_made: Harness | None = None
    try:
        workdir = Path(tempfile.mkdtemp(prefix=f"{check.rule_id}-", dir=root))
        harness = harness_made = Harness(
            backend,
            backend.load(),
            workdir,
            probe.capabilities,
            profile,
            seed,
            options,
            session_target=session_target,
            replay=replaying,
        )
        if inspect.iscoroutinefunction(check.func):
            asyncio.run(_run_async(check, harness))
        else:
            check.func(harness)
    except CheckSkipped as skip:
        return CheckResult(
            check.name, check.rules, "skipped", time.perf_counter() - started, reason=str(skip)
        )
    except ReplayPassed:
        return CheckResult(
            check.name,
            check.rules,
            "passed",
            time.perf_counter() - started,
            reason=REPLAY_PASSED,
        )
    except Exception as exc:
        judged = _judge(check, exc, probe, time.perf_counter() - started, replay)
        used = replaying.reproduction if replaying is not None and replaying.used else None
        return _with_reproduction(judged, check, exc, used)
    finally:
        if workdir is not None:
            _drop_external_stores(harness_made, workdir)
            shutil.rmtree(workdir, ignore_errors=True)
    if replaying is not None and not replaying.used:
        raise ReproduceError(
            f"{check.name} draws no Hypothesis examples, so there is no blob to replay: "
            "replay it with --seed alone"
        )
    return CheckResult(
        check.name,
        check.rules,
        "passed",
        time.perf_counter() - started,
        detail="; ".join(harness.measured),
        warnings=tuple(harness.warnings),
    )


def _drop_external_stores(harness: Harness | None, workdir: Path) -> None:
    """Let a backend that keeps stores outside their directories (`ExternalStorage`, e.g.
    a database server) drop the check's stores. A failure leaves them to the backend's
    own clean-up; it says nothing about the check, so it is not reported as its result."""
    specimen = harness.specimen if harness is not None else None
    if specimen is None or not isinstance(specimen, ExternalStorage):
        return
    with contextlib.suppress(Exception):
        asyncio.run(specimen.drop_stores(workdir))


def _leaves(exc: BaseException) -> list[BaseException]:
    """``exc``, or every exception inside it if it is a group (e.g. Hypothesis' FlakyFailure)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


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


_REFUSAL_BREAKS: dict[Capability, str] = {
    Capability.DELETE: "DELETE-001",
    Capability.LIST: "LIST-001",
    Capability.TRUNCATE: "TRUNC-001",
    Capability.GENERATION: "GEN-001",
}
"""The rule an operation breaks by refusing (UnsupportedOperationError) although its
capability is declared: that, not the rule of whichever check called it, is broken."""


def _blamed_rule(check: Check, raised: BaseException) -> str:
    if isinstance(raised, UnsupportedOperationError):
        try:
            return _REFUSAL_BREAKS.get(Capability(raised.capability), check.rule_id)
        except ValueError:
            pass
    return check.rule_id


def _judge(
    check: Check, exc: Exception, probe: BackendProbe, duration: float, replay: str
) -> CheckResult:
    """The result of a check that raised ``exc``.

    ``detail`` is the failure panel (`checkpointspec.conformance.running.failures`): the
    finding first, then Hypothesis' report translated (a failure that did not
    reproduce on replay, the failing steps), then for an exception the backend
    raised its own frames; ``traceback`` holds the full traceback, the kit's frames
    included, shown on request only (``--verbose``).
    """
    leaves = _leaves(exc)
    full = full_traceback(exc)
    violation = next((e for e in leaves if isinstance(e, RuleViolation)), None)
    if violation is not None:
        detail = "\n".join([str(violation), *hypothesis_lines(exc, violation)])
        return CheckResult(
            check.name,
            check.rules,
            "failed",
            duration,
            violated_rule=violation.rule_id,
            detail=detail,
            replay=replay,
            traceback=full,
        )
    if any(backend_operation(e) is None for e in leaves):
        kit_error = next(e for e in leaves if backend_operation(e) is None)
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
    raised = evidence[0]
    operation = backend_operation(raised) or ""
    # The session layer's functions note their exceptions as "session layer NAME".
    who = "the session layer" if operation.startswith("session layer ") else "the backend"
    operation = operation.removeprefix("session layer ")
    lines = [f"{who} raised {type(raised).__name__} from {operation}: {raised}"]
    frames = backend_frames(raised)
    if frames:
        lines.append(f"where {who} raised it:\n{frames}")
    lines.extend(hypothesis_lines(exc, raised))
    return CheckResult(
        check.name,
        check.rules,
        "failed",
        duration,
        violated_rule=_blamed_rule(check, raised),
        detail="\n".join(lines),
        replay=replay,
        traceback=full,
    )


async def _run_async(check: Check, harness: Harness) -> None:
    try:
        result = check.func(harness)
        assert inspect.isawaitable(result)
        await result
    finally:
        await harness.close_all()


def _run_in_worker(
    name: str,
    backend: BackendRef,
    probe: BackendProbe,
    profile: Profile,
    seed: int,
    root: str,
    options: dict[str, str],
    session_target: str,
) -> CheckResult:
    return run_check(
        CHECKS_BY_NAME[name], backend, probe, profile, seed, Path(root), options, session_target
    )


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


def run_kit(
    backend_name: str | None,
    *,
    process: str | None = None,
    validate_protocol: bool = False,
    profile: str | Profile = DEFAULT_PROFILE,
    seed: int | None = None,
    workers: int = 1,
    only: Iterable[str] = (),
    expected_failures: Iterable[str] | Mapping[str, str] = (),
    options: dict[str, str] | None = None,
    suite: Suite = DEFAULT_SUITE,
    session_layer: str = DEFAULT_SESSION_LAYER,
    on_result: Callable[[CheckResult], None] | None = None,
    on_start: Callable[[list[Check]], None] | None = None,
    on_check_start: Callable[[Check], None] | None = None,
    reproduce: str | None = None,
) -> KitReport:
    """Run the kit against ``backend_name`` (a built-in name or ``module:function``),
    or with ``process`` (and no name) against a backend in another process that speaks
    the stdio protocol, every message checked against its schema with ``validate_protocol``.

    ``on_start`` gets the selected checks before any runs (every one of them ends
    in exactly one ``on_result`` call, skipped ones included); ``on_check_start``
    gets each check as it starts, ``on_result`` its result as it ends. With
    ``workers > 1`` at most ``workers`` checks are started and not yet ended.

    ``reproduce`` (``HYPOTHESIS_VERSION:BASE64``, from a failure's replay command)
    replays that one failing example of the one selected check: no search, no
    shrinking, no database (`checkpointspec.conformance.engines.replay`).

    ``suite`` picks the checks (``storage``, ``session`` or ``all``; ``only``
    narrows them further); the report covers that suite's rules and the levels
    they attain. ``expected_failures`` are the ``--xfail`` rules, or a mapping of
    each to the reason it is expected to fail. Session checks
    run ``session_layer`` (``MODULE`` or ``MODULE:OBJECT``) on the backend.

    Raises `BackendLoadError` for usage errors: an unknown backend or suite, a
    factory that cannot be imported, raises or returns something that is not a
    Checkpointer, a selection matching no check, a session layer that cannot be
    loaded (`SessionLayerError`) when a session check is selected; with
    ``reproduce``, a blob that does not decode or was recorded by another Hypothesis
    version, a selection of more or less than one check, a check that runs no
    Hypothesis test, or a blob that does not fit the check's examples.
    """
    started = time.perf_counter()
    chosen = PROFILES[profile] if isinstance(profile, str) else profile
    run_seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    if suite not in SUITES:
        raise BackendLoadError(f"unknown suite {suite!r}: use one of {', '.join(SUITES)}")
    try:
        reproduction = parse_reproduction(reproduce) if reproduce is not None else None
    except ReproduceError as exc:
        raise BackendLoadError(f"--reproduce: {exc}") from None
    options = dict(options or {})
    if process is not None:
        backend, own = process_backend(process, validate=validate_protocol)
        options |= own
    elif backend_name is None:
        raise BackendLoadError("name a backend, or give --process COMMAND")
    else:
        backend = resolve_backend(backend_name)
    probe = probe_backend(backend, options)
    try:
        selected = select_checks(only, suite=suite)
    except UnknownCheckError as exc:
        raise BackendLoadError(str(exc)) from exc
    if reproduction is not None and len(selected) != 1:
        raise BackendLoadError(
            f"--reproduce replays one check, and {len(selected)} are selected: "
            "name it with --only, as the failure's replay command does"
        )
    uses_session = any(is_session_check(c) for c in selected)
    if uses_session:
        load_session_layer(session_layer)  # a usage error now, not one error per check
    if on_start is not None:
        on_start(selected)
    root = Path(tempfile.mkdtemp(prefix="checkpointspec-"))
    results: dict[str, CheckResult] = {}
    opts = dict(options or {})

    def begin(c: Check) -> None:
        if on_check_start is not None:
            on_check_start(c)

    def end(result: CheckResult) -> None:
        results[result.name] = result
        if on_result is not None:
            on_result(result)

    try:
        if reproduction is not None:
            (c,) = selected
            begin(c)
            try:
                replayed = run_check(
                    c, backend, probe, chosen, run_seed, root, opts, session_layer, reproduction
                )
            except ReproduceError as exc:
                raise BackendLoadError(f"--reproduce: {exc}") from None
            end(replayed)
        elif workers > 1:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                # Submitting no more than ``workers`` at a time keeps "started" true:
                # a submitted check is one a worker process is running.
                waiting = list(reversed(selected))
                running: dict[Future[CheckResult], Check] = {}
                while waiting or running:
                    while waiting and len(running) < workers:
                        c = waiting.pop()
                        begin(c)
                        running[
                            pool.submit(
                                _run_in_worker,
                                c.name,
                                backend,
                                probe,
                                chosen,
                                run_seed,
                                str(root),
                                opts,
                                session_layer,
                            )
                        ] = c
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        c = running.pop(future)
                        try:
                            result = future.result()
                        except Exception as exc:  # the worker process died or could not start
                            result = _worker_failed(c, exc)
                        end(result)
        else:
            for c in selected:
                begin(c)
                end(run_check(c, backend, probe, chosen, run_seed, root, opts, session_layer))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ordered = tuple(results[c.name] for c in selected)
    xfail = (
        dict(expected_failures)
        if isinstance(expected_failures, Mapping)
        else dict.fromkeys(expected_failures, "")
    )
    declared = tuple(sorted(c.value for c in probe.capabilities))
    rules = summarise_rules(
        ordered,
        declared,
        xfail,
        narrowed={c.name for c in selected} != {c.name for c in SUITES[suite]},
        # A check may prove a rule of the other suite broken (a session check meeting a
        # storage violation): that verdict is listed too, never dropped.
        rule_ids=rules_of_suite(suite) | {r.violated_rule for r in ordered if r.violated_rule},
    )
    warnings = tuple(w for r in ordered for w in r.warnings)
    return KitReport(
        schema_version=REPORT_SCHEMA_VERSION,
        backend=backend.name,
        target=backend.target,
        suite=suite,
        session_layer=session_layer if uses_session else None,
        profile=chosen.name,
        seed=run_seed,
        capabilities=declared,
        duration=time.perf_counter() - started,
        checks=ordered,
        rules=rules,
        warnings=warnings,
        exit_status=exit_status_for(rules, ordered),
        levels=judge_levels(rules, declared),
        expected_failures=xfail,
    )
