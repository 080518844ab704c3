"""The history checker: one hand-made history per anomaly, and valid histories accepted.

Times are small integers (the checker only compares them). Each anomaly test
asserts the rule the verdict names, so a checker that finds the right problem for
the wrong reason fails. The properties at the end run random calls against
`SpecModel` one at a time, give each call an interval around the instant it took
effect, and require the checker to accept every such history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from checkpointspec.conformance.engines.history import (
    Conflicted,
    HistoryVerdict,
    Operation,
    OperationOutcome,
    Raised,
    Returned,
    Unknown,
    check_history,
)
from checkpointspec.conformance.engines.history.causes import unheeded_expectation
from checkpointspec.spec import (
    Capability,
    CheckpointConflictError,
    CheckpointError,
    SpecModel,
    UserPrompt,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


class History:
    """Builds operations; each process numbers its calls from 0."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._next: Counter[int] = Counter()

    def add(
        self,
        process: int,
        kind: str,
        times: tuple[int, int | None],
        outcome: OperationOutcome,
        **args: object,
    ) -> Operation:
        index = self._next[process]
        self._next[process] += 1
        op = Operation(
            process,
            index,
            kind,  # type: ignore[arg-type]
            str(args.pop("session", "s")),
            times[0],
            times[1],
            outcome,
            **args,  # type: ignore[arg-type]
        )
        self.ops.append(op)
        return op

    def append(
        self,
        process: int,
        markers: str,
        times: tuple[int, int | None],
        head: int | None = None,
        expected: int | None = None,
        conflict: int | None = None,
        session: str = "s",
    ) -> Operation:
        outcome: OperationOutcome
        if conflict is not None:
            assert expected is not None
            outcome = Conflicted(expected, conflict)
        elif head is not None:
            outcome = Returned(head)
        else:
            outcome = Unknown()
        return self.add(
            process,
            "append",
            times,
            outcome,
            markers=tuple(markers.split()),
            expected_head=expected,
            session=session,
        )

    def read(
        self, process: int, since: int, markers: str, times: tuple[int, int], session: str = "s"
    ) -> Operation:
        events = tuple((since + 1 + n, m) for n, m in enumerate(markers.split()))
        return self.add(
            process, "read", times, Returned(0, events), since_seq=since, session=session
        )

    def head(self, process: int, value: int, times: tuple[int, int]) -> Operation:
        return self.add(process, "head", times, Returned(value))

    def truncate(
        self, process: int, to_seq: int, times: tuple[int, int], expected: int | None = None
    ) -> Operation:
        return self.add(
            process, "truncate", times, Returned(to_seq), to_seq=to_seq, expected_head=expected
        )

    def check(self, final: str, **kwargs: int | bool) -> HistoryVerdict:
        return check_history(self.ops, {"s": final.split()}, **kwargs)


def rules(verdict: HistoryVerdict) -> list[str]:
    return [a.rule_id for a in verdict.anomalies]


# -- valid histories -------------------------------------------------------------------------


def test_a_valid_concurrent_history_is_accepted_by_the_chain() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1, expected=0)
    h.append(2, "b1 b2", (5, 20), head=3)  # overlaps a1, lands after it
    h.append(3, "c1", (6, 25), expected=0, conflict=1)  # saw a1 only
    h.read(4, 0, "a1", (8, 30))  # may run before b's append took effect
    h.head(1, 3, (21, 22))
    h.read(2, 1, "b1 b2", (26, 40))
    verdict = h.check("a1 b1 b2")
    assert verdict.ok, verdict.report()
    assert verdict.decided_by == {"s": "chain"}


def test_appends_may_take_effect_in_either_order_while_they_overlap() -> None:
    h = History()
    h.append(1, "a1", (0, 50), head=2)
    h.append(2, "b1", (10, 20), head=1)  # invoked later, took effect first
    assert h.check("b1 a1").ok


# -- one test per anomaly ----------------------------------------------------------------------


