"""Hold a running process tree right after its Nth system call that changes a store file.

The kit uses it to kill a writer there (KILL-001) or to read the store while the
writer is held there (READ-003): at every point of a write, not where a timer
happens to land. It works on any process: a Python worker, or the child process
of a stdio backend in any language.

`SyscallStopper` (the kit's end) runs this file as a script, ``python
stopper.py PID N ROOT...``, which attaches with
``ptrace`` to every thread of PID and of its descendants (``PTRACE_SEIZE``, new
threads and children followed, ``PTRACE_O_EXITKILL``), and reads each system
call's number and arguments at entry and its result at exit
(``PTRACE_GET_SYSCALL_INFO``: no register layouts, x86-64 and AArch64 alike). A
call counts when it succeeds and changes a file under a ROOT: a write of any kind,
``ftruncate``/``truncate``/``fallocate``, ``fsync``/``fdatasync``, an open that
creates or truncates, ``rename``, ``link``, ``unlink``, ``mkdir``, ``rmdir``,
``sync``/``syncfs``. When the Nth has returned, every traced thread is stopped
and the stopper process prints ``stopped N CALL``. Then:

* ``resume`` on its stdin: it detaches from every thread and exits; the writer
  goes on as if nothing happened;
* end of its stdin: it exits, and the kernel kills every traced thread where it
  stands (``PTRACE_O_EXITKILL``): a SIGKILL right after the Nth call, with no
  instruction run after it.

*Round trips to a server.* With ``--sends`` (``python stopper.py PID N --sends
ROOT...``) a call also counts when it sends bytes to a server: a successful
``write``, ``writev``, ``sendto``, ``sendmsg`` or ``sendmmsg`` (one count per
call, whatever it sends) on a connected stream socket whose peer has an address:
TCP over IPv4 or IPv6 (loopback included), or a UNIX socket connected to a
named one (PostgreSQL's ``/tmp/.s.PGSQL.5432``). The kit's channels never count:
a worker and a stdio backend's child talk to their parent through pipes, and an
event loop wakes itself through an unnamed socket pair, whose peer has no
address. The stopper process looks at the socket itself, duplicated from the
traced process (``pidfd_getfd``, Linux 5.6): its family, type and peer; one look
per descriptor. A send is described as ``sendto to 127.0.0.1:5432`` (`is_send`). Held right after such a send, the request has left the client
whole, and nothing it does after (reading the answer, the next request) has
run: a kill there is the client dying at that round trip, whatever the server
then does with what it got.

*Only the calls that may count* (``python stopper.py PID N --filtered ROOT...``,
``filtered=True``): the traced tree installs `store_call_filter` on itself (a
seccomp filter; a process can install one only on itself) once the stopper has
attached with ``PTRACE_O_TRACESECCOMP``. Its threads then run on with
``PTRACE_CONT`` and stop only at a call of the table, and at that call's exit when
it may count; the thousands of futex, poll and read calls of a threaded writer run
untraced. An ADK service's writer program took 1.3 s traced call by call, 0.10 s
filtered, 0.05 s untraced. A filtered tree is killed where it is held, never let
go: without its tracer, a trapped call fails with ``ENOSYS``.

The stopper process sleeps until a traced thread stops (the kernel's SIGCHLD to a
tracer, through `signal.set_wakeup_fd`) or the kit writes, rather than polling: a
poll interval per stop had made the same program take 1.3 s instead of 0.4 s.

Before the Nth call, end of stdin makes it print ``count K`` and the K calls it
counted, one a line, and exit, which kills the traced process too. Lines to the kit: ``attached``
once every thread is traced, then ``stopped ...`` or ``count ...``.

Every wait has a deadline, on both ends. The stopper process reaps every traced
thread that exits, also while it holds the tree (a held worker the kit kills is
reaped at once, never left a zombie its parent cannot wait for), ends when no
traced thread is left or the traced process is a zombie (its exit is not
always reported to a tracer), and gives up on a thread that neither stops nor exits
within ``HOLD_PATIENCE`` seconds (``error ...``). The kit's end waits at most
``patience`` seconds for each line and for the stopper process's exit; then it
kills the stopper process (which kills the traced tree) and raises
`StopperHung`, naming the traced process, the call it was to be held at, what
was awaited, for how long, and the stopper's last stderr lines.

`stopper_unavailable` says why this cannot run here (no ``ptrace``, no
``PTRACE_GET_SYSCALL_INFO`` before Linux 5.3, an architecture it has no call
numbers for).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import IO, Final, TypeVar

if __name__ != "__main__":
    # The kit's end only: the stopper process starts once per hold, and importing
    # asyncio would cost it two thirds of its start.
    import asyncio
    import subprocess
    import tempfile

__all__ = [
    "FILTERED_FLAG",
    "HOLD_PATIENCE",
    "SENDS_FLAG",
    "STOPPER_PATIENCE",
    "StopperDied",
    "StopperError",
    "StopperHung",
    "SyscallStopper",
    "is_send",
    "server_sends_unavailable",
    "stopper_unavailable",
    "store_call_filter",
    "tree_cpu_ticks",
    "tree_sleeps",
    "tree_states",
    "tree_threads",
    "until_done_or_silent",
]

_T = TypeVar("_T")

HOLD_PATIENCE: Final = 10.0
"""Seconds the stopper process waits for a traced thread to stop (or exit) once asked."""
STOPPER_PATIENCE: Final = 30.0
"""Seconds the kit waits for any one line of the stopper process, and for its exit."""
_POLL: Final = 0.001
"""Seconds between two looks for a line from the kit while stops keep coming, and
for a stop while holding the tree."""
_IDLE: Final = 0.05
"""The longest sleep waiting for a stop: a traced process's exit is not always
signalled (a thread-group leader left a zombie)."""

_SEIZE: Final = 0x4206
_INTERRUPT: Final = 0x4207
_LISTEN: Final = 0x4208
_SYSCALL: Final = 24
_DETACH: Final = 17
_GET_SYSCALL_INFO: Final = 0x420E
_CONT: Final = 7
_OPTIONS: Final = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x100000
"""TRACESYSGOOD, TRACEFORK, TRACEVFORK, TRACECLONE, TRACEEXEC, EXITKILL."""
_TRACESECCOMP: Final = 0x80
_EVENT_SECCOMP: Final = 7
_EVENT_STOP: Final = 128
_WALL: Final = 0x40000000
_SYSCALL_STOP: Final = signal.SIGTRAP | 0x80
_INFO_ENTRY: Final = 1
_INFO_EXIT: Final = 2
_INFO_SECCOMP: Final = 3
_AT_FDCWD: Final = -100
_O_CREAT: Final = 0o100
_O_TRUNC: Final = 0o1000
_AT_REMOVEDIR: Final = 0x200

# Call number -> (name, how to find the file): "fd" (argument 0 is a descriptor;
# a socket's counts as a send with --sends), "send" (argument 0 is a socket),
# "path" (argument 0 is a path), "at" (arguments 0, 1: dirfd and path), "at2"
# (arguments 2, 3: the destination of a rename or link), "open" / "openat"
# (count only with O_CREAT or O_TRUNC), "all" (sync: every file).
_X86_64: Final = {
    1: ("write", "fd"),
    18: ("pwrite64", "fd"),
    20: ("writev", "fd"),
    296: ("pwritev", "fd"),
    328: ("pwritev2", "fd"),
    77: ("ftruncate", "fd"),
    285: ("fallocate", "fd"),
    74: ("fsync", "fd"),
    75: ("fdatasync", "fd"),
    76: ("truncate", "path"),
    2: ("open", "open"),
    85: ("creat", "path"),
    257: ("openat", "openat"),
    82: ("rename", "path"),
    264: ("renameat", "at"),
    316: ("renameat2", "at"),
    86: ("link", "path2"),
    265: ("linkat", "at2"),
    87: ("unlink", "path"),
    263: ("unlinkat", "at"),
    83: ("mkdir", "path"),
    258: ("mkdirat", "at"),
    84: ("rmdir", "path"),
    162: ("sync", "all"),
    306: ("syncfs", "fd"),
    44: ("sendto", "send"),
    46: ("sendmsg", "send"),
    307: ("sendmmsg", "send"),
}
_AARCH64: Final = {
    64: ("write", "fd"),
    68: ("pwrite64", "fd"),
    66: ("writev", "fd"),
    70: ("pwritev", "fd"),
    287: ("pwritev2", "fd"),
    46: ("ftruncate", "fd"),
    47: ("fallocate", "fd"),
    82: ("fsync", "fd"),
    83: ("fdatasync", "fd"),
    45: ("truncate", "path"),
    56: ("openat", "openat"),
    38: ("renameat", "at"),
    276: ("renameat2", "at"),
    37: ("linkat", "at2"),
    35: ("unlinkat", "at"),
    34: ("mkdirat", "at"),
    81: ("sync", "all"),
    267: ("syncfs", "fd"),
    206: ("sendto", "send"),
    211: ("sendmsg", "send"),
    269: ("sendmmsg", "send"),
}
_CALLS: Final = {0xC000003E: _X86_64, 0xC00000B7: _AARCH64}
"""By AUDIT_ARCH value, as PTRACE_GET_SYSCALL_INFO reports it."""
_SENDS: Final = frozenset({"write", "writev", "sendto", "sendmsg", "sendmmsg"})
"""The calls that count as a send when their descriptor is a server connection."""
_PIDFD_GETFD: Final = 438
"""The same number on every architecture (calls added since Linux 5.1 share one table)."""
SENDS_FLAG: Final = "--sends"
"""The stopper script's argument that makes sends to a server count too."""
FILTERED_FLAG: Final = "--filtered"
"""The stopper script's argument saying the traced tree runs under `store_call_filter`."""
_AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SECCOMP_RET_ALLOW: Final = 0x7FFF0000
_SECCOMP_RET_TRACE: Final = 0x7FF00000


