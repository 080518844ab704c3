"""Every call a check makes, judged against the model as it happens: the first divergence.

A check asserts what its rule is about. The calls it makes on the way answer
many other questions, and the first call whose answer no legal behaviour of the
contract allows is where the defect showed first, whatever the check goes on to
assert. The `Witness` of a check's harness sees every call made through the
handles the harness opened (`BackendHandle` reports each to it), applies the same
call to a model of that store (`checkpointspec.spec.model`), and names the
first call that differs by the one table of divergences
(`checkpointspec.spec.divergences`). A finding whose own steps hold an earlier
divergence than its check's assertion follows from that divergence; one whose
divergence is its own is named by it, so the same defect gets the same name in
every check.

The witness judges only what it can know. It loses track of a store, and judges
none of its later calls, as soon as:

- two calls on it overlap (a read left unfinished counts as still running): the
  model cannot say in which order they took effect;
- it held files before the check first opened it (a crash state, a copy);
- a call broke the stdio protocol (PROTO-001's, named by the check) or was
  cancelled; any other error that is not one of the contract's (the store's own
  TypeError, a driver's error) is a divergence like any, named by the table: the
  operation crashed (its answer's rule), on a closed handle the missing
  CheckpointerClosedError (CLOSE-001);
- anything but the contract's operations and the maintenance lock is called on a
  handle (store hooks, fault injection, a handle on a simulated disk): the model
  does not know their effects, and a hook may act on any store, so the witness
  then judges no store at all;
- its last handle closes and the backend does not declare DURABLE;
- a handle is opened on it with a codec of the check's own (a codec that fails
  on purpose);
- the check hands the backend to anything it does not watch (`lose_all`: a
  worker process, a machine, a handle opened around the harness).

The maintenance lock it follows itself (who holds each session: MAINT-001..003),
so the session layer's restores and compactions, which hold it, are judged too: a
write the lock refuses through another handle changes nothing, one it lets through
is MAINT-001's divergence.

After its first divergence a store is not judged again either: the model no
longer describes it. The witness never raises; checks go on exactly as before.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Sequence
from typing import Literal

import msgspec

from ....backends.stdio.wire import StdioProtocolError
from ....spec import (
    Capability,
    CheckpointError,
    ModelEvent,
    ModelHandle,
    SessionLockedError,
    SpecModel,
    StoredEvent,
    UnsupportedOperationError,
    UserPrompt,
)
from ....spec import (
    CheckpointConflictError as ConflictError,
)
from ....spec.divergences import (
    PRESENCE_SHAPE,
    Context,
    Divergence,
    crash,
    in_context,
    of_answer,
    of_error,
    of_listing,
    of_read,
    truncates_to_head_counted,
)
from ..contract.ledger import append_refusal_rule, removal_rule

__all__ = [
    "CONTRACT_OPERATIONS",
    "Pending",
    "Seen",
    "Witness",
    "call_text",
    "divergence_noted",
    "note_divergence",
    "note_made",
]

CONTRACT_OPERATIONS = frozenset(
    {"append", "read", "head", "list_sessions", "delete", "truncate", "generation", "close"}
)
"""The operations the model answers; any other call makes the witness lose track."""

MAINTENANCE_OPERATIONS = frozenset({"acquire_maintenance", "release_maintenance"})
"""The maintenance lock's operations: the witness keeps who holds each session
(MAINT-001..003) and judges the writes the lock refuses or lets through."""

_WRITES = frozenset({"append", "truncate", "delete"})

HARMLESS_OPERATIONS = frozenset({"check_integrity"})
"""Operations that change nothing (INTEG-001) and that the model does not answer: not
judged, and no reason to lose track."""


class Seen(msgspec.Struct, frozen=True):
    """A divergence as a check met it: the ``number``-th call the check made."""

    divergence: Divergence
    number: int

    def evidence(self) -> str:
        """The divergence as a sentence, for a finding it explains."""
        d = self.divergence
        return f"call {self.number}, {d.call}, {d.got}; the contract allows: {d.expected}"


_NOTE = "_checkpointspec_divergence"


def note_divergence(error: BaseException, seen: Seen | None) -> None:
    """Note on ``error`` the first divergence of the steps that raised it (the first note
    stays: an exception re-raised further out keeps the divergence of its own steps)."""
    if seen is not None and divergence_noted(error) is None:
        with contextlib.suppress(AttributeError, TypeError):
            setattr(error, _NOTE, seen)


def divergence_noted(error: BaseException) -> Seen | None:
    """The first divergence noted on ``error`` (`note_divergence`), if any."""
    noted = getattr(error, _NOTE, None)
    return noted if isinstance(noted, Seen) else None


class _Store:
    """What the witness knows of one store: its model, and whether it still knows."""

    def __init__(self, capabilities: frozenset[Capability]) -> None:
        self.model = SpecModel(capabilities)
        self.running = 0
        self.handles = 0
        self.coded = False
        """Whether a handle on it passes payloads through a codec."""
        self.holders: dict[str, ModelHandle] = {}
        """Each session whose maintenance lock is held: the holding handle."""
        self.lost = ""
        """Why the witness no longer judges this store ("" while it does)."""
        self.made: dict[str, tuple[str, str]] = {}
        """For a session the model does not hold: the rule and shape of the call that
        must not have created it (an empty append, a read, a delete, a truncate)."""
        self.removed: dict[tuple[str, str], str] = {}
        """An event's (session, text) the model no longer holds, and the rule its return
        would break (DELETE-002 after a delete, TRUNC-001 after a truncate)."""
        self.refused: dict[str, str] = {}
        """A refused append's event texts, and the rule that keeps them out of every log."""
        self.writers: dict[str, list[ModelHandle]] = {}
        """The handles that appended to each session (since its delete)."""
        self.gone: dict[str, tuple[int, str, str]] = {}
        """For a session whose last delete or truncate removed events: how many, and the
        rule and shape of a log that still shows that many more."""
        self.idle_truncates: dict[str, int] = {}
        """How many truncates to its head each session took: none may move its generation."""


