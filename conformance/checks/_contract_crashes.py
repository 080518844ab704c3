"""The crash checks of a contract's store, shared by the framework suites.

A framework suite (LangGraph savers, OpenAI Agents sessions) checks its store with a
writer killed after each of its file-changing system calls and with the power-loss
states of a traced writer, both through the contract engines; what differs is the
contract, the program, the rule a finding is filed under, and which findings keep
the rule that named their cause (an add kept in part is that, whether a kill or a
power loss cut it). The check functions stay in their suite's module and call these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..engines.contract.contract import Call
from ..engines.contract.violations import RuleViolation
from ..engines.crash.contract_kills import killed_at_each_call
from ..engines.crash.contract_power_loss import TraceUnusable, power_loss_states
from ..engines.crash.recorder import tracer_unavailable
from ..engines.crash.stopper import stopper_unavailable
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised

__all__ = ["killed_writer", "power_cut_writer"]


def _skip_when_kept_elsewhere(h: Harness, what: str, fault: str) -> None:
    """Skip, before any writer starts, when the factory says its stores keep their data
    elsewhere (`checkpointspec.spec.DropsStores`): ``fault`` cannot reach it."""
    if h.run.probe.external_storage:
        raise CheckSkipped(
            f"{what} keeps its data outside the store's directory, its factory says (it "
            f"carries drops_stores: a store on a server), which {fault}"
        )


def _filed(found: RuleViolation, rule_id: str, shape: str, causes: frozenset[str]) -> RuleViolation:
    """``found`` as ``rule_id``'s finding, unless its rule is one of ``causes``."""
    if found.rule_id in causes:
        return found
    filed = RuleViolation(rule_id, found.message, shape=shape)
    filed.__cause__ = found
    return filed


async def killed_writer(
    h: Harness,
    contract_ref: str,
    program: Callable[[], Awaitable[Sequence[Call]]],
    rule_id: str,
    *,
    what: str,
    causes: frozenset[str] = frozenset(),
) -> None:
    """Judge a writer of the calls ``program`` gives (once this machine can hold one)
    killed after each of its file-changing system calls (a seeded sample of the
    profile's ``kill_states`` of them when there are more); a finding is ``rule_id``'s (or
    its own, when its rule is among ``causes``). ``what`` names the store in a skip's
    reason ("the saver")."""
    _skip_when_kept_elsewhere(h, what, "a killed process cannot leave half-written")
    reason = stopper_unavailable()
    if reason is not None:  # this machine's lack, not the store's: nothing is judged
        raise NothingExercised(f"writers cannot be held at a system call here: {reason}")
    calls = await program()  # its own findings, made without a fault, are not the kill's
    try:
        covered = await killed_at_each_call(
            contract_ref,
            h.target,
            h.root,
            calls,
            budget=h.profile.kill_states,
            seed=h.seed,
        )
    except RuleViolation as found:
        shape = "a state a killed writer left that no prefix of its calls gives"
        raise _filed(found, rule_id, shape, causes) from found
    if covered.calls == 0:
        raise CheckSkipped(
            f"{what} changed no file under the store's directory: it keeps its data "
            "elsewhere (in memory, on a server), which a killed process cannot leave half-written"
        )
    if not covered.killed:
        raise NothingExercised(f"no writer was held at any of its {covered.calls} system calls")
    sampled = (
        " (a seeded sample: the profile's kill_states)"
        if covered.calls > h.profile.kill_states
        else ""
    )
    h.measure(f"a writer killed at {len(covered.killed)} of {covered.calls} system calls{sampled}")


async def power_cut_writer(
    h: Harness,
    contract_ref: str,
    program: Callable[[], Awaitable[Sequence[Call]]],
    rule_id: str,
    *,
    what: str,
    causes: frozenset[str] = frozenset(),
) -> None:
    """Judge the power-loss states (the profile's ``traced_states`` of them) of a traced
    writer of the calls ``program`` gives (once this machine can trace one); a finding is
    ``rule_id``'s (or its own, when its rule is among ``causes``). ``what`` names the
    store in a skip's reason."""
    _skip_when_kept_elsewhere(h, what, "a power loss here cannot reach")
    reason = tracer_unavailable()
    if reason is not None:  # this machine's lack, not the store's: nothing is judged
        raise NothingExercised(f"a writer cannot be traced here: {reason}")
    calls = await program()  # its own findings, made without a fault, are not the crash's
    try:
        covered = await power_loss_states(
            contract_ref,
            h.target,
            h.root,
            calls,
            budget=h.profile.traced_states,
            seed=h.seed,
        )
    except RuleViolation as found:
        shape = "a state a power loss left that no prefix of the answered calls gives"
        raise _filed(found, rule_id, shape, causes) from found
    except TraceUnusable as exc:
        raise NothingExercised(f"the writer's trace cannot be judged: {exc}") from exc
    if covered.operations == 0:
        raise CheckSkipped(
            f"{what} changed no file under the store's directory: it keeps its data "
            "elsewhere (in memory, on a server), which a power loss here cannot reach"
        )
    h.measure(
        f"{covered.states} of {covered.possible} crash states judged "
        f"({covered.operations} store operations traced)"
    )
