"""How the file backend turns session ids into file names, and back.

The mapping must be injective (distinct ids never share a file), must keep every
name inside the store's directory, must survive case-insensitive and
normalising file systems, and must fit the usual 255-byte limit on a name.

**Escaped names** (``s-`` prefix). The id is encoded as UTF-8; every byte in
``[a-z0-9.-]`` is kept as it is and every other byte, uppercase letters and
``_`` included, is written as ``_`` followed by two lowercase hex digits. So
``"a/b"`` becomes ``s-a_2fb``, ``"a_b"`` becomes ``s-a_5fb`` and ``"A"`` becomes
``s-_41``. Decoding is unambiguous (a literal character is never ``_``), so the
mapping is injective, and the id is read back from the name. Names hold only
lowercase ASCII letters, digits, ``.``, ``-`` and ``_``: two names never differ
only by case or by Unicode normalisation, so case-insensitive (macOS, Windows)
and normalising (HFS+) file systems cannot merge two sessions. No name holds a
separator; the ``s-`` prefix keeps ``.``, ``..`` and device names such as
``CON`` or ``nul`` from ever being a whole name, and the suffix the backend adds
(``.log``, ``.meta``, ``.tmp``, ``.maint``) keeps a name from ending in a dot.
No suffix ends another, so the files of two sessions never share a name.

**Hashed names** (``h-`` prefix). An id whose escaped form would be longer than
`MAX_ESCAPED` characters (a 256-character id may need 3072) is named by the
SHA-256 of its UTF-8 bytes in lowercase hex. The full id is kept in the log's
header, which is where `list_sessions` reads it from; the backend also checks
that the header's id hashes to the name, so a collision could never pass
silently. The two prefixes keep escaped and hashed names apart.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["MAX_ESCAPED", "id_from_stem", "is_hashed_stem", "stem_for"]

MAX_ESCAPED: Final = 200
"""Longest escaped part of a name; longer ids get a hashed name. With the prefix
and the longest suffix (``.maint``) a name stays at 208 bytes, under 255."""

_ESCAPED_PREFIX: Final = "s-"
_HASHED_PREFIX: Final = "h-"
_SAFE: Final = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789.-")
_HEX: Final = frozenset("0123456789abcdef")
# One entry per byte value: the byte itself if safe, its escape otherwise.
_ESCAPES: Final = tuple(chr(b) if b in _SAFE else f"_{b:02x}" for b in range(256))


def stem_for(session_id: str) -> str:
    """The file name stem (without suffix) of a valid session id."""
    raw = session_id.encode("utf-8")
    if len(raw) <= MAX_ESCAPED:  # cheap pre-check: escaping never shortens
        escaped = "".join([_ESCAPES[b] for b in raw])
        if len(escaped) <= MAX_ESCAPED:
            return _ESCAPED_PREFIX + escaped
    return _HASHED_PREFIX + hashlib.sha256(raw).hexdigest()


def is_hashed_stem(stem: str) -> bool:
    """Whether ``stem`` is a hashed name, whose id lives only in the log header."""
    return stem.startswith(_HASHED_PREFIX)


def id_from_stem(stem: str) -> str | None:
    """The session id an escaped stem stands for.

    None for a hashed stem (read the id from the header and check it with
    `stem_for`) and for anything this module could not have produced, so a stray
    or hand-made file is never mistaken for a session.
    """
    if not stem.startswith(_ESCAPED_PREFIX):
        return None
    body = stem[len(_ESCAPED_PREFIX) :]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "_":
            pair = body[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                return None
            out.append(int(pair, 16))
            i += 3
        elif ord(char) < 128 and ord(char) in _SAFE:
            out.append(ord(char))
            i += 1
        else:
            return None
    try:
        session_id = out.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only the canonical spelling counts ("_61" for "a" is not ours), which keeps
    # the mapping a bijection between ids and the names the backend writes.
    if not session_id or "\x00" in session_id or stem_for(session_id) != stem:
        return None
    return session_id
