"""The event model and its canonical wire form (spec/events.py).

EVENT-001: every event kind round-trips exactly through `encode_event` /
`decode_event`. EVENT-002: an event that cannot be stored exactly is refused with
`InvalidArgumentError`. `decode_event` refuses bytes that are not an event.
"""

from __future__ import annotations

import json
import typing

import msgspec
import pytest
from checkpointspec.spec import (
    EVENT_TYPES,
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    InvalidArgumentError,
    ReasonCode,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    decode_event,
    encode_event,
)
from hypothesis import example, given
from hypothesis import strategies as st

# Any code point but lone surrogates (the default alphabet of st.text), so NUL,
# control characters, astral characters and combining marks are all in play.
text = st.text(max_size=12)
optional_text = st.none() | text
integers = st.integers()  # unbounded: msgspec writes arbitrarily large ints exactly
tool_calls = st.builds(ToolCall, id=text, name=text, arguments=text)

EVENT_STRATEGIES: dict[type[SessionEvent], st.SearchStrategy[SessionEvent]] = {
    UserPrompt: st.builds(UserPrompt, text=text, blocks=st.tuples() | st.lists(text).map(tuple)),
    AssistantMessage: st.builds(
        AssistantMessage, text=text, tool_calls=st.lists(tool_calls, max_size=3).map(tuple)
    ),
    ToolStarted: st.builds(ToolStarted, tool_call_id=text, name=text),
    ToolResult: st.builds(ToolResult, tool_call_id=text, content=text, is_error=st.booleans()),
    FileSnapshot: st.builds(
        FileSnapshot,
        path=text,
        content_before=optional_text,
        truncated=st.booleans(),
        encoding=st.sampled_from(["utf-8", "base64"]),
        hash_after=st.none() | st.text("0123456789abcdef", min_size=64, max_size=64),
        tool_call_id=optional_text,
    ),
    Summary: st.builds(
        Summary, text=text, through_seq=integers, tokens_before=integers, tokens_after=integers
    ),
    BackgroundCompletion: st.builds(BackgroundCompletion, task_id=text, content=text),
    RuntimeReminder: st.builds(RuntimeReminder, text=text),
    RepairMessage: st.builds(RepairMessage, text=text, tool_call_id=optional_text),
}
events = st.one_of(*EVENT_STRATEGIES.values())

# The wire tags are part of the stored format: renaming one makes every existing
# store unreadable, so they are spelled out here rather than read from the classes.
WIRE_TAGS = {
    UserPrompt: "user_prompt",
    AssistantMessage: "assistant_message",
    ToolStarted: "tool_started",
    ToolResult: "tool_result",
    FileSnapshot: "file_snapshot",
    Summary: "summary",
    BackgroundCompletion: "background_completion",
    RuntimeReminder: "runtime_reminder",
    RepairMessage: "repair_message",
}

ONE_OF_EACH: dict[type[SessionEvent], SessionEvent] = {
    UserPrompt: UserPrompt("p"),
    AssistantMessage: AssistantMessage("a", (ToolCall("t1", "ls", "{}"),)),
    ToolStarted: ToolStarted("t1", "ls"),
    ToolResult: ToolResult("t1", "out", is_error=True),
    FileSnapshot: FileSnapshot("f.txt", None),
    Summary: Summary("s", 1, 10, 2),
    BackgroundCompletion: BackgroundCompletion("task", "done"),
    RuntimeReminder: RuntimeReminder("r"),
    RepairMessage: RepairMessage("fix", "t1"),
}


def test_event_types_are_exactly_the_members_of_the_union() -> None:
    assert set(EVENT_TYPES) == set(typing.get_args(SessionEvent))
    assert len(EVENT_TYPES) == len(set(EVENT_TYPES))


def test_every_event_kind_has_a_strategy_a_tag_and_an_example() -> None:
    assert set(EVENT_STRATEGIES) == set(WIRE_TAGS) == set(ONE_OF_EACH) == set(EVENT_TYPES)


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.__name__)
def test_encoded_events_carry_their_wire_tag(kind: type[SessionEvent]) -> None:
    assert json.loads(encode_event(ONE_OF_EACH[kind]))["type"] == WIRE_TAGS[kind]


# -- EVENT-001: exact round trip --------------------------------------------------------


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.__name__)
@given(data=st.data())
def test_event_001_every_kind_round_trips_exactly(
    kind: type[SessionEvent], data: st.DataObject
) -> None:
    event = data.draw(EVENT_STRATEGIES[kind], label="event")
    encoded = encode_event(event)
    decoded = decode_event(encoded)
    assert type(decoded) is kind
    assert decoded == event
    assert decode_event(memoryview(encoded)) == event
    assert encode_event(decoded) == encoded  # the canonical form is stable


@given(events)
@example(UserPrompt(""))
@example(UserPrompt("\x00\x01\x7f\u2028\u2029"))
@example(UserPrompt("naïve — 日本語 \U0001f600 e\u0301 \u202eRTL", blocks=("", "\U0010ffff")))
@example(AssistantMessage('"quotes" \\ and </script>', (ToolCall("", "", ""),)))
@example(FileSnapshot("", None, hash_after=None, tool_call_id=None))
@example(FileSnapshot("p", "", truncated=True, encoding="base64", hash_after="0" * 64))
@example(Summary("", -(2**100), 2**64, 0))
@example(RepairMessage("", None))
def test_event_001_text_none_and_empty_values_survive(event: SessionEvent) -> None:
    assert decode_event(encode_event(event)) == event


@given(events)
def test_encoding_is_compact_utf8_json(event: SessionEvent) -> None:
    encoded = encode_event(event)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded.decode("utf-8"))["type"] == WIRE_TAGS[type(event)]


