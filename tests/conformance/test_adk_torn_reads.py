"""A get_session of state and events of different moments is named as the torn read it is,
either way round (engines/contract/adk_session.py: torn_read), and nothing else is."""

from __future__ import annotations

from dataclasses import dataclass

from checkpointspec.conformance.checks.adk_session import append, create, delete, event, get
from checkpointspec.conformance.engines.contract.adk_session import TORN_READ, torn_read
from checkpointspec.conformance.engines.contract.contract import Answer, Call, Raised, Returned
from checkpointspec.spec.adk_session import encoded, event_text


@dataclass(frozen=True)
class Recorded:
    call: Call
    answer: Answer | None


ASKS = event(1, "caller 0 asks", {"last": 0, "app:seen": 0})
LATER = event(2, "caller 1 asks", {"last": 1, "app:seen": 1})


def _read(events: list[dict[str, object]], state: dict[str, object]) -> Recorded:
    value = {
        "events": [event_text(e) for e in events],
        "state": {k: encoded(v) for k, v in state.items()},
    }
    return Recorded(get(handle=3), Returned(value))


STORED = Returned(None)


def _history(*reads: Recorded, appended: Answer = STORED) -> list[Recorded]:
    return [
        Recorded(create(state={"user:turns": 0}), STORED),
        Recorded(append("s1", ASKS, handle=1), appended),
        *reads,
    ]


def test_app_state_newer_than_the_events_read_is_a_torn_read() -> None:
    # The read's events were read before the append, its app state after it.
    history = _history(_read([], {"user:turns": 0, "app:seen": 0}))
    torn = torn_read(history)
    assert torn is not None
    shape, said = torn
    assert shape == TORN_READ
    assert "app:seen='0'" in said
    assert "'e000001'" in said


def test_session_state_older_than_the_events_read_is_a_torn_read() -> None:
    history = _history(_read([ASKS], {"user:turns": 0, "app:seen": 0}))
    torn = torn_read(history)
    assert torn is not None
    assert torn[0] == TORN_READ
    assert "before the last 1 of the events" in torn[1]


def test_a_read_of_one_moment_is_not_torn() -> None:
    assert torn_read(_history(_read([ASKS], {"user:turns": 0, "last": 0, "app:seen": 0}))) is None
    assert torn_read(_history(_read([], {"user:turns": 0}))) is None


def test_a_value_another_call_also_set_names_no_append() -> None:
    # app:seen=0 set by two appends: the read's state may come from the one it returned.
    other = event(3, "caller 2 asks", {"app:seen": 0})
    history = [
        *_history(),
        Recorded(append("s1", other, handle=2), Returned(None)),
        _read([other], {"user:turns": 0, "app:seen": 0}),
    ]
    assert torn_read(history) is None


def test_a_refused_append_is_not_a_stored_one() -> None:
    # What a refused append set showing in the state is another defect, not a torn read.
    read = _read([], {"user:turns": 0, "app:seen": 0})
    assert torn_read(_history(read, appended=Raised("stale"))) is None


def test_a_value_of_an_append_the_read_returned_is_not_torn() -> None:
    history = [
        *_history(),
        Recorded(append("s1", LATER, handle=2), Returned(None)),
        _read([ASKS, LATER], {"user:turns": 0, "last": 1, "app:seen": 1}),
    ]
    assert torn_read(history) is None


def test_a_deleted_session_is_not_judged() -> None:
    # Its state and events may be of a session made again: no moment to compare.
    read = _read([], {"user:turns": 0, "app:seen": 0})
    history = [*_history(read), Recorded(delete(), STORED)]
    assert torn_read(history) is None
