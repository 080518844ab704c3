"""The file backend's on-disk format: store marker, log header, record frames, generations.

Pure byte layout and validation; the only I/O is through the ``read`` callables
the caller passes in. All integers are little-endian; checksums are CRC-32
(``zlib.crc32``).

**Store marker** ``format.json``: ``{"format": "checkpointspec.file", "version": N}``.
A store whose version is above `FORMAT_VERSION` is refused untouched.

**Log header** (one per ``.log`` file)::

    magic    8  b"\\x89CSLOG\\r\\n"
    version  u16  format version of this log
    flags    u16  bit 0: payloads were encoded by a codec
    id_len   u32  length of the session id in UTF-8 bytes
    mtime_ns i64  when the log was created or last truncated (ns since the epoch)
    id       id_len bytes, the session id (UTF-8)
    crc      u32  CRC-32 of everything above

**Record frame** (one per event, appended after the header)::

    length   u32  payload length L
    seq      u64
    ts_ns    i64  when the append was accepted (ns since the epoch, UTC)
    more     u32  how many events of the same batch follow this one
    pcrc     u32  CRC-32 of the payload (the bytes as stored, i.e. after the codec)
    hcrc     u32  CRC-32 of the 28 bytes above
    payload  L bytes: encode_event(event), passed through the codec if any
    trailer  u32  L XOR 0xFFFFFFFF, so the last frame can be found from the end

**Reserved space.** A log may be followed by zero bytes: space the backend
reserves so that a durable append overwrites zeros instead of growing the file
(an fsync that must also commit a new file size costs a third more on ext4).
The written data therefore ends at the last non-zero byte (`data_end`), not at
the end of the file. Every frame ends with a non-zero byte for this: the
trailer is the complement of the length, whose top byte is zero because a
payload is at most `MAX_PAYLOAD` bytes, so the trailer's last byte is not.

A batch is committed when its frame with ``more == 0`` is complete. Reading
from the start, the tail of a log is **torn** (an interrupted append, cut off
on repair) when the written data ends inside a frame header or inside a frame
whose header checksum is right, when the bytes from some frame on are all zero
(the reserve, or what some file systems expose after a crash) while a batch is
open, or when the data ends inside a batch. Zeros right after a complete batch
are the reserve: the clean end of the log. Anything else that fails a check — a
header or payload checksum, a trailer, a seq out of order, a broken batch — is
**corruption**: reported, never repaired. A flipped length cannot pass for a
torn tail because the header checksum covers it, and a flipped byte in the last
record cannot either, because the record still ends with its non-zero trailer.

**Generation file** ``.meta`` (32 bytes): two slots of ``generation u64 | b"GEN1" |
crc u32``. A bump writes the slot that does not hold the current value, so a
torn write leaves the other slot, and the value read is the highest valid slot.
An all-zero slot is one never written; two damaged slots are corruption.
Byte 32, when present, is the **maintenance mark** (`MAINT_MARK_OFFSET`): 1
while the session may be held for maintenance (its ``.maint`` file then says by
whom), 0 or absent otherwise. Writers read it with the generation, at no extra
cost; readers of the generation ignore it.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from array import array
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "FRAME_HEAD",
    "FRAME_OVERHEAD",
    "LOG_MAGIC",
    "MAINT_MARK",
    "MAINT_MARK_OFFSET",
    "MAX_HEADER",
    "MAX_PAYLOAD",
    "META_SIZE",
    "BadFrame",
    "Frame",
    "HeaderError",
    "LogHeader",
    "Scan",
    "data_end",
    "frame_more",
    "iso_utc",
    "maintenance_marked",
    "marker_bytes",
    "pack_frames",
    "pack_header",
    "parse_header",
    "parse_marker",
    "probe_last",
    "read_generation",
    "scan_frames",
    "verify_frame",
    "walk_back",
    "write_generation",
]

FORMAT_NAME: Final = "checkpointspec.file"
FORMAT_VERSION: Final = 1

LOG_MAGIC: Final = b"\x89CSLOG\r\n"
FLAG_ENCODED: Final = 1
_HEADER_FIXED: Final = struct.Struct("<8sHHIq")
_U32: Final = struct.Struct("<I")
MAX_HEADER: Final = _HEADER_FIXED.size + 4 * 256 + _U32.size
"""Longest possible header: 256 code points are at most 1024 UTF-8 bytes."""

_FRAME_PREFIX: Final = struct.Struct("<IQqII")
FRAME_HEAD: Final = struct.Struct("<IQqIII")
FRAME_OVERHEAD: Final = FRAME_HEAD.size + _U32.size
MAX_PAYLOAD: Final = 0xFEFF_FFFF
"""Largest payload: below 0xFF00_0000, so that the trailer (the complement) ends non-zero."""
_TRAILER_MASK: Final = 0xFFFF_FFFF
_PREFIX_SIZE: Final = _FRAME_PREFIX.size
_HEAD_SIZE: Final = FRAME_HEAD.size

_WALK_WINDOW: Final = 1 << 12
_WALK_WINDOW_MAX: Final = 1 << 20

_META_SLOT: Final = struct.Struct("<Q4sI")
_META_MAGIC: Final = b"GEN1"
META_SIZE: Final = 2 * _META_SLOT.size
MAINT_MARK_OFFSET: Final = META_SIZE
"""Where the maintenance mark lies in a ``.meta`` file: right after the generation slots."""
MAINT_MARK: Final = b"\x01"
"""The mark's value while the session may be held; anything else means not held."""

