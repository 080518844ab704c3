"""Small tools the checks share: state snapshots, error expectations, property runs."""

from __future__ import annotations

import asyncio
import bdb
import contextlib
import functools
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import ParamSpec, TypeVar, cast

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from ...spec import Capability, Checkpointer, Codec, StoredEvent, StoreHooks
from ..engines.contract.outcomes import Err, run_backend
from ..engines.contract.violations import RuleViolation, expect
from ..engines.machines.storage import CheckpointerMachine, MachineEnv
from ..engines.processes.client import Opened, WorkerClient, hello, started_workers
from ..engines.run.harness import Harness, read_all
from ..engines.search.budget import example_failed
from ..engines.search.exploration import explore, rejecting_tolerated, tolerated_violation
from ..engines.search.replay import (
    REPORTING_PHASES,
    SEARCH_PHASES,
    Reproduction,
    kit_settings,
    replayable,
    run_exactly,
)

__all__ = [
    "MODEL_OBSERVED",
    "SliceSpent",
    "Snapshot",
    "append_five",
    "changed_files",
    "check_whole_batches",
    "expect",
    "expect_error",
    "explore_runs",
    "fingerprint",
    "hooks_of",
    "listed_mtime",
    "opened_workers",
    "property_settings",
    "run_machine",
    "run_model_based",
    "run_property",
    "snapshot",
    "spin",
    "unchanged",
    "within_slice",
]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


E = TypeVar("E", bound=BaseException)


Snapshot = tuple[tuple[str, ...], dict[str, tuple[tuple[int, object], ...]]]


async def snapshot(cp: Checkpointer, session_ids: Iterable[str] = ()) -> Snapshot:
    """The listed ids and the (seq, event) pairs of every listed or named session.

    Without LIST the listing is left out (empty) and only the named sessions are read.
    """
    listed: tuple[str, ...] = ()
    if Capability.LIST in cp.capabilities:
        listed = tuple(sorted(info.id for info in await cp.list_sessions()))
    logs: dict[str, tuple[tuple[int, object], ...]] = {}
    for sid in sorted(set(listed) | set(session_ids)):
        logs[sid] = tuple((s.seq, s.event) for s in await read_all(cp, sid))
    return listed, logs


async def listed_mtime(cp: Checkpointer, session_id: str, after: str) -> float:
    """The mtime ``list_sessions`` gives ``session_id``, which ``after`` left existing.

    Raises `RuleViolation` (LIST-001) when the session is not listed: a session
    appended to and not deleted is listed, even with no events left.
    """
    listed = await cp.list_sessions()
    for info in listed:
        if info.id == session_id:
            return info.mtime
    raise RuleViolation(
        "LIST-001",
        f"{session_id!r} is not listed after {after}; list_sessions shows "
        f"{[info.id for info in listed]}",
    )


async def unchanged(cp: Checkpointer, before: Snapshot, rule_id: str, call: str) -> None:
    """Fail ``rule_id`` unless the store looks exactly as in ``before``."""
    after = await snapshot(cp, before[1].keys())
    if after != before:
        changed = [
            sid for sid in set(after[1]) | set(before[1]) if after[1].get(sid) != before[1].get(sid)
        ]
        raise RuleViolation(
            rule_id,
            f"{call} changed the store: listed {list(before[0])} -> {list(after[0])}; sessions changed: {changed}",
        )


async def expect_error(
    call: Callable[[], Awaitable[object]], error: type[E], rule_id: str, description: str
) -> E:
    """Run ``call`` and fail ``rule_id`` unless it raises ``error``."""
    outcome = await run_backend(call)
    if not isinstance(outcome, Err):
        raise RuleViolation(
            rule_id, f"{description} returned {outcome.value!r}; expected {error.__name__}"
        )
    if not isinstance(outcome.error, error):
        raise RuleViolation(
            rule_id,
            f"{description} raised {type(outcome.error).__name__}: {outcome.error}; expected {error.__name__}",
        )
    return outcome.error


def property_settings(h: Harness) -> settings:
    """Hypothesis settings for a property check under the run's profile (`kit_settings`).

    No explain phase: its advice is for the authors of a test, and a failure panel is
    read by a backend's author (`checkpointspec.conformance.running.failures`).
    """
    return kit_settings(max_examples=h.profile.property_examples, phases=REPORTING_PHASES)


