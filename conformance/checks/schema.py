"""Checks of the SCHEMA rules: a store written by a newer schema version is refused untouched."""

from __future__ import annotations

from ...spec import SchemaVersionError
from ..engines.contract.outcomes import Err, run_backend
from ..engines.run.harness import Harness
from ._support import changed_files, expect, fingerprint, hooks_of
from .base import check

__all__ = ["CHECKS"]


@check("SCHEMA-001", hooks=True)
async def newer_store_is_refused_untouched(h: Harness) -> None:
    """SCHEMA-001: a store marked by a newer format raises SchemaVersionError and keeps every byte."""
    cp = await h.open()
    await cp.append("s", [h.prompt("written by today's version")])
    await cp.close()
    (await hooks_of(h)).mark_newer_schema(h.path)
    # Whatever the hook did, the store it left is what the backend must not touch:
    # every byte under the directory is compared, not what the hook says it marked.
    before = fingerprint(h.path)

    async def open_and_use() -> object:
        newer = await h.open()
        return await newer.append("s", [h.prompt("must not land")])

    outcome = await run_backend(open_and_use)
    expect(
        isinstance(outcome, Err) and isinstance(outcome.error, SchemaVersionError),
        "SCHEMA-001",
        f"opening a newer store gave {outcome!r}; expected SchemaVersionError",
    )
    await h.close_all()
    changes = changed_files(before, fingerprint(h.path))
    expect(not changes, "SCHEMA-001", f"refusing a newer store changed its files: {changes}")


CHECKS = (newer_store_is_refused_untouched,)
