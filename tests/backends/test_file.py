"""Backend-specific tests of the file backend, byte-level where it matters.

The conformance kit checks the contract; these tests check what only this
backend promises, looking at the files out-of-band (``struct`` and plain file
reads, not the backend's own parser): torn tails cut at every byte, damage
reported and left alone, codec failures that change nothing, file names for
awkward ids, the format marker, truncate's crash safety through a failing
filesystem port, the fsyncs a durable append makes, and several processes on
one log. The kit's model-based check compares the backend with the sequential
model; these tests do not repeat it. Test names start with the rule id
they are about when there is one.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import unicodedata
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from checkpointspec.backends.file import Durability, FileCheckpointer, make
from checkpointspec.backends.file import checkpointer as file_checkpointer
from checkpointspec.backends.file.log import TaskGate
from checkpointspec.backends.file.naming import MAX_ESCAPED, id_from_stem, stem_for
from checkpointspec.backends.fsport import OsFileSystem
from checkpointspec.spec import (
    BackendContext,
    CheckpointConflictError,
    CheckpointerClosedError,
    CodecError,
    CorruptStoreError,
    FileStat,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    StoredEvent,
    UserPrompt,
)
from helpers import ev, read_all, run


def texts(stored: list[StoredEvent]) -> list[str]:
    return [s.event.text for s in stored if isinstance(s.event, UserPrompt)]


def fast(path: Path, **kwargs: Any) -> FileCheckpointer:
    """A handle without fsyncs: the tests here are about bytes, not power loss."""
    return FileCheckpointer(path, durability=Durability.PROCESS, **kwargs)


def log_file(store: Path, sid: str) -> Path:
    return store / "sessions" / f"{stem_for(sid)}.log"


def fingerprint(store: Path) -> dict[str, bytes]:
    """Every file under ``store`` by relative path: what "unchanged" means here."""
    return {
        str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()
    }


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(offset, payload length) of each frame of a log, parsed independently of the backend.

    Header: 8 magic, u16 version, u16 flags, u32 id length, i64 mtime, id, u32 crc.
    Frame: u32 length, u64 seq, i64 ts, u32 more, u32 crc, u32 crc, payload, u32 ~length.
    Durable logs are followed by zeros (the reserve), which end the frames.
    """
    (id_len,) = struct.unpack_from("<I", data, 12)
    position = 24 + id_len + 4
    spans = []
    data = data.rstrip(b"\0")
    while position < len(data):
        (length,) = struct.unpack_from("<I", data, position)
        spans.append((position, length))
        position += 36 + length
    assert position == len(data)
    return spans


def write_events(
    store: Path, sid: str, batches: list[list[UserPrompt]], *, durable: bool = False
) -> list[int]:
    """Append ``batches`` through a fresh handle; return where the log's data ends after each.

    That is the file's size, except that ``durable`` appends leave zeros after
    the data (the reserve).
    """
    sizes = []

    async def go() -> None:
        cp = FileCheckpointer(store) if durable else fast(store)
        for batch in batches:
            await cp.append(sid, batch)
            sizes.append(len(log_file(store, sid).read_bytes().rstrip(b"\0")))
        await cp.close()

    run(go())
    return sizes


# -- file names ------------------------------------------------------------------------

AWKWARD_IDS = [
    "a/b",
    "a_b",
    "a\\b",
    "../x",
    "/abs",
    ".",
    "..",
    "CON",
    "con",
    "nul",
    "COM1",
    "A",
    "a",
    "x",
    "x ",
    " ",
    "\n",
    unicodedata.normalize("NFC", "café"),
    unicodedata.normalize("NFD", "café"),
    "日本語のセッション",
    "s-a",
    "_2f",
    "x" * 256,
    "é" * 256,
    "😀" * 256,
    "é" * 100,
]


def test_names_are_injective_case_proof_and_short() -> None:
    stems = [stem_for(sid) for sid in AWKWARD_IDS]
    assert len(set(stems)) == len(stems)
    assert len({s.casefold() for s in stems}) == len(stems), "two names differ only by case"
    for sid, stem in zip(AWKWARD_IDS, stems, strict=True):
        assert set(stem) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-_"), stem
        assert len((stem + ".meta").encode()) <= 255
        assert stem not in {".", ".."}
        assert "/" not in stem
        recovered = id_from_stem(stem)
        assert recovered == sid or (recovered is None and stem.startswith("h-"))
    assert stem_for("a/b") == "s-a_2fb"
    assert stem_for("a_b") == "s-a_5fb"
    assert len(stem_for("x" * MAX_ESCAPED)) == MAX_ESCAPED + 2
    assert stem_for("x" * (MAX_ESCAPED + 1)).startswith("h-")


@pytest.mark.parametrize("stem", ["s-_61", "s-A", "s-", "s-_zz", "s-_c3", "h-abc", "x-a", "s-_00"])
def test_only_canonical_names_map_back_to_ids(stem: str) -> None:
    assert id_from_stem(stem) is None


