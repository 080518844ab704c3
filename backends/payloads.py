"""Payloads of the backends that keep one row per event in a database (SQLite, PostgreSQL).

An event is stored as its encoded bytes passed through the codec, with the
CRC-32 of what is stored beside it. Going back, each row is checked in turn:
its seq where it belongs, its checksum, then the codec and the event decoder.
The error says whose fault a failure is: a codec that fails or returns no
event is a `CodecError` (CODEC-002, CODEC-003); bytes that are damaged, or
decode to no event without a codec, are a `CorruptStoreError` (INTEG-002).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import msgspec

from ..spec import Codec, CodecError, CorruptStoreError, SessionEvent, StoredEvent, decode_event

__all__ = ["Row", "open_payload", "open_rows", "seal_payloads"]

Row = tuple[int, str, int, bytes]
"""One stored event as the database returns it: seq, timestamp, CRC-32 of the payload, payload."""


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
