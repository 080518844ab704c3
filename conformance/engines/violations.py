"""How a check says which rule a backend broke."""

from __future__ import annotations

from ...spec import RULES_BY_ID

__all__ = ["RuleViolation", "expect"]


class RuleViolation(AssertionError):
    """A backend did something a rule forbids.

    ``rule_id`` names the rule, ``message`` says what was seen against what the
    rule (or the model) requires. Raised by checks and the stateful machines; the
    runner turns it into a failed rule in the report.
    """

    def __init__(self, rule_id: str, message: str) -> None:
        if rule_id not in RULES_BY_ID:
            raise KeyError(f"RuleViolation names unknown rule {rule_id!r}")
        super().__init__(f"[{rule_id}] {message}")
        self.rule_id = rule_id
        self.message = message

    def __reduce__(self) -> tuple[type[RuleViolation], tuple[str, str]]:
        return (type(self), (self.rule_id, self.message))


def expect(condition: bool, rule_id: str, message: str) -> None:
    """Raise `RuleViolation(rule_id, message)` unless ``condition`` holds."""
    if not condition:
        raise RuleViolation(rule_id, message)
