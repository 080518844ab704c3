"""Checks of RESTORE-006: a restore killed at any point, or cut by a power loss, recovers whole.

Both checks build a session with files in a temporary workspace
(`build_session`), compute with the oracle (`plan_restore`, `apply_plan`) the
state a restore to its second prompt leaves, and after each crash run the
session layer's ``recover`` and require the files and the log to be exactly the
pre-restore or exactly the post-restore state, and a second ``recover`` to find
nothing left to do.

- ``killed_restore_recovers``: a clean run in a child process lists the fault
  points a restore reaches (its own, the backend's `FaultInjectable` points and
  the workspace file system's); then for each k a fresh session is built and a
  child SIGKILLs itself at the k-th (`checkpointspec.conformance.engines.crash.killed_layer_run`).
  The quick profile samples a few k, the others try them all.
- ``restore_killed_after_every_system_call``: the same, without fault points: a
  child restores while `checkpointspec.conformance.engines.crash.stopper` holds it
  right after its n-th system call that changes the store or the workspace, and
  kills it there; the calls are counted in a first run and ``held_writes`` of
  them drawn with the seed.
- ``restore_survives_power_loss``: the store and the workspace on one
  `SimulatedDisk` (the backend must be `FileSystemPorted`), a restore run there
  (a full one, then a files-only one, whose commit point is another), and for
  each crash state of the recording, recover on the crashed image.

A restore that runs to the end must leave the post-restore state: otherwise a
layer that does nothing would pass, every crash leaving the state before.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Final

from ...spec import RESERVED_DIR, Capability, FileSystemPorted, SessionLayer, encode_event
from ..engines.contract.violations import RuleViolation, expect
from ..engines.crash.disk import SimulatedDisk
from ..engines.crash.killed_layer_run import (
    KillOrder,
    SessionState,
    TrialSession,
    build_session,
    run_held_restore,
    run_restore_process,
    session_state,
)
from ..engines.crash.states import CrashPlan, CrashSpec
from ..engines.crash.stopper import (
    StopperError,
    is_send,
    server_sends_unavailable,
    stopper_unavailable,
)
from ..engines.crash.verdicts import quiet
from ..engines.run.harness import CheckSkipped, Harness, read_all
from ..engines.target.authoring import why_no_simulated_disk
from .base import check

__all__ = ["CHECKS"]

_SID: Final = "restored"
_QUICK_EXTRA: Final = 3
"""Kill points the quick profile draws at random, beside the session layer's own."""
_NEVER: Final = 1 << 30
"""A hold no restore reaches: the stopper process only counts the restore's calls."""


def _describe(state: SessionState) -> str:
    files, log = state
    shown = ", ".join(f"{path} ({len(data)} bytes)" for path, data in sorted(files.items()))
    return f"files [{shown}], log of {len(log)} events"


def _judge(seen: SessionState, trial: TrialSession, where: str) -> None:
    if seen in (trial.pre, trial.post):
        return
    files, log = seen
    parts = []
    if files not in (trial.pre[0], trial.post[0]):
        parts.append(
            f"files are neither as before nor as after: {_describe(seen)}; "
            f"before: {_describe(trial.pre)}; after: {_describe(trial.post)}"
        )
    elif log not in (trial.pre[1], trial.post[1]):
        parts.append(
            f"the log holds {len(log)} events, neither {len(trial.pre[1])} nor {len(trial.post[1])}"
        )
    else:
        half = "after" if files == trial.post[0] else "before"
        parts.append(f"a mix: files as {half} the restore, the log as the other side")
    raise RuleViolation("RESTORE-006", f"{where}, after recover: {'; '.join(parts)}")


async def _recover_and_judge(
    h: Harness, layer: SessionLayer, store: Path, workspace: Path, trial: TrialSession, where: str
) -> None:
    async with h.opened(store) as cp:
        try:
            outcome = await layer.recover(cp, trial.session_id, workspace)
        except Exception as exc:
            raise RuleViolation(
                "RESTORE-006", f"{where}: recover raised {type(exc).__name__}: {exc}"
            ) from exc
        _judge(await session_state(cp, trial.session_id, workspace), trial, where)
        again = await layer.recover(cp, trial.session_id, workspace)
        expect(
            str(again) == "nothing",
            "RESTORE-006",
            f"{where}: recover ({outcome}) left work behind: a second recover did {again}",
        )


