"""Bridges shipped with the package: programs that serve a checkpointer written for
another framework's interface over the stdio protocol, so its author needs no adapter.

`LITE_AGENT_BRIDGE` (``lite_agent.mjs``, Node.js 20+, standard library only) serves
an object implementing the lite-agent SDK's ``Checkpointer`` interface; docs/lite-agent.md
is its author's guide. ``checkpointspec run --lite-agent MODULE#FACTORY`` starts it
through `lite_agent_command`; ``python -m checkpointspec.backends.stdio.bridges``
prints its path, for use with ``--process`` directly.

This module knows the bridge's command line and what may be declared to it, nothing
of the protocol: the bridge speaks it like any other child process.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import msgspec

__all__ = [
    "LITE_AGENT_BRIDGE",
    "LITE_AGENT_DECLARABLE",
    "TRUNCATE_WITHOUT_EXPECTED_HEAD",
    "BridgeDescription",
    "LiteAgentBridgeError",
    "describe_lite_agent",
    "lite_agent_command",
]

LITE_AGENT_BRIDGE: Path = Path(str(resources.files(__name__).joinpath("lite_agent.mjs")))
"""The lite-agent bridge's file, as installed with the package."""

TRUNCATE_WITHOUT_EXPECTED_HEAD = "truncate_without_expected_head"
"""The declaration of a ``truncate(sessionId, toSeq)`` that takes no ``expectedHead``:
the bridge drops the expected head, and the run expects TRUNC-003 to fail."""

LITE_AGENT_DECLARABLE: Mapping[str, str] = {
    "durable": "acknowledged writes survive close, reopen, a killed process and a power loss",
    "multi_process": "several processes may use one store at once",
    TRUNCATE_WITHOUT_EXPECTED_HEAD: "truncate(sessionId, toSeq) takes no expectedHead",
}
"""What ``--declare`` may name: what the bridge cannot see on the object (the same
names the bridge accepts)."""


class LiteAgentBridgeError(Exception):
    """The bridge cannot serve the named factory: ``node`` is missing, a declaration is
    unknown, or the module, the factory or its object failed (the message says which)."""


class BridgeDescription(msgspec.Struct, frozen=True):
    """What the bridge found on the factory's object and what was declared to it."""

    module: str
    factory: str
    found: tuple[str, ...]
    """Capabilities seen on the object: delete, list, truncate, maintenance."""
    methods: tuple[str, ...]
    """Optional methods present besides those: checkIntegrity, close."""
    declared: tuple[str, ...]
    capabilities: tuple[str, ...]
    """What the bridge declares in its ``hello``: found and declared together."""
    scratchFiles: dict[str, str] = {}  # the bridge's JSON: a JavaScript name
    """The store files the checkpointer's ``scratchFiles()`` says it rebuilds on open."""
    storeHooks: bool = False
    """Whether the module gives the store hooks (``markNewerSchema``, ``damageStore``)."""

    def header(self) -> str:
        """One line for a run's header: the factory, what was found, what was declared."""
        methods = (*self.methods, *(("scratchFiles",) if self.scratchFiles else ()))
        methods += ("markNewerSchema", "damageStore") if self.storeHooks else ()
        found = ", ".join((*self.found, *(f"{m}()" for m in methods))) or "nothing optional"
        declared = ", ".join(self.declared) or "nothing"
        scratch = f"; scratch files {', '.join(self.scratchFiles)}" if self.scratchFiles else ""
        return (
            f"lite-agent {self.factory} from {self.module}: found {found}; "
            f"declared {declared}{scratch}"
        )


def _checked_declarations(declared: Sequence[str]) -> tuple[str, ...]:
    unknown = [d for d in declared if d not in LITE_AGENT_DECLARABLE]
    if unknown:
        why = " (a codec cannot reach another process)" if "codec" in unknown else ""
        raise LiteAgentBridgeError(
            f"--declare {','.join(unknown)} is not declarable{why}; declarable: "
            + ", ".join(LITE_AGENT_DECLARABLE)
        )
    return tuple(dict.fromkeys(declared))


def lite_agent_command(target: str, declared: Sequence[str] = ()) -> str:
    """The ``--process`` command serving ``target`` (``MODULE#FACTORY``, the module a
    path from the working directory or a package name) through the bridge, with
    ``declared`` capabilities. Raises `LiteAgentBridgeError` for an unknown declaration."""
    words = ["node", str(LITE_AGENT_BRIDGE), target]
    names = _checked_declarations(declared)
    if names:
        words += ["--declare", ",".join(names)]
    return shlex.join(words)


def describe_lite_agent(
    target: str, declared: Sequence[str] = (), options: Mapping[str, str] | None = None
) -> BridgeDescription:
    """Open ``target`` once through the bridge on a scratch directory and say what it
    found. Raises `LiteAgentBridgeError` with the bridge's own message when ``node`` is
    not on PATH or the module, the factory or its object cannot be served."""
    node = shutil.which("node")
    if node is None:
        raise LiteAgentBridgeError("--lite-agent needs node (Node.js 20+) on PATH")
    command = [node, str(LITE_AGENT_BRIDGE), target, "--describe"]
    names = _checked_declarations(declared)
    if names:
        command += ["--declare", ",".join(names)]
    for key, value in (options or {}).items():
        command += ["--option", f"{key}={value}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise LiteAgentBridgeError(f"{target}: the bridge did not open it within 60 s") from None
    if done.returncode != 0:
        said = done.stderr.strip().removeprefix("lite_agent.mjs: ").splitlines()[:12]
        raise LiteAgentBridgeError(f"--lite-agent {target}: " + "\n".join(said))
    return msgspec.json.decode(done.stdout.strip().splitlines()[-1], type=BridgeDescription)
