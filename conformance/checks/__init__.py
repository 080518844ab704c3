"""The kit's checks, one module per area of the rule catalog.

`sequence` holds the SEQ rules' checks, `truncation` the TRUNC rules', and so
on; each module lists its checks in a ``CHECKS`` tuple. Nothing is registered
by importing: `checkpointspec.conformance.running.registry` joins the tuples.
"""

from ..engines.run.harness import CheckSkipped, Harness, read_all
from ..engines.run.profiles import DEFAULT_PROFILE, PROFILES, Profile
from .base import Check, CheckFunc, check

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "Check",
    "CheckFunc",
    "CheckSkipped",
    "Harness",
    "Profile",
    "check",
    "read_all",
]
