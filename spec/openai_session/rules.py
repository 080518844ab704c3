"""The OpenAI Agents session contract's rules: what a ``Session`` promises.

Each rule states what the OpenAI Agents SDK's ``Session`` protocol and its docs
promise (``get_items(limit)``, ``add_items``, ``pop_item``, ``clear_session``), or,
where they are silent, what a session store must do for a conversation not to be
lost or corrupted; those say so and why. They are the openai_session suite of the
catalog (``--openai-session``), with one level, ``openai_session``.

Ids are ``OAS<AREA>-NNN`` so that they never meet another contract's.
"""

from __future__ import annotations

from typing import Final

from ..capabilities import Capability
from ..rule_kinds import ConformanceLevel, Rule, RuleSuite, Strength

__all__ = ["OPENAI_SESSION_DECLARABLE", "OPENAI_SESSION_RULES"]

OPENAI_SESSION_DECLARABLE: Final[dict[Capability, str]] = {
    Capability.DURABLE: (
        "every answered add_items, pop_item and clear_session survives a power loss and "
        "its server killed or its server's host power-cut"
    ),
    Capability.MULTI_PROCESS: "sessions in several processes may use one store at once",
}
"""What a session store's author may declare of it (``--declare``): the protocol says
neither, and a session cannot show either on its object. The rules needing one are
skipped for a store that does not declare it."""


def _must(rule_id: str, title: str, statement: str, capability: Capability | None = None) -> Rule:
    return Rule(
        rule_id,
        Strength.MUST,
        capability,
        RuleSuite.OPENAI_SESSION,
        ConformanceLevel.OPENAI_SESSION,
        title,
        statement,
        since="0.10",
    )


