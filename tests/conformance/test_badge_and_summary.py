"""The status badge (``--badge``) and the Markdown summary (``--summary``) of a report."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from checkpointspec.conformance.engines.contract.violations import RuleWarning
from checkpointspec.conformance.frontends.badge import (
    GREEN,
    GREY,
    RED,
    YELLOW,
    Badge,
    badge_for,
    render_badge,
    text_width,
)
from checkpointspec.conformance.frontends.summary import render_summary
from checkpointspec.conformance.running.report import CheckResult
from kit_outputs import ALL_CAPABILITIES, errored, every_rule_passed, failed, report_of

SVG = "{http://www.w3.org/2000/svg}"
ALL_STORAGE_LEVELS = (
    "base+delete+list+truncate+generation+durable+multi_process+maintenance+codec+store_hooks"
    "+replicated+connection_loss+stdio_protocol"
)


def _replacing(prefix: str, *instead: CheckResult) -> list[CheckResult]:
    """Every rule passed, but the checks of ``prefix`` replaced by ``instead``."""
    return [*(c for c in every_rule_passed() if not c.name.startswith(prefix)), *instead]


def test_a_pass_is_green_with_the_attained_levels() -> None:
    assert badge_for(report_of(every_rule_passed())) == Badge(
        "checkpointspec", ALL_STORAGE_LEVELS, GREEN
    )
    declared = [c for c in ALL_CAPABILITIES if c not in ("durable", "codec")]
    badge = badge_for(report_of(every_rule_passed(), declared))
    assert (
        badge.message
        == "base+delete+list+truncate+generation+multi_process+maintenance+store_hooks"
        "+replicated+connection_loss+stdio_protocol"
    )
    assert badge.color == GREEN


def test_a_failure_is_red_and_counts_the_failing_rules() -> None:
    checks = _replacing("TRUNC-003", failed("TRUNC-003::check", "TRUNC-003", "x"))
    assert badge_for(report_of(checks)) == Badge("checkpointspec", "failing: 1 rule", RED)
    checks = _replacing(
        "TRUNC-00",
        failed("TRUNC-003::check", "TRUNC-003", "x"),
        failed("TRUNC-004::check", "TRUNC-004", "y"),
    )
    assert badge_for(report_of(checks)).message == "failing: 2 rules"


def test_an_xpassed_rule_counts_as_failing() -> None:
    badge = badge_for(report_of(every_rule_passed(), xfail={"HEAD-001": "known"}))
    assert badge == Badge("checkpointspec", "failing: 1 rule", RED)


def test_an_expected_failure_is_yellow() -> None:
    checks = _replacing("CODEC-002", failed("CODEC-002::check", "CODEC-002", "z"))
    badge = badge_for(report_of(checks, xfail={"CODEC-002": "issue 9"}))
    assert badge.color == YELLOW
    assert badge.message.endswith(" · 1 xfailed")
    assert "codec" not in badge.message.split(" · ")[0].split("+")


def test_a_kit_error_is_grey() -> None:
    checks = _replacing("HEAD-001", errored("HEAD-001::check"))
    assert badge_for(report_of(checks)) == Badge("checkpointspec", "kit error", GREY)


def test_the_svg_is_self_contained_and_sized_to_its_text() -> None:
    badge = Badge("checkpointspec", "base+truncate & <codec>", GREEN)
    svg = render_badge(badge)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("aria-label") == "checkpointspec: base+truncate & <codec>"
    title = root.find(f"{SVG}title")
    assert title is not None
    assert title.text == "checkpointspec: base+truncate & <codec>"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts == ["checkpointspec"] * 2 + ["base+truncate & <codec>"] * 2
    left, right = (r for r in root.iter(f"{SVG}rect") if r.get("fill") in ("#555", GREEN))
    assert int(left.get("width") or 0) >= text_width("checkpointspec")
    assert int(right.get("width") or 0) >= text_width("base+truncate & <codec>")
    assert int(root.get("width") or 0) == int(left.get("width") or 0) + int(right.get("width") or 0)
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


def test_a_longer_message_makes_a_wider_badge() -> None:
    short = ET.fromstring(render_badge(Badge("checkpointspec", "base", GREEN)))
    long = ET.fromstring(render_badge(Badge("checkpointspec", ALL_STORAGE_LEVELS, GREEN)))
    assert int(long.get("width") or 0) > int(short.get("width") or 0) + 200


# --- the Markdown summary ---------------------------------------------------------------


def test_a_failing_run_lists_the_rule_its_finding_and_replay() -> None:
    replay = "checkpointspec run memory --only TRUNC-003::check --profile quick --seed 1"
    checks = _replacing(
        "TRUNC-003",
        failed("TRUNC-003::check", "TRUNC-003", "a | b\nstate.step()", replay),
    )
    text = render_summary(report_of(checks))
    assert "❌ **FAIL**: 1 rule failing" in text
    row = next(line for line in text.splitlines() if line.startswith("| TRUNC-003 "))
    assert row == f"| TRUNC-003 | MUST | failed | [TRUNC-003] a \\| b | `{replay}` |"
    assert "| truncate | failed | TRUNC-003 failed |" in text
    assert "**Levels attained:** base, delete, list, generation" in text


def test_a_pass_has_no_rule_table_and_counts_rules_and_checks() -> None:
    text = render_summary(report_of(every_rule_passed()))
    assert text.startswith("## checkpointspec · memory\n\n✅ **PASS**")
    assert "### Rules that did not pass" not in text
    assert f"**Levels attained:** {ALL_STORAGE_LEVELS.replace('+', ', ')}" in text
    assert (
        "| session | not run | FOLD-001 not run: the run did not check the session suite |" in text
    )
    n = len(every_rule_passed())
    assert f"**Checks:** {n} run: {n} passed" in text


def test_skips_warnings_and_xfails_are_listed_with_the_reason() -> None:
    checks = _replacing("CODEC-002", failed("CODEC-002::check", "CODEC-002", "z"))
    declared = [c for c in ALL_CAPABILITIES if c != "durable"]
    text = render_summary(report_of(checks, declared, xfail={"CODEC-002": "issue 9"}))
    lines = text.splitlines()
    assert "| CODEC-002 | MUST | xfailed | [CODEC-002] z (expected: issue 9) | `" in text
    assert "| DUR-001 | MUST | skipped | the backend does not declare durable |  |" in lines
    # most urgent first: xfailed rows come before skipped ones
    assert text.index("| CODEC-002 ") < text.index("| DUR-001 ")


def test_a_warning_row_is_rendered_from_the_warning() -> None:
    warning = RuleWarning("LIST-003", "'b' was modified after 'a' but has an earlier mtime")
    listing = CheckResult(
        "LIST-003::check",
        ("LIST-003",),
        "passed",
        0.1,
        warnings=(warning.text,),
        warned=(warning,),
    )
    text = render_summary(report_of(_replacing("LIST-003", listing)))
    row = next(line for line in text.splitlines() if line.startswith("| LIST-003 "))
    assert row == f"| LIST-003 | SHOULD | warning | {warning.text} |  |"


def test_a_pass_that_attains_no_level_says_passed() -> None:
    # Only HEAD-001 was checked: every other rule is not checked, so no level is attained.
    report = report_of([CheckResult("HEAD-001::check", ("HEAD-001",), "passed", 0.1)])
    assert report.exit_status == 0
    assert badge_for(report) == Badge("checkpointspec", "passed", GREEN)