_crc32 = zlib.crc32


# -- store marker -------------------------------------------------------------------
def marker_bytes(version: int = FORMAT_VERSION) -> bytes:
    """The content of ``format.json`` for a store of ``version``."""
    return json.dumps({"format": FORMAT_NAME, "version": version}).encode() + b"\n"


def parse_marker(data: bytes) -> int:
    """The version in a ``format.json``; ValueError if it is not one of ours."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ValueError(f"not a {FORMAT_NAME} marker")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"bad version {version!r}")
    return version


# -- log header ---------------------------------------------------------------------
class HeaderError(Exception):
    """A log header that is not valid; ``newer`` is set when it is only too new."""

    def __init__(self, reason: str, newer: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.newer = newer


class LogHeader(NamedTuple):
    """A parsed log header; ``length`` is where the first frame starts."""

    session_id: str
    encoded: bool
    mtime_ns: int
    length: int


def pack_header(session_id: str, *, encoded: bool, mtime_ns: int) -> bytes:
    """The header of a new log."""
    raw = session_id.encode("utf-8")
    fixed = _HEADER_FIXED.pack(
        LOG_MAGIC, FORMAT_VERSION, FLAG_ENCODED if encoded else 0, len(raw), mtime_ns
    )
    body = fixed + raw
    return body + _U32.pack(_crc32(body))


def parse_header(data: bytes) -> LogHeader:
    """Parse the start of a log file (at least the whole header, or the whole file).

    Raises `HeaderError` for a short, foreign, damaged or newer header.
    """
    if len(data) < _HEADER_FIXED.size:
        raise HeaderError(f"file is {len(data)} bytes, shorter than a header")
    magic, version, flags, id_len, mtime_ns = _HEADER_FIXED.unpack_from(data)
    if magic != LOG_MAGIC:
        raise HeaderError("not a checkpointspec log (bad magic)")
    if version > FORMAT_VERSION:
        raise HeaderError(f"log format {version} is newer than {FORMAT_VERSION}", newer=version)
    end = _HEADER_FIXED.size + id_len
    if id_len > MAX_HEADER or len(data) < end + _U32.size:
        raise HeaderError("header is cut short")
    (crc,) = _U32.unpack_from(data, end)
    if _crc32(data[:end]) != crc:
        raise HeaderError("header checksum mismatch")
    try:
        session_id = data[_HEADER_FIXED.size : end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderError("session id in header is not UTF-8") from exc
    return LogHeader(session_id, bool(flags & FLAG_ENCODED), mtime_ns, end + _U32.size)


# -- frames ---------------------------------------------------------------------------
def pack_frames(payloads: Sequence[bytes], first_seq: int, ts_ns: int) -> tuple[bytes, list[int]]:
    """Frame one batch. Returns the bytes and each frame's offset within them."""
    parts: list[bytes] = []
    offsets: list[int] = []
    position = 0
    last = len(payloads) - 1
    for index, payload in enumerate(payloads):
        length = len(payload)
        prefix = _FRAME_PREFIX.pack(length, first_seq + index, ts_ns, last - index, _crc32(payload))
        trailer = _U32.pack(length ^ _TRAILER_MASK)
        parts += (prefix, _U32.pack(_crc32(prefix)), payload, trailer)
        offsets.append(position)
        position += FRAME_OVERHEAD + length
    return b"".join(parts), offsets


