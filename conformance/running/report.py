"""The kit's results as data: per check, per rule, per run; JSON and JUnit output.

The JSON report (``--report FILE``) is `KitReport` encoded by msgspec; its
``schema_version`` changes only when a field is removed or changes meaning.
docs/report-schema.md documents every field.

A check ends in one of six statuses. ``failed`` is evidence against the
backend: a rule violation, or an exception the backend raised. ``error`` is the
kit's own failure (a bug in a check, a worker that cannot start): it says
nothing about the backend, fails no rule and makes the run exit 3.
``incomplete`` is a check the run's time cap stopped before its profile's counts
(or before it started): what it covered found nothing, which is no pass; its
rules read ``incomplete`` and the run exits 4 unless a rule failed, or 0 when
the run was told to accept that (``--accept-incomplete``).
``not_checked`` means the check could not run to the end because the backend
refuses an operation it needs and does not declare; ``skipped`` that the check
does not apply (an undeclared capability, no `StoreHooks`).

A check that passed only because the kit refused every case before the
backend was asked (the stdio client refusing what JSON cannot carry, or a bridge
answering a request the backend has no operation for: a proxy declaring
`checkpointspec.spec.RefusesBeforeTheBackend`) says so, per rule, in
``kit_checked``; its pass is no evidence about the backend on that rule. A rule
whose every pass is of that kind has the status ``kit_checked``, never ``passed``.

A rule has one more status: ``not_run``, for a rule no selected check verifies
when the run was narrowed (``--only``): the user chose not to run it, which
says nothing about the backend. ``not_checked`` keeps its meaning: a check that
ran could not reach a verdict on the rule.

A run checks one suite (``storage``, ``session`` or ``all``; see
`checkpointspec.conformance.running.registry`), and its report holds a verdict on
that suite's rules only: a storage run says nothing about the session rules,
so it does not list them (neither ``not_run`` nor ``not_checked``). ``suite``
and ``session_layer`` say what was checked.

``levels`` says which conformance levels the run attained (see
`checkpointspec.conformance.running.levels`): a level is a set of MUST rules, and
it is attained only when every one of them passed.

The report's JSON Schema is generated from these Structs and shipped in the
package as ``report.schema.json`` (`checkpointspec.conformance.running.report_schema`).
"""

from __future__ import annotations

import importlib.metadata
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import msgspec

from ...spec import RULES, Rule, Strength
from ..engines.contract.violations import RuleWarning
from ..engines.target.provenance import Raiser


def _installed_version() -> str:
    try:
        return importlib.metadata.version("checkpointspec")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


__all__ = [
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_KIT_ERROR",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "KIT_VERSION",
    "REPORT_SCHEMA_VERSION",
    "CheckResult",
    "CheckStatus",
    "Defect",
    "Finding",
    "KitReport",
    "LevelResult",
    "LevelStatus",
    "ReplayKey",
    "RuleResult",
    "RuleStatus",
    "summarise_rules",
    "to_json",
    "to_junit",
    "unwritable",
]

KIT_VERSION: str = _installed_version()
"""The installed kit's version ("0.1.0"), as its package metadata says."""

REPORT_SCHEMA_VERSION = 9
"""2: check status ``error`` and ``not_checked``, rule status ``error``, exit status 3.
3: rule status ``not_run`` for rules outside an ``--only`` selection, which were
``not_checked`` before.
4: ``suite`` and ``session_layer``; ``rules`` holds the run's suite's rules only.
5: a check's ``traceback``; ``detail`` is the failure panel, without the kit's traceback.
6: ``levels`` (the conformance levels and whether each was attained) and
``expected_failures`` (the ``--xfail`` rules and their reasons); the ``reason`` of an
``xfailed`` or ``xpassed`` rule carries the ``--xfail`` reason.
7: a check's ``reproduce`` (the failing example's blob, also in ``replay`` as
``--reproduce``) and ``replay_note``; ``replay`` carries the run's ``--option``s.
8: a check's ``findings`` (every distinct violation it found, each with its own
``replay``), a rule's ``follows_from``, the run's ``findings`` and ``roots``; a rule
fails when any check found it violated; ``rules`` lead with the roots; a check's
``kit_checked`` and the rule status ``kit_checked`` (a rule only the kit's side judged).
9: the time budget is a cap: check and rule status ``incomplete`` (the cap stopped a
check before its profile's counts; it was ``passed``, cut short), exit status 4; the
run's ``accept_incomplete``, ``ci`` and ``replay_key``."""

