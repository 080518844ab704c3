"""One run of the kit as one value: `KitRun`.

Everything a run was asked to do and what the kit learnt before the first check
(the backend, what it declares, the seed, the budgets, the suite, the options)
lives in one frozen `KitRun`. The front ends build it once
(`checkpointspec.conformance.running.plan.plan_run`); the runner, every check's
`Harness` and the worker processes receive it whole and read it, never rebuild
or amend it. What follows from it is derived here, in one place: the backend
under test with the options its factory gets (`KitRun.target`) and the command
that replays one check (`KitRun.replay_command`).

This module knows no check and no runner: it sits with the harness, below both.
"""

from __future__ import annotations

import shlex
from typing import Literal, TypeAlias

import msgspec

from ....backends.registry import BackendRef, BackendTarget
from ....spec import Capability
from ..search.budget import format_seconds
from ..search.replay import Reproduction
from ..target.session_layer import DEFAULT_SESSION_LAYER
from .frameworks import framework_of_suite
from .profiles import Profile

__all__ = ["BackendProbe", "KitRun", "OutputName", "ReportOutputs", "SuiteSelection"]

SuiteSelection: TypeAlias = Literal[
    "storage", "session", "all", "langgraph", "openai_session", "adk_session"
]
"""What a run checks: the checkpointer (``storage``), the session layer on it
(``session``), or both (``all``); or another framework's store, a contract of its
own: a LangGraph checkpoint saver (``langgraph``, ``--langgraph``) or an OpenAI
Agents session store (``openai_session``, ``--openai-session``) or an ADK session
service (``adk_session``, ``--adk-session-service``; `frameworks`).
`checkpointspec.conformance.running.registry` holds each suite's checks."""


class BackendProbe(msgspec.Struct, frozen=True):
    """What the kit learns by opening one handle: capabilities and optional hooks."""

    capabilities: frozenset[Capability]
    has_hooks: bool
    refused_before_the_backend: dict[str, str] = msgspec.field(default_factory=dict)
    """For a proxy (`checkpointspec.spec.RefusesBeforeTheBackend`, the stdio client): the
    rules whose every checked case it refuses itself, with why; empty for a backend
    that answers for itself."""
    external_storage: bool = False
    """The handle keeps its stores' data outside their directories
    (`checkpointspec.spec.ExternalStorage`; a framework's factory: `DropsStores`): every
    check's stores are dropped after it."""
    left_behind: str = ""
    """Why the probe's own store could not be dropped ("" when it was, or needed not be)."""
    store_hooks_how: str = ""
    """How this backend's author gives the store hooks, in their own language (a skip
    for want of them says it); "" for a backend the hooks do not apply to."""
    saver_offers: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    """For a LangGraph saver (``--langgraph``): per operation, the twins it offers it
    through (``async``, ``sync``; none for an extended operation it lacks). Empty for a
    checkpointer."""


OutputName: TypeAlias = Literal["report", "junit", "badge", "summary"]
"""The files a run can write its verdict to."""


class ReportOutputs(msgspec.Struct, frozen=True, kw_only=True):
    """Where the run's verdict is written besides the terminal: each a file path, or
    None for none. Checked writable when the run is planned, written when it ends."""

    report: str | None = None
    """``--report``: the JSON report."""
    junit: str | None = None
    """``--junit``: JUnit XML, one testcase per check."""
    badge: str | None = None
    """``--badge``: an SVG status badge."""
    summary: str | None = None
    """``--summary`` (pytest: ``--checkpointer-summary``): the Markdown CI summary."""

    def named(self) -> dict[OutputName, str]:
        """The outputs asked for, by name."""
        paths: dict[OutputName, str | None] = {
            "report": self.report,
            "junit": self.junit,
            "badge": self.badge,
            "summary": self.summary,
        }
        return {name: path for name, path in paths.items() if path is not None}