def store_call_filter() -> bytes:
    """A seccomp filter (classic BPF, ``struct sock_filter`` entries) under which a traced
    process stops only at the calls the stopper may count: every call in this machine's
    table traps to the tracer (``SECCOMP_RET_TRACE``), every other runs as if untraced.

    A process of many threads makes thousands of calls that cannot change a store
    (futexes, polls, reads); traced with ``PTRACE_SYSCALL`` each stops it twice, which
    made a traced writer 25 times slower than an untraced one. A process installs it
    itself (`checkpointspec.conformance.engines.processes.filters`) once the stopper
    has attached with ``filtered=True``: under it, a trapped call made with no tracer
    attached fails with ``ENOSYS``, so a filtered tree is killed, never resumed."""
    arch = _AUDIT_ARCH[platform.machine()]
    numbers = sorted(_CALLS[arch])

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    load_word, jump_equal, ret = 0x20, 0x15, 0x06
    allow = len(numbers) + 1  # from the arch check: past the number load and every compare
    program = [op(load_word, 0, 0, 4), op(jump_equal, 0, allow, arch), op(load_word, 0, 0, 0)]
    for index, number in enumerate(numbers):
        program.append(op(jump_equal, len(numbers) - index, 0, number))
    program += [op(ret, 0, 0, _SECCOMP_RET_ALLOW), op(ret, 0, 0, _SECCOMP_RET_TRACE)]
    return b"".join(program)


