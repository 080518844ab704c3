"""The OpenAI Agents session contract as code: its rules, its model, its judge.

A contract beside the checkpointer's and LangGraph's: what the OpenAI Agents SDK's
``Session`` protocol (``get_items(limit)``, ``add_items``, ``pop_item``,
``clear_session``) promises. Like the rest of `checkpointspec.spec` it is pure: no
SDK import, no I/O. `rules` numbers the clauses (the openai_session suite of the
catalog), `model` is the sequential oracle, `judge` the rule an answer breaks.
"""

from .judge import CLEARED_BY_A_CONFUSABLE_ID, CLEARED_BY_ANOTHER_ID, Judgement, judge
from .model import OPERATIONS, WRITES, SessionsState, answer_on, encoded, step
from .rules import OPENAI_SESSION_DECLARABLE, OPENAI_SESSION_RULES

__all__ = [
    "CLEARED_BY_ANOTHER_ID",
    "CLEARED_BY_A_CONFUSABLE_ID",
    "OPENAI_SESSION_DECLARABLE",
    "OPENAI_SESSION_RULES",
    "OPERATIONS",
    "WRITES",
    "Judgement",
    "SessionsState",
    "answer_on",
    "encoded",
    "judge",
    "step",
]
