"""Reading records back, checking a whole store, and damaging one on purpose (file backend).

`decode_frames` is the read path's inner loop: it verifies each frame of a
committed region and turns it into a `StoredEvent`, mapping failures to the
contract's errors (`CorruptStoreError` for bytes that fail a check,
`CodecError` for payloads the codec cannot decode). `StoreInspector` backs
``check_integrity``: it never writes. `damage_first_record` backs the
``damage_store`` hook.
"""

from __future__ import annotations

import gc
import os
import zlib
from typing import Final

import msgspec

from ...spec import (
    Codec,
    CodecError,
    CorruptStoreError,
    FileSystem,
    IntegrityReport,
    SessionEvent,
    StoredEvent,
    decode_event,
)
from .format import (
    FRAME_HEAD,
    FRAME_OVERHEAD,
    MAX_HEADER,
    BadFrame,
    Frame,
    HeaderError,
    data_end,
    iso_utc,
    parse_header,
    read_generation,
    scan_frames,
)
from .log import LOG_SUFFIX, MAINT_SUFFIX, META_SUFFIX, TMP_SUFFIX
from .naming import stem_for

__all__ = ["StoreInspector", "damage_first_record", "decode_frames", "read_session_id"]

_HEAD_SIZE: Final = FRAME_HEAD.size
_PREFIX_SIZE: Final = _HEAD_SIZE - 4
_MAX_LISTED: Final = 20
"""Problems spelled out in the report's detail; the rest are counted."""


def decode_frames(
    buf: bytes, offset: int, seq: int, sid: str, codec: Codec | None, log_name: str
) -> tuple[list[StoredEvent], int, int]:
    """Decode the complete frames at the start of ``buf`` (file ``offset``), from record ``seq``.

    ``buf`` lies within the committed part of the log, so every check that fails
    is damage. Returns the events, the file offset after the last complete
    frame, and the size of the incomplete frame that follows (0 if none).

    The cyclic garbage collector is paused while a buffer is decoded: decoding
    allocates only acyclic objects, and the collections that thousands of new
    containers would trigger double the cost of a bulk read. Its previous state
    is restored afterwards.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _decode_frames(buf, offset, seq, sid, codec, log_name)
    finally:
        if paused:
            gc.enable()


def _decode_frames(
    buf: bytes, offset: int, seq: int, sid: str, codec: Codec | None, log_name: str
) -> tuple[list[StoredEvent], int, int]:
    events: list[StoredEvent] = []
    view = memoryview(buf)
    size = len(buf)
    unpack = FRAME_HEAD.unpack_from
    crc32 = zlib.crc32
    pos = 0
    last_ts, ts_text = -1, ""
    while pos < size:
        if size - pos < _HEAD_SIZE:
            return events, offset + pos, FRAME_OVERHEAD
        length, got, ts_ns, _more, pcrc, hcrc = unpack(buf, pos)
        if crc32(view[pos : pos + _PREFIX_SIZE]) != hcrc:
            raise _damaged(sid, seq, offset + pos, log_name, "record header checksum mismatch")
        total = FRAME_OVERHEAD + length
        if size - pos < total:
            return events, offset + pos, total
        start = pos + _HEAD_SIZE
        payload = view[start : start + length]
        if crc32(payload) != pcrc:
            raise _damaged(sid, seq, offset + pos, log_name, "payload checksum mismatch")
        # The trailer is not needed to return the right event; check_integrity and
        # the backward walk of the index verify it.
        if got != seq:
            raise _damaged(sid, seq, offset + pos, log_name, f"holds seq {got}")
        if codec is None:
            try:
                event = decode_event(payload)
            except msgspec.DecodeError as exc:
                raise _damaged(
                    sid, seq, offset + pos, log_name, f"payload is not an event: {exc}"
                ) from None
        else:
            event = _decode_through(codec, payload, sid, seq)
        if ts_ns != last_ts:
            last_ts, ts_text = ts_ns, iso_utc(ts_ns)
        events.append(StoredEvent(seq, sid, seq - 1 if seq > 1 else None, ts_text, event))
        pos += total
        seq += 1
    return events, offset + pos, 0


def _decode_through(codec: Codec, payload: memoryview, sid: str, seq: int) -> SessionEvent:
    # The checksum already proved these are the bytes that were written, so any
    # failure from here on is the codec's: CodecError, never repair, never plaintext.
    try:
        plain = codec.decode(bytes(payload))
    except Exception as exc:
        raise CodecError(sid, "decode", f"codec {codec.name!r} failed: {exc}", seq) from exc
    try:
        return decode_event(plain)
    except (msgspec.DecodeError, TypeError) as exc:
        raise CodecError(
            sid, "decode", f"codec {codec.name!r} returned bytes that are not an event: {exc}", seq
        ) from exc


def _damaged(sid: str, seq: int, offset: int, log_name: str, reason: str) -> CorruptStoreError:
    return CorruptStoreError(sid, f"record seq {seq} at offset {offset} of {log_name}", reason)


def read_session_id(fs: FileSystem, path: str, stem: str) -> str | None:
    """The session id in the header of the hashed-name log at ``path``, if it hashes to ``stem``."""
    try:
        fd = fs.open(path)
    except FileNotFoundError:
        return None
    try:
        header = parse_header(fs.read(fd, MAX_HEADER, 0))
    except HeaderError:
        return None
    finally:
        fs.close(fd)
    return header.session_id if stem_for(header.session_id) == stem else None


class StoreInspector:
    """Collects what `check_integrity` finds; reads only.

    A torn tail is not a problem: it is an append that was never acknowledged,
    and the next access to the session cuts it off. It is mentioned in the
    detail. Payloads are decoded (to catch bytes that pass their checksum but are
    not an event) only when no codec is configured: a codec's decode may have
    side effects, and a payload it cannot decode is `read`'s to report.
    """

    def __init__(self, fs: FileSystem, directory: str, *, decode: bool) -> None:
        self._fs = fs
        self._dir = directory
        self._decode = decode
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.sessions = 0
        self.records = 0

    def open_log(self, name: str) -> tuple[int, int] | None:
        """A descriptor of the log and its size now, or None if it is gone."""
        try:
            fd = self._fs.open(os.path.join(self._dir, name))
        except FileNotFoundError:
            return None
        return fd, self._fs.fstat(fd).size

    def check_log(self, sid: str, name: str, fd: int, size: int) -> None:
        """Verify the header and every frame of one log, up to ``size``."""
        self.sessions += 1
        try:
            header = parse_header(self._fs.read(fd, MAX_HEADER, 0))
        except HeaderError as exc:
            self.problems.append(f"session {sid!r}: header of {name}: {exc.reason}")
            return
        if header.session_id != sid:
            self.problems.append(f"session {sid!r}: {name} holds session {header.session_id!r}")
            return

        def visit(frame: Frame) -> None:
            self.records += 1
            if self._decode:
                try:
                    decode_event(frame.payload)
                except msgspec.DecodeError as exc:
                    self.problems.append(
                        f"session {sid!r}: record seq {frame.seq} at offset {frame.offset} "
                        f"of {name}: payload is not an event: {exc}"
                    )

        def read(offset: int, count: int) -> bytes:
            return self._fs.read(fd, count, offset)

        try:
            scan = scan_frames(read, header.length, size, 1, visit)
        except BadFrame as exc:
            self.problems.append(f"session {sid!r}: {exc} of {name}")
            return
        if scan.torn:
            written = data_end(read, scan.committed, size)
            self.notes.append(
                f"session {sid!r}: {written - scan.committed} bytes of an interrupted append after "
                f"offset {scan.committed} of {name}, cut off at the next access"
            )

    def other_file(self, name: str) -> None:
        """Check a file that is not a session's log: generation files, leftovers."""
        if name.endswith(META_SUFFIX):
            try:
                fd = self._fs.open(os.path.join(self._dir, name))
            except FileNotFoundError:
                return
            try:
                read_generation(self._fs.read(fd, 64, 0))
            except ValueError as exc:
                self.problems.append(f"generation file {name}: {exc}")
            finally:
                self._fs.close(fd)
        elif name.endswith(LOG_SUFFIX):
            self.problems.append(f"{name}: a log whose session id cannot be recovered")
        elif name.endswith(TMP_SUFFIX):
            self.notes.append(f"{name}: left over by an interrupted truncate or first append")
        elif name.endswith(MAINT_SUFFIX):
            self.notes.append(f"{name}: a session held for maintenance (or by a process that died)")
        else:
            self.notes.append(f"{name}: not a file of this store")

    def report(self, repairs: list[str]) -> IntegrityReport:
        """The findings as an `IntegrityReport`; ``repairs`` are the handle's own."""
        checked = f"{self.sessions} sessions, {self.records} records checked"
        if self.problems:
            listed = "; ".join(self.problems[:_MAX_LISTED])
            more = len(self.problems) - _MAX_LISTED
            detail = f"{len(self.problems)} problems ({checked}): {listed}"
            if more > 0:
                detail += f"; and {more} more"
        else:
            detail = checked
        if self.notes:
            detail += ". Notes: " + "; ".join(self.notes[:_MAX_LISTED])
        return IntegrityReport(
            ok=not self.problems,
            detail=detail,
            problems=tuple(self.problems),
            repairs=tuple(repairs),
        )


