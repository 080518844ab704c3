"""The restore intent journal: round trip, damage refused, leftovers cleaned, names per session."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from checkpointspec.backends.fsport import OsFileSystem
from checkpointspec.reference.journal import (
    Journal,
    JournalCorruptError,
    JournalFile,
    decode_journal,
    encode_journal,
    journal_path,
    read_journal,
    recover,
    remove_journal,
    temp_path,
    write_journal,
)
from checkpointspec.reference.restore import restore
from checkpointspec.spec import RESERVED_DIR, CorruptStoreError
from restore_scenes import standard_scene

FS = OsFileSystem()


def _journal(session_id: str = "s") -> Journal:
    return Journal(
        session_id,
        3,
        9,
        True,
        "2026-01-01T00:00:00Z",
        b'{"type":"user_prompt","text":"p"}',
        (
            JournalFile("a.txt", "a.txt", b"before", b"after"),
            JournalFile("new.bin", "new.bin", None, b"\x00\xff"),
            JournalFile("gone.txt", "real/gone.txt", b"x", None),
        ),
    )


def test_a_journal_round_trips(tmp_path: Path) -> None:
    journal = _journal()
    assert decode_journal(encode_journal(journal), "j") == journal
    write_journal(FS, str(tmp_path), journal)
    assert read_journal(FS, str(tmp_path), "s") == journal
    remove_journal(FS, str(tmp_path), "s")
    assert read_journal(FS, str(tmp_path), "s") is None
    assert os.listdir(tmp_path / RESERVED_DIR) == []


@pytest.mark.parametrize("where", [0, 40, 100, -1])
def test_a_damaged_journal_is_refused(tmp_path: Path, where: int) -> None:
    data = bytearray(encode_journal(_journal()))
    data[where] ^= 0x01
    with pytest.raises(JournalCorruptError) as refused:
        decode_journal(bytes(data), "the-journal")
    assert isinstance(refused.value, CorruptStoreError)
    assert refused.value.location == "the-journal"


def test_a_cut_journal_is_refused() -> None:
    data = encode_journal(_journal())
    for size in (0, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(JournalCorruptError):
            decode_journal(data[:size], "j")


def test_a_journal_of_another_session_is_refused(tmp_path: Path) -> None:
    write_journal(FS, str(tmp_path), _journal("other"))
    os.rename(journal_path(str(tmp_path), "other"), journal_path(str(tmp_path), "s"))
    with pytest.raises(JournalCorruptError, match="other"):
        read_journal(FS, str(tmp_path), "s")


def test_a_temporary_journal_left_by_a_crash_is_removed(tmp_path: Path) -> None:
    (tmp_path / RESERVED_DIR).mkdir()
    tmp = temp_path(journal_path(str(tmp_path), "s"))
    Path(tmp).write_bytes(encode_journal(_journal())[:20])
    assert read_journal(FS, str(tmp_path), "s") is None
    assert not os.path.exists(tmp)


def test_journal_names_are_distinct_per_session_and_safe(tmp_path: Path) -> None:
    ids = ["a/b", "a_b", "A/B", "..", "x\x00y", "é", "a" * 500]
    paths = {journal_path(str(tmp_path), sid) for sid in ids}
    assert len(paths) == len(ids)
    for path in paths:
        assert os.path.dirname(path) == str(tmp_path / RESERVED_DIR)
        assert len(os.path.basename(path)) < 100


def test_recover_refuses_a_damaged_journal_and_changes_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        scene, seq = await standard_scene(tmp_path)
        before = await scene.state()
        write_journal(FS, str(tmp_path), _journal(scene.sid))
        path = Path(journal_path(str(tmp_path), scene.sid))
        damaged = bytearray(path.read_bytes())
        damaged[-3] ^= 0xFF
        path.write_bytes(bytes(damaged))
        with pytest.raises(JournalCorruptError):
            await recover(scene.cp, scene.sid, tmp_path)
        with pytest.raises(JournalCorruptError):
            await restore(scene.cp, scene.sid, seq, workspace=tmp_path)
        assert await scene.state() == before
        assert path.read_bytes() == bytes(damaged)

    asyncio.run(go())
