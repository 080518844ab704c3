"""What the author of a backend writes, named in the author's own language.

A check that needs something the backend has not said (its scratch files, its file
I/O routed through the kit's disk) tells the author how to say it. A Python backend
implements a protocol of `checkpointspec.spec`; a backend over the stdio protocol
answers a field of its hello; a lite-agent checkpointer served by the kit's bridge is
JavaScript and has a method. `in_their_language` picks the sentence for the handle
the check opened.
"""

from __future__ import annotations

from ....backends.stdio.client import StdioCheckpointer
from .provenance import BackendHandle

__all__ = [
    "LITE_AGENT_NAME",
    "how_to_declare_scratch",
    "how_to_give_store_hooks",
    "in_their_language",
    "missing_python_protocol",
    "why_no_simulated_disk",
]

LITE_AGENT_NAME = "lite-agent "
"""How the lite-agent bridge's hello names the checkpointer it serves (its prefix)."""


def in_their_language(handle: object, *, python: str, protocol: str, lite_agent: str) -> str:
    """``lite_agent`` for a checkpointer the lite-agent bridge serves, ``protocol`` for
    any other backend over the stdio protocol, ``python`` for a Python backend (the
    handle as a check holds it, or the backend's own object)."""
    if isinstance(handle, BackendHandle):
        handle = handle.backend_object
    if isinstance(handle, StdioCheckpointer):
        return lite_agent if (handle.name or "").startswith(LITE_AGENT_NAME) else protocol
    return python


def how_to_declare_scratch(handle: object) -> str:
    """How the author of ``handle`` declares the files its store rebuilds on open."""
    return in_their_language(
        handle,
        python="implement ScratchFiles.scratch_files() -> {glob pattern: why}",
        protocol='answer "scratch_files": {glob pattern: why} in the hello',
        lite_agent="give the checkpointer a scratchFiles() method returning "
        "{ 'glob pattern': 'why' } (the bridge sends it in its hello)",
    )


def why_no_simulated_disk(handle: object) -> str:
    """Why the simulated disk cannot take ``handle``'s file I/O, and what the author of
    it can do: a Python backend can route it there; one in another process cannot."""
    traced = (
        "its power losses are judged from a trace of its process's system calls instead "
        "(DUR-003::power_loss_after_every_system_call)"
    )
    return in_their_language(
        handle,
        python="the handle does not implement FileSystemPorted (on_filesystem(fs) -> "
        "Checkpointer, see checkpointspec.spec.filesystem)",
        protocol="a backend over the stdio protocol does its file I/O in its own process, "
        f"which the kit's simulated disk cannot reach; {traced}",
        lite_agent="a checkpointer the lite-agent bridge serves does its file I/O in Node, "
        f"which the kit's simulated disk cannot reach; {traced}",
    )


def missing_python_protocol(handle: object, needs: str, protocol: str) -> str:
    """Why ``handle`` does not give the kit ``needs`` ("a server the kit may kill"):
    a Python backend does not implement ``protocol`` (its name and signature, as the
    sentence should show them); the stdio protocol and the lite-agent bridge have no
    way to give it, so the check is one for Python backends."""
    return in_their_language(
        handle,
        python=f"the handle does not implement {protocol}",
        protocol=f"the stdio protocol has no way to give the kit {needs}: this check is "
        "for a backend written in Python",
        lite_agent=f"the lite-agent bridge has no way to give the kit {needs}: this check "
        "is for a backend written in Python",
    )


def how_to_give_store_hooks(handle: object) -> str:
    """How the author of ``handle`` gives the kit its store hooks (SCHEMA-001, INTEG-002)."""
    return in_their_language(
        handle,
        python="implement StoreHooks (mark_newer_schema(path), damage_store(path))",
        protocol='declare "store_hooks": true in the hello and answer mark_newer_schema and '
        "damage_store",
        lite_agent="export markNewerSchema(options) and damageStore(options) from the "
        "factory's module (docs/lite-agent.md)",
    )
