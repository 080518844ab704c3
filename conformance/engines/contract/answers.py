"""The type of every answer a backend gives, checked as it arrives.

A check reasons about the values the contract promises: ``head`` is an int, a
read yields `StoredEvent` values, a listing is a list of `SessionInfo`. An
answer of another type (None, a dict, a bool where an int is due) would make
the check fail on its own arithmetic or attribute access, a kit error that
names no rule. `check_answer` turns it into a `RuleViolation` of the rule that
defines the operation's answer before any check sees it.

Only the outer type is checked, not whether the value is right: that is every
check's own job.
"""

from __future__ import annotations

from typing import Final

from ....spec import IntegrityReport, SessionInfo, StoredEvent
from .violations import RuleViolation

__all__ = ["ANSWER_RULE", "check_answer", "check_read_item"]

ANSWER_RULE: Final[dict[str, str]] = {
    "append": "SEQ-003",
    "truncate": "TRUNC-001",
    "head": "HEAD-001",
    "generation": "GEN-001",
    "list_sessions": "LIST-001",
    "check_integrity": "INTEG-001",
    "read": "EVENT-001",
}
"""The rule that defines each operation's answer: the rule a wrongly typed answer breaks."""

_INT_ANSWERS: Final = frozenset({"append", "truncate", "head", "generation"})


def _int(value: object) -> bool:
    # bool is an int to Python, never a head or a generation to the contract.
    return isinstance(value, int) and not isinstance(value, bool)


def _wrong_type(operation: str, value: object, due: str) -> RuleViolation:
    return RuleViolation(
        ANSWER_RULE[operation],
        f"{operation} returned {type(value).__name__} {value!r:.200} where {due} is due",
        call=operation,
        expected=due,
        got=f"{type(value).__name__} {value!r:.200}",
    )


def check_answer(operation: str, value: object) -> None:
    """Raise `RuleViolation` if ``value``, returned by ``operation``, is not of the
    contract's type for it; operations not in `ANSWER_RULE` are not checked."""
    if operation in _INT_ANSWERS:
        if not _int(value):
            raise _wrong_type(operation, value, "an int")
    elif operation == "list_sessions":
        if not isinstance(value, list) or not all(isinstance(i, SessionInfo) for i in value):
            raise _wrong_type(operation, value, "a list of SessionInfo")
    elif operation == "check_integrity" and not isinstance(value, IntegrityReport):
        raise _wrong_type(operation, value, "an IntegrityReport")


def check_read_item(value: object) -> None:
    """Raise `RuleViolation` if ``value``, yielded by ``read``, is not a `StoredEvent`."""
    if not isinstance(value, StoredEvent):
        raise RuleViolation(
            ANSWER_RULE["read"],
            f"read yielded {type(value).__name__} {value!r:.200} where a StoredEvent is due",
            call="read",
            expected="a StoredEvent",
            got=f"{type(value).__name__} {value!r:.200}",
        )
