"""The session layer on top of any conforming checkpointer.

What agents do with a session log, built on the `checkpointspec.spec.Checkpointer`
contract alone: the conversation a model sees (`fold`), the points a session
can go back to (`list_checkpoints`), file edits made undoable (`Workspace`),
time travel that survives a crash (`restore`, `recover`) and compaction
(`compact`). The rules are FOLD, CKPT, SNAP, RESTORE and COMPACT in
``spec/SPEC.md``; the pure models in ``checkpointspec.spec`` are their oracle.
This package imports ``spec`` and ``backends`` only.
"""

from .checkpoints import list_checkpoints
from .compaction import compact
from .fold import fold
from .maintenance import maintenance
from .restore import RecoveryOutcome, RestoreProgress, RestoreResult, recover, restore
from .summarizers import ExtractiveSummarizer
from .workspace import RESERVED_DIR, Workspace

__all__ = [
    "RESERVED_DIR",
    "ExtractiveSummarizer",
    "RecoveryOutcome",
    "RestoreProgress",
    "RestoreResult",
    "Workspace",
    "compact",
    "fold",
    "list_checkpoints",
    "maintenance",
    "recover",
    "restore",
]