def _record_spans(fs: FileSystem, path: str) -> tuple[str, list[tuple[int, int]]]:
    """The session id of a log and the (offset, payload length) of each verified record."""
    spans: list[tuple[int, int]] = []
    fd = fs.open(path)
    try:
        size = fs.fstat(fd).size
        header = parse_header(fs.read(fd, MAX_HEADER, 0))

        def read(offset: int, count: int) -> bytes:
            return fs.read(fd, count, offset)

        def keep(frame: Frame) -> None:
            spans.append((frame.offset, len(frame.payload)))

        scan_frames(read, header.length, size, 1, keep)
    finally:
        fs.close(fd)
    return header.session_id, spans


def damage_first_record(fs: FileSystem, directory: str) -> str:
    """Flip one payload byte of record 1 of the first log that has two or more records
    (or of a one-record log if there is no other), and say where."""
    chosen: tuple[str, str, int, int] | None = None
    for name in sorted(fs.listdir(directory)):
        if not name.endswith(LOG_SUFFIX):
            continue
        sid, spans = _record_spans(fs, os.path.join(directory, name))
        if spans and (chosen is None or len(spans) >= 2):
            offset, length = spans[0]
            chosen = (name, sid, offset + _HEAD_SIZE + length // 2, len(spans))
            if len(spans) >= 2:
                break
    if chosen is None:
        raise ValueError(f"no stored record to damage under {directory}")
    name, sid, position, count = chosen
    fd = fs.open(os.path.join(directory, name))
    try:
        byte = fs.read(fd, 1, position)
        fs.write(fd, bytes([byte[0] ^ 0xFF]), position)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    return (
        f"flipped the byte at offset {position} of sessions/{name}, inside the payload of "
        f"record seq 1 (of {count}) of session {sid!r}"
    )
