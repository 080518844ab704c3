"""Both front ends are made from one table of settings (`frontends.settings`).

The CLI's ``run`` parser and the pytest plugin's options are generated from
`SETTINGS`: every setting a front end offers is declared there with its flags, its
help and its metavar, and nothing else is declared by hand.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

import pytest
from checkpointspec.conformance.frontends import cli, pytest_plugin
from checkpointspec.conformance.frontends.settings import (
    SETTINGS,
    Frontend,
    Setting,
    SettingValueError,
    run_arguments,
    settings_of,
)
from checkpointspec.conformance.running.plan import plan_run


def _run_parser() -> argparse.ArgumentParser:
    commands = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.choices["run"]
    return parser


def _cli_actions() -> dict[str, argparse.Action]:
    """``checkpointspec run``'s arguments by dest, -h left out."""
    return {a.dest: a for a in _run_parser()._actions if a.dest != "help"}


class _Group:
    """Records what the plugin declares on its option group."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def addoption(self, *names: str, **keywords: Any) -> None:
        (name,) = names
        self.options[name] = keywords


class _Parser:
    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}

    def getgroup(self, name: str, description: str = "") -> _Group:
        return self.groups.setdefault(name, _Group())


def _plugin_options() -> dict[str, dict[str, Any]]:
    parser = _Parser()
    pytest_plugin.pytest_addoption(parser)  # type: ignore[arg-type]
    assert list(parser.groups) == ["checkpointspec"]
    return parser.groups["checkpointspec"].options


@pytest.mark.parametrize("setting", settings_of("cli"), ids=lambda s: s.name)
def test_each_cli_setting_is_declared_from_the_table(setting: Setting) -> None:
    action = _cli_actions()[setting.name]
    assert action.help == setting.help_in("cli")
    assert (tuple(action.option_strings) or (action.dest,)) == setting.cli
    if action.option_strings and not setting.switch:
        assert action.metavar == setting.metavar


@pytest.mark.parametrize("setting", settings_of("pytest"), ids=lambda s: s.name)
def test_each_plugin_setting_is_declared_from_the_table(setting: Setting) -> None:
    declared = _plugin_options()[str(setting.plugin)]
    assert declared["help"] == setting.help_in("pytest")
    assert declared.get("metavar") == setting.metavar
    assert "type" not in declared  # read by Setting.read, one-line usage errors


def test_nothing_else_is_declared_by_hand() -> None:
    assert list(_cli_actions()) == [s.name for s in settings_of("cli")]
    assert list(_plugin_options()) == [s.plugin for s in settings_of("pytest")]


_BOTH = [s for s in SETTINGS if s.frontends == {"cli", "pytest"}]


@pytest.mark.parametrize("setting", _BOTH, ids=lambda s: s.name)
def test_a_setting_of_both_front_ends_has_one_help(setting: Setting) -> None:
    """Both show the table's help; they differ only in the flags it names."""
    plugin_help = setting.help_in("pytest")
    for other in sorted(_BOTH, key=lambda s: -len(str(s.plugin))):  # --checkpointer last
        plugin_help = plugin_help.replace(str(other.plugin), other.cli[-1])
    assert plugin_help == setting.help_in("cli")


def test_a_setting_of_one_front_end_has_no_flag_in_the_other() -> None:
    for setting in SETTINGS:
        assert bool(setting.cli) == ("cli" in setting.frontends), setting.name
        assert (setting.plugin is not None) == ("pytest" in setting.frontends), setting.name


def test_every_setting_feeds_a_keyword_of_plan_run() -> None:
    keywords = set(inspect.signature(plan_run).parameters)
    for setting in SETTINGS:
        assert setting.feeds is None or setting.feeds in keywords, setting.name


@pytest.mark.parametrize("frontend", ["cli", "pytest"])
def test_the_defaults_give_plan_runs_arguments(frontend: Frontend) -> None:
    values = {s.name: [] if s.many else False if s.switch else s.default for s in SETTINGS}
    arguments = run_arguments(values, frontend)
    assert set(arguments) <= set(inspect.signature(plan_run).parameters)
    assert arguments["expected_failures"] == {}
    assert arguments["options"] == {}


def test_the_plugin_reads_text_as_the_cli_does() -> None:
    seed = next(s for s in SETTINGS if s.name == "seed")
    assert seed.read("7") == 7
    with pytest.raises(SettingValueError, match="invalid int value: 'x'"):
        seed.read("x")
    xfail = next(s for s in SETTINGS if s.name == "xfail")
    assert xfail.read(["APPEND-002=known"]) == [("APPEND-002", "known")]
    with pytest.raises(SettingValueError, match="unknown rule 'NOPE-999'"):
        xfail.read(["NOPE-999"])
    cli_args = cli._parser().parse_args(["run", "memory", "--seed", "7", "--xfail", "APPEND-002"])
    assert cli_args.seed == 7
    assert cli_args.xfail == [("APPEND-002", "")]


def test_a_rule_listed_without_a_reason_gets_the_front_ends_reason() -> None:
    values = {s.name: [] if s.many else False if s.switch else s.default for s in SETTINGS}
    values["xfail"] = [("APPEND-002", ""), ("APPEND-002", "known")]
    assert run_arguments(values, "pytest", unexplained="listed")["expected_failures"] == {
        "APPEND-002": "listed; known"
    }
    assert run_arguments(values, "cli")["expected_failures"] == {"APPEND-002": "known"}
