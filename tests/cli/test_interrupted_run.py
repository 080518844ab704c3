"""A kit run interrupted or killed half way leaves no process of its own behind.

Every process a run starts inherits its environment: the run gets a marker there,
and whatever carries the marker in ``/proc/PID/environ`` after the run has ended is
something it left running (a worker, the fork server, a stopper, a pool process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

MARKER = "CHECKPOINTSPEC_INTERRUPT_TEST"


def _marked(mark: str) -> list[tuple[int, str]]:
    """Live processes (zombies excluded) whose environment carries ``mark``."""
    found = []
    needle = f"{MARKER}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # it ended while we looked
            continue
        if stat[stat.rfind(")") + 2] not in "ZX":
            found.append((int(entry.name), command))
    return found


def _wait_for(condition: str, predicate: object, within: float) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g}s: {condition}")
        time.sleep(0.05)


@pytest.mark.parametrize("interruption", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_run_leaves_nothing_running(
    tmp_path: Path, interruption: signal.Signals
) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARKER: mark}
    command = [str(Path(sys.executable).parent / "checkpointspec"), "run", "file"]
    selection = ["--profile", "quick", "-n", "2", "--only", "KILL-001", "--only", "DUR-002"]
    run = subprocess.Popen(
        [*command, *selection],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Interrupt it once workers forked from the fork server are at work.
        def at_work() -> bool:
            assert run.poll() is None, f"the run ended first, with status {run.returncode}"
            running = _marked(mark)
            return any("--fork-server" in command for _, command in running) and len(running) >= 5

        _wait_for("a fork server and workers running", at_work, within=120)
        run.send_signal(interruption)
        run.wait(60)
        _wait_for(f"every process of the run gone: {_marked(mark)}", lambda: not _marked(mark), 60)
    finally:
        for pid, _ in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait()
