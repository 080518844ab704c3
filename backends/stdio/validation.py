"""Checking every stdio message against the published JSON Schema (``--validate-protocol``).

The proxy decodes every reply into typed Structs anyway, so a malformed reply
never passes unnoticed; this adds the published schema, line by line and in
both directions, so that an author sees exactly which message broke which part
of the schema — the same schema they may validate against in their own tests.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Final

from .messages import RESULT_TYPES
from .wire import StdioProtocolError

if TYPE_CHECKING:
    import jsonschema

__all__ = ["SCHEMA_FILE", "MalformedMessageError", "MessageValidator", "load_schema"]

SCHEMA_FILE: Final = "protocol.schema.json"
"""The schema's file name inside `checkpointspec.backends.stdio`."""


class MalformedMessageError(StdioProtocolError):
    """A message does not match the protocol's JSON Schema: a breach of the protocol.

    ``direction`` is ``"request"`` (the kit's line) or ``"reply"`` (the backend's),
    ``number`` its position in that direction of this handle's conversation,
    ``line`` the message and ``problem`` what the schema says about it.
    """

    def __init__(self, direction: str, number: int, line: bytes, problem: str) -> None:
        text = line.decode(errors="replace")
        shown = text if len(text) <= 400 else f"{text[:400]}... ({len(text)} characters)"
        super().__init__(
            f"{direction} #{number} does not match the protocol schema: {problem}\n  {shown}",
            line=line,
        )
        self.direction = direction
        self.number = number
        self.problem = problem


@cache
def load_schema() -> dict[str, object]:
    """The published schema, as shipped in the package."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, object] = json.loads(text)
    return schema


def _validator(pointer: str) -> jsonschema.protocols.Validator:
    import jsonschema  # only when validating: it costs a child's start-up ~80 ms otherwise

    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": pointer, "$defs": schema["$defs"]})


class MessageValidator:
    """Validates one handle's conversation, counting messages in each direction."""

    def __init__(self) -> None:
        self._requests = _validator("#/$defs/Request")
        self._replies = _validator("#/$defs/Reply")
        self._results = {op: _validator(f"#/$defs/results/{op}") for op in RESULT_TYPES}
        self._sent = 0
        self._received = 0

    def check_request(self, line: bytes) -> None:
        """Raise `MalformedMessageError` if the kit's own ``line`` breaks the schema."""
        self._sent += 1
        self._check(self._requests, "request", self._sent, line, None)

    def check_reply(self, line: bytes, op: str) -> None:
        """Raise `MalformedMessageError` if the backend's ``line``, answering ``op``,
        breaks the schema, its ``result`` included."""
        self._received += 1
        self._check(self._replies, "reply", self._received, line, self._results[op])

    @staticmethod
    def _check(
        validator: jsonschema.protocols.Validator,
        direction: str,
        number: int,
        line: bytes,
        result: jsonschema.protocols.Validator | None,
    ) -> None:
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise MalformedMessageError(direction, number, line, f"not JSON: {exc}") from None
        problems = [_describe(e) for e in validator.iter_errors(message)]
        if (
            not problems
            and result is not None
            and isinstance(message, dict)
            and "result" in message
        ):
            problems = [_describe(e, "result") for e in result.iter_errors(message["result"])]
        if problems:
            raise MalformedMessageError(direction, number, line, "; ".join(problems[:3]))


def _describe(error: jsonschema.ValidationError, prefix: str = "") -> str:
    path = "/".join(str(p) for p in (prefix, *error.absolute_path) if p != "")
    return f"at /{path}: {error.message}"