def frame_more(head: bytes) -> int:
    """The ``more`` field of a frame header; ValueError if the header fails its checksum."""
    if len(head) != _HEAD_SIZE:
        raise ValueError("record header cut short")
    _, _, _, more, _, hcrc = FRAME_HEAD.unpack(head)
    if _crc32(head[:_PREFIX_SIZE]) != hcrc:
        raise ValueError("record header checksum mismatch")
    return int(more)


class Frame(NamedTuple):
    """One verified frame: where it is, what it says, and its payload."""

    offset: int
    seq: int
    ts_ns: int
    more: int
    end: int
    payload: memoryview


class BadFrame(Exception):
    """Corruption found at ``offset`` while expecting record ``seq``."""

    def __init__(self, offset: int, seq: int, reason: str) -> None:
        super().__init__(f"record seq {seq} at offset {offset}: {reason}")
        self.offset = offset
        self.seq = seq
        self.reason = reason


def verify_frame(data: bytes | memoryview, pos: int, seq: int, offset: int) -> Frame:
    """Check the complete frame at ``data[pos:]`` (file ``offset``), which must be ``seq``."""
    view = memoryview(data)
    length, got_seq, ts_ns, more, pcrc, hcrc = FRAME_HEAD.unpack_from(view, pos)
    if _crc32(view[pos : pos + _PREFIX_SIZE]) != hcrc:
        raise BadFrame(offset, seq, "record header checksum mismatch")
    start = pos + _HEAD_SIZE
    payload = view[start : start + length]
    if len(payload) != length or _crc32(payload) != pcrc:
        raise BadFrame(offset, seq, "payload checksum mismatch")
    if _U32.unpack_from(view, start + length)[0] != length ^ _TRAILER_MASK:
        raise BadFrame(offset, seq, "trailer does not match the record length")
    if got_seq != seq:
        raise BadFrame(offset, seq, f"holds seq {got_seq}")
    return Frame(offset, got_seq, ts_ns, more, offset + FRAME_OVERHEAD + length, payload)


def probe_last(read: Callable[[int, int], bytes], first: int, end: int) -> Frame | None:
    """The last frame of a log whose frames start at ``first`` and end at ``end``.

    Found from the end through the trailer, in two reads, whatever the log's
    length. None when the end is not a verified frame that closes a batch (a torn
    tail, or damage): the caller then scans from the start.
    """
    if end - first < FRAME_OVERHEAD:
        return None
    (trailer,) = _U32.unpack(read(end - _U32.size, _U32.size))
    start = end - FRAME_OVERHEAD - (trailer ^ _TRAILER_MASK)
    if start < first:
        return None
    data = read(start, end - start)
    if len(data) != end - start:
        return None
    seq = FRAME_HEAD.unpack_from(data)[1]
    # Every frame is at least FRAME_OVERHEAD bytes: a larger seq cannot be real.
    if not 1 <= seq <= (end - first) // FRAME_OVERHEAD:
        return None
    try:
        frame = verify_frame(data, 0, seq, start)
    except BadFrame:
        return None
    return frame if frame.more == 0 else None