def test_ID_001_002_003_awkward_ids_are_distinct_sessions_inside_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()

    async def go() -> None:
        cp = fast(store)
        for n, sid in enumerate(AWKWARD_IDS):
            assert await cp.append(sid, [ev(n)]) == 1
        for n, sid in enumerate(AWKWARD_IDS):
            assert texts(await read_all(cp, sid)) == [f"event {n}"]
        assert sorted(i.id for i in await cp.list_sessions()) == sorted(AWKWARD_IDS)
        await cp.close()
        again = fast(store)  # hashed names are recovered from the log headers
        assert sorted(i.id for i in await again.list_sessions()) == sorted(AWKWARD_IDS)
        await again.delete("a/b")
        assert texts(await read_all(again, "a_b")) == [f"event {AWKWARD_IDS.index('a_b')}"]
        await again.close()

    run(go())
    assert [p.name for p in tmp_path.iterdir()] == ["store"]
    assert {p.name for p in store.iterdir()} == {"format.json", "sessions"}
    assert all(p.parent == store / "sessions" for p in (store / "sessions").rglob("*"))


def test_ARG_001_empty_id_is_refused_everywhere(tmp_path: Path) -> None:
    async def go() -> None:
        cp = fast(tmp_path)
        calls: list[Callable[[], Coroutine[Any, Any, object]]] = [
            lambda: cp.append("", [ev(1)]),
            lambda: read_all(cp, ""),
            lambda: cp.head(""),
            lambda: cp.delete(""),
            lambda: cp.truncate("", 0),
            lambda: cp.generation(""),
        ]
        for call in calls:
            with pytest.raises(InvalidArgumentError):
                await call()
        await cp.close()

    run(go())
    assert list((tmp_path / "sessions").iterdir()) == []


