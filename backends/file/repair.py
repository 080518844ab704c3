"""Operator repair of a file store: cut the damaged tail of a log, keeping a backup of every byte.

The backend cuts a torn tail by itself (an append that was never acknowledged:
the data ends inside a frame or a batch). It refuses, with `CorruptStoreError`,
a log whose tail holds bytes that fail a check, for example a crash that left
garbage where the interrupted append's last sector should be: it cannot tell
those bytes from damage to an acknowledged record. `plan_repair` finds such
logs and says, for each, what cutting would remove and why; `apply_repair`
does it. The rules:

* A log is cut only at its **first damaged frame** (a frame that fails its
  header or payload checksum, its trailer, its seq or its batch), and only when
  **no frame with a valid header and payload checksum follows** it anywhere in
  the file. A log with valid records after the damage is refused: that is damage
  in the middle of the log, not a tail, and nothing is cut.
* Nothing whose checksums are valid is removed. Valid frames of a batch left
  open by the cut stay; the backend treats them as the torn tail they are.
* A log whose header is damaged is refused (its session id is in the header).
* Before cutting, the bytes removed, from the start of the damaged record's
  batch, are written to a backup directory beside the store
  (``DIR.repair-YYYYmmddTHHMMSSZ/``, one file per log, named after it with the
  offset they start at, plus ``manifest.json``) and fsynced; the log is then truncated
  and fsynced. A crash in between leaves either the whole log or the backup.
* A log held by a handle (its ``.meta`` lock taken) is refused during
  ``apply``: the store must not be in use.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from .checkpointer import SESSIONS_DIR
from .format import (
    FRAME_HEAD,
    FRAME_OVERHEAD,
    MAX_HEADER,
    MAX_PAYLOAD,
    BadFrame,
    Frame,
    HeaderError,
    data_end,
    parse_header,
    scan_frames,
)
from .log import LOG_SUFFIX, META_SUFFIX

__all__ = ["Cut", "Refusal", "RepairError", "RepairPlan", "apply_repair", "plan_repair"]

_HEAD_SIZE: Final = FRAME_HEAD.size
_PREFIX_SIZE: Final = _HEAD_SIZE - 4


class Cut(msgspec.Struct, frozen=True):
    """One log to cut: from ``offset`` to its end (``size``), and why."""

    log: str
    session_id: str
    offset: int
    size: int
    reason: str
    batch_start: int
    """Where the batch of the first damaged record starts: the backup begins there."""

    @property
    def removed(self) -> int:
        return self.size - self.offset


class Refusal(msgspec.Struct, frozen=True):
    """A damaged log the repair leaves alone, and why."""

    log: str
    reason: str


class RepairPlan(msgspec.Struct, frozen=True):
    """What `plan_repair` found in one store."""

    directory: str
    cuts: tuple[Cut, ...]
    refusals: tuple[Refusal, ...]
    checked: int
    """Logs looked at."""


class RepairError(Exception):
    """The repair cannot start (no such store) or stopped with nothing cut (a log in use)."""


def _valid_frame_after(data: bytes, start: int) -> int | None:
    """The offset of the first frame at or after ``start`` whose checksums both hold."""
    for pos in range(start, len(data) - FRAME_OVERHEAD + 1):
        head = data[pos : pos + _HEAD_SIZE]
        length, _, _, _, pcrc, hcrc = FRAME_HEAD.unpack(head)
        if length > MAX_PAYLOAD or zlib.crc32(head[:_PREFIX_SIZE]) != hcrc:
            continue
        payload = data[pos + _HEAD_SIZE : pos + _HEAD_SIZE + length]
        if len(payload) == length and zlib.crc32(payload) == pcrc:
            return pos
    return None


def _plan_log(path: Path) -> Cut | Refusal | None:
    data = path.read_bytes()
    try:
        header = parse_header(data[:MAX_HEADER])
    except HeaderError as exc:
        return Refusal(path.name, f"its header is damaged ({exc.reason}); nothing cut")

    def read(offset: int, count: int) -> bytes:
        return data[offset : offset + count]

    batch = [header.length, 0]  # where the open batch starts, and its valid records

    def visit(frame: Frame) -> None:
        batch[1] += 1
        if frame.more == 0:
            batch[:] = [frame.end, 0]

    try:
        scan_frames(read, header.length, len(data), 1, visit)
    except BadFrame as bad:
        later = _valid_frame_after(data, bad.offset + 1)
        if later is not None:
            return Refusal(
                path.name,
                f"{bad}, but a record with valid checksums follows at offset {later}: damage "
                "inside the log, not a torn tail; nothing cut",
            )
        end = data_end(read, bad.offset, len(data))
        reason = (
            f"{bad}; no valid record follows ({end - bad.offset} bytes of data, then zeros): "
            "the tail of an append that never completed, or damage to the last records"
        )
        start, kept = batch
        if kept:
            reason += (
                f". The {kept} valid records before it belong to the same batch, which starts at "
                f"offset {start}: they stay, the backend drops them as an interrupted append, "
                "and the backup holds them too"
            )
        return Cut(path.name, header.session_id, bad.offset, len(data), reason, start)
    return None


def plan_repair(directory: Path | str, session_id: str | None = None) -> RepairPlan:
    """What a repair of the file store at ``directory`` would cut; reads only.

    ``directory`` is the store's (``ctx.path``; the logs are in its ``sessions``
    directory). ``session_id`` limits it to that session's log. Raises
    `RepairError` if ``directory`` is not a file store.
    """
    root = Path(directory)
    if not (root / SESSIONS_DIR).is_dir():
        raise RepairError(f"{root} is not a file store (it has no {SESSIONS_DIR} directory)")
    cuts: list[Cut] = []
    refusals: list[Refusal] = []
    checked = 0
    for path in sorted((root / SESSIONS_DIR).glob(f"*{LOG_SUFFIX}")):
        if session_id is not None and _session_of(path) != session_id:
            continue
        checked += 1
        found = _plan_log(path)
        if isinstance(found, Cut):
            cuts.append(found)
        elif isinstance(found, Refusal):
            refusals.append(found)
    return RepairPlan(str(root), tuple(cuts), tuple(refusals), checked)


def _session_of(path: Path) -> str | None:
    try:
        with path.open("rb") as log:
            return parse_header(log.read(MAX_HEADER)).session_id
    except (HeaderError, OSError):
        return None


def apply_repair(plan: RepairPlan, now: datetime | None = None) -> Path | None:
    """Cut every log of ``plan``; returns the backup directory (None when nothing is cut).

    Each log is checked again before its cut: a log that changed since the plan
    (its size or the bytes to remove) or that a handle holds raises `RepairError`
    before anything of it is cut.
    """
    if not plan.cuts:
        return None
    root = Path(plan.directory)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    backup = root.with_name(f"{root.name}.repair-{stamp}")
    backup.mkdir()
    _fsync_directory(backup.parent)
    manifest: list[dict[str, object]] = []
    for cut in plan.cuts:
        manifest.append(_cut(root, backup, cut))
        _write_synced(backup / "manifest.json", json.dumps(manifest, indent=2).encode())
    return backup


def _cut(root: Path, backup: Path, cut: Cut) -> dict[str, object]:
    path = root / SESSIONS_DIR / cut.log
    meta = path.with_name(cut.log.removesuffix(LOG_SUFFIX) + META_SUFFIX)
    lock = os.open(meta, os.O_RDONLY) if meta.exists() else None
    try:
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RepairError(
                    f"{cut.log}: the session is open in a handle; close it first"
                ) from None
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            removed = os.pread(fd, cut.size - cut.batch_start, cut.batch_start)
            if size != cut.size or len(removed) != cut.size - cut.batch_start:
                raise RepairError(f"{cut.log} changed since it was checked; run the repair again")
            name = f"{cut.log}.from-{cut.batch_start}"
            _write_synced(backup / name, removed)
            os.ftruncate(fd, cut.offset)
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        if lock is not None:
            os.close(lock)
    return {
        "log": cut.log,
        "session_id": cut.session_id,
        "cut_at": cut.offset,
        "backup_from": cut.batch_start,
        "length": len(removed),
        "sha256": hashlib.sha256(removed).hexdigest(),
        "backup": name,
        "reason": cut.reason,
    }


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_directory(path.parent)


def _fsync_directory(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
