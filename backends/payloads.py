"""Turning a stored payload back into an event: the codec, then the event decoder.

Shared by the backends that keep one payload per event in a database (SQLite,
PostgreSQL); each checks its own checksum first. The error says whose fault it
is: a codec that fails or returns no event is a `CodecError` (CODEC-003), bytes
that decode to no event without a codec are a `CorruptStoreError` (INTEG-002).
"""

from __future__ import annotations

import msgspec

from ..spec import Codec, CodecError, CorruptStoreError, SessionEvent, decode_event

__all__ = ["open_payload"]


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
