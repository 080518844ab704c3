"""The ADK session service contract as code: its rules, its model, its judge.

A contract beside the checkpointer's, LangGraph's and the OpenAI Agents session's:
what Google ADK's ``BaseSessionService`` (``create_session``, ``get_session``,
``list_sessions``, ``delete_session``, ``append_event``) promises. Like the rest of
`checkpointspec.spec` it is pure: no ADK import, no I/O. `rules` numbers the clauses
(the adk_session suite of the catalog), `model` is the sequential oracle, `judge`
the rule an answer breaks.
"""

from .judge import Judgement, judge
from .model import (
    OPERATIONS,
    WRITES,
    AdkState,
    Key,
    Refused,
    encoded,
    event_number,
    event_text,
    split_delta,
    step,
)
from .rules import ADK_SESSION_DECLARABLE, ADK_SESSION_RULES

__all__ = [
    "ADK_SESSION_DECLARABLE",
    "ADK_SESSION_RULES",
    "OPERATIONS",
    "WRITES",
    "AdkState",
    "Judgement",
    "Key",
    "Refused",
    "encoded",
    "event_number",
    "event_text",
    "judge",
    "split_delta",
    "step",
]