async def _fresh(h: Harness, *, files: bool, conversation: bool) -> tuple[Path, Path, TrialSession]:
    base = h.new_store()
    store, workspace = base / "store", base / "workspace"
    store.mkdir()
    async with h.opened(store) as cp:
        trial = await build_session(cp, _SID, workspace, files=files, conversation=conversation)
    return store, workspace, trial


def _order(
    h: Harness, layer: str, store: Path, workspace: Path, trial: TrialSession, kill_at: int
) -> KillOrder:
    """A full restore (files and conversation) of ``trial`` in a child process."""
    return KillOrder(
        h.target,
        str(store),
        str(workspace),
        layer,
        trial.session_id,
        trial.seq,
        files=True,
        conversation=True,
        kill_at=kill_at,
    )


def _kill_points(points: list[str], rng: random.Random) -> list[int]:
    """The quick profile's sample: the session layer's own points, which bracket its
    journal, its files and its commit (of a run of one name, e.g. one per file, the
    first and the last), and a few more drawn at random."""
    own = [k for k, point in enumerate(points, start=1) if point.startswith("layer:")]
    chosen = {
        k
        for i, k in enumerate(own)
        if i in (0, len(own) - 1)
        or points[k - 1] != points[own[i - 1] - 1]
        or points[k - 1] != points[own[i + 1] - 1]
    }
    rest = [k for k in range(1, len(points) + 1) if k not in chosen]
    return sorted(chosen | set(rng.sample(rest, min(_QUICK_EXTRA, len(rest)))))


@check("RESTORE-006", needs=[Capability.TRUNCATE], kind="processes")
async def killed_restore_recovers(h: Harness) -> None:
    """RESTORE-006: a restore SIGKILLed at each fault point recovers to the state before or after."""
    layer, target = h.session, h.session_target
    rng = random.Random(h.seed)

    def order(store: Path, workspace: Path, trial: TrialSession, kill_at: int) -> KillOrder:
        return _order(h, target, store, workspace, trial, kill_at)

    store, workspace, trial = await _fresh(h, files=True, conversation=True)
    clean = await run_restore_process(order(store, workspace, trial, 0))
    if clean.report is None or clean.report.outcome != "done":
        ended = clean.report.outcome if clean.report is not None else clean.stderr
        raise RuleViolation("RESTORE-006", f"a restore in a child process failed: {ended}")
    points = clean.report.points
    async with h.opened(store) as cp:
        _completed(await session_state(cp, _SID, workspace), trial, "in a child process")
    ks = _kill_points(points, rng) if h.profile.name == "quick" else range(1, len(points) + 1)
    for k in h.slice.within(ks, "points to kill a restore at"):
        store, workspace, trial = await _fresh(h, files=True, conversation=True)
        where = f"killed at fault point {k} of {len(points)} ({points[k - 1]})"
        try:
            await run_restore_process(order(store, workspace, trial, k))
        except TimeoutError:
            raise RuleViolation("RESTORE-006", f"{where}: the restore hung") from None
        await _recover_and_judge(h, layer, store, workspace, trial, where)


@check(
    "RESTORE-006",
    needs=[Capability.TRUNCATE],
    replay_note="the system call a restore is killed after is exact; how many calls a "
    "restore makes can vary between runs",
    kind="holds",
)
async def restore_killed_after_every_system_call(h: Harness) -> None:
    """RESTORE-006: a restore SIGKILLed right after any one of its system calls on the store or the workspace recovers to the state before or after."""
    reason = stopper_unavailable()
    if reason is not None:
        raise CheckSkipped(f"cannot hold a process at a system call here: {reason}")
    layer, target = h.session, h.session_target
    rng = random.Random(h.seed)
    # A backend whose data lives in a server is held at its round trips too.
    sends = server_sends_unavailable() is None

    def order(store: Path, workspace: Path, trial: TrialSession) -> KillOrder:
        return _order(h, target, store, workspace, trial, 0)

    async def held(n: int) -> tuple[Path, Path, TrialSession, str | None, list[str]]:
        store, workspace, trial = await _fresh(h, files=True, conversation=True)
        try:
            call, calls = await run_held_restore(
                order(store, workspace, trial), [store, workspace], n, sends
            )
        except StopperError as exc:
            raise CheckSkipped(f"cannot hold a process at a system call here: {exc}") from exc
        except TimeoutError as exc:
            raise RuleViolation("RESTORE-006", f"a restore in a traced child hung: {exc}") from None
        return store, workspace, trial, call, calls

    counted_in, _, _, _, calls = await held(_NEVER)
    if not calls:
        raise RuleViolation(
            "RESTORE-006", "a restore in a child process changed no file of the store or workspace"
        )
    chosen = _held_points(calls, counted_in, rng, h.profile.held_writes)
    killed = 0
    for n in h.slice.within(chosen, "system calls to kill a restore after"):
        store, workspace, trial, call, _ = await held(n)
        killed += 1
        if call is None:
            continue  # this run made fewer calls than the counting run
        where = f"killed right after system call {n} of {len(calls)} ({call})"
        await _recover_and_judge(h, layer, store, workspace, trial, where)
    h.measure(f"killed restores right after {killed} of their {len(calls)} system calls")


