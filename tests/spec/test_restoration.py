"""The restore oracle: `plan_restore` and `apply_plan` (RESTORE-001..004), case by case."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from checkpointspec.spec import (
    ABSENT_HASH,
    AssistantMessage,
    FileSnapshot,
    RepairMessage,
    RestoreError,
    RestoreReason,
    RuntimeReminder,
    SessionEvent,
    StoredEvent,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    content_hash,
    make_snapshot,
)
from checkpointspec.spec.restoration import FileRestore, RestorePlan, apply_plan, plan_restore

SID = "s"


def log(*events: SessionEvent) -> list[StoredEvent]:
    return [
        StoredEvent(n, SID, n - 1 if n > 1 else None, f"t{n}", e)
        for n, e in enumerate(events, start=1)
    ]


def refused(
    events: Sequence[StoredEvent],
    seq: int,
    current: dict[str, bytes] | None,
    **kw: bool,
) -> tuple[RestoreReason, str | None]:
    with pytest.raises(RestoreError) as error:
        plan_restore(SID, events, seq, current, **kw)
    assert (error.value.session_id, error.value.seq) == (SID, seq)
    return error.value.reason_code, error.value.path


P = UserPrompt


def test_the_plan_restores_each_path_from_its_earliest_snapshot_after_the_prompt() -> None:
    events = log(
        P("p1"),
        make_snapshot("a", None, b"a0"),
        P("p2"),
        make_snapshot("a", b"a0", b"a1"),
        make_snapshot("a", b"a1", b"a2"),
        make_snapshot("new", None, b"n"),
        make_snapshot("gone", b"g", None),
    )
    current = {"a": b"a2", "new": b"n"}
    plan = plan_restore(SID, events, 3, current)
    assert plan == RestorePlan(
        SID,
        3,
        7,
        2,
        (FileRestore("a", b"a0"), FileRestore("gone", b"g"), FileRestore("new", None)),
        (),
    )
    assert apply_plan(current, plan) == {"a": b"a0", "gone": b"g"}


def test_flags_leave_out_the_log_or_the_files() -> None:
    events = log(P("p1"), P("p2"), make_snapshot("a", b"x", b"y"))
    only_files = plan_restore(SID, events, 2, {"a": b"y"}, conversation=False)
    assert only_files.keep_through is None
    assert only_files.files == (FileRestore("a", b"x"),)
    only_log = plan_restore(SID, events, 2, None, files=False)
    assert (only_log.keep_through, only_log.files) == (1, ())
    neither = plan_restore(SID, events, 2, None, files=False, conversation=False)
    assert (neither.keep_through, neither.files) == (None, ())


def test_no_workspace_is_needed_when_no_file_was_touched() -> None:
    plan = plan_restore(SID, log(P("p1"), P("p2")), 2, None)
    assert plan.files == ()


def test_unknown_session_and_bad_seqs() -> None:
    assert refused([], 1, {}) == (RestoreReason.UNKNOWN_SESSION, None)
    events = log(P("p"), RuntimeReminder("r"), AssistantMessage("a"))
    for seq in (0, 2, 3, 4, -1):
        assert refused(events, seq, {}) == (RestoreReason.NOT_A_CHECKPOINT, None)


@pytest.mark.parametrize(
    "opener",
    [AssistantMessage("", (ToolCall("c", "t", "{}"),)), ToolStarted("c", "t")],
)
def test_an_open_tool_call_before_the_prompt_is_refused_with_the_conversation(
    opener: SessionEvent,
) -> None:
    events = log(P("p1"), opener, P("p2"))
    assert refused(events, 3, {}) == (RestoreReason.UNFINISHED_TOOL_CALL, None)
    assert plan_restore(SID, events, 3, {}, conversation=False).keep_through is None


@pytest.mark.parametrize("closer", [ToolResult("c", "ok"), RepairMessage("r", "c")])
def test_a_closed_tool_call_is_a_clean_boundary(closer: SessionEvent) -> None:
    events = log(P("p1"), AssistantMessage("", (ToolCall("c", "t", "{}"),)), closer, P("p2"))
    assert plan_restore(SID, events, 4, {}).keep_through == 3


def test_a_tool_call_open_after_the_prompt_does_not_matter() -> None:
    events = log(P("p1"), AssistantMessage("", (ToolCall("c", "t", "{}"),)))
    assert plan_restore(SID, events, 1, {}).keep_through == 0


def test_files_without_a_workspace_are_refused_naming_the_first_path() -> None:
    events = log(P("p"), make_snapshot("z", None, b"1"), make_snapshot("b", None, b"1"))
    assert refused(events, 1, None) == (RestoreReason.WORKSPACE_REQUIRED, "b")


@pytest.mark.parametrize(
    ("snapshot", "reason"),
    [
        (FileSnapshot("../x", "x"), RestoreReason.UNSAFE_PATH),
        (FileSnapshot("/abs", "x"), RestoreReason.UNSAFE_PATH),
        (FileSnapshot("big", "", truncated=True), RestoreReason.SNAPSHOT_TRUNCATED),
        (FileSnapshot("b64", "!!", encoding="base64"), RestoreReason.SNAPSHOT_UNDECODABLE),
        (FileSnapshot("sur", "\ud800"), RestoreReason.SNAPSHOT_UNDECODABLE),
    ],
)
def test_snapshots_that_cannot_put_their_file_back_are_refused(
    snapshot: FileSnapshot, reason: RestoreReason
) -> None:
    events = log(P("p"), snapshot)
    assert refused(events, 1, {}) == (reason, snapshot.path)


def test_only_the_earliest_snapshot_after_the_prompt_must_be_whole() -> None:
    events = log(
        P("p1"),
        FileSnapshot("f", "", truncated=True, hash_after=content_hash(b"1")),
        P("p2"),
        make_snapshot("f", b"1", b"2"),
    )
    assert refused(events, 1, {"f": b"2"}) == (RestoreReason.SNAPSHOT_TRUNCATED, "f")
    assert plan_restore(SID, events, 3, {"f": b"2"}).files == (FileRestore("f", b"1"),)


def test_path_problems_come_before_out_of_band_changes_and_in_path_order() -> None:
    events = log(
        P("p"),
        make_snapshot("a", b"0", b"1"),
        FileSnapshot("z", "", truncated=True),
        FileSnapshot("m", "!", encoding="base64"),
    )
    assert refused(events, 1, {"a": b"changed"}) == (RestoreReason.SNAPSHOT_UNDECODABLE, "m")


def test_paths_are_keyed_canonically() -> None:
    events = log(P("p"), make_snapshot("d/f", b"0", b"1"), make_snapshot("d//./f", b"1", b"2"))
    plan = plan_restore(SID, events, 1, {"d/f": b"2"})
    assert plan.files == (FileRestore("d/f", b"0"),)


@pytest.mark.parametrize(
    ("now", "ok"),
    [
        (b"2", True),  # what the session left
        (b"1", True),  # the last tool recorded its snapshot and died before writing
        (b"other", False),
        (None, False),
    ],
)
def test_the_latest_snapshot_tells_whether_the_file_changed_out_of_band(
    now: bytes | None, ok: bool
) -> None:
    events = log(P("p"), make_snapshot("f", b"0", b"1"), make_snapshot("f", b"1", b"2"))
    current = {} if now is None else {"f": now}
    if ok:
        assert plan_restore(SID, events, 1, current).files == (FileRestore("f", b"0"),)
    else:
        assert refused(events, 1, current) == (RestoreReason.OUT_OF_BAND_CHANGE, "f")


def test_a_deleted_file_must_still_be_absent() -> None:
    events = log(P("p"), make_snapshot("f", b"0", None))
    assert events[-1].event.hash_after == ABSENT_HASH  # type: ignore[union-attr]
    assert plan_restore(SID, events, 1, {}).files == (FileRestore("f", b"0"),)
    assert refused(events, 1, {"f": b"back"}) == (RestoreReason.OUT_OF_BAND_CHANGE, "f")


def test_snapshots_without_hash_are_unchecked() -> None:
    events = log(P("p"), FileSnapshot("old", "0"), make_snapshot("new", None, b"n"))
    plan = plan_restore(SID, events, 1, {"old": b"anything", "new": b"n"})
    assert plan.unchecked == ("old",)
    assert [f.path for f in plan.files] == ["new", "old"]


def test_files_are_not_checked_when_not_restored() -> None:
    events = log(P("p"), FileSnapshot("../x", "", truncated=True))
    assert plan_restore(SID, events, 1, None, files=False).keep_through == 0


def test_apply_plan_leaves_other_files_alone() -> None:
    plan = RestorePlan(SID, 1, 1, 0, (FileRestore("a", None), FileRestore("b", b"B")), ())
    assert apply_plan({"a": b"1", "c": b"3"}, plan) == {"b": b"B", "c": b"3"}
    assert apply_plan({}, plan) == {"b": b"B"}
