"""Conformance levels: every MUST rule in exactly one level, attained only when all of it passed."""

from __future__ import annotations

from checkpointspec.conformance.running.levels import (
    LEVELS,
    LEVELS_BY_NAME,
    attained,
    describe_levels,
    judge_levels,
    level_of_rule,
)
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import ALL_CHECKS, rules_of_suite, suite_of_rule
from checkpointspec.conformance.running.report import CheckResult, LevelResult, summarise_rules
from checkpointspec.conformance.running.runner import run_kit
from checkpointspec.spec import (
    LEVEL_MEANINGS,
    RULES,
    RULES_BY_ID,
    Capability,
    ConformanceLevel,
    Strength,
)
from kit_outputs import ALL_CAPABILITIES, errored, every_rule_passed, failed, passed, report_of

NAMES = (
    "base",
    "delete",
    "list",
    "truncate",
    "generation",
    "durable",
    "multi_process",
    "maintenance",
    "codec",
    "store_hooks",
    "session",
    "replicated",
    "connection_loss",
    "stdio_protocol",
    "langgraph",
    "openai_session",
    "adk_session",
)


def test_the_levels_in_order() -> None:
    assert tuple(level.name for level in LEVELS) == NAMES


def test_every_must_rule_is_in_exactly_one_level_and_no_should_rule_is() -> None:
    for rule in RULES:
        holders = [level.name for level in LEVELS if rule.id in level.rules]
        if rule.strength is Strength.MUST:
            assert len(holders) == 1, (rule.id, holders)
            level = level_of_rule(rule.id)
            assert level is not None
            assert level.name == holders[0]
        else:
            assert holders == [], rule.id
            assert level_of_rule(rule.id) is None


def test_a_storage_level_holds_the_rules_of_its_capability() -> None:
    for level in LEVELS:
        if level.name == "session":
            assert all(suite_of_rule(r) == "session" for r in level.rules)
            continue
        if level.name == "store_hooks":  # what only StoreHooks lets the kit check
            assert level.rules == ("INTEG-002", "SCHEMA-001")
            continue
        if level.name == "connection_loss":  # what only ServerRouted lets the kit check
            assert level.rules == ("NET-001",)
            continue
        if level.name == "stdio_protocol":  # what only a backend behind --process can break
            assert level.rules == ("PROTO-001",)
            continue
        if level.name in (
            "langgraph",
            "openai_session",
            "adk_session",
        ):  # a framework's contract, one level
            assert all(suite_of_rule(r) == level.name for r in level.rules)
            continue
        assert level.capability == (None if level.name == "base" else Capability(level.name)), (
            level.name
        )
        for rule_id in level.rules:
            assert RULES_BY_ID[rule_id].capability is level.capability, rule_id
            assert suite_of_rule(rule_id) == "storage", rule_id
        assert level.rules, f"level {level.name} has no rule"


def test_the_levels_are_the_catalogs() -> None:
    for level in LEVELS:
        assert level.rules == tuple(r.id for r in RULES if r.level == level.name), level.name
        assert level.meaning == LEVEL_MEANINGS[ConformanceLevel(level.name)]


def test_the_store_hooks_level_is_what_the_kit_checks_only_through_store_hooks() -> None:
    # The catalog says which rules need the opt-in; the checks must agree with it.
    hooked = {c.rule_id for c in ALL_CHECKS if c.hooks}
    assert set(LEVELS_BY_NAME["store_hooks"].rules) == hooked


def test_the_session_level_is_the_session_suites_must_rules() -> None:
    session = [
        r.id for r in RULES if suite_of_rule(r.id) == "session" and r.strength.value == "MUST"
    ]
    assert LEVELS_BY_NAME["session"].rules == tuple(session)
    assert "RESTORE-001" in session  # needs TRUNCATE, still a session rule


def _levels(report_levels: tuple[LevelResult, ...]) -> dict[str, LevelResult]:
    return {level.name: level for level in report_levels}


def test_all_passed_attains_every_storage_level_and_not_the_session_one() -> None:
    levels = _levels(report_of(every_rule_passed()).levels)
    assert "langgraph" not in levels  # a saver's level is no checkpointer's
    assert "openai_session" not in levels
    assert "adk_session" not in levels
    assert [n for n in NAMES if n in levels and levels[n].status == "attained"] == [
        n for n in NAMES if n not in ("session", "langgraph", "openai_session", "adk_session")
    ]
    assert levels["session"].status == "not_run"
    assert "did not check the session suite" in levels["session"].reason


def test_one_failed_rule_loses_its_level_only() -> None:
    checks = [c for c in every_rule_passed() if not c.name.startswith("TRUNC-003")] + [
        failed("TRUNC-003::check", "TRUNC-003", "truncate ignored expected_head")
    ]
    levels = _levels(report_of(checks).levels)
    assert levels["truncate"].status == "failed"
    assert levels["truncate"].reason == "TRUNC-003 failed"
    assert levels["base"].status == "attained"


