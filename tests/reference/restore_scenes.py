"""A session and its workspace, built by hand for the restore tests.

A tool's write is imitated the way the SNAP rules describe it: append the
`FileSnapshot` (made by `make_snapshot`), then change the file directly.
`Scene.state` is everything a restore may change — the workspace files (the
reserved folder left out) and the log as encoded events — so a test compares
whole states, never one file at a time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.spec import (
    RESERVED_DIR,
    AssistantMessage,
    Checkpointer,
    FileSnapshot,
    SessionEvent,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserPrompt,
    encode_event,
    make_snapshot,
)
from checkpointspec.spec.restoration import RestorePlan, apply_plan, plan_restore
from helpers import read_all

SID = "session-1"

State = tuple[dict[str, bytes], tuple[bytes, ...]]
"""Workspace files (path -> content) and the log (encoded events, in seq order)."""


def workspace_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the reserved folder, by ``/``-separated relative path."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != RESERVED_DIR]
        for name in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")
            full = Path(dirpath, name)
            if not full.is_symlink():
                found[rel] = full.read_bytes()
    return found


async def state_of(cp: Checkpointer, root: Path, sid: str = SID) -> State:
    log = await read_all(cp, sid)
    return workspace_files(root), tuple(encode_event(s.event) for s in log)


class Scene:
    """One session in a memory store (or ``cp``) and a workspace at ``root``."""

    def __init__(self, root: Path, cp: Checkpointer | None = None, sid: str = SID) -> None:
        self.root = root
        self.cp: Checkpointer = cp if cp is not None else MemoryCheckpointer()
        self.sid = sid
        root.mkdir(parents=True, exist_ok=True)

    async def append(self, *events: SessionEvent) -> int:
        return await self.cp.append(self.sid, list(events))

    async def prompt(self, text: str) -> int:
        return await self.append(UserPrompt(text))

    def read(self, path: str) -> bytes | None:
        full = self.root / path
        return full.read_bytes() if full.exists() else None

    async def tool_write(
        self, path: str, content: bytes | None, *, hashed: bool = True, write: bool = True
    ) -> FileSnapshot:
        """Snapshot ``path``, then write ``content`` (None deletes) unless ``write`` is False."""
        snapshot = make_snapshot(path, self.read(path), content)
        if not hashed:
            snapshot = FileSnapshot(
                snapshot.path, snapshot.content_before, snapshot.truncated, snapshot.encoding
            )
        await self.append(snapshot)
        if write:
            self.put(path, content)
        return snapshot

    def put(self, path: str, content: bytes | None) -> None:
        """Change a file directly (out of band when no snapshot was recorded)."""
        full = self.root / path
        if content is None:
            full.unlink(missing_ok=True)
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(content)

    async def tool_turn(self, call_id: str) -> None:
        """An assistant turn asking for a tool, and its result."""
        await self.append(AssistantMessage("", (ToolCall(call_id, "edit", "{}"),)))
        await self.append(ToolResult(call_id, "ok"))

    async def state(self) -> State:
        return await state_of(self.cp, self.root, self.sid)

    async def plan(self, seq: int, *, files: bool = True, conversation: bool = True) -> RestorePlan:
        """The oracle's plan for restoring to ``seq`` now."""
        log = await read_all(self.cp, self.sid)
        return plan_restore(
            self.sid, log, seq, self.current(log), files=files, conversation=conversation
        )

    def current(self, log: Sequence[StoredEvent]) -> dict[str, bytes]:
        paths = {s.event.path for s in log if isinstance(s.event, FileSnapshot)}
        found = {}
        for path in paths:
            content = self.read(path) if not path.startswith(("/", "..")) else None
            if content is not None:
                found[path] = content
        return found

    async def expected_after(
        self, seq: int, *, files: bool = True, conversation: bool = True
    ) -> State:
        """The state a restore to ``seq`` must leave, by the oracle."""
        plan = await self.plan(seq, files=files, conversation=conversation)
        before_files, log = await self.state()
        after_files = apply_plan(before_files, plan)
        keep = log if plan.keep_through is None else log[: plan.keep_through]
        return after_files, keep


async def standard_scene(root: Path, cp: Checkpointer | None = None) -> tuple[Scene, int]:
    """A session of three prompts touching five files; returns it and the second prompt's seq.

    A restore to that prompt puts ``a.txt`` and the binary ``e.bin`` back to
    their first content, deletes
    ``b.bin`` and ``sub/d.txt`` (created after it) and recreates ``c.txt``
    (deleted after it).
    """
    scene = Scene(root, cp)
    await scene.prompt("create a and c")
    await scene.tool_write("a.txt", b"a0")
    await scene.tool_write("c.txt", b"c0\n")
    await scene.tool_write("e.bin", b"\xff\x00e0")
    await scene.tool_turn("t1")
    target = await scene.prompt("edit a, add b, drop c")
    await scene.tool_write("a.txt", b"a1")
    await scene.tool_write("b.bin", bytes(range(250, 256)) + b"\x00\xff")
    await scene.tool_write("c.txt", None)
    await scene.tool_write("e.bin", b"\xfe\x01e1")
    await scene.tool_turn("t2")
    await scene.prompt("edit a again, add sub/d")
    await scene.tool_write("a.txt", b"a2")
    await scene.tool_write("sub/d.txt", "d \u00e9".encode())
    return scene, target
