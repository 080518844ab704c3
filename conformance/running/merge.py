"""Several reports of one run spread over CI jobs (``--shard K/N``), made one.

`merge_reports` takes the JSON reports of the shards and gives the report one run of
all their checks would have given: each check's result as its shard found it, the
rules, roots, levels and exit status judged again over all of them. The reports
must be of one run: the same backend, suite, session layer, profile, seed and
declared capabilities, and no check in two of them (`MergeError` otherwise).
Rooting's re-checks are not run again: a finding keeps what its shard decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from .levels import judge_levels
from .registry import SUITES
from .report import REPORT_SCHEMA_VERSION, KitReport, exit_status_for
from .roots import judge

__all__ = ["MergeError", "load_report", "merge_reports"]


class MergeError(ValueError):
    """Reports that cannot be merged, or read; the message says which and why, in one line."""


def load_report(path: Path) -> KitReport:
    """The report in the JSON file ``path`` (``--report``), of this kit's schema version."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MergeError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        version = msgspec.json.decode(data, type=dict[str, object]).get("schema_version")
    except msgspec.DecodeError as exc:
        raise MergeError(f"{path} is not a JSON report: {exc}") from None
    if version != REPORT_SCHEMA_VERSION:
        raise MergeError(
            f"{path} has report schema version {version}; this kit reads "
            f"{REPORT_SCHEMA_VERSION}: rerun it with this kit"
        )
    try:
        return msgspec.json.decode(data, type=KitReport)
    except msgspec.ValidationError as exc:
        raise MergeError(f"{path} is not a kit report: {exc}") from None


_SAME = ("backend", "target", "suite", "session_layer", "profile", "seed", "capabilities")
"""What the reports of one run's shards share."""


def merge_reports(reports: Sequence[KitReport]) -> KitReport:
    """One report from the reports of one run's shards (see the module)."""
    if not reports:
        raise MergeError("no report to merge")
    first = reports[0]
    for other in reports[1:]:
        for field in _SAME:
            if getattr(other, field) != getattr(first, field):
                raise MergeError(
                    f"the reports are of different runs: {field} is "
                    f"{getattr(first, field)!r} in one and {getattr(other, field)!r} in another"
                )
    checks = [c for r in reports for c in r.checks]
    names = [c.name for c in checks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise MergeError(f"{twice[0]} is in more than one report: merge each shard once")
    if first.suite not in SUITES:
        raise MergeError(f"unknown suite {first.suite!r} in the reports")
    suite = first.suite
    suite_checks = [c.name for c in SUITES[suite]]
    ordered = sorted(
        checks, key=lambda c: suite_checks.index(c.name) if c.name in suite_checks else len(names)
    )
    marked, findings, roots, rules, defects = judge(
        ordered, suite, first.capabilities, first.expected_failures
    )
    return msgspec.structs.replace(
        first,
        duration=max(r.duration for r in reports),
        checks=tuple(marked),
        rules=rules,
        warnings=tuple(w for c in marked for w in c.warnings),
        exit_status=exit_status_for(rules, marked, accept_incomplete=first.accept_incomplete),
        levels=judge_levels(rules, first.capabilities),
        findings=findings,
        roots=roots,
        defects=defects,
        shard=None,
        left_behind=tuple(dict.fromkeys(left for r in reports for left in r.left_behind)),
    )
