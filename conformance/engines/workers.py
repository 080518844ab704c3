"""Worker processes for the multi-process and kill checks.

Run as ``python -m checkpointspec.conformance.engines.workers BACKEND PATH SESSION TAG
COUNT BATCH [--expected]``: opens its own handle through the backend's factory
and appends COUNT batches of BATCH events to SESSION. Every event's text is
``TAG:batch:index``, so the parent can attribute every stored event. After each
acknowledged append it prints ``ack BATCH_NUMBER NEW_HEAD EXPECTED_HEAD`` (``None`` without
``--expected``) and flushes, so the
parent knows exactly which writes were acknowledged before it kills the worker.
With ``--expected`` each append passes the head it just read and retries on
conflict, printing ``conflict BATCH_NUMBER EXPECTED ACTUAL``. With ``--wait`` it
prints ``ready`` once its handle is open and starts when a line arrives on stdin.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from ...spec import BackendContext, CheckpointConflictError, UserPrompt
from .loading import open_checkpointer, resolve_backend

__all__ = ["batch_events", "worker_command", "worker_context", "worker_env"]


def batch_events(tag: str, batch: int, size: int) -> list[UserPrompt]:
    """The events of one worker batch; texts are unique across workers and batches."""
    return [UserPrompt(f"{tag}:{batch}:{index}") for index in range(size)]


def worker_command(
    backend: str,
    path: Path,
    session_id: str,
    tag: str,
    count: int,
    size: int,
    expected: bool,
    wait: bool = False,
) -> list[str]:
    """The argv that starts one worker (``wait``: until told to go, see the module docstring)."""
    argv = [
        sys.executable,
        "-m",
        "checkpointspec.conformance.engines.workers",
        backend,
        str(path),
        session_id,
        tag,
        str(count),
        str(size),
    ]
    return argv + ["--expected"] * expected + ["--wait"] * wait


OPTIONS_VARIABLE = "CHECKPOINTSPEC_BACKEND_OPTIONS"


def worker_env(options: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for workers: this interpreter's import path, so ``module:function``
    resolves, and the backend options (as JSON), so workers open the store as the kit does."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env[OPTIONS_VARIABLE] = json.dumps(options or {})
    return env


def worker_context(path: Path) -> BackendContext:
    """The BackendContext a worker process opens ``path`` with."""
    options = json.loads(os.environ.get(OPTIONS_VARIABLE, "{}"))
    return BackendContext(path=path, options={str(k): str(v) for k, v in options.items()})


async def _work(argv: list[str]) -> None:
    backend, path, session_id, tag, count, size = argv[:6]
    expected = "--expected" in argv[6:]
    factory = resolve_backend(backend).load()
    cp = await open_checkpointer(factory, worker_context(Path(path)))
    out = sys.stdout
    if "--wait" in argv[6:]:
        # Start together with the other workers, so their appends really race.
        out.write("ready\n")
        out.flush()
        sys.stdin.readline()
    for batch in range(int(count)):
        events = batch_events(tag, batch, int(size))
        while True:
            want = await cp.head(session_id) if expected else None
            try:
                head = await cp.append(session_id, events, want)
            except CheckpointConflictError as conflict:
                out.write(f"conflict {batch} {conflict.expected} {conflict.actual}\n")
                out.flush()
                continue
            out.write(f"ack {batch} {head} {want}\n")
            out.flush()
            break
    await cp.close()


if __name__ == "__main__":
    asyncio.run(_work(sys.argv[1:]))
