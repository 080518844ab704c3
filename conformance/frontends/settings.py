"""The run's settings, one table for both front ends.

Every setting a user gives ``checkpointspec run`` or ``pytest --checkpointer`` is
one `Setting` in `SETTINGS`: its CLI flags, its pytest option, its help, how its
text is read, its default, and the `plan_run` keyword it feeds. The CLI's
``run`` parser (`add_cli_arguments`) and the plugin's options (`add_plugin_options`)
are made from the table, nothing declared by hand; `run_arguments` turns the
values either front end parsed into `plan_run`'s arguments.

A setting only one front end offers says so (``frontends``), and the table says
why next to it. A help text names another setting as ``{name}`` and reads, in each
front end, with that front end's flag for it.

How a value is read is the same in both: ``parse`` raises
`argparse.ArgumentTypeError` (or `ValueError`) for text it cannot use. The CLI
hands it to argparse (``type=``), which reports its usual usage error; the plugin
takes text and reads it with `Setting.read` when it plans the run, so that a bad
value is pytest's one-line usage error naming the option.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, get_args

import msgspec

from ...backends.registry import BackendLoadError, BackendOptionError, parse_options
from ...backends.stdio.bridges import (
    LITE_AGENT_DECLARABLE,
    TRUNCATE_WITHOUT_EXPECTED_HEAD,
    LiteAgentBridgeError,
    lite_agent_command,
)
from ...spec.capabilities import Capability
from ..engines.run.frameworks import FRAMEWORKS, Framework
from ..engines.run.kit_run import OutputName, ReportOutputs
from ..engines.run.profiles import DEFAULT_PROFILE, PROFILES
from ..engines.search.budget import budget_option, format_seconds
from ..engines.search.replay import ReproduceError, Reproduction, parse_reproduction
from ..engines.target.session_layer import DEFAULT_SESSION_LAYER
from ..running.plan import RunSettingError, parse_shard
from ..running.registry import DEFAULT_SUITE, SUITES, UnknownRuleError, check_rule_id

__all__ = [
    "SETTINGS",
    "Frontend",
    "Setting",
    "SettingValueError",
    "add_cli_arguments",
    "add_plugin_options",
    "declared_names",
    "flag",
    "rule_id_option",
    "run_arguments",
    "settings_of",
]

Frontend = Literal["cli", "pytest"]
"""``checkpointspec run`` and ``pytest --checkpointer``."""

BOTH: Final[frozenset[Frontend]] = frozenset(get_args(Frontend))


class SettingValueError(ValueError):
    """Text a setting cannot use; the message says why, in argparse's words."""


class Setting(msgspec.Struct, frozen=True, kw_only=True):
    """One setting of a run, as both front ends offer it."""

    name: str
    """Its name: the CLI's ``dest``, and the key of its value in `run_arguments`."""
    cli: tuple[str, ...]
    """The CLI's flags (``-n``, ``--workers``), or the positional argument's name."""
    plugin: str | None
    """The pytest plugin's option (``--checkpointer-...``)."""
    help: str
    """Its help; ``{name}`` stands for another setting's flag in the same front end."""
    feeds: str | None
    """The `plan_run` keyword its value goes into (None: the front end uses it itself)."""
    parse: Callable[[str], Any] | None = None
    """Text to value; raises `argparse.ArgumentTypeError` or `ValueError`."""
    default: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    many: bool = False
    """Repeatable: its value is the list of every time it was given."""
    switch: bool = False
    """A flag without a value: True when given."""
    frontends: frozenset[Frontend] = BOTH

    def help_in(self, frontend: Frontend) -> str:
        """The help as ``frontend`` shows it, other settings named by its flags."""
        return self.help.format_map({s.name: flag(s.name, frontend) for s in settings_of(frontend)})

    def read(self, value: Any) -> Any:
        """``value`` as argparse with ``type=parse`` gives it: each text parsed (every one
        of a repeatable setting's); None and defaults as they are. Raises
        `SettingValueError`."""
        if self.parse is None or value is None:
            return value
        if self.many:
            return [self._read_one(text) for text in value]
        return self._read_one(value) if isinstance(value, str) else value

    def _read_one(self, text: str) -> Any:
        assert self.parse is not None
        try:
            return self.parse(text)
        except argparse.ArgumentTypeError as exc:
            raise SettingValueError(str(exc)) from None
        except (TypeError, ValueError):
            name = getattr(self.parse, "__name__", repr(self.parse))
            raise SettingValueError(f"invalid {name} value: {text!r}") from None