# -- torn tails and damage ----------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 3], ids=["single", "batch-of-3"])
@pytest.mark.parametrize("reserve", [False, True], ids=["at-end-of-file", "inside-reserve"])
def test_torn_tail_at_every_offset_is_cut_to_the_previous_batch(
    tmp_path: Path, batch: int, reserve: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash in the middle of the last append leaves a prefix of its batch: at the end
    of the file, or, when it overwrote the reserve (durable appends), followed by zeros."""
    source = tmp_path / "source"
    source.mkdir()
    ends = write_events(
        source, "s", [[ev(1)], [ev(2)], [ev(f"3.{i}") for i in range(batch)]], durable=reserve
    )
    before_last, full = ends[1], ends[2]
    original = log_file(source, "s").read_bytes()

    async def check(store: Path, keep: int) -> None:
        cp = fast(store)
        assert texts(await read_all(cp, "s")) == ["event 1", "event 2"]
        report = await cp.check_integrity()
        assert report.ok
        assert len(report.repairs) == 1
        written = len(original[:keep].rstrip(b"\0")) - before_last  # as far as the data reaches
        assert f"torn tail of {written} bytes" in report.repairs[0]
        assert await cp.append("s", [ev(4)]) == 3
        await cp.close()

    caplog.set_level(logging.WARNING, logger="checkpointspec.backends.file")
    for keep in range(before_last + 1, full):
        store = tmp_path / f"cut-{keep}"
        shutil.copytree(source, store)
        zeros = bytes(len(original) - keep) if reserve else b""
        log_file(store, "s").write_bytes(original[:keep] + zeros)
        run(check(store, keep))
        assert log_file(store, "s").read_bytes()[:before_last] == original[:before_last]
    assert sum("torn tail" in r.getMessage() for r in caplog.records) == full - before_last - 1


def test_zeros_after_a_complete_batch_are_the_reserve_not_a_tear(tmp_path: Path) -> None:
    sizes = write_events(tmp_path, "s", [[ev(1)], [ev(2)]])
    path = log_file(tmp_path, "s")
    path.write_bytes(path.read_bytes() + bytes(100))

    async def go() -> None:
        cp = fast(tmp_path)
        report = await cp.check_integrity()
        assert report.ok
        assert report.repairs == ()
        assert "interrupted" not in report.detail
        assert await cp.head("s") == 2
        assert await cp.append("s", [ev(3)]) == 3  # written over the zeros, right after record 2
        assert texts(await read_all(cp, "s")) == ["event 1", "event 2", "event 3"]
        await cp.close()

    run(go())
    assert len(record_spans(path.read_bytes())) == 3
    assert path.read_bytes()[: sizes[1]] == log_file(tmp_path, "s").read_bytes()[: sizes[1]]


def test_zeros_after_part_of_a_batch_are_cut_like_a_torn_tail(tmp_path: Path) -> None:
    sizes = write_events(tmp_path, "s", [[ev(1)], [ev(2), ev(3)]])
    path = log_file(tmp_path, "s")
    data = path.read_bytes()
    first_of_batch = record_spans(data)[1]
    cut = first_of_batch[0] + 36 + first_of_batch[1]  # record 2 whole, record 3 zeroed
    path.write_bytes(data[:cut] + bytes(sizes[1] - cut))

    async def go() -> None:
        cp = fast(tmp_path)
        assert texts(await read_all(cp, "s")) == ["event 1"]
        report = await cp.check_integrity()
        assert report.ok
        assert len(report.repairs) == 1
        await cp.close()

    run(go())
    assert path.read_bytes() == data[: sizes[0]]


def test_a_durable_log_keeps_a_reserve_of_zeros_that_reopening_does_not_mistake(
    tmp_path: Path,
) -> None:
    ends = write_events(tmp_path, "s", [[ev(n)] for n in range(5)], durable=True)
    data = log_file(tmp_path, "s").read_bytes()
    assert len(data) >= ends[-1] + 4096, "the log was not extended ahead of its data"
    assert data[ends[-1] :].count(0) == len(data) - ends[-1]

    async def go() -> None:
        cp = fast(tmp_path)
        assert await cp.head("s") == 5
        assert await cp.append("s", [ev(5)]) == 6
        report = await cp.check_integrity()
        assert report.ok
        assert report.repairs == ()
        assert "interrupted" not in report.detail
        await cp.close()
        again = FileCheckpointer(tmp_path)
        assert texts(await read_all(again, "s")) == [f"event {n}" for n in range(6)]
        await again.close()

    run(go())
    assert [seq for seq, _ in enumerate(record_spans(log_file(tmp_path, "s").read_bytes()))] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]


@pytest.mark.parametrize("where", ["payload", "trailer", "header"])
def test_INTEG_002_a_flipped_byte_in_the_last_record_before_the_reserve_is_damage(
    tmp_path: Path, where: str
) -> None:
    """Not a torn tail: the record still ends with its non-zero trailer, so nothing is cut."""
    ends = write_events(tmp_path, "s", [[ev(n)] for n in range(3)], durable=True)
    path = log_file(tmp_path, "s")
    data = bytearray(path.read_bytes())
    offset, length = record_spans(bytes(data))[2]
    position = {"payload": offset + 32 + length // 2, "trailer": ends[-1] - 1, "header": offset + 9}
    data[position[where]] ^= 0x01
    path.write_bytes(bytes(data))
    before = fingerprint(tmp_path)

    async def go() -> None:
        cp = fast(tmp_path)
        with pytest.raises(CorruptStoreError) as raised:
            await cp.head("s")
        assert "record seq 3" in raised.value.location
        assert not (await cp.check_integrity()).ok
        await cp.close()

    run(go())
    assert fingerprint(tmp_path) == before


def test_appends_and_truncates_of_another_handle_are_seen_through_the_reserve(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        one, two = FileCheckpointer(tmp_path), FileCheckpointer(tmp_path)
        await one.append("s", [ev(1), ev(2)])
        assert await two.append("s", [ev(3)], expected_head=2) == 3
        assert await one.append("s", [ev(4)], expected_head=3) == 4  # not 3: two's record seen
        await two.truncate("s", 1)
        assert await one.head("s") == 1  # the shorter log replaced the one `one` holds
        assert await one.append("s", [ev(5)], expected_head=1, expected_generation=1) == 2
        assert texts(await read_all(two, "s")) == ["event 1", "event 5"]
        await two.delete("s")
        assert await one.head("s") == 0
        assert await one.append("s", [ev(6)]) == 1
        assert texts(await read_all(two, "s")) == ["event 6"]
        await one.close()
        await two.close()

    run(go())


def test_a_steady_durable_append_does_not_stat_the_log(tmp_path: Path) -> None:
    """A stat makes the next fsync commit the journal on recent Linux (see backends/file/log.py)."""
    fs = RecordingFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs)
        await cp.append("s", [ev(1)])
        await cp.append("s", [ev(2)])
        mark = len(fs.calls)
        for n in range(3, 10):
            await cp.append("s", [ev(n)])
        assert not fs.since(mark, "stat", "fstat")
        assert await cp.head("s") == 9
        await cp.close()

    run(go())


@pytest.mark.parametrize(
    ("record", "where"),
    [(1, "payload"), (1, "length"), (2, "payload"), (4, "payload"), (4, "length")],
)
def test_INTEG_002_a_flipped_byte_raises_and_changes_nothing(
    tmp_path: Path, record: int, where: str
) -> None:
    write_events(tmp_path, "s", [[ev(n)] for n in range(5)])
    path = log_file(tmp_path, "s")
    data = bytearray(path.read_bytes())
    offset, length = record_spans(bytes(data))[record]
    position = offset + 36 + length // 2 if where == "payload" else offset + 1
    data[position] ^= 0x01
    path.write_bytes(bytes(data))
    before = fingerprint(tmp_path)

    async def go() -> None:
        cp = fast(tmp_path)
        with pytest.raises(CorruptStoreError) as raised:
            await read_all(cp, "s")
        assert raised.value.session_id == "s"
        assert f"record seq {record + 1}" in raised.value.location
        report = await cp.check_integrity()
        assert not report.ok
        assert any(f"record seq {record + 1}" in p and "'s'" in p for p in report.problems)
        assert report.repairs == ()
        await cp.close()

    run(go())
    assert fingerprint(tmp_path) == before


def test_INTEG_002_damage_store_hook_is_detected(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(n) for n in range(10)]])
    cp = fast(tmp_path)
    what = cp.damage_store(tmp_path)
    assert "record seq 1" in what

    async def go() -> None:
        cp = fast(tmp_path)
        assert not (await cp.check_integrity()).ok
        with pytest.raises(CorruptStoreError):
            await read_all(cp, "s")
        await cp.close()

    run(go())


# -- codecs ------------------------------------------------------------------------------


class XorCodec:
    """Hides plaintext; ``fail_decode_from`` makes decode raise from that call on."""

    name = "xor"

    def __init__(
        self, fail_decode_from: int | None = None, fail_encode_at: int | None = None
    ) -> None:
        self.fail_decode_from = fail_decode_from
        self.fail_encode_at = fail_encode_at
        self.decodes = self.encodes = 0

    def encode(self, data: bytes) -> bytes:
        self.encodes += 1
        if self.encodes == self.fail_encode_at:
            raise RuntimeError("encode refused")
        return b"X" + bytes(b ^ 0x5A for b in data)

    def decode(self, data: bytes) -> bytes:
        self.decodes += 1
        if self.fail_decode_from is not None and self.decodes >= self.fail_decode_from:
            raise RuntimeError("decode refused")
        if not data.startswith(b"X"):
            raise ValueError("not xor data")
        return bytes(b ^ 0x5A for b in data[1:])


@pytest.mark.parametrize("fails_from", [1, 3, 6])
def test_CODEC_003_decode_failure_raises_and_leaves_the_store_byte_identical(
    tmp_path: Path, fails_from: int
) -> None:
    async def setup() -> None:
        cp = fast(tmp_path, codec=XorCodec())
        await cp.append("s", [ev(n) for n in range(3)])
        await cp.append("s", [ev(n) for n in range(3, 6)])
        await cp.close()

    run(setup())
    before = fingerprint(tmp_path)

    async def go() -> None:
        cp = fast(tmp_path, codec=XorCodec(fail_decode_from=fails_from))
        with pytest.raises(CodecError) as raised:
            await read_all(cp, "s")
        assert raised.value.direction == "decode"
        assert raised.value.seq == fails_from
        assert (await cp.check_integrity()).ok
        assert await cp.head("s") == 6
        await cp.close()
        healthy = fast(tmp_path, codec=XorCodec())
        assert texts(await read_all(healthy, "s")) == [f"event {n}" for n in range(6)]
        await healthy.close()

    run(go())
    assert fingerprint(tmp_path) == before


def test_CODEC_004_codec_and_log_must_agree(tmp_path: Path) -> None:
    async def go() -> None:
        plain = fast(tmp_path)
        await plain.append("plain", [ev(1)])
        await plain.close()
        sealed = fast(tmp_path, codec=XorCodec())
        await sealed.append("sealed", [ev(2)])
        with pytest.raises(CodecError):
            await read_all(sealed, "plain")
        with pytest.raises(CodecError):
            await sealed.append("plain", [ev(3)])
        await sealed.close()
        plain = fast(tmp_path)
        with pytest.raises(CodecError):
            await read_all(plain, "sealed")
        await plain.close()

    run(go())


def test_CODEC_002_005_encode_failure_writes_nothing_and_no_plaintext_at_rest(
    tmp_path: Path,
) -> None:
    canary = "canary-4b1d-plaintext"
    codec = XorCodec()

    async def go() -> None:
        cp = fast(tmp_path, codec=codec)
        await cp.append("s", [UserPrompt(f"{canary} {n}") for n in range(3)])
        before = fingerprint(tmp_path)
        for sid in ("s", "new"):
            codec.encodes, codec.fail_encode_at = 0, 2
            with pytest.raises(CodecError) as raised:
                await cp.append(sid, [UserPrompt(f"{canary} {n}") for n in range(3)])
            assert raised.value.direction == "encode"
        assert fingerprint(tmp_path) == before
        assert await cp.head("s") == 3
        await cp.close()

    run(go())
    assert not any(canary.encode() in data for data in fingerprint(tmp_path).values())


# -- format marker -----------------------------------------------------------------------


def test_SCHEMA_001_newer_marker_is_refused_untouched(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(1)]])
    fast(tmp_path).mark_newer_schema(tmp_path)
    before = fingerprint(tmp_path)
    with pytest.raises(SchemaVersionError) as raised:
        fast(tmp_path)
    assert (raised.value.found, raised.value.supported) == (2, 1)
    assert fingerprint(tmp_path) == before


def test_SCHEMA_001_a_newer_log_header_is_refused_untouched(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(1)]])
    path = log_file(tmp_path, "s")
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 8, 9)  # the log's format version
    path.write_bytes(bytes(data))
    before = fingerprint(tmp_path)

    async def go() -> None:
        cp = fast(tmp_path)
        with pytest.raises(SchemaVersionError):
            await read_all(cp, "s")
        with pytest.raises(SchemaVersionError):
            await cp.append("s", [ev(2)])
        await cp.close()

    run(go())
    assert fingerprint(tmp_path) == before


def test_a_foreign_marker_is_reported_as_corruption(tmp_path: Path) -> None:
    (tmp_path / "format.json").write_text('{"format": "something-else", "version": 1}')
    with pytest.raises(CorruptStoreError) as raised:
        fast(tmp_path)
    assert raised.value.location == "format.json"


# -- filesystem port: what gets fsynced, and crashes in truncate ----------------------


class RecordingFS(OsFileSystem):
    """The real file system, noting each call as (operation, file name)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}
        self.fail: set[str] = set()

    def _note(self, operation: str, target: str) -> None:
        self.calls.append((operation, target))
        if operation in self.fail:
            raise OSError(f"injected failure in {operation}")

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> int:
        fd = super().open(path, create=create, truncate=truncate)
        self.names[fd] = os.path.basename(path)
        self._note("open", os.path.basename(path))
        return fd

    def write(self, fd: int, data: bytes, offset: int) -> None:
        self._note("write", self.names.get(fd, "?"))
        super().write(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._note("fsync", self.names.get(fd, "?"))
        super().fsync(fd)

    def fsync_dir(self, path: str) -> None:
        self._note("fsync_dir", os.path.basename(path))
        super().fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        old, new = os.path.basename(src), os.path.basename(dst)
        self._note("rename", f"{old} -> {new}")
        super().rename(src, dst)
        self.names = {fd: new if name == old else name for fd, name in self.names.items()}

    def unlink(self, path: str) -> None:
        self._note("unlink", os.path.basename(path))
        super().unlink(path)

    def truncate(self, fd: int, size: int) -> None:
        self._note("truncate", self.names.get(fd, "?"))
        super().truncate(fd, size)

    def stat(self, path: str) -> FileStat | None:
        self.calls.append(("stat", os.path.basename(path)))
        return super().stat(path)

    def fstat(self, fd: int) -> FileStat:
        self.calls.append(("fstat", self.names.get(fd, "?")))
        return super().fstat(fd)

    def read(self, fd: int, size: int, offset: int) -> bytes:
        data = super().read(fd, size, offset)
        self.calls.append(("read", f"{self.names.get(fd, '?')}:{len(data)}"))
        return data

    def since(self, mark: int, *operations: str) -> list[tuple[str, str]]:
        return [c for c in self.calls[mark:] if c[0] in operations]

    def bytes_read_since(self, mark: int) -> int:
        return sum(int(target.rsplit(":", 1)[1]) for _, target in self.since(mark, "read"))


CHANGES = ("write", "truncate", "fsync", "fsync_dir", "rename", "unlink")


def test_DUR_a_durable_append_is_fsynced_before_it_returns(tmp_path: Path) -> None:
    fs = RecordingFS()
    log, meta, tmp = (stem_for("s") + suffix for suffix in (".log", ".meta", ".tmp"))

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs)
        mark = len(fs.calls)
        await cp.append("s", [ev(1)])
        assert fs.since(mark, *CHANGES) == [
            ("write", tmp),
            ("fsync", tmp),
            ("rename", f"{tmp} -> {log}"),
            ("fsync_dir", "sessions"),
        ]
        mark = len(fs.calls)
        await cp.append("s", [ev(2), ev(3)])
        # the log is extended ahead of its data once: the reserve
        assert fs.since(mark, *CHANGES) == [("truncate", log), ("write", log), ("fsync", log)]
        mark = len(fs.calls)
        await cp.append("s", [ev(4)])
        assert fs.since(mark, *CHANGES) == [("write", log), ("fsync", log)]
        mark = len(fs.calls)
        await cp.truncate("s", 1)
        assert fs.since(mark, *CHANGES) == [
            ("write", tmp),
            ("write", tmp),
            ("fsync", tmp),
            ("write", meta),  # the generation, durable before the shorter log is visible
            ("fsync", meta),
            ("rename", f"{tmp} -> {log}"),
            ("fsync_dir", "sessions"),
        ]
        mark = len(fs.calls)
        await cp.delete("s")
        assert fs.since(mark, *CHANGES) == [
            ("write", meta),
            ("fsync", meta),
            ("unlink", log),
            ("fsync_dir", "sessions"),
        ]
        await cp.close()

    run(go())


