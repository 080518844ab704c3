"""The text of a failure panel: the rule and the finding first, then what helps act on it.

A check that ends in an exception is reported through its findings, each a
`Finding` value whose ``detail`` is its panel rendered from it (`finding_panel`);
`CheckResult.detail` is the first finding's (the CLI prints it, the JSON report
carries it, the pytest plugin shows it), and `CheckResult.traceback` the full
Python traceback, the kit's own frames included (the CLI prints it only with
``--verbose``, the plugin with ``-vv``). The panel is written from the value and
never read back: what a finding says is in its fields.

Hypothesis runs the kit's property checks and state machines. Its settings there
(`checkpointspec.conformance.engines.search.replay`) already turn off some of what it
says to test authors: no explain phase ("these lines were always and only run
by failing test cases"). The ``@reproduce_failure`` blob it prints is taken into
the report (`CheckResult.reproduce`) and the replay command (``--reproduce``).
What it says is translated here, in `hypothesis_lines`: a `Flaky` (runs of the
same steps went differently: a failure that did not happen again when Hypothesis
replayed them, or a re-run that drew other steps because the backend's answers
differed) becomes one sentence about the backend (`FLAKY_REPLAY`), followed by
how Hypothesis saw the runs differ and what each run raised (`flaky_outcomes`);
the failing steps stay, and the advice meant for test authors (the decorator to
add, and whatever else a user's Hypothesis profile or version brings) is dropped.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from pathlib import Path

import hypothesis
from hypothesis.errors import Flaky, FlakyStrategyDefinition

from ..engines.contract.violations import RuleViolation
from ..engines.search.exploration import run_failures
from ..engines.search.replay import linked_exceptions
from .report import CheckResult, Finding, KitReport, RuleResult

__all__ = [
    "ANSWERED_DIFFERENTLY",
    "FLAKY_REPLAY",
    "NOT_AGAIN",
    "REDRAWN",
    "backend_frames",
    "finding_panel",
    "flaky_outcomes",
    "full_traceback",
    "headline",
    "hypothesis_lines",
    "panel",
    "panel_body",
    "panel_title",
    "raised_at",
    "rule_headline",
]

ANSWERED_DIFFERENTLY = "the backend answered the same calls differently on a re-run"
"""What Hypothesis' `Flaky` says about a backend: runs of the same steps went differently."""

FLAKY_REPLAY = (
    f"{ANSWERED_DIFFERENTLY} of the same steps (a race or hidden state): the runs' outcomes differ"
)

REDRAWN = (
    "a re-run of the same steps went on to other steps: which steps could run "
    "depended on the backend's answers"
)
"""What Hypothesis' `FlakyStrategyDefinition` ("inconsistent data generation") says
of a state machine run on a backend."""

NOT_AGAIN = "a re-run of the same steps did not fail this way"
"""A finding no other run of its example raised again."""


_HEADINGS = {
    "Failing test case: <state machine>": "failing steps:",
    "Failing test case: ": "failing example: ",
    "Falsifying example: ": "failing example: ",
    "Falsifying explicit example: ": "failing example: ",
}
"""Hypothesis' headings of a failing example, in the kit's words."""

_CHATTER = (
    "@reproduce_failure",
    "reproduce_failure(",
    "always and only run by failing test cases",
    "Explanation:",
    "The test sometimes passed when commented parts were varied",
    "or at https://hypothesis.readthedocs.io",
    "Unreliable test timings",
    "HealthCheck",
    "You can add @seed(",
)
"""Fragments of Hypothesis' advice to test authors; a line holding one is dropped."""

_KIT_ROOT = Path(__file__).resolve().parents[2]
"""The package's source root: every kit module (spec, conformance, ...) lives under it."""
_KIT_DIRS = tuple(str(_KIT_ROOT / name) for name in ("conformance", "spec", "reference"))
_LIBRARY_DIRS = (str(Path(traceback.__file__).parent), str(Path(hypothesis.__file__).parent))
"""The standard library's and Hypothesis' folders (not site-packages: a backend may live there)."""


def _is_chatter(line: str) -> bool:
    return any(fragment in line for fragment in _CHATTER)


def _heading(line: str) -> str:
    for theirs, ours in _HEADINGS.items():
        if line.startswith(theirs):
            return ours + line.removeprefix(theirs)
    return line


def _clean(note: str) -> str:
    """One Hypothesis note without its advice to test authors; "" if nothing is left."""
    kept = [_heading(line) for line in note.splitlines() if not _is_chatter(line)]
    while kept and not kept[-1].strip():
        kept.pop()
    while kept and not kept[0].strip():
        kept.pop(0)
    return "\n".join(kept)


def hypothesis_lines(exc: BaseException, finding: BaseException | None = None) -> list[str]:
    """What a panel says after the finding, translated from Hypothesis' report of ``exc``.

    ``finding`` is the exception the panel leads with (a `RuleViolation`, or what the
    backend raised) when it is not ``exc`` itself. The result: when runs of the same
    steps went differently (a `Flaky`), `FLAKY_REPLAY`, what Hypothesis saw of the
    runs and what each of them raised besides the finding (`flaky_outcomes`); then
    the failing steps (the notes Hypothesis attached to the finding or to the
    exceptions around it), each once, without Hypothesis' advice to test authors.
    """
    lines: list[str] = []
    everything = list(linked_exceptions(exc))
    if finding is not None and finding not in everything:
        everything.append(finding)
    if any(isinstance(e, Flaky) for e in everything):
        lines.append(FLAKY_REPLAY)
        lines.extend(flaky_outcomes(exc, finding))
    # The finding's notes first: its steps are the ones that failed.
    ordered = ([finding] if finding is not None else []) + everything
    seen: set[str] = set()
    for e in ordered:
        # One exception's notes are one report (a step may repeat in it); the same
        # report attached to several exceptions is given once.
        text = _clean("\n".join(str(n) for n in getattr(e, "__notes__", None) or ()))
        if text and text not in seen:
            seen.add(text)
            lines.append(text)
    return lines


