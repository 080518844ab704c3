"""What the model-based machine stands on: one store driven beside `SpecModel`.

`MachineBase` owns the event loop every backend call runs on (Hypothesis'
stateful testing is synchronous), the handles on the store and their
counterparts on the model, and the ledger of every event appended. It runs one
operation on both sides and compares the outcomes, and when a read or a returned
head differs from the model's, it asks the ledger which rule the difference
proves broken. The operations themselves, and what each must satisfy, are
`checkpointspec.conformance.engines.machines.storage.CheckpointerMachine`'s.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

import msgspec
from hypothesis import note
from hypothesis.stateful import RuleBasedStateMachine

from ....backends.registry import BackendTarget
from ....backends.stdio.wire import StdioProtocolError
from ....spec import (
    Capability,
    CheckpointConflictError,
    Checkpointer,
    Codec,
    IntegrityReport,
    ModelEvent,
    ModelHandle,
    SessionEvent,
    SessionInfo,
    SpecModel,
    StoredEvent,
)
from ....spec.divergences import of_answer, of_listing
from ..contract.ledger import Ledger
from ..contract.outcomes import (
    Err,
    Ok,
    check_list_order,
    compare_log,
    compare_outcomes,
    make_event,
    marker_of,
    markers_of,
    read_all,
    run_backend,
    run_model,
)
from ..contract.violations import RuleViolation, RuleWarning
from ..search.exploration import Diverging
from ..search.transcripts import exchanged, new_run
from ..target.provenance import BackendHandle, open_checkpointer
from ..target.witness import note_made

__all__ = ["CURRENT", "MachineBase", "MachineEnv", "answer_text"]

T = TypeVar("T")
A = TypeVar("A")
M = TypeVar("M")

CURRENT = "current"
"""An expected head or generation drawn as "whatever the model says it is now"."""
PROBE_SESSION = "handles-probe"
"""The session `MachineBase.blame_unshared_handles` writes to: no step uses it."""


def answer_text(outcome: Ok[T] | Err) -> str:
    """What a call came to, as a run's transcript says it: ``returned 3``, ``raised
    CheckpointConflictError (actual 3)``. Only what a re-run of the same calls on a
    correct backend answers the same is said: a read's seqs, markers and kinds, not its
    times; a listing's ids, not its mtimes; an integrity report's verdict, not its
    wording; an error's type (and a conflict's actual head), not its message, which may
    name the run's store."""
    if isinstance(outcome, Err):
        error = outcome.error
        actual = f" (actual {error.actual})" if isinstance(error, CheckpointConflictError) else ""
        return f"raised {type(error).__name__}{actual}"
    return f"returned {_stable(outcome.value)}"


def _stable(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_stable(item) for item in value) + "]"
    if isinstance(value, StoredEvent):
        return f"{value.seq}:{type(value.event).__name__}({marker_of(value.event)!r})"
    if isinstance(value, SessionInfo):
        return repr(value.id)
    if isinstance(value, IntegrityReport):
        return f"ok={value.ok}"
    return repr(value)


def _answer_shape(operation: str, expected: object, got: object) -> str:
    divergence = of_answer(operation, expected, got)
    return divergence.shape if divergence is not None else ""


class MachineEnv(msgspec.Struct):
    """What every machine of one run is given: the backend and where to put stores.

    ``codec_factory`` makes each machine's codec (its handles' own, over ``target``'s);
    ``warnings`` collects SHOULD-rule findings (LIST-003) for the report.
    """

    target: BackendTarget
    capabilities: frozenset[Capability]
    root: Path
    codec_factory: Callable[[], Codec | None] | None = None
    warnings: list[RuleWarning] = msgspec.field(default_factory=list)
    keep_stores: bool = False
    """The backend keeps its stores' data elsewhere (a database server): an example's
    store directory stays for the check's end, where the backend drops what every
    directory names (`Harness.discard_store`)."""


