"""File snapshots: workspace paths, snapshot content and content hashes (SNAP rules).

A file-writing tool records a `FileSnapshot` before it changes a file, so that
`restore` can put the file back. This module says, without I/O, how a path is
written down, how content is kept in a snapshot and how the content a tool
wrote is fingerprinted:

- paths are relative to the workspace root, ``/``-separated and canonical:
  `canonical_path` drops empty and ``.`` components and refuses what could
  name a file outside the root (SNAP-003); symlinks are the one check that
  needs the file system, and ``checkpointspec.reference`` makes it;
- content that is valid UTF-8 is kept as text, anything else as base64;
  content over the size cap is not kept (``truncated``, ``content_before`` "")
  and can then not be restored (SNAP-002);
- ``hash_after`` is the SHA-256 of what the tool left, or `ABSENT_HASH` when it
  left no file (a delete).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Final

from .errors import InvalidArgumentError, ReasonCode
from .events import FileEncoding, FileSnapshot

__all__ = [
    "ABSENT_HASH",
    "DEFAULT_SNAPSHOT_LIMIT",
    "RESERVED_DIR",
    "SnapshotContentError",
    "canonical_path",
    "content_hash",
    "encode_content",
    "make_snapshot",
    "snapshot_content",
]

ABSENT_HASH: Final = "absent"
"""``hash_after`` of a snapshot whose tool deleted the file."""

RESERVED_DIR: Final = ".checkpointspec"
"""The top-level workspace folder the session layer keeps for itself (the restore journal).

No snapshot may name a file in it, so no restore can write there. It is compared
case-insensitively: on a case-insensitive file system ``.CheckpointSpec`` is the
same folder.
"""

DEFAULT_SNAPSHOT_LIMIT: Final = 1 << 20
"""The default size cap, in bytes, above which a snapshot keeps no content (1 MiB)."""


def canonical_path(path: str) -> str:
    """``path`` as a snapshot records it, or `InvalidArgumentError` (reason ``unsafe_path``).

    Refused: a non-str, an empty path, NUL, an absolute path, any ``..``
    component (even one that would stay inside the root: a path names a file
    one way only) and a path inside `RESERVED_DIR`. Empty and ``.`` components are dropped, so ``a//./b`` is
    recorded as ``a/b``.
    """
    if not isinstance(path, str):
        raise _unsafe(f"a workspace path is a str, not {type(path).__name__}")
    if "\x00" in path:
        raise _unsafe(f"{path!r} holds NUL")
    if path.startswith("/"):
        raise _unsafe(f"{path!r} is absolute; workspace paths are relative to its root")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _unsafe(f"{path!r} climbs out with '..'")
    if not parts:
        raise _unsafe(f"{path!r} names no file")
    if parts[0].casefold() == RESERVED_DIR:
        raise _unsafe(f"{path!r} is in {RESERVED_DIR}/, which the session layer keeps for itself")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise _unsafe(f"{path!r} is not encodable as UTF-8") from None
    return "/".join(parts)


def _unsafe(reason: str) -> InvalidArgumentError:
    return InvalidArgumentError("path", reason, ReasonCode.UNSAFE_PATH, "SNAP-003")


def content_hash(content: bytes | None) -> str:
    """The fingerprint of a file's content: SHA-256 hex, or `ABSENT_HASH` for no file."""
    if content is None:
        return ABSENT_HASH
    return hashlib.sha256(content).hexdigest()


def encode_content(content: bytes) -> tuple[str, FileEncoding]:
    """``content`` as a snapshot keeps it: UTF-8 text when it decodes, base64 otherwise."""
    try:
        return content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(content).decode("ascii"), "base64"


class SnapshotContentError(ValueError):
    """A snapshot's ``content_before`` does not decode in its declared encoding."""


def snapshot_content(snapshot: FileSnapshot) -> bytes | None:
    """The content a snapshot puts back: bytes, or None when the file did not exist.

    Raises `SnapshotContentError` when base64 content is malformed or text
    content cannot be encoded (a lone surrogate). Say nothing of truncation:
    callers refuse truncated snapshots before asking.
    """
    if snapshot.content_before is None:
        return None
    if snapshot.encoding == "base64":
        try:
            return base64.b64decode(snapshot.content_before, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SnapshotContentError(f"malformed base64: {exc}") from None
    try:
        return snapshot.content_before.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SnapshotContentError(f"text not encodable as UTF-8: {exc}") from None


def make_snapshot(
    path: str,
    before: bytes | None,
    after: bytes | None,
    *,
    limit: int = DEFAULT_SNAPSHOT_LIMIT,
    tool_call_id: str | None = None,
) -> FileSnapshot:
    """The snapshot a tool records before turning ``before`` into ``after`` at ``path``.

    ``path`` must already be canonical; None for ``before`` / ``after`` means
    the file does not exist before / after. Content longer than ``limit``
    bytes is not kept (SNAP-002).
    """
    if before is None:
        return FileSnapshot(path, None, hash_after=content_hash(after), tool_call_id=tool_call_id)
    if len(before) > limit:
        return FileSnapshot(
            path, "", truncated=True, hash_after=content_hash(after), tool_call_id=tool_call_id
        )
    text, encoding = encode_content(before)
    return FileSnapshot(
        path, text, encoding=encoding, hash_after=content_hash(after), tool_call_id=tool_call_id
    )