class Pending:
    """One call under way through a witnessed handle (`Witness.begin`)."""

    __slots__ = ("arguments", "handle", "operation", "store")

    def __init__(
        self, store: _Store, handle: ModelHandle, operation: str, arguments: inspect.BoundArguments
    ) -> None:
        self.store = store
        self.handle = handle
        self.operation = operation
        self.arguments = arguments


_Outcome = Literal["returned", "raised", "abandoned"]


class Witness:
    """The model of every store a check's handles are open on, judging each call.

    ``capabilities`` are the backend's; ``durable`` whether a store outlives its
    last handle. `first` is the first divergence since `begin_example`.
    """

    def __init__(self, capabilities: frozenset[Capability]) -> None:
        self._capabilities = capabilities
        self._stores: dict[str, _Store] = {}
        self._lock = threading.Lock()
        self._calls = 0
        self._lost_all = ""
        self.first: Seen | None = None
        """The first divergence of the current example (of the check, outside Hypothesis)."""
        self.every: list[Seen] = []
        """Every divergence met, one per store at most, in order."""

    @property
    def lost_all(self) -> str:
        """Why the witness judges nothing any more ("" while it judges)."""
        return self._lost_all

    def begin_example(self) -> None:
        """A new Hypothesis example starts: its steps are its own."""
        self.first = None

    def lose_all(self, why: str) -> None:
        """Judge nothing from now on: the check handed the backend to something unwatched."""
        with self._lock:
            if not self._lost_all:
                self._lost_all = why

    def lose(self, store: str, why: str) -> None:
        """Judge nothing more of ``store``."""
        with self._lock:
            known = self._stores.get(store)
            if known is not None and not known.lost:
                known.lost = why

    def opened(
        self, store: str, *, own_codec: bool, fresh: bool = True, coded: bool = False
    ) -> ModelHandle:
        """A handle was opened on ``store``: its model's counterpart. ``fresh`` says
        whether the store was empty when the check first opened it; one that was not
        (a crash state, a copy) holds what the witness did not see written."""
        with self._lock:
            known = self._stores.get(store)
            if known is None:
                known = self._stores[store] = _Store(self._capabilities)
                if not fresh:
                    known.lost = "it held data before the check first opened it"
            known.handles += 1
            known.coded = known.coded or coded
            if own_codec and not known.lost:
                known.lost = "a handle was opened with a codec of the check's own"
            return known.model.handle()

    def begin(
        self,
        store: str,
        handle: ModelHandle,
        operation: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> Pending | None:
        """A call starts through a handle on ``store``: what to `end` it with, or None
        when it is not judged (the store is not followed, or the call is no contract
        operation, which loses track of the store)."""
        with self._lock:
            self._calls += 1
            if operation in HARMLESS_OPERATIONS:
                return None
            maintenance = operation in MAINTENANCE_OPERATIONS
            if operation not in CONTRACT_OPERATIONS and not maintenance:
                # A store hook or a fault may act on any store (its path is an argument),
                # and a handle it returns writes unseen.
                self._lost_all = self._lost_all or (
                    f"{operation} was called, whose effect the model does not know"
                )
                return None
            known = self._stores.get(store)
            if known is None or known.lost or self._lost_all:
                return None
            known.running += 1
            if known.running > 1:
                known.lost = "two calls on it overlapped"
                return Pending(known, handle, operation, _unbound())
            try:
                bound = (
                    inspect.signature(_maintenance_signature).bind(*args, **kwargs)
                    if maintenance
                    else inspect.signature(getattr(ModelHandle, operation)).bind(
                        None, *args, **kwargs
                    )
                )
            except TypeError:
                known.lost = f"{operation} was called with arguments the model does not take"
                return Pending(known, handle, operation, _unbound())
            return Pending(known, handle, operation, bound)

    def end(self, pending: Pending | None, outcome: _Outcome, value: object = None) -> None:
        """The call ``pending`` ended: it ``returned`` ``value`` (a read: the events it
        yielded), ``raised`` ``value``, or was ``abandoned`` (a read not iterated to its
        end). Judged against the model unless the store was lost meanwhile."""
        if pending is None:
            return
        with self._lock:
            store = pending.store
            store.running -= 1
            if pending.operation == "close":
                store.handles -= 1
            if store.lost or self._lost_all or outcome == "abandoned":
                if outcome == "abandoned" and not store.lost:
                    store.lost = "a read was left unfinished"
                return
            number = self._calls
            if pending.operation in MAINTENANCE_OPERATIONS:
                seen = self._judge_maintenance(store, pending, outcome, value)
            else:
                judged, seen = self._locked_out(pending, outcome, value)
                if not judged:
                    seen = self._judge(store, pending, outcome, value)
                if pending.operation == "close" and outcome == "returned":
                    for sid in [s for s, by in store.holders.items() if by is pending.handle]:
                        del store.holders[sid]
            if seen is not None:
                store.lost = "it diverged from the model"
                first = Seen(seen, number)
                self.every.append(first)
                if self.first is None:
                    self.first = first
            elif (
                pending.operation == "close"
                and store.handles == 0
                and Capability.DURABLE not in self._capabilities
            ):
                store.lost = "its last handle closed and the backend does not declare DURABLE"

    @staticmethod
    def _judge_maintenance(
        store: _Store, pending: Pending, outcome: _Outcome, value: object
    ) -> Divergence | None:
        """MAINT-003: an acquire of a held session raises SessionLockedError, any other
        succeeds and holds it; a release gives back what this handle holds, else nothing."""
        sid = pending.arguments.arguments.get("session_id")
        if not isinstance(sid, str) or pending.handle.closed:
            store.lost = f"{pending.operation} was called where the model does not follow it"
            return None
        call = call_text(pending.operation, (sid,), {})
        refused = isinstance(value, SessionLockedError)
        if pending.operation == "release_maintenance":
            if outcome != "returned":
                store.lost = f"release_maintenance raised {type(value).__name__}"
            elif store.holders.get(sid) is pending.handle:
                del store.holders[sid]
            return None
        if outcome == "returned" and sid not in store.holders:
            store.holders[sid] = pending.handle
            return None
        if outcome == "raised" and refused and sid in store.holders:
            return None
        if outcome == "returned" or refused:
            held = sid in store.holders
            return Divergence(
                "MAINT-003",
                "acquire_maintenance of a held session succeeded"
                if held
                else "acquire_maintenance of a free session raised SessionLockedError",
                expected="raises SessionLockedError" if held else "success",
                got="returned" if outcome == "returned" else f"raised SessionLockedError: {value}",
            ).at(call)
        store.lost = f"acquire_maintenance raised {type(value).__name__}"
        return None

    @staticmethod
    def _locked_out(
        pending: Pending, outcome: _Outcome, value: object
    ) -> tuple[bool, Divergence | None]:
        """MAINT-001..003 for a write: whether the lock decides it (else the model judges
        it as any call), and its divergence. Of a held session through another handle
        it raises SessionLockedError and changes nothing; through the holder it is a
        write as any, and a refusal by the lock is MAINT-002's divergence. Of a session
        no handle holds the model judges it: such a refusal is the table's MAINT-003."""
        sid = pending.arguments.arguments.get("session_id")
        holder = pending.store.holders.get(sid) if isinstance(sid, str) else None
        if pending.operation not in _WRITES or pending.handle.closed:
            return False, None
        refused = outcome == "raised" and isinstance(value, SessionLockedError)
        call = call_text(pending.operation, pending.arguments.args[1:], pending.arguments.kwargs)
        if holder is None:
            # A refusal with nobody holding it is the table's (MAINT-003).
            return False, None
        if holder is not pending.handle:
            if refused:
                return True, None
            return True, Divergence(
                "MAINT-001",
                f"{pending.operation} through another handle than the holder's was not refused",
                expected="raises SessionLockedError",
                got="returned" if outcome == "returned" else f"raised {type(value).__name__}",
                # The same crash where the write was due to succeed is the operation's.
                otherwise=crash(pending.operation, value)
                if isinstance(value, Exception) and not isinstance(value, CheckpointError)
                else None,
            ).at(call)
        if refused:
            return True, Divergence(
                "MAINT-002",
                f"{pending.operation} through the holding handle raised SessionLockedError",
                expected="success",
                got=f"raised SessionLockedError: {value}",
            ).at(call)
        return False, None

    def _judge(
        self, store: _Store, pending: Pending, outcome: _Outcome, value: object
    ) -> Divergence | None:
        operation, bound = pending.operation, pending.arguments
        args = bound.args[1:]
        kwargs = bound.kwargs
        before = {sid: list(store.model.log(sid)) for sid in _sessions_named(args)}
        try:
            answer: object = getattr(pending.handle, operation)(*args, **kwargs)
            refusal: BaseException | None = None
        except CheckpointError as refused:
            answer, refusal = None, refused
        except Exception:  # the model cannot take these arguments: not judged
            store.lost = f"the model could not answer {operation}"
            return None
        call = call_text(operation, args, kwargs)
        got_error = value if outcome == "raised" and isinstance(value, BaseException) else None
        core_refused = isinstance(got_error, UnsupportedOperationError) and operation in (
            "append",
            "read",
            "head",
            "close",
        )
        # A broken protocol is PROTO-001's, and a call cut off (cancelled by the kit's
        # clock) says nothing of the store: the check names them; the model no longer
        # knows the store. A core operation that refuses to work at all likewise.
        unjudged = isinstance(got_error, StdioProtocolError) or (
            got_error is not None and not isinstance(got_error, Exception)
        )
        if unjudged or core_refused:
            store.lost = f"{operation} raised {type(got_error).__name__}"
            return None
        divergence = of_error(operation, refusal, got_error)
        if divergence is None and refusal is None and got_error is None:
            divergence = self._of_value(store, operation, args, answer, value)
        if divergence is not None:
            context = self._context(store, pending.handle, operation, args, answer, value, refusal)
            if store.coded:
                context = msgspec.structs.replace(context, coded=True)
            divergence = in_context(divergence, context)
        self._remember(store, operation, args, refusal, before, pending.handle)
        return divergence.at(call) if divergence is not None else None

    def _context(
        self,
        store: _Store,
        handle: ModelHandle,
        operation: str,
        args: Sequence[object],
        answer: object,
        value: object,
        refusal: BaseException | None,
    ) -> Context:
        """What the store's history says of a divergent call's cause (`in_context`)."""
        sid = args[0] if args and isinstance(args[0], str) else None
        if (
            operation == "append"
            and len(args) > 1
            and args[1] in ([], ())
            and not isinstance(value, BaseException)
        ):
            # An empty append that answered, wrongly: what it did is the empty batch's
            # fault. One that raised is judged by its error, as any append.
            return Context(empty_batch=True)
        if sid is None and operation == "list_sessions" and isinstance(answer, list):
            listed = {str(getattr(i, "id", i)) for i in value} if isinstance(value, list) else set()
            missing = [m for m in answer if m not in listed]
            return Context(unseen_writer=self._unseen(store, handle, missing))
        if sid is None:
            return Context()
        if operation == "generation" and isinstance(answer, int):
            counted = truncates_to_head_counted(answer, value, store.idle_truncates.get(sid, 0))
            if counted is not None:
                return Context(otherwise=counted)
        short = surplus = 0
        if isinstance(refusal, ConflictError) and not isinstance(value, BaseException):
            # A stale expectation accepted: by a handle blind to another's writes?
            return Context(unseen_writer=self._unseen(store, handle, [sid]))
        if isinstance(value, ConflictError) and operation in ("append", "truncate"):
            short = max(len(store.model.log(sid)) - (value.actual or 0), 0)
        elif (
            operation != "generation"  # counts removals, not events: no event explains it
            and isinstance(answer, int)
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            short, surplus = max(answer - value, 0), max(value - answer, 0)
        elif operation == "read" and isinstance(answer, list) and isinstance(value, list):
            short, surplus = max(len(answer) - len(value), 0), max(len(value) - len(answer), 0)
        nothing = value == 0 or value == []
        if short and nothing and any(w is handle for w in store.writers.get(sid, [])):
            # Its own writes are missing too: not a handle blind to another's.
            return Context()
        if short:
            return Context(unseen_writer=self._unseen(store, handle, [sid]))
        if surplus:
            origin = self._surplus(store, sid, surplus)
            gone = store.gone.get(sid)
            if operation == "head" and gone is not None and origin == gone[1:]:
                # A head counting the removed events: they remain, or the store
                # remembers its old head; a read yielding them tells (`otherwise`).
                return Context(otherwise=origin)
            return Context(surplus=origin)
        return Context()

    def _unseen(
        self, store: _Store, handle: ModelHandle, sessions: Sequence[str]
    ) -> Literal["open", "closed"] | None:
        """Whether ``sessions`` were written through a handle other than ``handle``: one
        still open, or only closed ones (a durable store must keep their writes)."""
        others = [w for sid in sessions for w in store.writers.get(sid, []) if w is not handle]
        if not others:
            return None
        if all(w.closed for w in others):
            return "closed" if Capability.DURABLE in self._capabilities else None
        return "open"

    @staticmethod
    def _surplus(store: _Store, sid: str, surplus: int) -> tuple[str, str] | None:
        """Where ``surplus`` events beyond the model's come from, if their number tells:
        as many removed events, or another session's log of that length."""
        gone = store.gone.get(sid)
        if gone is not None and gone[0] == surplus:
            return gone[1], gone[2]
        for other in store.model.session_ids():
            if other != sid and len(store.model.log(other)) == surplus:
                return ("ID-002", PRESENCE_SHAPE["ID-002"])
        return None

    def _of_value(
        self,
        store: _Store,
        operation: str,
        args: Sequence[object],
        answer: object,
        value: object,
    ) -> Divergence | None:
        if operation == "read":
            assert isinstance(answer, list)
            since = args[1] if len(args) > 1 else 0
            sid = str(args[0])
            return of_read(
                since if isinstance(since, int) else 0,
                value if isinstance(value, list) else [],
                answer,
                intruder=lambda event: _intruder(store, sid, event),
            )
        if operation == "list_sessions":
            assert isinstance(answer, list)
            ids = [getattr(info, "id", info) for info in value] if isinstance(value, list) else []
            return of_listing([str(i) for i in ids], answer, made=store.made)
        if operation in ("delete", "close"):
            return None
        return of_answer(operation, answer, value)

    def _remember(
        self,
        store: _Store,
        operation: str,
        args: Sequence[object],
        refusal: BaseException | None,
        before: dict[str, list[ModelEvent]],
        handle: ModelHandle,
    ) -> None:
        """What this call makes of sessions the model no longer (or never) held: which
        rule a later listing or read of them would break."""
        if not args or not isinstance(args[0], str):
            return
        sid = args[0]
        held = sid in store.model.session_ids()
        removed = len(before.get(sid, [])) - len(store.model.log(sid))
        if operation == "append" and refusal is None and held:
            store.writers.setdefault(sid, []).append(handle)
        if operation == "truncate" and refusal is None and removed == 0:
            store.idle_truncates[sid] = store.idle_truncates.get(sid, 0) + 1
        if removed > 0 and refusal is None and operation == "delete":
            rule = removal_rule("deleted")
            store.gone[sid] = (removed, rule, PRESENCE_SHAPE[rule])
            store.writers.pop(sid, None)
        elif removed > 0 and refusal is None:
            rule = removal_rule("truncated")
            store.gone[sid] = (removed, rule, PRESENCE_SHAPE[rule])
        note_made(
            store.made,
            operation,
            sid,
            held=held,
            emptied=not store.model.log(sid),
            refusal=refusal,
        )
        if operation == "append" and refusal is not None and len(args) > 1:
            for refused_text in _texts(args[1]):
                store.refused.setdefault(refused_text, append_refusal_rule(refusal))
        if operation in ("delete", "truncate") and refusal is None:
            rule = removal_rule("deleted" if operation == "delete" else "truncated")
            kept = {_text(e) for e in store.model.log(sid)}
            for event in before.get(sid, []):
                removed_text = _text(event)
                if removed_text is not None and removed_text not in kept:
                    store.removed[(sid, removed_text)] = rule


def note_made(
    made: dict[str, tuple[str, str]],
    operation: str,
    session_id: str,
    *,
    held: bool,
    emptied: bool,
    refusal: BaseException | None,
) -> None:
    """Enter in ``made`` what ``operation`` on ``session_id`` makes of a listing: for a
    session the model does not hold (``held`` after the call), the rule and shape of
    the call that must not have created it (an empty append: APPEND-001, a refused
    append: its refusal's rule, a read or head: READ-002, a truncate: TRUNC-004, a
    delete: LIST-001); for one a truncate ``emptied``, TRUNC-005 should it go unlisted.
    ``made`` is what `checkpointspec.spec.divergences.of_listing` takes as its cause."""
    if operation == "truncate" and refusal is None and held and emptied:
        made[session_id] = ("TRUNC-005", "a session truncated to 0 is no longer listed")
    elif held:
        made.pop(session_id, None)
    elif operation == "append" and refusal is not None:
        made[session_id] = (append_refusal_rule(refusal), "a refused append created a session")
    elif operation == "append":
        made[session_id] = ("APPEND-001", "an empty append created a session")
    elif operation in ("read", "head"):
        made.setdefault(session_id, ("READ-002", f"{operation} of an unknown session created it"))
    elif operation == "truncate" and refusal is None:
        made.setdefault(session_id, ("TRUNC-004", "a truncate of an unknown session created it"))
    elif operation == "delete":
        made[session_id] = ("LIST-001", "list_sessions listed a deleted session")


def _maintenance_signature(session_id: str) -> None:
    """The arguments of acquire_maintenance and release_maintenance."""


def _unbound() -> inspect.BoundArguments:
    return inspect.signature(lambda: None).bind()


def _sessions_named(args: Sequence[object]) -> list[str]:
    return [args[0]] if args and isinstance(args[0], str) else []


def _text(event: object) -> str | None:
    inner = getattr(event, "event", event)
    return inner.text if isinstance(inner, UserPrompt) else None


def _texts(events: object) -> list[str]:
    if not isinstance(events, list | tuple):
        return []
    return [t for t in map(_text, events) if t is not None]


def _intruder(store: _Store, sid: str, event: StoredEvent) -> str | None:
    """The rule an event of ``sid``'s read breaks by being there, if the witness knows
    where it came from: another session's (ID-002), removed (DELETE-002, TRUNC-001),
    or a refused append's."""
    text = _text(event)
    if text is None:
        return None
    removed = store.removed.get((sid, text))
    if removed is not None:
        return removed
    if text in store.refused:
        return store.refused[text]
    for other in store.model.session_ids():
        if other != sid and any(_text(e) == text for e in store.model.log(other)):
            return "ID-002"
    return None


def _short(value: object, limit: int = 60) -> str:
    if isinstance(value, list | tuple) and value and all(_text(v) is not None for v in value):
        texts = [_text(v) for v in value]
        shown = f"[{', '.join(repr(t) for t in texts[:3])}{', ...' if len(texts) > 3 else ''}]"
        return shown if len(texts) <= 3 else f"{shown} ({len(texts)} prompts)"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_text(operation: str, args: Sequence[object], kwargs: dict[str, object]) -> str:
    """A call as the check made it, short: ``append('s', ['a', 'b'], expected_head=2)``."""
    shown = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{operation}({', '.join(shown)})"
