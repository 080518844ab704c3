"""The checks the kit runs: one tuple, in the catalog's order of areas.

The tuple is written out here, module by module, so that what runs is visible
in one place and a caller can pass any other selection to the runner.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..checks import (
    Check,
    appending,
    arguments,
    capabilities,
    closing,
    codec,
    deletion,
    durability,
    events,
    generation,
    handles,
    head,
    identity,
    integrity,
    kill,
    listing,
    maintenance,
    processes,
    reading,
    schema,
    sequence,
    truncation,
)

__all__ = ["ALL_CHECKS", "CHECKS_BY_NAME", "UnknownCheckError", "select_checks"]

ALL_CHECKS: tuple[Check, ...] = (
    *sequence.CHECKS,
    *events.CHECKS,
    *appending.CHECKS,
    *arguments.CHECKS,
    *identity.CHECKS,
    *reading.CHECKS,
    *head.CHECKS,
    *listing.CHECKS,
    *deletion.CHECKS,
    *truncation.CHECKS,
    *capabilities.CHECKS,
    *generation.CHECKS,
    *handles.CHECKS,
    *closing.CHECKS,
    *durability.CHECKS,
    *kill.CHECKS,
    *processes.CHECKS,
    *maintenance.CHECKS,
    *integrity.CHECKS,
    *schema.CHECKS,
    *codec.CHECKS,
)
"""Every check of the kit."""

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in ALL_CHECKS}
"""`ALL_CHECKS` by check name (``RULE-ID::function_name``)."""


class UnknownCheckError(LookupError):
    """A selection (``--only``) matched no check."""


def select_checks(only: Iterable[str] = (), checks: Iterable[Check] = ALL_CHECKS) -> list[Check]:
    """The checks whose name or one of whose rules starts with an entry of ``only``.

    All of ``checks`` when ``only`` is empty. Raises `UnknownCheckError` when a
    non-empty selection matches nothing.
    """
    pool = list(checks)
    wanted = tuple(only)
    if not wanted:
        return pool
    selected = [c for c in pool if any(c.name.startswith(w) or w in c.rules for w in wanted)]
    if not selected:
        raise UnknownCheckError(f"no check matches {', '.join(wanted)}")
    return selected
