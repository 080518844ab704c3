"""The kinds a rule catalog is made of: `Rule`, its `Strength`, `RuleSuite` and `ConformanceLevel`.

They live apart from the catalogs so that each contract's catalog (the
checkpointer's in `checkpointspec.spec.rules`, LangGraph savers' in
`checkpointspec.spec.langgraph.rules`) builds its rules from them, and the one
`RULES` tuple joins them without an import cycle.
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

from .capabilities import CAPABILITY_REASONS, Capability

__all__ = [
    "FRAMEWORK_LEVELS",
    "LEVEL_MEANINGS",
    "ConformanceLevel",
    "Rule",
    "RuleSuite",
    "Strength",
]


class Strength(enum.StrEnum):
    """MUST rules decide the exit status; SHOULD rules are reported as warnings."""

    MUST = "MUST"
    SHOULD = "SHOULD"


class RuleSuite(enum.StrEnum):
    """What a rule judges, and so which suite of the kit checks it (``--suite``)."""

    STORAGE = "storage"
    """The checkpointer itself: the storage contract."""
    SESSION = "session"
    """The session layer (fold, checkpoints, file snapshots, restore, compaction)
    running on the checkpointer."""
    LANGGRAPH = "langgraph"
    """A LangGraph checkpoint saver (``--langgraph``): a contract of its own."""
    OPENAI_SESSION = "openai_session"
    """An OpenAI Agents SDK session (``--openai-session``): a contract of its own."""
    ADK_SESSION = "adk_session"
    """A Google ADK session service (``--adk-session-service``): a contract of its own."""


class ConformanceLevel(enum.StrEnum):
    """A conformance level: a named set of MUST rules a backend attains when a run saw
    every one of them hold. Members are in the order reports list the levels.

    A backend that declares fewer capabilities is not a worse backend, so each
    capability has its own level beside ``base``; the storage rules only checked
    through the kit's ``StoreHooks`` opt-in have theirs, so that a backend which
    cannot offer it still attains ``base``, and so do those only checked through
    the ``ServerRouted`` opt-in (``connection_loss``: a server backend's
    connections cut by the kit's proxy) and those only a backend served over the
    stdio protocol can break (``stdio_protocol``); the session suite's rules are one
    level whatever capability they need, and so are each framework's store
    interface's (``langgraph``, ``openai_session``, ``adk_session``): `FRAMEWORK_LEVELS`.
    """

    BASE = "base"
    DELETE = "delete"
    LIST = "list"
    TRUNCATE = "truncate"
    GENERATION = "generation"
    DURABLE = "durable"
    MULTI_PROCESS = "multi_process"
    MAINTENANCE = "maintenance"
    CODEC = "codec"
    STORE_HOOKS = "store_hooks"
    SESSION = "session"
    REPLICATED = "replicated"
    CONNECTION_LOSS = "connection_loss"
    STDIO_PROTOCOL = "stdio_protocol"
    LANGGRAPH = "langgraph"
    OPENAI_SESSION = "openai_session"
    ADK_SESSION = "adk_session"

    @property
    def capability(self) -> Capability | None:
        """The capability whose storage rules this level holds; None for ``base``,
        ``store_hooks``, ``session``, ``connection_loss`` and ``stdio_protocol``."""
        return _CAPABILITY_OF_LEVEL.get(self)


_CAPABILITY_OF_LEVEL: Final[dict[ConformanceLevel, Capability]] = {
    ConformanceLevel(capability.value): capability for capability in Capability
}
assert len(_CAPABILITY_OF_LEVEL) == len(Capability), "every capability has its level"

_MEANINGS_WITHOUT_CAPABILITY: Final[dict[ConformanceLevel, str]] = {
    ConformanceLevel.BASE: "the core storage contract every backend meets",
    ConformanceLevel.STORE_HOOKS: (
        "a newer format and damaged data are refused, not repaired (needs StoreHooks)"
    ),
    ConformanceLevel.SESSION: (
        "the session layer (fold, checkpoints, workspace, restore, compaction) works on it"
    ),
    ConformanceLevel.CONNECTION_LOSS: (
        "connections to its server cut, delayed or reset lose no acknowledged write and "
        "apply none twice (needs ServerRouted)"
    ),
    ConformanceLevel.LANGGRAPH: (
        "as a LangGraph checkpoint saver it keeps every checkpoint, channel value and "
        "pending write a graph gave it, and answers get_tuple and list as LangGraph expects"
    ),
    ConformanceLevel.OPENAI_SESSION: (
        "as an OpenAI Agents session it keeps every item added, in order and exactly, "
        "gives the latest ones and pops each once, whoever else uses the store"
    ),
    ConformanceLevel.ADK_SESSION: (
        "as an ADK session service it keeps every session and event, in order and exactly, "
        "applies state deltas by scope and keeps apps, users and sessions apart"
    ),
    ConformanceLevel.STDIO_PROTOCOL: (
        "served over the stdio protocol, it answers every request with one well-formed "
        "reply of the request's id and nothing else (needs --process)"
    ),
}

LEVEL_MEANINGS: Final[dict[ConformanceLevel, str]] = {
    level: CAPABILITY_REASONS[level.capability]
    if level.capability is not None
    else _MEANINGS_WITHOUT_CAPABILITY[level]
    for level in ConformanceLevel
}
"""What attaining each level shows, in one line; a capability's level shows what
declaring the capability promises (`CAPABILITY_REASONS`)."""


FRAMEWORK_LEVELS: Final[dict[RuleSuite, ConformanceLevel]] = {
    RuleSuite.LANGGRAPH: ConformanceLevel.LANGGRAPH,
    RuleSuite.OPENAI_SESSION: ConformanceLevel.OPENAI_SESSION,
    RuleSuite.ADK_SESSION: ConformanceLevel.ADK_SESSION,
}
"""The suites of another framework's store interface, each a contract of its own with
one level: a backend checked against one of them is checked against nothing else."""


class Rule(msgspec.Struct, frozen=True):
    """One numbered clause of the contract.

    ``level`` is None exactly for a SHOULD rule (SHOULD rules decide no verdict, so
    they count towards no level), and a session rule's level is
    ``ConformanceLevel.SESSION``.
    """

    id: str
    strength: Strength
    capability: Capability | None
    suite: RuleSuite
    level: ConformanceLevel | None
    title: str
    statement: str
    since: str = "0.1"

    def __post_init__(self) -> None:
        if (self.level is None) != (self.strength is Strength.SHOULD):
            raise ValueError(f"{self.id}: a rule has a level exactly when it is a MUST rule")
        if self.suite is RuleSuite.SESSION and self.level not in (None, ConformanceLevel.SESSION):
            raise ValueError(f"{self.id}: a session rule's level is ConformanceLevel.SESSION")
        own = FRAMEWORK_LEVELS.get(self.suite)
        if self.level is not None and self.level in FRAMEWORK_LEVELS.values() and own is None:
            raise ValueError(f"{self.id}: only a framework's rule counts towards {self.level}")
        if own is not None and self.level not in (None, own):
            raise ValueError(f"{self.id}: a {self.suite} rule's level is {own}")
