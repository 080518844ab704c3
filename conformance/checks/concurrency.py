"""Checks for concurrent writers: asyncio tasks, several processes, and killed writers."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from functools import partial

from ...spec import CheckpointConflictError, StoredEvent
from ..harness import Harness, read_all
from ..outcomes import Err, Ok, run_backend
from ..registry import check
from ..workers import worker_command, worker_env
from ._support import expect

__all__: list[str] = []


@check("APPEND-004")
async def racing_appends_never_fork(h: Harness) -> None:
    """APPEND-004: of appends racing on one expected_head, exactly one wins; without it, all land whole."""
    handles = [await h.open() for _ in range(3)]
    for round_ in range(10):
        head = await handles[0].head("s")
        contenders = [
            (cp, [h.prompt(f"r{round_} w{n} a"), h.prompt(f"r{round_} w{n} b")])
            for n, cp in enumerate(handles * 2)
        ]
        outcomes = await asyncio.gather(
            *(run_backend(partial(cp.append, "s", b, head)) for cp, b in contenders)
        )
        winners = [o for o in outcomes if isinstance(o, Ok)]
        others = [o.error for o in outcomes if isinstance(o, Err)]
        expect(
            len(winners) == 1,
            "APPEND-004",
            f"round {round_}: {len(winners)} of {len(outcomes)} appends with expected_head={head} succeeded",
        )
        for error in others:
            expect(
                isinstance(error, CheckpointConflictError),
                "APPEND-004",
                f"round {round_}: a loser raised {error!r}",
            )
    free = [[h.prompt(f"free {n} {i}") for i in range(3)] for n in range(8)]
    await asyncio.gather(*(handles[n % 3].append("t", batch) for n, batch in enumerate(free)))
    _check_whole_batches(
        await read_all(handles[0], "t"), [[e.text for e in b] for b in free], "APPEND-004"
    )


def _check_whole_batches(log: list[StoredEvent], batches: list[list[str]], rule_id: str) -> None:
    seqs = [s.seq for s in log]
    expect(
        seqs == list(range(1, len(log) + 1)),
        rule_id,
        f"seqs are not contiguous from 1: {seqs[:20]}",
    )
    texts = [getattr(s.event, "text", None) for s in log]
    position = {text: i for i, text in enumerate(texts)}
    expect(len(position) == len(texts), rule_id, "some event was stored twice")
    for batch in batches:
        places = [position.get(text) for text in batch]
        if all(p is None for p in places):
            continue
        expect(
            None not in places
            and places == list(range(places[0] or 0, (places[0] or 0) + len(batch))),
            rule_id,
            f"batch {batch[0].rsplit(':', 1)[0]} is not stored whole and contiguous: positions {places}",
        )


async def _spawn(
    h: Harness, session: str, tag: str, count: int, size: int, expected: bool, wait: bool = False
) -> asyncio.subprocess.Process:
    argv = worker_command(h.backend.target, h.path, session, tag, count, size, expected, wait)
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=worker_env(h.options),
    )


def _spin(seconds: float) -> None:
    """Wait ``seconds`` on the CPU: an event-loop sleep is too coarse for sub-millisecond aim."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def _ack(line: str) -> tuple[int, int, int | None] | None:
    """``ack BATCH HEAD EXPECTED`` as (batch, new head, expected head); None for other lines."""
    parts = line.split()
    if len(parts) != 4 or parts[0] != "ack":
        return None
    return int(parts[1]), int(parts[2]), None if parts[3] == "None" else int(parts[3])


def _acks(lines: list[str]) -> list[tuple[int, int, int | None]]:
    return [ack for ack in map(_ack, lines) if ack is not None]


@check("MP-001", "APPEND-004", "SEQ-001")
async def processes_share_one_log(h: Harness) -> None:
    """MP-001: writers in several processes racing with expected_head never lose an update."""
    count, size, workers = 10 * h.profile.process_rounds, 2, 3
    procs = [
        await _spawn(h, "shared", f"w{n}", count, size, expected=True, wait=True)
        for n in range(workers)
    ]
    for proc in procs:  # every handle is open before any append starts
        assert proc.stdout is not None
        await proc.stdout.readline()
    results = await asyncio.gather(*(p.communicate(b"go\n") for p in procs))
    acks: dict[str, list[tuple[int, int, int | None]]] = {}
    for n, (proc, (out, err)) in enumerate(zip(procs, results, strict=True)):
        expect(
            proc.returncode == 0,
            "MP-001",
            f"worker {n} failed (exit {proc.returncode}): {err.decode()[-500:]}",
        )
        acks[f"w{n}"] = _acks(out.decode().splitlines())
    for worker, records in acks.items():
        for number, landed, want in records:
            assert want is not None  # the workers run with --expected
            expect(
                landed == want + size,
                "MP-001",
                f"{worker} batch {number} was appended with expected_head={want} and acknowledged "
                f"at head {landed}; it must land at {want + size}: another process wrote in between",
            )
    heads = [head for tag_acks in acks.values() for _, head, _ in tag_acks]
    duplicates = sorted({x for x in heads if heads.count(x) > 1})
    expect(
        not duplicates,
        "MP-001",
        f"two processes were both acknowledged with heads {duplicates}: a lost update",
    )
    cp = await h.open()
    log = await read_all(cp, "shared")
    expect(
        len(log) == workers * count * size,
        "MP-001",
        f"{len(log)} events stored; {workers * count * size} were acknowledged",
    )
    by_text = {getattr(s.event, "text", ""): s.seq for s in log}
    for tag, tag_acks in acks.items():
        for batch, head, _ in tag_acks:
            last = by_text.get(f"{tag}:{batch}:{size - 1}")
            expect(
                last == head,
                "MP-001",
                f"{tag} batch {batch} was acknowledged at head {head}; it is stored at {last}",
            )
    _check_whole_batches(
        log, [[f"{t}:{b}:{i}" for i in range(size)] for t in acks for b in range(count)], "MP-001"
    )


@check("DUR-002", "APPEND-003", "INTEG-001")
async def acknowledged_writes_survive_kill(h: Harness) -> None:
    """DUR-002: after SIGKILL of a writer, every acknowledged batch is stored, whole; no partial batch.

    The kill comes a random fraction of an append's duration after the writer's
    Nth acknowledgement: killing on the acknowledgement itself would mostly land
    at the start of the next append, before it writes anything, where a batch
    written in pieces (APPEND-003) cannot show.
    """
    rng = random.Random(h.seed)
    size = 3
    for round_ in range(h.profile.process_rounds * 2):
        session = f"killed-{round_}"
        proc = await _spawn(h, session, f"k{round_}", 100_000, size, expected=False)
        assert proc.stdout is not None
        lines: list[str] = []
        stop_after = rng.randint(2, 40)
        ack_times: list[float] = []
        while len(ack_times) < stop_after:
            line = await proc.stdout.readline()
            if not line:
                break
            lines.append(line.decode())
            if _ack(lines[-1]) is not None:
                ack_times.append(time.perf_counter())
        if len(ack_times) >= 2:
            interval = (ack_times[-1] - ack_times[0]) / (len(ack_times) - 1)
            _spin(min(interval, 0.05) * rng.random())
        proc.send_signal(signal.SIGKILL)
        rest, err = await proc.communicate()
        lines += rest.decode().splitlines()
        acked = _acks(lines)
        expect(
            len(acked) >= min(stop_after, 1),
            "DUR-002",
            f"the writer acknowledged nothing before it was killed: {err.decode()[-300:]}",
        )
        cp = await h.open()
        log = await read_all(cp, session)
        stored = {getattr(s.event, "text", "") for s in log}
        for batch, head, _ in acked:
            expect(
                f"k{round_}:{batch}:{size - 1}" in stored,
                "DUR-002",
                f"batch {batch}, acknowledged at head {head}, is gone after the kill",
            )
        _check_whole_batches(
            log,
            [[f"k{round_}:{b}:{i}" for i in range(size)] for b in range(len(log) // size + 2)],
            "APPEND-003",
        )
        report = await cp.check_integrity()
        expect(report.ok, "DUR-002", f"check_integrity after a kill: {report.detail}")
        await cp.close()