CheckStatus = Literal["passed", "failed", "skipped", "not_checked", "error", "incomplete"]
RuleStatus = Literal[
    "passed",
    "failed",
    "warning",
    "skipped",
    "xfailed",
    "xpassed",
    "not_checked",
    "not_run",
    "error",
    "kit_checked",
    "incomplete",
]
LevelStatus = Literal["attained", "failed", "not_declared", "unverified", "not_run"]

EXIT_PASSED = 0
"""No MUST rule failed and the kit ran every selected check to a verdict."""
EXIT_FAILED = 1
"""A MUST rule failed, or a rule listed as an expected failure passed."""
EXIT_USAGE = 2
"""Usage error: unknown backend, a factory that cannot be imported or raises, a bad option."""
EXIT_KIT_ERROR = 3
"""No MUST rule failed, but a check ended in a kit error, so the run proves nothing either way."""
EXIT_INCOMPLETE = 4
"""No MUST rule failed and no check errored, but the run's time cap stopped a check before
its profile's counts: the run did less than its profile's pass means (unless
``--accept-incomplete``)."""


class Finding(msgspec.Struct, frozen=True):
    """One defect a check found: a rule it saw violated, with its own evidence and replay.

    A check keeps exploring after a finding (`checkpointspec.conformance.engines.search.exploration`),
    so it may report several, one per rule. Made from the evidence in one place
    (`checkpointspec.conformance.running.findings.findings_from`): a `RuleViolation`,
    or an exception the backend or the session layer raised (``raised_by``).
    ``message`` says what is wrong, ``summary`` is its first line; ``call``,
    ``expected`` and ``got`` are the failing call, what the contract allows and what
    came back, as far as the evidence knows them ("" where not). ``steps`` are the
    shrunk failing steps (Hypothesis' report, translated) and ``frames`` the backend's
    own frames of an exception it raised. ``detail`` is the failure panel rendered
    from those (`checkpointspec.conformance.running.failures.finding_panel`).
    ``follows_from`` is the root rule whose defect explains this finding: its own
    steps diverged first at a call that breaks it, or the same evidence breaks both
    (``root_evidence`` says which); None for a root. ``shape`` names the divergence
    without the example's values (`checkpointspec.spec.divergences`): findings with
    the same rule and shape are one defect.
    """

    rule: str
    check: str
    summary: str
    detail: str = ""
    replay: str = ""
    reproduce: str | None = None
    follows_from: str | None = None
    root_evidence: str = ""
    message: str = ""
    raised_by: Raiser | None = None
    """Who raised the exception this finding is: ``backend`` or ``session layer``;
    None for a rule violation the kit saw."""
    call: str = ""
    expected: str = ""
    got: str = ""
    steps: tuple[str, ...] = ()
    frames: str = ""
    shape: str = ""
    otherwise: tuple[str, str] | None = None
    """The rule and shape this finding's answer has alone, where its rule is a cause
    inferred from the calls before it (`checkpointspec.spec.divergences.Divergence.otherwise`):
    when another finding of the run has these without any inference, this finding is
    that defect too, and is filed under it (`checkpointspec.conformance.running.roots.resolved`)."""


class Defect(msgspec.Struct, frozen=True):
    """One defect of a run: a root ``rule`` and the ``shape`` of its divergence, the
    ``checks`` that found it, and the ``symptoms``: the other rules that follow from
    it. ``call``, ``expected`` and ``got`` are where one check saw it first."""

    rule: str
    shape: str
    checks: tuple[str, ...]
    symptoms: tuple[str, ...] = ()
    call: str = ""
    expected: str = ""
    got: str = ""


