"""Complete exploration: a check that finds a violation records it and keeps looking.

A Hypothesis run stops at its first failure, and a backend with one frequent bug
(it accepts the empty session id) would hide every other one behind it: every
example fails on that bug first. So the kit runs a check's Hypothesis test in
rounds (`explore`). Each round that fails records its shrunk violation as a
`Found` finding and *tolerates* that finding's rule in the rounds after it, until
a round passes, a round finds nothing new, or the profile's rounds are spent.

Tolerating a rule excludes what broke it, so that the rest of the backend is
explored and nothing is blamed on the consequences of a bug already found:

- a property example that breaks a tolerated rule is rejected (`hypothesis.reject`),
  so Hypothesis draws another;
- a state machine's run that breaks a tolerated rule *diverges*: its model no longer
  describes the store, so every later step and invariant of that run does nothing
  (`rule`, `initialize` and `invariant` here wrap Hypothesis' decorators of the same names, and
  the machine carries `Diverging.diverged`).

Every finding of a later round was thus reached without any tolerated rule being
broken before it in its example: it is its own departure from the model, and its
shrunk example replays on its own (``--reproduce``), since the rules tolerated in
its round never come into play in it.

A backend that answers the same calls differently from one run to the next (a race,
a per-handle cache, a hidden random) makes Hypothesis report that the runs of one
example went differently (a `Flaky`) instead of a failure. That is evidence too:
each violation its runs raised is recorded like a round's violation
(`violations_in`), and a `Flaky` with none in it ends the exploration and
propagates, for the runner to report (`run_failures`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar, cast

import msgspec
from hypothesis import note, reject
from hypothesis import stateful as hypothesis_stateful
from hypothesis.errors import Flaky, StopTest, UnsatisfiedAssumption
from hypothesis.strategies import SearchStrategy

from ..contract.violations import RuleViolation
from .budget import example_failed

__all__ = [
    "Diverging",
    "Explored",
    "Found",
    "explore",
    "initialize",
    "invariant",
    "is_tolerated",
    "rejecting_tolerated",
    "rule",
    "run_failures",
    "tolerated_violation",
    "tolerating",
    "violations_in",
]

P = ParamSpec("P")
R = TypeVar("R")

_TOLERATED: ContextVar[frozenset[str]] = ContextVar("tolerated_rules", default=frozenset())


@contextlib.contextmanager
def tolerating(rule_ids: frozenset[str]) -> Iterator[None]:
    """While open, violations of ``rule_ids`` exclude what broke them (see the module)."""
    token = _TOLERATED.set(rule_ids)
    try:
        yield
    finally:
        _TOLERATED.reset(token)


def is_tolerated(violation: RuleViolation) -> bool:
    """Whether ``violation``'s rule was found in an earlier round of this check."""
    return violation.rule_id in _TOLERATED.get()


def tolerated_violation(exc: BaseException) -> RuleViolation | None:
    """``exc`` if it is a violation of a tolerated rule, else None."""
    return exc if isinstance(exc, RuleViolation) and is_tolerated(exc) else None


class Found(msgspec.Struct, frozen=True):
    """One finding a check recorded and explored past: the violation, and the failure
    Hypothesis raised around it (its notes carry the shrunk steps and the blob)."""

    violation: RuleViolation
    raised: BaseException


def run_failures(exc: BaseException) -> list[BaseException]:
    """What the runs behind the failure ``exc`` raised: ``exc`` itself, every exception
    of a group, or, when Hypothesis reports that runs of the same example went
    differently (a `Flaky`: `FlakyFailure`, `FlakyStrategyDefinition`, `FlakyReplay`),
    what each of those runs raised as far as it tells: the members of its group, or
    the failure it was raised while handling. A run Hypothesis stopped or rejected
    there (`StopTest`, `UnsatisfiedAssumption`) raised nothing of the backend's, and a
    `Flaky` with nothing else in it gives none."""
    if isinstance(exc, Flaky):
        if isinstance(exc, BaseExceptionGroup):
            inner = list(exc.exceptions)
        else:
            handled = exc.__cause__ or exc.__context__
            inner = [handled] if handled is not None else []
        return [
            failure
            for e in inner
            for failure in run_failures(e)
            if not isinstance(failure, (StopTest, UnsatisfiedAssumption))
        ]
    if isinstance(exc, BaseExceptionGroup):
        return [failure for inner in exc.exceptions for failure in run_failures(inner)]
    return [exc]


