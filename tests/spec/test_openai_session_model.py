"""The OpenAI Agents session contract's model and judge, without a store."""

from __future__ import annotations

from checkpointspec.spec.openai_session import SessionsState, encoded, judge, step
from checkpointspec.spec.openai_session.model import confusable


def _after(*calls: tuple[str, tuple[object, ...]]) -> SessionsState:
    state = SessionsState()
    for operation, arguments in calls:
        state, _ = step(state, operation, arguments)
    return state


A, B, C = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"x": 1}


def test_the_model_keeps_items_in_order_and_gives_the_latest() -> None:
    state = _after(("add_items", ("s", 0, [A, B])), ("add_items", ("s", 0, [C])))
    assert step(state, "get_items", ("s", 0, None))[1] == [encoded(A), encoded(B), encoded(C)]
    assert step(state, "get_items", ("s", 0, 2))[1] == [encoded(B), encoded(C)]
    after, popped = step(state, "pop_item", ("s", 1))
    assert popped == encoded(C)
    assert after.items("s") == (encoded(A), encoded(B))
    assert step(_after(), "pop_item", ("s", 0))[1] is None


def test_an_item_compares_exactly() -> None:
    assert encoded({"n": 1}) != encoded({"n": 1.0})
    assert encoded({"b": 1, "a": 2}) == encoded({"a": 2, "b": 1})


def test_an_item_of_another_session_is_isolation() -> None:
    state = _after(("add_items", ("other", 0, [A])))
    found = judge(state, "get_items", ("s", 0, None), [], [encoded(A)])
    assert found.rule == "OASISO-001"


def test_a_popped_item_still_there_is_the_pop() -> None:
    state = _after(("add_items", ("s", 0, [A, B])), ("pop_item", ("s", 0)))
    found = judge(state, "get_items", ("s", 0, None), [encoded(A)], [encoded(A), encoded(B)])
    assert found.rule == "OASPOP-001"


def test_an_answer_from_a_stale_copy_is_sharing_and_otherwise_the_store() -> None:
    state = _after(("get_items", ("s", 1, None)), ("add_items", ("s", 0, [A])))
    assert judge(state, "get_items", ("s", 1, None), [encoded(A)], []).rule == "OASSHARE-001"
    plain = judge(state, "get_items", ("s", 1, None), [encoded(A)], [], views=False)
    assert plain.rule == "OASGET-001"


def test_oldest_items_for_a_limit_are_the_limit_rule() -> None:
    state = _after(("add_items", ("s", 0, [A, B, C])))
    found = judge(state, "get_items", ("s", 0, 1), [encoded(C)], [encoded(A)])
    assert (found.rule, found.shape) == ("OASGET-002", "get_items(limit) returned the oldest items")


def test_a_changed_item_is_the_round_trip() -> None:
    state = _after(("add_items", ("s", 0, [{"t": " a "}])))
    found = judge(
        state, "get_items", ("s", 0, None), [encoded({"t": " a "})], [encoded({"t": "a"})]
    )
    assert found.rule == "OASITEM-001"


def test_items_gone_after_another_clear_are_the_clear() -> None:
    state = _after(("add_items", ("s", 0, [A])), ("clear_session", ("t", 0)))
    found = judge(state, "get_items", ("s", 0, None), [encoded(A)], [])
    assert found.rule == "OASCLEAR-001"
    merged = _after(("add_items", ("s", 0, [A])), ("clear_session", ("S", 0)))
    assert judge(merged, "get_items", ("s", 0, None), [encoded(A)], []).rule == "OASISO-001"


def test_confusable_ids() -> None:
    assert confusable("conv-1", "Conv_1")
    assert confusable("caf\u00e9", "cafe\u0301")
    assert confusable("conv-1", "conv-1 ")
    assert not confusable("conv-1", "conv-2")
    assert not confusable("conv-1", "conv-1")
