"""Capabilities: what a backend declares it supports, beyond the core contract.

A backend lists its capabilities in ``Checkpointer.capabilities``. The kit never
guesses them from the class: rules that need a capability are skipped, with the
reason, when it is not declared, and an operation whose capability is not
declared must raise `UnsupportedOperationError` (rule CAP-001).
"""

from __future__ import annotations

import enum

__all__ = ["CAPABILITY_REASONS", "Capability"]


class Capability(enum.StrEnum):
    """One optional part of the contract."""

    DELETE = "delete"
    LIST = "list"
    TRUNCATE = "truncate"
    DURABLE = "durable"
    MULTI_PROCESS = "multi_process"
    CODEC = "codec"
    GENERATION = "generation"
    MAINTENANCE = "maintenance"
    REPLICATED = "replicated"


CAPABILITY_REASONS: dict[Capability, str] = {
    Capability.DELETE: "delete(session_id) removes a session and all its events",
    Capability.LIST: "list_sessions() lists the existing sessions, most recently modified first",
    Capability.TRUNCATE: "truncate(session_id, to_seq) cuts a log back (time travel)",
    Capability.DURABLE: (
        "acknowledged writes survive close and reopen, a killed process and a power loss"
    ),
    Capability.MULTI_PROCESS: "handles in several processes share one store safely",
    Capability.CODEC: "payloads pass through BackendContext.codec (e.g. encryption)",
    Capability.GENERATION: (
        "generation(session_id) and expected_generation detect truncate-then-reappend"
    ),
    Capability.MAINTENANCE: (
        "acquire_maintenance(session_id) shuts every other writer out of a session "
        "while restore or compaction runs"
    ),
    Capability.REPLICATED: (
        "acknowledged writes survive the loss of the primary server: a standby "
        "promoted in its place holds every one of them"
    ),
}
"""One line per capability: what declaring it promises. Used in skip reasons."""
