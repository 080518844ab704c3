"""The codec protocol: a reversible transformation of stored payload bytes."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Codec"]


@runtime_checkable
class Codec(Protocol):
    """Transforms payload bytes on their way to and from storage (e.g. encryption).

    ``encode`` and ``decode`` may raise any exception on failure; a backend turns
    it into `CodecError` and then follows CODEC-002 (encode: write nothing) or
    CODEC-003 (decode: raise, never repair, skip or fall back to plaintext).
    ``name`` identifies the codec in errors and reports.
    """

    @property
    def name(self) -> str: ...

    def encode(self, data: bytes) -> bytes: ...

    def decode(self, data: bytes) -> bytes: ...