def flag(name: str, frontend: Frontend) -> str:
    """The flag by which ``frontend`` gives setting ``name``: the CLI's last (long) one,
    the plugin's option."""
    setting = _BY_NAME[name]
    given = setting.cli[-1] if frontend == "cli" else setting.plugin
    assert frontend in setting.frontends, (name, frontend)
    assert given is not None
    return given


# -- reading values --------------------------------------------------------------------


def rule_id_option(text: str) -> str:
    """`check_rule_id` for a command-line option: an id the catalog lacks is the
    option's usage error."""
    try:
        return check_rule_id(text)
    except UnknownRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _expected_failure(text: str) -> tuple[str, str]:
    """``RULE=REASON`` or ``RULE`` as (rule, reason), the rule checked like ``--only``'s."""
    rule, _, reason = text.partition("=")
    return rule_id_option(rule.strip()), reason.strip()


def _option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as (key, value) (`parse_options`)."""
    try:
        ((key, value),) = parse_options([text]).items()
    except BackendOptionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return key, value


def _workers(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} processes: use 1 or more")
    return n


def _shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except RunSettingError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard ")) from None


def _reproduction(text: str) -> Reproduction:
    """A reproduce blob as a failure's replay command gives it, checked before the run."""
    try:
        return parse_reproduction(text)
    except ReproduceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _profile_budgets() -> str:
    return ", ".join(
        f"{name} {format_seconds(p.budget_seconds) if p.budget_seconds else 'none'}"
        for name, p in PROFILES.items()
    )


# -- the table -------------------------------------------------------------------------

CLI_ONLY: Final[frozenset[Frontend]] = frozenset({"cli"})
PYTEST_ONLY: Final[frozenset[Frontend]] = frozenset({"pytest"})

SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        name="backend",
        cli=("backend",),
        plugin="--checkpointer",
        metavar="BACKEND",
        feeds="backend_name",
        help="memory, file, sqlite, or module:function returning a Checkpointer "
        "(or {process} instead)",
    ),
    Setting(
        name="process",
        cli=("--process",),
        plugin="--checkpointer-process",
        metavar="COMMAND",
        feeds="process",
        help="a backend in another process speaking the stdio protocol, one process per "
        "handle, e.g. {process} 'node my-backend.js' (docs/stdio-protocol.md)",
    ),
    # CLI only: the bridge serves a store of a Node project, which has no pytest suite
    # to run the kit in; --checkpointer-process with the bridge's command does the same.
    Setting(
        name="lite_agent",
        cli=("--lite-agent",),
        plugin=None,
        frontends=CLI_ONLY,
        metavar="MODULE#FACTORY",
        feeds="process",
        help="a checkpointer for the lite-agent SDK's Checkpointer interface, served by the "
        "bridge shipped with the kit, e.g. {lite_agent} ./dist/store.js#createStore "
        "(docs/lite-agent.md; needs node)",
    ),
    *(
        Setting(
            name=framework.setting,
            cli=(framework.flag,),
            plugin=framework.plugin_flag,
            metavar="MODULE:FACTORY",
            feeds="backend_name",
            help=f"{framework.what}, checked against its contract (the {framework.suite.value} "
            f"suite): {framework.factory} ({framework.doc})",
        )
        for framework in FRAMEWORKS.values()
    ),
    Setting(
        name="declare",
        cli=("--declare",),
        plugin="--checkpointer-declare",
        many=True,
        metavar="NAME[,NAME]",
        feeds="process",
        help="what the object cannot show of itself (repeatable): with "
        + "; with ".join(
            f"{{{f.setting}}}, what {f.what} claims, from "
            + ", ".join(c.value for c in f.declarable)
            for f in FRAMEWORKS.values()
        )
        + "; with --lite-agent (CLI only), what the bridge cannot see, from "
        + ", ".join(LITE_AGENT_DECLARABLE),
    ),
    Setting(
        name="validate_protocol",
        cli=("--validate-protocol",),
        plugin="--checkpointer-validate-protocol",
        switch=True,
        feeds="validate_protocol",
        help="with {process}: check every message, both ways, against the protocol's JSON "
        "Schema and name the first that breaks it",
    ),
    Setting(
        name="profile",
        cli=("--profile",),
        plugin="--checkpointer-profile",
        choices=tuple(sorted(PROFILES)),
        default=DEFAULT_PROFILE,
        feeds="profile",
        help=f"how hard to try (default: {DEFAULT_PROFILE}; quick for a CI gate)",
    ),
    Setting(
        name="budget",
        cli=("--budget",),
        plugin="--checkpointer-budget",
        parse=budget_option,
        metavar="TIME",
        feeds="budget",
        help="a cap on the run's wall-clock time, e.g. 90s, 2m or 1h, or none (default: the "
        f"profile's: {_profile_budgets()}); a check the cap stops before its profile's "
        "counts is incomplete, never passed (exit status 4)",
    ),
    Setting(
        name="accept_incomplete",
        cli=("--accept-incomplete",),
        plugin="--checkpointer-accept-incomplete",
        switch=True,
        feeds="accept_incomplete",
        help="pass (exit status 0) when the only thing short of a pass is checks the time "
        "cap stopped before their counts; they still read incomplete, and the report "
        "says this was used",
    ),
    Setting(
        name="suite",
        cli=("--suite",),
        plugin="--checkpointer-suite",
        choices=tuple(SUITES),
        default=DEFAULT_SUITE,
        feeds="suite",
        help="storage: the checkpointer; session: the session layer on it; all: both; "
        + "; ".join(f"{f.suite.value}: what {{{f.setting}}} runs" for f in FRAMEWORKS.values())
        + f" (default: {DEFAULT_SUITE})",
    ),
    Setting(
        name="session_layer",
        cli=("--session-layer",),
        plugin="--checkpointer-session-layer",
        default=DEFAULT_SESSION_LAYER,
        metavar="MODULE",
        feeds="session_layer",
        help="the session layer the session suite checks: a module (or MODULE:OBJECT) "
        f"exposing the names of {DEFAULT_SESSION_LAYER} (default: {DEFAULT_SESSION_LAYER})",
    ),
    Setting(
        name="seed",
        cli=("--seed",),
        plugin="--checkpointer-seed",
        parse=int,
        metavar="SEED",
        feeds="seed",
        help="seed for every random choice; printed with each failure",
    ),
    Setting(
        name="reproduce",
        cli=("--reproduce",),
        plugin="--checkpointer-reproduce",
        parse=_reproduction,
        metavar="BLOB",
        feeds="reproduction",
        help="replay exactly this failing example of the one {only} check (from a "
        "failure's replay command): no search, no shrinking",
    ),
    # CLI only: under pytest, pytest-xdist's -n runs the checks side by side.
    Setting(
        name="workers",
        cli=("-n", "--workers"),
        plugin=None,
        frontends=CLI_ONLY,
        parse=_workers,
        metavar="WORKERS",
        feeds="workers",
        help="run this many checks at once, each in a process of its own (1+), or auto "
        "(the default: one per core, at most 4)",
    ),
    Setting(
        name="only",
        cli=("--only",),
        plugin="--checkpointer-only",
        many=True,
        metavar="CHECK_OR_RULE",
        feeds="only",
        help="run only checks whose name starts with this or that verify this rule (repeatable)",
    ),
    Setting(
        name="xfail",
        cli=("--xfail",),
        plugin="--checkpointer-xfail",
        many=True,
        parse=_expected_failure,
        metavar="RULE[=REASON]",
        feeds="expected_failures",
        help="a rule expected to fail, and why; it is an error if it passes (repeatable)",
    ),
    Setting(
        name="option",
        cli=("--option",),
        plugin="--checkpointer-option",
        many=True,
        parse=_option,
        metavar="KEY=VALUE",
        feeds="options",
        help="backend option passed in BackendContext.options (repeatable)",
    ),
    # CLI only, the report, the JUnit file and the badge: pytest writes its own JUnit
    # (--junitxml), and the whole run's report and badge are the CLI's to write.
    Setting(
        name="report",
        cli=("--report",),
        plugin=None,
        frontends=CLI_ONLY,
        metavar="FILE.json",
        feeds="outputs",
        help="write the machine-readable report",
    ),
    Setting(
        name="junit",
        cli=("--junit",),
        plugin=None,
        frontends=CLI_ONLY,
        metavar="FILE.xml",
        feeds="outputs",
        help="write a JUnit XML report",
    ),
    Setting(
        name="badge",
        cli=("--badge",),
        plugin=None,
        frontends=CLI_ONLY,
        metavar="FILE.svg",
        feeds="outputs",
        help="write an SVG status badge",
    ),
    Setting(
        name="summary",
        cli=("--summary",),
        plugin="--checkpointer-summary",
        metavar="FILE.md",
        feeds="outputs",
        help="write a Markdown summary (e.g. to $GITHUB_STEP_SUMMARY)",
    ),
    # CLI only: shards of a pytest session are pytest's own business (-k, its plugins);
    # `checkpointspec merge` joins the CLI's --report files.
    Setting(
        name="shard",
        cli=("--shard",),
        plugin=None,
        frontends=CLI_ONLY,
        parse=_shard,
        metavar="K/N",
        feeds="shard",
        help="run the K-th of N deterministic slices of the selected checks (a CI matrix "
        "job); `checkpointspec merge` makes the shards' reports one",
    ),
    # CLI only, quiet and verbose: pytest has its own -q and -v (-vv shows the tracebacks).
    Setting(
        name="quiet",
        cli=("-q", "--quiet"),
        plugin=None,
        frontends=CLI_ONLY,
        switch=True,
        feeds=None,
        help="no progress bar, and no progress lines",
    ),
    Setting(
        name="verbose",
        cli=("-v", "--verbose"),
        plugin=None,
        frontends=CLI_ONLY,
        switch=True,
        feeds=None,
        help="print each failure's full traceback, the kit's own frames included",
    ),
    # pytest only: the CLI compares two reports with its `compare` command; a pytest
    # session writes no report to compare, so it compares as it ends.
    Setting(
        name="compare",
        cli=(),
        plugin="--checkpointer-compare",
        frontends=PYTEST_ONLY,
        metavar="OLD.json",
        feeds=None,
        help="compare the kit's checks with a stored report (checkpointspec run --report): "
        "a rule newly failing fails the session, and what changed is printed",
    ),
)
"""Every setting of a run, in the order the front ends' help lists them."""