class CheckResult(msgspec.Struct, frozen=True):
    """The outcome of one check.

    A failed check's ``findings`` are what it found, as values; its headline is the
    first of them: ``violated_rule``, ``detail`` (that finding's panel: the message
    and, for model-based checks, the minimal failing sequence of steps), ``replay``
    and ``reproduce`` are that finding's, set from it
    (`checkpointspec.conformance.running.findings.with_findings`). For a kit error
    ``detail`` is its own panel, and for a pass what the check covered where it says
    (how many crash states it checked); ``reason`` says why a check was skipped, not
    checked or errored; ``replay`` is a command that reruns it.
    """

    name: str
    rules: tuple[str, ...]
    status: CheckStatus
    duration: float
    reason: str = ""
    violated_rule: str | None = None
    detail: str = ""
    replay: str = ""
    warnings: tuple[str, ...] = ()
    """``warned`` for people: each rendered as ``[RULE-ID] message``."""
    warned: tuple[RuleWarning, ...] = ()
    """SHOULD rules the check saw not met, as values (the rule and the message); they do
    not fail the check, and each makes its own rule's verdict ``warning``."""
    traceback: str = ""
    """The full traceback of a failure or kit error, the kit's frames included."""
    reproduce: str | None = None
    """The failing example of the check's Hypothesis run (``HYPOTHESIS_VERSION:BASE64``),
    which ``replay`` passes as ``--reproduce`` to rerun exactly it; None for a check
    whose failure came from no Hypothesis run (it replays from the seed)."""
    replay_note: str = ""
    """Why ``replay`` may not reproduce the failure exactly (a kill or a race timed by
    the operating system, not by the seed); empty when it does."""
    findings: tuple[Finding, ...] = ()
    """Every distinct violation the check found, one per rule, in the order found; the
    first is ``violated_rule``. Empty unless ``failed``."""
    rounds: int = 0
    """Exploration rounds the check's Hypothesis runs used (0: it runs none)."""
    explored: bool = False
    """The check explored past its findings until a round found nothing new: a rule it
    verifies and did not find broken passed it, as in a check that passed."""
    budget: float | None = None
    """Seconds of the run's time cap that were left when this check started (its
    slice); None: the run had no cap, or the check was skipped."""
    cut_short: bool = False
    """The cap stopped the check before its profile's counts were reached: it ran fewer
    examples, states, holds or calls than its profile asks for (a check that found
    nothing is then ``incomplete``, its ``reason`` saying how far it got), or stopped
    shrinking a failure, which it reports as far as it was shrunk."""
    left_behind: str = ""
    """What the kit could not drop of the check's stores on a backend that keeps them
    outside their directories (`checkpointspec.spec.ExternalStorage`), with why; ""
    when everything was dropped or nothing needed to be. No verdict on a rule."""
    kit_checked: dict[str, str] = msgspec.field(default_factory=dict)
    """The rules this check's pass says nothing about for this backend, each with why:
    the kit refused every case of it on its own side, before the backend was asked
    (the stdio client and what JSON cannot carry); empty when the backend answered."""


class RuleResult(msgspec.Struct, frozen=True):
    """One rule's verdict over all checks that verify it."""

    id: str
    strength: Strength
    capability: str | None
    title: str
    status: RuleStatus
    checks: tuple[str, ...]
    reason: str = ""
    first_failure: str = ""
    follows_from: str | None = None
    """For a failed rule whose every finding follows from another rule's defect: that
    root rule (the fix is there); None for a root or a rule that did not fail."""


class LevelResult(msgspec.Struct, frozen=True):
    """Whether a run attained one conformance level.

    ``status`` is ``attained`` when every MUST rule of the level passed; otherwise
    it says why not, the strongest reason first: ``failed`` (a rule of the level
    failed, was xfailed or xpassed), ``not_declared`` (the backend does not declare
    the level's capability), ``unverified`` (a rule of the level was skipped for
    another reason, not checked or stopped on a kit error), ``not_run`` (the run
    did not check every rule of the level: ``--only``, or another suite).
    ``reason`` names the first rule that kept the level from being attained.
    """

    name: str
    capability: str | None
    status: LevelStatus
    rules: tuple[str, ...]
    reason: str = ""


class ReplayKey(msgspec.Struct, frozen=True):
    """What fixes a run's work: two runs with the same key do the same work on a
    deterministic backend and reach the same verdict, on any machine and under any
    load, unless the time cap stopped one of them (`KitReport.exit_status` 4).

    ``kit_version`` and ``hypothesis_version`` are the installed versions (the
    examples a seed draws depend on both); ``profile`` and ``seed`` say which work;
    ``budget`` is the time cap in seconds (None: none); ``backend`` is the target as
    the kit loaded it (``module:function``, ``process:COMMAND``) and ``capabilities``
    what it declared. ``checkpointspec compare`` of two reports with the same key
    says whether they differ in anything but timing."""

    kit_version: str
    hypothesis_version: str
    profile: str
    seed: int
    budget: float | None
    backend: str
    capabilities: tuple[str, ...]
    suite: str = "storage"
    session_layer: str | None = None


