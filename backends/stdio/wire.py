"""The client's end of the stdio protocol's wire: one implementation for every client.

`StdioCheckpointer` (`checkpointspec.backends.stdio.client`, the proxy to a backend
in another process) and the kit's own worker client
(`checkpointspec.conformance.engines.processes.client`) speak the same wire through
this module; what each adds is what it does with a reply:

| name | what |
|---|---|
| `Lines` | the framing: bytes as they come from the pipe, cut into reply lines |
| `Conversation` | request ids, the request in flight, and each reply line decoded and matched to it |
| `to_exception` | an error reply as the spec's exception (`StdioBackendError` for another type) |
| `StdioProtocolError` | the other end broke the protocol |

No I/O happens here: each client reads its pipe its own way (a thread waiting in
``select``, an event loop), with a deadline on every reply line, and feeds what it
read to `Lines` (through `checkpointspec.backends.stdio.child.ReplyLines`).
"""

from __future__ import annotations

from typing import Final, Generic, Protocol, TypeVar, cast

import msgspec

from ...spec import (
    CheckpointConflictError,
    CheckpointerClosedError,
    CorruptStoreError,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    SessionLockedError,
    StoreBusyError,
    UnsupportedOperationError,
)
from .messages import ERROR_ATTRIBUTES, ErrorBody, Reply, Resume

__all__ = [
    "Conversation",
    "Lines",
    "StdioBackendError",
    "StdioProtocolError",
    "quote",
    "to_exception",
]


class StdioProtocolError(Exception):
    """The child broke the protocol: a malformed line, a reply to another request or to
    none, an unknown capability, another protocol version, or it exited or fell silent
    mid-conversation.

    Not a contract error: the kit reports it as a breach of the protocol (PROTO-001),
    never as the rule of the check that happened to be running. ``line`` is the line
    received that breaks it (None when it is no line: an exit, a silence, a bad
    start), ``expected_id`` the id of the request in flight (None when none was).
    The message quotes both, and the end of the child's stderr where it tells why.
    """

    def __init__(
        self, message: str, *, line: bytes | None = None, expected_id: int | None = None
    ) -> None:
        super().__init__(message)
        self.line = line
        self.expected_id = expected_id


class StdioBackendError(Exception):
    """The child answered with an error type outside the contract (its own crash).

    ``error_type`` is the name it gave, ``message`` its text.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class Lines:
    """The framing: one JSON object per line. Bytes are fed as they come from the
    pipe; `next` gives each complete line, without its newline."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk

    def next(self) -> bytes | None:
        """The next complete line, or None until one has been fed whole."""
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line


class _Numbered(Protocol):
    @property
    def id(self) -> int: ...


_Interim = TypeVar("_Interim", bound=_Numbered)
_Request = TypeVar("_Request", bound=msgspec.Struct)

_decode_reply: Final = msgspec.json.Decoder(Reply).decode


