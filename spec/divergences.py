"""Which rule a divergence breaks: one table, whichever check saw it.

A *divergence* is a call whose answer no legal behaviour of the contract allows:
the model (`checkpointspec.spec.model`) says what the call must return or raise,
and the store did something else. The rule it breaks is a function of the
divergence alone, decided here and nowhere else, so that the same defect gets
the same name in the model-based machine, in a check's own steps and in a
recorded history: a read yielding the event at ``since_seq`` is READ-001 wherever
it is seen, a stale ``expected_head`` accepted is APPEND-002, content that
changed on the way back is EVENT-001.

Each `Divergence` carries a ``shape``: what went wrong in words that do not
depend on the example (no seqs, ids or texts). Two findings with the same rule
and shape are one defect, found twice; the ``call``, ``expected`` and ``got``
say where and how it was seen this time.

The order of the tests below is the order of causes: a read is judged first by
what it must never yield (an event at or before ``since_seq``, something that is
not an event), then by its seqs (their numbering before what is missing or
extra), and only for the right seqs by their content, so that the first thing
wrong names the defect and what it corrupted later does not. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from .errors import (
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    InvalidArgumentError,
    SessionLockedError,
    UnsupportedOperationError,
)
from .model import ModelEvent
from .records import StoredEvent

__all__ = [
    "ANSWER_RULE",
    "TO_HEAD_CHANGED",
    "UNCOMPARED_TRUNCATE",
    "WRONG_GENERATION",
    "Context",
    "Divergence",
    "crash",
    "crash_named",
    "evidence_of",
    "in_context",
    "of_answer",
    "of_error",
    "of_listing",
    "of_read",
    "rule_requiring",
    "same_fold",
]


class Divergence(msgspec.Struct, frozen=True):
    """A call whose answer the contract does not allow, and the rule that says so.

    ``shape`` names the defect without the example's values; ``call`` is the call
    as made, ``expected`` what the contract allows there, ``got`` what came back.
    """

    rule: str
    shape: str
    call: str = ""
    expected: str = ""
    got: str = ""
    otherwise: tuple[str, str] | None = None
    """Another explanation of the same answer, as a rule and shape, where the calls
    before it cannot tell which holds (`in_context`): a read short of another handle's
    writes is named HANDLE-001, otherwise its own rule's; a head counting events a
    truncate removed is HEAD-001's, otherwise the events remain (TRUNC-001). Evidence
    of the other explanation elsewhere in the run (a handle missing its own writes, a
    read yielding the removed events) decides it: the run then files this divergence
    under it."""

    def at(self, call: str) -> Divergence:
        """The same divergence, seen at ``call``."""
        return msgspec.structs.replace(self, call=call)


ANSWER_RULE = {
    "append": "SEQ-003",
    "read": "READ-001",
    "head": "HEAD-001",
    "list_sessions": "LIST-001",
    "delete": "DELETE-001",
    "truncate": "TRUNC-001",
    "generation": "GEN-001",
    "check_integrity": "INTEG-001",
    "close": "CLOSE-001",
}
"""The rule that defines what each operation returns when it succeeds."""

_ARGUMENT_RULE = {"session_id": "ARG-001", "events": "ARG-003"}
"""The rule requiring a refusal of an invalid argument, when the refusal names none."""
_REFUSED_VALID = {"session_id": "ID-001", "events": "EVENT-001"}
"""The rule broken by refusing a valid argument."""


def rule_requiring(operation: str, error: BaseException) -> str:
    """The rule that requires ``operation`` to raise ``error`` (the model's refusal)."""
    if isinstance(error, CheckpointerClosedError):
        return "CLOSE-001"
    if isinstance(error, UnsupportedOperationError):
        return "CAP-001"
    if isinstance(error, CheckpointConflictError):
        if error.kind == "generation":
            return "GEN-002"
        return "TRUNC-003" if operation == "truncate" else "APPEND-002"
    if isinstance(error, InvalidArgumentError):
        # The model's refusals name their rule (spec.validation, spec.events); an
        # error built without one falls back to the rule of its argument.
        if error.rule_id is not None:
            return error.rule_id
        return _ARGUMENT_RULE.get(error.argument, "ARG-002")
    return ANSWER_RULE[operation]


def _raised(error: BaseException) -> str:
    return f"raised {type(error).__name__}: {error}"


def _conflict_facts(error: CheckpointConflictError) -> tuple[object, ...]:
    return (error.session_id, error.expected, error.actual, error.kind)


def crash(operation: str, error: BaseException) -> tuple[str, str]:
    """The rule and shape of ``operation`` raising ``error``, an error outside the
    contract: the operation's answer rule, the same in every check."""
    return _crashed(operation, type(error).__name__)


def _crashed(operation: str, error_name: str) -> tuple[str, str]:
    return ANSWER_RULE[operation], f"{operation} raised {error_name}"


_REFUSALS = frozenset(
    kind.__name__
    for kind in (
        CheckpointConflictError,
        CheckpointerClosedError,
        InvalidArgumentError,
        SessionLockedError,
        UnsupportedOperationError,
    )
)
"""The contract's refusals: errors whose meaning `of_error` judges against the
refusal that was due. Every other error where success was due is a crash."""


def crash_named(operation: str, error_name: str) -> tuple[str, str] | None:
    """`crash` for evidence that knows the error only by its class name (a worker
    process's last words or error reply, a recorded history): the rule and shape of
    ``operation`` raising ``error_name`` where it should have succeeded, or None when
    that is one of the contract's refusals (a conflict, a closed handle, an invalid
    argument, a lock, an unsupported operation: the check judges those) or
    ``operation`` is none of the contract's. Whichever check's worker met the crash,
    the defect has the name the model-based machine gives it (`of_error`: the store's
    own ``TypeError``, or a `CorruptStoreError` from a healthy store), so the run can
    see the two are one."""
    if operation not in ANSWER_RULE or error_name in _REFUSALS:
        return None
    return _crashed(operation, error_name)


def truncates_to_head_counted(expected: int, got: object, to_head: int) -> tuple[str, str] | None:
    """TRUNC-005's rule and shape when a generation ``got`` counts as many more than
    the model's ``expected`` as the session took ``to_head`` truncates to its head (one
    acted, or the generation counts calls: a truncate to the head seen acting tells);
    else None."""
    if to_head > 0 and isinstance(got, int) and got == expected + to_head:
        return "TRUNC-005", TO_HEAD_CHANGED
    return None


def of_error(
    operation: str, expected: BaseException | None, got: BaseException | None
) -> Divergence | None:
    """The divergence of a call whose outcome differs in whether or what it raised.

    ``expected`` is the model's refusal (None: it succeeds), ``got`` what the store
    raised (None: it returned). None when both raised the same error with the same
    facts, or both returned (their values are for `of_answer`, `of_read`, `of_listing`).
    """
    if expected is None and got is None:
        return None
    if isinstance(got, UnsupportedOperationError) and not isinstance(
        expected, UnsupportedOperationError
    ):
        # A declared operation that refuses to work: whatever else the call should
        # have done, the refusal is the cause.
        return Divergence(
            ANSWER_RULE[operation],
            f"{operation} refused although its capability is declared",
            expected="success" if expected is None else f"raises {type(expected).__name__}",
            got=_raised(got),
        )
    if (
        got is not None
        and not isinstance(got, CheckpointError)
        and not isinstance(expected, (CheckpointerClosedError, InvalidArgumentError))
    ):
        # Not one of the contract's answers at all (the store's own TypeError, a
        # driver's error): a crash of the operation, whether it should have succeeded
        # or conflicted, so the same crash has the same name in every check. Where an
        # argument was invalid it is that argument's refusal missing, and on a closed
        # handle the missing CheckpointerClosedError (CLOSE-001), below.
        rule, shape = crash(operation, got)
        return Divergence(
            rule,
            shape,
            expected="success" if expected is None else f"raises {type(expected).__name__}",
            got=_raised(got),
        )
    if isinstance(got, SessionLockedError) and not isinstance(expected, SessionLockedError):
        # The model holds no maintenance lock here (a caller that follows the lock
        # judges the refusals it owes first): the lock refused what no holder explains,
        # never taken or not given back on release or close (MAINT-003), whatever
        # else the call should have done.
        return Divergence(
            "MAINT-003",
            "a write of a session no handle holds raised SessionLockedError",
            expected="success" if expected is None else f"raises {type(expected).__name__}",
            got=_raised(got),
        )
    if expected is not None:
        rule = rule_requiring(operation, expected)
        want = f"raises {type(expected).__name__}: {expected}"
        stale_generation_passed = (
            isinstance(expected, CheckpointConflictError)
            and expected.kind == "generation"
            and (
                got is None
                or (isinstance(got, CheckpointConflictError) and got.kind != "generation")
            )
        )
        if stale_generation_passed:
            # The store let a stale expected_generation through (it went on to succeed,
            # or to judge the head): it does not compare it, or its generation is not
            # the model's. A conflict showing that generation, met elsewhere, tells.
            return Divergence(
                rule,
                f"{operation} did not raise CheckpointConflictError (generation conflict)",
                expected=want,
                got="returned" if got is None else _raised(got),
                otherwise=("GEN-001", WRONG_GENERATION),
            )
        if got is None or not isinstance(got, type(expected)):
            came = "returned" if got is None else _raised(got)
            shape = f"{operation} did not raise {type(expected).__name__}" + (
                f" ({expected.kind} conflict)"
                if isinstance(expected, CheckpointConflictError)
                else f" for {expected.argument}"
                if isinstance(expected, InvalidArgumentError)
                else ""
            )
            crashed = got is not None and not isinstance(got, CheckpointError)
            otherwise = crash(operation, got) if crashed and got is not None else None
            if (
                got is None
                and operation == "truncate"
                and isinstance(expected, InvalidArgumentError)
                and expected.argument == "expected_head"
            ):
                # A truncate that never compares its expected head refuses no value of
                # it: seen letting a stale one through, that is the defect.
                otherwise = ("TRUNC-003", UNCOMPARED_TRUNCATE)
            return Divergence(
                rule,
                shape,
                expected=want,
                got=came,
                # Crashing where a refusal was due: if the same crash is met where
                # success was, the operation crashes whatever its arguments.
                otherwise=otherwise,
            )
        if isinstance(expected, CheckpointConflictError):
            assert isinstance(got, CheckpointConflictError)
            if got.kind != expected.kind:
                # A conflict of another kind than the one due: the store judged the
                # other expectation wrong, and that expectation held.
                return of_error(operation, None, got)
            if (
                expected.kind == "generation"
                and _conflict_facts(got)[:2] == _conflict_facts(expected)[:2]
                and got.actual != expected.actual
            ):
                # The right expectation refused, with a generation of the store's own:
                # the generation is what is wrong (GEN-001), as for any conflict.
                return Divergence("GEN-001", WRONG_GENERATION, expected=want, got=_raised(got))
            if _conflict_facts(got) != _conflict_facts(expected):
                facts = "(session_id, expected, actual, kind)"
                return Divergence(
                    rule,
                    f"{operation}'s conflict carries other facts",
                    expected=f"a conflict with {facts} = {_conflict_facts(expected)}",
                    got=f"a conflict with {facts} = {_conflict_facts(got)}",
                )
        return None
    assert got is not None
    if isinstance(got, CheckpointConflictError) and got.kind == "generation":
        # The store compared the right expectation with a wrong generation of its own:
        # the generation is what is wrong (GEN-001 defines it).
        rule, shape = "GEN-001", WRONG_GENERATION
    elif isinstance(got, CheckpointConflictError):
        rule = "TRUNC-003" if operation == "truncate" else "APPEND-002"
        shape = f"{operation} refused an expectation that holds"
    elif isinstance(got, CheckpointerClosedError):
        rule, shape = "CLOSE-002", f"{operation} on an open handle raised CheckpointerClosedError"
    elif isinstance(got, InvalidArgumentError):
        # A valid id refused is ID-001 (every valid id is stored as given), a valid
        # event refused EVENT-001 (every event round-trips); a valid seq, the
        # operation's own rule.
        rule = _REFUSED_VALID.get(got.argument, ANSWER_RULE[operation])
        shape = f"{operation} refused a valid {got.argument}"
    else:
        rule, shape = crash(operation, got)
    return Divergence(rule, shape, expected="success", got=_raised(got))


def of_answer(operation: str, expected: object, got: object) -> Divergence | None:
    """The divergence of a call that returned another value than the model's: an
    append's new head (SEQ-003), a head (HEAD-001), a truncate's bound (TRUNC-001),
    a generation (GEN-001)."""
    if got == expected and type(got) is type(expected):
        return None
    rule = ANSWER_RULE[operation]
    answer = _WRONG_ANSWERS[0]
    if isinstance(expected, int) and isinstance(got, int):
        answer = _WRONG_ANSWERS[1 if got == 0 else 2 if got < expected else 3]
    return Divergence(
        rule, f"{operation} {answer}", expected=f"returns {expected!r}", got=f"returned {got!r}"
    )


_WRONG_ANSWERS: Final = (
    "returned another value",
    "returned 0",
    "returned less than the model",
    "returned more than the model",
)
"""How an answer other than the model's is shaped (after the operation's name)."""


WRONG_GENERATION = "a conflict shows a generation other than the model's"
"""GEN-001's shape for a generation conflict that names the store's own generation."""


def evidence_of(rule: str, shape: str) -> frozenset[tuple[str, str]]:
    """The rules and shapes whose plain sighting shows what a finding's other
    explanation ``(rule, shape)`` says: that rule and shape, and for a store's
    generation other than the model's (`WRONG_GENERATION`) two more sightings that
    show the same thing without a conflict: every wrong answer of ``generation()``
    (a stale ``expected_generation`` let through by a delete that did not count is
    then GEN-001's on every seed), and a truncate to the head seen acting (TRUNC-005,
    `TO_HEAD_CHANGED`: it moved the generation, so an expectation one above the
    model's is let through, and the finding is TRUNC-005's). The finding follows
    from the rule of the sighting met."""
    if (rule, shape) == ("GEN-001", WRONG_GENERATION):
        return frozenset(
            {
                (rule, shape),
                *((rule, f"generation {answer}") for answer in _WRONG_ANSWERS),
                ("TRUNC-005", TO_HEAD_CHANGED),
            }
        )
    return frozenset({(rule, shape)})


UNCOMPARED_TRUNCATE = "truncate did not raise CheckpointConflictError (head conflict)"
"""TRUNC-003's shape for a truncate that let a stale ``expected_head`` through: a
truncate that never compares it (a store whose truncate takes none) also lets an
invalid one through, so an ARG-002 of a truncate's ``expected_head`` follows from it."""

TO_HEAD_CHANGED = "a truncate to the head changed the session"
"""TRUNC-005's shape wherever a truncate to the head is seen to have acted: its mtime
or generation moved."""

PRESENCE_SHAPE = {
    "DELETE-002": "a deleted log's events remain",
    "TRUNC-001": "truncated events remain",
    "ID-002": "another session's events share its log",
}
"""What events that must not be in a log show, by the rule their presence breaks:
the same shape whether a read yields them or an answer counts them."""


Owner = Callable[[StoredEvent], str | None]
"""Where an event the store yielded must not be comes from: the rule its presence
breaks (another session's event: ID-002, a deleted one: DELETE-002, a truncated
one: TRUNC-001, a refused append's: APPEND-002 ...), or None if nothing is known."""


def _seqs(events: Sequence[StoredEvent | ModelEvent]) -> list[int]:
    return [e.seq for e in events]


def of_read(
    since_seq: int,
    got: Sequence[object],
    expected: Sequence[ModelEvent],
    *,
    intruder: Owner | None = None,
) -> Divergence | None:
    """The first thing wrong with a read's events ``got`` against the model's
    ``expected`` (the events with seq > ``since_seq``), or None.

    In the order of causes: something that is no `StoredEvent` (EVENT-001); an
    event at or before ``since_seq``, or the log's seqs out of ascending order
    (READ-001; seqs out of order that are not the log's are judged sorted); an
    event that must not be there at all, by ``intruder`` (the rule it names); seqs
    repeated, not starting at 1 or with a gap (SEQ-001); events missing or extra
    (READ-001: a read yields exactly the log); then, seq by seq, the parent
    (SEQ-002), the session id (SEQ-004) and the event itself (EVENT-001).
    """
    stored: list[StoredEvent] = []
    for item in got:
        if not isinstance(item, StoredEvent):
            return Divergence(
                "EVENT-001", "read yielded something that is not a StoredEvent", got=repr(item)
            )
        stored.append(item)
    seqs, want = _seqs(stored), _seqs(expected)
    if seqs == want:
        return _content(stored, expected)
    shown = f"seqs {seqs}"
    wanted = f"seqs {want}"
    if len(set(seqs)) != len(seqs):
        return Divergence("SEQ-001", "a log holds a seq twice", expected=wanted, got=shown)
    if any(seq <= since_seq for seq in seqs) and since_seq > 0:
        return Divergence(
            "READ-001", "read yielded an event at or before since_seq", expected=wanted, got=shown
        )
    if any(b < a for a, b in itertools.pairwise(seqs)):
        if sorted(seqs) == want:
            return Divergence(
                "READ-001", "read yielded seqs out of order", expected=wanted, got=shown
            )
        # Not the log's seqs in another order: how they were numbered comes first.
        seqs = sorted(seqs)
    if intruder is not None:
        wanted_events = {e.seq: e.event for e in expected}
        for event in stored:
            if wanted_events.get(event.seq) == event.event:
                continue
            rule = intruder(event)
            if rule is not None:
                return Divergence(
                    rule,
                    PRESENCE_SHAPE.get(
                        rule, f"read yielded an event that must not be in the log ({rule})"
                    ),
                    expected=wanted,
                    got=f"{shown}, seq {event.seq} being {event.event!r}",
                )
    if seqs and since_seq == 0 and seqs[0] != 1:
        return Divergence("SEQ-001", "a log's seqs do not start at 1", expected=wanted, got=shown)
    if any(b != a + 1 for a, b in itertools.pairwise(seqs)):
        return Divergence("SEQ-001", "a log's seqs have a gap", expected=wanted, got=shown)
    if not seqs:
        shape = "read yielded nothing of a log that holds events"
    elif not want:
        shape = "read yielded events of an empty log"
    elif len(seqs) < len(want):
        shape = "read yielded fewer events than the log holds"
    else:
        shape = "read yielded more events than the log holds"
    return Divergence("READ-001", shape, expected=wanted, got=shown)


def _content(stored: Sequence[StoredEvent], expected: Sequence[ModelEvent]) -> Divergence | None:
    for event, model in zip(stored, expected, strict=True):
        where = f"seq {event.seq}"
        if event.parent_seq != model.parent_seq:
            return Divergence(
                "SEQ-002",
                "an event's parent_seq is not seq - 1",
                expected=f"{where} with parent_seq {model.parent_seq!r}",
                got=f"{where} with parent_seq {event.parent_seq!r}",
            )
        if event.session_id != model.session_id:
            return Divergence(
                "SEQ-004",
                "an event carries another session id",
                expected=f"{where} of session {model.session_id!r}",
                got=f"{where} of session {event.session_id!r}",
            )
        if type(event.event) is not type(model.event) or event.event != model.event:
            return Divergence(
                "EVENT-001",
                "an event changed on the way back",
                expected=f"{where} = {model.event!r}",
                got=f"{where} = {event.event!r}",
            )
    return None


def of_listing(
    got: Sequence[str],
    expected: Sequence[str],
    *,
    made: Mapping[str, tuple[str, str]] = {},
) -> Divergence | None:
    """The ids listed, each once, must be the sessions the model holds (LIST-001; their
    order is LIST-002's, judged where ties can be told from order). As many ids listed
    that the model does not hold as it holds ids not listed: ids not kept as given
    (ID-001). A session listed that the model does not hold, or not listed that it
    does, is named by what made it so: ``made`` maps a session id to the rule and shape
    of the call that would have made it (an empty append: APPEND-001, a read of an
    unknown session: READ-002, a refused append: its refusal's rule, a delete:
    LIST-001, a truncate of an unknown session: TRUNC-004, a truncate to 0: TRUNC-005). A session listed under
    an id no call made but that folds into one an empty append made (`same_fold`: a
    store mapping ``a/b`` to ``a_b``) is that append's too, the folding being the
    other explanation (ID-001)."""
    if sorted(got) == sorted(expected):
        return None
    wanted, shown = f"ids {sorted(expected)}", f"ids {sorted(got)}"
    if len(set(got)) != len(got):
        return Divergence("LIST-001", "list_sessions listed a session twice", "", wanted, shown)
    extra, missing = set(got) - set(expected), set(expected) - set(got)
    if extra and len(extra) == len(missing):
        return Divergence("ID-001", _OTHER_ID, "", wanted, shown)
    for one in sorted(extra):
        if (found := made.get(one)) is not None:
            return Divergence(found[0], found[1], expected=wanted, got=shown)
    for one in sorted(missing):
        if (found := made.get(one)) is not None:
            return Divergence(found[0], found[1], expected=wanted, got=shown)
    for one, (rule, shape) in sorted(made.items()):
        if rule == "APPEND-001" and one not in got and any(same_fold(one, x) for x in extra):
            otherwise = ("ID-001", _OTHER_ID)
            return Divergence(rule, shape, expected=wanted, got=shown, otherwise=otherwise)
    if set(got) - set(expected):
        shape = "list_sessions listed a session that was never written"
    else:
        shape = "list_sessions left out a session that holds events"
    return Divergence("LIST-001", shape, expected=wanted, got=shown)


_OTHER_ID: Final = "list_sessions listed an id other than as given"


def same_fold(a: str, b: str) -> bool:
    """Whether a store could take ids ``a`` and ``b`` for one: the same once Unicode is
    normalised (NFKC), case folded, and every character but a letter or digit made
    ``_`` (the separators and escapes file names and keys are made with)."""
    return _fold(a) == _fold(b)


def _fold(session_id: str) -> str:
    folded = unicodedata.normalize("NFKC", session_id).casefold()
    return "".join(c if c.isalnum() else "_" for c in folded)


class Context(msgspec.Struct, frozen=True):
    """What the calls before a divergence tell about its cause, where the divergence
    alone cannot: an answer short of the model's may be a handle that does not see
    another's writes, one beyond it a log that kept what it should not have.

    ``empty_batch``: the call appended an empty batch (APPEND-001 governs all of it).
    ``unseen_writer``: the events the answer is short of were written through another
    handle, still ``open`` or ``closed`` since (and the store is durable).
    ``surplus``: the rule and shape of where the answer's excess comes from (a deleted
    log's events: DELETE-002, truncated events: TRUNC-001, another session's: ID-002).
    """

    empty_batch: bool = False
    coded: bool = False
    """The store's payloads pass through a codec: content that changed on the way back
    did not round-trip through it (CODEC-001)."""
    unseen_writer: Literal["open", "closed"] | None = None
    surplus: tuple[str, str] | None = None
    otherwise: tuple[str, str] | None = None
    """Another explanation of the answer, which the calls before it cannot tell from
    the answer's own rule: a head counting as many more events as a truncate removed
    (those events remain: TRUNC-001, or the store remembers its old head), a
    generation counting as many more as truncates to the head (one acted: TRUNC-005,
    or the generation counts calls). The divergence keeps its rule, with this."""


def in_context(divergence: Divergence, context: Context) -> Divergence:
    """``divergence`` named by its cause, where its ``context`` knows one: in this
    order, an empty batch, a surplus from a known origin, a writer the caller's handle
    does not see (HANDLE-001) or whose writes its close lost (DUR-001). Those last two
    are inferences: the divergence keeps what it is ``otherwise``, as does an answer
    with another explanation (``Context.otherwise``)."""
    if context.empty_batch:
        return msgspec.structs.replace(
            divergence, rule="APPEND-001", shape=f"an empty append: {divergence.shape}"
        )
    if context.coded and divergence.rule == "EVENT-001":
        return msgspec.structs.replace(
            divergence, rule="CODEC-001", shape=f"through the codec, {divergence.shape}"
        )
    if context.surplus is not None:
        rule, shape = context.surplus
        return msgspec.structs.replace(divergence, rule=rule, shape=shape)
    if context.otherwise is not None:
        return msgspec.structs.replace(divergence, otherwise=context.otherwise)
    alone = (divergence.rule, divergence.shape)
    if context.unseen_writer == "open":
        return msgspec.structs.replace(
            divergence,
            rule="HANDLE-001",
            shape="a handle does not see another handle's writes",
            otherwise=alone,
        )
    if context.unseen_writer == "closed":
        return msgspec.structs.replace(
            divergence,
            rule="DUR-001",
            shape="writes are lost once their handle closes",
            otherwise=alone,
        )
    return divergence
