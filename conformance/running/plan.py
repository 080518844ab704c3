"""From what a user asked for to a `KitRun`: every usage error, before any check runs.

`plan_run` is what the CLI and the pytest plugin (and Python callers) call with the
settings they were given: it resolves the backend (a built-in, ``module:function``,
or a ``--process`` command), opens it once to learn what it declares
(`probe_backend`), checks the selection, loads the session layer when a session
check is selected, draws the seed if none was given, and returns the run as one
value for `checkpointspec.conformance.running.runner.run_kit`.

A setting that cannot be used raises `RunSettingError`, whose ``setting`` says
which one, so that each front end can name it by its own flag.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal, TypeAlias, cast

import msgspec

from ...backends.registry import (
    BackendLoadError,
    BackendRef,
    BackendTarget,
    FactoryFailedError,
    process_backend,
    resolve_backend,
)
from ...spec import (
    CAPABILITY_REASONS,
    BackendContext,
    Capability,
    DropsStores,
    ExternalStorage,
    RefusesBeforeTheBackend,
    StoreHooks,
)
from ..checks.base import Check
from ..engines.contract.adk_session import METHODS as SERVICE_METHODS
from ..engines.contract.adk_session import close_service, open_service
from ..engines.contract.langgraph import offers_of, open_saver
from ..engines.contract.openai_session import METHODS as SESSION_METHODS
from ..engines.contract.openai_session import open_sessions
from ..engines.run.frameworks import FRAMEWORKS, Framework, framework_of_suite
from ..engines.run.kit_run import BackendProbe, KitRun, OutputName, ReportOutputs, SuiteSelection
from ..engines.run.profiles import DEFAULT_PROFILE, PROFILES, Profile
from ..engines.search.replay import Reproduction
from ..engines.target.authoring import how_to_give_store_hooks
from ..engines.target.provenance import open_checkpointer
from ..engines.target.session_layer import DEFAULT_SESSION_LAYER, load_session_layer
from .registry import DEFAULT_SUITE, SUITES, UnknownCheckError, is_session_check, select_checks
from .report import unwritable

__all__ = [
    "CI_SEED",
    "CI_VARIABLES",
    "ReproduceNeedsOneCheck",
    "RunSettingError",
    "Setting",
    "check_outputs",
    "drop_or_say_why",
    "in_ci",
    "parse_shard",
    "plan_run",
    "probe_backend",
    "selected_checks",
    "shard_of",
    "side_by_side",
    "skip_reason",
]

Setting: TypeAlias = (
    Literal["backend", "suite", "only", "shard", "session_layer", "reproduce"] | OutputName
)
"""The settings `plan_run` can refuse."""


class RunSettingError(BackendLoadError):
    """A setting of the run cannot be used (a usage error, exit status 2); ``setting``
    names it, the message says why in the CLI's words."""

    def __init__(self, setting: Setting, message: str) -> None:
        super().__init__(message)
        self.setting: Setting = setting


class ReproduceNeedsOneCheck(RunSettingError):
    """A reproduce blob came with a selection of ``selected`` checks, not one."""

    def __init__(self, selected: int) -> None:
        super().__init__(
            "reproduce",
            f"--reproduce replays one check, and {selected} are selected: "
            "name it with --only, as the failure's replay command does",
        )
        self.selected = selected


def _on_scratch(
    target: BackendTarget, probe: Callable[[Path], Coroutine[object, object, BackendProbe]]
) -> BackendProbe:
    """``probe`` run on a scratch store that is removed after it; what it raises that is
    not a `BackendLoadError` is the factory's failure (`FactoryFailedError`)."""
    scratch = Path(tempfile.mkdtemp(prefix="checkpointspec-probe-"))
    try:
        return asyncio.run(probe(scratch))
    except BackendLoadError:  # NotACheckpointerError among them
        raise
    except Exception as exc:
        raise FactoryFailedError(target.ref.target, exc) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def probe_backend(target: BackendTarget) -> BackendProbe:
    """Open and close one handle of ``target`` on a scratch store. Raises `BackendLoadError`
    if that fails: the module does not import, the factory raises, or what it returns is
    not a Checkpointer (the message names the members it lacks)."""
    factory = target.factory()

    async def probe(scratch: Path) -> BackendProbe:
        cp = await open_checkpointer(factory, target.context(scratch))
        try:
            capabilities = frozenset(Capability(c) for c in cp.capabilities)
            refused = (
                cp.refused_before_the_backend() if isinstance(cp, RefusesBeforeTheBackend) else {}
            )
        finally:
            await cp.close()
        external = isinstance(cp, ExternalStorage)
        return BackendProbe(
            capabilities,
            isinstance(cp, StoreHooks),
            dict(refused),
            external_storage=external,
            left_behind=await drop_or_say_why(cp, scratch) if external else "",
            store_hooks_how=how_to_give_store_hooks(cp),
        )

    return _on_scratch(target, probe)