_BY_NAME: Final = {s.name: s for s in SETTINGS}


def settings_of(frontend: Frontend) -> tuple[Setting, ...]:
    """The settings ``frontend`` offers, in the table's order."""
    return tuple(s for s in SETTINGS if frontend in s.frontends)


# -- the front ends' declarations ------------------------------------------------------


def _declaration(setting: Setting, frontend: Frontend) -> dict[str, Any]:
    """``add_argument``'s keywords for ``setting`` (pytest's ``addoption`` takes argparse's)."""
    keywords: dict[str, Any] = {"help": setting.help_in(frontend)}
    if setting.switch:
        keywords["action"] = "store_true"
        return keywords
    if setting.many:
        keywords |= {"action": "append", "default": []}
    elif setting.default is not None:
        keywords["default"] = setting.default
    if setting.choices is not None:
        keywords["choices"] = setting.choices
    if frontend == "cli" and setting.parse is not None:
        keywords["type"] = setting.parse
    if frontend == "cli" and not setting.cli[0].startswith("-"):
        keywords["nargs"] = "?"  # a positional argument shows its own name
    elif setting.metavar is not None:
        keywords["metavar"] = setting.metavar
    return keywords


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the CLI's settings on ``checkpointspec run``'s parser."""
    for setting in settings_of("cli"):
        parser.add_argument(*setting.cli, **_declaration(setting, "cli"))


def add_plugin_options(add_option: Callable[..., None]) -> None:
    """Declare the plugin's settings with ``add_option`` (a pytest option group's
    ``addoption``); their values stay text until `Setting.read`."""
    for setting in settings_of("pytest"):
        assert setting.plugin is not None
        add_option(setting.plugin, **_declaration(setting, "pytest"))


# -- from values to plan_run's arguments -----------------------------------------------


def declared_names(texts: Sequence[str]) -> list[str]:
    """``--declare``'s names, commas and repeats alike."""
    return [name for text in texts for name in text.split(",") if name]


_COMPOSED: Final = frozenset({"backend_name", "process", "expected_failures", "options", "outputs"})
"""The `plan_run` keywords made from more than one setting, or from a list."""


