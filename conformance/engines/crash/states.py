"""Crash states: what a disk may hold after a power loss, given the operations issued before it.

This module only computes; it knows nothing about checkpointers. A
`checkpointspec.conformance.engines.crash.disk.SimulatedDisk` records the mutating
operations a backend issues as `Op` values (numbered from 1) and hands them,
with the image it started from, to a `CrashPlan`. The rules, after ALICE and
CrashMonkey, for a power loss right after operation ``k``:

* An operation is **durable** when a barrier issued after it, at or before
  ``k``, covers it: a ``write`` or ``truncate`` of a file is covered by an
  ``fsync`` of that file (by inode, whatever name it was reached by); a
  directory entry operation (``create``, ``mkdir``, ``rmdir``, ``link``,
  ``rename``, ``unlink``) by an ``fsync_dir`` of its directory (of either
  directory, for a rename: a rename is one atomic change). Durable operations are in every crash state.
* Every other operation up to ``k`` is **pending**: the disk may have kept any
  of them, in any order, and a write may be torn. The states built are
  - ``durable``: no pending operation kept (what a strict disk guarantees);
  - ``prefix``: the first ``j`` pending operations, for each ``j`` (the last is
    everything issued, the state a process kill leaves);
  - ``omit``: every pending operation but one (later ones reached the disk first);
  - ``torn``: the pending operations before the last pending write, then that
    write torn (`tears`): half of it, its bytes up to a 512-byte sector
    boundary, up to its first or last line break (whole lines of a batch of
    records), zeros in its place (the size grew, the data never came), or its
    last sector replaced by garbage.
* A state is replayed from the starting image by applying the kept operations
  in the order they were issued. Entry operations replay by inode: a rename
  links its inode under the new name and removes the old name only if it still
  names that inode; an unlink removes a name only if it still names the inode
  it removed; a link adds a second name of its inode. A name whose directory is
  missing from a state is not in it.
"""

from __future__ import annotations

import posixpath
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

__all__ = [
    "BARRIER_KINDS",
    "DATA_KINDS",
    "ENTRY_KINDS",
    "SECTOR",
    "CrashPlan",
    "CrashSpec",
    "CrashState",
    "Image",
    "Op",
    "Tear",
    "append_op",
    "server_crash_specs",
    "tears",
]

SECTOR: Final = 512
DATA_KINDS: Final = frozenset({"write", "truncate"})
ENTRY_KINDS: Final = frozenset({"create", "mkdir", "rmdir", "link", "rename", "unlink"})
BARRIER_KINDS: Final = frozenset({"fsync", "fsync_dir"})
_SECTOR_TEARS: Final = 4
"""Sector-boundary tears per write: the first two and the last two boundaries."""


class Op(NamedTuple):
    """One recorded operation. Paths are relative to the disk's root (``""`` is the root)."""

    number: int
    """Position in the recording, from 1: a power loss "at k" follows op k."""
    kind: str
    """One of `DATA_KINDS`, `ENTRY_KINDS` or `BARRIER_KINDS`."""
    path: str
    """The name operated on; for data ops and fsync, the file's name when the op was issued."""
    ino: int = 0
    """The file affected (0 for mkdir, rmdir and fsync_dir)."""
    dst: str = ""
    """A rename's or a link's new name."""
    offset: int = 0
    """Where a write starts; the size a truncate leaves."""
    data: bytes = b""
    """The bytes a write wrote."""

    @property
    def dirs(self) -> tuple[str, ...]:
        """The directories whose entries an entry operation changes (none for other ops)."""
        if self.kind == "rename":
            return (posixpath.dirname(self.path), posixpath.dirname(self.dst))
        if self.kind == "link":
            return (posixpath.dirname(self.dst),)
        if self.kind in ENTRY_KINDS:
            return (posixpath.dirname(self.path),)
        return ()

    def __str__(self) -> str:
        where = self.path or "."
        if self.kind == "write":
            return f"#{self.number} write {where} {len(self.data)} bytes at {self.offset}"
        if self.kind == "truncate":
            return f"#{self.number} truncate {where} to {self.offset}"
        if self.kind in ("rename", "link"):
            return f"#{self.number} {self.kind} {where} -> {self.dst}"
        return f"#{self.number} {self.kind} {where}"


def append_op(
    ops: list[Op],
    kind: str,
    path: str,
    *,
    ino: int = 0,
    dst: str = "",
    offset: int = 0,
    data: bytes = b"",
) -> None:
    """Add the next operation to a recording: it is numbered ``len(ops) + 1``."""
    ops.append(Op(len(ops) + 1, kind, path, ino, dst, offset, data))