class StopperError(Exception):
    """The stopper process could not trace the process (permission, a kernel without the calls)."""


class StopperDied(Exception):
    """The stopper process ended without saying what it counted: the kit's error, not a skip."""


class StopperHung(Exception):
    """The stopper process did not answer in time; it was killed, and the traced tree with it.

    ``pid`` is the traced process, ``target`` the store call it was to be held
    after, ``waiting_for`` what the kit awaited, ``seconds`` how long, ``stderr``
    the end of what the stopper process wrote there.
    """

    def __init__(
        self, pid: int, target: int, waiting_for: str, seconds: float, stderr: str
    ) -> None:
        last = stderr.strip().splitlines()[-3:]
        said = "; its last stderr lines: " + " | ".join(last) if last else "; no stderr output"
        at = "only counting its store calls" if target >= 1 << 30 else f"store call #{target}"
        super().__init__(
            f"the stopper process tracing process {pid} ({at}) did not {waiting_for} within "
            f"{seconds:g}s{said}"
        )
        self.pid = pid
        self.target = target
        self.waiting_for = waiting_for
        self.seconds = seconds
        self.stderr = stderr


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    return libc


@functools.cache
def stopper_unavailable() -> str | None:
    """Why processes cannot be held at a system call here, or None if they can."""
    if sys.platform != "linux":
        return f"ptrace is Linux's; this is {sys.platform}"
    if platform.machine() not in ("x86_64", "aarch64"):
        return f"no system call numbers for {platform.machine()}"
    release = tuple(int(p) for p in platform.release().split(".")[:2] if p.isdigit())
    if release < (5, 3):
        return f"PTRACE_GET_SYSCALL_INFO needs Linux 5.3; this is {platform.release()}"
    return None


def is_send(call: str) -> bool:
    """Whether ``call``, as the stopper describes a counted call, is a send to a server
    (``sendto to 127.0.0.1:5432``) rather than a change to a file (``write /store/x``)."""
    name, _, rest = call.partition(" ")
    return name in _SENDS and rest.startswith("to ")