class KitRun(msgspec.Struct, frozen=True, kw_only=True):
    """The settings of one run, gathered once, before any check runs.

    The dict fields are never changed after the run is built; they are dicts so
    that the value pickles to a worker process as it is.
    """

    backend: BackendRef
    """The backend under test: a built-in, ``module:function``, or, for ``--process``,
    the stdio proxy (its name is the ``--process`` command line)."""
    probe: BackendProbe
    """What the backend declared when the kit opened it before the run."""
    profile: Profile
    """The budgets: how many examples, states, rounds and processes each check spends."""
    seed: int
    """The seed of every random choice of every check."""
    suite: SuiteSelection
    only: tuple[str, ...] = ()
    """``--only``: check-name prefixes or rule ids narrowing the suite (empty: all of it)."""
    session_layer: str = DEFAULT_SESSION_LAYER
    """The session layer the session checks run (``MODULE`` or ``MODULE:OBJECT``)."""
    options: dict[str, str] = {}
    """The user's ``--option`` pairs."""
    process_options: dict[str, str] = {}
    """What the kit adds for a ``--process`` backend (its command, schema validation):
    the backend's name says them already, so a replay command leaves them out."""
    expected_failures: dict[str, str] = {}
    """``--xfail``: each rule expected to fail, and why."""
    workers: int = 1
    """How many checks run at once, each in a process of its own (1: in this process)."""
    reproduction: Reproduction | None = None
    """``--reproduce``: the one recorded failing example the one selected check replays."""
    outputs: ReportOutputs = ReportOutputs()
    """The files the verdict is written to when the run ends."""
    shard: tuple[int, int] | None = None
    """``--shard K/N``: this run checks the K-th of N deterministic slices of the selected
    checks (`checkpointspec.conformance.running.plan.shard_of`); None for all of them."""
    budget: float | None = None
    """The cap on the run's wall-clock time in seconds: the profile's ``budget_seconds``
    unless ``--budget`` said otherwise; None: no cap. A check the cap stops before its
    profile's counts is incomplete (`checkpointspec.conformance.running.slices`)."""
    accept_incomplete: bool = False
    """``--accept-incomplete``: checks the cap stopped do not keep the run from passing."""
    ci: bool = False
    """The run is a CI gate (`CI` was set when it was planned): with no ``--seed`` its
    seed is `CI_SEED`, not drawn, so every CI run of a commit does the same work."""
    tolerated: frozenset[str] = frozenset()
    """Rules every check tolerates from its first round (see
    `checkpointspec.conformance.engines.search.exploration`): empty for a user's run; the
    kit's re-check of whether one finding follows from another sets it."""

    @property
    def target(self) -> BackendTarget:
        """The backend under test as every check opens it: `backend`, with the options its
        factory gets in `BackendContext.options` (the user's, and a ``--process``
        backend's own, which win: its command is not the user's to change). Each
        `Harness` takes it once and hands it on whole."""
        return BackendTarget(self.backend, self.options | self.process_options)

    def replay_command(self, check: str, *, session_check: bool) -> str:
        """The command that reruns the check named ``check`` as this run ran it: the same
        backend, options, profile, seed and cap (a session check with its suite and
        layer). A failure's reproduce blob is added by whoever has it."""
        suite = "session" if session_check else "storage"
        return self._command(
            self.suite if framework_of_suite(self.suite) else suite, f" --only {check}"
        )

    def rerun_command(self) -> str:
        """The command that runs this run's work again: its backend, suite, options,
        profile, seed and cap (not its ``--only`` or shard)."""
        return self._command(self.suite, "")

    def _command(self, suite: str, only: str) -> str:
        # The backend's name is what the command line said: module:function, a
        # built-in, or a ``--process`` backend's command, quoted already.
        command = f"checkpointspec run {self.backend.name}"
        framework = framework_of_suite(suite)
        if framework is not None:  # its flag names the object's factory and the suite
            command = f"checkpointspec run {framework.flag} {self.backend.name}"
            claims = sorted(c.value for c in self.probe.capabilities)
            if claims:  # such an object's capabilities are what its author declared
                command += f" --declare {','.join(claims)}"
        elif suite != "storage":
            command += f" --suite {suite}"
            if self.session_layer != DEFAULT_SESSION_LAYER:
                command += f" --session-layer {shlex.quote(self.session_layer)}"
        for key, value in sorted(self.options.items()):
            command += f" --option {shlex.quote(f'{key}={value}')}"
        command += f"{only} --profile {self.profile.name} --seed {self.seed}"
        if self.budget is None and self.profile.budget_seconds is not None:
            command += " --budget none"
        elif self.budget is not None and self.budget != self.profile.budget_seconds:
            command += f" --budget {format_seconds(self.budget)}"
        return command