def test_on_filesystem_routes_every_operation_through_the_given_port(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(1)]])
    fs = RecordingFS()

    async def go() -> None:
        closed = fast(tmp_path)
        await closed.close()
        cp = closed.on_filesystem(fs)
        await cp.append("s", [ev(2)])
        await cp.truncate("s", 1)
        await cp.delete("s")
        assert (await cp.check_integrity()).ok
        await cp.close()

    run(go())
    operations = {operation for operation, _ in fs.calls}
    assert {"open", "read", "write", "stat", "rename", "unlink"} <= operations
    # the durability of the handle it came from is kept: no fsync in "process" mode
    assert "fsync" not in operations


def test_process_durability_never_fsyncs(tmp_path: Path) -> None:
    fs = RecordingFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs, durability=Durability.PROCESS)
        await cp.append("s", [ev(1)])
        await cp.append("s", [ev(2)])
        await cp.truncate("s", 1)
        await cp.delete("s")
        await cp.close()

    run(go())
    assert not [c for c in fs.calls if c[0] in ("fsync", "fsync_dir")]


@pytest.mark.parametrize("failing", ["rename", "fsync"])
def test_TRUNC_a_truncate_that_fails_before_its_rename_leaves_the_old_log(
    tmp_path: Path, failing: str
) -> None:
    write_events(tmp_path, "s", [[ev(n)] for n in range(5)])
    old = log_file(tmp_path, "s").read_bytes()
    fs = RecordingFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs)
        assert await cp.head("s") == 5
        fs.fail = {failing}
        with pytest.raises(OSError, match="injected"):
            await cp.truncate("s", 2)
        fs.fail = set()
        assert texts(await read_all(cp, "s")) == [f"event {n}" for n in range(5)]
        await cp.close()

    run(go())
    assert log_file(tmp_path, "s").read_bytes() == old
    assert not log_file(tmp_path, "s").with_suffix(".tmp").exists()


