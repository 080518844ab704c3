"""How a check says which rule a backend broke."""

from __future__ import annotations

from ....spec import RULES_BY_ID

__all__ = ["RuleViolation", "expect"]


class RuleViolation(AssertionError):
    """A backend did something a rule forbids.

    ``rule_id`` names the rule, ``message`` says what was seen against what the
    rule (or the model) requires. Raised by checks and the stateful machines; the
    runner turns it into a failed rule in the report. ``also`` names rules the same
    evidence breaks as well (a batch torn by a kill breaks APPEND-003 and KILL-001):
    each is reported as following from ``rule_id``, so that its row fails too.

    Where the raiser knows them, ``call`` is the failing call as the kit made it
    (``append('s1', [...], expected_head=2)``), ``expected`` what the contract (or the
    model) allows there and ``got`` what came back; each is "" when not known. The
    message says them too: these carry them as values into the report's finding.
    """

    def __init__(
        self,
        rule_id: str,
        message: str,
        also: tuple[str, ...] = (),
        *,
        call: str = "",
        expected: str = "",
        got: str = "",
    ) -> None:
        for rule in (rule_id, *also):
            if rule not in RULES_BY_ID:
                raise KeyError(f"RuleViolation names unknown rule {rule!r}")
        super().__init__(f"[{rule_id}] {message}")
        self.rule_id = rule_id
        self.message = message
        self.also = tuple(r for r in also if r != rule_id)
        self.call = call
        self.expected = expected
        self.got = got

    def __reduce__(
        self,
    ) -> tuple[type[RuleViolation], tuple[str, str, tuple[str, ...]], dict[str, str]]:
        facts = {"call": self.call, "expected": self.expected, "got": self.got}
        return (type(self), (self.rule_id, self.message, self.also), facts)


def expect(condition: bool, rule_id: str, message: str) -> None:
    """Raise `RuleViolation(rule_id, message)` unless ``condition`` holds."""
    if not condition:
        raise RuleViolation(rule_id, message)
