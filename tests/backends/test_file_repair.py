"""``checkpointspec repair``: cut a garbage tail the file backend refuses, never a valid record.

A crash can leave garbage where an interrupted append's last sector should be;
the backend then refuses the session (it cannot tell those bytes from damage to
an acknowledged record). The repair cuts such a tail after a dry run, keeps
every removed byte in a backup, and leaves alone any log where a valid record
follows the damage.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
from pathlib import Path

import pytest
from checkpointspec.backends.file import FileCheckpointer
from checkpointspec.backends.file.checkpointer import SESSIONS_DIR
from checkpointspec.backends.file.format import data_end, pack_frames
from checkpointspec.backends.file.repair import RepairError, apply_repair, plan_repair
from checkpointspec.conformance.frontends.cli import main
from checkpointspec.spec import CorruptStoreError, UserPrompt, encode_event
from hypothesis import given, settings
from hypothesis import strategies as st


def write_store(root: Path, batches: list[list[str]]) -> None:
    async def work() -> None:
        cp = FileCheckpointer(root)
        for batch in batches:
            await cp.append("s", [UserPrompt(text) for text in batch])
        await cp.append("other", [UserPrompt("untouched")])
        await cp.close()

    asyncio.run(work())


def log_of(root: Path) -> Path:
    return root / SESSIONS_DIR / "s-s.log"


def tear_next_append(root: Path, first_seq: int, garbage: bytes) -> int:
    """Write the frames of one more batch where the log's data ends, its last bytes
    replaced by ``garbage``, as a crash mid-append can leave them; returns where it starts.

    Garbage that happens to equal the bytes it replaces (a single byte matching the
    frame's last one) would leave the batch whole: then its last byte is flipped too,
    so the batch is always torn."""
    path = log_of(root)
    data = path.read_bytes()
    end = data_end(lambda offset, count: data[offset : offset + count], 0, len(data))
    frames, _ = pack_frames([encode_event(UserPrompt(t)) for t in ("t1", "t2")], first_seq, 1)
    if frames.endswith(garbage):
        garbage = garbage[:-1] + bytes([garbage[-1] ^ 0xFF])
    torn = frames[: len(frames) - len(garbage)] + garbage
    with path.open("r+b") as log:
        log.seek(end)
        log.write(torn)
    return end


def texts(root: Path, sid: str = "s") -> list[str]:
    async def read() -> list[str]:
        cp = FileCheckpointer(root)
        try:
            return [getattr(s.event, "text", "") async for s in cp.read(sid)]
        finally:
            await cp.close()

    return asyncio.run(read())


def test_a_garbage_tail_is_refused_by_the_backend_and_cut_by_the_repair(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_store(root, [["a", "b"], ["c"]])
    start = tear_next_append(root, 4, b"\xa5" * 16)
    with pytest.raises(CorruptStoreError):
        texts(root)
    before = log_of(root).read_bytes()

    plan = plan_repair(root)
    (cut,) = plan.cuts
    assert (cut.session_id, cut.batch_start, plan.refusals) == ("s", start, ())
    assert log_of(root).read_bytes() == before  # planning reads only

    backup = apply_repair(plan)
    assert backup is not None
    assert texts(root) == ["a", "b", "c"]
    assert texts(root, "other") == ["untouched"]
    (entry,) = json.loads((backup / "manifest.json").read_text())
    kept = (backup / entry["backup"]).read_bytes()
    assert kept == before[start:]
    assert entry["sha256"] == hashlib.sha256(kept).hexdigest()
    assert log_of(root).read_bytes()[:start] == before[:start]


def test_damage_followed_by_a_valid_record_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_store(root, [["a"], ["b"], ["c"]])
    path = log_of(root)
    data = bytearray(path.read_bytes())
    first = data.index(encode_event(UserPrompt("a")))
    data[first] ^= 0xFF  # record 1's payload: records 2 and 3 stay valid
    path.write_bytes(bytes(data))

    plan = plan_repair(root)
    assert plan.cuts == ()
    (refusal,) = plan.refusals
    assert "a record with valid checksums follows" in refusal.reason
    assert apply_repair(plan) is None
    assert path.read_bytes() == bytes(data)


def test_a_log_in_use_is_not_cut(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_store(root, [["a"]])
    tear_next_append(root, 2, b"\x99" * 8)
    before = log_of(root).read_bytes()
    plan = plan_repair(root)
    fd = os.open(root / SESSIONS_DIR / "s-s.meta", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(RepairError, match="open in a handle"):
            apply_repair(plan)
    finally:
        os.close(fd)
    assert log_of(root).read_bytes() == before


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3), min_size=1, max_size=4
    ),
    garbage=st.binary(min_size=1, max_size=64).filter(lambda b: b.strip(b"\0")),
)
def test_every_acknowledged_event_survives_the_repair_of_a_torn_tail(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[str]], garbage: bytes
) -> None:
    root = tmp_path_factory.mktemp("repair") / "store"
    write_store(root, batches)
    acknowledged = [text for batch in batches for text in batch]
    tear_next_append(root, len(acknowledged) + 1, garbage)
    apply_repair(plan_repair(root))
    assert texts(root) == acknowledged


def test_the_command_is_a_dry_run_unless_told_to_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    write_store(root, [["a"]])
    tear_next_append(root, 2, b"\x77" * 12)
    before = log_of(root).read_bytes()
    assert main(["repair", f"file:{root}"]) == 0
    out = capsys.readouterr().out
    assert "would cut s-s.log" in out
    assert "dry run: nothing changed" in out
    assert log_of(root).read_bytes() == before
    assert main(["repair", f"file:{root}", "--session", "s", "--apply"]) == 0
    assert "removed bytes kept in" in capsys.readouterr().out
    assert texts(root) == ["a"]


def test_the_command_refuses_what_it_cannot_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repair", f"sqlite:{tmp_path / 'x.db'}"]) == 2
    assert "repair is for file stores" in capsys.readouterr().err
    assert main(["repair", f"file:{tmp_path / 'none'}"]) == 2
    assert "is not a file store" in capsys.readouterr().err
    root = tmp_path / "store"
    write_store(root, [["a"], ["b"]])
    data = bytearray(log_of(root).read_bytes())
    data[data.index(encode_event(UserPrompt("a")))] ^= 0x01
    log_of(root).write_bytes(bytes(data))
    assert main(["repair", f"file:{root}", "--apply"]) == 1
    assert "left alone s-s.log" in capsys.readouterr().out
    assert log_of(root).read_bytes() == bytes(data)
