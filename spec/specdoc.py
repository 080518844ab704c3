"""Render the rule catalog as ``spec/SPEC.md``.

SPEC.md is generated, never edited by hand: ``python -m checkpointspec.spec.specdoc
> spec/SPEC.md`` rewrites it, and a test fails when the file and the catalog differ.
The prose around the rules lives here so that it changes in one place.
"""

from __future__ import annotations

from .capabilities import CAPABILITY_REASONS
from .errors import ReasonCode
from .rules import LEVEL_MEANINGS, RULES
from .validation import MAX_SESSION_ID_LENGTH

__all__ = ["render_spec"]

_REASON_CODES = ", ".join(f"`{code.value}`" for code in ReasonCode)

_INTRO = f"""\
# The checkpointer contract

<!-- Generated from checkpointspec/spec/rules.py by
     `python -m checkpointspec.spec.specdoc > spec/SPEC.md`. Do not edit. -->

A *checkpointer* stores an AI agent session as an append-only log of events.
This document is the contract every backend implements; the kit
(`checkpointspec run`) checks each rule below. Rule ids are stable: reports,
test names and errors refer to them.

## Operations

All operations are async (`checkpointspec.spec.protocol.Checkpointer`):

| operation | result |
|---|---|
| `append(session_id, events, expected_head=None)` | new head |
| `read(session_id, since_seq=0)` | async iterator of `StoredEvent`, seq > since_seq |
| `head(session_id)` | seq of the last event, 0 if none |
| `list_sessions()` | `SessionInfo(id, mtime)`, most recently modified first (capability LIST) |
| `delete(session_id)` | None (capability DELETE) |
| `truncate(session_id, to_seq, expected_head=None)` | to_seq (capability TRUNCATE) |
| `check_integrity()` | `IntegrityReport(ok, detail, problems, repairs)` |
| `close()` | None |
| `generation(session_id)` | generation (capability GENERATION) |

A session id is a non-empty `str` of at most {MAX_SESSION_ID_LENGTH} characters,
without NUL and encodable as UTF-8. Otherwise it is opaque: backends must not
interpret, normalise or fold it.

## Errors, in the order they are checked

1. `CheckpointerClosedError`: the handle was closed.
2. `UnsupportedOperationError`: the operation needs a capability the backend lacks.
3. `InvalidArgumentError`: an argument is outside the contract; nothing was touched.
4. `CheckpointConflictError(session_id, expected, actual, kind)`: `expected_generation`
   (kind `"generation"`), then `expected_head` (kind `"head"`), did not match.
5. `InvalidArgumentError` for `to_seq` beyond the head.

Every error derives from `CheckpointError`; after any of them the store is
unchanged. `CodecError`, `CorruptStoreError`, `SchemaVersionError` and the
retryable `StoreBusyError` report storage trouble; none of them is ever answered
by deleting or rewriting data.

Errors carry their facts as attributes; programs match on those, never on the
message. `InvalidArgumentError` names the `argument`, the `rule_id` the refusal
enforces (ARG-001 to ARG-003, EVENT-002, TRUNC-002; none for a backend's own
options) and a `reason_code` (`checkpointspec.spec.ReasonCode`), one of:
{_REASON_CODES}.

## The ABA hazard

`expected_head` is a version number that can repeat: after `truncate(s, 3)` and two
appends the head is 5 again, and a writer that read head 5 before the truncate
appends on top of a log it has never seen. Backends that support truncation should
declare GENERATION: `generation(session_id)` grows with every truncate that removes
events and every delete, never goes back, and writers pass
`expected_generation=` together with `expected_head=` to be refused when it moved.

## Capabilities

"""

_LEVELS_INTRO = """
## Conformance levels

A run does not only pass or fail: it attains levels. Each MUST rule counts towards
exactly one level, and a level is attained when the kit saw every one of its rules
hold; a rule that also needs a capability the backend does not declare does not
keep a level back. SHOULD rules count towards none. The levels, in report order:

"""

_RULES_INTRO = """
## Rules

Each area of rules is checked by one suite of the kit: `storage` judges the
checkpointer itself, `session` the session layer running on it (`--suite session`),
`langgraph` a LangGraph checkpoint saver (`--langgraph MODULE:FACTORY`), a
contract of its own whose rules are the `LG` areas (docs/langgraph.md),
`openai_session` an OpenAI Agents session store (`--openai-session
MODULE:FACTORY`), a contract of its own whose rules are the `OAS` areas
(docs/openai-agents.md), and `adk_session` a Google ADK session service
(`--adk-session-service MODULE:FACTORY`), whose rules are the `ADK` areas
(docs/adk.md).
"""


def render_spec() -> str:
    """The full text of SPEC.md for the current catalog."""
    lines = [_INTRO]
    for capability, reason in CAPABILITY_REASONS.items():
        lines.append(f"- **{capability.name}** (`{capability.value}`): {reason}.\n")
    lines.append(_LEVELS_INTRO)
    for level, meaning in LEVEL_MEANINGS.items():
        lines.append(f"- `{level.value}`: {meaning}.\n")
    lines.append(_RULES_INTRO)
    area = ""
    for r in RULES:
        this_area = r.id.split("-")[0]
        if this_area != area:
            area = this_area
            lines.append(f"\n### {area} ({r.suite.value} suite)\n")
        counts = f", level `{r.level.value}`" if r.level else ""
        needs = f" — needs {r.capability.name}" if r.capability else ""
        # An anchor per rule, so other documents link a rule itself (SPEC.md#arg-001).
        lines.append(
            f'\n<a id="{r.id.lower()}"></a>**{r.id}** ({r.strength.value}{counts}{needs}) '
            f"— *{r.title}*.  \n{r.statement}\n"
        )
    return "".join(lines)


if __name__ == "__main__":
    print(render_spec(), end="")