class MachineBase(Diverging, RuleBasedStateMachine):
    """A fresh store under ``env.root`` with one handle, beside a fresh `SpecModel`."""

    def __init__(self, env: MachineEnv) -> None:
        super().__init__()
        self.env = env
        self.loop = asyncio.new_event_loop()
        self.factory = env.target.factory()
        self.path = Path(tempfile.mkdtemp(prefix="machine-", dir=env.root))
        self.codec = env.codec_factory() if env.codec_factory else None
        self.model = SpecModel(env.capabilities)
        self.handles: list[Checkpointer] = []
        self.model_handles: list[ModelHandle] = []
        # Every event appended, by marker: the handle that appended it, and its fate.
        self.ledger: Ledger[Checkpointer] = Ledger()
        # For a session the model does not hold: the call that must not have created it.
        self.made: dict[str, tuple[str, str]] = {}
        # How many truncates to its head each session took: none may move its generation.
        self.truncates_to_head: dict[str, int] = {}
        self.markers = itertools.count(1)
        new_run()
        self.open_handle_pair()

    # -- running ---------------------------------------------------------------------
    def run(self, coro: Coroutine[object, object, T]) -> T:
        return self.loop.run_until_complete(coro)

    def open_handle_pair(self) -> None:
        """One more handle on the store, and its counterpart on the model."""
        ctx = self.env.target.context(self.path, codec=self.codec)
        self.handles.append(self.run(open_checkpointer(self.factory, ctx)))
        self.model_handles.append(self.model.handle())
        exchanged(f"open handle {len(self.handles) - 1}", "opened")

    def pick(self, index: int) -> tuple[int, Checkpointer, ModelHandle]:
        i = index % len(self.handles)
        return i, self.handles[i], self.model_handles[i]

    def compare(
        self,
        operation: str,
        call: str,
        backend: Callable[[], Awaitable[A]],
        model: Callable[[], M],
        given: str = "",
    ) -> tuple[Ok[A] | Err, Ok[M] | Err]:
        """Run ``call`` on both sides; errors must match (`compare_outcomes`), values
        are the caller's to compare. ``given`` is what the call was given that ``call``
        does not say (see `exchanged`)."""
        expected = run_model(model)
        actual = self.run(run_backend(backend))
        note(
            f"{call} -> {'error ' + type(actual.error).__name__ if isinstance(actual, Err) else actual.value!r}"
        )
        exchanged(call, answer_text(actual), given)
        compare_outcomes(operation, actual, expected, call)
        return actual, expected

    def backend_call(self, call: str, backend: Callable[[], Awaitable[A]]) -> Ok[A] | Err:
        """Run ``call`` on the backend alone (no model counterpart), entered as `compare`
        enters a call."""
        return self.backend_calls([(call, backend)])[0]

    def backend_calls(
        self, calls: Sequence[tuple[str, Callable[[], Awaitable[A]]]]
    ) -> list[Ok[A] | Err]:
        """Run ``calls`` on the backend one after the other in one pass of the event loop
        (each awaited before the next starts, as `backend_call` would), entered in order:
        an invariant's dozen reads pay for starting the loop once."""

        async def in_turn() -> list[Ok[A] | Err]:
            return [await run_backend(backend) for _, backend in calls]

        outcomes = self.run(in_turn())
        for (call, _), outcome in zip(calls, outcomes, strict=True):
            exchanged(call, answer_text(outcome))
        return outcomes

    def backend_reads(
        self, handle_index: int, session_ids: Sequence[str]
    ) -> list[Ok[list[StoredEvent]] | Err]:
        """Every event of each of ``session_ids`` through handle ``handle_index``, the reads
        made in turn (`backend_calls` of one ``read`` each, transcript included), but
        asked of the handle at once (`BackendHandle.read_logs`): a stdio child that
        answers in order gets them in one write, the same reads at a fraction of the
        round trips."""
        cp = self.handles[handle_index]
        calls = [f"handle {handle_index}: read({s!r})" for s in session_ids]
        if not isinstance(cp, BackendHandle):
            return self.backend_calls(
                [(c, partial(read_all, cp, s)) for c, s in zip(calls, session_ids, strict=True)]
            )
        answers = self.run(cp.read_logs(session_ids))
        for answer in answers:
            if isinstance(answer, RuleViolation | StdioProtocolError):
                raise answer  # no answer to compare, as `run_backend` has it
        outcomes: list[Ok[list[StoredEvent]] | Err] = [
            Err(answer) if isinstance(answer, Exception) else Ok(answer) for answer in answers
        ]
        for call, outcome in zip(calls, outcomes, strict=True):
            exchanged(call, answer_text(outcome))
        return outcomes

    def teardown(self) -> None:
        try:
            for cp in self.handles:
                self.run(run_backend(cp.close))
        finally:
            self.loop.close()
            if not self.env.keep_stores:
                shutil.rmtree(self.path, ignore_errors=True)

    # -- drawn arguments -------------------------------------------------------------
    def new_batch(self, kinds: list[str]) -> list[SessionEvent]:
        """Events of these kinds, each with a marker no other event has."""
        return [make_event(kind, f"e{next(self.markers)}") for kind in kinds]

    def resolve(
        self, expected: int | str | None, session_id: str, generation: bool = False
    ) -> int | None:
        """A drawn expected head (or generation): `CURRENT` is the model's."""
        if expected != CURRENT:
            return expected if not isinstance(expected, str) else None
        if generation:
            return self.model.generation(session_id)
        return self.model.head(session_id)

    def seq_at(self, session_id: str, position: tuple[str, int]) -> int:
        """Resolve a drawn position: ``("back", n)`` is head - n (at least 0), ``("at", n)`` is n."""
        how, n = position
        return max(self.model.head(session_id) - n, 0) if how == "back" else n

    # -- judging -----------------------------------------------------------------------
    def remember(self, operation: str, session_id: str, model: Ok[M] | Err) -> None:
        """After ``operation`` on ``session_id`` (the model's outcome ``model``): what a
        later listing of that session would show of it (`note_made`)."""
        note_made(
            self.made,
            operation,
            session_id,
            held=session_id in self.model.session_ids(),
            emptied=not self.model.log(session_id),
            refusal=model.error if isinstance(model, Err) else None,
        )

    def settle_append(
        self,
        i: int,
        session_id: str,
        batch: Sequence[object],
        outcomes: tuple[Ok[int] | Err, Ok[int] | Err],
        call: str,
    ) -> None:
        """After an append through handle ``i`` matched the model's outcome: enter its
        events in the ledger, and check the head it returned (SEQ-003)."""
        actual, model = outcomes
        self.remember("append", session_id, model)
        if isinstance(model, Err):
            self.ledger.refuse(session_id, markers_of(batch), self.handles[i], model.error)
            return
        self.ledger.append(session_id, markers_of(batch), self.handles[i])
        if isinstance(actual, Ok) and actual.value != model.value:
            raise self.wrong_head(
                self.handles[i],
                session_id,
                "SEQ-003",
                f"{call} returned {actual.value}; the new head is {model.value}",
                _answer_shape("append", model.value, actual.value),
            )

    def wrong_head(
        self, cp: Checkpointer, session_id: str, rule_id: str, message: str, shape: str = ""
    ) -> RuleViolation:
        """The violation for an append that returned the wrong head: ``rule_id``, unless
        the log holds an event that must not be there (deleted, truncated away, refused,
        another session's), which explains the head and names the rule it breaks."""
        got = self.run(run_backend(partial(read_all, cp, session_id)))
        if isinstance(got, Ok):
            found = self.ledger.first_intrusion(markers_of(s.event for s in got.value), session_id)
            if found is not None:
                return RuleViolation(
                    found.rule_id,
                    f"{message}: the log holds event {found.marker!r}, {found.reason}",
                )
        return RuleViolation(rule_id, message, shape=shape)

    def compare_read(
        self,
        i: int,
        got: Sequence[StoredEvent],
        expected: Sequence[ModelEvent],
        read: tuple[str, int],
        call: str,
    ) -> None:
        """`compare_log` for ``read`` (session id, since_seq) through handle ``i``, blaming
        HANDLE-001 when an event it misses is there when read through the open handle
        that appended it."""
        session_id, since = read
        try:
            compare_log(got, expected, session_id, call, self.ledger, since)
        except RuleViolation as diverged:
            seen = {marker_of(s.event) for s in got if isinstance(s, StoredEvent)}
            want = [marker_of(e.event) for e in expected]
            for event, marker in zip(expected, want, strict=True):
                entry = self.ledger.get(marker)
                if marker in seen or entry is None:
                    continue
                # The writer's handle, unless closing everything for a reopen dropped it.
                writer = next((n for n, cp in enumerate(self.handles) if cp is entry.writer), i)
                if writer == i or self.model_handles[writer].closed:
                    continue
                again = self.run(run_backend(partial(read_all, entry.writer, session_id, since)))
                if isinstance(again, Ok) and [marker_of(s.event) for s in again.value] == want:
                    raise RuleViolation(
                        "HANDLE-001",
                        f"{call} misses event {marker!r} (seq {event.seq}), which handle "
                        f"{writer} appended and still reads",
                    ) from None
            self.blame_unshared_handles(i, diverged)
            raise

    def blame_unshared_handles(self, i: int, seen: RuleViolation) -> None:
        """After handle ``i``'s answer diverged (``seen``): append one event through
        handle ``i`` to a session no step uses and read it through every other open
        handle. A handle that misses it does not share the store with handle ``i``
        (HANDLE-001): that explains what handle ``i`` saw, where the writer of what it
        missed, or the handle that removed what it still has, can no longer be asked
        (closed) or asked nothing of it. When every handle sees the probe, when handle
        ``i`` misses it too (reads are broken whoever wrote: no sign of two stores), or
        no other handle is open, ``seen`` stands."""
        others = [k for k, mh in enumerate(self.model_handles) if k != i and not mh.closed]
        if not others or self.model_handles[i].closed:
            return
        probe = self.new_batch(["user_prompt"])
        (marker,) = markers_of(probe)
        wrote = self.backend_call(
            f"handle {i}: append({PROBE_SESSION!r}, 1 event) after {seen.rule_id}",
            partial(self.handles[i].append, PROBE_SESSION, probe),
        )
        if not isinstance(wrote, Ok):
            return
        reads = [
            (
                f"handle {k}: read({PROBE_SESSION!r})",
                partial(read_all, self.handles[k], PROBE_SESSION),
            )
            for k in [i, *others]
        ]
        own, *theirs = self.backend_calls(reads)
        if not isinstance(own, Ok) or marker not in markers_of(s.event for s in own.value):
            return
        for k, got in zip(others, theirs, strict=True):
            if isinstance(got, Ok) and marker not in markers_of(s.event for s in got.value):
                raise RuleViolation(
                    "HANDLE-001",
                    f"{seen.message}; the handles do not share one log: handle {k}: "
                    f"read({PROBE_SESSION!r}) misses event {marker!r}, which handle {i} "
                    f"appended just before",
                ) from None

    def check_listing(
        self, infos: Sequence[object], expected: list[str], call: str, i: int | None = None
    ) -> None:
        """LIST-001 and LIST-002 for a listing through handle ``i``; a LIST-003 finding
        becomes a warning. A listing that diverges is HANDLE-001 when handle ``i`` does
        not share the store with another open handle (`blame_unshared_handles`).

        Sessions listed with one mtime are not judged on their order here: whether two
        modifications fell into one tick of the store's clock depends on how fast the
        machine ran, so the tie rule is the LIST-002 check's, which makes ties on purpose."""
        for info in infos:
            if not isinstance(info, SessionInfo):
                raise RuleViolation("LIST-001", f"{call} returned {info!r}, not a SessionInfo")
        typed = [info for info in infos if isinstance(info, SessionInfo)]
        listed = sorted(info.id for info in typed)
        # Named by the table, by the call that made a session listed or not (an empty
        # append: APPEND-001), as the witness names a listing.
        divergence = of_listing([info.id for info in typed], expected, made=self.made)
        if divergence is not None:
            seen = RuleViolation.of(
                divergence.at(call),
                f"{call} listed {listed}; the existing sessions are {sorted(expected)}",
            )
            if i is not None:
                self.blame_unshared_handles(i, seen)
            raise seen
        check_list_order(typed, call, ties=False)
        by_id = {info.id: info.mtime for info in typed}
        for a, b in itertools.combinations(expected, 2):
            later, earlier = (
                (a, b) if self.model.modified_at(a) > self.model.modified_at(b) else (b, a)
            )
            if by_id[later] < by_id[earlier]:
                warning = RuleWarning(
                    "LIST-003",
                    f"{call}: {later!r} was modified after {earlier!r} but has an "
                    f"earlier mtime ({by_id[later]} < {by_id[earlier]})",
                )
                if warning not in self.env.warnings:
                    self.env.warnings.append(warning)
