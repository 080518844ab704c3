"""A worker installs, on itself, the seccomp filter its tracer asked for.

The crash checks hold a worker at its Nth store-changing system call
(`checkpointspec.conformance.engines.crash.stopper`). Traced call by call, a
worker of many threads runs tens of times slower than untraced; under a seccomp
filter that traps only the calls the stopper may count, it stops only at those.
A process can install a filter only on itself, so the kit sends the filter (built
by the stopper, which knows the call numbers) with the worker's program, and the
worker installs it here before its first call.
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Final

__all__ = ["install_call_filter"]

_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_SET_MODE_FILTER: Final = 1
_SECCOMP_FILTER_FLAG_TSYNC: Final = 1
_SECCOMP_CALL: Final = {"x86_64": 317, "aarch64": 277}
_FILTER_ENTRY: Final = 8
"""Bytes of one ``struct sock_filter``."""


class _Program(ctypes.Structure):
    """``struct sock_fprog``."""

    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install_call_filter(program: bytes) -> None:
    """Install ``program`` (classic BPF, whole ``struct sock_filter`` entries) as a
    seccomp filter on every thread of this process and on the processes it starts.

    Without privileges a filter needs ``no_new_privs`` first (set here; it also
    stays with this process). Raises `OSError` with the kernel's reason if the
    kernel refuses either."""
    if not program or len(program) % _FILTER_ENTRY:
        raise ValueError(
            f"a filter is whole {_FILTER_ENTRY}-byte entries; got {len(program)} bytes"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
    entries = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len(program) // _FILTER_ENTRY, ctypes.addressof(entries))
    found = libc.syscall(
        ctypes.c_long(_SECCOMP_CALL[platform.machine()]),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if found < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp(SECCOMP_SET_MODE_FILTER): {os.strerror(code)}")
    if found > 0:  # TSYNC names a thread it could not give the filter to
        raise OSError(f"seccomp: thread {found} could not take the filter")
