"""The model-based check: a Hypothesis state machine that drives a backend and
`SpecModel` with the same operations and compares every result and every error.

Why a separate model, never the backend's own helpers: the model is the
definition of correct behaviour, so it must not share code paths (or bugs) with
what it judges. What each operation stands on — the machine's event loop, its
handles, the comparison of outcomes — is `storage_runtime`'s; this module says
which operations there are and what each must satisfy.

The operations: append (with no, the current, or a stale expected head), read
since, head, list, delete, truncate, generation, invalid arguments, concurrent
appends racing on one expected head, a read interleaved with a write, several
handles on one store, closing handles, and closing everything and reopening
(DURABLE backends). Every appended event carries a unique marker and is entered
in the ledger (`ledger`), so any event that shows up where it should not is
traced to the rule it proves broken.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import cast

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from ....spec import (
    Capability,
    CheckpointConflictError,
    Checkpointer,
    CheckpointerClosedError,
    GenerationalCheckpointer,
    StoredEvent,
)
from ....spec.divergences import (
    ANSWER_RULE,
    of_answer,
    of_error,
    truncates_to_head_counted,
)
from ..contract.outcomes import (
    EVENT_KINDS,
    Err,
    Ok,
    compare_answer,
    make_event,
    marker_of,
    markers_of,
    read_all,
    run_backend,
)
from ..contract.violations import RuleViolation, expect
from ..search.exploration import invariant, rule
from ..search.transcripts import exchanged
from ..target.provenance import raised_by
from .storage_runtime import CURRENT, MachineBase, MachineEnv, answer_text
from .strategies import CONFUSABLE_IDS, invalid_events_arguments, invalid_seqs, invalid_session_ids

__all__ = ["CheckpointerMachine", "MachineEnv"]

MAX_HANDLES = 4

_handle_index = st.integers(min_value=0, max_value=MAX_HANDLES - 1)
# A few ids most of the time, so logs grow long enough for reads and truncates to
# bite; the whole confusable pool the rest of the time.
_session = st.sampled_from(CONFUSABLE_IDS[:3]) | st.sampled_from(CONFUSABLE_IDS)
_batch = st.lists(st.sampled_from(EVENT_KINDS), max_size=3)
_expected = st.none() | st.just(CURRENT) | st.integers(min_value=0, max_value=6)
# A seq argument either counts back from the head (where the events are) or is absolute.
_position = st.tuples(st.sampled_from(["back", "at"]), st.integers(min_value=0, max_value=7))


class CheckpointerMachine(MachineBase):
    """Compares one backend store with `SpecModel`, step by step.

    Hypothesis builds one machine per example:
    ``run_state_machine_as_test(lambda: CheckpointerMachine(env))``.
    """

    # -- operations ----------------------------------------------------------------
    @rule()
    @precondition(lambda self: len(self.handles) < MAX_HANDLES)
    def open_handle(self) -> None:
        """HANDLE-001: one more handle on the same store."""
        self.open_handle_pair()

    @rule(h=_handle_index, session_id=_session, kinds=_batch, expected=_expected)
    def append(self, h: int, session_id: str, kinds: list[str], expected: int | str | None) -> None:
        i, cp, mh = self.pick(h)
        batch = self.new_batch(kinds)
        want = self.resolve(expected, session_id)
        call = f"handle {i}: append({session_id!r}, {len(batch)} events, expected_head={want})"
        actual, model = self.compare(
            "append",
            call,
            lambda: cp.append(session_id, batch, want),
            lambda: mh.append(session_id, batch, want),
            given=repr(kinds),
        )
        self.settle_append(i, session_id, batch, (actual, model), call)

    @rule(h=_handle_index, session_id=_session, position=_position)
    def read(self, h: int, session_id: str, position: tuple[str, int]) -> None:
        i, cp, mh = self.pick(h)
        since = self.seq_at(session_id, position)
        call = f"handle {i}: read({session_id!r}, since_seq={since})"
        actual, model = self.compare(
            "read",
            call,
            lambda: read_all(cp, session_id, since),
            lambda: mh.read(session_id, since),
        )
        self.remember("read", session_id, model)
        if isinstance(actual, Ok) and isinstance(model, Ok):
            self.compare_read(i, actual.value, model.value, (session_id, since), call)

    def blame_unchecked_head(
        self, cp: Checkpointer, session_id: str, stale: int | None, call: str
    ) -> None:
        """After racing appends on one expected head all succeeded: if one more append with
        that head, now stale, succeeds on its own, no race is needed to show the defect,
        and the rule broken is APPEND-002, not APPEND-004."""
        alone = self.backend_call(
            f"append({session_id!r}, 1 event, expected_head={stale}) after {call}",
            partial(cp.append, session_id, self.new_batch(["user_prompt"]), stale),
        )
        if isinstance(alone, Ok):
            raise RuleViolation(
                "APPEND-002",
                f"an append with a stale expected_head succeeds: after {call} (all succeeded), "
                f"append({session_id!r}, 1 event, expected_head={stale}) on its own also "
                f"returned {alone.value}; expected CheckpointConflictError",
            )

    def blame_crash_alone(
        self, cp: Checkpointer, session_id: str, crash: BaseException, call: str
    ) -> None:
        """After a racing append raised an error outside the contract: if one more
        append on its own raises the same, no race is needed to show the crash, and
        the rule broken is the append's own (the table's), not APPEND-004."""
        alone_call = f"append({session_id!r}, 1 event) after {call}"
        alone = self.backend_call(
            alone_call, partial(cp.append, session_id, self.new_batch(["user_prompt"]))
        )
        if isinstance(alone, Err) and type(alone.error) is type(crash):
            divergence = of_error("append", None, alone.error)
            if divergence is not None:
                raise RuleViolation.of(
                    divergence.at(alone_call),
                    f"{alone_call} raised {type(alone.error).__name__}: {alone.error}, "
                    f"as an append of the race did",
                )

    @rule(h=_handle_index, session_id=_session)
    def head(self, h: int, session_id: str) -> None:
        i, cp, mh = self.pick(h)
        call = f"handle {i}: head({session_id!r})"
        actual, model = self.compare(
            "head", call, lambda: cp.head(session_id), lambda: mh.head(session_id)
        )
        self.remember("head", session_id, model)
        if isinstance(actual, Ok) and isinstance(model, Ok):
            compare_answer("head", actual.value, model.value, call)

    @rule(h=_handle_index)
    @precondition(lambda self: Capability.LIST in self.env.capabilities)
    def list_sessions(self, h: int) -> None:
        i, cp, mh = self.pick(h)
        call = f"handle {i}: list_sessions()"
        actual, model = self.compare("list_sessions", call, cp.list_sessions, mh.list_sessions)
        if isinstance(actual, Ok) and isinstance(model, Ok):
            self.check_listing(actual.value, model.value, call, i)

    @rule(h=_handle_index, session_id=_session)
    @precondition(lambda self: Capability.DELETE in self.env.capabilities)
    def delete(self, h: int, session_id: str) -> None:
        i, cp, mh = self.pick(h)
        before = self.model.log(session_id)
        call = f"handle {i}: delete({session_id!r})"
        _, model = self.compare(
            "delete", call, lambda: cp.delete(session_id), lambda: mh.delete(session_id)
        )
        self.remember("delete", session_id, model)
        if isinstance(model, Ok):
            self.ledger.remove(markers_of(e.event for e in before), "deleted")

    @rule(h=_handle_index, session_id=_session, position=_position, expected=_expected)
    def truncate(
        self, h: int, session_id: str, position: tuple[str, int], expected: int | str | None
    ) -> None:
        i, cp, mh = self.pick(h)
        to_seq = self.seq_at(session_id, position)
        want = self.resolve(expected, session_id)
        call = f"handle {i}: truncate({session_id!r}, {to_seq}, expected_head={want})"
        before = self.model.log(session_id)
        actual, model = self.compare(
            "truncate",
            call,
            lambda: cp.truncate(session_id, to_seq, want),
            lambda: mh.truncate(session_id, to_seq, want),
        )
        self.remember("truncate", session_id, model)
        if isinstance(model, Ok):
            if to_seq == len(before):
                self.truncates_to_head[session_id] = self.truncates_to_head.get(session_id, 0) + 1
            self.ledger.remove(markers_of(e.event for e in before[to_seq:]), "truncated")
            assert isinstance(actual, Ok)
            expect(
                actual.value == to_seq,
                "TRUNC-001",
                f"{call} returned {actual.value}; expected {to_seq}",
            )

    @rule(h=_handle_index, session_id=_session)
    @precondition(lambda self: Capability.GENERATION in self.env.capabilities)
    def generation(self, h: int, session_id: str) -> None:
        i, cp, mh = self.pick(h)
        call = f"handle {i}: generation({session_id!r})"
        gen = cast(GenerationalCheckpointer, cp).generation  # GENERATION is declared
        actual, model = self.compare(
            "generation", call, lambda: gen(session_id), lambda: mh.generation(session_id)
        )
        if isinstance(actual, Ok) and isinstance(model, Ok):
            compare_answer(
                "generation",
                actual.value,
                model.value,
                call,
                otherwise=truncates_to_head_counted(
                    model.value, actual.value, self.truncates_to_head.get(session_id, 0)
                ),
            )

    @rule(
        h=_handle_index,
        session_id=_session,
        kinds=_batch,
        expected=_expected,
        generation=st.just(CURRENT) | st.integers(min_value=0, max_value=3),
    )
    @precondition(lambda self: Capability.GENERATION in self.env.capabilities)
    def append_with_generation(
        self,
        h: int,
        session_id: str,
        kinds: list[str],
        expected: int | str | None,
        generation: int | str,
    ) -> None:
        i, cp, mh = self.pick(h)
        batch = self.new_batch(kinds)
        want = self.resolve(expected, session_id)
        want_gen = self.resolve(generation, session_id, generation=True)
        call = f"handle {i}: append({session_id!r}, {len(batch)} events, expected_head={want}, expected_generation={want_gen})"
        append = cast(GenerationalCheckpointer, cp).append  # GENERATION is declared
        actual, model = self.compare(
            "append",
            call,
            lambda: append(session_id, batch, want, expected_generation=want_gen),
            lambda: mh.append(session_id, batch, want, want_gen),
            given=repr(kinds),
        )
        self.settle_append(i, session_id, batch, (actual, model), call)

    @rule(
        h=_handle_index,
        operation=st.sampled_from(["append", "read", "head", "delete", "truncate"]),
        data=st.data(),
    )
    def invalid_argument(self, h: int, operation: str, data: st.DataObject) -> None:
        """ARG-001..ARG-003: bad input gives the documented error and changes nothing."""
        if operation == "delete" and Capability.DELETE not in self.env.capabilities:
            return  # an undeclared delete is CAP-001's to probe, not this rule's
        i, cp, mh = self.pick(h)
        which = data.draw(st.sampled_from(_INVALID_ARGUMENTS[operation]), label="invalid argument")
        value = data.draw(_INVALID_VALUES[which], label=which)
        args: dict[str, object] = {"session_id": "s1"}
        if operation == "append":
            args.update(
                events=[make_event("user_prompt", f"e{next(self.markers)}")], expected_head=None
            )
        elif operation == "read":
            args["since_seq"] = 0
        elif operation == "truncate":
            args.update(to_seq=0, expected_head=None)
        args[which] = value
        call = f"handle {i}: {operation}({', '.join(f'{k}={v!r}' for k, v in args.items())})"

        async def backend() -> object:
            if operation == "read":
                return await read_all(cp, args["session_id"], args["since_seq"])  # type: ignore[arg-type]
            method: Callable[..., Awaitable[object]] = getattr(cp, operation)
            return await method(*args.values())

        def model() -> object:
            method: Callable[..., object] = getattr(mh, operation)
            return method(*args.values())

        _, expected = self.compare(operation, call, backend, model)
        events = args.get("events")
        if operation == "append" and which != "session_id" and isinstance(events, list | tuple):
            # A refused batch leaves nothing (a bad session id stores under no id we read).
            # The bad events strategies reuse one text, entered the first time only.
            ours = [m for m in markers_of(events) if m not in self.ledger]
            if isinstance(expected, Err):
                self.ledger.refuse("s1", ours, cp, expected.error)
            else:
                self.ledger.append("s1", ours, cp)

    @rule(
        hs=st.lists(_handle_index, min_size=2, max_size=4),
        session_id=_session,
        use_expected=st.booleans(),
    )
    def concurrent_appends(self, hs: list[int], session_id: str, use_expected: bool) -> None:
        """APPEND-004: racing appends never fork the log."""
        picked = [self.pick(h) for h in hs]
        if any(mh.closed for _, _, mh in picked):
            return
        head = self.model.head(session_id)
        want = head if use_expected else None
        batches = [self.new_batch(["user_prompt", "assistant_message"]) for _ in picked]
        call = f"{len(picked)} concurrent append({session_id!r}, 2 events, expected_head={want}) on handles {[i for i, _, _ in picked]}"

        async def race() -> list[Ok[int] | Err]:
            return list(
                await asyncio.gather(
                    *(
                        run_backend(partial(cp.append, session_id, b, want))
                        for (_, cp, _), b in zip(picked, batches, strict=True)
                    )
                )
            )

        outcomes = self.run(race())
        note(f"{call} -> {outcomes}")
        exchanged(call, "came to " + ", ".join(answer_text(o) for o in outcomes), repr(hs))
        winners = [
            (o.value, b) for o, b in zip(outcomes, batches, strict=True) if isinstance(o, Ok)
        ]
        for outcome in outcomes:
            if isinstance(outcome, Err) and not isinstance(outcome.error, CheckpointConflictError):
                message = f"{call}: one raised {type(outcome.error).__name__}: {outcome.error}"
                # An error the table names by its cause (a phantom maintenance lock, a
                # valid id refused) is that cause's; any other, the race's (APPEND-004).
                divergence = of_error("append", None, outcome.error)
                if divergence is not None and divergence.rule != ANSWER_RULE["append"]:
                    raise RuleViolation.of(divergence.at(call), message)
                self.blame_crash_alone(picked[0][1], session_id, outcome.error, call)
                raise RuleViolation.or_crash(
                    "APPEND-004", message, "append", type(outcome.error).__name__
                )
        # Whatever order the racing appends took, each winner's head lies between its
        # own batch on the old head and every winner's batch on it: an answer outside
        # that is the append's own (SEQ-003), no race needed to explain it.
        lowest, highest = head + 2, head + 2 * len(winners)
        for new_head, _ in winners:
            bound = lowest if new_head < lowest else highest if new_head > highest else None
            divergence = of_answer("append", bound, new_head) if bound is not None else None
            if divergence is not None:
                raise RuleViolation.of(
                    divergence.at(call),
                    f"{call}: an append returned head {new_head}; in any order of the "
                    f"{len(winners)} that succeeded it is between {lowest} and {highest}",
                )
        if use_expected:
            if len(winners) != 1:
                forked = RuleViolation(
                    "APPEND-004", f"{call}: {len(winners)} appends succeeded; exactly one may"
                )
                if winners:
                    # Each handle may have answered for a log of its own (HANDLE-001),
                    # or none compares the head (APPEND-002): either needs no race.
                    self.blame_unshared_handles(picked[0][0], forked)
                    self.blame_unchecked_head(picked[0][1], session_id, want, call)
                raise forked
            for outcome in outcomes:
                if isinstance(outcome, Err):
                    assert isinstance(outcome.error, CheckpointConflictError)
                    expect(
                        outcome.error.actual != outcome.error.expected,
                        "APPEND-002",
                        f"{call}: a conflict reported actual == expected == {outcome.error.actual}",
                    )
        else:
            expect(
                len(winners) == len(picked),
                "APPEND-004",
                f"{call}: only {len(winners)} of {len(picked)} appends succeeded",
            )
        for (_, cp, _), batch, outcome in zip(picked, batches, outcomes, strict=True):
            if isinstance(outcome, Ok):
                self.ledger.append(session_id, markers_of(batch), cp)
            else:  # a loser's events in the log would mean the race forked it
                self.ledger.refuse(session_id, markers_of(batch), cp, outcome.error, "APPEND-004")
        for new_head, batch in sorted(winners, key=lambda w: w[0]):
            applied = self.model.append(session_id, batch)
            if applied != new_head:
                forked = self.wrong_head(
                    picked[0][1],
                    session_id,
                    "APPEND-004",
                    f"{call}: an append returned head {new_head}; in the serial order it is {applied}",
                )
                self.blame_unshared_handles(picked[0][0], forked)
                raise forked

    @rule(
        reader=_handle_index,
        writer=_handle_index,
        session_id=_session,
        kinds=st.lists(st.sampled_from(EVENT_KINDS), min_size=1, max_size=2),
        cut=st.booleans(),
    )
    def read_during_write(
        self, reader: int, writer: int, session_id: str, kinds: list[str], cut: bool
    ) -> None:
        """READ-003: a read started before a write sees the log before or after it, never a mix."""
        (ri, rcp, rmh), (wi, wcp, wmh) = self.pick(reader), self.pick(writer)
        before = self.model.log(session_id)
        if rmh.closed or wmh.closed or len(before) < 2:
            return
        # Two events are taken before a truncate to 1, so a live view shows a mix.
        truncating = cut and Capability.TRUNCATE in self.env.capabilities and len(before) > 2
        batch = self.new_batch(kinds)
        call = f"handle {ri}: read({session_id!r}) while handle {wi} {'truncates to 1' if truncating else 'appends'}"

        async def interleave() -> list[StoredEvent]:
            iterator = rcp.read(session_id, 0).__aiter__()
            taken = [await iterator.__anext__() for _ in range(2)]
            if truncating:
                await wcp.truncate(session_id, 1)
            else:
                await wcp.append(session_id, batch)
            return taken + [stored async for stored in iterator]

        got = self.backend_call(call, interleave)
        if isinstance(got, Err):
            # Which of the two raised it: a crash of that operation, seen plainly in
            # its own step elsewhere, is the defect.
            noted = raised_by(got.error)
            raise RuleViolation.or_crash(
                "READ-003",
                f"{call} raised {type(got.error).__name__}: {got.error}",
                noted.operation if noted is not None else "read",
                type(got.error).__name__,
            )
        if truncating:
            self.ledger.remove(markers_of(e.event for e in before[1:]), "truncated")
            wmh.truncate(session_id, 1)
        else:
            wmh.append(session_id, batch)
            self.ledger.append(session_id, markers_of(batch), wcp)
        after = self.model.log(session_id)
        got_markers = [marker_of(s.event) for s in got.value]
        allowed = ([marker_of(e.event) for e in before], [marker_of(e.event) for e in after])
        expect(
            got_markers in allowed,
            "READ-003",
            f"{call} yielded {got_markers}; a snapshot is {allowed[0]} or {allowed[1]}",
        )

    @rule(h=_handle_index)
    @precondition(lambda self: sum(not mh.closed for mh in self.model_handles) > 1)
    def close_handle(self, h: int) -> None:
        """CLOSE-001/CLOSE-002: close one handle (twice: close is idempotent)."""
        i, cp, mh = self.pick(h)
        for attempt in ("close()", "close() again"):
            self.compare("close", f"handle {i}: {attempt}", cp.close, mh.close)

    @rule()
    @precondition(lambda self: Capability.DURABLE in self.env.capabilities)
    def reopen_store(self) -> None:
        """DUR-001: close every handle, reopen through the factory: everything acknowledged is there."""
        for cp in self.handles:
            self.run(cp.close())
        exchanged("close every handle", "closed")
        self.handles.clear()
        self.model_handles.clear()
        self.open_handle_pair()

    @rule(h=_handle_index)
    def check_integrity(self, h: int) -> None:
        i, cp, mh = self.pick(h)
        call = f"handle {i}: check_integrity()"
        actual, _ = self.compare("check_integrity", call, cp.check_integrity, mh.check_integrity)
        if isinstance(actual, Ok):
            report = actual.value
            expect(
                report.ok,
                "INTEG-001",
                f"{call} reported a problem with a healthy store: {report.detail}",
            )

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def logs_match_model(self) -> None:
        """Every session's full log equals the model's (SEQ-*, EVENT-001, ID-002)."""
        open_handles = [i for i, mh in enumerate(self.model_handles) if not mh.closed]
        if not open_handles:
            return
        i = open_handles[-1]
        cp = self.handles[i]
        for session_id, got in zip(
            CONFUSABLE_IDS, self.backend_reads(i, CONFUSABLE_IDS), strict=True
        ):
            call = f"handle {i}: read({session_id!r})"
            if isinstance(got, Err):
                # This handle is open, so "closed" means closing another handle broke it.
                rule_id = (
                    "CLOSE-002" if isinstance(got.error, CheckpointerClosedError) else "READ-001"
                )
                raise RuleViolation(
                    rule_id, f"{call} raised {type(got.error).__name__}: {got.error}"
                )
            self.compare_read(i, got.value, self.model.log(session_id), (session_id, 0), call)
        if Capability.LIST not in self.env.capabilities:
            return
        listing = self.backend_call(f"handle {i}: list_sessions()", cp.list_sessions)
        if isinstance(listing, Err):
            rule_id = (
                "CLOSE-002" if isinstance(listing.error, CheckpointerClosedError) else "LIST-001"
            )
            raise RuleViolation(rule_id, f"handle {i}: list_sessions() raised {listing.error!r}")
        self.check_listing(
            list(listing.value), self.model.session_ids(), f"handle {i}: list_sessions()", i
        )


_INVALID_ARGUMENTS: dict[str, list[str]] = {
    "append": ["session_id", "events", "expected_head"],
    "read": ["session_id", "since_seq"],
    "head": ["session_id"],
    "delete": ["session_id"],
    "truncate": ["session_id", "to_seq", "expected_head"],
}
_INVALID_VALUES: dict[str, st.SearchStrategy[object]] = {
    "session_id": invalid_session_ids(),
    "events": invalid_events_arguments(),
    "expected_head": invalid_seqs(),
    "since_seq": invalid_seqs(),
    "to_seq": invalid_seqs(),
}
