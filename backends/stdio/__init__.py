"""A checkpointer in another process, in any language, over a JSON-lines protocol.

``checkpointspec run --process 'node my-backend.js'`` runs the whole kit through
`StdioCheckpointer`, one child process per handle. The protocol's messages are
in `messages` (and as a JSON Schema, ``protocol.schema.json``); docs/stdio-protocol.md
is the author's guide. `serve` is the other end, in Python: it serves any
Python checkpointer over stdio, which is how the protocol is tested against the
reference backends, and it is the server inside the kit's own worker processes
(which add requests of the kit's own, which neither `messages` nor the schema knows).
`wire` is the client's end of the wire (framing, request ids, reply matching,
error replies), the one both `StdioCheckpointer` and the kit's worker client use;
`child` is their one way with the child process at its other end (a deadline on
every reply line, an exit told from a hang by end of file, the tail of its stderr
file, and how it is ended).
"""

from .client import (
    PROCESS_OPTION,
    VALIDATE_OPTION,
    StdioBackendError,
    StdioCheckpointer,
    StdioProtocolError,
    make,
)
from .messages import PROTOCOL_VERSION, protocol_schema
from .validation import MalformedMessageError, load_schema

__all__ = [
    "PROCESS_OPTION",
    "PROTOCOL_VERSION",
    "VALIDATE_OPTION",
    "MalformedMessageError",
    "StdioBackendError",
    "StdioCheckpointer",
    "StdioProtocolError",
    "load_schema",
    "make",
    "protocol_schema",
]