def test_lost_update_names_both_appends() -> None:
    h = History()
    for n in range(4):
        h.append(1, f"x{n}", (10 * n, 10 * n + 5), head=n + 1, expected=n)
    first = h.append(2, "e17", (50, 60), head=5, expected=4)
    second = h.append(3, "e18", (51, 61), head=5, expected=4)
    verdict = h.check("x0 x1 x2 x3 e17")
    # Across processes a lost update is MP-001; two appends acknowledged from one
    # expected_head break APPEND-004's statement too, and the stale one APPEND-002.
    assert rules(verdict) == ["MP-001"]
    anomaly = verdict.anomalies[0]
    assert anomaly.also == ("APPEND-004", "APPEND-002")
    assert "lost update" in anomaly.summary
    assert "process 2 appended e17 with expected_head 4 (ok, head 5)" in anomaly.summary
    assert "process 3 appended e18 with expected_head 4 (ok, head 5)" in anomaly.summary
    # The first anomalous call first: e18, acknowledged but stored nowhere.
    assert anomaly.operations == (second, first)


def test_lost_update_within_one_process_is_append_004() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1, expected=0)
    h.append(2, "b1", (1, 11), head=1, expected=0)
    verdict = check_history(h.ops, {"s": ["a1"]}, across_processes=False)
    assert rules(verdict) == ["APPEND-004"]
    assert verdict.anomalies[0].also == ("APPEND-002",)


def test_forked_chain_two_appends_acknowledged_at_one_seq() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (0, 10), head=1)
    verdict = h.check("a1")
    assert rules(verdict) == ["MP-001"]
    assert "forked" in verdict.anomalies[0].summary
    assert verdict.anomalies[0].also == ("APPEND-004",)


# -- anomalies named by their cause -------------------------------------------------------------


def lost_update_then_fork_seen() -> tuple[History, Operation, Operation]:
    """Process 2 checked head 1 before process 1's append from 1 landed, then appended
    after it (a check outside the write lock): its head is off by process 1's batch,
    and a read shows process 2's event at the seq both aimed for."""
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    mover = h.append(1, "m1 m2", (20, 40), head=3, expected=1)
    stale = h.append(2, "s1", (22, 45), head=4, expected=1)
    h.read(3, 1, "s1", (50, 60))  # the fork, as the store never had it
    h.head(3, 2, (61, 70))  # a head inside m's batch
    return h, mover, stale


def test_a_lost_update_is_the_cause_and_what_followed_its_symptoms() -> None:
    h, mover, stale = lost_update_then_fork_seen()
    verdict = h.check("a1 m1 m2 s1")
    assert rules(verdict)[0] == "MP-001", verdict.report()
    cause = verdict.anomalies[0]
    assert cause.operations == (stale, mover)
    assert cause.also == ("APPEND-004", "APPEND-002")  # both from expected_head 1
    assert "lost update" in cause.summary
    assert "stored from head 3, not its expected_head 1" in cause.summary
    # The reads that saw the fork are listed under it, never ahead of it.
    assert sorted(rules(verdict)[1:]) == ["HEAD-001", "READ-003"], verdict.report()
    assert "then, as READ-003:" in verdict.report()
    assert "SEQ-003" not in rules(verdict)  # s's head 4 is where s is: no wrong seq


def test_a_wrong_head_returned_because_of_a_lost_update_is_its_symptom() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(1, "m1 m2", (20, 40), head=3, expected=1)
    stale = h.append(2, "s1", (22, 45), head=2, expected=1)  # says seq 2; stored at 4
    verdict = h.check("a1 m1 m2 s1")
    assert rules(verdict) == ["MP-001", "SEQ-003"], verdict.report()
    assert verdict.anomalies[1].operations[0] is stale


def test_a_head_returned_wrong_where_the_batch_sits_rightly_is_seq_003() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1, expected=0)
    h.append(2, "b1", (20, 30), head=5, expected=1)  # stored at seq 2, as expected
    assert rules(h.check("a1 b1")) == ["SEQ-003"]


def test_a_stale_head_accepted_with_no_write_in_flight_is_append_002() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (20, 30), head=2, expected=0)
    assert rules(h.check("a1 b1")) == ["APPEND-002"]


def test_the_cause_does_not_depend_on_which_anomaly_was_found_first() -> None:
    # The read showing the fork began before the stale append: by time alone it
    # would lead; by cause, the lost update does.
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.read(3, 1, "s1", (12, 60))
    mover = h.append(1, "m1", (20, 40), head=2, expected=1)
    stale = h.append(2, "s1", (22, 45), head=3, expected=1)
    verdict = h.check("a1 m1 s1")
    assert verdict.anomalies[0].operations == (stale, mover), verdict.report()
    assert rules(verdict)[0] == "MP-001"


def test_the_violation_names_the_first_anomalous_call() -> None:
    h, _, _ = lost_update_then_fork_seen()
    violation = h.check("a1 m1 m2 s1").violation("3 processes made 5 calls")
    assert violation.rule_id == "MP-001"
    assert violation.also == ("APPEND-004", "APPEND-002")
    assert violation.call == "process 2: append('s', [s1], expected_head=1)"
    assert violation.got == "ok, head 4"
    assert violation.expected == (
        "CheckpointConflictError(expected 1, actual 3), the log unchanged"
    )
    first_line = violation.message.splitlines()[0]
    assert first_line.startswith("session 's': lost update: process 2 appended s1")
    assert "3 processes made 5 calls; 2 more anomalies follow it" in violation.message


def test_torn_batch_in_the_final_log() -> None:
    h = History()
    h.append(1, "a1 a2 a3", (0, 10), head=3)
    verdict = h.check("a1 a2")
    assert rules(verdict) == ["APPEND-003"]


def test_batch_interleaved_with_another_is_torn() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.append(2, "b1", (0, 10), head=3)
    assert rules(h.check("a1 b1 a2")) == ["APPEND-003"]


def test_a_batch_a_read_saw_partly_is_append_003() -> None:
    h = History()
    h.append(1, "a1 a2 a3", (0, 10), head=3)
    read = h.read(2, 0, "a1 a2", (5, 15))  # saw the batch half stored
    verdict = h.check("a1 a2 a3")
    assert rules(verdict) == ["APPEND-003"]
    assert verdict.anomalies[0].operations[0] is read


def test_duplicated_event() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (20, 30), head=2)
    assert rules(h.check("a1 b1 a1")) == ["APPEND-003"]


def test_read_that_is_not_a_slice_of_the_log() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(1, "b1", (20, 30), head=2)
    h.append(1, "c1", (40, 50), head=3)
    read = h.read(2, 1, "c1", (60, 70))  # skips b1
    verdict = h.check("a1 b1 c1")
    assert rules(verdict) == ["READ-003"]
    assert read in verdict.anomalies[0].operations


def test_stale_read_violates_real_time() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    append = h.append(2, "b1 b2", (5, 20), head=3)
    read = h.read(3, 0, "a1", (25, 30))  # began after b's append returned
    verdict = h.check("a1 b1 b2")
    assert rules(verdict) == ["READ-003"]
    anomaly = verdict.anomalies[0]
    assert "stale" in anomaly.summary
    assert read in anomaly.operations
    assert append in anomaly.operations


def test_read_that_sees_a_write_before_it_was_made() -> None:
    h = History()
    h.read(3, 0, "a1", (0, 5))
    h.append(1, "a1", (10, 20), head=1)
    assert rules(h.check("a1")) == ["READ-003"]


def test_appends_out_of_real_time_order() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=2)
    h.append(2, "b1", (20, 30), head=1)  # began after a1 returned, yet sits before it
    assert rules(h.check("b1 a1")) == ["MP-001"]


def test_stale_head() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.head(2, 0, (20, 30))
    assert rules(h.check("a1")) == ["HEAD-001"]


def test_conflict_reporting_a_head_that_never_existed() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.append(2, "b1 b2", (20, 30), head=4)
    h.append(3, "c1", (40, 50), expected=0, conflict=3)  # 3 is inside b's batch
    h.append(3, "c2", (60, 70), expected=0, conflict=9)  # the log never got that long
    verdict = h.check("a1 a2 b1 b2")
    assert rules(verdict) == ["APPEND-002", "APPEND-002"]
    assert "never had" in verdict.anomalies[0].summary
    assert "never held more than 4" in verdict.anomalies[1].summary


def test_conflict_reporting_a_head_that_was_gone_before_the_call() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(1, "a2", (20, 30), head=2)
    h.append(2, "c1", (40, 50), expected=0, conflict=1)  # head 1 ended at 30 at the latest
    assert rules(h.check("a1 a2")) == ["APPEND-002"]