class SnapshotFS(OsFileSystem):
    """Copies the whole store just before each rename: what a crash right there leaves
    (everything before it was fsynced, so a power loss keeps the same files)."""

    def __init__(self, store: Path, into: Path) -> None:
        self.store, self.into = store, into
        self.snapshots: list[Path] = []

    def rename(self, src: str, dst: str) -> None:
        target = self.into / f"crash-{len(self.snapshots)}"
        shutil.copytree(self.store, target)
        self.snapshots.append(target)
        super().rename(src, dst)


def test_TRUNC_a_crash_at_truncate_leaves_the_old_log_whole(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    write_events(store, "s", [[ev(n) for n in range(3)], [ev(3), ev(4)]])
    fs = SnapshotFS(store, tmp_path)

    async def go() -> None:
        cp = FileCheckpointer(store, fs=fs)
        await cp.truncate("s", 2)  # cuts the first batch in two
        await cp.close()
        crashed = fast(fs.snapshots[-1])
        assert texts(await read_all(crashed, "s")) == [f"event {n}" for n in range(5)]
        report = await crashed.check_integrity()
        assert report.ok
        assert "left over" in report.detail
        assert await crashed.generation("s") == 1  # bumped before the rename
        await crashed.close()
        after = fast(store)
        assert texts(await read_all(after, "s")) == ["event 0", "event 1"]
        assert (await after.check_integrity()).ok
        assert await after.append("s", [ev(9)]) == 3
        await after.close()

    run(go())


# -- several handles and processes -------------------------------------------------------


def test_READ_003_a_read_is_a_snapshot_while_another_handle_truncates(tmp_path: Path) -> None:
    big = "y" * 4000
    write_events(tmp_path, "s", [[UserPrompt(f"{n} {big}") for n in range(200)] for _ in range(3)])

    async def go() -> None:
        reader, writer = fast(tmp_path), fast(tmp_path)
        iterator = reader.read("s").__aiter__()
        first = await iterator.__anext__()
        await writer.truncate("s", 10)
        await writer.append("s", [ev("new")])
        await writer.delete("s")
        rest = [stored async for stored in iterator]
        assert [s.seq for s in [first, *rest]] == list(range(1, 601))
        assert await reader.head("s") == 0
        await reader.close()
        await writer.close()

    run(go())


def recorded_handle_on_5000_events(store: Path) -> tuple[FileCheckpointer, RecordingFS]:
    """A fresh handle, through a `RecordingFS`, on a store with one 5000-event session "s"."""
    write_events(store, "s", [[ev(n) for n in range(1000)] for _ in range(5)])
    fs = RecordingFS()
    return FileCheckpointer(store, fs=fs, durability=Durability.PROCESS), fs


def test_a_fresh_handle_finds_the_head_without_reading_the_log(tmp_path: Path) -> None:
    cp, fs = recorded_handle_on_5000_events(tmp_path)

    async def go() -> None:
        mark = len(fs.calls)
        assert await cp.head("s") == 5000
        assert await cp.append("s", [ev("x")]) == 5001
        assert [s.seq for s in await read_all(cp, "s", 4998)] == [4999, 5000, 5001]
        read = fs.bytes_read_since(mark)
        size = log_file(tmp_path, "s").stat().st_size
        assert read < size / 20, f"{read} of {size} bytes read for the head and the last records"
        await cp.close()

    run(go())


def test_a_fresh_handle_reads_a_whole_log_once(tmp_path: Path) -> None:
    """Record 1 starts right after the header: no walk back through the index first."""
    cp, fs = recorded_handle_on_5000_events(tmp_path)

    async def go() -> None:
        mark = len(fs.calls)
        assert len(await read_all(cp, "s")) == 5000
        read = fs.bytes_read_since(mark)
        size = log_file(tmp_path, "s").stat().st_size
        assert read < size * 1.05, f"{read} bytes read for a log of {size}"
        await cp.close()

    run(go())


def test_truncating_inside_a_batch_survives_reopening(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(n) for n in range(5)], [ev(5)]])

    async def go() -> None:
        cp = fast(tmp_path)
        await cp.truncate("s", 3)
        await cp.close()
        again = fast(tmp_path)
        assert texts(await read_all(again, "s")) == ["event 0", "event 1", "event 2"]
        assert (await again.check_integrity()).ok
        await again.close()

    run(go())


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from checkpointspec.backends.file import FileCheckpointer
    from checkpointspec.spec import CheckpointConflictError, UserPrompt

    async def main(path, tag, count):
        cp = FileCheckpointer(Path(path))
        print("ready", flush=True)
        sys.stdin.readline()  # the parent says go once every writer is ready
        conflicts = 0
        for batch in range(count):
            events = [UserPrompt(f"{tag}:{batch}:{i}") for i in range(2)]
            while True:
                head = await cp.head("shared")
                try:
                    new = await cp.append("shared", events, expected_head=head)
                except CheckpointConflictError as exc:
                    assert exc.expected == head and exc.actual > head, exc
                    conflicts += 1
                    continue
                assert new == head + 2
                print("ack", new, flush=True)
                break
        print("conflicts", conflicts, flush=True)
        await cp.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def test_MP_001_two_processes_append_contiguously_and_conflict_cleanly(tmp_path: Path) -> None:
    count = 40
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), tag, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("p", "q")
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    heads = [
        int(line.split()[1])
        for out, _ in outputs
        for line in out.splitlines()
        if line.startswith("ack")
    ]
    assert sorted(heads) == list(range(2, 4 * count + 1, 2)), "an update was lost or a head reused"

    async def check() -> None:
        cp = fast(tmp_path)
        log = await read_all(cp, "shared")
        assert [s.seq for s in log] == list(range(1, 4 * count + 1))
        pairs = texts(log)
        assert sorted(pairs) == sorted(
            f"{t}:{b}:{i}" for t in "pq" for b in range(count) for i in range(2)
        )
        assert all(
            pairs[k].endswith(":0") and pairs[k + 1] == pairs[k][:-1] + "1"
            for k in range(0, len(pairs), 2)
        )
        assert (await cp.check_integrity()).ok
        await cp.close()

    run(check())