def flaky_outcomes(exc: BaseException, finding: BaseException | None = None) -> list[str]:
    """The runs of one example behind Hypothesis' `Flaky` report ``exc``, in the kit's
    words: whether a re-run chose other steps (`FlakyStrategyDefinition`), then what
    each run raised other than ``finding`` (`run_failures`), one line each, or that
    no other run failed this way."""
    lines: list[str] = []
    if any(isinstance(e, FlakyStrategyDefinition) for e in linked_exceptions(exc)):
        lines.append(REDRAWN)
    others = [f for f in run_failures(exc) if f is not finding]
    lines.extend(f"another run raised: {_one_line(failure)}" for failure in others)
    if finding is not None and not others:
        lines.append(NOT_AGAIN)
    return lines


def _one_line(failure: BaseException) -> str:
    first = (str(failure).splitlines() or [""])[0]
    if isinstance(failure, RuleViolation):
        return first
    return f"{type(failure).__name__}: {first}"


def _in(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _is_kit_frame(filename: str) -> bool:
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return _in(path, _KIT_DIRS) or _in(path, _LIBRARY_DIRS) or filename.startswith("<")


def backend_frames(exc: BaseException) -> str:
    """The frames of ``exc``'s traceback outside the kit, Hypothesis and the standard
    library (the backend's own code), formatted like a traceback's lines; "" if none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_kit_frame(f.filename)]
    if not frames:
        return ""
    return "".join(traceback.format_list(frames)).rstrip("\n")


def raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised: ``FILE:LINE in FUNCTION`` of its innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


def full_traceback(exc: BaseException) -> str:
    """The whole traceback of ``exc`` (groups, causes and notes included)."""
    return "".join(traceback.format_exception(exc))


def finding_panel(finding: Finding) -> str:
    """The panel of one finding: a violation's rule and message, or who raised what from
    which operation; then where the backend (or the layer) raised it, if its frames are
    known; then the failing steps."""
    if finding.raised_by is None:
        lines = [f"[{finding.rule}] {finding.message}"]
    else:
        lines = [finding.message]
        if finding.frames:
            lines.append(f"where the {finding.raised_by} raised it:\n{finding.frames}")
    lines.extend(finding.steps)
    return "\n".join(lines)


def headline(finding: Finding) -> str:
    """A finding in one line, from the value: a violation's rule and the first line of
    its message, or who raised what from which operation."""
    if finding.raised_by is None:
        return f"[{finding.rule}] {finding.summary}"
    return finding.summary


def rule_headline(report: KitReport, rule: RuleResult) -> str:
    """What made ``rule`` fail or warn, in one line: the `headline` of its first finding
    (the first check's that found it, as the verdict took it), else its first warning;
    for a rule in error, the first line of the kit error's panel; "" when none."""
    if rule.status in ("failed", "xfailed", "warning"):
        for check in report.checks:
            found = [f for f in check.findings if f.rule == rule.id]
            if check.status == "failed" and found:
                return headline(found[0])
        for check in report.checks:
            for warning in check.warned:
                if warning.rule_id == rule.id:
                    return warning.text
    return (rule.first_failure.splitlines() or [""])[0]


def panel_title(result: CheckResult) -> str:
    """The panel's headline: which check broke which rule, or stopped on a kit error."""
    if result.status == "error":
        return f"{result.name} stopped on a kit error (no verdict on the backend)"
    rules = [f.rule for f in result.findings] or [str(result.violated_rule)]
    return f"{result.name} broke {', '.join(rules)}"


def panel_body(
    result: CheckResult,
    *,
    verbose: bool = False,
    more: str = "--verbose",
    also: tuple[str, ...] = (),
) -> str:
    """The panel under its headline: the finding and steps (``detail``), the replay
    command (and ``also``: other commands that replay it), what of the replay the seed
    does not decide (``replay_note``), and the full traceback if ``verbose``, else
    where to ask for it (``more``: the option that shows it)."""
    lines = [result.detail] if result.detail else []
    if result.replay:
        lines.append(f"replay: {result.replay}")
        lines.extend(f"    or: {command}" for command in also)
        if result.replay_note:
            lines.append(f"(the replay may differ: {result.replay_note})")
    first = result.findings[0] if result.findings else None
    if first is not None and first.follows_from:
        lines.insert(0, f"follows from {first.follows_from}: {first.root_evidence}")
    for finding in result.findings[1:]:
        lines.append(f"\nalso found {finding.rule}" + _follows(finding) + ":")
        lines.append(finding.detail)
        if finding.replay:
            lines.append(f"replay: {finding.replay}")
    if result.traceback and verbose:
        lines.append(f"traceback (the kit's frames included):\n{result.traceback.rstrip()}")
    elif result.traceback:
        lines.append(f"(the full traceback, the kit's frames included: {more})")
    return "\n".join(lines)


def _follows(finding: Finding) -> str:
    if finding.follows_from is None:
        return ""
    return f" (follows from {finding.follows_from}: {finding.root_evidence})"


def panel(
    result: CheckResult,
    *,
    verbose: bool = False,
    more: str = "--verbose",
    also: tuple[str, ...] = (),
) -> str:
    """The whole failure panel as plain text: `panel_title`, then `panel_body`."""
    body = panel_body(result, verbose=verbose, more=more, also=also)
    return f"{panel_title(result)}\n{body}"
