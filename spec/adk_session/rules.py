"""The ADK session service contract's rules: what a ``BaseSessionService`` promises.

Each rule states what Google ADK's ``BaseSessionService`` and its docs promise
(``create_session``, ``get_session`` with ``GetSessionConfig``, ``list_sessions``,
``delete_session``, ``append_event`` with its state deltas and stale-session check),
with ``InMemorySessionService`` as the reference where the docs leave a detail to
it, or, where both are silent, what a session service must do for a conversation
not to be lost or corrupted; those say so and why. They are the adk_session suite
of the catalog (``--adk-session-service``), with one level, ``adk_session``.

Ids are ``ADK<AREA>-NNN`` so that they never meet another contract's.
"""

from __future__ import annotations

from typing import Final

from ..capabilities import Capability
from ..rule_kinds import ConformanceLevel, Rule, RuleSuite, Strength

__all__ = ["ADK_SESSION_DECLARABLE", "ADK_SESSION_RULES"]

ADK_SESSION_DECLARABLE: Final[dict[Capability, str]] = {
    Capability.DURABLE: (
        "it is a persistent service: every answered create_session, append_event and "
        "delete_session survives a power loss and its server killed or its server's host "
        "power-cut, and an append through a session object older than the stored session "
        "raises StaleSessionError"
    ),
    Capability.MULTI_PROCESS: "services in several processes may use one store at once",
}
"""What a session service's author may declare of it (``--declare``): neither shows on
the object. The rules needing one are skipped for a service that does not declare it."""


def _must(rule_id: str, title: str, statement: str, capability: Capability | None = None) -> Rule:
    return Rule(
        rule_id,
        Strength.MUST,
        capability,
        RuleSuite.ADK_SESSION,
        ConformanceLevel.ADK_SESSION,
        title,
        statement,
        since="0.11",
    )