def test_conflicted_append_that_wrote_anyway() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (20, 30), expected=0, conflict=1)
    assert rules(h.check("a1 b1")) == ["APPEND-002"]


def test_acknowledged_append_missing_from_the_final_log() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (20, 30), head=2)
    assert rules(h.check("a1")) == ["MP-001"]


def test_acknowledged_head_that_disagrees_with_where_the_batch_is() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "b1", (20, 30), head=5)
    assert rules(h.check("a1 b1")) == ["SEQ-003"]


@pytest.mark.parametrize(("final", "effect"), [("a1 k1 k2", "took effect"), ("a1", "did not")])
def test_unknown_outcome_is_resolved_by_the_final_log(final: str, effect: str) -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "k1 k2", (5, None), expected=1)  # killed in flight
    h.read(3, 0, "a1", (20, 30))
    verdict = h.check(final)
    assert verdict.ok, verdict.report()
    assert len(verdict.resolved) == 1
    assert effect in verdict.resolved[0]


def test_unknown_outcome_that_took_effect_must_respect_real_time() -> None:
    h = History()
    h.append(2, "k1", (50, None))  # killed after a1 had been acknowledged...
    h.append(1, "a1", (0, 10), head=2)
    assert rules(h.check("k1 a1")) == ["MP-001"]  # ...yet stored before it


def test_event_of_another_session_is_reported() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "t1", (0, 10), head=1, session="t")
    verdict = check_history(h.ops, {"s": ["a1", "t1"], "t": ["t1"]})
    assert rules(verdict) == ["ID-002"]


# -- truncates and deletes: epochs, and the search behind them --------------------------------


def test_truncate_between_epochs_is_decided_by_the_chain() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1, expected=0)
    h.append(2, "b1 b2", (5, 20), head=3)
    h.truncate(1, 2, (30, 40), expected=3)  # keeps a1 b1: cuts b's batch
    h.append(2, "c1", (50, 60), head=3, expected=2)  # expected_head 2 again after the cut
    h.read(3, 0, "a1 b1 c1", (70, 80))
    verdict = h.check("a1 b1 c1")
    assert verdict.ok, verdict.report()
    assert verdict.decided_by == {"s": "chain"}


def test_event_removed_by_a_truncate_reappearing() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(1, 1, (20, 30), expected=2)
    h.read(2, 0, "a1 a2", (40, 50))
    assert rules(h.check("a1")) == ["TRUNC-001"]


def test_truncate_with_a_stale_expected_head_that_succeeded() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(1, 0, (20, 30), expected=1)
    assert rules(h.check("")) == ["TRUNC-003"]


def test_truncate_overlapping_appends_goes_to_the_search() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(2, 1, (15, 40), expected=2)
    h.append(3, "b1", (20, 30), head=2, expected=1)  # ran after the truncate took effect
    h.read(1, 0, "a1 b1", (50, 60))
    verdict = h.check("a1 b1")
    assert verdict.ok, verdict.report()
    assert verdict.decided_by == {"s": "search"}


def _append_after_a_stale_truncate() -> History:
    """A truncate with a stale expected head (4, the head is 5) that succeeded, and an
    append answering the head it left, before the truncate returned."""
    h = History()
    h.append(1, "a1 a2 a3 a4 a5", (0, 10), head=5)
    h.truncate(2, 2, (15, 40), expected=4)
    h.append(3, "b1", (20, 30), head=3)
    return h


def test_an_append_only_a_truncate_ignoring_its_expectation_explains_is_an_anomaly() -> None:
    verdict = _append_after_a_stale_truncate().check("a1 a2 b1")
    assert not verdict.ok
    assert rules(verdict) == ["MP-001"]


def test_a_declared_unconditional_truncate_explains_what_it_leaves() -> None:
    """With TRUNC-003 expected (a store whose truncate takes no expected head), the
    truncate is judged as one without: the append's head is what it left."""
    verdict = _append_after_a_stale_truncate().check("a1 a2 b1", unconditional_truncates=True)
    assert verdict.ok, verdict.report()