class BlockingLockFS(OsFileSystem):
    """Signals when a blocking lock wait starts, so a test can act while it waits."""

    def __init__(self) -> None:
        self.waiting = threading.Event()

    def lock(self, fd: int, *, blocking: bool) -> bool:
        if blocking:
            self.waiting.set()
        return super().lock(fd, blocking=blocking)


def test_a_cancelled_lock_wait_gives_the_lock_back(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(1)]])
    meta = log_file(tmp_path, "s").with_suffix(".meta")
    fs = BlockingLockFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs, durability=Durability.PROCESS)
        other = os.open(meta, os.O_RDWR)  # another process's lock, as far as flock is concerned
        fcntl.flock(other, fcntl.LOCK_EX)
        task = asyncio.ensure_future(cp.append("s", [ev(2)]))
        await asyncio.to_thread(fs.waiting.wait)
        task.cancel()
        fcntl.flock(other, fcntl.LOCK_UN)
        with pytest.raises(asyncio.CancelledError):
            await task
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: nothing leaked
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
        assert await cp.append("s", [ev(3)]) == 2
        await cp.close()

    run(go())


def test_tasks_queue_behind_a_lock_held_elsewhere(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(0)]])
    meta = log_file(tmp_path, "s").with_suffix(".meta")
    fs = BlockingLockFS()

    async def go() -> None:
        cp = FileCheckpointer(tmp_path, fs=fs, durability=Durability.PROCESS)
        other = os.open(meta, os.O_RDWR)
        fcntl.flock(other, fcntl.LOCK_EX)
        tasks = [asyncio.ensure_future(cp.append("s", [ev(n)], expected_head=1)) for n in range(5)]
        await asyncio.to_thread(fs.waiting.wait)
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert outcomes.count(2) == 1
        assert sum(isinstance(o, CheckpointConflictError) for o in outcomes) == 4
        await cp.close()

    run(go())


