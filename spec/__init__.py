"""The checkpointer contract as code: types, errors, protocol, rules and model.

Pure: imports only the standard library and msgspec, performs no I/O.
"""

from .capabilities import CAPABILITY_REASONS, Capability
from .codec import Codec
from .context import BackendContext, BackendFactory
from .errors import (
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    CodecError,
    CorruptStoreError,
    InvalidArgumentError,
    SchemaVersionError,
    StoreBusyError,
    UnsupportedOperationError,
)
from .events import (
    EVENT_TYPES,
    AssistantMessage,
    BackgroundCompletion,
    FileSnapshot,
    RepairMessage,
    RuntimeReminder,
    SessionEvent,
    Summary,
    ToolCall,
    ToolResult,
    ToolStarted,
    UserPrompt,
    decode_event,
    encode_event,
)
from .model import ModelEvent, ModelHandle, SpecModel
from .protocol import (
    Checkpointer,
    FaultHook,
    FaultInjectable,
    GenerationalCheckpointer,
    StoreHooks,
)
from .records import IntegrityReport, SessionInfo, StoredEvent
from .rules import RULES, RULES_BY_ID, Rule, Strength, rule
from .validation import (
    MAX_SESSION_ID_LENGTH,
    check_events,
    check_optional_seq,
    check_seq,
    check_session_id,
)

__all__ = [
    "CAPABILITY_REASONS",
    "EVENT_TYPES",
    "MAX_SESSION_ID_LENGTH",
    "RULES",
    "RULES_BY_ID",
    "AssistantMessage",
    "BackendContext",
    "BackendFactory",
    "BackgroundCompletion",
    "Capability",
    "CheckpointConflictError",
    "CheckpointError",
    "Checkpointer",
    "CheckpointerClosedError",
    "Codec",
    "CodecError",
    "CorruptStoreError",
    "FaultHook",
    "FaultInjectable",
    "FileSnapshot",
    "GenerationalCheckpointer",
    "IntegrityReport",
    "InvalidArgumentError",
    "ModelEvent",
    "ModelHandle",
    "RepairMessage",
    "Rule",
    "RuntimeReminder",
    "SchemaVersionError",
    "SessionEvent",
    "SessionInfo",
    "SpecModel",
    "StoreBusyError",
    "StoreHooks",
    "StoredEvent",
    "Strength",
    "Summary",
    "ToolCall",
    "ToolResult",
    "ToolStarted",
    "UnsupportedOperationError",
    "UserPrompt",
    "check_events",
    "check_optional_seq",
    "check_seq",
    "check_session_id",
    "decode_event",
    "encode_event",
    "rule",
]