@functools.cache
def server_sends_unavailable() -> str | None:
    """Why sends to a server cannot be counted here, or None if they can (the stopper
    duplicates a traced process's socket to see its peer: ``pidfd_getfd``, Linux 5.6)."""
    reason = stopper_unavailable()
    if reason is not None:
        return reason
    release = tuple(int(p) for p in platform.release().split(".")[:2] if p.isdigit())
    if release < (5, 6):
        return f"pidfd_getfd needs Linux 5.6; this is {platform.release()}"
    return None


# -- the stopper process ---------------------------------------------------------------------


class _Tracer:
    def __init__(
        self, roots: list[str], target: int, sends: bool = False, filtered: bool = False
    ) -> None:
        self.libc = _libc()
        self.sends = sends
        """Whether sends to a server count (``--sends``)."""
        self.filtered = filtered
        """Whether the tree runs under `store_call_filter`: threads run on with
        ``PTRACE_CONT`` and stop only at a trapped call (and at its exit, when it may
        count), not at every call."""
        self.peers: dict[tuple[int, int, str], str | None] = {}
        """Per (process, descriptor, socket inode): the server it is connected to, or None."""
        given = [os.path.normpath(os.path.abspath(root)) for root in roots]
        self.roots = tuple(dict.fromkeys([*given, *(os.path.realpath(root) for root in given)]))
        self.target = target
        self.count = 0
        self.calls: list[str] = []
        """Every counted call, described (``pwrite64 /store/x.log``), in order."""
        self.running: set[int] = set()
        self.stopped: set[int] = set()
        self.entered: dict[int, str | None] = {}
        """Per thread: the counted call it is inside (None: a call that does not count)."""

    def ptrace(self, request: int, tid: int, addr: int = 0, data: int = 0) -> int:
        result = int(self.libc.ptrace(request, tid, addr, data))
        if result == -1:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return result

    # -- attaching -----------------------------------------------------------------------
    def attach_tree(self, pid: int) -> None:
        seen: set[int] = set()
        while True:
            tids = set(tree_threads(pid)) - seen
            if not tids:
                return
            for tid in tids:
                seen.add(tid)
                try:
                    options = _OPTIONS | (_TRACESECCOMP if self.filtered else 0)
                    self.ptrace(_SEIZE, tid, 0, options)
                    self.ptrace(_INTERRUPT, tid)
                except OSError as exc:
                    if exc.errno == errno.ESRCH:
                        continue  # it exited meanwhile
                    raise StopperError(f"cannot trace thread {tid}: {exc.strerror}") from exc
                self.running.add(tid)

    # -- the loop ------------------------------------------------------------------------
    def resume(self, tid: int, sig: int = 0) -> None:
        # Filtered, a thread needs the stop at a call's exit only when the call may count.
        request = _CONT if self.filtered and tid not in self.entered else _SYSCALL
        try:
            self.ptrace(request, tid, 0, sig)
            self.stopped.discard(tid)
            self.running.add(tid)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise
            self.forget(tid)

    def forget(self, tid: int) -> None:
        self.running.discard(tid)
        self.stopped.discard(tid)
        self.entered.pop(tid, None)

    def wait(self) -> tuple[int, int] | None:
        """The next stop or exit of a traced thread, if one is pending (never blocks)."""
        try:
            tid, status = os.waitpid(-1, _WALL | os.WNOHANG)
        except ChildProcessError:
            return None
        return (tid, status) if tid else None

    @property
    def gone(self) -> bool:
        """True when every traced thread has ended."""
        return not self.running and not self.stopped

    def forget_dead(self) -> None:
        """Forget traced threads that ended without their exit being reported: a
        thread-group leader that is a zombie until its other threads end never stops."""
        for tid in [*self.running, *self.stopped]:
            if not _alive(tid):
                self.forget(tid)

    def handle(self, tid: int, status: int) -> bool:
        """Deal with one stop; True when the Nth counted call has just returned."""
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self.forget(tid)
            return False
        if not os.WIFSTOPPED(status):
            return False
        self.running.discard(tid)
        self.stopped.add(tid)
        sig = os.WSTOPSIG(status)
        event = status >> 16
        if sig == _SYSCALL_STOP or (sig == signal.SIGTRAP and event == _EVENT_SECCOMP):
            if self.on_syscall(tid):
                return True
            self.resume(tid)
        elif event == _EVENT_STOP and sig in (
            signal.SIGSTOP,
            signal.SIGTSTP,
            signal.SIGTTIN,
            signal.SIGTTOU,
        ):
            self.ptrace(_LISTEN, tid)  # a group stop: stay stopped as job control says
            self.stopped.discard(tid)
            self.running.add(tid)
        elif event or sig == signal.SIGTRAP:
            self.resume(tid)  # clone, fork, exec, or the stop after attaching
        else:
            self.resume(tid, sig)  # a signal for the tracee: deliver it
        return False

    def on_syscall(self, tid: int) -> bool:
        buf = ctypes.create_string_buffer(88)
        self.ptrace(_GET_SYSCALL_INFO, tid, 88, ctypes.addressof(buf))
        op, arch = buf.raw[0], struct.unpack_from("I", buf.raw, 4)[0]
        if op in (_INFO_ENTRY, _INFO_SECCOMP):
            nr, *args = struct.unpack_from("7Q", buf.raw, 24)
            call = self.store_call(tid, _CALLS.get(arch, {}).get(nr), args)
            if call is not None or not self.filtered:
                self.entered[tid] = call
            return False
        if op == _INFO_EXIT:
            call = self.entered.pop(tid, None)
            rval = struct.unpack_from("q", buf.raw, 24)[0]
            if call is not None and rval >= 0:
                self.count += 1
                self.calls.append(call)
                if self.count == self.target:
                    self.last = call
                    return True
        return False

    def store_call(self, tid: int, known: tuple[str, str] | None, args: list[int]) -> str | None:
        """A description of the call if it changes a store file, else None."""
        if known is None:
            return None
        name, kind = known
        try:
            if kind == "all":
                return name
            if kind in ("fd", "send"):
                path = os.readlink(f"/proc/{tid}/fd/{_int(args[0])}")
                if path.startswith("socket:"):
                    if not self.sends or name not in _SENDS:
                        return None
                    peer = self.server_peer(tid, _int(args[0]), path)
                    return None if peer is None else f"{name} to {peer}"
                if kind == "send":
                    return None
            elif kind in ("path", "open"):
                if kind == "open" and not args[1] & (_O_CREAT | _O_TRUNC):
                    return None
                path = self.resolve(tid, _AT_FDCWD, args[0])
            elif kind == "path2":
                path = self.resolve(tid, _AT_FDCWD, args[1])
            elif kind == "openat":
                if not args[2] & (_O_CREAT | _O_TRUNC):
                    return None
                path = self.resolve(tid, _int(args[0]), args[1])
            elif kind == "at":
                path = self.resolve(tid, _int(args[0]), args[1])
            else:  # at2: where a link goes
                path = self.resolve(tid, _int(args[2]), args[3])
        except OSError:
            return None
        return f"{name} {path}" if self.in_store(path) else None

    def server_peer(self, tid: int, fd: int, link: str) -> str | None:
        """Where socket ``fd`` of thread ``tid`` is connected, if it is a connection to a
        server: a stream socket whose peer has an address. Pipes never get here; an
        unnamed socket pair's peer has none."""
        tgid = _thread_group(tid)
        key = (tgid, fd, link)
        if key not in self.peers:
            self.peers[key] = self._peer_of(tgid, fd)
        return self.peers[key]

    def _peer_of(self, tgid: int, fd: int) -> str | None:
        try:
            pidfd = os.pidfd_open(tgid)
        except OSError:
            return None
        try:
            copy = int(self.libc.syscall(_PIDFD_GETFD, pidfd, fd, 0))
        finally:
            os.close(pidfd)
        if copy < 0:
            return None
        try:
            with socket.socket(fileno=copy) as sock:
                if sock.type != socket.SOCK_STREAM:
                    return None
                peer = sock.getpeername()
        except OSError:
            return None  # not connected, or gone meanwhile
        if isinstance(peer, tuple):
            return f"{peer[0]}:{peer[1]}"
        name = peer.decode(errors="replace") if isinstance(peer, bytes) else str(peer)
        return name or None

    def resolve(self, tid: int, dirfd: int, address: int) -> str:
        path = _read_string(tid, address)
        if path.startswith("/"):
            return path
        base = f"/proc/{tid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{tid}/fd/{dirfd}"
        return os.path.join(os.readlink(base), path)

    def in_store(self, path: str) -> bool:
        path = os.path.normpath(path.removesuffix(" (deleted)"))
        return any(path == root or path.startswith(root + "/") for root in self.roots)

    # -- holding, detaching ------------------------------------------------------------
    def hold_all(self) -> None:
        """Stop every running thread (the one at the Nth call already is)."""
        for tid in list(self.running):
            try:
                self.ptrace(_INTERRUPT, tid)
            except OSError:
                self.forget(tid)
        deadline = time.monotonic() + HOLD_PATIENCE
        while self.running:
            found = self.wait()
            if found is None:
                self.forget_dead()
                if self.running and time.monotonic() > deadline:
                    raise StopperError(
                        f"threads {sorted(self.running)} neither stopped nor exited within "
                        f"{HOLD_PATIENCE:g}s of being interrupted"
                    )
                time.sleep(_POLL)
                continue
            tid, status = found
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self.forget(tid)
            elif os.WIFSTOPPED(status):
                self.running.discard(tid)
                self.stopped.add(tid)

    def reap(self) -> None:
        """Take every pending exit of a held thread (a kill the kit sent), leaving the
        held ones held: the traced process's parent can wait for it only once this
        process has."""
        while (found := self.wait()) is not None:
            tid, status = found
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self.forget(tid)
        self.forget_dead()

    def detach_all(self) -> None:
        """Let every traced thread go on, each from where it stands."""
        self.hold_all()
        for tid in list(self.stopped):
            with contextlib.suppress(OSError):
                self.ptrace(_DETACH, tid)
            self.forget(tid)
        # A thread or child started just before the hold is traced too and waits in
        # its first stop: let it go as well, or this process's exit would kill it.
        while (found := self.wait()) is not None:
            tid, status = found
            if os.WIFSTOPPED(status):
                with contextlib.suppress(OSError):
                    self.ptrace(_DETACH, tid)


def _alive(tid: int) -> bool:
    """True while thread ``tid`` exists and is no zombie."""
    try:
        stat = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def _thread_group(tid: int) -> int:
    """The process (thread-group leader) thread ``tid`` belongs to; ``tid`` if unknown."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{tid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    return tid


def _int(value: int) -> int:
    """A descriptor argument as the kernel reads it: a signed 32-bit int."""
    return ctypes.c_int32(value & 0xFFFFFFFF).value


def _read_string(tid: int, address: int, limit: int = 4096) -> str:
    """A NUL-terminated string from the tracee's memory, read page by page."""
    fd = os.open(f"/proc/{tid}/mem", os.O_RDONLY)
    try:
        data = b""
        while len(data) < limit:
            chunk = os.pread(fd, 4096 - (address + len(data)) % 4096, address + len(data))
            if not chunk:
                break
            end = chunk.find(b"\0")
            if end >= 0:
                return (data + chunk[:end]).decode("utf-8", "surrogateescape")
            data += chunk
        return data.decode("utf-8", "surrogateescape")
    finally:
        os.close(fd)


def tree_threads(pid: int) -> list[int]:
    """Every thread of ``pid`` and of its descendants."""
    found: list[int] = []
    pending = [pid]
    while pending:
        process = pending.pop()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{process}/task")]
        except OSError:
            continue
        found += tids
        for tid in tids:
            try:
                children = Path(f"/proc/{process}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            pending += [int(c) for c in children]
    return found


def tree_states(pid: int) -> str:
    """Each thread of ``pid``'s tree with its state and what it waits in, for a message
    about a tree that went silent (``4711 t ptrace_stop``: held by a tracer)."""
    states = []
    for tid in tree_threads(pid):
        try:
            stat = Path(f"/proc/{tid}/stat").read_text()
            wchan = Path(f"/proc/{tid}/wchan").read_text().strip() or "-"
        except OSError:
            continue
        states.append(f"{tid} {stat[stat.rfind(')') + 2 :][:1]} {wchan}")
    return ", ".join(states) or "no thread left"


def tree_sleeps(pid: int) -> bool:
    """True when every thread of ``pid``'s tree sleeps in the kernel, interruptibly (waits
    for a lock, a pipe, a socket), and there is at least one."""
    states = tree_states(pid).split(", ")
    return all(len(s.split()) == 3 and s.split()[1] == "S" for s in states)


def tree_cpu_ticks(pid: int) -> int:
    """The CPU time the threads of ``pid``'s tree have used, in clock ticks."""
    ticks = 0
    for tid in tree_threads(pid):
        try:
            stat = Path(f"/proc/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


async def until_done_or_silent(
    pending: Sequence[asyncio.Future[_T] | asyncio.Future[str]],
    pid: int,
    silence: float,
    cap: float,
) -> bool:
    """Wait until one of ``pending`` is done (True), or until ``pid``'s tree has used no
    CPU time for ``silence`` seconds or ``cap`` seconds have passed (False).

    A traced process is slow (every system call stops it twice), slower still on a
    busy machine: the deadline is on silence, not on how long the work takes.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + cap
    used = tree_cpu_ticks(pid)
    while True:
        done, _ = await asyncio.wait(
            pending,
            timeout=min(silence, max(0.0, end - loop.time())),
            return_when="FIRST_COMPLETED",
        )
        if done:
            return True
        now = tree_cpu_ticks(pid)
        if now == used or loop.time() >= end:
            return False
        used = now


def _main(pid: int, target: int, roots: list[str]) -> int:
    flags = (SENDS_FLAG, FILTERED_FLAG)
    tracer = _Tracer(
        [root for root in roots if root not in flags],
        target,
        sends=SENDS_FLAG in roots,
        filtered=FILTERED_FLAG in roots,
    )
    out = sys.stdout
    try:
        tracer.attach_tree(pid)
    except StopperError as exc:
        out.write(f"error {exc}\n")
        out.flush()
        return 1
    out.write("attached\n")
    out.flush()
    stdin = sys.stdin.fileno()
    stops = _stop_signals()
    looked = time.monotonic()
    while True:
        found = tracer.wait()
        # The kit's end of stdin is looked for when no stop is pending, and at least
        # every _POLL seconds while stops keep coming: a tree that never stops making
        # system calls (a writer polling for a lock) must not keep this process alive.
        if found is None or time.monotonic() - looked >= _POLL:
            looked = time.monotonic()
            # A traced process that exited can stay a zombie whose exit is never
            # reported here (a thread-group leader whose exit waits on its threads'):
            # it has ended all the same, and this process's exit lets its parent reap it.
            ended = found is None and (tracer.gone or not _alive(pid))
            # With no stop pending, sleep until the next one (its SIGCHLD) or a line
            # from the kit; _IDLE bounds the sleep for an exit that sends no signal.
            wait = _IDLE if found is None else 0.0
            ready = [] if ended else select.select([stdin, stops], [], [], wait)[0]
            if stops in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(stops, 4096)
            if ended or (stdin in ready and not os.read(stdin, 64)):
                # The kit is done with it (or nothing is left): exiting kills the tracees.
                out.write("".join(f"{call}\n" for call in [f"count {tracer.count}", *tracer.calls]))
                out.flush()
                return 0
        if found is None:
            continue
        if tracer.handle(*found):
            break
    try:
        tracer.hold_all()
    except StopperError as exc:
        out.write(f"error {exc}\n")
        out.flush()
        return 1
    out.write(f"stopped {tracer.count} {tracer.last}\n")
    out.flush()
    if _command(tracer, stdin, pid) == "resume" and not tracer.filtered:
        tracer.detach_all()
    return 0


def _stop_signals() -> int:
    """A descriptor that becomes readable when a traced thread stops or ends: the
    kernel tells a tracer of each by SIGCHLD, written here by `signal.set_wakeup_fd`.
    Waiting on it rather than polling keeps each of the traced tree's system calls
    from waiting out a poll interval (two stops a call)."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    return read_end


def _command(tracer: _Tracer, stdin: int, pid: int) -> str:
    """The kit's next line ("" at end of stdin), reaping held threads the kit kills
    meanwhile; "" at once when none is left or ``pid`` has ended."""
    line = b""
    while not tracer.gone and _alive(pid):
        if select.select([stdin], [], [], _POLL)[0]:
            chunk = os.read(stdin, 64)
            line += chunk
            if not chunk or b"\n" in line:
                break
        tracer.reap()
    return line.decode(errors="replace").strip()


# -- the kit's end -------------------------------------------------------------------------


class SyscallStopper:
    """The stopper process for one process tree: `start`, then `outcome`, then `resume` or `kill`.

    Each of its waits lasts at most ``patience`` seconds; then the stopper process
    is killed (and the traced tree with it) and `StopperHung` says what was awaited.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        pid: int,
        target: int,
        stderr: IO[bytes],
        patience: float,
        filtered: bool = False,
    ) -> None:
        self.process = process
        self.filtered = filtered
        self.pid = pid
        """The traced process."""
        self.target = target
        self.patience = patience
        self._stderr = stderr
        self._outcome: asyncio.Future[str] | None = None

    @classmethod
    async def start(
        cls,
        pid: int,
        roots: Sequence[Path],
        target: int,
        patience: float = STOPPER_PATIENCE,
        *,
        sends: bool = False,
        filtered: bool = False,
    ) -> SyscallStopper:
        """Trace ``pid``'s tree, to hold it after its ``target``-th call that changes a
        file under one of ``roots`` (a store, a workspace) or, with ``sends``, that
        sends a request to a server (a round trip of a backend whose data lives there).

        With ``filtered``, the tree is to install `store_call_filter` once this returns
        and before its first store call: it then stops only at the calls that may
        count. Such a tree can be killed where it is held, not resumed.

        Returns once every thread is traced. Raises `StopperError` if it cannot be,
        `StopperHung` if the stopper process says nothing within ``patience`` seconds.
        """
        # Open for the stopper's whole life: `finish`, `resume` or `kill` closes it.
        stderr = tempfile.TemporaryFile()  # noqa: SIM115
        # Run as a plain script (it needs only the standard library): importing the
        # kit's package for it would cost a quarter of a second per hold.
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            __file__,
            str(pid),
            str(target),
            *([SENDS_FLAG] if sends else []),
            *([FILTERED_FLAG] if filtered else []),
            *(str(root) for root in roots),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        stopper = cls(process, pid, target, stderr, patience, filtered)
        line = await stopper._within(stopper._line(), "say it has attached")
        if line != "attached":
            await stopper.kill()
            raise StopperError(line.removeprefix("error ") or "the stopper process exited")
        stopper._outcome = asyncio.ensure_future(stopper._line())
        return stopper

    async def _line(self) -> str:
        assert self.process.stdout is not None
        return (await self.process.stdout.readline()).decode().strip()

    async def _within(self, step: Awaitable[_T], waiting_for: str) -> _T:
        """``step``'s result, or `StopperHung` (the stopper process killed) after ``patience``."""
        try:
            return await asyncio.wait_for(step, self.patience)
        except TimeoutError:
            said = self.stderr_tail()
            await self._kill_process()
            raise StopperHung(self.pid, self.target, waiting_for, self.patience, said) from None

    async def _kill_process(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        # SIGKILL always ends it; the wait is bounded all the same.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), self.patience)
        if self._outcome is not None and not self._outcome.done():
            self._outcome.cancel()
        self._stderr.close()

    @property
    def outcome(self) -> asyncio.Future[str]:
        """Resolves to ``stopped N CALL`` once the target call returned and the tree is
        held, to ``count K`` once the stopper process ended first (see `finish`), to
        ``error ...`` if a thread would not stop, or to "" if it died."""
        assert self._outcome is not None
        return self._outcome

    async def finish(self) -> list[str]:
        """The target call no longer matters (the operation ended first): the counted
        calls the stopper process saw, described. Its exit kills the traced process."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        line = await self._within(self.outcome, "report the calls it counted")
        if not line.startswith("count "):
            said = self.stderr_tail().strip() or "nothing"
            await self._kill_process()
            raise StopperDied(
                f"the stopper process tracing process {self.pid} ended without its count "
                f"({line or 'no output'}); its stderr: {said}"
            )
        calls: list[str] = []
        for _ in range(int(line.split()[1])):
            calls.append(await self._within(self._line(), "list the calls it counted"))
        await self._within(self.process.wait(), "exit after its count")
        self._stderr.close()
        return calls

    async def resume(self) -> None:
        """Let the held tree go on from where it stands (not a ``filtered`` one: without
        its tracer, its trapped calls would fail)."""
        if self.filtered:
            raise ValueError("a tree traced under the store call filter can be killed, not resumed")
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            self.process.stdin.write(b"resume\n")
            with contextlib.suppress(ConnectionError):
                await self.process.stdin.drain()
        await self._within(self.process.wait(), "let the held process go and exit")
        self._stderr.close()

    async def kill(self) -> None:
        """Kill the held tree where it stands (the stopper process exits; ptrace's EXITKILL).

        Safe to call at any time, also after the stopper process has ended: the end
        of every hold, whatever happened in it."""
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        if self._outcome is not None and not self._outcome.done():
            self._outcome.cancel()
            await asyncio.wait([self._outcome])  # its read of stdout ended: ours may start
        await self._within(self._read_to_exit(), "exit, killing the traced process")
        self._stderr.close()

    async def _read_to_exit(self) -> None:
        """Read what the stopper process still writes until it exits: ending before its
        target, it lists every call it counted, and a list longer than a pipe holds (a
        writer polling for a lock makes thousands of calls) would keep it from exiting
        if nobody read it."""
        assert self.process.stdout is not None
        while await self.process.stdout.read(1 << 16):
            pass
        await self.process.wait()

    def stderr_tail(self, limit: int = 800) -> str:
        """The last ``limit`` characters the stopper process wrote to stderr."""
        if self._stderr.closed:
            return ""
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4 * limit)
        return os.pread(fd, size - start, start).decode(errors="replace")[-limit:]


if __name__ == "__main__":
    sys.exit(_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))
