"""EVENT-001's property draws texts ending in whitespace a store may strip, on any seed."""

from __future__ import annotations

from checkpointspec.conformance.engines.machines.strategies import EDGE_AFFIXES, edge_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _texts(event: object) -> list[str]:
    fields = getattr(type(event), "__struct_fields__", ())
    return [v for v in (getattr(event, f) for f in fields) if isinstance(v, str)]


def test_edge_events_often_end_a_text_in_whitespace() -> None:
    ends: list[bool] = []

    @settings(
        max_examples=200,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(edge_events(), min_size=1, max_size=4))
    def draw(batch: list[object]) -> None:
        texts = [t for e in batch for t in _texts(e)]
        ends.append(any(t != t.rstrip() for t in texts))

    draw()
    assert sum(ends) >= len(ends) // 4, f"{sum(ends)} of {len(ends)} batches"


def test_every_affix_is_whitespace_a_strip_or_a_normaliser_may_eat() -> None:
    assert "" in EDGE_AFFIXES
    assert all(a == "" or not a.strip() or a in ("\ufeff", "\u200b") for a in EDGE_AFFIXES)