class KitReport(msgspec.Struct, frozen=True):
    """Everything one run found. ``exit_status`` is what the CLI exits with.

    ``suite`` is the suite run; ``session_layer`` the session layer checked on the
    backend (``MODULE`` or ``MODULE:OBJECT``), None when the run had no session check.
    ``rules`` are the suite's rules: the roots first (failed rules that follow from
    no other), then the failed rules that follow from them, then the rest, each group
    in catalog order. ``findings`` are every check's findings, roots first; ``roots``
    the root rules, the first of them the run's headline. ``levels`` are every
    conformance level, in order, attained or not; ``expected_failures`` the rules
    listed with ``--xfail`` and the reason given for each (empty when none was).
    """

    schema_version: int
    backend: str
    target: str
    suite: str
    session_layer: str | None
    profile: str
    seed: int
    capabilities: tuple[str, ...]
    duration: float
    checks: tuple[CheckResult, ...]
    rules: tuple[RuleResult, ...]
    warnings: tuple[str, ...]
    exit_status: int
    levels: tuple[LevelResult, ...]
    expected_failures: dict[str, str]
    findings: tuple[Finding, ...] = ()
    roots: tuple[str, ...] = ()
    defects: tuple[Defect, ...] = ()
    """One per root rule and divergence shape, the one explaining most first
    (`checkpointspec.conformance.running.roots.defects_of`): the run's to-do list."""
    shard: str | None = None
    """``K/N`` for a run of one shard (``--shard``); None for a whole run or a merged one."""
    budget: float | None = None
    """The run's time cap in seconds (the profile's, or ``--budget``): a check still short
    of its counts when the cap is reached ends ``incomplete``; None: no cap."""
    accept_incomplete: bool = False
    """The run was told to pass with checks the cap stopped (``--accept-incomplete``):
    they still read ``incomplete``, but the exit status is 0 where nothing else failed."""
    ci: bool = False
    """The run took its settings as a gate because ``CI`` was set (`KitRun.ci`): a fixed
    seed when none was given, what the run's header said it changed."""
    left_behind: tuple[str, ...] = ()
    """What the run could not drop of the stores it made on a backend that keeps them
    outside their directories (the probe's store, each check's), one sentence each;
    empty when it left nothing behind."""
    replay_key: ReplayKey | None = None
    """What fixes the run's work (`ReplayKey`); None in reports written before it was kept."""


def _rule_verdict(
    rule: Rule,
    results: list[CheckResult],
    expected_failures: Mapping[str, str],
    capabilities: frozenset[str],
    narrowed: bool,
) -> RuleResult:
    names = tuple(r.name for r in results)
    failures = [r for r in results if r.status == "failed" and rule.id in _found_rules(r)]
    passes = [r for r in results if r.status == "passed" or (r.status == "failed" and r.explored)]
    completed = [r for r in passes if rule.id not in r.kit_checked]
    kit_only = [r for r in passes if rule.id in r.kit_checked]
    capability = rule.capability.value if rule.capability else None

    def verdict(status: RuleStatus, reason: str = "", first_failure: str = "") -> RuleResult:
        return RuleResult(
            rule.id, rule.strength, capability, rule.title, status, names, reason, first_failure
        )

    if capability is not None and capability not in capabilities:
        return verdict("skipped", f"the backend does not declare {capability}")
    if failures:
        first = failures[0]
        detail = next(f.detail for f in first.findings if f.rule == rule.id)
        if rule.id in expected_failures:
            return verdict(
                "xfailed", _expected(f"{first.name}", expected_failures[rule.id]), detail
            )
        status: RuleStatus = "failed" if rule.strength is Strength.MUST else "warning"
        return verdict(status, ", ".join(r.name for r in failures), detail)
    errors = [r for r in results if r.status == "error"]
    if errors:
        # A check that broke off on the kit's own error may have been about to
        # find a violation: neither passed nor failed.
        return verdict("error", f"{errors[0].name}: {errors[0].reason}", errors[0].detail)
    warned = [w for r in results for w in r.warned if w.rule_id == rule.id]
    if warned:
        return verdict("warning", "SHOULD rule not met", warned[0].text)
    capped = [r for r in results if r.status == "incomplete"]
    if capped:
        # The cap stopped a check of it before its counts: what it covered is no pass.
        return verdict("incomplete", f"{capped[0].name}: {capped[0].reason}")
    if completed:
        if rule.id in expected_failures:
            return verdict(
                "xpassed",
                _expected(
                    "listed as an expected failure, but it passed", expected_failures[rule.id]
                ),
            )
        return verdict("passed", _partly_checked(results))
    if kit_only:
        # Evidence about the kit's client, not the backend: never a pass.
        first_kit = kit_only[0]
        return verdict("kit_checked", f"{first_kit.name}: {first_kit.kit_checked[rule.id]}")
    skipped = [r for r in results if r.status == "skipped"]
    if skipped and len(skipped) == len(results):
        return verdict("skipped", skipped[0].reason)
    if not results and narrowed:
        return verdict("not_run", "no selected check verifies it (--only)")
    if not results:
        return verdict("not_checked", "no check of the kit verifies it")
    refused = [r for r in results if r.status == "not_checked"]
    if refused:
        return verdict("not_checked", f"{refused[0].name}: {refused[0].reason}")
    other = next(r for r in results if r.status == "failed")
    return verdict(
        "not_checked",
        f"{other.name} stopped on {other.violated_rule} before reaching this rule",
    )


