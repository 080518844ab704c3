"""The JSON values a framework's store is given to keep: Hypothesis strategies.

Items of an OpenAI Agents session and state values of an ADK session service are
JSON, and a store's encoding changes them in the same few ways: text eaten at either
end, an integer made a float, ``-0.0`` made ``0``, a large float rounded. These
strategies draw values that show each.
"""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st

__all__ = ["EDGE_TEXTS", "json_values", "short_texts", "texts"]

EDGE_TEXTS: Final[tuple[str, ...]] = (" ", "\n", "\t", "\r\n", "\u00a0", "\u2028", "\ufeff", "")
"""What a "tidy" store eats at either end of a text (stripping, a line reader)."""

short_texts: Final = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=16)
"""Any short text a JSON string holds (NUL left out: some drivers refuse it, which is
the store's own limit, checked by a scenario where a rule says so)."""

texts: Final = st.one_of(
    short_texts,
    st.builds(
        lambda a, t, b: a + t + b,
        st.sampled_from(EDGE_TEXTS),
        short_texts,
        st.sampled_from(EDGE_TEXTS),
    ),
)
"""Short texts, some with whitespace a tidy store would eat at either end."""


def json_values() -> st.SearchStrategy[object]:
    """Any JSON value a store is given: null, booleans, integers within 2**53, finite
    floats (``-0.0`` and ``1e16`` among them), text, and lists and objects of them."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from((0.5, -0.0, 1e16, 1.0)),
        texts,
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_texts, inner, max_size=3),
        max_leaves=6,
    )