def walk_back(
    read: Callable[[int, int], bytes], first: int, position: int, seq: int, down_to: int
) -> list[int]:
    """Offsets of records ``down_to .. seq - 1``, walking back from record ``seq`` at ``position``.

    Each step reads the previous frame's trailer to find its start and checks its
    header (checksum, length, seq); payloads are checked when they are read.
    ``first`` is where record 1 starts. Raises `BadFrame` on anything inconsistent.
    Reads in windows that start at 4 KiB and double up to 1 MiB, so the cost is
    proportional to the records walked.
    """
    offsets: list[int] = []
    window_start, window = position, b""
    size = _WALK_WINDOW
    while seq > down_to:
        if position - first < FRAME_OVERHEAD:
            raise BadFrame(position, seq - 1, "no room for the record before this one")
        if position - _U32.size < window_start:
            window_start = max(first, position - size)
            window = read(window_start, position - window_start)
            size = min(2 * size, _WALK_WINDOW_MAX)
        (trailer,) = _U32.unpack_from(window, position - _U32.size - window_start)
        length = trailer ^ _TRAILER_MASK
        start = position - FRAME_OVERHEAD - length
        if start < first:
            raise BadFrame(
                position, seq - 1, "the trailer before this record points outside the log"
            )
        if start < window_start:
            window_start = max(first, min(start, position - size))
            window = read(window_start, position - window_start)
        head = window[start - window_start : start - window_start + _HEAD_SIZE]
        got_length, got_seq, _, _, _, hcrc = FRAME_HEAD.unpack(head)
        if _crc32(head[:_PREFIX_SIZE]) != hcrc:
            raise BadFrame(start, seq - 1, "record header checksum mismatch")
        if got_length != length or got_seq != seq - 1:
            raise BadFrame(start, seq - 1, "record header does not match its trailer")
        offsets.append(start)
        position = start
        seq -= 1
    if seq == 1 and position != first:
        raise BadFrame(first, 1, "records do not start right after the header")
    offsets.reverse()
    return offsets


class Scan(NamedTuple):
    """What `scan_frames` found: the committed frames and whether a torn tail follows."""

    offsets: array[int]
    """Start offset of each frame in a complete batch, in seq order."""
    last_ts_ns: int | None
    committed: int
    """End of the last complete batch: where the next append goes."""
    torn: bool
    """Bytes after ``committed`` form a torn tail (see the module docstring)."""


def scan_frames(
    read: Callable[[int, int], bytes],
    start: int,
    end: int,
    first_seq: int,
    visit: Callable[[Frame], None] | None = None,
    chunk: int = 1 << 20,
) -> Scan:
    """Verify the frames in ``[start, end)``, the first of which must be ``first_seq``.

    ``start`` must be a batch boundary and ``end`` the end of the file (or of a
    prefix of it that the caller fixed); zeros before ``end`` are taken for the
    reserve. ``visit`` sees every verified frame (also those of a torn final
    batch). Raises `BadFrame` at the first corruption.
    """
    offsets: array[int] = array("q")
    pending: list[int] = []
    last_ts: int | None = None
    committed = start
    expected_more: int | None = None
    seq = first_seq
    base, buf = start, b""
    pos = start
    while pos < end:
        if end - pos < _HEAD_SIZE:
            return Scan(
                offsets, last_ts, committed, bool(pending) or data_end(read, pos, end) > pos
            )
        if pos + _HEAD_SIZE > base + len(buf):
            base, buf = pos, read(pos, min(max(chunk, _HEAD_SIZE), end - pos))
        length, _, ts_ns, more, _, hcrc = FRAME_HEAD.unpack_from(buf, pos - base)
        header_ok = _crc32(memoryview(buf)[pos - base : pos - base + _PREFIX_SIZE]) == hcrc
        if not header_ok:
            written = data_end(read, pos, end)
            if written < pos + _HEAD_SIZE:  # the reserve, or a header cut short by a crash
                return Scan(offsets, last_ts, committed, bool(pending) or written > pos)
            raise BadFrame(pos, seq, "record header checksum mismatch")
        frame_end = pos + FRAME_OVERHEAD + length
        if frame_end > end:
            return Scan(offsets, last_ts, committed, True)
        if frame_end > base + len(buf):
            base, buf = pos, read(pos, max(min(chunk, end - pos), frame_end - pos))
        try:
            frame = verify_frame(buf, pos - base, seq, pos)
        except BadFrame:
            # A complete frame ends with a non-zero byte; one that the written
            # data does not reach was cut short by a crash.
            if data_end(read, pos, end) < frame_end:
                return Scan(offsets, last_ts, committed, True)
            raise
        if expected_more is not None and more != expected_more:
            raise BadFrame(
                pos, seq, f"batch broken: {more} events announced, {expected_more} expected"
            )
        if visit is not None:
            visit(frame)
        pending.append(pos)
        if more == 0:
            offsets.extend(pending)
            pending.clear()
            committed = frame_end
            last_ts = ts_ns
            expected_more = None
        else:
            expected_more = more - 1
        seq += 1
        pos = frame_end
    return Scan(offsets, last_ts, committed, bool(pending))


