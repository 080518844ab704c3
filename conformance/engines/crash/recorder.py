"""Recording what any process does to a store's files, with ``strace``, as crash-state operations.

`tracer_argv` is the command prefix that runs a process (and every process and
thread it starts) under ``strace``, writing each call that can change
persistent state to a trace file: opens that create or truncate, ``write``,
``pwrite64``, ``writev`` and ``pwritev``, ``ftruncate``/``truncate``/``fallocate``,
``fsync``/``fdatasync``/``sync``/``syncfs``, ``rename``, ``link``, ``unlink``,
``mkdir``, ``rmdir``, and ``mmap``, with every byte written. Reads and seeks are
recorded too, to know where a plain ``write`` lands. `parse_trace` turns that
file into the `Op` values of `checkpointspec.conformance.engines.crash.states`,
for the files under one directory (the store) only, so a `CrashPlan` can build
every state a power loss or a kill may leave, for any backend in any language.

Acknowledgements are placed in the same order: the worker process writes each
reply to the kit on a pipe, and every reply line written there is a marker in
the trace, after every call of the operation it answers. The pipe is the one
whose bytes are exactly the replies the kit received (`TracedRun.replies`).

What the trace cannot show, and how that is handled:

* writes through a shared writable ``mmap`` of a store file: the file is named
  in `TracedRun.mapped` and the caller says so instead of passing the check;
* ``copy_file_range``, ``sendfile``, ``splice`` into a store file, ``io_uring``
  and asynchronous I/O: not traced (a backend relying on them is not judged
  correctly; the reference backends and the examples use none of them);
* descriptors shared by ``dup`` keep separate positions here: only a plain
  ``write`` to a duplicated non-append descriptor would be placed wrongly.
"""

from __future__ import annotations

import asyncio
import functools
import os
import posixpath
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from .states import Image, Op, append_op

__all__ = [
    "TRACED_CALLS",
    "NotAttached",
    "TraceError",
    "TracedRun",
    "attach_argv",
    "attach_unavailable",
    "attached",
    "parse_trace",
    "tracer_argv",
    "tracer_of",
    "tracer_unavailable",
]

TRACED_CALLS: Final = (
    "open,openat,openat2,creat,write,pwrite64,writev,pwritev,pwritev2,read,readv,lseek,"
    "ftruncate,truncate,fallocate,fsync,fdatasync,sync,syncfs,rename,renameat,renameat2,"
    "link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,mmap,clone,clone3,fork,vfork"
)
"""The system calls recorded: what changes a file, what moves a descriptor's position,
what maps a file, and what starts a thread or a process (whose descriptors are shared)."""

_MAX_STRING: Final = 1 << 26
"""Bytes of each string strace prints: no single write of a store is larger than this."""


class TraceError(Exception):
    """The trace cannot be turned into operations (a call it cannot place, a cut string)."""


@functools.cache
def tracer_unavailable() -> str | None:
    """Why processes cannot be traced here (no strace, ptrace forbidden), or None if they can."""
    strace = shutil.which("strace")
    if strace is None:
        return "strace is not installed (Debian: apt-get install strace)"
    probe = subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=write", "-o", os.devnull, "--", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        why = probe.stderr.strip().splitlines()
        return f"strace cannot trace processes here: {why[-1] if why else probe.returncode}"
    return None


_PTRACE_SCOPE: Final = Path("/proc/sys/kernel/yama/ptrace_scope")


def attach_unavailable() -> str | None:
    """Why strace cannot attach to running processes here (`attach_argv`), or None if it can.

    Beyond `tracer_unavailable`: Linux's Yama module may let a process trace only its
    own descendants, and strace is no ancestor of a server the kit started."""
    reason = tracer_unavailable()
    if reason is not None:
        return reason
    try:
        scope = int(_PTRACE_SCOPE.read_text())
    except (OSError, ValueError):
        return None  # no Yama: processes of the same user may be traced
    if scope >= 3 or (scope >= 1 and os.geteuid() != 0):
        return (
            f"kernel.yama.ptrace_scope is {scope}: strace may not attach to a running server "
            "(sysctl kernel.yama.ptrace_scope=0, or run as root)"
        )
    return None


