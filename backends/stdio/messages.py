"""The stdio protocol's messages, as msgspec Structs, and their JSON Schema.

A backend in any language serves one handle on one store over its stdin and
stdout: the kit writes one request per line, the backend answers each with one
or more reply lines. docs/stdio-protocol.md is the author's description;
``protocol.schema.json`` next to this module is the schema every message must
match, generated from these Structs by `protocol_schema` (a test keeps the two
equal: ``python -m checkpointspec.backends.stdio > protocol.schema.json``).

Requests are a union tagged by ``op``; every one carries the ``id`` its replies
repeat. Replies are one object with ``id`` and exactly one of ``result``,
``error``, ``events`` (a chunk of a read, before its ``result``) or ``fault``
(the backend reached a fault point and waits for ``resume``).

The kit's own worker processes speak this protocol too, with a few requests of
their own: those are the kit's extension, not the protocol's, and neither this
module nor the schema knows them.
"""

from __future__ import annotations

from typing import Any, Final, Literal, cast

import msgspec

from ...spec import SessionEvent, StoredEvent

__all__ = [
    "CAPABILITIES",
    "ERROR_ATTRIBUTES",
    "PROTOCOL_VERSION",
    "RESULT_TYPES",
    "AcquireMaintenance",
    "Append",
    "CheckIntegrity",
    "Close",
    "DamageStore",
    "Delete",
    "ErrorBody",
    "FaultReports",
    "Generation",
    "Head",
    "Hello",
    "HelloResult",
    "IntegrityResult",
    "ListSessions",
    "MarkNewerSchema",
    "Read",
    "ReadResult",
    "ReleaseMaintenance",
    "Reply",
    "Request",
    "Resume",
    "SessionEntry",
    "Truncate",
    "protocol_schema",
]

PROTOCOL_VERSION: Final = 1
"""The version this kit speaks. A backend answers ``hello`` with the version it speaks;
the kit refuses any other (a later version may add requests, fields or error types)."""

CAPABILITIES: Final[tuple[str, ...]] = (
    "delete",
    "list",
    "truncate",
    "durable",
    "multi_process",
    "generation",
    "maintenance",
)
"""What a backend may declare in its ``hello`` result: `Capability` values, except
``codec``, which is a Python object the kit cannot hand to another process."""


class _Request(msgspec.Struct, frozen=True, tag_field="op", forbid_unknown_fields=True):
    id: int


class Hello(_Request, frozen=True, tag="hello"):
    """The first request: which store to open (``path``), with ``options`` from the
    command line. Answered with a `HelloResult`."""

    protocol: int
    path: str
    options: dict[str, str] = {}


class MarkNewerSchema(_Request, frozen=True, tag="mark_newer_schema"):
    """Instead of ``hello``, as a process's only request (backends that declared
    ``store_hooks``): make the closed store at ``path`` look written by a newer,
    incompatible format (SCHEMA-001). The result is null."""

    protocol: int
    path: str
    options: dict[str, str] = {}


class DamageStore(_Request, frozen=True, tag="damage_store"):
    """Instead of ``hello``, as a process's only request (backends that declared
    ``store_hooks``): damage stored event data of the closed store at ``path`` in a
    way the backend promises to detect (INTEG-002). The result says what was damaged."""

    protocol: int
    path: str
    options: dict[str, str] = {}


class Append(_Request, frozen=True, tag="append"):
    """``append``; the result is the new head."""

    session_id: str
    events: list[SessionEvent]
    expected_head: int | None = None
    expected_generation: int | None = None


class Read(_Request, frozen=True, tag="read"):
    """``read``: zero or more ``events`` replies, then the result, a `ReadResult`."""

    session_id: str
    since_seq: int = 0


class Head(_Request, frozen=True, tag="head"):
    """``head``; the result is the head."""

    session_id: str


class ListSessions(_Request, frozen=True, tag="list_sessions"):
    """``list_sessions``; the result is a list of `SessionEntry`."""


class Delete(_Request, frozen=True, tag="delete"):
    """``delete``; the result is null."""

    session_id: str


class Truncate(_Request, frozen=True, tag="truncate"):
    """``truncate``; the result is ``to_seq``."""

    session_id: str
    to_seq: int
    expected_head: int | None = None
    expected_generation: int | None = None


