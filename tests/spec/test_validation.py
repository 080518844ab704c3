"""Argument validation (spec/validation.py): what is inside the contract and what is not.

Each refusal is an `InvalidArgumentError` whose ``argument`` names the parameter,
whose ``reason_code`` says why and whose ``rule_id`` names the rule (ARG-001..ARG-003,
TRUNC-002); each acceptance returns the value unchanged. The prologues check the
arguments in the contract's order, and the expectation checks compare the
generation before the head, as the model does.
"""

from __future__ import annotations

import unicodedata
from collections import UserList
from collections.abc import Callable, Iterator, Sequence

import pytest
from checkpointspec.spec import (
    EVENT_TYPES,
    MAX_SESSION_ID_LENGTH,
    AppendArguments,
    AssistantMessage,
    BackgroundCompletion,
    CheckpointConflictError,
    FileSnapshot,
    InvalidArgumentError,
    ReasonCode,
    RepairMessage,
    RuntimeReminder,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    TruncateArguments,
    UserPrompt,
    check_append_arguments,
    check_events,
    check_expectations,
    check_optional_seq,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
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


_R = ReasonCode


@pytest.mark.parametrize(
    ("session_id", "reason_part", "code"),
    [
        pytest.param("", "empty", _R.EMPTY, id="empty"),
        pytest.param("x" * 257, "257", _R.TOO_LONG, id="257-chars"),
        pytest.param("\U0001f600" * 257, "257", _R.TOO_LONG, id="257-astral-code-points"),
        pytest.param("\x00", "NUL", _R.CONTAINS_NUL, id="nul-only"),
        pytest.param("a\x00b", "NUL", _R.CONTAINS_NUL, id="inner-nul"),
        pytest.param("a\ud800", "UTF-8", _R.NOT_UTF8, id="lone-high-surrogate"),
        pytest.param("\udfff", "UTF-8", _R.NOT_UTF8, id="lone-low-surrogate"),
        pytest.param(b"abc", "bytes", _R.WRONG_TYPE, id="bytes"),
        pytest.param(None, "NoneType", _R.WRONG_TYPE, id="none"),
        pytest.param(1, "int", _R.WRONG_TYPE, id="int"),
        pytest.param(["a"], "list", _R.WRONG_TYPE, id="list"),
    ],
)
def test_arg_001_bad_session_ids_are_refused(
    session_id: object, reason_part: str, code: ReasonCode
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_session_id(session_id)
    assert info.value.argument == "session_id"
    assert reason_part in info.value.reason
    assert (info.value.reason_code, info.value.rule_id) == (code, "ARG-001")


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
    ("value", "reason_part", "code"),
    [
        pytest.param(True, "bool", _R.WRONG_TYPE, id="true"),
        pytest.param(False, "bool", _R.WRONG_TYPE, id="false"),
        pytest.param(-1, "negative", _R.NEGATIVE, id="minus-one"),
        pytest.param(-(2**70), "negative", _R.NEGATIVE, id="very-negative"),
        pytest.param(1.0, "float", _R.WRONG_TYPE, id="float"),
        pytest.param("1", "str", _R.WRONG_TYPE, id="str"),
        pytest.param(None, "NoneType", _R.WRONG_TYPE, id="none"),
        pytest.param([1], "list", _R.WRONG_TYPE, id="list"),
    ],
)
@pytest.mark.parametrize("name", ["since_seq", "to_seq", "expected_head"])
def test_arg_002_bad_seqs_are_refused_and_named(
    name: str, value: object, reason_part: str, code: ReasonCode
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_seq(name, value)
    assert info.value.argument == name
    assert reason_part in info.value.reason
    assert (info.value.reason_code, info.value.rule_id) == (code, "ARG-002")


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
    assert (info.value.reason_code, info.value.rule_id) == (_R.NOT_A_SEQUENCE, "ARG-003")


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
    assert (info.value.reason_code, info.value.rule_id) == (_R.NOT_AN_EVENT, "ARG-003")


# -- the prologues: every argument, in the contract's order --------------------------------


def test_append_arguments_are_returned_validated() -> None:
    events = [UserPrompt("a")]
    assert check_append_arguments("s", events, 3, None) == AppendArguments(
        "s", (UserPrompt("a"),), 3, None
    )


def test_truncate_arguments_are_returned_validated() -> None:
    assert check_truncate_arguments("s", 2, None, 0) == TruncateArguments("s", 2, None, 0)


_APPEND, _TRUNCATE = check_append_arguments, check_truncate_arguments


# Several bad arguments at once: the first in the contract's order is the one refused.
@pytest.mark.parametrize(
    ("prologue", "arguments", "argument", "code", "rule_id"),
    [
        pytest.param(_APPEND, ("", "x", -1, -1), "session_id", _R.EMPTY, "ARG-001", id="a-id"),
        pytest.param(
            _APPEND, ("s", "x", -1, -1), "events", _R.NOT_A_SEQUENCE, "ARG-003", id="a-ev"
        ),
        pytest.param(
            _APPEND, ("s", [1], -1, -1), "events", _R.NOT_AN_EVENT, "ARG-003", id="a-item"
        ),
        pytest.param(
            _APPEND, ("s", [], -1, True), "expected_head", _R.NEGATIVE, "ARG-002", id="a-head"
        ),
        pytest.param(
            _APPEND, ("s", [], 0, True), "expected_generation", _R.WRONG_TYPE, "ARG-002", id="a-gen"
        ),
        pytest.param(
            _TRUNCATE, (None, -1, -1, -1), "session_id", _R.WRONG_TYPE, "ARG-001", id="t-id"
        ),
        pytest.param(_TRUNCATE, ("s", -1, -1, -1), "to_seq", _R.NEGATIVE, "ARG-002", id="t-to-seq"),
        pytest.param(
            _TRUNCATE, ("s", 0, 1.5, -1), "expected_head", _R.WRONG_TYPE, "ARG-002", id="t-head"
        ),
        pytest.param(
            _TRUNCATE, ("s", 0, None, -1), "expected_generation", _R.NEGATIVE, "ARG-002", id="t-gen"
        ),
    ],
)
def test_prologue_arguments_are_checked_in_the_contracts_order(
    prologue: Callable[[object, object, object, object], object],
    arguments: tuple[object, object, object, object],
    argument: str,
    code: ReasonCode,
    rule_id: str,
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        prologue(*arguments)
    got = info.value
    assert (got.argument, got.reason_code, got.rule_id) == (argument, code, rule_id)


# -- expectations and the truncate bound (APPEND-002, TRUNC-003, GEN-002, TRUNC-002) ---------


@pytest.mark.parametrize(
    ("expected_head", "expected_generation"),
    [(None, None), (4, None), (None, 2), (4, 2)],
)
def test_matching_or_absent_expectations_pass(
    expected_head: int | None, expected_generation: int | None
) -> None:
    check_expectations("s", 4, 2, expected_head, expected_generation)


def test_a_stale_head_is_a_head_conflict_with_the_facts() -> None:
    with pytest.raises(CheckpointConflictError) as info:
        check_expectations("s", 4, 2, 3, None)
    got = info.value
    assert (got.session_id, got.expected, got.actual, got.kind) == ("s", 3, 4, "head")


def test_the_generation_is_compared_before_the_head() -> None:
    with pytest.raises(CheckpointConflictError) as info:
        check_expectations("s", 4, 2, 3, 1)
    got = info.value
    assert (got.session_id, got.expected, got.actual, got.kind) == ("s", 1, 2, "generation")


@pytest.mark.parametrize(("to_seq", "head"), [(0, 0), (3, 5), (5, 5)])
def test_trunc_002_to_seq_up_to_the_head_is_within_bounds(to_seq: int, head: int) -> None:
    check_truncate_bound("s", to_seq, head)


@pytest.mark.parametrize(("to_seq", "head"), [(1, 0), (6, 5)])
def test_trunc_002_to_seq_beyond_the_head_is_refused_with_its_code(to_seq: int, head: int) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_truncate_bound("s", to_seq, head)
    assert info.value.argument == "to_seq"
    assert (info.value.reason_code, info.value.rule_id) == (_R.BEYOND_HEAD, "TRUNC-002")
