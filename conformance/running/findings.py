"""A check's findings: each made once from its evidence, and carried as a value to the report.

`findings_from` is the one place a `Finding` is made, from the evidence a check
met: a `RuleViolation` (its rule, its message, and the failing call, what the
contract expected and what came back, as far as it knows them), or an exception
the backend or the session layer raised, as provenance noted it
(`checkpointspec.conformance.engines.target.provenance.RaisedBy`): it fails the
check's own rule, or the rule of a declared operation that refused. The steps
Hypothesis shrank, the replay command and the reproduce blob go with it, and its
failure panel is rendered from it (`failures.finding_panel`), never parsed back.

The runner makes the findings of the exception a check ended on
(`checkpointspec.conformance.running.runner`); `with_findings` adds those the check
recorded and explored past (`Harness.findings`, see
`checkpointspec.conformance.engines.search.exploration`), each with its own panel and
replay, and the rules the same evidence breaks as well (`RuleViolation.also`), each
shown following from the violation's rule. The check's result leads with its first
finding: its ``violated_rule``, ``detail``, ``replay`` and ``reproduce`` are that one's.
"""

from __future__ import annotations

import msgspec

from ...backends.stdio.wire import StdioProtocolError, quote
from ...spec import Capability, UnsupportedOperationError
from ...spec.divergences import crash_named
from ..checks.base import Check
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness
from ..engines.run.kit_run import KitRun
from ..engines.search.replay import Reproduction, reproduction_of
from ..engines.target.provenance import raised_by
from ..engines.target.witness import Seen, Witness, divergence_noted
from .failures import backend_frames, finding_panel, full_traceback, hypothesis_lines
from .registry import is_session_check
from .report import CheckResult, Finding

__all__ = ["findings_from", "with_findings", "witnessed_findings"]

_REFUSAL_BREAKS: dict[Capability, str] = {
    Capability.DELETE: "DELETE-001",
    Capability.LIST: "LIST-001",
    Capability.TRUNCATE: "TRUNC-001",
    Capability.GENERATION: "GEN-001",
}
"""The rule an operation breaks by refusing (UnsupportedOperationError) although its
capability is declared: that, not the rule of whichever check called it, is broken."""

_PROTOCOL_RULE = "PROTO-001"
"""The rule a backend served over the stdio protocol breaks by breaking the protocol
(`StdioProtocolError`), whichever check's call met the breach."""


def _blamed_rule(check: Check, raised: BaseException) -> str:
    if isinstance(raised, StdioProtocolError):
        return _PROTOCOL_RULE
    if isinstance(raised, UnsupportedOperationError):
        try:
            return _REFUSAL_BREAKS.get(Capability(raised.capability), check.rule_id)
        except ValueError:
            pass
    return check.rule_id


def findings_from(
    check: Check,
    evidence: BaseException,
    raised: BaseException,
    replay: str,
    reproduction: Reproduction | None,
) -> tuple[Finding, ...]:
    """What ``evidence`` found in ``check``: its finding, then one per rule the same
    evidence breaks as well (`RuleViolation.also`).

    ``evidence`` is a `RuleViolation`, or an exception the backend or the session layer
    raised (noted by provenance; raises `ValueError` for one neither raised: that is the
    kit's own error, no finding). ``raised`` is the exception the check's run raised
    around it (Hypothesis' failure, whose notes hold the shrunk steps); ``replay`` the
    command that reruns the check, and ``reproduction`` the failing example it replays
    exactly (``--reproduce``), if Hypothesis found it.
    """
    steps = tuple(hypothesis_lines(raised, evidence))
    rerun = f"{replay} --reproduce {reproduction}" if reproduction is not None else replay
    blob = str(reproduction) if reproduction is not None else None
    if isinstance(evidence, RuleViolation):
        made = Finding(
            rule=evidence.rule_id,
            check=check.name,
            summary=_first_line(evidence.message),
            replay=rerun,
            reproduce=blob,
            message=evidence.message,
            call=evidence.call,
            expected=evidence.expected,
            got=evidence.got,
            steps=steps,
        )
    else:
        noted = raised_by(evidence)
        if noted is None:
            raise ValueError(f"neither the backend nor the session layer raised {evidence!r}")
        name = type(evidence).__name__
        message = f"the {noted.raiser} raised {name} from {noted.operation}: {evidence}"
        rule = _blamed_rule(check, evidence)
        operation = noted.operation.split(" ", 1)[0]  # "append in a worker process"
        crashed = crash_named(operation, name) if noted.raiser == "backend" else None
        made = Finding(
            rule=rule,
            check=check.name,
            summary=_first_line(message),
            replay=rerun,
            reproduce=blob,
            message=message,
            raised_by=noted.raiser,
            call=noted.operation,
            expected=_expected_reply(evidence),
            got=_got(evidence),
            steps=steps,
            frames=backend_frames(evidence),
        )
        if crashed is not None and crashed[0] != rule:
            # An operation's crash where the check's own rule was at stake: the same
            # crash seen plainly elsewhere is the defect (`roots.resolved`).
            made = msgspec.structs.replace(made, shape=crashed[1], otherwise=crashed)
    if isinstance(evidence, RuleViolation) and evidence.shape:
        made = msgspec.structs.replace(made, shape=evidence.shape, otherwise=evidence.otherwise)
    seen = divergence_noted(evidence) or divergence_noted(raised)
    root: Finding | None = None
    if (
        seen is not None
        and not isinstance(evidence, RuleViolation)
        and seen.divergence.got == f"raised {type(evidence).__name__}: {evidence}"
    ):
        # What the backend raised is the divergence itself: one finding, the table's.
        made = msgspec.structs.replace(made, rule=seen.divergence.rule)
    if seen is not None and seen.divergence.rule == made.rule:
        made = _named_by(made, seen)
    elif seen is not None:
        # The check's own steps left the contract before its assertion did: the
        # defect is the divergence's, and the check's rule one of its symptoms.
        root = _named_by(
            msgspec.structs.replace(
                made,
                rule=seen.divergence.rule,
                summary=f"{seen.divergence.call} {seen.divergence.got}",
                message=f"{seen.divergence.call} {seen.divergence.got}; the contract allows: "
                f"{seen.divergence.expected}",
                raised_by=None,
                frames="",
            ),
            seen,
        )
        made = msgspec.structs.replace(
            made,
            follows_from=seen.divergence.rule,
            root_evidence=f"its own steps left the contract first, at {seen.evidence()}",
        )
    finding = msgspec.structs.replace(made, detail=finding_panel(made))
    also = evidence.also if isinstance(evidence, RuleViolation) else ()
    led = (msgspec.structs.replace(root, detail=finding_panel(root)),) if root else ()
    return (*led, finding, *_same_evidence(finding, also))


