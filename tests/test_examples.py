"""The commands of docs/backend-authors.md marked ``# run-in-ci`` run verbatim and exit 0.

A command is marked by a fenced block opened with ```` ```sh ```` whose first
line is ``# run-in-ci``; every other non-empty, non-comment line of that block
is one command, run by the shell from the repository root, with this
interpreter's scripts directory first on PATH (so ``checkpointspec`` is the one
installed with this checkout). The guide cannot rot: a command it documents
that stops working fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "backend-authors.md"
MARK = "# run-in-ci"
_FENCE = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def marked_commands(text: str) -> list[str]:
    """Every command of every ```sh block whose first line is the mark, in order."""
    commands = []
    for block in _FENCE.findall(text):
        lines = block.splitlines()
        if not lines or lines[0].strip() != MARK:
            continue
        commands += [line for line in lines[1:] if line.strip() and not line.startswith("#")]
    return commands


COMMANDS = marked_commands(GUIDE.read_text(encoding="utf-8"))


def test_the_mark_is_found() -> None:
    """The guide marks its commands (a broken fence or mark would otherwise run nothing)."""
    assert len(COMMANDS) >= 3
    assert any("--suite session" in command for command in COMMANDS)


def test_only_marked_blocks_are_extracted() -> None:
    text = "```sh\n# run-in-ci\ntrue\n# a comment\n\nfalse --x\n```\n```sh\nnot-me\n```\n"
    assert marked_commands(text) == ["true", "false --x"]


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_command_exits_zero(command: str) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYTHONPATH", None)  # the command says what it needs
    result = subprocess.run(
        command,
        shell=True,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, (
        f"{command!r} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )
