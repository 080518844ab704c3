"""Store interfaces of other agent frameworks the kit checks, each a suite of its own.

A framework's store (a LangGraph checkpoint saver, an OpenAI Agents session, an ADK
session service) is
not a checkpointer: the author names its factory with the framework's own flag, the
run checks that interface's contract alone, and what the object cannot show of
itself is declared (``--declare``). `FRAMEWORKS` says, per suite, the flags, what
the object is called in messages and what may be declared: the one table the
command line, the pytest plugin, the planner, the levels and the replay command
read, so that a framework is added here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from ....spec import Capability, RuleSuite
from ....spec.adk_session.rules import ADK_SESSION_DECLARABLE
from ....spec.langgraph.rules import LANGGRAPH_DECLARABLE
from ....spec.openai_session.rules import OPENAI_SESSION_DECLARABLE

__all__ = ["FRAMEWORKS", "Framework", "framework_of_suite"]


class Framework(msgspec.Struct, frozen=True):
    """One framework's store interface as the kit's front ends name it."""

    suite: RuleSuite
    """The suite (and rule suite) its contract's rules are."""
    setting: str
    """The setting's name: ``--`` + it with ``-`` for ``_`` is the CLI flag."""
    what: str
    """What its object is called in a sentence ("a LangGraph saver")."""
    factory: str
    """What its factory takes and returns, for the help text."""
    doc: str
    """The page of docs/ that describes it."""
    declarable: Mapping[Capability, str]
    """What its author may declare (``--declare``), with what declaring it promises."""

    @property
    def flag(self) -> str:
        """The CLI flag naming its factory: ``--langgraph``, ``--openai-session``."""
        return "--" + self.setting.replace("_", "-")

    @property
    def plugin_flag(self) -> str:
        """The pytest plugin's flag: ``--checkpointer-langgraph``, ..."""
        return "--checkpointer-" + self.setting.replace("_", "-")


FRAMEWORKS: Final[dict[str, Framework]] = {
    f.suite.value: f
    for f in (
        Framework(
            RuleSuite.LANGGRAPH,
            "langgraph",
            "a LangGraph saver",
            "FACTORY gets the store's BackendContext and returns a saver, an awaitable of one "
            "or a context manager yielding one",
            "docs/langgraph.md",
            LANGGRAPH_DECLARABLE,
        ),
        Framework(
            RuleSuite.OPENAI_SESSION,
            "openai_session",
            "an OpenAI Agents session store",
            "FACTORY gets a session id and the store's BackendContext and returns a Session, "
            "an awaitable of one or a context manager yielding one",
            "docs/openai-agents.md",
            OPENAI_SESSION_DECLARABLE,
        ),
        Framework(
            RuleSuite.ADK_SESSION,
            "adk_session_service",
            "an ADK session service",
            "FACTORY gets the store's BackendContext and returns a BaseSessionService, an "
            "awaitable of one or a context manager yielding one",
            "docs/adk.md",
            ADK_SESSION_DECLARABLE,
        ),
    )
}
"""Every framework suite by its suite name."""


def framework_of_suite(suite: str) -> Framework | None:
    """The framework whose suite ``suite`` is; None for the checkpointer's suites."""
    return FRAMEWORKS.get(suite)
