"""Checks of the SNAP rules: the session layer's workspace records a file before changing it.

Each check makes a workspace (the session layer's ``Workspace``) in a fresh
directory under the check's root, on a handle of the backend under test, and
looks at both sides out of band: the files on disk with plain ``pathlib``, the
log through the handle. What a snapshot must hold comes from the spec
(`make_snapshot`). The handle is wrapped in `Intercepted`, which runs the
check's code just before the layer's append reaches the backend: that is how a
check sees the file as it was when its snapshot was recorded (SNAP-001), and
how it makes the append fail (SNAP-004).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from ...spec import (
    ABSENT_HASH,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    FileSnapshot,
    InvalidArgumentError,
    ReasonCode,
    SessionLockedError,
    make_snapshot,
)
from ..engines.contract.violations import RuleViolation
from ..engines.run.harness import Harness, read_all
from ._session import Intercepted, files_under, same, write_files
from .base import check

__all__ = ["CHECKS"]

SESSION = "snap"


def _workspace_dir(h: Harness, name: str = "workspace") -> Path:
    root = h.root / name
    root.mkdir(parents=True)
    return root


def _content(root: Path, path: str) -> bytes | None:
    file = root / path
    return file.read_bytes() if file.is_file() else None


@check("SNAP-001")
async def a_tool_records_the_file_before_changing_it(h: Harness) -> None:
    """SNAP-001: write and delete append the snapshot first, then change the file; deleting nothing is refused."""
    cp = await h.open()
    spy = Intercepted(cp)
    root = _workspace_dir(h)
    ws = h.session.Workspace(root, spy.as_checkpointer(), SESSION)
    seen_at_append: list[bytes | None] = []

    def watch(path: str) -> None:
        async def record() -> None:
            seen_at_append.append(_content(root, path))

        spy.before_append = record

    steps: list[tuple[str, str, bytes | None, Callable[[], Awaitable[FileSnapshot]]]] = [
        ("a.txt", "a.txt", b"one", lambda: ws.write("a.txt", b"one", tool_call_id="t1")),
        ("a.txt", "a.txt", b"two", lambda: ws.write("a.txt", "two", tool_call_id="t2")),
        ("bin/x.bin", "bin/x.bin", b"\xff\x00\xfe", lambda: ws.write("bin/x.bin", b"\xff\x00\xfe")),
        ("bin/x.bin", "bin/x.bin", b"text", lambda: ws.write("bin/x.bin", b"text")),
        ("dir//./c.txt", "dir/c.txt", b"c", lambda: ws.write("dir//./c.txt", b"c")),
        ("a.txt", "a.txt", None, lambda: ws.delete("a.txt", tool_call_id="t3")),
    ]
    for written, canonical, after, step in steps:
        before = _content(root, canonical)
        watch(canonical)
        head = await cp.head(SESSION)
        snapshot = await step()
        log = await read_all(cp, SESSION)
        what = f"after {written!r} became {after!r}"
        same("SNAP-001", f"seqs appended {what}", [e.seq for e in log[head:]], [head + 1])
        recorded = log[-1].event
        same("SNAP-001", f"the snapshot returned {what} and the one in the log", snapshot, recorded)
        assert isinstance(recorded, FileSnapshot)
        expected = make_snapshot(canonical, before, after, tool_call_id=recorded.tool_call_id)
        same("SNAP-001", f"the snapshot recorded {what}", recorded, expected)
        same(
            "SNAP-001",
            f"the file when its snapshot was appended ({what})",
            seen_at_append[-1:],
            [before],
        )
        same("SNAP-001", f"the file {what}", _content(root, canonical), after)
        same("SNAP-001", f"Workspace.read {what}", ws.read(canonical), after)
    ids = [
        e.event.tool_call_id
        for e in await read_all(cp, SESSION)
        if isinstance(e.event, FileSnapshot)
    ]
    same("SNAP-001", "tool_call_id of each snapshot", ids, ["t1", "t2", None, None, None, "t3"])
    deleted = [e.event for e in await read_all(cp, SESSION)][-1]
    assert isinstance(deleted, FileSnapshot)
    same("SNAP-001", "hash_after of a delete", deleted.hash_after, ABSENT_HASH)

    head = await cp.head(SESSION)
    try:
        await ws.delete("missing.txt")
    except InvalidArgumentError as exc:
        same(
            "SNAP-001",
            "reason_code of deleting a missing file",
            exc.reason_code,
            ReasonCode.NO_SUCH_FILE,
        )
    else:
        raise RuleViolation(
            "SNAP-001", "deleting a missing file did not raise InvalidArgumentError"
        )
    same("SNAP-001", "head after deleting a missing file", await cp.head(SESSION), head)


@check("SNAP-002")
async def oversized_content_is_marked_truncated(h: Harness) -> None:
    """SNAP-002: content over the snapshot limit is recorded truncated, empty; the write goes ahead."""
    cp = await h.open()
    root = _workspace_dir(h)
    limit = 16
    ws = h.session.Workspace(root, cp, SESSION, snapshot_limit=limit)
    contents = [b"x" * 40, b"y" * limit, b"z" * (limit + 1), b"small"]
    before: bytes | None = None
    for after in contents:
        snapshot = await ws.write("big.txt", after)
        expected = make_snapshot("big.txt", before, after, limit=limit)
        same(
            "SNAP-002",
            f"the snapshot before {len(after)} bytes replaced {None if before is None else len(before)}",
            snapshot,
            expected,
        )
        same("SNAP-002", "the file after an oversized snapshot", _content(root, "big.txt"), after)
        before = after
    recorded = [e.event for e in await read_all(cp, SESSION)]
    flags = [e.truncated for e in recorded if isinstance(e, FileSnapshot)]
    same(
        "SNAP-002",
        "truncated flags of the snapshots in the log",
        flags,
        [False, True, False, True],
    )


@check("SNAP-003")
async def paths_stay_inside_the_workspace(h: Harness) -> None:
    """SNAP-003: unsafe paths (absolute, '..', NUL, empty, symlinks out, the reserved folder) are refused, nothing recorded or written."""
    cp = await h.open()
    root = _workspace_dir(h)
    outside = _workspace_dir(h, "outside")
    write_files(outside, {"target.txt": b"outside"})
    write_files(root, {"inside.txt": b"inside"})
    os.symlink(outside, root / "link")
    os.symlink(outside / "target.txt", root / "filelink")
    ws = h.session.Workspace(root, cp, SESSION)
    await ws.write("inside.txt", b"inside, recorded")
    unsafe = [
        str(root / "abs.txt"),
        "/abs.txt",
        "../outside/target.txt",
        "a/../inside.txt",
        "a\x00b",
        "",
        ".",
        "link/target.txt",
        "link/new.txt",
        "filelink",
        ".checkpointspec/journal",
    ]
    log = await read_all(cp, SESSION)
    files = (files_under(root), files_under(outside))
    for path in unsafe:
        operations: list[tuple[str, Callable[[], Awaitable[FileSnapshot]]]] = [
            ("write", partial(ws.write, path, b"escaped")),
            ("delete", partial(ws.delete, path)),
        ]
        for name, operation in operations:
            try:
                await operation()
            except InvalidArgumentError as exc:
                same(
                    "SNAP-003",
                    f"reason_code of {name}({path!r})",
                    exc.reason_code,
                    ReasonCode.UNSAFE_PATH,
                )
            else:
                raise RuleViolation("SNAP-003", f"{name}({path!r}) was not refused")
            same("SNAP-003", f"the log after {name}({path!r})", await read_all(cp, SESSION), log)
            same(
                "SNAP-003",
                f"the files after {name}({path!r})",
                (files_under(root), files_under(outside)),
                files,
            )
        try:
            ws.resolve(path)
        except InvalidArgumentError as exc:
            same(
                "SNAP-003",
                f"reason_code of resolve({path!r})",
                exc.reason_code,
                ReasonCode.UNSAFE_PATH,
            )
        else:
            raise RuleViolation("SNAP-003", f"resolve({path!r}) was not refused")
    same("SNAP-003", "resolve of a non-canonical safe path", ws.resolve("d//./e.txt"), "d/e.txt")


@check("SNAP-004")
async def no_snapshot_no_change(h: Harness) -> None:
    """SNAP-004: when the snapshot cannot be appended the error is raised and the file left unchanged."""
    cp = await h.open()
    spy = Intercepted(cp)
    root = _workspace_dir(h)
    ws = h.session.Workspace(root, spy.as_checkpointer(), SESSION)
    await ws.write("kept.txt", b"kept")
    failures: list[Exception] = [
        CheckpointConflictError(SESSION, 1, 2),
        SessionLockedError(SESSION, "append"),
        CheckpointerClosedError("append"),
        OSError(5, "Input/output error"),
    ]

    async def refused(label: str, expected: type[Exception]) -> None:
        files = files_under(root)
        log = await read_all(cp, SESSION)
        attempts: list[tuple[str, Callable[[], Awaitable[FileSnapshot]]]] = [
            ("write('kept.txt')", lambda: ws.write("kept.txt", b"changed")),
            ("write('new.txt')", lambda: ws.write("new.txt", b"new")),
            ("delete('kept.txt')", lambda: ws.delete("kept.txt")),
        ]
        for name, attempt in attempts:
            try:
                await attempt()
            except expected:
                pass
            except Exception as exc:
                raise RuleViolation(
                    "SNAP-004",
                    f"{name} with {label} raised {type(exc).__name__}: {exc}, not the {expected.__name__}",
                ) from exc
            else:
                raise RuleViolation("SNAP-004", f"{name} with {label} raised nothing")
            same("SNAP-004", f"the files after {name} with {label}", files_under(root), files)
            same("SNAP-004", f"the log after {name} with {label}", await read_all(cp, SESSION), log)

    for failure in failures:
        spy.fail_append = failure
        await refused(f"an append that raises {type(failure).__name__}", type(failure))
    spy.fail_append = None

    if h.has(Capability.MAINTENANCE):
        holder = await h.open()
        async with h.session.maintenance(holder, SESSION):
            await refused("the session held by another handle", SessionLockedError)

    closed = await h.open()
    ws_closed = h.session.Workspace(root, closed, SESSION)
    await closed.close()
    files = files_under(root)
    try:
        await ws_closed.write("kept.txt", b"through a closed handle")
    except CheckpointerClosedError:
        pass
    else:
        raise RuleViolation("SNAP-004", "a write through a closed handle raised nothing")
    same("SNAP-004", "the files after a write through a closed handle", files_under(root), files)


CHECKS = (
    a_tool_records_the_file_before_changing_it,
    oversized_content_is_marked_truncated,
    paths_stay_inside_the_workspace,
    no_snapshot_no_change,
)