def test_the_task_gate_hands_over_in_order_and_past_cancelled_waiters() -> None:
    async def go() -> None:
        gate = TaskGate()
        assert gate.try_enter()
        entries = [gate.enter() for _ in range(3)]
        for entry in entries:  # each runs until it waits for the gate
            assert isinstance(entry.send(None), asyncio.Future)
        first, second, third = entries
        with pytest.raises(asyncio.CancelledError):  # cancelled while queued
            second.throw(asyncio.CancelledError())
        gate.leave()  # handed to the first
        with pytest.raises(StopIteration):
            first.send(None)
        gate.leave()  # handed to the third, which is cancelled at that very moment
        with pytest.raises(asyncio.CancelledError):
            third.throw(asyncio.CancelledError())
        assert not gate.busy  # ... and passed it on: nobody is left, so it is free
        assert gate.try_enter()

    run(go())


def test_descriptors_stay_bounded_with_many_sessions(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def go() -> None:
        cp = fast(tmp_path)
        before = open_fds()
        for n in range(300):
            await cp.append(f"s{n}", [ev(n)])
        assert open_fds() - before <= 2 * 64
        assert [await cp.head(f"s{n}") for n in range(300)] == [1] * 300
        assert len(await cp.list_sessions()) == 300
        await cp.close()
        assert open_fds() <= before

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to count descriptors")
    run(go())


def test_damaged_sessions_are_still_listed_and_reported(tmp_path: Path) -> None:
    write_events(tmp_path, "s", [[ev(1)]])
    write_events(tmp_path, "t", [[ev(2)]])
    path = log_file(tmp_path, "s")
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # inside the header's mtime: the header checksum fails
    path.write_bytes(bytes(data))
    (tmp_path / "sessions" / "s-x.tmp").write_bytes(b"left over")
    (tmp_path / "sessions" / "README").write_text("not ours")
    (tmp_path / "sessions" / f"h-{'0' * 64}.log").write_bytes(b"garbage")

    async def go() -> None:
        cp = fast(tmp_path)
        assert sorted(i.id for i in await cp.list_sessions()) == ["s", "t"]
        with pytest.raises(CorruptStoreError):
            await read_all(cp, "s")
        report = await cp.check_integrity()
        assert not report.ok
        assert len(report.problems) == 2
        assert any("header" in p and "'s'" in p for p in report.problems)
        assert any(p.startswith("h-") for p in report.problems)
        assert "s-x.tmp" in report.detail
        assert "README" in report.detail
        await cp.close()

    run(go())


# -- generations, handles, options --------------------------------------------------------


def test_GEN_001_generation_survives_delete_reappend_and_reopen(tmp_path: Path) -> None:
    async def go() -> None:
        cp = fast(tmp_path)
        await cp.append("s", [ev(1), ev(2)])
        await cp.truncate("s", 1)
        await cp.delete("s")
        await cp.append("s", [ev(3)])
        await cp.close()
        again = fast(tmp_path)
        assert await again.generation("s") == 2
        with pytest.raises(CheckpointConflictError) as raised:
            await again.append("s", [ev(4)], expected_generation=0)
        assert raised.value.kind == "generation"
        assert raised.value.actual == 2
        await again.close()

    run(go())


def test_GEN_001_a_torn_generation_slot_falls_back_and_two_are_corruption(tmp_path: Path) -> None:
    async def bump(times: int) -> None:
        cp = fast(tmp_path)
        for n in range(times):
            await cp.append("s", [ev(n), ev(n)])
            await cp.truncate("s", 1)
        await cp.close()

    run(bump(3))
    meta = log_file(tmp_path, "s").with_suffix(".meta")
    data = bytearray(meta.read_bytes())
    slots = [struct.unpack_from("<Q", data, 16 * i)[0] for i in range(2)]
    assert sorted(slots) == [2, 3]
    newest = 16 * slots.index(3)
    data[newest : newest + 8] = b"\xff" * 8  # as a torn write of the newest slot would leave it
    meta.write_bytes(bytes(data))

    async def check(expected: int | None) -> None:
        cp = fast(tmp_path)
        if expected is None:
            with pytest.raises(CorruptStoreError):
                await cp.generation("s")
            assert not (await cp.check_integrity()).ok
        else:
            assert await cp.generation("s") == expected
        await cp.close()

    run(check(2))
    oldest = 16 - newest
    data[oldest : oldest + 8] = b"\xff" * 8
    meta.write_bytes(bytes(data))
    run(check(None))


def test_CLOSE_001_closed_handles_refuse_and_others_keep_working(tmp_path: Path) -> None:
    async def go() -> None:
        first, second = fast(tmp_path), fast(tmp_path)
        await first.append("s", [ev(1)])
        await first.close()
        await first.close()
        for call in (lambda: first.head("s"), lambda: read_all(first, "s"), first.list_sessions):
            with pytest.raises(CheckpointerClosedError):
                await call()
        assert await second.append("s", [ev(2)]) == 2
        await second.close()

    run(go())


def test_make_reads_the_durability_option(tmp_path: Path) -> None:
    assert isinstance(
        make(BackendContext(tmp_path, options={"durability": "process"})), FileCheckpointer
    )
    with pytest.raises(InvalidArgumentError) as bad:
        make(BackendContext(tmp_path, options={"durability": "sometimes"}))
    assert (bad.value.reason_code, bad.value.rule_id) == (ReasonCode.BAD_OPTION, None)
    with pytest.raises(InvalidArgumentError) as unknown:
        make(BackendContext(tmp_path, options={"durabilty": "fsync"}))
    assert (unknown.value.reason_code, unknown.value.rule_id) == (ReasonCode.UNKNOWN_OPTION, None)


def test_event_002_an_event_too_large_for_a_record_is_refused_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real limit is 4 GiB; a smaller one exercises the same refusal.
    monkeypatch.setattr(file_checkpointer, "MAX_PAYLOAD", 64)

    async def go() -> None:
        cp = fast(tmp_path)
        await cp.append("s", [ev(1)])
        with pytest.raises(InvalidArgumentError) as info:
            await cp.append("s", [ev(2), UserPrompt("x" * 100)])
        assert info.value.argument == "events"
        assert (info.value.reason_code, info.value.rule_id) == (ReasonCode.TOO_LARGE, "EVENT-002")
        assert [s.event for s in await read_all(cp, "s")] == [ev(1)]
        await cp.close()

    run(go())


@pytest.mark.parametrize("session_id", ["s", "unknown"])
def test_trunc_002_beyond_the_head_carries_its_code(tmp_path: Path, session_id: str) -> None:
    async def go() -> None:
        cp = fast(tmp_path)
        await cp.append("s", [ev(1)])
        with pytest.raises(InvalidArgumentError) as info:
            await cp.truncate(session_id, 2)
        assert (info.value.reason_code, info.value.rule_id) == (ReasonCode.BEYOND_HEAD, "TRUNC-002")
        await cp.close()

    run(go())