def data_end(read: Callable[[int, int], bytes], first: int, end: int) -> int:
    """Where the written data in ``[first, end)`` ends: just past its last non-zero byte.

    ``first`` when every byte is zero. Reads backwards from ``end`` in steps that
    double from 512 bytes to 64 KiB, so the cost is about twice the size of the
    zeros that follow the data, and small when there are none.
    """
    step = 512
    while end > first:
        start = max(first, end - step)
        written = len(read(start, end - start).rstrip(b"\0"))
        if written:
            return start + written
        end = start
        step = min(2 * step, 1 << 16)
    return first


# -- generations ------------------------------------------------------------------------
def _slot(generation: int) -> bytes:
    body = struct.pack("<Q4s", generation, _META_MAGIC)
    return body + _U32.pack(_crc32(body))


def _slots(data: bytes) -> list[int | None]:
    """Each slot's generation; None for an empty (never written) slot. ValueError if both are damaged."""
    values: list[int | None] = []
    damaged = 0
    for index in range(2):
        raw = data[index * _META_SLOT.size : (index + 1) * _META_SLOT.size]
        if raw.count(0) == len(raw):
            values.append(None)
            continue
        if len(raw) == _META_SLOT.size:
            generation, magic, crc = _META_SLOT.unpack(raw)
            if magic == _META_MAGIC and _crc32(raw[:12]) == crc:
                values.append(generation)
                continue
        values.append(None)
        damaged += 1
    if damaged == 2:
        raise ValueError("both generation slots are damaged")
    return values


def read_generation(data: bytes) -> int:
    """The generation stored in a ``.meta`` file's bytes (0 for an empty file)."""
    return max((v for v in _slots(data) if v is not None), default=0)


def write_generation(data: bytes, generation: int) -> tuple[int, bytes]:
    """Where and what to write to store ``generation`` over the ``.meta`` bytes ``data``.

    Returns (offset, bytes) of the slot that does not hold the current value.
    """
    values = _slots(data)
    current = max((v for v in values if v is not None), default=None)
    index = 1 if current is not None and values[0] == current else 0
    return index * _META_SLOT.size, _slot(generation)


def maintenance_marked(meta: bytes) -> bool:
    """Whether a ``.meta`` file's bytes carry the maintenance mark."""
    return meta[MAINT_MARK_OFFSET : MAINT_MARK_OFFSET + 1] == MAINT_MARK


# -- timestamps -----------------------------------------------------------------------
_last_second: list[tuple[int, str]] = [(-1, "")]


def iso_utc(ts_ns: int) -> str:
    """ISO 8601 with microseconds and a ``+00:00`` offset, fast for runs of nearby stamps."""
    second, rest = divmod(ts_ns, 1_000_000_000)
    cached_second, prefix = _last_second[0]
    if second != cached_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _last_second[0] = (second, prefix)
    return f"{prefix}.{rest // 1000:06d}+00:00"
