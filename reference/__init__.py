"""The session layer on top of any conforming checkpointer.

What agents do with a session log, built on the `checkpointspec.spec.Checkpointer`
contract alone: the conversation a model sees (`fold`), the points a session
can go back to (`list_checkpoints`), file edits made undoable (`Workspace`),
time travel that survives a crash (`restore`, `recover`) and compaction
(`compact`). The rules are FOLD, CKPT, SNAP, RESTORE and COMPACT in
``spec/SPEC.md``; the pure models in ``checkpointspec.spec`` are their oracle.

These names are the session layer's interface, `checkpointspec.spec.SessionLayer`
(mypy checks below that this package satisfies it); the values they return
(`RestoreResult`, `RestoreProgress`, `RecoveryOutcome`) are the contract's,
re-exported here. This package imports ``spec`` and ``backends`` only.
"""

from typing import TYPE_CHECKING

from ..spec import RecoveryOutcome, RestoreProgress, RestoreResult
from .checkpoints import list_checkpoints
from .compaction import compact
from .fold import fold
from .journal import recover
from .maintenance import maintenance
from .restore import restore
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

if TYPE_CHECKING:
    # The reference is a session layer: mypy --strict fails here when a signature
    # drifts from the interface in the contract.
    from .. import reference as _this_package
    from ..spec import SessionLayer

    _satisfies: SessionLayer = _this_package