def run_property(
    h: Harness,
    strategy: st.SearchStrategy[T],
    body: Callable[[Checkpointer, T], Coroutine[object, object, None]],
) -> None:
    """Run ``body`` on one fresh store per generated example, on a private loop.

    Hypothesis shrinks a failing example and attaches it, and its reproduce blob, to
    the RuleViolation's notes. A failure is recorded and the search goes on with its
    rule tolerated (`explore_runs`). With ``--reproduce`` (``h.replay``) only the
    recorded example runs (`checkpointspec.conformance.engines.search.replay`).
    """
    loop = asyncio.new_event_loop()

    @property_settings(h)
    @given(strategy)
    @rejecting_tolerated
    @within_slice(h)
    def test(value: T) -> None:
        async def one() -> None:
            cp = await h.open(h.new_store())
            try:
                await body(cp, value)
            finally:
                await cp.close()

        loop.run_until_complete(one())

    try:
        explore_runs(
            h,
            lambda: run_exactly(replayable(test, h.seed, _reproduction(h)), h.replay),
            h.profile.property_examples,
        )
    finally:
        loop.close()


def explore_runs(h: Harness, run_once: Callable[[], None], examples: int) -> None:
    """``run_once`` (the check's Hypothesis run of ``examples`` examples, each admitted by
    `within_slice`) in exploration rounds (`explore`): every failure is recorded in
    ``h.findings`` and the next round tolerates its rule, up to the profile's
    ``exploration_rounds`` or the end of the check's slice of the time budget. A round
    the slice ended is a pass: its examples after the slice were left out, not failed.
    A replay (``--reproduce``) runs once, as recorded."""
    if h.replay is not None:
        run_once()
        return
    h.slice.examples_per_round = examples

    def one_round() -> None:
        with h.slice.hypothesis_round(), contextlib.suppress(SliceSpent):
            run_once()

    rounds = h.profile.exploration_rounds
    h.explored = explore(one_round, h.findings, rounds, h.run.tolerated, h.slice.spent)
    if not h.explored.complete and h.explored.rounds < rounds and h.slice.spent():
        h.slice.stopped(f"explored {h.explored.rounds} of up to {rounds} rounds")


class SliceSpent(bdb.BdbQuit):
    """Raised by a Hypothesis example that starts after its check's slice of the time
    budget is spent, to end the run there (`within_slice`). Hypothesis (6.170.24 on)
    hands a `bdb.BdbQuit` (a debugger's "quit") straight back, as it does a KeyboardInterrupt:
    not a failure, nothing shrunk, nothing recorded, so the examples it ran before
    stay as consistent as if the run had ended at its count of examples."""


def within_slice(h: Harness) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A Hypothesis example (a property's body, a state machine's factory) that, once
    ``h``'s slice of the time budget is spent (`Slice.admits_example`), ends the run
    (`SliceSpent`) instead of reaching the backend, and that tells the slice when it
    fails, so that the failure's shrinking and final replay run whatever the time."""

    def decorate(example: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(example)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if h.replay is None and not h.slice.admits_example(
                final_replay=current_build_context().is_final
            ):
                raise SliceSpent
            try:
                return example(*args, **kwargs)
            except UnsatisfiedAssumption:
                raise
            except Exception as exc:
                if tolerated_violation(exc) is None:
                    example_failed()
                raise

        return run

    return decorate


def _reproduction(h: Harness) -> Reproduction | None:
    return h.replay.reproduction if h.replay is not None else None


def fingerprint(path: Path) -> dict[str, str]:
    """SHA-256 of every file under ``path``, by relative name, and every directory
    (as ``"directory"``): what "untouched" means, byte for byte."""
    prints: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            prints[str((Path(dirpath) / name).relative_to(path))] = "directory"
        for name in filenames:
            full = Path(dirpath) / name
            prints[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return prints


def changed_files(before: dict[str, str], after: dict[str, str]) -> str:
    """The names that differ between two fingerprints, in words (empty when none do)."""
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    altered = sorted(n for n in before.keys() & after.keys() if before[n] != after[n])
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("created", added), ("removed", removed), ("changed", altered))
        if names
    ]
    return "; ".join(parts)


async def hooks_of(h: Harness) -> StoreHooks:
    """The backend's `StoreHooks`, from a handle opened and closed on a scratch store of
    its own: opening one on the store the hook will change could prepare that store
    (create a table, switch a journal mode) before the hook runs, and the check would
    then never see the backend do it to the store it must leave untouched."""
    cp = await h.open(h.new_store())
    await cp.close()
    assert isinstance(cp, StoreHooks)
    return cp