def _found_rules(result: CheckResult) -> set[str]:
    return {f.rule for f in result.findings} if result.status == "failed" else set()


def _partly_checked(results: list[CheckResult]) -> str:
    """For a rule that passed: which of its checks did not run, so that a pass that
    rests on some of its checks only says so (empty when every check ran)."""
    unrun = [r for r in results if r.status in ("skipped", "not_checked")]
    if not unrun:
        return ""
    first = unrun[0]
    kind = "skipped" if first.status == "skipped" else "not checked"
    return f"{len(unrun)} of {len(results)} checks {kind}: {first.name}: {first.reason}"


def _expected(reason: str, why: str) -> str:
    return f"{reason} (--xfail: {why})" if why else reason


def summarise_rules(
    results: Iterable[CheckResult],
    capabilities: Iterable[str],
    expected_failures: Iterable[str] | Mapping[str, str] = frozenset(),
    *,
    narrowed: bool = False,
    rule_ids: Iterable[str] | None = None,
) -> tuple[RuleResult, ...]:
    """Fold check results into one verdict per rule, in catalog order.

    ``narrowed``: the results are from a selection of the suite's checks (``--only``),
    so a rule none of them reached is ``not_run`` rather than ``not_checked``.
    ``rule_ids``: the rules to report (the run's suite's); all of the catalog when None.
    ``expected_failures``: the ``--xfail`` rules, or a mapping of each to its reason.
    """
    reasons = (
        dict(expected_failures)
        if isinstance(expected_failures, Mapping)
        else dict.fromkeys(expected_failures, "")
    )
    by_rule: dict[str, list[CheckResult]] = {r.id: [] for r in RULES}
    for result in results:
        for rule_id in result.rules:
            by_rule[rule_id].append(result)
        for warning in result.warned:
            if warning.rule_id in by_rule and warning.rule_id not in result.rules:
                by_rule[warning.rule_id].append(result)
        for rule_id in sorted(_found_rules(result) - set(result.rules)):
            by_rule[rule_id].append(result)
    declared = frozenset(capabilities)
    wanted = None if rule_ids is None else frozenset(rule_ids)
    return tuple(
        _rule_verdict(rule, by_rule[rule.id], reasons, declared, narrowed)
        for rule in RULES
        if wanted is None or rule.id in wanted
    )