def violations_in(exc: BaseException) -> list[RuleViolation]:
    """The violations ``exc`` shows (`run_failures`): the first, as the failure of one
    run; for a `Flaky` failure, the first of each rule among its runs' failures."""
    violations = [f for f in run_failures(exc) if isinstance(f, RuleViolation)]
    if not isinstance(exc, Flaky):
        return violations[:1]
    per_rule: dict[str, RuleViolation] = {}
    for violation in violations:
        per_rule.setdefault(violation.rule_id, violation)
    return list(per_rule.values())


class Explored(NamedTuple):
    """How a check's exploration went: the Hypothesis runs it made, and whether it ended
    on a run that found nothing new (``complete``) rather than on spent rounds."""

    rounds: int
    complete: bool


def explore(
    run_round: Callable[[], None],
    found: list[Found],
    rounds: int,
    tolerated: frozenset[str] = frozenset(),
    out_of_time: Callable[[], bool] = lambda: False,
) -> Explored:
    """Run ``run_round`` (one Hypothesis run of a check) until it passes, finds only what
    earlier rounds found, ``rounds`` rounds have run, or, after the first round,
    ``out_of_time()`` says the run's time cap is reached; each new
    violation goes to ``found``, its rule tolerated from the next round on
    (``tolerated``: from the first).

    The last round's failure, when rounds run out, is recorded like the others: the
    check ends with every finding recorded, and returns. A round whose runs went
    differently (a `Flaky`) records every new violation they raised (`violations_in`).
    An exception that holds no rule violation (the backend raised, the kit broke, a
    `Flaky` whose runs broke no rule) ends the exploration and propagates, the
    findings before it kept.
    """
    for ran in range(1, rounds + 1):
        if ran > 1 and out_of_time():
            return Explored(ran - 1, complete=False)
        seen = tolerated | {f.violation.rule_id for f in found}
        try:
            with tolerating(seen):
                run_round()
        except Exception as exc:
            violations = violations_in(exc)
            if not violations:
                raise
            new = [v for v in violations if v.rule_id not in seen]
            if not new:
                # A tolerated rule broken where it cannot be excluded (a machine's teardown):
                # the rounds cannot get past it, so what is left is unexplored.
                return Explored(ran, complete=False)
            found.extend(Found(violation, exc) for violation in new)
            continue
        return Explored(ran, complete=True)
    return Explored(rounds, complete=False)


class Diverging:
    """A state machine whose model stops describing the store once a tolerated rule is
    broken: ``diverged`` names that rule, and the `rule` and `invariant` decorators of
    this module skip every later step and invariant of the run."""

    diverged: str | None = None


M = TypeVar("M", bound=Diverging)


def _tolerant(
    step: Callable[Concatenate[M, P], R | None],
) -> Callable[Concatenate[M, P], R | None]:
    @functools.wraps(step)
    def run_step(machine: M, /, *args: P.args, **kwargs: P.kwargs) -> R | None:
        if machine.diverged is not None:
            return None
        try:
            return step(machine, *args, **kwargs)
        except RuleViolation as violation:
            if not is_tolerated(violation):
                example_failed()
                raise
            machine.diverged = violation.rule_id
            note(f"{violation.rule_id} found in an earlier round: the rest of this run is skipped")
            return None
        except Exception:
            example_failed()
            raise

    return run_step


_Decorator = Callable[[Callable[..., None]], Callable[..., None]]
# Hypothesis' overloads tell a rule with target bundles from one without; the kit's
# machines have none, and a dict of strategies matches no overload on its own.
_RULE = cast("Callable[..., _Decorator]", hypothesis_stateful.rule)
_INITIALIZE = cast("Callable[..., _Decorator]", hypothesis_stateful.initialize)


def rule(
    **arguments: SearchStrategy[object],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis' ``stateful.rule``, for a `Diverging` machine (see the module)."""

    def decorate(step: Callable[..., None]) -> Callable[..., None]:
        # functools.wraps carries a @precondition's mark over to the wrapper.
        return _RULE(**arguments)(_tolerant(step))

    return decorate


def initialize(
    **arguments: SearchStrategy[object],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis' ``stateful.initialize``, for a `Diverging` machine (see the module)."""

    def decorate(step: Callable[..., None]) -> Callable[..., None]:
        return _INITIALIZE(**arguments)(_tolerant(step))

    return decorate


def invariant() -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis' ``stateful.invariant``, for a `Diverging` machine (see the module)."""

    def decorate(check: Callable[..., None]) -> Callable[..., None]:
        return hypothesis_stateful.invariant()(_tolerant(check))

    return decorate


def rejecting_tolerated(body: Callable[P, R]) -> Callable[P, R]:
    """``body`` (a property example), rejected when it breaks a tolerated rule."""

    @functools.wraps(body)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return body(*args, **kwargs)
        except RuleViolation as violation:
            if is_tolerated(violation):
                reject()
            raise

    return run
