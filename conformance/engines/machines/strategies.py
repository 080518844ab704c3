"""Hypothesis strategies for the contract's values, valid and invalid.

Small alphabets and short lists on purpose: failures shrink to events and ids a
person can read. The session-id pool mixes ids that naive storage schemes
confuse ("a/b" and "a_b", case, dots, NFC/NFD), so every stateful run also
exercises ID-002.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ....spec import (
    MAX_SESSION_ID_LENGTH,
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
)

__all__ = [
    "CONFUSABLE_IDS",
    "EDGE_AFFIXES",
    "edge_events",
    "event_batches",
    "events",
    "invalid_events_arguments",
    "invalid_seqs",
    "invalid_session_ids",
    "session_ids",
    "small_events",
]

CONFUSABLE_IDS: tuple[str, ...] = (
    "s1",
    "a/b",
    "a_b",
    "A",
    "a",
    "..",
    "../x",
    "x",
    "x ",
    "\u00e9",  # é, NFC
    "e\u0301",  # é, NFD
    "CON",
    "a%2Fb",
)

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
EDGE_AFFIXES: tuple[str, ...] = (
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\u00a0",
    "\u2028",
    "\ufeff",
    "\u200b",
)
"""What a store's "tidy" text handling eats: whitespace a strip, a line reader or a
normaliser removes or rewrites at either end of a text (EVENT-001). Arbitrary text
rarely ends in them, so on some seeds a property would never try one."""
_edge_text = st.builds(
    lambda before, text, after: before + text + after,
    st.sampled_from(EDGE_AFFIXES),
    _text,
    st.sampled_from(EDGE_AFFIXES),
)
_small_text = st.text(alphabet='ab \u00e9\n"\\{}', max_size=6)
_ints = st.integers(min_value=0, max_value=2**53)

_tool_calls = st.builds(ToolCall, id=_small_text, name=_small_text, arguments=_text)


def events(text: st.SearchStrategy[str] = _text) -> st.SearchStrategy[SessionEvent]:
    """Any event kind with arbitrary (valid) field values."""
    return st.one_of(
        st.builds(UserPrompt, text=text, blocks=st.lists(text, max_size=2).map(tuple)),
        st.builds(
            AssistantMessage, text=text, tool_calls=st.lists(_tool_calls, max_size=2).map(tuple)
        ),
        st.builds(ToolStarted, tool_call_id=text, name=text),
        st.builds(ToolResult, tool_call_id=text, content=text, is_error=st.booleans()),
        st.builds(
            FileSnapshot,
            path=text,
            content_before=st.none() | text,
            truncated=st.booleans(),
            encoding=st.sampled_from(["utf-8", "base64"]),
            hash_after=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
            tool_call_id=st.none() | text,
        ),
        st.builds(Summary, text=text, through_seq=_ints, tokens_before=_ints, tokens_after=_ints),
        st.builds(BackgroundCompletion, task_id=text, content=text),
        st.builds(RuntimeReminder, text=text),
        st.builds(RepairMessage, text=text, tool_call_id=st.none() | text),
    )


def edge_events() -> st.SearchStrategy[SessionEvent]:
    """Any event kind whose texts are arbitrary or begin or end in whitespace a store
    may strip or rewrite (`EDGE_AFFIXES`): half of them are edge texts."""
    return events(st.one_of(_text, _edge_text))


def small_events() -> st.SearchStrategy[SessionEvent]:
    """Events with tiny texts: what the stateful machines append."""
    return events(_small_text)


def event_batches(max_size: int = 3) -> st.SearchStrategy[list[SessionEvent]]:
    """Batches for append, empty batches included."""
    return st.lists(small_events(), max_size=max_size)


def session_ids() -> st.SearchStrategy[str]:
    """Valid session ids: the confusable pool, plus arbitrary valid ones."""
    arbitrary = st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
        min_size=1,
        max_size=MAX_SESSION_ID_LENGTH,
    )
    return st.sampled_from(CONFUSABLE_IDS) | arbitrary


def invalid_session_ids() -> st.SearchStrategy[object]:
    """Values every operation must refuse as a session id (ARG-001)."""
    return st.one_of(
        st.just(""),
        st.text(min_size=0, max_size=5).map(lambda s: s + "\x00"),
        st.text(
            alphabet="x", min_size=MAX_SESSION_ID_LENGTH + 1, max_size=MAX_SESSION_ID_LENGTH + 40
        ),
        st.just("bad\ud800id"),
        st.none(),
        st.integers(),
        st.binary(min_size=1, max_size=4),
        st.just(["a"]),
    )


def invalid_seqs() -> st.SearchStrategy[object]:
    """Values every seq argument must refuse (ARG-002)."""
    return st.one_of(
        st.integers(max_value=-1),
        st.booleans(),
        st.floats(allow_nan=False, min_value=0, max_value=10),
        st.text(alphabet="0123456789", min_size=1, max_size=2),
    )


def invalid_events_arguments() -> st.SearchStrategy[object]:
    """Values ``append`` must refuse as its events argument (ARG-003)."""
    return st.one_of(
        st.just("not a batch"),
        st.just(b"bytes"),
        st.just({"type": "user_prompt", "text": "dict"}),
        st.none(),
        st.lists(
            st.sampled_from([None, "text", {"type": "user_prompt", "text": "x"}, 3]),
            min_size=1,
            max_size=2,
        ),
        st.tuples(st.just(UserPrompt("ok")), st.just(object())),
    )