def exit_status_for(
    rules: Iterable[RuleResult],
    checks: Iterable[CheckResult] = (),
    *,
    accept_incomplete: bool = False,
) -> int:
    """`EXIT_FAILED` if a MUST rule failed (or an expected failure passed), else
    `EXIT_KIT_ERROR` if a check errored, else `EXIT_INCOMPLETE` if the time cap stopped
    a check before its counts (and ``accept_incomplete`` was not given), else
    `EXIT_PASSED`.

    A proven violation outranks a kit error: the evidence stands whatever else
    went wrong. A kit error outranks an incomplete check, and that a pass: a run
    that could not finish a check has not shown the backend conforms. A failed rule that follows from an expected
    failure (`checkpointspec.conformance.running.roots`) is that known defect seen
    again, not another: it stays in the table, marked so, and fails nothing.
    """
    rules, checks = list(rules), list(checks)
    expected = {r.id for r in rules if r.status == "xfailed"}
    if any(
        r.status == "xpassed" or (r.status == "failed" and r.follows_from not in expected)
        for r in rules
    ):
        return EXIT_FAILED
    # A session check can prove a storage rule broken, which a session run does not report.
    reported = {r.id for r in rules}
    if any(c.status == "failed" and c.violated_rule not in reported for c in checks):
        return EXIT_FAILED
    if any(c.status == "error" for c in checks):
        return EXIT_KIT_ERROR
    if not accept_incomplete and any(c.status == "incomplete" for c in checks):
        return EXIT_INCOMPLETE
    return EXIT_PASSED


def unwritable(text: str) -> str | None:
    """Why an output file (``--report``, ``--junit``, ``--badge``, ``--summary``) named
    ``text`` cannot be written, in one line; None if it can. Checked before a run, so
    that a bad path is a usage error and not a report lost after minutes of checks."""
    path = Path(text)
    parent = path.parent
    if path.is_dir():
        return f"cannot write {text}: it is a directory"
    if not parent.exists():
        return f"cannot write {text}: {parent} does not exist"
    if not parent.is_dir():
        return f"cannot write {text}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot write {text}: permission denied"
    return None


def to_json(report: KitReport) -> bytes:
    """The report as indented JSON."""
    formatted: bytes = msgspec.json.format(msgspec.json.encode(report), indent=2)
    return formatted


def to_junit(report: KitReport) -> bytes:
    """The report as JUnit XML: one testcase per check, classed by its rule id.

    A failed check is a ``failure``; a kit error an ``error`` (JUnit's word for a
    test that broke rather than found a fault); skipped and not checked ones are
    ``skipped`` with the reason; an incomplete one a ``failure`` of type
    ``incomplete`` (``skipped`` when the run accepted incomplete checks). Rules
    outside an ``--only`` selection (``not_run``) are listed in the suite's
    ``rules_not_run`` property.
    """
    capped_fails = not report.accept_incomplete
    failed = sum(
        c.status == "failed" or (c.status == "incomplete" and capped_fails) for c in report.checks
    )
    errors = sum(c.status == "error" for c in report.checks)
    skipped = sum(
        c.status in ("skipped", "not_checked") or (c.status == "incomplete" and not capped_fails)
        for c in report.checks
    )
    suite = ET.Element(
        "testsuite",
        name=f"checkpointspec[{report.backend}]"
        + ("" if report.suite == "storage" else f"[{report.suite}]"),
        tests=str(len(report.checks)),
        failures=str(failed),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{report.duration:.3f}",
    )
    for result in report.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=result.rules[0],
            name=result.name,
            time=f"{result.duration:.3f}",
        )
        if result.status == "failed":
            headline = result.findings[0].summary if result.findings else ""
            failure = ET.SubElement(case, "failure", message=f"[{result.violated_rule}] {headline}")
            failure.text = f"{result.detail}\n\nreplay: {result.replay}"
        elif result.status == "error":
            error = ET.SubElement(case, "error", message=f"kit error: {result.reason}")
            error.text = f"{result.detail}\n\nreplay: {result.replay}"
        elif result.status == "incomplete" and capped_fails:
            ET.SubElement(
                case, "failure", type="incomplete", message=f"incomplete: {result.reason}"
            )
        elif result.status == "incomplete":
            ET.SubElement(case, "skipped", message=f"incomplete (accepted): {result.reason}")
        elif result.status == "not_checked":
            ET.SubElement(case, "skipped", message=f"not checked: {result.reason}")
        elif result.status == "skipped":
            ET.SubElement(case, "skipped", message=result.reason)
    not_run = [r.id for r in report.rules if r.status == "not_run"]
    if not_run:
        # JUnit has one testcase per check run; rules outside the selection have none,
        # so the suite says which they are rather than passing them off as skipped.
        properties = ET.Element("properties")
        ET.SubElement(properties, "property", name="rules_not_run", value=" ".join(not_run))
        suite.insert(0, properties)
    suites = ET.Element("testsuites")
    suites.append(suite)
    xml: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return xml