def _declared(framework: Framework, declared: Iterable[Capability]) -> frozenset[Capability]:
    claims = frozenset(declared)
    if not claims <= framework.declarable.keys():
        raise BackendLoadError(
            f"{framework.what} declares only " + ", ".join(c.value for c in framework.declarable)
        )
    return claims


def probe_saver(target: BackendTarget, declared: Iterable[Capability] = ()) -> BackendProbe:
    """Open and close one LangGraph saver of ``target`` (``--langgraph``) on a scratch
    store, noting the twins it offers each operation through (`BackendProbe.saver_offers`,
    what every check of the run reads) and what its author ``declared`` of it (its
    capabilities, from `LANGGRAPH_DECLARABLE`). Raises `BackendLoadError` when that
    fails or the saver offers neither twin (no working ``get_tuple`` nor ``aget_tuple``)."""
    claims = _declared(FRAMEWORKS["langgraph"], declared)
    factory = cast("Callable[[BackendContext], object]", target.factory())

    async def probe(scratch: Path) -> BackendProbe:
        handle = await open_saver(factory, target.context(scratch))
        try:
            offers = offers_of(handle)
        finally:
            await handle.close()
        if not handle.twins:
            raise FactoryFailedError(
                target.ref.target,
                TypeError(
                    f"{type(handle.saver).__name__} is not a LangGraph checkpoint saver: "
                    "neither get_tuple nor aget_tuple answers"
                ),
            )
        return await _dropping_the_scratch(
            target, scratch, BackendProbe(claims, has_hooks=False, saver_offers=dict(offers))
        )

    return _on_scratch(target, probe)


def probe_session_store(target: BackendTarget, declared: Iterable[Capability] = ()) -> BackendProbe:
    """Open one OpenAI Agents session of ``target`` (``--openai-session``) on a scratch
    store, ask it for its items and close it, with what its author ``declared`` of it
    (from `OPENAI_SESSION_DECLARABLE`). Raises `BackendLoadError` when that fails or the
    object lacks a method of the ``Session`` protocol (the message names them) or has
    one that is not a coroutine function."""
    claims = _declared(FRAMEWORKS["openai_session"], declared)
    factory = target.factory()

    async def probe(scratch: Path) -> BackendProbe:
        store = await open_sessions(factory, target.context(scratch))
        try:
            session = await store.session("checkpointspec-probe")
            why = _why_not(session, SESSION_METHODS, "an OpenAI Agents Session")
            if why:
                raise FactoryFailedError(target.ref.target, TypeError(why))
            await session.get_items()  # type: ignore[attr-defined]
        finally:
            await store.close()
        return await _dropping_the_scratch(target, scratch, BackendProbe(claims, has_hooks=False))

    return _on_scratch(target, probe)


def _why_not(session: object, methods: Sequence[str], what: str) -> str:
    """Why ``session`` is not ``what`` (a method missing, one not async), or ""."""
    missing = [m for m in methods if not callable(getattr(session, m, None))]
    not_async = [
        m
        for m in methods
        if m not in missing and not inspect.iscoroutinefunction(getattr(session, m))
    ]
    parts = [
        f"it has no {', '.join(missing)}" if missing else "",
        f"{', '.join(not_async)} {'is' if len(not_async) == 1 else 'are'} not async"
        if not_async
        else "",
    ]
    said = "; ".join(p for p in parts if p)
    return f"{type(session).__name__} is not {what}: {said}" if said else ""