def run_arguments(
    values: Mapping[str, Any], frontend: Frontend, *, unexplained: str = ""
) -> dict[str, Any]:
    """`plan_run`'s keyword arguments from the values ``frontend`` parsed, by setting
    name. A rule listed as expected to fail without a reason gets ``unexplained``.

    Raises `BackendLoadError` (a usage error) for settings that do not go together:
    ``--declare`` without a framework's flag (`FRAMEWORKS`) or ``--lite-agent`` (or
    naming what neither can declare), two framework flags, ``--validate-protocol`` without a process,
    or a lite-agent factory the bridge cannot serve."""
    arguments = {
        s.feeds: values[s.name]
        for s in settings_of(frontend)
        if s.feeds is not None and s.feeds not in _COMPOSED
    }
    framework = _framework_named(values, frontend)
    given = values.get(framework.setting) if framework is not None else None
    if framework is not None:
        if values.get("backend") is not None or values["process"] is not None:
            raise BackendLoadError(
                f"{flag(framework.setting, frontend)} names the backend: give no other one"
            )
        if values["suite"] not in (DEFAULT_SUITE, framework.suite.value):
            raise BackendLoadError(
                f"{flag(framework.setting, frontend)} runs the {framework.suite.value} suite, "
                f"not {values['suite']}"
            )
        arguments["suite"] = framework.suite.value
    elif values["suite"] in FRAMEWORKS:
        wanted = FRAMEWORKS[values["suite"]]
        raise BackendLoadError(
            f"the {wanted.suite.value} suite checks {wanted.what}: give "
            f"{flag(wanted.setting, frontend)} MODULE:FACTORY"
        )
    arguments["backend_name"] = given if given is not None else values.get("backend")
    declared = declared_names(values.get("declare", []))
    if framework is not None:
        arguments["declared"] = _framework_declarations(framework, declared, frontend)
        declared = []
    elif declared and values.get("lite_agent") is None:
        bridge = " or the --lite-agent bridge what it cannot see" if frontend == "cli" else ""
        flags = " or ".join(flag(f.setting, frontend) for f in FRAMEWORKS.values())
        raise BackendLoadError(
            f"{flag('declare', frontend)} tells what a {flags} store claims{bridge}: give that too"
        )
    process = _lite_agent_process(values.get("lite_agent"), declared) or values["process"]
    if values["validate_protocol"] and process is None:
        raise BackendLoadError(
            f"{flag('validate_protocol', frontend)} checks a {flag('process', frontend)} "
            "backend's messages"
        )
    xfail: dict[str, str] = {}
    if TRUNCATE_WITHOUT_EXPECTED_HEAD in declared:
        xfail["TRUNC-003"] = "declared truncate_without_expected_head"
    for rule, reason in values["xfail"]:
        xfail[rule] = "; ".join(r for r in (xfail.get(rule, ""), reason or unexplained) if r)
    outputs = {name: values.get(name) for name in get_args(OutputName)}
    return arguments | {
        "process": process,
        "expected_failures": xfail,
        "options": dict(values["option"]),
        "outputs": ReportOutputs(**outputs),
    }


def _framework_named(values: Mapping[str, Any], frontend: Frontend) -> Framework | None:
    """The framework whose flag names the backend (None: none does); a usage error
    when two do."""
    named = [f for f in FRAMEWORKS.values() if values.get(f.setting) is not None]
    if len(named) > 1:
        raise BackendLoadError(
            " and ".join(flag(f.setting, frontend) for f in named)
            + " each name the backend: give one"
        )
    return named[0] if named else None


def _framework_declarations(
    framework: Framework, declared: Sequence[str], frontend: Frontend
) -> tuple[Capability, ...]:
    """What ``--declare`` says ``framework``'s store claims; a usage error for a name it
    cannot declare."""
    known = {c.value: c for c in framework.declarable}
    unknown = [d for d in declared if d not in known]
    if unknown:
        raise BackendLoadError(
            f"{flag('declare', frontend)} {','.join(unknown)} is not declarable for "
            f"{framework.what}; declarable: " + ", ".join(known)
        )
    return tuple(dict.fromkeys(known[d] for d in declared))


def _lite_agent_process(factory: str | None, declared: list[str]) -> str | None:
    """The ``--process`` command ``--lite-agent`` stands for (None without it)."""
    if factory is None:
        return None
    try:
        return lite_agent_command(factory, declared)
    except LiteAgentBridgeError as exc:
        raise BackendLoadError(str(exc)) from None