class Conversation(Generic[_Interim]):
    """Request ids and the request in flight of one conversation; every reply line
    is decoded here and matched to that request.

    Ids count up from ``last_id`` (the one a client sent last, if any). A client
    whose other end sends interim replies of another shape (the kit's workers)
    names their type as ``interim``: a line that is no `Reply` is decoded as one.
    """

    def __init__(self, last_id: int = 0, interim: type[_Interim] | None = None) -> None:
        self.last_id = last_id
        self.id = 0
        """The id of the request in flight (0 before the first)."""
        self.op = ""
        """The ``op`` of the request in flight ("" before the first)."""
        self._interim = msgspec.json.Decoder(interim) if interim is not None else None

    def next_id(self) -> int:
        """An id no request of this conversation has had."""
        self.last_id += 1
        return self.last_id

    def begin(self, request: msgspec.Struct) -> None:
        """``request``, numbered already, is the one in flight now."""
        self.id = cast(_Numbered, request).id
        self.op = str(type(request).__struct_config__.tag)

    def number(self, request: _Request) -> _Request:
        """``request`` under an id of its own, now the request in flight; a `Resume`
        goes under the id of the request in flight, which it resumes."""
        if isinstance(request, Resume):
            return cast(_Request, Resume(self.id))
        numbered = msgspec.structs.replace(request, id=self.next_id())
        self.begin(numbered)
        return numbered

    @staticmethod
    def encode(request: msgspec.Struct) -> bytes:
        """``request`` as its line, without the newline."""
        return msgspec.json.encode(request)

    def decode(self, line: bytes) -> Reply | _Interim:
        """``line`` as a reply to the request in flight. `StdioProtocolError` for a
        line that is no reply, a reply with other than exactly one of ``result``,
        ``error``, ``events`` and ``fault``, or a reply to another request."""
        try:
            reply = _decode_reply(line)
        except msgspec.DecodeError as exc:
            if self._interim is None or not isinstance(exc, msgspec.ValidationError):
                raise self._breach(f"malformed reply: {exc}", line) from None
            try:
                interim = self._interim.decode(line)
            except msgspec.DecodeError:
                raise self._breach(f"malformed reply: {exc}", line) from None
            self._match(interim.id, line)
            return interim
        present = [
            name
            for name, value in (
                ("result", reply.result if bytes(reply.result) else None),
                ("error", reply.error),
                ("events", reply.events),
                ("fault", reply.fault),
            )
            if value is not None
        ]
        if len(present) != 1:
            raise self._breach(
                "a reply has exactly one of result, error, events, fault; "
                f"this one has {', '.join(present) or 'none'}",
                line,
            )
        self._match(reply.id, line)
        return reply

    def _match(self, reply_id: int, line: bytes) -> None:
        if reply_id == self.id:
            return
        if 0 <= reply_id < self.id:
            raise self._breach(
                f"an unsolicited reply for id {reply_id}, a request answered already, "
                f"while request {self.id} waits",
                line,
            )
        raise self._breach(
            f"a reply for id {reply_id}, which no request has had, while request {self.id} waits",
            line,
        )

    def _breach(self, what: str, line: bytes) -> StdioProtocolError:
        """The error for ``line``, received while the request in flight waits."""
        return StdioProtocolError(f"{what}: {quote(line)}", line=line, expected_id=self.id)


def quote(raw: bytes | msgspec.Raw, limit: int = 400) -> str:
    """``raw`` as text for a message, cut short after ``limit`` characters."""
    text = bytes(raw).decode(errors="replace")
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def to_exception(body: ErrorBody, raw: bytes) -> Exception:
    """The spec's exception for a typed error reply, or `StdioBackendError` for another type."""
    spec = ERROR_ATTRIBUTES.get(body.type)
    if spec is None:
        return StdioBackendError(body.type, body.message)
    required, _optional = spec
    missing = [name for name in required if getattr(body, name) is None]
    if missing:
        return StdioProtocolError(
            f"a {body.type} reply lacks {', '.join(missing)}: {quote(raw)}", line=raw
        )
    match body.type:
        case "InvalidArgumentError":
            code: ReasonCode | None = None
            if body.reason_code is not None:
                try:
                    code = ReasonCode(body.reason_code)
                except ValueError:
                    known = ", ".join(c.value for c in ReasonCode)
                    return StdioProtocolError(
                        f"unknown reason_code {body.reason_code!r} (known: {known}): {quote(raw)}",
                        line=raw,
                    )
            return InvalidArgumentError(
                cast(str, body.argument), cast(str, body.reason), code, body.rule_id
            )
        case "CheckpointConflictError":
            return CheckpointConflictError(
                cast(str, body.session_id),
                cast(int, body.expected),
                cast(int, body.actual),
                body.kind or "head",
            )
        case "UnsupportedOperationError":
            return UnsupportedOperationError(cast(str, body.operation), cast(str, body.capability))
        case "CheckpointerClosedError":
            return CheckpointerClosedError(cast(str, body.operation))
        case "CorruptStoreError":
            return CorruptStoreError(
                body.session_id, cast(str, body.location), cast(str, body.detail)
            )
        case "SchemaVersionError":
            return SchemaVersionError(cast(int, body.found), cast(int, body.supported))
        case "StoreBusyError":
            return StoreBusyError(cast(str, body.operation), cast(float, body.waited_seconds))
        case "SessionLockedError":
            return SessionLockedError(cast(str, body.session_id), cast(str, body.operation))
    raise AssertionError(body.type)  # ERROR_ATTRIBUTES and this match name the same types