def probe_session_service(
    target: BackendTarget, declared: Iterable[Capability] = ()
) -> BackendProbe:
    """Open one ADK session service of ``target`` (``--adk-session-service``) on a scratch
    store, ask it for a session no one created and close it, with what its author
    ``declared`` of it (from `ADK_SESSION_DECLARABLE`). Raises `BackendLoadError` when
    that fails or the object lacks a method of ``BaseSessionService`` the contract calls
    (the message names them) or has one that is not a coroutine function."""
    claims = _declared(FRAMEWORKS["adk_session"], declared)
    factory = target.factory()

    async def probe(scratch: Path) -> BackendProbe:
        handle = await open_service(factory, target.context(scratch))
        try:
            why = _why_not(handle.service, SERVICE_METHODS, "an ADK BaseSessionService")
            if why:
                raise FactoryFailedError(target.ref.target, TypeError(why))
            await handle.service.get_session(  # type: ignore[attr-defined]
                app_name="checkpointspec-probe", user_id="probe", session_id="probe"
            )
        finally:
            await close_service(handle)
        return await _dropping_the_scratch(target, scratch, BackendProbe(claims, has_hooks=False))

    return _on_scratch(target, probe)


def probe_framework(
    framework: Framework, target: BackendTarget, declared: Iterable[Capability]
) -> BackendProbe:
    """``framework``'s store of ``target`` probed as its suite's checks need it."""
    if framework.suite.value == "langgraph":
        return probe_saver(target, declared)
    if framework.suite.value == "adk_session":
        return probe_session_service(target, declared)
    return probe_session_store(target, declared)


async def drop_through_factory(target: BackendTarget, directory: Path) -> str:
    """Drop the stores under ``directory`` through the factory of a framework's ``target``
    when it carries `DropsStores` (a store on a database server); "" when that worked or
    was not needed, else what failed, in a sentence for the report."""
    factory = target.factory()
    if not isinstance(factory, DropsStores):
        return ""
    try:
        await factory.drop_stores(target.context(directory))
    except Exception as exc:
        return f"drop_stores of {directory}'s stores raised {type(exc).__name__}: {exc}"
    return ""


async def _dropping_the_scratch(
    target: BackendTarget, scratch: Path, probe: BackendProbe
) -> BackendProbe:
    """A framework store's ``probe`` with what its factory says of its stores (`DropsStores`),
    the probe's own ``scratch`` store dropped through it."""
    if not isinstance(target.factory(), DropsStores):
        return probe
    left = await drop_through_factory(target, scratch)
    return msgspec.structs.replace(probe, external_storage=True, left_behind=left)


async def drop_or_say_why(handle: object, directory: Path) -> str:
    """Drop the stores under ``directory`` through ``handle`` (a closed handle of a backend
    with `ExternalStorage`); "" when that worked, else what failed, in a sentence for
    the report: a gate leaves nothing behind, or says what it left."""
    if not isinstance(handle, ExternalStorage):
        return ""
    try:
        await handle.drop_stores(directory)
    except Exception as exc:
        return f"drop_stores({str(directory)!r}) raised {type(exc).__name__}: {exc}"
    return ""


def selected_checks(run: KitRun) -> list[Check]:
    """The checks ``run`` runs, in the catalog's order: its suite's, narrowed by ``only``
    and cut to its shard. Raises `UnknownCheckError` when ``only`` matches none
    (`plan_run` has checked it)."""
    checks = select_checks(run.only, suite=run.suite)
    return checks if run.shard is None else shard_of(checks, *run.shard)


def skip_reason(check: Check, probe: BackendProbe) -> str | None:
    """Why ``check`` is skipped on a backend that declared ``probe`` (a capability or the
    hooks it needs are missing), or None when it runs."""
    missing = sorted(check.needs - probe.capabilities)
    if missing:
        return "; ".join(
            f"needs {c.name} ({CAPABILITY_REASONS[c]}), which the backend does not declare"
            for c in missing
        )
    if check.hooks and not probe.has_hooks:
        how = probe.store_hooks_how or how_to_give_store_hooks(None)
        return f"needs the store hooks, which the backend does not offer: {how}"
    return None


