"""How a check says which rule a backend broke, or which SHOULD rule it does not meet."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from ....spec import RULES_BY_ID
from ....spec.divergences import Divergence, crash_named

__all__ = ["RuleViolation", "RuleWarning", "expect"]


class RuleViolation(AssertionError):
    """A backend did something a rule forbids.

    ``rule_id`` names the rule, ``message`` says what was seen against what the
    rule (or the model) requires. Raised by checks and the stateful machines; the
    runner turns it into a failed rule in the report. ``also`` names rules the same
    evidence breaks as well (a batch torn by a kill breaks APPEND-003 and KILL-001):
    each is reported as following from ``rule_id``, so that its row fails too.
    ``catalog`` is the rule table of the contract broken: the checkpointer
    contract's unless a check of another contract says which
    (`checkpointspec.conformance.engines.contract.contract.Contract.rules_by_id`).

    Where the raiser knows them, ``call`` is the failing call as the kit made it
    (``append('s1', [...], expected_head=2)``), ``expected`` what the contract (or the
    model) allows there and ``got`` what came back; each is "" when not known. The
    message says them too: these carry them as values into the report's finding.
    ``shape`` names the divergence without the example's values, where the raiser
    judged it by the table of divergences (`checkpointspec.spec.divergences`), and
    ``otherwise`` the other explanation of the same answer that table kept, if any
    (`checkpointspec.spec.divergences.Divergence.otherwise`).
    """

    def __init__(
        self,
        rule_id: str,
        message: str,
        also: tuple[str, ...] = (),
        *,
        catalog: Mapping[str, object] = RULES_BY_ID,
        call: str = "",
        expected: str = "",
        got: str = "",
        shape: str = "",
        otherwise: tuple[str, str] | None = None,
    ) -> None:
        for rule in (rule_id, *also):
            if rule not in catalog:
                raise KeyError(f"RuleViolation names unknown rule {rule!r}")
        super().__init__(f"[{rule_id}] {message}")
        self.rule_id = rule_id
        self.message = message
        self.also = tuple(r for r in also if r != rule_id)
        self.call = call
        self.expected = expected
        self.got = got
        self.shape = shape
        self.otherwise = otherwise

    @classmethod
    def of(cls, divergence: Divergence, message: str) -> RuleViolation:
        """The violation of ``divergence``'s rule, as its table named it, with its facts."""
        return cls(
            divergence.rule,
            message,
            call=divergence.call,
            expected=divergence.expected,
            got=divergence.got,
            shape=divergence.shape,
            otherwise=divergence.otherwise,
        )

    @classmethod
    def or_crash(cls, rule_id: str, message: str, operation: str, error_name: str) -> RuleViolation:
        """The violation of ``rule_id`` (the check's) where ``operation`` raised
        ``error_name`` instead of doing what the check needed of it, keeping that
        operation's crash as the other explanation when the error is one
        (`checkpointspec.spec.divergences.crash_named`): a worker that ended on it, an
        error reply, a stress history's unexplained errors. Where the same crash is
        seen plainly elsewhere in the run it is the defect (`roots.resolved`)."""
        crashed = crash_named(operation, error_name) if error_name else None
        return cls(
            rule_id,
            message,
            got=f"raised {error_name}" if error_name else "",
            shape=crashed[1] if crashed else "",
            otherwise=crashed,
        )

    def __reduce__(
        self,
    ) -> tuple[
        Callable[..., RuleViolation],
        tuple[type[RuleViolation], str, str, tuple[str, ...]],
        dict[str, object],
    ]:
        # Checked once, where it was made: unpickled in another process, whose
        # contract may not be the checkpointer's, it is taken as it comes.
        facts: dict[str, object] = {
            "call": self.call,
            "expected": self.expected,
            "got": self.got,
            "shape": self.shape,
            "otherwise": self.otherwise,
        }
        return (_unpickled, (type(self), self.rule_id, self.message, self.also), facts)


def _unpickled(
    cls: type[RuleViolation], rule_id: str, message: str, also: tuple[str, ...]
) -> RuleViolation:
    violation = cls.__new__(cls)
    AssertionError.__init__(violation, f"[{rule_id}] {message}")
    violation.rule_id, violation.message, violation.also = rule_id, message, also
    violation.call = violation.expected = violation.got = violation.shape = ""
    violation.otherwise = None
    return violation


class RuleWarning(msgspec.Struct, frozen=True):
    """A SHOULD rule the backend does not meet, seen without failing the check.

    ``rule_id`` names the rule and ``message`` says what was seen. Made where the check
    sees it (`Harness.warn`, a machine's listing) and carried as it is to the report
    (`CheckResult.warned`), where it decides its own rule's verdict only.
    """

    rule_id: str
    message: str

    @property
    def text(self) -> str:
        """The warning for people: ``[RULE-ID] message``."""
        return f"[{self.rule_id}] {self.message}"


def expect(condition: bool, rule_id: str, message: str, *, shape: str = "") -> None:
    """Raise `RuleViolation(rule_id, message)` unless ``condition`` holds; ``shape``
    names the divergence without the example's values, where the table has a name."""
    if not condition:
        raise RuleViolation(rule_id, message, shape=shape)