def test_a_truncate_beyond_every_head_the_log_could_have_is_trunc_002() -> None:
    """An unconditional truncate that succeeded cutting to 4 while, whatever the order,
    the log held 2 events or fewer: a truncate beyond the head accepted."""
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(2, 1, (15, 40))
    h.truncate(3, 4, (20, 30))
    h.append(1, "b1", (50, 60), head=2)
    assert rules(h.check("a1 b1")) == ["TRUNC-002"]


def test_the_search_reports_what_no_order_explains() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(2, 1, (15, 40), expected=2)
    h.append(3, "b1", (20, 30), head=2, expected=1)
    h.read(1, 0, "a1 a2", (50, 60))  # the truncate had returned: a2 must be gone
    verdict = h.check("a1 b1")
    assert rules(verdict) == ["READ-003"]
    assert "linearizability search" in verdict.anomalies[0].summary


def _truncate_in_flight_across_answers() -> History:
    """A truncate in flight across a head and reads: each alone fits some moment for it."""
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(2, 1, (15, 100))
    h.append(1, "b1", (20, 30), head=3)
    h.read(3, 0, "a1 a2 b1", (40, 42))
    return h


@pytest.mark.parametrize("reads_after", [1, 2])
def test_a_wrong_head_a_wrong_order_explains_is_named_not_the_read_after_it(
    reads_after: int,
) -> None:
    # The head fits the truncate placed inside it, which the search tries first; the
    # reads after it then fit no order. With one read after it, leaving out either the
    # head or that read explains the rest: the first of them is named. With two, only
    # leaving out the head does.
    h = _truncate_in_flight_across_answers()
    wrong = h.head(4, 1, (50, 52))
    for n in range(reads_after):
        h.read(3, 0, "a1 a2 b1", (60 + 10 * n, 62 + 10 * n))
    verdict = h.check("a1")
    assert rules(verdict) == ["HEAD-001"], verdict.report()
    assert verdict.anomalies[0].operations[0] == wrong
    assert "head 3" in verdict.anomalies[0].summary  # the log when the head answered


def test_a_wrong_read_is_named_when_the_heads_around_it_agree_on_one_order() -> None:
    h = _truncate_in_flight_across_answers()
    h.head(4, 3, (50, 52))
    wrong = h.read(3, 0, "a1", (55, 57))
    h.head(4, 3, (60, 62))
    h.head(4, 3, (70, 72))
    verdict = h.check("a1")
    assert rules(verdict) == ["READ-003"], verdict.report()
    assert verdict.anomalies[0].operations[0] == wrong


@pytest.mark.parametrize(("actual", "ok"), [(2, True), (1, True), (7, False)])
def test_the_search_asks_the_model_what_a_conflicting_truncate_saw(actual: int, ok: bool) -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.truncate(2, 1, (15, 40), expected=2)
    h.add(3, "truncate", (20, 30), Conflicted(5, actual), to_seq=0, expected_head=5)
    verdict = h.check("a1")
    assert verdict.decided_by == {"s": "search"}
    assert verdict.ok == ok, verdict.report()
    assert ok or rules(verdict) == ["TRUNC-003"]


@pytest.mark.parametrize(
    ("head", "final", "ok"),
    [(1, "b1", True), (3, "a1 a2 b1", True), (3, "b1", False), (1, "a1 a2 b1", False)],
)
def test_a_delete_with_no_response_may_or_may_not_have_happened(
    head: int, final: str, ok: bool
) -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.add(2, "delete", (15, None), Unknown())
    h.append(3, "b1", (20, 30), head=head)
    verdict = h.check(final)
    assert verdict.decided_by == {"s": "search"}
    assert verdict.ok == ok, verdict.report()


def test_delete_starts_a_new_epoch() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.add(2, "delete", (20, 30), Returned(0))
    h.append(1, "b1", (40, 50), head=1, expected=0)
    assert h.check("b1").ok
    h.read(3, 0, "a1", (60, 70))  # the deleted event reappears after b1 was appended
    assert rules(h.check("b1")) == ["DELETE-002"]


