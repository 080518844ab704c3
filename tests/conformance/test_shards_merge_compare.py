"""Shards of a run, merged back (``--shard``, ``checkpointspec merge``), two runs compared
(``checkpointspec compare``), and the progress lines a CI log gets."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.conformance.running.compare import compare_reports
from checkpointspec.conformance.running.merge import MergeError, load_report, merge_reports
from checkpointspec.conformance.running.plan import (
    RunSettingError,
    parse_shard,
    plan_run,
    selected_checks,
    shard_of,
)
from checkpointspec.conformance.running.registry import SUITES
from checkpointspec.conformance.running.report import RuleResult

# A few quick checks of the memory backend (not the model-based one): enough rules for
# shards to differ.
ONLY = ("SEQ-002", "SEQ-003", "APPEND-00", "LIST-00")


def _run(tmp_path: Path, name: str, *extra: str, backend: str = "memory") -> Path:
    report = tmp_path / f"{name}.json"
    argv = ["run", backend, "--profile", "quick", "--seed", "3", "-q", "--report", str(report)]
    for prefix in ONLY:
        argv += ["--only", prefix]
    status = main([*argv, *extra])
    assert status in (0, 1)
    return report


def test_shards_hold_each_check_once_and_the_same_on_every_call() -> None:
    checks = list(SUITES["storage"])
    shards = [shard_of(checks, k, 4) for k in range(1, 5)]
    assert sorted(c.name for s in shards for c in s) == sorted(c.name for c in checks)
    assert shards == [shard_of(checks, k, 4) for k in range(1, 5)]


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused_naming_the_form(text: str) -> None:
    with pytest.raises(RunSettingError, match="K/N"):
        parse_shard(text)


def test_a_shard_with_no_check_is_a_usage_error() -> None:
    with pytest.raises(RunSettingError, match="holds no check"):
        plan_run("memory", only=["SEQ-001::seqs_are"], shard=(2, 2))


def test_merged_shards_give_the_report_of_the_whole_run(tmp_path: Path) -> None:
    whole = load_report(_run(tmp_path, "whole"))
    parts = [load_report(_run(tmp_path, f"s{k}", "--shard", f"{k}/3")) for k in (1, 2, 3)]
    assert all(p.shard == f"{k}/3" for k, p in zip((1, 2, 3), parts, strict=True))
    assert all(len(p.checks) < len(whole.checks) for p in parts)
    merged = merge_reports(parts)
    assert [c.name for c in merged.checks] == [c.name for c in whole.checks]
    assert [(r.id, r.status, r.reason) for r in merged.rules] == [
        (r.id, r.status, r.reason) for r in whole.rules
    ]
    assert merged.levels == whole.levels
    assert merged.exit_status == whole.exit_status
    assert merged.shard is None


def test_the_merge_command_writes_the_merged_outputs(tmp_path: Path) -> None:
    parts = [str(_run(tmp_path, f"s{k}", "--shard", f"{k}/2")) for k in (1, 2)]
    out, summary = tmp_path / "merged.json", tmp_path / "merged.md"
    assert main(["merge", *parts, "--report", str(out), "--summary", str(summary)]) == 0
    assert json.loads(out.read_bytes())["shard"] is None
    assert "PASS" in summary.read_text()


def test_reports_of_different_runs_or_one_shard_twice_are_not_merged(tmp_path: Path) -> None:
    one = load_report(_run(tmp_path, "s1", "--shard", "1/2"))
    with pytest.raises(MergeError, match="more than one report"):
        merge_reports([one, one])
    other_seed = msgspec.structs.replace(one, seed=4)
    with pytest.raises(MergeError, match="seed is 3 in one and 4 in another"):
        merge_reports([one, other_seed])


def test_a_report_of_another_schema_version_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _run(tmp_path, "whole")
    data = json.loads(path.read_bytes())
    data["schema_version"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(MergeError, match="schema version 7; this kit reads 9"):
        load_report(path)


def test_compare_names_a_newly_failing_rule_and_exits_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _run(tmp_path, "old")
    new = load_report(old)
    broken = tuple(
        msgspec.structs.replace(r, status="failed", reason="APPEND-002::x")
        if r.id == "APPEND-002"
        else r
        for r in new.rules
    )
    newer = tmp_path / "new.json"
    newer.write_bytes(msgspec.json.encode(msgspec.structs.replace(new, rules=broken)))
    capsys.readouterr()
    assert main(["compare", str(old), str(newer)]) == 1
    out = capsys.readouterr().out
    assert "newly failing: APPEND-002 passed -> failed" in out
    assert main(["compare", str(newer), str(old)]) == 0
    assert "fixed: APPEND-002 failed -> passed" in capsys.readouterr().out


def test_compare_names_rules_no_longer_checked_and_coverage_that_fell(tmp_path: Path) -> None:
    old = load_report(_run(tmp_path, "old"))

    def skipped(rule: RuleResult) -> RuleResult:
        return msgspec.structs.replace(rule, status="skipped") if rule.id == "LIST-001" else rule

    fewer = tuple(
        msgspec.structs.replace(c, status="passed", detail="checked 10 crash states")
        for c in old.checks[:1]
    )
    more = tuple(
        msgspec.structs.replace(c, status="passed", detail="checked 200 crash states")
        for c in old.checks[:1]
    )
    before = msgspec.structs.replace(old, checks=more + old.checks[1:])
    after = msgspec.structs.replace(
        old, checks=fewer + old.checks[1:], rules=tuple(skipped(r) for r in old.rules)
    )
    comparison = compare_reports(before, after)
    assert [c.rule for c in comparison.no_longer_checked] == ["LIST-001"]
    assert comparison.coverage_fell == (
        f"{old.checks[0].name} covered less than before. Before: checked 200 crash states. "
        "Now: checked 10 crash states.",
    )
    assert not comparison.regressed


def test_compare_of_one_replay_key_says_whether_only_timing_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _run(tmp_path, "first"), _run(tmp_path, "second")
    capsys.readouterr()
    assert main(["compare", str(first), str(second)]) == 0
    assert "they differ only in timing" in capsys.readouterr().out
    report = load_report(second)
    capped = tuple(
        msgspec.structs.replace(c, status="incomplete", reason="ran 1 examples")
        if c.name == report.checks[0].name
        else c
        for c in report.checks
    )
    other = tmp_path / "capped.json"
    other.write_bytes(msgspec.json.encode(msgspec.structs.replace(report, checks=capped)))
    assert main(["compare", str(first), str(other)]) == 0
    out = capsys.readouterr().out
    assert "same replay key but differ in more than timing: in their checks" in out
    reseeded = msgspec.structs.replace(
        report, replay_key=msgspec.structs.replace(report.replay_key, seed=4)
    )
    assert compare_reports(load_report(first), reseeded).same_work == ""


def test_without_a_terminal_each_check_prints_one_line_as_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "memory", "--profile", "quick", "--only", "APPEND-00"]) == 0
    out = capsys.readouterr().out.splitlines()
    count = len(selected_checks(plan_run("memory", only=["APPEND-00"])))
    progress = [line for line in out if line.startswith("[")]
    assert len(progress) == count
    assert progress[0].startswith(f"[1/{count}] APPEND-00")
    assert " passed in " in progress[0]


def test_merge_refuses_an_unwritable_output_before_reading_the_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-dir" / "merged.json"
    assert main(["merge", str(tmp_path / "never-read.json"), "--report", str(missing)]) == 2
    assert f"--report: cannot write {missing}" in capsys.readouterr().err
