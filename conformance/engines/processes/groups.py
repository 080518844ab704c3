"""Process groups: a killed worker takes every process it started with it.

A worker may not be alone: a backend can run in a child process of its own (a
stdio backend is one process per handle). Killing only the worker would leave
that child writing to the store while the kit reopens it and judges what it
finds. So every worker starts its own process group (``start_new_session``),
a kill is sent to the whole group, and the kit waits until no live member of
the group is left before it looks at the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import time
from pathlib import Path

__all__ = ["end_with_parent", "group_members", "kill_group", "wait_group_gone"]


def group_members(pgid: int) -> list[int]:
    """The pids of live processes (zombies excluded) in process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid`` (nothing if it is already gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def wait_group_gone(pgid: int, within: float = 30.0) -> None:
    """Return once group ``pgid`` has no live process; `TimeoutError` after ``within`` s.

    Signal delivery is asynchronous: a process sent SIGKILL may finish the system
    call it is in. Polling /proc is the only way to see a grandchild die, since
    only its parent can wait for it.
    """
    deadline = time.monotonic() + within
    while group_members(pgid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process group {pgid} still has live members after kill")
        await asyncio.sleep(0.002)


_PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` (its parent) ends, however
    it ends; end at once if it has ended already.

    For the processes the runner runs checks in: a run killed with SIGKILL cannot tell
    them to stop, and a check may run for minutes. Their own workers, fork server and
    stoppers then end at end of file on the pipes they had to it. Linux only
    (``prctl(PR_SET_PDEATHSIG)``); elsewhere nothing is done.
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(libc_name, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the request took effect
        os._exit(1)