def tracer_argv(trace_file: Path | str) -> list[str]:
    """The prefix that runs a command under strace, recording `TRACED_CALLS` into ``trace_file``.

    ``-f`` follows every thread and child process; ``--seccomp-bpf`` stops the
    tracee only at the recorded calls; ``-y`` names each descriptor's file;
    ``-xx`` prints every string (data and paths alike) as hex, so nothing in it
    can be mistaken for the syntax around it.
    """
    return [*_recording(trace_file, "--seccomp-bpf"), "--"]


def attach_argv(trace_file: Path | str, pids: Sequence[int]) -> list[str]:
    """The command that attaches strace to running processes ``pids`` (every thread, and
    every process they start from then on), recording `TRACED_CALLS` into ``trace_file``
    as `tracer_argv` does; SIGINT makes it detach and leave them running.

    Attached processes stop at every system call (``--seccomp-bpf`` applies only to
    processes strace starts), so they run slower than under `tracer_argv`.
    """
    return [*_recording(trace_file), *(arg for pid in pids for arg in ("-p", str(pid)))]


class NotAttached(Exception):
    """strace could not attach to the processes it was given (the message says which)."""


async def attached(
    tracer: asyncio.subprocess.Process, pids: Sequence[int], patience: float
) -> None:
    """Return once ``tracer`` (started with `attach_argv`) traces every one of ``pids``;
    `NotAttached` if it exits first or ``patience`` seconds pass."""
    deadline = time.monotonic() + patience
    waiting = list(pids)
    while waiting:
        if tracer.returncode is not None:
            raise NotAttached(f"strace could not attach to the server (exit {tracer.returncode})")
        if time.monotonic() > deadline:
            raise NotAttached(f"strace did not attach to processes {waiting} in {patience:g}s")
        waiting = [pid for pid in waiting if tracer_of(pid) == 0]
        if waiting:
            await asyncio.sleep(0.01)  # polled, with the deadline above


def tracer_of(pid: int) -> int | None:
    """The process tracing ``pid`` (0: none yet), or None when ``pid`` has ended: how a
    caller of `attach_argv` knows the tracer has attached before it goes on."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


def _recording(trace_file: Path | str, *extra: str) -> list[str]:
    strace = shutil.which("strace") or "strace"
    return [
        strace,
        "-f",
        "-qq",
        *extra,
        "-y",
        "-xx",
        "-s",
        str(_MAX_STRING),
        "-e",
        "signal=none",
        "-e",
        f"trace={TRACED_CALLS}",
        "-o",
        os.fspath(trace_file),
    ]


@dataclass
class TracedRun:
    """What one traced process did to the store: operations, reply markers, mapped files."""

    ops: list[Op] = field(default_factory=list)
    """The store's operations, numbered from 1, in the order they completed."""
    pipes: dict[str, tuple[bytearray, list[int]]] = field(default_factory=dict)
    """Every pipe written to (``pipe:[INODE]``): the bytes written, and for each line
    written, how many ops had completed then. `replies` picks the worker's."""
    mapped: set[str] = field(default_factory=set)
    """Store files (relative paths) mapped shared and writable: writes through them are unseen."""
    calls: int = 0
    """Calls in the trace that touched the store, recorded or not (reads, seeks)."""

    def replies(self, transcript: bytes) -> list[int] | None:
        """For each line the worker wrote to the kit, how many ops had completed then.

        The worker's reply pipe is the one whose bytes are exactly ``transcript``,
        the reply lines the kit received (None when no pipe carried them).
        """
        for written, lines in self.pipes.values():
            if written == transcript:
                return lines
        return None


# -- the trace's syntax -------------------------------------------------------------------

_LINE: Final = re.compile(r"^(\d+) +(.*)$")
_CALL: Final = re.compile(r"^(\w+)\((.*)$", re.S)
_RESUMED: Final = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$", re.S)
_RESULT: Final = re.compile(r"\) += (-?\d+|0x[0-9a-f]+|\?)(?:<([^>]*)>)?(.*)$", re.S)
_HEX: Final = re.compile(r"(?:\\x[0-9a-f]{2})+")
_UNFINISHED: Final = " <unfinished ...>"


def _unhex(text: str) -> str:
    """A decoration or path with its ``\\xNN`` escapes decoded (surrogate escapes kept)."""
    return _HEX.sub(
        lambda m: bytes.fromhex(m.group(0).replace("\\x", "")).decode("utf-8", "surrogateescape"),
        text,
    )


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments; quotes, brackets and ``<...>`` kept whole."""
    args: list[str] = []
    depth, start, quoted, i = 0, 0, False, 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            # With -xx every byte of a string is a \xNN escape, so the next quote ends it:
            # a jump, not a walk over the (up to 64 MiB) of data a read or write printed.
            end = text.find('"', i + 1)
            if end == -1 or "\\" not in text[i + 1 : i + 5]:
                quoted = True
            else:
                i = end
        elif c in "[{<(":
            depth += 1
        elif c in "]}>)":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args


def _string(arg: str) -> bytes:
    """The bytes of a printed string; `TraceError` if strace cut it short."""
    match = re.fullmatch(r'"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?', arg.strip())
    if match is None:
        raise TraceError(f"not a string in the trace: {arg[:80]!r}")
    if match.group(2):
        raise TraceError(f"strace cut a string at {_MAX_STRING} bytes")
    return bytes.fromhex(match.group(1).replace("\\x", ""))


def _iovecs(arg: str) -> bytes:
    return b"".join(_string(m) for m in re.findall(r'iov_base=("[^"]*"(?:\.\.\.)?)', arg))


def _fd(arg: str) -> tuple[int, str]:
    """A descriptor argument ``3</path>``: its number and what it names (decoded)."""
    match = re.fullmatch(r"(-?\d+|AT_FDCWD)(?:<(.*)>)?(\(deleted\))?", arg.strip(), re.S)
    if match is None:
        raise TraceError(f"not a descriptor in the trace: {arg[:80]!r}")
    number = -100 if match.group(1) == "AT_FDCWD" else int(match.group(1))
    deleted = " (deleted)" if match.group(3) else ""
    return number, _unhex(match.group(2) or "") + deleted


class _Call(NamedTuple):
    tid: int
    name: str
    args: list[str]
    result: int


def _calls(lines: Iterator[str]) -> Iterator[_Call]:
    """The completed calls of a trace, in the order they completed; failed calls skipped."""
    unfinished: dict[int, str] = {}
    for raw in lines:
        line = _LINE.match(raw.rstrip("\n"))
        if line is None:
            continue
        tid, rest = int(line.group(1)), line.group(2)
        if rest.endswith(_UNFINISHED):
            unfinished[tid] = rest[: -len(_UNFINISHED)]
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            if tid not in unfinished:
                continue
            rest = unfinished.pop(tid) + resumed.group(2)
        call = _CALL.match(rest)
        if call is None:
            continue  # a signal, an exit, a detach
        result = _RESULT.search(call.group(2))
        if result is None or result.group(1) == "?":
            continue  # the process died inside the call: it has no result
        value = int(result.group(1), 0)
        if value < 0:
            continue
        args = _split_args(call.group(2)[: result.start()])
        yield _Call(tid, call.group(1), args, value)


# -- turning calls into operations ---------------------------------------------------------

_O_FLAGS: Final = re.compile(r"O_[A-Z]+")
_FALLOC_KEEP_SIZE: Final = "FALLOC_FL_KEEP_SIZE"


@dataclass
class _Open:
    """A descriptor of a store file: the file, and where its next plain write lands."""

    ino: int
    append: bool
    position: int = 0


@dataclass
class _Recorder:
    roots: tuple[str, ...]
    """The store's directory as given and as its real path (a symlink above it)."""
    names: dict[str, int]
    dirs: set[str]
    sizes: dict[int, int]
    next_ino: int
    run: TracedRun = field(default_factory=TracedRun)
    group: dict[int, int] = field(default_factory=dict)
    """Thread id to the id of the process whose descriptors it shares."""
    tables: dict[int, dict[int, _Open]] = field(default_factory=dict)

    # -- where things are ----------------------------------------------------------------
    def rel(self, path: str) -> str | None:
        """``path`` relative to the store, or None for anything outside it."""
        path = posixpath.normpath(path.removesuffix(" (deleted)"))
        for root in self.roots:
            if path == root:
                return ""
            if path.startswith(root + "/"):
                return path[len(root) + 1 :]
        return None

    def resolve(self, dirfd: str, path_arg: str) -> str | None:
        path = _string(path_arg).decode("utf-8", "surrogateescape")
        if not path.startswith("/"):
            path = posixpath.join(_fd(dirfd)[1], path)
        return self.rel(path)

    def table(self, tid: int) -> dict[int, _Open]:
        return self.tables.setdefault(self.group.get(tid, tid), {})

    def opened(self, call: _Call, fd_arg: str) -> tuple[_Open | None, str | None]:
        """The descriptor argument's store file (as this trace knows it) and its relative path."""
        number, path = _fd(fd_arg)
        rel = self.rel(path) if path else None
        if rel is None:
            return None, None
        entry = self.table(call.tid).get(number)
        ino = self.names.get(rel)
        if entry is None or (ino is not None and entry.ino != ino and "(deleted)" not in path):
            if ino is None:
                return None, rel  # a directory, or a file this trace never saw
            entry = self.table(call.tid)[number] = _Open(ino, append=False)
        return entry, rel

    # -- recording -----------------------------------------------------------------------
    def write(self, entry: _Open, rel: str, offset: int, data: bytes) -> None:
        append_op(self.run.ops, "write", rel, ino=entry.ino, offset=offset, data=data)
        self.sizes[entry.ino] = max(self.sizes.get(entry.ino, 0), offset + len(data))

    def truncate(self, ino: int, rel: str, size: int) -> None:
        append_op(self.run.ops, "truncate", rel, ino=ino, offset=size)
        self.sizes[ino] = size

    def take(self, call: _Call) -> None:
        handler = getattr(self, f"on_{call.name}", None)
        if handler is not None:
            handler(call)

    # -- threads and processes -----------------------------------------------------------
    def on_clone(self, call: _Call) -> None:
        parent = self.group.get(call.tid, call.tid)
        child = call.result
        if "CLONE_THREAD" in " ".join(call.args) or "CLONE_FILES" in " ".join(call.args):
            early = self.tables.pop(child, {})
            self.group[child] = parent
            self.tables.setdefault(parent, {}).update(early)
        else:
            self.group[child] = child
            copied = {
                fd: _Open(e.ino, e.append, e.position) for fd, e in self.table(parent).items()
            }
            self.tables[child] = {**copied, **self.tables.get(child, {})}

    on_clone3 = on_clone
    on_fork = on_clone
    on_vfork = on_clone

    # -- opening -------------------------------------------------------------------------
    def _open(self, call: _Call, rel: str | None, flags: str) -> None:
        table = self.table(call.tid)
        table.pop(call.result, None)
        if rel is None or rel in self.dirs:
            return
        ino = self.names.get(rel)
        found = set(_O_FLAGS.findall(flags))
        if ino is None:
            if "O_CREAT" not in found and "O_TMPFILE" not in found:
                return  # opened a file this trace never saw created: nothing to place
            ino = self.next_ino
            self.next_ino += 1
            self.names[rel] = ino
            self.sizes[ino] = 0
            append_op(self.run.ops, "create", rel, ino=ino)
        elif "O_TRUNC" in found and self.sizes.get(ino, 0) > 0:
            self.truncate(ino, rel, 0)
        table[call.result] = _Open(ino, append="O_APPEND" in found)

    def on_open(self, call: _Call) -> None:
        self._open(call, self.resolve("AT_FDCWD", call.args[0]), call.args[1])

    def on_openat(self, call: _Call) -> None:
        self._open(call, self.resolve(call.args[0], call.args[1]), call.args[2])

    def on_openat2(self, call: _Call) -> None:
        self._open(call, self.resolve(call.args[0], call.args[1]), call.args[2])

    def on_creat(self, call: _Call) -> None:
        self._open(call, self.resolve("AT_FDCWD", call.args[0]), "O_CREAT|O_WRONLY|O_TRUNC")

    # -- data ----------------------------------------------------------------------------
    def _plain_write(self, call: _Call, data: bytes) -> None:
        _, path = _fd(call.args[0])
        if path.startswith("pipe:"):
            written, lines = self.run.pipes.setdefault(path, (bytearray(), []))
            written += data[: call.result]
            lines += [len(self.run.ops)] * data[: call.result].count(b"\n")
            return
        entry, rel = self.opened(call, call.args[0])
        if entry is None or rel is None:
            return
        self.run.calls += 1
        offset = self.sizes.get(entry.ino, 0) if entry.append else entry.position
        self.write(entry, rel, offset, data[: call.result])
        entry.position = offset + call.result

    def on_write(self, call: _Call) -> None:
        self._plain_write(call, _string(call.args[1]))

    def on_writev(self, call: _Call) -> None:
        self._plain_write(call, _iovecs(call.args[1]))

    def _positioned_write(self, call: _Call, data: bytes, offset: int) -> None:
        entry, rel = self.opened(call, call.args[0])
        if entry is not None and rel is not None:
            self.run.calls += 1
            if entry.append:
                # Linux appends even a pwrite to a descriptor opened O_APPEND (pwrite(2), BUGS).
                offset = self.sizes.get(entry.ino, 0)
            self.write(entry, rel, offset, data[: call.result])

    def on_pwrite64(self, call: _Call) -> None:
        self._positioned_write(call, _string(call.args[1]), int(call.args[3], 0))

    def on_pwritev(self, call: _Call) -> None:
        self._positioned_write(call, _iovecs(call.args[1]), int(call.args[3], 0))

    def on_pwritev2(self, call: _Call) -> None:
        if int(call.args[3], 0) == -1:
            self._plain_write(call, _iovecs(call.args[1]))
        else:
            self.on_pwritev(call)

    def _advance(self, call: _Call) -> None:
        entry, _ = self.opened(call, call.args[0])
        if entry is not None:
            self.run.calls += 1
            entry.position += call.result

    on_read = _advance
    on_readv = _advance

    def on_lseek(self, call: _Call) -> None:
        entry, _ = self.opened(call, call.args[0])
        if entry is not None:
            self.run.calls += 1
            entry.position = call.result

    def on_ftruncate(self, call: _Call) -> None:
        entry, rel = self.opened(call, call.args[0])
        if entry is not None and rel is not None:
            self.run.calls += 1
            self.truncate(entry.ino, rel, int(call.args[1], 0))

    def on_truncate(self, call: _Call) -> None:
        rel = self.resolve("AT_FDCWD", call.args[0])
        ino = self.names.get(rel) if rel is not None else None
        if rel is not None and ino is not None:
            self.run.calls += 1
            self.truncate(ino, rel, int(call.args[1], 0))

    def on_fallocate(self, call: _Call) -> None:
        entry, rel = self.opened(call, call.args[0])
        if entry is None or rel is None:
            return
        self.run.calls += 1
        if _FALLOC_KEEP_SIZE in call.args[1]:
            return  # the size stays; the blocks it reserves hold no data
        end = int(call.args[2], 0) + int(call.args[3], 0)
        if end > self.sizes.get(entry.ino, 0):
            self.truncate(entry.ino, rel, end)

    def on_mmap(self, call: _Call) -> None:
        if "PROT_WRITE" not in call.args[2] or "MAP_SHARED" not in call.args[3]:
            return
        _, rel = self.opened(call, call.args[4])
        if rel is not None:
            self.run.mapped.add(rel)

    # -- barriers ------------------------------------------------------------------------
    def on_fsync(self, call: _Call) -> None:
        _, path = _fd(call.args[0])
        rel = self.rel(path) if path else None
        if rel is None:
            return
        self.run.calls += 1
        if rel in self.dirs:
            append_op(self.run.ops, "fsync_dir", rel)
            return
        entry, _ = self.opened(call, call.args[0])
        if entry is not None:
            append_op(self.run.ops, "fsync", rel, ino=entry.ino)

    on_fdatasync = on_fsync

    def on_sync(self, call: _Call) -> None:
        # Everything issued is durable: an fsync of every file and directory does that.
        for rel, ino in sorted(self.names.items()):
            append_op(self.run.ops, "fsync", rel, ino=ino)
        for rel in sorted(self.dirs):
            append_op(self.run.ops, "fsync_dir", rel)

    on_syncfs = on_sync

    # -- names ---------------------------------------------------------------------------
    def _rename(self, old: str | None, new: str | None, flags: str = "") -> None:
        if old is None and new is None:
            return
        if old is None or new is None:
            raise TraceError(
                f"a rename between the store and elsewhere ({old or new!r}): "
                "files that enter or leave the store directory cannot be placed"
            )
        if "RENAME_EXCHANGE" in flags:
            raise TraceError(f"rename with RENAME_EXCHANGE ({old!r}, {new!r}) is not modelled")
        self.run.calls += 1
        ino = self.names.pop(old, None)
        if ino is None:
            if old in self.dirs:
                raise TraceError(f"renaming directory {old!r} is not modelled")
            return
        self.names[new] = ino
        append_op(self.run.ops, "rename", old, ino=ino, dst=new)

    def on_rename(self, call: _Call) -> None:
        self._rename(self.resolve("AT_FDCWD", call.args[0]), self.resolve("AT_FDCWD", call.args[1]))

    def on_renameat(self, call: _Call) -> None:
        self._rename(
            self.resolve(call.args[0], call.args[1]), self.resolve(call.args[2], call.args[3])
        )

    def on_renameat2(self, call: _Call) -> None:
        self._rename(
            self.resolve(call.args[0], call.args[1]),
            self.resolve(call.args[2], call.args[3]),
            call.args[4] if len(call.args) > 4 else "",
        )

    def _link(self, old: str | None, new: str | None) -> None:
        if new is None:
            return
        ino = self.names.get(old) if old is not None else None
        if ino is None:
            raise TraceError(f"a link into the store from a file it does not hold: {new!r}")
        self.run.calls += 1
        self.names[new] = ino
        append_op(self.run.ops, "link", old or "", ino=ino, dst=new)

    def on_link(self, call: _Call) -> None:
        self._link(self.resolve("AT_FDCWD", call.args[0]), self.resolve("AT_FDCWD", call.args[1]))

    def on_linkat(self, call: _Call) -> None:
        self._link(
            self.resolve(call.args[0], call.args[1]), self.resolve(call.args[2], call.args[3])
        )

    def _unlink(self, rel: str | None, directory: bool) -> None:
        if rel is None:
            return
        self.run.calls += 1
        if directory:
            self.dirs.discard(rel)
            append_op(self.run.ops, "rmdir", rel)
            return
        ino = self.names.pop(rel, None)
        if ino is not None:
            append_op(self.run.ops, "unlink", rel, ino=ino)

    def on_unlink(self, call: _Call) -> None:
        self._unlink(self.resolve("AT_FDCWD", call.args[0]), directory=False)

    def on_unlinkat(self, call: _Call) -> None:
        rel = self.resolve(call.args[0], call.args[1])
        self._unlink(rel, directory="AT_REMOVEDIR" in call.args[2])

    def on_rmdir(self, call: _Call) -> None:
        self._unlink(self.resolve("AT_FDCWD", call.args[0]), directory=True)

    def _mkdir(self, rel: str | None) -> None:
        if rel is None:
            return
        self.run.calls += 1
        self.dirs.add(rel)
        append_op(self.run.ops, "mkdir", rel)

    def on_mkdir(self, call: _Call) -> None:
        self._mkdir(self.resolve("AT_FDCWD", call.args[0]))

    def on_mkdirat(self, call: _Call) -> None:
        self._mkdir(self.resolve(call.args[0], call.args[1]))


def parse_trace(lines: Sequence[str] | Iterator[str], root: Path | str, base: Image) -> TracedRun:
    """The store operations of a strace recording made with `tracer_argv`.

    ``root`` is the store's directory and ``base`` what it held when the traced
    process started (its names, their inode numbers and bytes, its directories);
    calls on anything outside ``root`` are left out. What is written to pipes is
    kept, to place the worker's replies (`TracedRun.replies`). Raises `TraceError`
    for a trace it cannot
    place faithfully (a string strace cut, a rename into or out of the store).
    """
    given = posixpath.normpath(os.path.abspath(os.fspath(root)))
    real = posixpath.normpath(os.path.realpath(given))
    recorder = _Recorder(
        roots=tuple(dict.fromkeys((given, real))),
        names=dict(base.names),
        dirs=set(base.dirs),
        sizes={ino: len(data) for ino, data in base.data.items()},
        next_ino=max([*base.names.values(), 1]) + 1_000_000,
    )
    for call in _calls(iter(lines)):
        recorder.take(call)
    return recorder.run