def test_an_xfailed_rule_keeps_its_level_from_being_attained() -> None:
    checks = [c for c in every_rule_passed() if not c.name.startswith("HEAD-001")]
    checks.append(failed("HEAD-001::check", "HEAD-001", "head is 3; expected 2"))
    report = report_of(checks, xfail={"HEAD-001": "known, issue 7"})
    assert report.exit_status == 0
    levels = _levels(report.levels)
    assert levels["base"].status == "failed"
    assert levels["base"].reason == "HEAD-001 xfailed"


def test_an_undeclared_capability_is_not_declared() -> None:
    declared = [c for c in ALL_CAPABILITIES if c != "durable"]
    levels = _levels(report_of(every_rule_passed(), declared).levels)
    assert levels["durable"].status == "not_declared"
    assert levels["durable"].reason == "the backend does not declare durable"
    assert levels["codec"].status == "attained"


def test_a_kit_error_leaves_a_level_unverified() -> None:
    checks = [c for c in every_rule_passed() if not c.name.startswith("CODEC-002")]
    checks.append(errored("CODEC-002::check"))
    level = _levels(report_of(checks).levels)["codec"]
    assert level.status == "unverified"
    assert level.reason.startswith("CODEC-002 error: CODEC-002::check")


def test_a_rule_skipped_for_another_reason_than_its_capability_is_unverified() -> None:
    # A declared capability, but the check cannot run (e.g. the backend offers no StoreHooks).
    checks = [c for c in every_rule_passed() if not c.name.startswith("INTEG-002")]
    checks.append(
        CheckResult("INTEG-002::check", ("INTEG-002",), "skipped", 0.0, reason="needs StoreHooks")
    )
    levels = _levels(report_of(checks).levels)
    assert levels["store_hooks"].status == "unverified"
    assert levels["store_hooks"].reason == "INTEG-002 skipped: needs StoreHooks"
    assert levels["base"].status == "attained"  # a backend without the opt-in still has base


def test_a_rule_that_also_needs_an_undeclared_capability_does_not_apply() -> None:
    # MAINT-004 needs MULTI_PROCESS besides MAINTENANCE: a single-process backend that
    # declares MAINTENANCE attains it without the cross-process rule.
    declared = [c for c in ALL_CAPABILITIES if c != "multi_process"]
    checks = [c for c in every_rule_passed() if not c.name.startswith("MAINT-004")]
    checks.append(
        CheckResult(
            "MAINT-004::check", ("MAINT-004",), "skipped", 0.0, reason="needs MULTI_PROCESS"
        )
    )
    levels = _levels(report_of(checks, declared).levels)
    assert levels["maintenance"].status == "attained"
    assert levels["multi_process"].status == "not_declared"


def test_a_rule_the_kit_checked_on_its_own_side_neither_counts_nor_blocks() -> None:
    # ARG-003 through stdio: every case is refused by the kit's client, never the backend's.
    checks = [c for c in every_rule_passed() if not c.name.startswith("ARG-003")]
    checks.append(
        CheckResult(
            "ARG-003::check", ("ARG-003",), "passed", 0.0, kit_checked={"ARG-003": "JSON cannot"}
        )
    )
    report = report_of(checks)
    assert {r.id: r.status for r in report.rules}["ARG-003"] == "kit_checked"
    base = _levels(report.levels)["base"]
    assert base.status == "attained"
    assert base.reason == "ARG-003 checked by the kit, not the backend"


def test_a_rule_left_out_by_only_is_not_run() -> None:
    report = run_kit(plan_run("memory", profile="quick", seed=1, only=["TRUNC"]))
    levels = _levels(report.levels)
    assert levels["truncate"].status == "attained"
    assert levels["base"].status == "not_run"
    assert levels["base"].reason.endswith("not run (--only)")
    assert levels["durable"].status == "not_declared"  # memory does not declare it
    assert attained(report.levels) == ("truncate",)


def test_the_line_under_the_summary_groups_levels_by_why_not() -> None:
    declared = [c for c in ALL_CAPABILITIES if c != "codec"]
    checks = [c for c in every_rule_passed() if not c.name.startswith("TRUNC-003")]
    checks.append(failed("TRUNC-003::check", "TRUNC-003", "bad"))
    line = describe_levels(judge_levels(report_of(checks, declared).rules, declared))
    assert line == (
        "levels: attained base, delete, list, generation, durable, multi_process, maintenance,"
        " store_hooks, replicated, connection_loss, stdio_protocol"
        " · failed truncate (TRUNC-003 failed)"
        " · not declared codec · not run session"
    )


def test_the_line_gives_an_unverified_levels_rule_and_status_not_the_whole_reason() -> None:
    checks = [c for c in every_rule_passed() if not c.name.startswith("INTEG-002")]
    checks.append(
        CheckResult("INTEG-002::check", ("INTEG-002",), "skipped", 0.0, reason="needs StoreHooks")
    )
    line = describe_levels(report_of(checks).levels)
    assert line.startswith("levels: attained base, delete, ")
    assert " · unverified store_hooks (INTEG-002 skipped) · " in line


def test_a_savers_run_lists_the_langgraph_level_only() -> None:
    suite = rules_of_suite("langgraph")
    checks = [passed(f"{rule}::check") for rule in sorted(suite)]
    levels = _levels(judge_levels(summarise_rules(checks, (), {}, rule_ids=suite), ()))
    assert list(levels) == ["langgraph"]
    assert levels["langgraph"].status == "attained"
