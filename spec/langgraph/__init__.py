"""The LangGraph checkpoint saver contract as code: its rules, its model, its judge.

A second contract beside the checkpointer's: what a LangGraph
``BaseCheckpointSaver`` (``put``, ``put_writes``, ``get_tuple``, ``list``,
``delete_thread`` and the extended ``delete_for_runs``, ``copy_thread``,
``prune``) promises. Like the rest of `checkpointspec.spec` it is pure: no
LangGraph import, no I/O. `rules` numbers the clauses (the langgraph suite of the
catalog), `model` is the sequential oracle, `calls` the calls as plain data and
what each does to the model, `judge` the rule an answer breaks.
"""

from .calls import EXTENDED_OPERATIONS, OPERATIONS, READS, apply, prepare
from .judge import difference, rule_for
from .model import SPECIAL_CHANNELS, SaverState, TupleView, group_order
from .rules import LANGGRAPH_RULES

__all__ = [
    "EXTENDED_OPERATIONS",
    "LANGGRAPH_RULES",
    "OPERATIONS",
    "READS",
    "SPECIAL_CHANNELS",
    "SaverState",
    "TupleView",
    "apply",
    "difference",
    "group_order",
    "prepare",
    "rule_for",
]