@pytest.mark.parametrize(
    ("read", "ok"),
    [("b1", True), ("a1 b1", False), ("a1", False)],
)
def test_a_session_re_created_while_its_delete_is_in_flight(read: str, ok: bool) -> None:
    """The stress mix deletes sessions that other processes keep appending to: an
    append overlapping the delete starts the new log (head 1), and nothing of
    the old one may be read after it."""
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.add(2, "delete", (20, 40), Returned(0))
    h.append(3, "b1", (25, 35), head=1)  # overlaps the delete: it re-created the session
    h.read(1, 0, read, (50, 60))
    verdict = h.check("b1")
    assert verdict.decided_by == {"s": "search"}
    assert verdict.ok == ok, verdict.report()
    if not ok:
        assert rules(verdict) == ["READ-003"], verdict.report()


def test_a_search_out_of_budget_is_undecided_not_wrong() -> None:
    h = History()
    h.append(1, "a1 a2", (0, 10), head=2)
    h.add(2, "truncate", (15, None), Unknown(), to_seq=1)  # may or may not have happened
    for n in range(6):
        h.append(3, f"b{n}", (20 + n * 10, 25 + n * 10), head=3 + n)
    verdict = h.check("a1 a2 b0 b1 b2 b3 b4 b5", search_steps=3)
    assert verdict.ok
    assert verdict.undecided
    assert verdict.decided_by == {"s": "undecided"}


def test_malformed_histories_are_refused() -> None:
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(1, "a2", (5, 15), head=2)  # process 1 cannot have two calls in flight
    with pytest.raises(ValueError, match="before op 0 returned"):
        h.check("a1 a2")
    h = History()
    h.append(1, "a1", (0, 10), head=1)
    h.append(2, "a1", (0, 10), head=1)
    with pytest.raises(ValueError, match="two appends"):
        h.check("a1")
    with pytest.raises(ValueError, match="no final log"):
        check_history(h.ops[:1], {})


# -- properties: every sequential execution of the model is accepted ------------------------


@st.composite
def model_histories(
    draw: st.DrawFn, removals: bool
) -> tuple[list[Operation], dict[str, list[str]]]:
    """Random calls run one at a time on `SpecModel`, each given a consistent interval.

    Call k takes effect at instant 10k; its process invoked it after its previous
    call returned and sees it return before its next call. A process may be
    killed in flight, its call then taking effect or not.
    """
    processes = draw(st.integers(1, 4))
    model = SpecModel([Capability.TRUNCATE, Capability.DELETE])
    kinds = ["append", "append", "read", "head"] + (["truncate", "delete"] if removals else [])
    calls: dict[int, list[tuple[int, Operation]]] = {p: [] for p in range(processes)}
    killed: set[int] = set()
    markers = iter(range(10**6))
    for k in range(draw(st.integers(0, 30))):
        process = draw(st.integers(0, processes - 1))
        if process in killed:
            continue
        session = draw(st.sampled_from(["s", "t"]))
        kind = draw(st.sampled_from(kinds))
        head = model.head(session)
        expected = draw(st.sampled_from([None, head, head, max(0, head - 1), head + 1]))
        dies = draw(st.integers(0, 9)) == 0
        applies = not dies or draw(st.booleans())
        args: dict[str, object] = {}
        outcome: OperationOutcome
        try:
            if kind == "append":
                batch = tuple(f"m{next(markers)}" for _ in range(draw(st.integers(0, 3))))
                args = {"markers": batch, "expected_head": expected}
                value = (
                    model.append(session, [UserPrompt(m) for m in batch], expected)
                    if applies
                    else 0
                )
                outcome = Returned(value)
            elif kind == "read":
                since = draw(st.integers(0, head + 1))
                args = {"since_seq": since}
                events = tuple(
                    (e.seq, getattr(e.event, "text", "")) for e in model.read(session, since)
                )
                outcome = Returned(0, events)
            elif kind == "head":
                outcome = Returned(model.head(session))
            elif kind == "truncate":
                to_seq = draw(st.integers(0, head + 1))
                args = {"to_seq": to_seq, "expected_head": expected}
                outcome = Returned(model.truncate(session, to_seq, expected) if applies else 0)
            else:
                if applies:
                    model.delete(session)
                outcome = Returned(0)
        except CheckpointConflictError as conflict:
            outcome = Conflicted(conflict.expected, conflict.actual)
        except CheckpointError as error:
            outcome = Raised(type(error).__name__)
        if dies:
            outcome = Unknown()
            killed.add(process)
        op = Operation(process, len(calls[process]), kind, session, 0, None, outcome, **args)  # type: ignore[arg-type]
        calls[process].append((10 * k + 10, op))
    history: list[Operation] = []
    for ops in calls.values():
        previous_end = 0
        for n, (instant, op) in enumerate(ops):
            invoked = draw(st.integers(previous_end + 1, instant))
            limit = ops[n + 1][0] - 1 if n + 1 < len(ops) else instant + 60
            completed = (
                None if isinstance(op.outcome, Unknown) else draw(st.integers(instant, limit))
            )
            history.append(
                Operation(
                    op.process,
                    op.index,
                    op.kind,
                    op.session,
                    invoked,
                    completed,
                    op.outcome,
                    op.markers,
                    op.expected_head,
                    op.since_seq,
                    op.to_seq,
                )
            )
            previous_end = completed if completed is not None else instant
    finals = {sid: [getattr(e.event, "text", "") for e in model.read(sid)] for sid in ("s", "t")}
    return history, finals


