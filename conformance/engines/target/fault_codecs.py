"""Codecs for checking backends that declare CODEC.

`SealedCodec` is a well-behaved codec: it hides the plaintext (a SHAKE-256
keystream) and authenticates it (HMAC-SHA256), so a wrong key or a flipped byte
is detected on decode. The others inject faults on purpose: they let the kit see
whether a backend writes nothing when encoding fails (CODEC-002), raises rather
than repairs when decoding fails (CODEC-003), and never falls back to plaintext
(CODEC-004). All are deterministic given their arguments.
"""

from __future__ import annotations

import hashlib
import hmac
import os

__all__ = ["CodecFault", "CorruptingCodec", "FailingCodec", "SealedCodec"]


class CodecFault(Exception):
    """What the fault-injecting codecs raise; backends must wrap it in CodecError."""


class SealedCodec:
    """Encrypt-then-MAC with a SHAKE-256 keystream: hides and authenticates payloads.

    Layout: ``b"SC1"`` | 8-byte nonce | 16-byte tag | body. Not meant as production
    cryptography; meant to make plaintext invisible and tampering certain to fail.
    """

    MAGIC = b"SC1"

    def __init__(self, key: bytes = b"checkpointspec-test-key") -> None:
        self._key = key
        self.name = f"sealed:{hashlib.sha256(key).hexdigest()[:8]}"

    def _stream(self, nonce: bytes, size: int) -> bytes:
        return hashlib.shake_256(self._key + nonce).digest(size)

    def _tag(self, nonce: bytes, body: bytes) -> bytes:
        return hmac.new(self._key, nonce + body, hashlib.sha256).digest()[:16]

    def encode(self, data: bytes) -> bytes:
        nonce = os.urandom(8)
        body = bytes(a ^ b for a, b in zip(data, self._stream(nonce, len(data)), strict=True))
        return self.MAGIC + nonce + self._tag(nonce, body) + body

    def decode(self, data: bytes) -> bytes:
        if len(data) < 27 or not data.startswith(self.MAGIC):
            raise CodecFault("not a sealed payload")
        nonce, tag, body = data[3:11], data[11:27], data[27:]
        if not hmac.compare_digest(tag, self._tag(nonce, body)):
            raise CodecFault("authentication failed: wrong key or tampered payload")
        return bytes(a ^ b for a, b in zip(body, self._stream(nonce, len(body)), strict=True))


class FailingCodec:
    """Wraps a codec and fails on the ``encode_fails_at``-th encode call, and on every
    decode call from the ``decode_fails_from``-th on (1-based; None: never)."""

    def __init__(
        self,
        inner: SealedCodec | None = None,
        *,
        encode_fails_at: int | None = None,
        decode_fails_from: int | None = None,
    ) -> None:
        self.inner = inner or SealedCodec()
        self.name = self.inner.name  # same name: the store must not be able to tell
        self.encode_fails_at = encode_fails_at
        self.decode_fails_from = decode_fails_from
        self.encode_calls = 0
        self.decode_calls = 0

    def encode(self, data: bytes) -> bytes:
        self.encode_calls += 1
        if self.encode_calls == self.encode_fails_at:
            raise CodecFault(f"injected failure on encode call {self.encode_calls}")
        return self.inner.encode(data)

    def decode(self, data: bytes) -> bytes:
        self.decode_calls += 1
        if self.decode_fails_from is not None and self.decode_calls >= self.decode_fails_from:
            raise CodecFault(f"injected failure on decode call {self.decode_calls}")
        return self.inner.decode(data)


class CorruptingCodec:
    """Decodes successfully but returns bytes with one flipped bit: a codec bug the
    backend must surface as CodecError, never as a skipped or "repaired" event."""

    def __init__(self, inner: SealedCodec | None = None) -> None:
        self.inner = inner or SealedCodec()
        self.name = self.inner.name

    def encode(self, data: bytes) -> bytes:
        return self.inner.encode(data)

    def decode(self, data: bytes) -> bytes:
        plain = bytearray(self.inner.decode(data))
        if plain:
            plain[0] ^= 0x40
        return bytes(plain)