class Image(NamedTuple):
    """A disk's content: file names to inodes, inode bytes, directories (``""`` is the root)."""

    names: Mapping[str, int]
    data: Mapping[int, bytes]
    dirs: frozenset[str]


class Tear(NamedTuple):
    """How a torn write reached the disk: its first ``keep`` bytes, then ``fill`` up to its end."""

    keep: int
    fill: str
    """``""`` (nothing more: the file is shorter or keeps its old bytes), ``"zeros"`` or ``"garbage"``."""
    label: str
    whole_lines: bool = False
    """It keeps whole lines of a write of several: what a log of one line per record
    shows of a batch written at once as a shorter batch, whole records and no torn one."""


def tears(op: Op) -> list[Tear]:
    """The torn versions of write ``op`` that crash states use (see the module docstring)."""
    n, start = len(op.data), op.offset
    found: dict[tuple[int, str], str] = {}
    if n >= 2:
        found[(n // 2, "")] = f"first {n // 2} of {n} bytes"
    first = (start // SECTOR + 1) * SECTOR
    bounds = range(first, start + n, SECTOR)
    chosen = sorted({*bounds[:2], *bounds[-2:]}) if len(bounds) > _SECTOR_TEARS else bounds
    for bound in chosen:
        found.setdefault(
            (bound - start, ""), f"first {bound - start} of {n} bytes (up to the sector at {bound})"
        )
    # Line breaks inside the write, not at its end: the first and the last.
    breaks = [i + 1 for i in range(n - 1) if op.data[i] == 0x0A]
    lines = sorted({breaks[0], breaks[-1]}) if breaks else []
    for keep in lines:
        found.setdefault((keep, ""), f"first {keep} of {n} bytes (whole lines only)")
    if n:
        found[(0, "zeros")] = f"{n} zero bytes instead of its data"
        last = max(start, (start + n - 1) // SECTOR * SECTOR)
        found[(last - start, "garbage")] = (
            f"its last sector ({start + n - last} bytes at {last}) garbage"
        )
    return [
        Tear(keep, fill, label, whole_lines=not fill and keep in lines)
        for (keep, fill), label in found.items()
    ]


class CrashSpec(NamedTuple):
    """One crash state, described but not built (`CrashPlan.build` builds it)."""

    point: int
    """Ops 1..point were issued before the power loss."""
    kind: str
    """``durable``, ``prefix``, ``omit`` or ``torn``; ``kill`` for `CrashPlan.kill`."""
    arg: int
    """How many pending ops a prefix keeps; the op an omission leaves out; the `tears` index."""
    label: str

    def __str__(self) -> str:
        if self.kind == "kill":
            return f"killed after op #{self.point}, {self.label}"
        return f"power loss after op #{self.point}, {self.label}"


class CrashState(NamedTuple):
    """What the disk holds after one power loss: files (by relative path) and directories."""

    spec: CrashSpec
    files: Mapping[str, bytes]
    dirs: frozenset[str]

    def materialise(self, target: Path | str) -> None:
        """Write this state into the existing, empty directory ``target`` (which plays the root)."""
        base = Path(target)
        for rel in sorted(d for d in self.dirs if d):
            (base / rel).mkdir(parents=True, exist_ok=True)
        for rel, data in self.files.items():
            (base / rel).write_bytes(data)


class CrashPlan:
    """Every crash state of one recording: ``base`` is the starting image, ``ops`` what followed."""

    def __init__(self, base: Image, ops: Sequence[Op]) -> None:
        self.base = base
        self.ops = tuple(ops)
        self._pending = self._pending_after_each_op()

    def _pending_after_each_op(self) -> list[tuple[int, ...]]:
        pending: dict[int, Op] = {}
        after: list[tuple[int, ...]] = []
        for op in self.ops:
            if op.kind == "fsync":
                for i in [
                    i for i, p in pending.items() if p.kind in DATA_KINDS and p.ino == op.ino
                ]:
                    del pending[i]
            elif op.kind == "fsync_dir":
                for i in [i for i, p in pending.items() if op.path in p.dirs]:
                    del pending[i]
            else:
                pending[op.number] = op
            after.append(tuple(pending))
        return after

    @property
    def points(self) -> range:
        """Every crash point: a power loss may follow any recorded op."""
        return range(1, len(self.ops) + 1)

    def pending(self, point: int) -> tuple[int, ...]:
        """The ops up to ``point`` that no barrier up to ``point`` made durable, in issue order."""
        return self._pending[point - 1]

    def last_write(self, point: int) -> Op | None:
        """The last pending write at ``point``: the one a torn state tears."""
        for index in reversed(self.pending(point)):
            op = self.ops[index - 1]
            if op.kind == "write":
                return op
        return None

    def tear_of(self, spec: CrashSpec) -> Tear | None:
        """How a ``torn`` spec tears its write (None for other kinds)."""
        if spec.kind != "torn":
            return None
        write = self.last_write(spec.point)
        assert write is not None, f"no write to tear at op {spec.point}"
        return tears(write)[spec.arg]

    def specs(self, point: int) -> list[CrashSpec]:
        """The crash states at ``point``, durable image first, then everything issued."""
        pending = self.pending(point)
        found = [CrashSpec(point, "durable", 0, "durable image (every pending op lost)")]
        if pending:
            n = len(pending)
            found.append(CrashSpec(point, "prefix", n, f"all {n} pending ops kept"))
        found += [
            CrashSpec(point, "prefix", j, f"first {j} of {len(pending)} pending ops kept")
            for j in range(1, len(pending))
        ]
        if len(pending) >= 2:
            found += [
                CrashSpec(point, "omit", i, f"pending op {self.ops[i - 1]} lost, the rest kept")
                for i in pending[:-1]
            ]
        write = self.last_write(point)
        if write is not None:
            found += [
                CrashSpec(point, "torn", t, f"op {write} torn: {tear.label}")
                for t, tear in enumerate(tears(write))
            ]
        return found

    def all_specs(self) -> list[CrashSpec]:
        """The crash states at every point."""
        return [spec for point in self.points for spec in self.specs(point)]

    def kill(self, point: int) -> CrashSpec:
        """What a SIGKILL right after op ``point`` leaves: every op issued, none torn.

        The page cache outlives the process, so nothing the process wrote is lost;
        the same files as the ``prefix`` state keeping every pending op.
        """
        return CrashSpec(point, "kill", 0, "every op issued kept (a kill leaves the page cache)")

    def is_core(self, spec: CrashSpec) -> bool:
        """True for the durable image and the everything-issued state of a point."""
        full = spec.kind == "prefix" and spec.arg == len(self.pending(spec.point))
        return spec.kind == "durable" or full

    def keeps_whole_lines(self, spec: CrashSpec) -> bool:
        """True for a torn write that keeps whole lines of several (`Tear.whole_lines`)."""
        tear = self.tear_of(spec)
        return tear is not None and tear.whole_lines

    def sample(self, budget: int, rng: random.Random) -> list[CrashSpec]:
        """At most ``budget`` specs, all of them if they fit, in crash-point order.

        Over budget, the durable image and the full state of every point come
        first (they catch a missing barrier and a broken recovery), then the torn
        writes that keep whole lines (a batch of records written at once, cut between
        two: a partial batch readable as such, whichever seed), then the others;
        the tier that does not fit is drawn with ``rng``, so the same seed draws the
        same states.
        """
        specs = self.all_specs()
        if len(specs) <= budget:
            return specs
        core = [s for s in specs if self.is_core(s)]
        lines = [s for s in specs if s.kind == "torn" and self.keeps_whole_lines(s)]
        tiered = {*core, *lines}
        chosen: list[CrashSpec] = []
        for tier in (core, lines, [s for s in specs if s not in tiered]):
            left = budget - len(chosen)
            chosen += tier if len(tier) <= left else rng.sample(tier, left)
        order = {spec: n for n, spec in enumerate(specs)}
        return sorted(chosen, key=order.__getitem__)

    def build(self, spec: CrashSpec) -> CrashState:
        """Replay the base image and the ops ``spec`` keeps (see the module docstring)."""
        pending = self.pending(spec.point)
        torn: Op | None = None
        tear: Tear | None = None
        if spec.kind == "durable":
            kept: set[int] = set()
        elif spec.kind == "prefix":
            kept = set(pending[: spec.arg])
        elif spec.kind == "kill":
            kept = set(pending)
        elif spec.kind == "omit":
            kept = set(pending) - {spec.arg}
        elif spec.kind == "torn":
            torn, tear = self.last_write(spec.point), self.tear_of(spec)
            assert torn is not None
            kept = {i for i in pending if i < torn.number}
        else:
            raise ValueError(f"unknown crash state kind {spec.kind!r}")
        lost = set(pending) - kept
        replay = _Replay(self.base)
        for op in self.ops[: spec.point]:
            if op is torn and tear is not None:
                replay.torn_write(op, tear)
            elif op.number not in lost and op.kind not in BARRIER_KINDS:
                replay.apply(op)
        return replay.state(spec)


class _Replay:
    """A mutable image that ops are applied to; inodes are copied on their first change."""

    def __init__(self, base: Image) -> None:
        self.names = dict(base.names)
        self.dirs = set(base.dirs)
        self.base_data = base.data
        self.data: dict[int, bytearray] = {}

    def _buffer(self, ino: int) -> bytearray:
        buf = self.data.get(ino)
        if buf is None:
            buf = self.data[ino] = bytearray(self.base_data.get(ino, b""))
        return buf

    def _write(self, ino: int, offset: int, data: bytes) -> None:
        buf = self._buffer(ino)
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset : offset + len(data)] = data

    def apply(self, op: Op) -> None:
        kind = op.kind
        if kind == "write":
            self._write(op.ino, op.offset, op.data)
        elif kind == "truncate":
            buf = self._buffer(op.ino)
            if op.offset < len(buf):
                del buf[op.offset :]
            else:
                buf.extend(bytes(op.offset - len(buf)))
        elif kind == "create":
            self.names[op.path] = op.ino
        elif kind == "mkdir":
            self.dirs.add(op.path)
        elif kind == "rmdir":
            self.dirs.discard(op.path)
        elif kind == "link":
            self.names[op.dst] = op.ino
        elif kind == "rename":
            if self.names.get(op.path) == op.ino:
                del self.names[op.path]
            self.names[op.dst] = op.ino
        elif kind == "unlink":
            if self.names.get(op.path) == op.ino:
                del self.names[op.path]
        else:
            raise ValueError(f"cannot replay {op}")

    def torn_write(self, op: Op, tear: Tear) -> None:
        rest = len(op.data) - tear.keep
        if tear.fill == "zeros":
            tail = bytes(rest)
        elif tear.fill == "garbage":
            # Deterministic, never all zeros, never the data: what a stale block shows.
            tail = bytes(b | 0x80 for b in random.Random(op.number).randbytes(rest))
        else:
            tail = b""
        self._write(op.ino, op.offset, op.data[: tear.keep] + tail)

    def state(self, spec: CrashSpec) -> CrashState:
        # A directory, or a name in it, survives only if every directory above it did.
        dirs = frozenset(d for d in self.dirs if _reachable(d, self.dirs))
        files = {
            path: bytes(self.data[ino]) if ino in self.data else self.base_data.get(ino, b"")
            for path, ino in self.names.items()
            if _reachable(posixpath.dirname(path), dirs)
        }
        return CrashState(spec, files, dirs)


def _reachable(directory: str, dirs: set[str] | frozenset[str]) -> bool:
    while directory:
        if directory not in dirs:
            return False
        directory = posixpath.dirname(directory)
    return True  # the root itself always exists


def _overwrites(plan: CrashPlan) -> frozenset[int]:
    """The writes that land wholly within the size their file had when they were issued."""
    sizes = {ino: len(data) for ino, data in plan.base.data.items()}
    found = set()
    for op in plan.ops:
        if op.kind == "write":
            end = op.offset + len(op.data)
            if end <= sizes.get(op.ino, 0):
                found.add(op.number)
            sizes[op.ino] = max(sizes.get(op.ino, 0), end)
        elif op.kind == "truncate":
            sizes[op.ino] = op.offset
    return frozenset(found)


def _sector_atomic(plan: CrashPlan, spec: CrashSpec, overwrites: frozenset[int]) -> bool:
    """False for a tear that fills an overwrite with zeros or garbage.

    A server overwrites its files in place (PostgreSQL rewrites the last page of a
    preallocated WAL segment at every commit, records synced before included).
    A write that stops short leaves the sectors it did not reach as they were, which
    the tears cut at a sector boundary build; zeros and garbage stand for blocks a
    file grew by before their data came, which an overwrite allocates none of.
    """
    tear = plan.tear_of(spec)
    if tear is None or tear.fill == "":
        return True
    torn = plan.last_write(spec.point)
    return torn is None or torn.number not in overwrites


def server_crash_specs(
    plan: CrashPlan, acknowledged: Iterable[int], rng: random.Random, left: int
) -> list[CrashSpec]:
    """The power cuts of a server's data directory to judge, ``left`` in all (fewer when
    tears of overwrites are left out: a server overwrites in place, `_sector_atomic`):
    the cut right after each of the ``acknowledged`` points (how many ops had completed
    when a call was answered; the durable image then) first, then states drawn with
    ``rng``."""
    points = sorted({point for point in acknowledged if point > 0})
    first = [CrashSpec(p, "durable", 0, "durable image (every pending op lost)") for p in points]
    first = first[:left] if len(first) <= left else sorted(rng.sample(first, left))
    overwrites = _overwrites(plan)
    rest = [
        spec
        for spec in plan.sample(left, rng)
        if spec not in first and _sector_atomic(plan, spec, overwrites)
    ]
    wanted = left - len(first)
    return first + (rng.sample(rest, wanted) if len(rest) > wanted else rest)
