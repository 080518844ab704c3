"""Argument validation (spec/validation.py): what is inside the contract and what is not.

Each refusal is an `InvalidArgumentError` whose ``argument`` names the parameter
(ARG-001..ARG-003); each acceptance returns the value unchanged.
"""

from __future__ import annotations

import unicodedata
from collections import UserList
from collections.abc import Iterator, Sequence

import pytest
from checkpointspec.spec import (
    EVENT_TYPES,
    MAX_SESSION_ID_LENGTH,
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    InvalidArgumentError,
    RepairMessage,
    RuntimeReminder,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    check_events,
    check_optional_seq,
    check_seq,
    check_session_id,
)
from hypothesis import given
from hypothesis import strategies as st

ONE_OF_EACH = (
    UserPrompt("p"),
    AssistantMessage("a"),
    ToolStarted("t1", "ls"),
    ToolResult("t1", "out"),
    FileSnapshot("f.txt", None),
    Summary("s", 1, 10, 2),
    BackgroundCompletion("task", "done"),
    RuntimeReminder("r"),
    RepairMessage("fix"),
)


# -- session ids (ARG-001, ID-001) -----------------------------------------------------


def test_max_session_id_length_is_the_documented_256() -> None:
    assert MAX_SESSION_ID_LENGTH == 256


@pytest.mark.parametrize(
    "session_id",
    [
        pytest.param("x" * 256, id="256-chars"),
        pytest.param("\U0001f600" * 256, id="256-astral-code-points"),
        pytest.param("a", id="one-char"),
        pytest.param("a/b", id="slash"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("..", id="dot-dot"),
        pytest.param("../x", id="parent"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("C:\\x", id="drive"),
        pytest.param("CON", id="device-name"),
        pytest.param("x ", id="trailing-space"),
        pytest.param(" ", id="space-only"),
        pytest.param("\t\n\r", id="control-whitespace"),
        pytest.param("a\u2028b", id="line-separator"),
        pytest.param(unicodedata.normalize("NFD", "é"), id="nfd"),
        pytest.param("日本語セッション", id="cjk"),
        pytest.param("\ufeffbom", id="bom"),
        pytest.param("a:b*c?d|e<f>g\"h'", id="reserved-punctuation"),
    ],
)
def test_arg_001_valid_session_ids_are_returned_unchanged(session_id: str) -> None:
    assert check_session_id(session_id) is session_id


@given(
    st.text(
        alphabet=st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
        min_size=1,
        max_size=MAX_SESSION_ID_LENGTH,
    )
)
def test_id_001_any_nonempty_text_without_nul_up_to_256_code_points_is_valid(
    session_id: str,
) -> None:
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize(
    ("session_id", "reason_part"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("x" * 257, "257", id="257-chars"),
        pytest.param("\U0001f600" * 257, "257", id="257-astral-code-points"),
        pytest.param("\x00", "NUL", id="nul-only"),
        pytest.param("a\x00b", "NUL", id="inner-nul"),
        pytest.param("a\ud800", "UTF-8", id="lone-high-surrogate"),
        pytest.param("\udfff", "UTF-8", id="lone-low-surrogate"),
        pytest.param(b"abc", "bytes", id="bytes"),
        pytest.param(None, "NoneType", id="none"),
        pytest.param(1, "int", id="int"),
        pytest.param(["a"], "list", id="list"),
    ],
)
def test_arg_001_bad_session_ids_are_refused(session_id: object, reason_part: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_session_id(session_id)
    assert info.value.argument == "session_id"
    assert reason_part in info.value.reason


def test_arg_001_lone_surrogate_error_keeps_the_encoding_error_as_cause() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_session_id("s\udc80")
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


@given(st.text(min_size=1, max_size=20), st.integers(min_value=0, max_value=20))
def test_arg_001_nul_anywhere_is_refused(text: str, position: int) -> None:
    position = min(position, len(text))
    with pytest.raises(InvalidArgumentError):
        check_session_id(text[:position] + "\x00" + text[position:])


# -- seqs (ARG-002) ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 256, 2**63, 2**100])
def test_arg_002_non_negative_ints_are_valid_seqs(value: int) -> None:
    assert check_seq("since_seq", value) == value
    assert check_optional_seq("expected_head", value) == value


@pytest.mark.parametrize(
    ("value", "reason_part"),
    [
        pytest.param(True, "bool", id="true"),
        pytest.param(False, "bool", id="false"),
        pytest.param(-1, "negative", id="minus-one"),
        pytest.param(-(2**70), "negative", id="very-negative"),
        pytest.param(1.0, "float", id="float"),
        pytest.param("1", "str", id="str"),
        pytest.param(None, "NoneType", id="none"),
        pytest.param([1], "list", id="list"),
    ],
)
@pytest.mark.parametrize("name", ["since_seq", "to_seq", "expected_head"])
def test_arg_002_bad_seqs_are_refused_and_named(name: str, value: object, reason_part: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_seq(name, value)
    assert info.value.argument == name
    assert reason_part in info.value.reason


@given(st.integers(max_value=-1))
def test_arg_002_every_negative_int_is_refused(value: int) -> None:
    with pytest.raises(InvalidArgumentError):
        check_seq("to_seq", value)


def test_arg_002_optional_seq_allows_none_and_refuses_the_rest_like_check_seq() -> None:
    assert check_optional_seq("expected_head", None) is None
    for bad in (True, -1, 1.0):
        with pytest.raises(InvalidArgumentError) as info:
            check_optional_seq("expected_generation", bad)
        assert info.value.argument == "expected_generation"


# -- event batches (ARG-003) ---------------------------------------------------------------


def test_every_event_kind_is_accepted_in_a_batch() -> None:
    assert {type(event) for event in ONE_OF_EACH} == set(EVENT_TYPES)
    assert check_events(list(ONE_OF_EACH)) == ONE_OF_EACH


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([], id="empty-list"),
        pytest.param((), id="empty-tuple"),
        pytest.param([UserPrompt("a"), UserPrompt("a")], id="list"),
        pytest.param((UserPrompt("a"), ToolResult("t", "x")), id="tuple"),
        pytest.param(UserList([UserPrompt("a")]), id="other-sequence"),
    ],
)
def test_arg_003_sequences_of_events_are_returned_as_a_tuple(events: Sequence[object]) -> None:
    batch = check_events(events)
    assert isinstance(batch, tuple)
    assert batch == tuple(events)


@pytest.mark.parametrize(
    "events",
    [
        pytest.param("user_prompt", id="str"),
        pytest.param("", id="empty-str"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(bytearray(b"x"), id="bytearray"),
        pytest.param({"type": "user_prompt", "text": "x"}, id="dict"),
        pytest.param({}, id="empty-dict"),
        pytest.param({UserPrompt("a")}, id="set"),
        pytest.param(None, id="none"),
        pytest.param(3, id="int"),
        pytest.param(UserPrompt("a"), id="bare-event"),
    ],
)
def test_arg_003_non_sequences_are_refused(events: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_events(events)
    assert info.value.argument == "events"
    assert type(events).__name__ in info.value.reason


def test_arg_003_generators_are_refused_without_being_consumed() -> None:
    consumed = []

    def produce() -> Iterator[object]:
        consumed.append(True)
        yield UserPrompt("a")

    with pytest.raises(InvalidArgumentError) as info:
        check_events(produce())
    assert info.value.argument == "events"
    assert consumed == []


@pytest.mark.parametrize(
    ("events", "index", "type_name"),
    [
        pytest.param(["x"], 0, "str", id="first"),
        pytest.param([UserPrompt("a"), UserPrompt("b"), 7], 2, "int", id="third"),
        pytest.param([UserPrompt("a"), None], 1, "NoneType", id="none"),
        pytest.param((UserPrompt("a"), ToolCall("t", "n", "{}")), 1, "ToolCall", id="toolcall"),
        pytest.param([{"type": "user_prompt", "text": "x"}], 0, "dict", id="event-shaped-dict"),
    ],
)
def test_arg_003_non_event_items_are_refused_with_their_index(
    events: object, index: int, type_name: str
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_events(events)
    assert info.value.argument == "events"
    assert f"item {index} " in info.value.reason
    assert type_name in info.value.reason