class Generation(_Request, frozen=True, tag="generation"):
    """``generation`` (GENERATION backends); the result is the generation."""

    session_id: str


class AcquireMaintenance(_Request, frozen=True, tag="acquire_maintenance"):
    """``acquire_maintenance`` (MAINTENANCE backends); the result is null."""

    session_id: str


class ReleaseMaintenance(_Request, frozen=True, tag="release_maintenance"):
    """``release_maintenance`` (MAINTENANCE backends); the result is null."""

    session_id: str


class CheckIntegrity(_Request, frozen=True, tag="check_integrity"):
    """``check_integrity``; the result is an `IntegrityResult`."""


class FaultReports(_Request, frozen=True, tag="fault_reports"):
    """Start (or stop) reporting fault points: while enabled, a backend that declared
    ``fault_points`` sends a ``fault`` reply on reaching one and waits for `Resume`."""

    enabled: bool


class Resume(_Request, frozen=True, tag="resume"):
    """Carry on from the fault point reported for request ``id``. Not answered."""


class Close(_Request, frozen=True, tag="close"):
    """``close``; the result is null. The kit then closes stdin; the backend exits."""


Request = (
    Hello
    | MarkNewerSchema
    | DamageStore
    | Append
    | Read
    | Head
    | ListSessions
    | Delete
    | Truncate
    | Generation
    | AcquireMaintenance
    | ReleaseMaintenance
    | CheckIntegrity
    | FaultReports
    | Resume
    | Close
)


class HelloResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the backend is: the protocol version it speaks, its capabilities (from
    `CAPABILITIES`), the fault points it reports, whether it answers the store hooks
    (`MarkNewerSchema`, `DamageStore`), whether after ``close`` it takes another
    ``hello`` (``reusable``) instead of exiting, a name for reports, and the store
    files it maps writable but rebuilds on open (``scratch_files``: glob pattern to
    reason, as `checkpointspec.spec.ScratchFiles` declares them), and the requests
    it answers itself because the backend behind it has no such operation
    (``emulated``: request ``op`` to why; a bridge's, e.g. the lite-agent bridge
    answering ``close`` for a checkpointer without ``close()``; absent: none), and
    whether it answers each request before it reads the next, so that the kit may
    send several reads without waiting for each one's answer (``pipelined``)."""

    protocol: int
    capabilities: list[str]
    fault_points: list[str] = []
    store_hooks: bool = False
    reusable: bool = False
    name: str | None = None
    scratch_files: dict[str, str] = {}
    emulated: dict[str, str] = {}
    pipelined: bool = False


class ReadResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The end of a read: how many events its ``events`` replies carried in all."""

    count: int


class SessionEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One session of ``list_sessions``: ``mtime`` is seconds since the epoch."""

    id: str
    mtime: float


class IntegrityResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``check_integrity``'s report (`IntegrityReport`)."""

    ok: bool
    detail: str
    problems: list[str] = []
    repairs: list[str] = []


class ErrorBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A typed error: ``type`` is the spec's error class name, ``message`` free text,
    and the class's attributes (`ERROR_ATTRIBUTES`) as fields. Any other ``type``
    (a crash of the backend's own code) reaches the kit as an exception outside the
    contract."""

    type: str
    message: str = ""
    session_id: str | None = None
    expected: int | None = None
    actual: int | None = None
    kind: Literal["head", "generation"] | None = None
    operation: str | None = None
    capability: str | None = None
    argument: str | None = None
    reason: str | None = None
    reason_code: str | None = None
    rule_id: str | None = None
    location: str | None = None
    detail: str | None = None
    found: int | None = None
    supported: int | None = None
    waited_seconds: float | None = None


ERROR_ATTRIBUTES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "InvalidArgumentError": (("argument", "reason"), ("reason_code", "rule_id")),
    "CheckpointConflictError": (("session_id", "expected", "actual"), ("kind",)),
    "UnsupportedOperationError": (("operation", "capability"), ()),
    "CheckpointerClosedError": (("operation",), ()),
    "CorruptStoreError": (("location", "detail"), ("session_id",)),
    "SchemaVersionError": (("found", "supported"), ()),
    "StoreBusyError": (("operation", "waited_seconds"), ()),
    "SessionLockedError": (("session_id", "operation"), ()),
}
"""Per spec error type: the attributes an error body must carry, and those it may."""


class Reply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line from the backend: ``id`` and exactly one of the other fields."""

    id: int
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: ErrorBody | None = None
    events: list[StoredEvent] | None = None
    fault: str | None = None


RESULT_TYPES: Final[dict[str, object]] = {
    "hello": HelloResult,
    "mark_newer_schema": None,
    "damage_store": str,
    "append": int,
    "read": ReadResult,
    "head": int,
    "list_sessions": list[SessionEntry],
    "delete": None,
    "truncate": int,
    "generation": int,
    "acquire_maintenance": None,
    "release_maintenance": None,
    "check_integrity": IntegrityResult,
    "fault_reports": None,
    "close": None,
}
"""The type of ``result`` in the reply to each request."""


def _by_tag(node: object) -> object:
    """Rewrite msgspec's ``anyOf`` + ``discriminator`` (which JSON Schema validators
    ignore, so an error inside one variant is reported as "not valid under any")
    into an enum of tags plus ``if``/``then`` per tag: a validator then names the
    field that is wrong inside the variant the tag selects."""
    if isinstance(node, list):
        return [_by_tag(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _by_tag(value) for key, value in node.items()}
    discriminator = node.pop("discriminator", None)
    if not isinstance(discriminator, dict):
        return node
    tag = discriminator["propertyName"]
    mapping: dict[str, str] = discriminator["mapping"]
    del node["anyOf"]
    node.update(
        {
            "type": "object",
            "required": [tag],
            "properties": {tag: {"enum": sorted(mapping)}},
            "allOf": [
                {"if": {"properties": {tag: {"const": value}}}, "then": {"$ref": ref}}
                for value, ref in sorted(mapping.items())
            ],
        }
    )
    return node


def protocol_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of every message, published as ``protocol.schema.json``.

    ``$defs/Request`` matches a line the kit writes, ``$defs/Reply`` a line the
    backend writes; ``$defs/results`` holds the ``result`` schema per ``op``.
    """
    (request, _reply, *results), defs = msgspec.json.schema_components(
        [Request, Reply, *(t for t in RESULT_TYPES.values() if t is not None)],
        ref_template="#/$defs/{name}",
    )
    defs = cast(dict[str, Any], _by_tag(dict(defs)))
    defs["Request"] = _by_tag(request)
    reply_def = defs["Reply"]
    reply_props = reply_def["properties"]
    reply_props["result"] = {"description": "the result; its schema per op is in $defs/results"}
    reply_props["error"] = {"$ref": "#/$defs/ErrorBody"}
    reply_props["events"] = {"type": "array", "items": {"$ref": "#/$defs/StoredEvent"}}
    reply_props["fault"] = {"type": "string"}
    reply_def["minProperties"] = 2
    reply_def["maxProperties"] = 2
    defs["ErrorBody"]["properties"]["type"]["description"] = (
        "one of " + ", ".join(ERROR_ATTRIBUTES) + ", or any other name for an error "
        "outside the contract"
    )
    defs["HelloResult"]["properties"]["capabilities"]["items"] = {"enum": list(CAPABILITIES)}
    result_defs: dict[str, object] = {}
    iterator = iter(results)
    for op, kind in RESULT_TYPES.items():
        result_defs[op] = {"type": "null"} if kind is None else next(iterator)
        if kind is int:  # a head, a seq or a generation: never negative
            result_defs[op] = {"type": "integer", "minimum": 0}
    defs["results"] = result_defs
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://checkpointspec.dev/stdio-protocol/v{PROTOCOL_VERSION}.json",
        "title": f"checkpointspec stdio protocol, version {PROTOCOL_VERSION}",
        "description": (
            "One JSON object per line. The kit writes a Request, the backend answers "
            "with Reply lines of the same id. See docs/stdio-protocol.md."
        ),
        "oneOf": [
            {"$ref": "#/$defs/Request"},
            {"$ref": "#/$defs/Reply"},
        ],
        "$defs": defs,
    }