ADK_SESSION_RULES: Final[tuple[Rule, ...]] = (
    _must(
        "ADKCREATE-001",
        "create_session makes the session asked for, once",
        "create_session(app_name, user_id, state, session_id) returns a session of that id "
        "with the state given (its app: and user: keys merged in, temp: keys left out), "
        "which get_session then reads with no event; a session_id the app's user already "
        "has raises AlreadyExistsError and changes nothing (InMemorySessionService).",
    ),
    _must(
        "ADKCREATE-002",
        "Sessions created without an id get ids of their own",
        "create_session without a session_id returns a session whose id no other session "
        "of the store has, each time (the docstring: 'If not provided, a generated ID "
        "will be used').",
    ),
    _must(
        "ADKAPPEND-001",
        "An appended event is kept, in order",
        "Once append_event(session, event) returns, get_session of the session ends with "
        "that event, after every event appended before it; an append to a session that "
        "does not exist raises SessionNotFoundError and stores nothing "
        "(InMemorySessionService).",
    ),
    _must(
        "ADKGET-001",
        "get_session returns the session's events in append order",
        "get_session with no config returns every event of the session, each once, in the "
        "order appended, with the session's state; None for a session that does not exist "
        "(the issue of events read without ORDER BY: a shuffled history is the model's "
        "input on the next turn).",
    ),
    _must(
        "ADKGET-002",
        "get_session's filters return the latest events asked for",
        "get_session with num_recent_events=N returns the latest N events (none for 0), and "
        "with after_timestamp=T only the events of timestamp T or later, in append order, "
        "both together when both are given (GetSessionConfig's docstring).",
    ),
    _must(
        "ADKITEM-001",
        "Events and state values come back exactly",
        "An event reads back as appended (id, author, invocation_id, its text, its state "
        "delta without temp: keys) and a state value as set: text with any Unicode and "
        "whitespace at either end, integers as integers and floats as floats (-0.0 "
        "included), booleans, null, nested lists and objects. Silent in the docs; state "
        "and events are the agent's memory on the next turn.",
    ),
    _must(
        "ADKSTATE-001",
        "State deltas apply by scope",
        "A state delta (create_session's state, an event's state_delta) sets its app: keys "
        "for every session of the app, its user: keys for every session of that app's "
        "user, its other keys for that session alone, and never stores a temp: key; a "
        "later delta of a key replaces its value (InMemorySessionService).",
    ),
    _must(
        "ADKLIST-001",
        "list_sessions lists every session of the app and user, once",
        "list_sessions(app_name, user_id) returns each session of that app and user that "
        "exists, once, and no other; with user_id=None each session of the app "
        "(the docstring).",
    ),
    _must(
        "ADKDEL-001",
        "delete_session deletes the session, and only it",
        "After delete_session the session reads None, is not listed, takes no append "
        "(SessionNotFoundError) and a session created again with its id starts without "
        "its events; no other session loses anything, and app and user state stay "
        "(InMemorySessionService).",
    ),
    _must(
        "ADKISO-001",
        "Apps, users and sessions are apart",
        "A call on one (app_name, user_id, session_id) never changes or returns what "
        "another holds: names that differ only in case, in a separator ('-', '_', ':') or "
        "in Unicode normalisation are different names. Silent in the docs; they are the "
        "only names a conversation and its user have.",
    ),
    _must(
        "ADKSTALE-001",
        "An append through a stale session object is refused",
        "append_event through a session object read before another append to the stored "
        "session (by another caller, process or request) raises StaleSessionError and "
        "stores nothing, so that of appends made at once through objects of one reading, "
        "one is stored (BaseSessionService.append_event: 'When a persistent implementation "
        "detects that the supplied session has been superseded'). For services declared "
        "durable (persistent).",
        Capability.DURABLE,
    ),
    _must(
        "ADKMP-001",
        "Callers at once lose nothing",
        "Calls made at once by several tasks of one process on one service have the "
        "outcome of some order of them one at a time: no event lost, duplicated or "
        "reordered, no state delta lost. Silent in the docs; an agent server runs requests "
        "at once.",
    ),
    _must(
        "ADKMP-002",
        "Services in several processes lose nothing",
        "Calls made at once through services of one store in several processes have the "
        "outcome of some order of them one at a time, a stale object's append refused as "
        "in one process. For services declared multi_process: a deployment with several "
        "workers relies on it.",
        Capability.MULTI_PROCESS,
    ),
    _must(
        "ADKSRV-001",
        "A killed server keeps every answered call",
        "After the database server a session service keeps its data in is killed at any moment of "
        "its calls and started again, the service reads as some of its calls in order left it, "
        "with every call answered before the kill among them and the call cut short whole "
        "or absent. For services declared durable that take their server's URL from the "
        "options they are opened with (dsn): a server restarts after a crash, and the next request reads what it kept.",
        Capability.DURABLE,
    ),
    _must(
        "ADKSRV-002",
        "A cut connection keeps every answered call",
        "When a session service's connections to its database server are cut at any byte of its "
        "calls (a response lost, a request torn, a reset), every call answered before "
        "reads back afterwards, and every call that raised is whole or absent. For "
        "services that take their server's URL from the options they are opened with "
        "(dsn): networks drop connections, and a request retried after the error reads what was kept.",
    ),
    _must(
        "ADKSRV-003",
        "A power cut of the server's host keeps every answered call",
        "After a power cut of the host of the database server a session service keeps its data in, "
        "at any moment of its calls, the server started again on what its disk kept "
        "reads as some of the calls in order left it, with every call answered before the "
        "cut among them and the call in flight whole or absent. For services declared "
        "durable that take their server's URL from the options they are opened with "
        "(dsn): an answered call is what the next request starts from.",
        Capability.DURABLE,
    ),
    _must(
        "ADKKILL-001",
        "A killed writer leaves whole calls",
        "A process killed at any moment of its calls leaves the store as some of its calls "
        "in order left it: every call answered before the kill reads back, and the call cut "
        "short is whole or absent (no event without its state delta, no session half "
        "deleted). Silent in the docs; an agent's process can die at any moment. Checked "
        "for services that keep their data in files under the store's directory.",
    ),
    _must(
        "ADKPOWER-001",
        "A power loss keeps every answered call",
        "After a power loss at any moment of a writer's calls, the store reads as some of "
        "its calls in order left it, with every call answered before the loss among them "
        "and the call in flight whole or absent. For services declared durable that keep "
        "their data in files under the store's directory.",
        Capability.DURABLE,
    ),
)
"""The adk_session suite's rules, in catalog order."""
