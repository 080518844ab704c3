"""The history checker: is a recorded concurrent history explained by the contract?

`checker` is the entry point (`check_history`; its docstring explains the method),
`records` the recorded operations and anomalies, `causes` the precedence that
names each anomaly by its cause and puts the cause first, `chain`, `epochs` and
`realtime` the near-linear fast path, `linearize` the bounded search for
sessions the fast path cannot decide. `linearizable` judges a history of any
`Contract`'s calls against its sequential model.
"""

from .checker import (
    Anomaly,
    Conflicted,
    HistoryVerdict,
    Operation,
    OperationOutcome,
    OpKind,
    Raised,
    Returned,
    Unknown,
    check_history,
    describe,
)

__all__ = [
    "Anomaly",
    "Conflicted",
    "HistoryVerdict",
    "OpKind",
    "Operation",
    "OperationOutcome",
    "Raised",
    "Returned",
    "Unknown",
    "check_history",
    "describe",
]