MODEL_OBSERVED = (
    "SEQ-002",
    "SEQ-003",
    "SEQ-004",
    "EVENT-001",
    "APPEND-001",
    "APPEND-002",
    "APPEND-003",
    "APPEND-004",
    "ARG-001",
    "ARG-002",
    "ARG-003",
    "ID-002",
    "READ-001",
    "READ-002",
    "READ-003",
    "HEAD-001",
    "LIST-001",
    "LIST-002",
    "LIST-003",
    "DELETE-001",
    "DELETE-002",
    "TRUNC-001",
    "TRUNC-002",
    "TRUNC-003",
    "TRUNC-004",
    "TRUNC-005",
    "CAP-001",
    "GEN-001",
    "GEN-002",
    "HANDLE-001",
    "CLOSE-001",
    "CLOSE-002",
    "DUR-001",
    "INTEG-001",
)


def run_machine(
    h: Harness,
    make: Callable[[], RuleBasedStateMachine],
    *,
    examples: int,
    steps: int,
    shrink: bool = True,
) -> None:
    """Run the state machine that ``make`` builds, under the run's seed.

    A failure's minimal sequence of steps and its reproduce blob arrive as notes on
    the RuleViolation, which the runner reports with it; the machine then runs again
    with that rule tolerated, for the next finding (`explore_runs`). ``shrink=False`` reports a
    failing run as it was found, for machines whose every replay is expensive. With
    ``--reproduce`` (``h.replay``) only the recorded run of steps is replayed. A
    check runs at most one machine or property: a blob names one run.
    """
    # Hypothesis takes any factory of machines, though it annotates a class.
    factory = cast(
        "type[RuleBasedStateMachine]",
        replayable(within_slice(h)(make), h.seed, _reproduction(h)),
    )
    configured = kit_settings(
        max_examples=examples,
        phases=REPORTING_PHASES if shrink else SEARCH_PHASES,
        stateful_step_count=steps,
    )
    explore_runs(
        h,
        lambda: run_exactly(
            lambda: run_state_machine_as_test(factory, settings=configured), h.replay
        ),
        examples,
    )


def run_model_based(h: Harness, codec: type[Codec] | None) -> None:
    """Run the model-based machine (`CheckpointerMachine`) against the backend."""
    # Its bad batches (ARG-003) never reach a backend behind the stdio client.
    h.judged_on_the_kit_side(*MODEL_OBSERVED)
    env = MachineEnv(
        target=h.target,
        capabilities=h.capabilities,
        root=h.root,
        codec_factory=codec,
        warnings=h.warnings,
    )
    run_machine(
        h,
        lambda: CheckpointerMachine(env),
        examples=h.profile.stateful_examples,
        steps=h.profile.stateful_steps,
    )


async def append_five(cp: Checkpointer, h: Harness, sid: str = "s") -> None:
    await cp.append(sid, [h.prompt(f"{sid} {i}") for i in range(1, 6)])


def check_whole_batches(log: list[StoredEvent], batches: list[list[str]], rule_id: str) -> None:
    seqs = [s.seq for s in log]
    expect(
        seqs == list(range(1, len(log) + 1)),
        rule_id,
        f"seqs are not contiguous from 1: {seqs[:20]}",
    )
    texts = [getattr(s.event, "text", None) for s in log]
    position = {text: i for i, text in enumerate(texts)}
    expect(len(position) == len(texts), rule_id, "some event was stored twice")
    for batch in batches:
        places = [position.get(text) for text in batch]
        if all(p is None for p in places):
            continue
        expect(
            None not in places
            and places == list(range(places[0] or 0, (places[0] or 0) + len(batch))),
            rule_id,
            f"batch {batch[0].rsplit(':', 1)[0]} is not stored whole and contiguous: positions {places}",
        )


@contextlib.asynccontextmanager
async def opened_workers(
    h: Harness, count: int, rule_id: str, reply_timeout: float = 60.0
) -> AsyncIterator[list[WorkerClient]]:
    """``count`` worker processes, each with its own handle on ``h.path``, every one
    open before this yields; those still running at the end are killed.

    A backend that refuses a worker's ``hello`` fails ``rule_id``.
    """
    async with started_workers(h.target, count, reply_timeout) as workers:
        for n, worker in enumerate(workers):
            reply = await worker.call(hello(str(h.path), h.target.options))
            if not isinstance(reply, Opened):
                raise RuleViolation(rule_id, f"worker {n} could not open the store: {reply}")
        yield workers


def spin(seconds: float) -> None:
    """Wait ``seconds`` on the CPU: an event-loop sleep is too coarse for sub-millisecond aim."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass
