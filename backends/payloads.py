"""Payloads of the backends that keep one row per event in a database (SQLite, PostgreSQL).

An event is stored as its encoded bytes passed through the codec, with the
CRC-32 of what is stored beside it. Going back, each row is checked in turn:
its seq where it belongs, its checksum, then the codec and the event decoder.
The error says whose fault a failure is: a codec that fails or returns no
event is a `CodecError` (CODEC-002, CODEC-003); bytes that are damaged, or
decode to no event without a codec, are a `CorruptStoreError` (INTEG-002).

`stored_events` turns the rows of one read snapshot into the events a ``read``
yields, decoding them in chunks with the cyclic garbage collector paused
(`gc_paused`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import msgspec

from ..spec import Codec, CodecError, CorruptStoreError, SessionEvent, StoredEvent, decode_event

__all__ = [
    "Row",
    "gc_paused",
    "open_payload",
    "open_rows",
    "seal_payloads",
    "stored_events",
]

Row = tuple[int, str, int, bytes]
"""One stored event as the database returns it: seq, timestamp, CRC-32 of the payload, payload."""

_DECODE_CHUNK: Final = 2048
"""Rows decoded per pause of the garbage collector in `stored_events`."""

_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while bulk rows or events are built.

    Those objects form no cycles; the collector would only rescan them again and
    again (1.4-2x slower on large reads). Counted, because a backend's worker
    thread and the event loop thread may pause it at the same time.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def seal_payloads(session_id: str, payloads: list[bytes], codec: Codec | None) -> list[bytes]:
    """Pass encoded events through ``codec`` (if any) before they are stored; any failure
    of the codec is `CodecError` and nothing is written."""
    if codec is None:
        return payloads
    try:
        return [codec.encode(payload) for payload in payloads]
    except Exception as exc:  # a codec may raise anything: it is the codec's failure
        raise CodecError(session_id, "encode", f"{codec.name}: {exc!r}") from exc


def open_rows(
    session_id: str, rows: Iterable[Row], first_seq: int, codec: Codec | None
) -> list[StoredEvent]:
    """Check and decode rows that must hold seqs ``first_seq, first_seq + 1, ...``."""
    decoded: list[StoredEvent] = []
    append = decoded.append
    seq = first_seq
    for stored_seq, ts, crc, payload in rows:
        if stored_seq != seq:
            raise CorruptStoreError(
                session_id, f"events seq {seq}", f"found seq {stored_seq} where {seq} belongs"
            )
        try:
            intact = zlib.crc32(payload) == crc
        except TypeError:  # not bytes: the column was changed behind the backend's back
            intact = False
        if not intact:
            raise CorruptStoreError(
                session_id, f"events seq {seq}", "payload does not match its checksum"
            )
        event = open_payload(session_id, seq, payload, codec)
        append(StoredEvent(seq, session_id, seq - 1 if seq > 1 else None, ts, event))
        seq += 1
    return decoded


def open_payload(session_id: str, seq: int, payload: bytes, codec: Codec | None) -> SessionEvent:
    """The event stored as ``payload`` at ``seq``, decoded through ``codec`` if any."""
    if codec is not None:
        try:
            payload = codec.decode(payload)
        except Exception as exc:  # a codec may raise anything: it is the codec's failure
            raise CodecError(session_id, "decode", f"{codec.name}: {exc!r}", seq) from exc
    try:
        return decode_event(payload)
    except msgspec.DecodeError as exc:
        if codec is not None:
            raise CodecError(
                session_id, "decode", f"{codec.name} returned no valid event: {exc}", seq
            ) from exc
        raise CorruptStoreError(session_id, f"events seq {seq}", str(exc)) from exc


def stored_events(
    session_id: str, head: int, since_seq: int, rows: Sequence[Row], codec: Codec | None
) -> Iterator[StoredEvent]:
    """The events of one read snapshot: ``rows`` after ``since_seq`` of a log whose head is
    ``head``, checked and decoded a chunk at a time as they are taken.

    Rows that are not exactly seqs ``since_seq + 1 .. head`` raise `CorruptStoreError`
    (before any event); a damaged payload or a failing codec raise as `open_rows` says.
    """
    if len(rows) != max(head - since_seq, 0):
        raise CorruptStoreError(
            session_id, "events", f"head is {head} but {len(rows)} events follow seq {since_seq}"
        )
    for start in range(0, len(rows), _DECODE_CHUNK):
        with gc_paused():
            chunk = open_rows(
                session_id, rows[start : start + _DECODE_CHUNK], since_seq + start + 1, codec
            )
        yield from chunk