def shard_of(checks: list[Check], number: int, count: int) -> list[Check]:
    """Shard ``number`` (1-based) of ``count``: every ``count``-th check of ``checks`` from
    the ``number``-th on. The same selection gives the same shards on every machine, and
    the shards of one selection hold each of its checks exactly once; dealing them in
    turn spreads the costly checks, which sit together in the catalog, over the shards."""
    return checks[number - 1 :: count]


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) as ``(K, N)``; raises `RunSettingError` naming the setting."""
    number, sep, count = text.partition("/")
    if sep and number.isdigit() and count.isdigit() and 1 <= int(number) <= int(count):
        return int(number), int(count)
    raise RunSettingError(
        "shard", f"--shard takes K/N with 1 <= K <= N (the K-th of N slices), not {text!r}"
    )


CI_SEED: Final = 0
"""The seed of a run in CI that names none: a gate does the same work on every run of a
commit, as Hypothesis derandomizes under its CI profile; ``--seed`` still wins."""


CI_VARIABLES: Final[dict[str, str | None]] = {
    "CI": None,
    "__TOX_ENVIRONMENT_VARIABLE_ORIGINAL_CI": None,
    "TF_BUILD": "true",
    "bamboo.buildKey": None,
    "BUILDKITE": "true",
    "CIRCLECI": "true",
    "CIRRUS_CI": "true",
    "CODEBUILD_BUILD_ID": None,
    "GITHUB_ACTIONS": "true",
    "GITLAB_CI": None,
    "HEROKU_TEST_RUN_ID": None,
    "TEAMCITY_VERSION": None,
}
"""The variables by which Hypothesis tells a CI job (its ``is_in_ci``), each with the
value it must have (None: any): the kit's CI mode starts exactly where Hypothesis'
CI profile does."""


def in_ci(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is a CI job's, as Hypothesis tells (`CI_VARIABLES`: ``CI``
    set to anything, ``GITHUB_ACTIONS=true``, ``TF_BUILD=true``, ...)."""
    return any(
        name in environ and (value is None or environ[name] == value)
        for name, value in CI_VARIABLES.items()
    )


def plan_run(
    backend_name: str | None,
    *,
    process: str | None = None,
    validate_protocol: bool = False,
    profile: str | Profile = DEFAULT_PROFILE,
    seed: int | None = None,
    workers: int | None = 1,
    only: Iterable[str] = (),
    expected_failures: Iterable[str] | Mapping[str, str] = (),
    options: Mapping[str, str] | None = None,
    suite: SuiteSelection = DEFAULT_SUITE,
    session_layer: str = DEFAULT_SESSION_LAYER,
    reproduction: Reproduction | None = None,
    outputs: ReportOutputs | None = None,
    shard: tuple[int, int] | None = None,
    budget: float | None = None,
    accept_incomplete: bool = False,
    environ: Mapping[str, str] | None = None,
    declared: Iterable[Capability] = (),
) -> KitRun:
    """The run of the kit against ``backend_name`` (a built-in name or ``module:function``),
        or with ``process`` (and no name) against a backend in another process that speaks
        the stdio protocol, every message checked against its schema with ``validate_protocol``.

        ``suite`` picks the checks (``storage``, ``session`` or ``all``; ``langgraph``
        for a LangGraph saver's factory, ``openai_session`` for an OpenAI Agents
        session's, probed as one (`probe_framework`), with what its author
        ``declared``); ``only`` narrows
        them to the checks whose name starts with an entry or that verify a rule it
        names); session checks run ``session_layer`` (``MODULE`` or ``MODULE:OBJECT``)
        on the backend. ``expected_failures`` are the ``--xfail`` rules, or a mapping of
        each to the reason it is expected to fail. ``reproduction`` replays one recorded
        failing example of the one selected check (``--reproduce``); ``outputs`` are the
    files the verdict is written to when the run ends; ``shard`` ``(K, N)`` runs the K-th
    of N slices of the selection (`shard_of`). ``budget`` is the seconds the run may
    take (``--budget``; infinity: no limit but the profile's counts), by default
    (None) the profile's ``budget_seconds``: a cap, and a check it stops before its
    counts is incomplete, which fails the run (exit status 4) unless
    ``accept_incomplete``. With no ``seed`` one is drawn, or, when ``CI`` is set in
    ``environ`` (default: this process's environment, `in_ci`), `CI_SEED`; with ``workers > 1`` that many checks run at once, in processes of their own;
        ``None`` lets the kit choose (`side_by_side`, the CLI's default).

        Raises `RunSettingError` (a `BackendLoadError`) for a usage error: an output file
        that cannot be written (checked first: no report is lost after minutes of checks);
        an unknown backend or suite; a factory that cannot be imported, raises or returns something
        that is not a Checkpointer; a selection matching no check; a session layer that
        cannot be loaded when a session check is selected; a reproduction with a
        selection of other than one check (`ReproduceNeedsOneCheck`).
    """
    outputs = outputs or ReportOutputs()
    check_outputs(outputs)
    if suite not in SUITES:
        raise RunSettingError("suite", f"unknown suite {suite!r}: use one of {', '.join(SUITES)}")
    backend, process_options = _backend(backend_name, process, validate_protocol)
    user_options = dict(options or {})
    try:
        target = BackendTarget(backend, user_options | process_options)
        framework = framework_of_suite(suite)
        if framework is not None:
            probe = probe_framework(framework, target, declared)
        elif declared:
            raise BackendLoadError(
                "only another framework's store is declared to (--declare): "
                + ", ".join(f.flag for f in FRAMEWORKS.values())
            )
        else:
            probe = probe_backend(target)
    except BackendLoadError as exc:
        raise RunSettingError("backend", str(exc)) from exc
    chosen = PROFILES[profile] if isinstance(profile, str) else profile
    ci = in_ci(os.environ if environ is None else environ)
    run = KitRun(
        backend=backend,
        probe=probe,
        profile=chosen,
        seed=seed
        if seed is not None
        else CI_SEED
        if ci
        else random.SystemRandom().randrange(2**31),
        suite=suite,
        only=tuple(only),
        session_layer=session_layer,
        options=user_options,
        process_options=process_options,
        expected_failures=(
            dict(expected_failures)
            if isinstance(expected_failures, Mapping)
            else dict.fromkeys(expected_failures, "")
        ),
        workers=1 if workers is None else workers,
        reproduction=reproduction,
        outputs=outputs,
        shard=shard,
        budget=_budget(chosen, budget),
        accept_incomplete=accept_incomplete,
        ci=ci,
    )
    _check_selection(run)
    if workers is None:
        run = msgspec.structs.replace(run, workers=side_by_side(run))
    return run