OPENAI_SESSION_RULES: Final[tuple[Rule, ...]] = (
    _must(
        "OASADD-001",
        "Added items are kept, in order",
        "Once add_items(items) returns, get_items() ends with those items in the order "
        "given, after every item the session held before (the protocol: 'Add new items to "
        "the conversation history').",
    ),
    _must(
        "OASADD-002",
        "add_items is all or nothing",
        "An add_items keeps all of its items or none, next to each other in the order "
        "given: one that raises leaves the session as it was (the items before the one "
        "that could not be stored included), one cut short by a killed process or a power "
        "loss is whole or absent, and items another caller adds at the same time never "
        "come between its items. Silent in the protocol; a runner that retries the turn "
        "after the error otherwise stores the first items twice, and a turn's tool call "
        "without its output is a conversation the model API refuses.",
    ),
    _must(
        "OASGET-001",
        "get_items() returns the whole history in order",
        "get_items() with no limit returns every item the session holds, each once, in "
        "the order they were added (the protocol: 'Retrieve the conversation history').",
    ),
    _must(
        "OASGET-002",
        "get_items(limit) returns the latest items in order",
        "get_items(limit=N) returns the latest N items (all of them when there are fewer) "
        "in chronological order, the oldest of them first (the protocol: 'returns the "
        "latest N items in chronological order').",
    ),
    _must(
        "OASITEM-001",
        "Items come back exactly as added",
        "An item reads back equal to the item added: every key and value, nested lists "
        "and objects, text with any Unicode and with whitespace at either end, integers "
        "as integers and floats as floats, booleans and null. Silent in the protocol; "
        "the items are the model's input on the next turn.",
    ),
    _must(
        "OASPOP-001",
        "pop_item removes and returns the latest item",
        "pop_item() returns the most recent item and removes it, so that get_items() no "
        "longer has it and the next pop_item() returns the item before it; it returns "
        "None when the session is empty (the protocol: 'Remove and return the most "
        "recent item').",
    ),
    _must(
        "OASPOP-002",
        "Racing pop_item calls return each item once",
        "pop_item() calls made at once on one session, through one Session object or "
        "several, each return a different item (or None) and together remove exactly "
        "the items they return. Silent in the protocol; a pop returning an item another "
        "pop also returned undoes one turn twice and keeps an item both removed.",
    ),
    _must(
        "OASCLEAR-001",
        "clear_session removes the session's items, and only its",
        "After clear_session() the session holds no item (get_items() is empty, "
        "pop_item() returns None) and items added afterwards start a new history; no "
        "other session loses an item (the protocol: 'Clear all items for this session').",
    ),
    _must(
        "OASISO-001",
        "Sessions are apart",
        "A session's calls never change what another session id holds, and no session "
        "returns another's items: ids that differ only in case, in a separator ('-', "
        "'_', ':', '/'), in Unicode normalisation or in a trailing character are "
        "different sessions. Silent in the protocol; session_id is the conversation's "
        "only name.",
    ),
    _must(
        "OASSHARE-001",
        "Every Session object of an id sees one history",
        "Two Session objects opened with one session_id on one store (a second request, "
        "a restarted worker) see the same items: what one adds, pops or clears, the "
        "other reads at once. Silent in the protocol; a session keeping its own copy of "
        "the items answers from a history the store no longer has.",
    ),
    _must(
        "OASMP-001",
        "Callers at once lose nothing",
        "Calls made at once by several tasks of one process, on one session through one "
        "Session object or several, have the outcome of some order of them one at a "
        "time: no added item is lost, duplicated, reordered within its add_items or "
        "interleaved with another add_items' items. Silent in the protocol; an agent "
        "server runs turns of one conversation at once.",
    ),
    _must(
        "OASMP-002",
        "Sessions in several processes lose nothing",
        "Calls made at once through Session objects of one store in several processes "
        "have the outcome of some order of them one at a time. For stores declared "
        "multi_process: the protocol states no concurrency contract, and a deployment "
        "with several workers relies on one.",
        Capability.MULTI_PROCESS,
    ),
    _must(
        "OASSRV-001",
        "A killed server keeps every answered call",
        "After the database server a session store keeps its data in is killed at any moment of "
        "its calls and started again, the store reads as some of its calls in order left it, "
        "with every call answered before the kill among them and the call cut short whole "
        "or absent. For stores declared durable that take their server's URL from the "
        "options they are opened with (dsn): a server restarts after a crash, and the next turn reads what it kept.",
        Capability.DURABLE,
    ),
    _must(
        "OASSRV-002",
        "A cut connection keeps every answered call",
        "When a session store's connections to its database server are cut at any byte of its "
        "calls (a response lost, a request torn, a reset), every call answered before "
        "reads back afterwards, and every call that raised is whole or absent. For "
        "stores that take their server's URL from the options they are opened with "
        "(dsn): networks drop connections, and a turn retried after the error reads what was kept.",
    ),
    _must(
        "OASSRV-003",
        "A power cut of the server's host keeps every answered call",
        "After a power cut of the host of the database server a session store keeps its data in, "
        "at any moment of its calls, the server started again on what its disk kept "
        "reads as some of the calls in order left it, with every call answered before the "
        "cut among them and the call in flight whole or absent. For stores declared "
        "durable that take their server's URL from the options they are opened with "
        "(dsn): an answered call is what the next turn starts from.",
        Capability.DURABLE,
    ),
    _must(
        "OASKILL-001",
        "A killed writer leaves whole calls",
        "A process killed at any moment of its calls leaves the store as some of its "
        "calls in order left it: every call answered before the kill reads back, and the "
        "call cut short is whole or absent (no part of an add_items, no half of a "
        "clear_session). Silent in the protocol; an agent's process can die at any "
        "moment, and the next turn reads what it left. Checked for stores that keep "
        "their data in files under the store's directory.",
    ),
    _must(
        "OASPOWER-001",
        "A power loss keeps every answered call",
        "After a power loss at any moment of a writer's calls, the store reads as some "
        "of its calls in order left it, with every call answered before the loss among "
        "them and the call in flight whole or absent. For stores declared durable that "
        "keep their data in files under the store's directory.",
        Capability.DURABLE,
    ),
)
"""The openai_session suite's rules, in catalog order."""