# -- EVENT-002: unstorable events ---------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(UserPrompt("\ud800"), id="user-prompt-text"),
        pytest.param(UserPrompt("ok", blocks=("fine", "x\udfff")), id="user-prompt-block"),
        pytest.param(
            AssistantMessage("ok", (ToolCall("t1", "ls", "\udc80"),)), id="tool-call-arguments"
        ),
        pytest.param(ToolStarted("\ud83d", "ls"), id="tool-started-id"),
        pytest.param(ToolResult("t1", "half an emoji \ud83d"), id="tool-result-content"),
        pytest.param(FileSnapshot("\udcff.txt", None), id="file-snapshot-path"),
        pytest.param(FileSnapshot("f", "\ud800"), id="file-snapshot-content"),
        pytest.param(Summary("\ud800", 1, 2, 3), id="summary-text"),
        pytest.param(BackgroundCompletion("t", "\udbff"), id="background-content"),
        pytest.param(RuntimeReminder("\ud800"), id="reminder-text"),
        pytest.param(RepairMessage("ok", "\ud800"), id="repair-tool-call-id"),
    ],
)
def test_event_002_lone_surrogates_are_refused(event: SessionEvent) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        encode_event(event)
    assert info.value.argument == "events"
    assert (info.value.reason_code, info.value.rule_id) == (ReasonCode.UNSTORABLE, "EVENT-002")
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


@given(
    prefix=text,
    surrogate=st.characters(categories=["Cs"]),
    suffix=text,
)
def test_event_002_a_surrogate_anywhere_in_text_is_refused(
    prefix: str, surrogate: str, suffix: str
) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_event(UserPrompt(prefix + surrogate + suffix))


def test_event_002_values_msgspec_cannot_encode_are_refused() -> None:
    unencodable = UserPrompt(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError) as info:
        encode_event(unencodable)
    assert info.value.argument == "events"
    assert (info.value.reason_code, info.value.rule_id) == (ReasonCode.UNSTORABLE, "EVENT-002")
    assert isinstance(info.value.__cause__, TypeError)


# -- decode_event refuses what is not an event ---------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"type":"user_promt","text":"x"}', id="misspelt-tag"),
        pytest.param(b'{"type":"UserPrompt","text":"x"}', id="class-name-as-tag"),
        pytest.param(b'{"type":"","text":"x"}', id="empty-tag"),
        pytest.param(b'{"type":1,"text":"x"}', id="non-str-tag"),
        pytest.param(b'{"text":"x"}', id="missing-tag"),
        pytest.param(b'{"type":"user_prompt","text":"x","mood":"happy"}', id="unknown-field"),
        pytest.param(
            b'{"type":"assistant_message","text":"x","tool_calls":'
            b'[{"id":"1","name":"n","arguments":"{}","extra":0}]}',
            id="unknown-tool-call-field",
        ),
        pytest.param(b'{"type":"user_prompt"}', id="missing-field"),
        pytest.param(b'{"type":"user_prompt","text":1}', id="wrong-field-type"),
        pytest.param(
            b'{"type":"tool_result","tool_call_id":"t","content":"c","is_error":1}',
            id="int-for-bool",
        ),
        pytest.param(
            b'{"type":"file_snapshot","path":"p","content_before":null,"encoding":"latin-1"}',
            id="unknown-encoding",
        ),
        pytest.param(
            b'{"type":"summary","text":"s","through_seq":1.5,"tokens_before":0,"tokens_after":0}',
            id="float-for-int",
        ),
        pytest.param(b'["user_prompt","x"]', id="array"),
        pytest.param(b'"user_prompt"', id="string"),
    ],
)
def test_decode_refuses_values_that_are_not_events(data: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_event(data)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"{", id="truncated"),
        pytest.param(b"not json", id="not-json"),
        pytest.param(b'{"type":"user_prompt","text":"x"} trailing', id="trailing-bytes"),
        pytest.param(b'{"type":"user_prompt","text":"\xff"}', id="invalid-utf8"),
    ],
)
def test_decode_refuses_malformed_bytes(data: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_event(data)


@given(events, st.text(min_size=1, max_size=8))
def test_decode_refuses_any_unknown_field(event: SessionEvent, name: str) -> None:
    document = json.loads(encode_event(event))
    if name in document:
        name = "_" + name + "_"  # never a field name: they are all identifiers
    document[name] = None
    with pytest.raises(msgspec.ValidationError):
        decode_event(json.dumps(document).encode())


@given(events, st.text(max_size=20))
def test_decode_refuses_any_unknown_tag(event: SessionEvent, tag: str) -> None:
    document = json.loads(encode_event(event))
    if tag in WIRE_TAGS.values():
        tag += "?"
    document["type"] = tag
    with pytest.raises(msgspec.ValidationError):
        decode_event(json.dumps(document).encode())


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.__name__)
def test_events_are_frozen_values(kind: type[SessionEvent]) -> None:
    event = ONE_OF_EACH[kind]
    field = kind.__struct_fields__[0]
    with pytest.raises(AttributeError):
        setattr(event, field, "changed")
    assert hash(event) == hash(decode_event(encode_event(event)))


@pytest.mark.parametrize(
    "event",
    [UserPrompt(text=123), UserPrompt("a", blocks=["b"]), Summary("s", "1", 2, 3)],  # type: ignore[arg-type]
    ids=["int text", "list blocks", "str through_seq"],
)
def test_event_002_wrongly_typed_fields_are_refused(event: object) -> None:
    # msgspec builds Structs without type checks; such an event would not read back equal.
    with pytest.raises(InvalidArgumentError) as info:
        encode_event(event)  # type: ignore[arg-type]
    assert info.value.argument == "events"
    assert (info.value.reason_code, info.value.rule_id) == (ReasonCode.UNSTORABLE, "EVENT-002")
