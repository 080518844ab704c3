"""The ADK session service contract's model and judge, without a service."""

from __future__ import annotations

from checkpointspec.spec.adk_session import AdkState, Refused, encoded, event_text, judge, step


def _after(*calls: tuple[str, tuple[object, ...]], refuses_stale: bool = True) -> AdkState:
    state = AdkState(refuses_stale=refuses_stale)
    for operation, arguments in calls:
        state, _ = step(state, operation, arguments)
    return state


def _event(number: int, delta: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "id": f"e{number:06d}",
        "author": "user",
        "invocation_id": "inv",
        "text": f"turn {number}",
        "state_delta": delta or {},
    }


def _get(sid: str = "s", *, user: str = "u", handle: int | None = None) -> tuple[object, ...]:
    return ("app", user, sid, handle, None, None)


def test_state_deltas_apply_by_scope_as_the_in_memory_service_does() -> None:
    state = _after(
        ("create_session", ("app", "u", "s", {"app:a": 1, "user:b": 2, "own": 3, "temp:t": 4})),
        ("create_session", ("app", "u", "s2", {})),
        ("create_session", ("app", "v", "s", {})),
    )
    answer_of_s = step(state, "get_session", _get())[1]
    _, answer = step(state, "get_session", _get("s2"))
    assert answer == {"events": [], "state": {"app:a": "1", "user:b": "2"}}
    _, answer = step(state, "get_session", _get(user="v"))
    assert answer == {"events": [], "state": {"app:a": "1"}}
    later, _ = step(state, "append_event", ("app", "v", "s", None, _event(1, {"user:b": 5})))
    assert step(later, "get_session", _get(user="v"))[1] == {
        "events": [event_text(_event(1, {"user:b": 5}))],
        "state": {"app:a": "1", "user:b": "5"},
    }
    assert step(later, "get_session", _get())[1] == answer_of_s


def test_an_event_keeps_its_delta_without_temp_keys() -> None:
    made = _event(1, {"temp:x": 1, "k": -0.0})
    assert event_text(made) == encoded({**made, "state_delta": {"k": -0.0}})


def test_filters_give_the_latest_events_from_a_timestamp() -> None:
    state = _after(
        ("create_session", ("app", "u", "s", {})),
        *(("append_event", ("app", "u", "s", None, _event(n))) for n in range(1, 6)),
    )
    texts = [event_text(_event(n)) for n in range(1, 6)]
    assert step(state, "get_session", ("app", "u", "s", None, 2, None))[1]["events"] == texts[-2:]  # type: ignore[index]
    assert step(state, "get_session", ("app", "u", "s", None, 0, None))[1]["events"] == []  # type: ignore[index]
    assert step(state, "get_session", ("app", "u", "s", None, None, 4))[1]["events"] == texts[3:]  # type: ignore[index]
    assert step(state, "get_session", ("app", "u", "s", None, 1, 2))[1]["events"] == texts[-1:]  # type: ignore[index]


def test_a_stale_object_is_refused_by_a_persistent_service_only() -> None:
    calls = (
        ("create_session", ("app", "u", "s", {})),
        ("get_session", _get(handle=1)),
        ("get_session", _get(handle=2)),
        ("append_event", ("app", "u", "s", 1, _event(2))),
    )
    stale = ("app", "u", "s", 2, _event(3))
    assert step(_after(*calls), "append_event", stale)[1] == Refused("StaleSessionError")
    assert step(_after(*calls, refuses_stale=False), "append_event", stale)[1] is None
    # The object that appended is current after its own append.
    assert step(_after(*calls), "append_event", ("app", "u", "s", 1, _event(4)))[1] is None


def test_a_deleted_session_takes_no_append_and_is_judged_so() -> None:
    state = _after(
        ("create_session", ("app", "u", "s", {})),
        ("append_event", ("app", "u", "s", None, _event(1))),
        ("delete_session", ("app", "u", "s")),
    )
    assert step(state, "append_event", ("app", "u", "s", None, _event(2)))[1] == Refused(
        "SessionNotFoundError"
    )
    found = judge(state, "get_session", _get(), None, {"events": [], "state": {}})
    assert found.rule == "ADKDEL-001"


def test_causes_are_named_not_operations() -> None:
    state = _after(
        ("create_session", ("app", "u", "s", {"own": "x"})),
        ("create_session", ("app", "u", "S", {"own": "y"})),
    )
    expected = {"events": [], "state": {"own": encoded("x")}}
    merged = {"events": [], "state": {"own": encoded("y")}}
    assert judge(state, "get_session", _get(), expected, merged).rule == "ADKISO-001"
    rounded = {"events": [], "state": {"own": encoded("x ")}}
    assert judge(state, "get_session", _get(), expected, rounded).rule == "ADKITEM-001"
    lost = {"events": [], "state": {}}
    assert judge(state, "get_session", _get(), expected, lost).rule == "ADKSTATE-001"
    stale = judge(
        state,
        "append_event",
        ("app", "u", "s", 1, _event(1)),
        None,
        None,
        expected_error="StaleSessionError",
    )
    assert stale.rule == "ADKSTALE-001"


def test_a_float_rounded_or_a_sign_lost_is_the_value_changed() -> None:
    state = _after(("create_session", ("app", "u", "s", {"f": 1.7976931348623025e308, "z": -0.0})))
    expected = step(state, "get_session", _get())[1]
    for key, read in (("f", "1.7976931348623023e308"), ("z", "0.0")):
        actual = {"events": [], "state": {**expected["state"], key: read}}  # type: ignore[index]
        assert judge(state, "get_session", _get(), expected, actual).rule == "ADKITEM-001"


def test_a_float_inside_a_value_kept_as_a_decimal_is_the_value_changed() -> None:
    # PostgreSQL's JSONB keeps a number as `numeric`: a float deep in an app key's list,
    # set by an earlier call, reads back as the integer of its digits.
    state = _after(
        ("create_session", ("app", "u", "s0", {"app:k": ["x", False, 6.75886978272042e113]}))
    )
    expected = step(state, "create_session", ("app", "u", "s1", {}))[1]
    as_decimal = "[" + '"x",false,675886978272042' + "0" * 99 + "]"
    actual = {"id": "s1", "state": {"app:k": as_decimal}}
    found = judge(state, "create_session", ("app", "u", "s1", {}), expected, actual)
    assert found.rule == "ADKITEM-001"
    other = {"id": "s1", "state": {"app:k": '["x",false,7]'}}
    assert judge(state, "create_session", ("app", "u", "s1", {}), expected, other).rule == (
        "ADKSTATE-001"
    )


def test_a_refused_nul_is_the_value_not_the_operation() -> None:
    found = judge(
        AdkState(),
        "create_session",
        ("app", "u", "s", {"k": "a\x00b"}),
        {"id": "s", "state": {"k": encoded("a\x00b")}},
        None,
        raised="DBAPIError: unsupported Unicode escape sequence",
    )
    assert found.rule == "ADKITEM-001"
    plain = judge(
        AdkState(), "create_session", ("app", "u", "s", {}), {}, None, raised="OSError: x"
    )
    assert plain.rule == "ADKCREATE-001"