def _held_points(calls: list[str], store: Path, rng: random.Random, budget: int) -> list[int]:
    """Which calls to kill a restore after. The log's change is the restore's commit,
    and recovery turns on which side of it a kill falls: of each run of consecutive
    calls on the store (its files, or sends to its server), its first and its last
    two come first; then calls drawn with the seed, those on the store before
    those on the workspace."""
    on_store = [n for n, call in enumerate(calls, start=1) if str(store) in call or is_send(call)]
    edges: set[int] = set()
    for n in on_store:
        first = n - 1 not in on_store
        last_two = n + 1 not in on_store or n + 2 not in on_store
        if first or last_two:
            edges.add(n)
    chosen = sorted(edges) if len(edges) <= budget else sorted(rng.sample(sorted(edges), budget))
    for pool in (on_store, range(1, len(calls) + 1)):
        rest = [n for n in pool if n not in chosen]
        chosen += rng.sample(rest, min(len(rest), budget - len(chosen)))
    return sorted(chosen)


async def _record(
    h: Harness, layer: SessionLayer, *, conversation: bool
) -> tuple[CrashPlan, TrialSession]:
    base = h.new_store()
    store, workspace = base / "store", base / "workspace"
    store.mkdir()
    handle = await h.open(store)
    trial = await build_session(handle, _SID, workspace, files=True, conversation=conversation)
    # Closed first, so that the files copied onto the disk are everything it wrote.
    await handle.close()
    if not isinstance(handle, FileSystemPorted):
        raise CheckSkipped(
            "the power-loss half of RESTORE-006 needs the backend's file I/O routed through a "
            "simulated disk: " + why_no_simulated_disk(handle)
        )
    disk = SimulatedDisk.load(base)
    cp = handle.on_filesystem(disk)
    try:
        await layer.restore(
            cp, _SID, trial.seq, workspace=str(workspace), conversation=conversation, fs=disk
        )
        log = tuple((s.seq, encode_event(s.event)) for s in await read_all(cp, _SID))
    finally:
        await cp.close()
    image = disk.image()
    prefix = "workspace/"
    files = {
        name[len(prefix) :]: image.data[ino]
        for name, ino in image.names.items()
        if name.startswith(prefix) and not name.startswith(f"{prefix}{RESERVED_DIR}/")
    }
    _completed((files, log), trial, "on the simulated disk")
    return disk.crash_plan(), trial


def _completed(seen: SessionState, trial: TrialSession, where: str) -> None:
    """A restore that returned must have left the post-restore state (or the check proves nothing)."""
    if seen != trial.post:
        raise RuleViolation(
            "RESTORE-006",
            f"a restore that returned {where} left {_describe(seen)}; "
            f"expected {_describe(trial.post)}",
        )


async def _check_state(
    h: Harness,
    layer: SessionLayer,
    plan: CrashPlan,
    trial: TrialSession,
    spec: CrashSpec,
) -> None:
    target = h.new_store()
    try:
        plan.build(spec).materialise(target)
        store, workspace = target / "store", target / "workspace"
        with quiet():
            await _recover_and_judge(h, layer, store, workspace, trial, str(spec))
    finally:
        shutil.rmtree(target, ignore_errors=True)


@check("RESTORE-006", needs=[Capability.TRUNCATE], kind="crash")
async def restore_survives_power_loss(h: Harness) -> None:
    """RESTORE-006: after a power loss at any point of a restore, recover gives the state before or after."""
    layer = h.session
    rng = random.Random(h.seed)
    # A files-only restore too: its commit point is the journal's removal, not the truncate.
    for conversation, budget in ((True, h.profile.powerloss_states // 2), (False, 100)):
        plan, trial = await _record(h, layer, conversation=conversation)
        for spec in h.slice.within(plan.sample(max(1, budget), rng), "power-loss states"):
            await _check_state(h, layer, plan, trial, spec)


CHECKS = (
    killed_restore_recovers,
    restore_killed_after_every_system_call,
    restore_survives_power_loss,
)
