"""The power-loss simulation: `SimulatedDisk`, its crash states, and the DUR-003 check.

The first half drives the disk by hand and checks each rule of crash-state
generation (`checkpointspec.conformance.engines.crash.states`). The second half runs the
check against the file backend, correct and with one durability bug each; the
factories are module-level so that the kit can load them by ``module:function``.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.memory import MemoryCheckpointer, store_for
from checkpointspec.conformance.engines.crash import verdicts as crash_states
from checkpointspec.conformance.engines.crash.disk import SimulatedDisk, tears
from checkpointspec.conformance.engines.crash.states import SECTOR, CrashPlan, CrashSpec, CrashState
from checkpointspec.conformance.engines.run.profiles import PROFILES
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.registry import CHECKS_BY_NAME as CHECKS
from checkpointspec.conformance.running.report import CheckResult
from checkpointspec.conformance.running.runner import run_check
from checkpointspec.spec import (
    BackendContext,
    Capability,
    FileSystem,
    FileSystemPorted,
    SessionEvent,
    UserPrompt,
)

POWERLOSS = CHECKS["DUR-003::acknowledged_writes_survive_power_loss"]


# -- the disk -------------------------------------------------------------------------
@pytest.fixture
def disk(tmp_path: Path) -> SimulatedDisk:
    return SimulatedDisk(tmp_path / "root")


def p(disk: SimulatedDisk, name: str) -> str:
    return os.path.join(disk.root, name)


def states(plan: CrashPlan, point: int | None = None) -> list[CrashState]:
    points = plan.points if point is None else [point]
    return [plan.build(spec) for k in points for spec in plan.specs(k)]


def by_kind(plan: CrashPlan, point: int, kind: str) -> list[CrashState]:
    return [plan.build(s) for s in plan.specs(point) if s.kind == kind]


def full(plan: CrashPlan, point: int) -> CrashState:
    n = len(plan.pending(point))
    return (
        plan.build(CrashSpec(point, "prefix", n, "all"))
        if n
        else by_kind(plan, point, "durable")[0]
    )


def test_reads_writes_and_descriptors_behave_like_files(disk: SimulatedDisk) -> None:
    disk.mkdir(p(disk, "d"))
    fd = disk.open(p(disk, "d/f"), create=True)
    disk.write(fd, b"abc", 0)
    disk.write(fd, b"Z", 5)
    assert disk.read(fd, 100, 0) == b"abc\0\0Z"
    assert disk.fstat(fd).size == 6
    disk.truncate(fd, 2)
    assert disk.read(fd, 100, 0) == b"ab"
    assert sorted(disk.listdir(disk.root)) == ["d"]
    assert disk.listdir(p(disk, "d")) == ["f"]
    with pytest.raises(FileNotFoundError):
        disk.open(p(disk, "d/missing"))
    with pytest.raises(FileNotFoundError):
        disk.open(p(disk, "nodir/f"), create=True)
    with pytest.raises(PermissionError, match="outside"):
        disk.open("/elsewhere/f", create=True)
    assert disk.stat(p(disk, "d/missing")) is None
    disk.close(fd)
    with pytest.raises(OSError, match="Bad file descriptor"):
        disk.read(fd, 1, 0)


def test_rename_replaces_atomically_and_old_descriptors_keep_the_old_file(
    disk: SimulatedDisk,
) -> None:
    old = disk.open(p(disk, "log"), create=True)
    disk.write(old, b"old", 0)
    new = disk.open(p(disk, "tmp"), create=True)
    disk.write(new, b"new", 0)
    identity = disk.fstat(new).identity
    disk.rename(p(disk, "tmp"), p(disk, "log"))
    assert disk.read(old, 10, 0) == b"old"
    stat = disk.stat(p(disk, "log"))
    assert stat is not None
    assert stat.identity == identity
    assert disk.stat(p(disk, "tmp")) is None


def test_locks_belong_to_open_file_descriptions(disk: SimulatedDisk) -> None:
    a = disk.open(p(disk, "m"), create=True)
    b = disk.open(p(disk, "m"))
    a2 = disk.dup(a)
    assert disk.lock(a, blocking=False)
    assert not disk.lock(b, blocking=False), "two opens exclude each other"
    assert disk.lock(a2, blocking=False), "a dup shares the lock"
    disk.close(a2)
    assert not disk.lock(b, blocking=False), "closing one of two descriptors keeps the lock"
    disk.close(a)
    assert disk.lock(b, blocking=False), "closing the last descriptor releases it"


def test_a_blocking_lock_returns_once_another_thread_releases_it(disk: SimulatedDisk) -> None:
    held = disk.open(p(disk, "m"), create=True)
    waiter = disk.open(p(disk, "m"))
    assert disk.lock(held, blocking=False)
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(disk.lock(waiter, blocking=True)))
    thread.start()
    disk.unlock(held)
    thread.join()
    assert got == [True]
    assert not disk.lock(held, blocking=False), "the waiter holds it now"


def test_every_mutation_is_recorded_with_its_inode(disk: SimulatedDisk) -> None:
    disk.mkdir(p(disk, "d"))
    fd = disk.open(p(disk, "d/a"), create=True)
    disk.write(fd, b"x", 0)
    disk.truncate(fd, 0)
    disk.fsync(fd)
    disk.rename(p(disk, "d/a"), p(disk, "d/b"))
    disk.fsync_dir(p(disk, "d"))
    disk.unlink(p(disk, "d/b"))
    kinds = [(op.kind, op.path) for op in disk.ops]
    assert kinds == [
        ("mkdir", "d"),
        ("create", "d/a"),
        ("write", "d/a"),
        ("truncate", "d/a"),
        ("fsync", "d/a"),
        ("rename", "d/a"),
        ("fsync_dir", "d"),
        ("unlink", "d/b"),
    ]
    inodes = {op.ino for op in disk.ops if op.kind not in ("mkdir", "fsync_dir")}
    assert len(inodes) == 1


# -- crash states ---------------------------------------------------------------------
def test_an_fsynced_write_survives_every_crash_state(disk: SimulatedDisk) -> None:
    fd = disk.open(p(disk, "f"), create=True)
    disk.fsync_dir(disk.root)
    disk.write(fd, b"durable", 0)
    disk.fsync(fd)
    synced = disk.op_count
    disk.write(fd, b" and more", 7)
    other = disk.open(p(disk, "g"), create=True)
    disk.write(other, b"unsynced", 0)
    plan = disk.crash_plan()
    for k in plan.points:
        for state in states(plan, k):
            if k >= synced:
                assert state.files["f"].startswith(b"durable"), state.spec


def test_an_unsynced_write_is_absent_from_the_durable_image_and_present_in_the_full_state(
    disk: SimulatedDisk,
) -> None:
    fd = disk.open(p(disk, "f"), create=True)
    disk.fsync_dir(disk.root)
    disk.write(fd, b"volatile", 0)
    plan = disk.crash_plan()
    k = disk.op_count
    assert by_kind(plan, k, "durable")[0].files == {"f": b""}
    assert full(plan, k).files == {"f": b"volatile"}


def test_a_file_created_without_fsync_dir_may_vanish(disk: SimulatedDisk) -> None:
    fd = disk.open(p(disk, "f"), create=True)
    disk.write(fd, b"data", 0)
    disk.fsync(fd)
    plan = disk.crash_plan()
    k = disk.op_count
    assert "f" not in by_kind(plan, k, "durable")[0].files
    assert full(plan, k).files["f"] == b"data"
    disk.fsync_dir(disk.root)
    plan = disk.crash_plan()
    assert all(s.files.get("f") == b"data" for s in states(plan, disk.op_count))


def test_a_rename_without_fsync_dir_may_be_lost(disk: SimulatedDisk) -> None:
    for name in ("log", "tmp"):
        fd = disk.open(p(disk, name), create=True)
        disk.write(fd, name.encode(), 0)
        disk.fsync(fd)
    disk.fsync_dir(disk.root)
    disk.rename(p(disk, "tmp"), p(disk, "log"))
    plan = disk.crash_plan()
    k = disk.op_count
    assert by_kind(plan, k, "durable")[0].files == {"log": b"log", "tmp": b"tmp"}
    assert full(plan, k).files == {"log": b"tmp"}
    disk.fsync_dir(disk.root)
    assert all(s.files == {"log": b"tmp"} for s in states(disk.crash_plan(), disk.op_count))


def test_a_single_omission_keeps_the_later_ops(disk: SimulatedDisk) -> None:
    fds = [disk.open(p(disk, name), create=True) for name in ("a", "b", "c")]
    disk.fsync_dir(disk.root)
    for fd in fds:
        disk.write(fd, b"x", 0)
    plan = disk.crash_plan()
    k = disk.op_count
    omitted = {s.files["a"] + s.files["b"] + s.files["c"] for s in by_kind(plan, k, "omit")}
    assert omitted == {b"xx"}
    assert len(by_kind(plan, k, "omit")) == 2, "leaving out the last op is a prefix already"
    prefixes = sorted(
        s.files["a"] + s.files["b"] + s.files["c"] for s in by_kind(plan, k, "prefix")
    )
    assert prefixes == [b"x", b"xx", b"xxx"]


def test_torn_writes_produce_the_documented_byte_prefixes(disk: SimulatedDisk) -> None:
    fd = disk.open(p(disk, "f"), create=True)
    disk.fsync_dir(disk.root)
    disk.write(fd, b"h" * 100, 0)
    disk.fsync(fd)
    data = bytes(range(256)) * 5 + b"end!"  # 1284 bytes at offset 100: ends at 1384
    disk.write(fd, data, 100)
    plan = disk.crash_plan()
    torn = {
        (t.keep, t.fill): state.files["f"]
        for t, state in zip(tears(plan.ops[-1]), by_kind(plan, disk.op_count, "torn"), strict=True)
    }
    head = b"h" * 100
    # Line breaks at 10, 266, ... 1034 of the data: the first and the last are tears.
    assert torn.keys() == {
        (642, ""),
        (412, ""),
        (924, ""),
        (11, ""),
        (1035, ""),
        (0, "zeros"),
        (924, "garbage"),
    }
    assert torn[(11, "")] == head + data[:11]  # up to the first line break
    assert torn[(1035, "")] == head + data[:1035]  # up to the last
    assert torn[(642, "")] == head + data[:642]  # half
    assert torn[(412, "")] == head + data[: SECTOR - 100]  # up to the sector at 512
    assert torn[(924, "")] == head + data[: 2 * SECTOR - 100]  # up to the sector at 1024
    assert torn[(0, "zeros")] == head + bytes(len(data))
    garbage = torn[(924, "garbage")]
    assert garbage[:1024] == head + data[:924]
    assert len(garbage) == 1384
    assert garbage[1024:] != data[924:]
    assert garbage[1024:].count(0) == 0


def test_long_writes_tear_at_the_first_and_last_sector_boundaries(disk: SimulatedDisk) -> None:
    fd = disk.open(p(disk, "f"), create=True)
    disk.write(fd, bytes(10 * SECTOR), 0)
    cut_short = sorted(t.keep for t in tears(disk.ops[-1]) if not t.fill)
    assert cut_short == [512, 1024, 5 * SECTOR, 8 * SECTOR, 9 * SECTOR]  # 5 * SECTOR: half


def test_the_full_state_is_what_the_disk_shows(disk: SimulatedDisk) -> None:
    run_file_workload(disk)
    plan = disk.crash_plan()
    image = disk.image()
    live = {path: image.data[ino] for path, ino in image.names.items()}
    assert full(plan, disk.op_count).files == live


def test_sampling_is_deterministic_and_keeps_the_core_states(disk: SimulatedDisk) -> None:
    run_file_workload(disk, durability=Durability.PROCESS)
    plan = disk.crash_plan()
    assert len(plan.all_specs()) > 200
    first = plan.sample(200, random.Random(4))
    assert first == plan.sample(200, random.Random(4))
    assert first != plan.sample(200, random.Random(5))
    core = [s for s in plan.all_specs() if plan.is_core(s)]
    assert set(core) <= set(first)
    lines = [s for s in plan.all_specs() if s.kind == "torn" and plan.keeps_whole_lines(s)]
    assert lines, "the workload writes records of several lines at once"
    assert set(lines) <= set(first)
    assert first == sorted(first, key=plan.all_specs().index)


def test_a_crash_state_reopens_from_a_directory_and_from_a_fresh_disk(tmp_path: Path) -> None:
    disk = SimulatedDisk(tmp_path / "store")
    run_file_workload(disk)
    plan = disk.crash_plan()
    state = by_kind(plan, disk.op_count, "durable")[0]
    target = tmp_path / "copy"
    target.mkdir()
    state.materialise(target)
    from_dir = asyncio.run(texts_in(FileCheckpointer(target), "s"))
    again = SimulatedDisk.from_state(tmp_path / "store", state)
    from_disk = asyncio.run(texts_in(FileCheckpointer(tmp_path / "store", fs=again), "s"))
    assert from_dir == from_disk == ["one", "two", "three"]


def run_file_workload(disk: SimulatedDisk, durability: Durability = Durability.FSYNC) -> None:
    async def work() -> None:
        cp = FileCheckpointer(disk.root, fs=disk, durability=durability)
        await cp.append("s", [UserPrompt("one"), UserPrompt("two")])
        await cp.append("t", [UserPrompt("t1")])
        await cp.append("s", [UserPrompt("three")])
        await cp.truncate("t", 0)
        await cp.delete("t")
        await cp.append("t", [UserPrompt("t2")])
        await cp.close()

    asyncio.run(work())


async def texts_in(cp: FileCheckpointer, sid: str) -> list[str]:
    try:
        return [cast(UserPrompt, s.event).text async for s in cp.read(sid)]
    finally:
        await cp.close()


# -- the check against the file backend ---------------------------------------------------
class _DropBarriers:
    """A port that forwards everything but the barriers named in ``dropped``."""

    def __init__(self, fs: FileSystem, dropped: Sequence[str]) -> None:
        self._fs = fs
        self._dropped = frozenset(dropped)

    def __getattr__(self, name: str) -> Any:
        if name in self._dropped:
            return lambda *args, **kwargs: None
        return getattr(self._fs, name)


class NoDirSync(FileCheckpointer):
    """Bug: fsyncs file data but never a directory, so new logs and renames may vanish."""

    def on_filesystem(self, fs: FileSystem) -> FileCheckpointer:
        return super().on_filesystem(cast(FileSystem, _DropBarriers(fs, ["fsync_dir"])))


class NoDataSync(FileCheckpointer):
    """Bug: fsyncs directories but never file data, so appends may be lost."""

    def on_filesystem(self, fs: FileSystem) -> FileCheckpointer:
        return super().on_filesystem(cast(FileSystem, _DropBarriers(fs, ["fsync"])))


class SplitBatches(FileCheckpointer):
    """Bug: appends a batch one event at a time, each durable on its own."""

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = 0
        for event in events:
            head = await super().append(session_id, [event])
        return head


class PortedSplitBatches(FileCheckpointer):
    def on_filesystem(self, fs: FileSystem) -> FileCheckpointer:
        return SplitBatches(self._root, codec=self._codec, fs=fs)


class ClaimsDurable(FileCheckpointer):
    """Bug: never fsyncs (durability=process), yet declares DURABLE."""

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.capabilities = self.capabilities | {Capability.DURABLE}


class DurableMemory(MemoryCheckpointer):
    """Declares DURABLE but offers no file-system port: DUR-003 cannot run."""

    capabilities = MemoryCheckpointer.capabilities | {Capability.DURABLE}


def make_ported(ctx: BackendContext) -> FileCheckpointer:
    return FileCheckpointer(ctx.path, codec=ctx.codec)


def make_unsynced(ctx: BackendContext) -> FileCheckpointer:
    return ClaimsDurable(ctx.path, codec=ctx.codec, durability=Durability.PROCESS)


def make_no_dir_sync(ctx: BackendContext) -> FileCheckpointer:
    return NoDirSync(ctx.path, codec=ctx.codec)


def make_no_data_sync(ctx: BackendContext) -> FileCheckpointer:
    return NoDataSync(ctx.path, codec=ctx.codec)


def make_split_batches(ctx: BackendContext) -> FileCheckpointer:
    return PortedSplitBatches(ctx.path, codec=ctx.codec)


def make_durable_memory(ctx: BackendContext) -> MemoryCheckpointer:
    return DurableMemory(store_for(ctx.path))


def run_powerloss(target: str, seed: int, tmp_path: Path) -> CheckResult:
    return run_check(POWERLOSS, plan_run(target, profile="quick", seed=seed), tmp_path)


def test_the_opt_in_is_a_runtime_protocol(tmp_path: Path) -> None:
    assert isinstance(FileCheckpointer(tmp_path), FileSystemPorted)
    assert not isinstance(DurableMemory(), FileSystemPorted)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_DUR_003_the_file_backend_survives_every_crash_state(seed: int, tmp_path: Path) -> None:
    result = run_powerloss(f"{__name__}:make_ported", seed, tmp_path)
    assert result.status == "passed", result.detail


@pytest.mark.parametrize(
    ("factory", "rule_id", "evidence"),
    [
        ("make_unsynced", "DUR-003", "acknowledged events lost"),
        ("make_no_dir_sync", "DUR-003", "acknowledged events lost"),
        ("make_no_data_sync", "DUR-003", "raised corrupt store"),
        ("make_split_batches", "APPEND-003", "a partial batch"),
    ],
)
def test_DUR_003_catches_a_backend_that_does_not_sync(
    factory: str, rule_id: str, evidence: str, tmp_path: Path
) -> None:
    for seed in (0, 1):
        result = run_powerloss(f"{__name__}:{factory}", seed, tmp_path)
        assert result.status == "failed"
        assert result.violated_rule == rule_id, result.detail
        assert evidence in (result.detail or "")
        assert "crash state: power loss after op #" in (result.detail or "")
        assert result.replay is not None
        assert f"--seed {seed}" in result.replay


def test_DUR_003_checks_as_many_crash_states_as_the_profile_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checked: list[CrashSpec] = []
    check_state = crash_states.check_state

    async def counting(h: Any, rnd: Any, spec: CrashSpec, *rest: Any, **named: Any) -> None:
        checked.append(spec)
        await check_state(h, rnd, spec, *rest, **named)

    monkeypatch.setattr(crash_states, "check_state", counting)
    profile = msgspec.structs.replace(PROFILES["quick"], powerloss_states=300)
    result = run_check(
        POWERLOSS, plan_run(f"{__name__}:make_ported", profile=profile, seed=3), tmp_path
    )
    assert result.status == "passed", result.detail
    assert len(checked) == 300
    assert {spec.kind for spec in checked} == {"durable", "prefix", "omit", "torn"}


def test_DUR_003_is_skipped_with_a_reason_without_the_opt_in(tmp_path: Path) -> None:
    result = run_powerloss(f"{__name__}:make_durable_memory", 0, tmp_path)
    assert result.status == "skipped"
    assert "FileSystemPorted" in (result.reason or "")
    memory = run_powerloss("memory", 0, tmp_path)
    assert memory.status == "skipped"
    assert "DURABLE" in (memory.reason or "")


def test_a_session_listed_with_no_events_is_said_in_words_before_the_evidence() -> None:
    nothing = crash_states.Expected({}, frozenset())
    both = crash_states.Expected({"gamma": ("g1", "g2")}, frozenset({"gamma"}))
    flight = crash_states.Step("append('gamma', 2 events)", 0, 3, both)
    seen = crash_states.Seen({"gamma": ()}, {}, frozenset({"gamma"}), True, "ok", [])
    verdict = crash_states._judge(seen, nothing, flight, False, "DUR-002")
    assert verdict is not None
    rule_id, message, shape = verdict
    assert rule_id == "DUR-002"
    assert shape == "a session is listed with no events"
    assert message.startswith(
        "'gamma' is listed but has no events; after the interrupted append('gamma', 2 events) "
        "it must be absent, or hold its events (list_sessions shows ['gamma'], expected [] "
    ), message


def test_an_acknowledged_session_missing_from_the_listing_is_said_in_words() -> None:
    acked = crash_states.Expected({"s": ("a",)}, frozenset({"s"}))
    seen = crash_states.Seen({"s": ("a",)}, {}, frozenset(), True, "ok", [])
    verdict = crash_states._judge(seen, acked, None, False, "DUR-003")
    assert verdict == (
        "DUR-003",
        "'s' holds acknowledged events but is not listed (list_sessions shows [], expected ['s'])",
        "a session holding acknowledged events is not listed",
    )


def test_a_state_a_power_loss_leaves_that_a_kill_leaves_too_is_the_kills_defect() -> None:
    """One shape for the same kind of state, whichever check left it; a power loss's
    finding keeps the kill's rule as its other explanation, for the run to decide."""
    nothing = crash_states.Expected({}, frozenset())
    both = crash_states.Expected({"gamma": ("g1",)}, frozenset({"gamma"}))
    flight = crash_states.Step("append('gamma', 1 event)", 0, 3, both)
    seen = crash_states.Seen({"gamma": ()}, {}, frozenset({"gamma"}), True, "ok", [])
    killed = crash_states._judge(seen, nothing, flight, False, "DUR-002")
    powered_off = crash_states._judge(seen, nothing, flight, False, "DUR-003")
    assert killed is not None
    assert powered_off is not None
    assert killed.shape == powered_off.shape
