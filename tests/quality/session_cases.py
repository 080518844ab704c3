"""How the session suite is run to reject each deliberately broken session layer.

Every layer of `broken_session` names the rule it breaks in ``violates``. A
`SessionCase` says how to show it: the session checks to run (``--only``), the
backend under them, the seeds, and, for a run too costly for the default test
run, why it only runs with the ``slow`` ones. The contract
(``test_session_meta_contract.py``): every MUST rule of the session suite is
broken by some case's layer, or waits in `PENDING_RULES` for the work that
brings its case; every case's run rejects its layer naming that rule
(``test_kit_catches_session_bugs.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from broken_session import BROKEN_LAYERS, Layer

__all__ = ["FAST", "PENDING_RULES", "SEED", "SESSION_CASES", "SessionCase"]

SEED = 1729


class SessionCase(NamedTuple):
    """One broken session layer, the checks that must reject it, and how they run."""

    layer: type[Layer]
    checks: tuple[str, ...]
    seeds: tuple[int, ...] = (SEED,)
    backend: str = "memory"
    slow: str | None = None
    """Why the run belongs to the ``slow`` tests; None for the default run."""

    @property
    def name(self) -> str:
        return self.layer.__name__

    @property
    def rule(self) -> str:
        """The rule the kit must report failed."""
        return self.layer.violates

    @property
    def target(self) -> str:
        """What ``--session-layer`` loads: ``module:Class``."""
        return f"{self.layer.__module__}:{self.layer.__qualname__}"


FAST = frozenset(
    {
        "FoldKeepsResultsApart",
        "WritesBeforeRecording",
        "TruncatesFirst",
        "IgnoresCancelInPersistence",
    }
)
"""Cases the default test run runs (one per kind of check); the rest run with ``slow``.
Each run takes well under a second; together they still add up."""

_ON_DISK = {"RecoverAlwaysRollsBack": "file"}
"""Layers whose rule needs a DURABLE backend (killed restores): they run on the file backend."""

SESSION_CASES: tuple[SessionCase, ...] = tuple(
    SessionCase(
        layer,
        (f"{layer.violates}::",),
        backend=_ON_DISK.get(name, "memory"),
        slow=None
        if name in FAST
        else (
            "kills restores in child processes"
            if name in _ON_DISK
            else "one of many cheap runs: the default run keeps a handful"
        ),
    )
    for name, layer in BROKEN_LAYERS.items()
)
"""One case per layer of `broken_session`, each running the checks named after its rule."""

PENDING_RULES: dict[str, str] = {}
"""Session MUST rules whose broken layer is brought by other work, and which."""