MOST_SIDE_BY_SIDE: Final = 4
"""The most checks `side_by_side` runs at once: each starts processes of its own
(workers, stoppers, tracers), so more would only make them wait for each other."""


def side_by_side(run: KitRun) -> int:
    """How many checks of ``run`` to run at once when not told: one per core this process
    may use, at most `MOST_SIDE_BY_SIDE` and at most the checks selected; one for a
    reproduction. Checks share no store (each has a directory of its own), so the only
    cost of running them side by side is a process per slot, which pays for itself
    once there are two cores."""
    if run.reproduction is not None:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, MOST_SIDE_BY_SIDE, len(selected_checks(run))))


def _budget(profile: Profile, asked: float | None) -> float | None:
    """The run's budget: the one asked for, else the profile's; None for no limit."""
    budget = profile.budget_seconds if asked is None else asked
    return None if budget is None or math.isinf(budget) else budget


def check_outputs(outputs: ReportOutputs) -> None:
    """Raise `RunSettingError` naming the first output file that cannot be written."""
    for name, path in outputs.named().items():
        if (problem := unwritable(path)) is not None:
            raise RunSettingError(name, problem)


def _backend(
    name: str | None, process: str | None, validate_protocol: bool
) -> tuple[BackendRef, dict[str, str]]:
    """The backend to check, and the options the kit adds for a ``--process`` one."""
    try:
        if process is not None:
            return process_backend(process, validate=validate_protocol)
        if name is None:
            raise BackendLoadError("name a backend, or give --process COMMAND")
        return resolve_backend(name), {}
    except BackendLoadError as exc:
        raise RunSettingError("backend", str(exc)) from exc


def _check_selection(run: KitRun) -> None:
    """Refuse a selection that matches nothing, a reproduction for other than one check,
    and a session layer that cannot be loaded (once now, not once per check)."""
    try:
        selected = selected_checks(run)
    except UnknownCheckError as exc:
        raise RunSettingError("only", str(exc)) from exc
    if run.shard is not None and not selected:
        number, count = run.shard
        raise RunSettingError(
            "shard",
            f"--shard {number}/{count} holds no check: the selection has fewer than {number} "
            "checks; use fewer shards",
        )
    if run.reproduction is not None and len(selected) != 1:
        raise ReproduceNeedsOneCheck(len(selected))
    if any(is_session_check(c) for c in selected):
        try:
            load_session_layer(run.session_layer)
        except BackendLoadError as exc:
            raise RunSettingError("session_layer", str(exc)) from exc