_fast = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_fast
@given(model_histories(removals=False))
def test_model_histories_without_removals_are_accepted_by_the_chain(
    case: tuple[Sequence[Operation], dict[str, list[str]]],
) -> None:
    history, finals = case
    verdict = check_history(history, finals)
    assert verdict.ok, verdict.report()
    assert set(verdict.decided_by.values()) == {"chain"}


@_fast
@given(model_histories(removals=True))
def test_model_histories_with_truncates_and_deletes_are_accepted(
    case: tuple[Sequence[Operation], dict[str, list[str]]],
) -> None:
    history, finals = case
    verdict = check_history(history, finals)
    assert verdict.ok, verdict.report()
    assert not verdict.undecided


def _refused_truncate(to_seq: int, expected: int | None, error: str) -> Operation:
    return Operation(
        process=1,
        index=0,
        kind="truncate",
        session="s",
        invoked=0,
        completed=1,
        outcome=Raised(error, f"invalid to_seq: {to_seq} is beyond the head 2 of session 's'"),
        expected_head=expected,
        to_seq=to_seq,
    )


def test_a_truncate_refused_its_bound_below_its_expected_head_did_not_compare_it() -> None:
    """Expectations come before bounds: a bound refused at or below expected_head means the
    head was not expected_head, so the conflict was due (TRUNC-003), whatever cut the log."""
    refused = _refused_truncate(5, 6, "InvalidArgumentError")
    assert unheeded_expectation(refused) == (
        "TRUNC-003",
        "truncate did not raise CheckpointConflictError (head conflict)",
    )


@pytest.mark.parametrize(
    ("to_seq", "expected", "error"),
    [
        (7, 6, "InvalidArgumentError"),  # beyond expected_head too: the bound may be right
        (5, None, "InvalidArgumentError"),  # no expectation to heed
        (5, 6, "CodecError"),  # not a refusal of the bound
    ],
)
def test_other_refused_truncates_say_nothing_of_the_expectation(
    to_seq: int, expected: int | None, error: str
) -> None:
    assert unheeded_expectation(_refused_truncate(to_seq, expected, error)) is None


@pytest.mark.parametrize(
    ("truncate_expected", "actual", "rule"),
    [
        # Accepted with a stale head (3 at head 4), it cut to 2; the conflict saw head 2,
        # which no order gives while the truncate honours its head: the truncate's defect,
        # so a declared truncate_without_expected_head explains it.
        (3, 2, "TRUNC-003"),
        # An honest truncate, and a conflict reporting a head no log ever had: the append's.
        (4, 3, "APPEND-002"),
    ],
)
def test_an_append_no_order_explains_is_a_stale_truncates_only_when_that_explains_it(
    truncate_expected: int, actual: int, rule: str
) -> None:
    h = History()
    h.append(1, "a1 a2 a3 a4", (0, 10), head=4)
    h.truncate(2, 2, (15, 40), expected=truncate_expected)
    h.add(3, "append", (20, 30), Conflicted(4, actual), markers=("b1",), expected_head=4)
    verdict = h.check("a1 a2")
    assert rules(verdict) == [rule], verdict.report()
    explained = "accepted a stale expected_head" in verdict.anomalies[0].summary
    assert explained == (rule == "TRUNC-003"), verdict.report()