def _named_by(finding: Finding, seen: Seen) -> Finding:
    """``finding`` with the divergence's shape, and its call, expected answer and answer
    where the finding's evidence did not know them."""
    d = seen.divergence
    return msgspec.structs.replace(
        finding,
        shape=d.shape,
        call=finding.call or d.call,
        expected=finding.expected or d.expected,
        got=finding.got or d.got,
        otherwise=d.otherwise,
    )


def witnessed_findings(check: Check, witness: Witness, replay: str) -> tuple[Finding, ...]:
    """A finding for each divergence ``witness`` met in ``check``'s calls: the check's own
    evidence, whether or not its assertions failed."""
    made: list[Finding] = []
    for seen in witness.every:
        d = seen.divergence
        message = f"{d.call} {d.got}; the contract allows: {d.expected}"
        finding = Finding(
            rule=d.rule,
            check=check.name,
            summary=_first_line(message),
            replay=replay,
            message=message,
            call=d.call,
            expected=d.expected,
            got=d.got,
            shape=d.shape,
            otherwise=d.otherwise,
        )
        made.append(msgspec.structs.replace(finding, detail=finding_panel(finding)))
    return tuple(made)


def _expected_reply(raised: BaseException) -> str:
    """What the protocol expected where a stdio backend broke it ("" for other evidence)."""
    if isinstance(raised, StdioProtocolError) and raised.expected_id is not None:
        return f"one well-formed reply with id {raised.expected_id}"
    return ""


def _got(raised: BaseException) -> str:
    """What came back: the line that broke the protocol, or the exception raised."""
    if isinstance(raised, StdioProtocolError) and raised.line is not None:
        return quote(raised.line)
    return f"{type(raised).__name__}: {raised}"


def _first_line(message: str) -> str:
    return (message.splitlines() or [""])[0]


def _same_evidence(finding: Finding, also: tuple[str, ...]) -> list[Finding]:
    """The findings of the rules in ``also``: the same evidence breaks them, so each
    follows from ``finding``'s rule, and shares its panel and replay."""
    return [
        msgspec.structs.replace(
            finding,
            rule=rule,
            follows_from=finding.rule,
            root_evidence=f"the same evidence breaks it: {finding.summary}",
        )
        for rule in also
    ]


def with_findings(
    result: CheckResult, check: Check, run: KitRun, harness: Harness | None
) -> CheckResult:
    """``result`` with every finding of the check: those it recorded and explored past
    (`Harness.findings`), then those of the exception it ended on (``result.findings``,
    made by the runner), then one for each divergence its witness met
    (`witnessed_findings`), the first per rule and divergence shape; its headline is
    the first. A check that recorded any is ``failed``, whatever its last round did:
    the evidence stands."""
    explored = harness.explored if harness is not None else None
    if explored is not None:
        result = msgspec.structs.replace(
            result,
            rounds=explored.rounds,
            explored=explored.complete and result.status in ("passed", "failed"),
        )
    recorded: list[Finding] = []
    if harness is not None and harness.findings:
        replay = run.replay_command(check.name, session_check=is_session_check(check))
        recorded = [
            finding
            for found in harness.findings
            for finding in findings_from(
                check, found.violation, found.raised, replay, reproduction_of(found.raised)
            )
        ]
    witnessed: tuple[Finding, ...] = ()
    if harness is not None:
        replay = run.replay_command(check.name, session_check=is_session_check(check))
        witnessed = witnessed_findings(check, harness.witness, replay)
    # One finding per rule and divergence shape: distinct divergences of one rule are
    # distinct defects, all kept; the same one met again is not. What the witness saw
    # comes last: a finding of the check's own with the same divergence has its steps.
    first_per_defect: dict[tuple[str, str, str | None], Finding] = {}
    for finding in [*recorded, *result.findings, *witnessed]:
        key = (finding.rule, finding.shape, finding.follows_from)
        first_per_defect.setdefault(key, finding)
    findings = tuple(first_per_defect.values())
    if not findings:
        return result
    first = findings[0]
    kit_error = f"; then {result.reason}" if result.status == "error" else ""
    return msgspec.structs.replace(
        result,
        status="failed",
        violated_rule=first.rule,
        detail=first.detail,
        replay=first.replay,
        reproduce=first.reproduce,
        replay_note=check.replay_note,
        reason=f"{len(findings)} finding(s){kit_error}" if len(findings) > 1 or kit_error else "",
        findings=findings,
        traceback=result.traceback
        or (full_traceback(harness.findings[0].raised) if harness and harness.findings else ""),
    )
