"""One session's log as the file backend sees it: files, descriptors, and a validated index.

A `SessionLog` belongs to one handle and is only touched while that handle holds
the session's lock (see `checkpointspec.backends.file`). Everything it knows about
the log — head, where each record starts, where the next append goes — is a
cache that `LogFiles.refresh` re-validates under the lock before every use, in
two small reads and no ``stat``:

* **Is it still the same file?** Every change that replaces or removes a log (a
  truncate that drops events, a delete) first bumps the generation in the
  ``.meta`` file, so an unchanged generation means an unchanged file, and a new
  one sends the handle back to the path (the header is re-read and the last
  frame found from the end, in a few reads).
* **Did another writer append?** The bytes at the cached end are zeros (the
  reserve) or the end of the file when nothing was appended; anything else is
  new frames, which are scanned from there.

Why not a ``stat`` of the log, the obvious check: on Linux 6.13 and later,
asking for a file's timestamps makes the next write to it take a fine-grained
timestamp, which makes the following fsync commit the journal, and that one
``stat`` cost about a third of a durable append (`docs/performance.md`).

**Reserve.** In durable mode an append that would reach the end of the file
first extends it (``truncate`` to a larger size: a sparse hole, no data written)
by `RESERVE` bytes, so that most appends overwrite zeros and their fsync need
not commit a new file size. `checkpointspec.backends.file.format` explains how
the end of the data is found among the zeros.

The index (``offsets``) covers records ``base_seq .. head``. After a reopen it
holds only the last record (found from the end of the data); reads further back
extend it backwards through the frames' trailers, never from the start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from array import array
from collections import deque
from collections.abc import Callable
from typing import Final

from ...spec import CorruptStoreError, FileSystem, SchemaVersionError
from .format import (
    FORMAT_VERSION,
    FRAME_HEAD,
    MAINT_MARK,
    MAINT_MARK_OFFSET,
    MAX_HEADER,
    BadFrame,
    HeaderError,
    LogHeader,
    data_end,
    frame_more,
    maintenance_marked,
    pack_frames,
    parse_header,
    probe_last,
    read_generation,
    scan_frames,
    verify_frame,
    walk_back,
    write_generation,
)

__all__ = ["LOG_SUFFIX", "MAINT_SUFFIX", "META_SUFFIX", "TMP_SUFFIX", "LogFiles", "SessionLog"]

LOG_SUFFIX: Final = ".log"
META_SUFFIX: Final = ".meta"
TMP_SUFFIX: Final = ".tmp"
MAINT_SUFFIX: Final = ".maint"
"""The session's maintenance lock file: present and flocked while a handle holds the session."""
RESERVE: Final = 1 << 16
"""Zero bytes a durable append leaves ahead of the data when it has to extend the file."""
_PAGE: Final = 4096

logger = logging.getLogger("checkpointspec.backends.file")


class TaskGate:
    """Lets one task of a handle at a time work on a session; the others queue, in order.

    Like `asyncio.Lock`, but a free gate is taken without awaiting (`try_enter`),
    which keeps an uncontended operation free of extra coroutines, and it binds to
    no event loop, so a handle can move from one loop to the next between calls.
    A waiter that is cancelled after the gate was handed to it passes it on.
    """

    __slots__ = ("busy", "waiters")

    def __init__(self) -> None:
        self.busy = False
        self.waiters: deque[asyncio.Future[None]] = deque()

    def try_enter(self) -> bool:
        """Take the gate if it is free."""
        if self.busy:
            return False
        self.busy = True
        return True

    async def enter(self) -> None:
        """Take the gate, waiting for the tasks ahead."""
        if self.try_enter():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.leave()  # handed over just as we were cancelled: pass it on
            else:
                self.waiters.remove(waiter)
            raise

    def leave(self) -> None:
        """Hand the gate to the next waiting task, or free it."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.busy = False


class SessionLog:
    """The per-handle state of one session id (see the module docstring).

    ``log_fd`` is None exactly when the handle knows of no log file; the other
    log fields then describe an empty session. ``generation`` is the one read
    by the last refresh (from the ``.meta`` bytes ``meta_seen``). ``allocated``
    is the file's size as last seen; another handle may have extended it since,
    and it is only used to decide when to extend.
    """

    __slots__ = (
        "allocated",
        "base_seq",
        "encoded",
        "end",
        "gate",
        "generation",
        "head",
        "header_len",
        "header_mtime_ns",
        "last_ts_ns",
        "log_fd",
        "log_name",
        "log_path",
        "maint_path",
        "marked",
        "meta_fd",
        "meta_name",
        "meta_path",
        "meta_seen",
        "offsets",
        "session_id",
        "tmp_path",
        "users",
    )

    def __init__(self, session_id: str, stem: str, directory: str) -> None:
        self.session_id = session_id
        self.log_name = stem + LOG_SUFFIX
        self.meta_name = stem + META_SUFFIX
        self.log_path = os.path.join(directory, self.log_name)
        self.meta_path = os.path.join(directory, self.meta_name)
        self.tmp_path = os.path.join(directory, stem + TMP_SUFFIX)
        self.maint_path = os.path.join(directory, stem + MAINT_SUFFIX)
        self.meta_fd: int | None = None
        self.log_fd: int | None = None
        self.generation = -1
        self.meta_seen = b"\xff"  # no .meta file holds this: the first refresh parses
        self.marked = False
        """Whether ``meta_seen`` carries the maintenance mark (set by `LogFiles.refresh`)."""
        self.allocated = 0
        self.header_len = 0
        self.header_mtime_ns = 0
        self.encoded = False
        self.end = 0
        self.head = 0
        self.base_seq = 1
        self.offsets: array[int] = array("q")
        self.last_ts_ns = 0
        self.gate = TaskGate()
        self.users = 0

    @property
    def mtime_ns(self) -> int:
        """The session's modification time: its last append, or its creation or last truncate."""
        return max(self.header_mtime_ns, self.last_ts_ns)

    def offset_of(self, seq: int) -> int:
        """Where record ``seq`` starts (``head + 1``: where the next append goes).

        ``seq`` must be within the index (see `LogFiles.ensure_indexed`) or be 1,
        which always starts right after the header.
        """
        if seq == self.head + 1:
            return self.end
        if seq == 1:
            return self.header_len
        assert self.base_seq <= seq <= self.head, f"record {seq} is not indexed"
        return self.offsets[seq - self.base_seq]

    def forget_log(self, fs: FileSystem) -> None:
        """Drop everything known about the log file (it is gone, or must be re-read)."""
        if self.log_fd is not None:
            fd, self.log_fd = self.log_fd, None
            fs.close(fd)
        self.header_len = self.header_mtime_ns = self.last_ts_ns = 0
        self.encoded = False
        self.end = self.head = self.allocated = 0
        self.base_seq = 1
        self.offsets = array("q")

    def close(self, fs: FileSystem) -> None:
        """Close both descriptors; the state can be used again later (it reopens lazily)."""
        self.forget_log(fs)
        if self.meta_fd is not None:
            fd, self.meta_fd = self.meta_fd, None
            fs.close(fd)


class LogFiles:
    """The file operations on one session's log and generation file, under its lock.

    ``repairs`` collects a line per torn tail cut off; ``durable`` says whether
    repairs and generation bumps are fsynced.
    """

    def __init__(self, fs: FileSystem, durable: bool, repairs: list[str]) -> None:
        self.fs = fs
        self.durable = durable
        self.repairs = repairs

    # -- the lock file and the generation ------------------------------------------------
    def open_meta(self, log: SessionLog, create: bool) -> bool:
        """Open the session's ``.meta`` file (its lock and generation).

        Without ``create`` a missing one means an unknown session (False) unless a
        log exists without it, in which case it is recreated: it holds no data
        that the log needs, only the lock and the generation (which restarts at 0).
        """
        try:
            log.meta_fd = self.fs.open(log.meta_path)
        except FileNotFoundError:
            log_exists = self.fs.stat(log.log_path) is not None
            if not create and not log_exists:
                return False
            log.meta_fd = self.fs.open(log.meta_path, create=True)
            # A new log is created next and its directory fsync covers this file
            # too; beside an existing log, make the file durable on its own.
            if log_exists and self.durable:
                self.fs.fsync_dir(os.path.dirname(log.meta_path))
        return True

    def generation(self, log: SessionLog) -> int:
        """The generation stored in the ``.meta`` file."""
        assert log.meta_fd is not None
        return self._parse_generation(log, self.fs.read(log.meta_fd, 64, 0))

    def _parse_generation(self, log: SessionLog, data: bytes) -> int:
        try:
            return read_generation(data)
        except ValueError as exc:
            raise CorruptStoreError(log.session_id, log.meta_name, str(exc)) from None

    def bump_generation(self, log: SessionLog) -> None:
        """Raise the generation by one, durably, before the change that it announces."""
        assert log.meta_fd is not None
        data = self.fs.read(log.meta_fd, 64, 0)
        current = self._parse_generation(log, data)
        offset, slot = write_generation(data, current + 1)
        self.fs.write(log.meta_fd, slot, offset)
        if self.durable:
            self.fs.fsync(log.meta_fd)
        log.generation = current + 1

    def set_mark(self, log: SessionLog, held: bool) -> None:
        """Write or clear the maintenance mark of the ``.meta`` file; never fsynced.

        A mark lost to a power loss loses nothing (every holder died with the
        machine); one left behind is cleared by the next writer. ``meta_seen`` is
        left as it was: the next refresh finds the bytes changed and parses the
        generation again, which the mark does not change.
        """
        assert log.meta_fd is not None
        self.fs.write(log.meta_fd, MAINT_MARK if held else b"\0", MAINT_MARK_OFFSET)

    def meta_bytes(self, log: SessionLog) -> bytes:
        """The ``.meta`` file's bytes as `refresh` reads them (generation slots and mark)."""
        assert log.meta_fd is not None
        return self.fs.read(log.meta_fd, 64, 0)

    # -- validating the cached view --------------------------------------------------------
    def refresh(self, log: SessionLog) -> None:
        """Bring ``log`` up to date with the files; cut off a torn tail; raise on corruption.

        Also leaves the current generation in ``log.generation``, and whether the
        session carries the maintenance mark in ``log.marked``.
        """
        assert log.meta_fd is not None
        meta = self.fs.read(log.meta_fd, 64, 0)
        replaced = False
        if meta != log.meta_seen:  # the same bytes hold the same generation: no need to parse
            generation = self._parse_generation(log, meta)
            replaced = generation != log.generation
            log.generation, log.meta_seen = generation, meta
            log.marked = maintenance_marked(meta)
        if log.log_fd is None or replaced:
            self._load(log)
            return
        ahead = self.fs.read(log.log_fd, FRAME_HEAD.size, log.end)
        if ahead.count(0) != len(ahead):
            self._scan_from_end(log, self.fs.fstat(log.log_fd).size)

    def _load(self, log: SessionLog) -> None:
        log.forget_log(self.fs)
        try:
            fd = self.fs.open(log.log_path)
        except FileNotFoundError:
            return
        log.log_fd = fd
        try:
            size = log.allocated = self.fs.fstat(fd).size
            header = self._header(log, fd)
            log.header_len = log.end = header.length
            log.header_mtime_ns = header.mtime_ns
            log.encoded = header.encoded
            written = data_end(self._reader(fd), log.end, size)
            if written > log.end:
                frame = probe_last(self._reader(fd), log.end, written)
                if frame is None:
                    self._scan_from_end(log, size)
                else:
                    log.head = log.base_seq = frame.seq
                    log.offsets = array("q", [frame.offset])
                    log.end = written
                    log.last_ts_ns = frame.ts_ns
        except BaseException:
            log.forget_log(self.fs)
            raise

    def _header(self, log: SessionLog, fd: int) -> LogHeader:
        try:
            header = parse_header(self.fs.read(fd, MAX_HEADER, 0))
        except HeaderError as exc:
            if exc.newer is not None:
                raise SchemaVersionError(exc.newer, FORMAT_VERSION) from None
            raise CorruptStoreError(
                log.session_id, f"header of {log.log_name}", exc.reason
            ) from None
        if header.session_id != log.session_id:
            raise CorruptStoreError(
                log.session_id,
                f"header of {log.log_name}",
                f"the file belongs to session {header.session_id!r}",
            )
        return header

    def _reader(self, fd: int) -> Callable[[int, int], bytes]:
        fs_read = self.fs.read
        return lambda offset, size: fs_read(fd, size, offset)

    def _scan_from_end(self, log: SessionLog, size: int) -> None:
        """Verify the frames between the validated end and ``size`` (the file's); index them."""
        assert log.log_fd is not None
        log.allocated = size
        try:
            scan = scan_frames(self._reader(log.log_fd), log.end, size, log.head + 1)
        except BadFrame as exc:
            raise _damaged(log, exc) from None
        if scan.offsets:
            if not log.offsets:
                log.base_seq = log.head + 1
            log.offsets.extend(scan.offsets)
            log.head += len(scan.offsets)
            log.end = scan.committed
            assert scan.last_ts_ns is not None
            log.last_ts_ns = scan.last_ts_ns
        if scan.torn:
            self._cut_torn_tail(log, scan.committed, size)

    def _cut_torn_tail(self, log: SessionLog, committed: int, size: int) -> None:
        # Only called under the session lock, so no writer is half-way through an
        # append: bytes past the last complete batch are what an interrupted
        # append left behind, never acknowledged, and safe to drop.
        assert log.log_fd is not None
        written = data_end(self._reader(log.log_fd), committed, size)
        self.fs.truncate(log.log_fd, committed)
        if self.durable:
            self.fs.fsync(log.log_fd)
        log.end = log.allocated = committed
        message = (
            f"session {log.session_id!r}: cut a torn tail of {written - committed} bytes "
            f"at offset {committed} of {log.log_name} (an interrupted append)"
        )
        logger.warning("%s", message)
        self.repairs.append(message)

    def ensure_indexed(self, log: SessionLog, seq: int) -> None:
        """Make `SessionLog.offset_of` work for ``seq`` (1 <= seq <= head + 1).

        The index grows backwards from the oldest record it knows, through the
        frames' trailers, by at least as many records as it holds already, so
        repeated reads further and further back cost linear time in all.
        Record 1 needs no index (a read of a whole log scans it forwards).
        """
        if seq >= log.base_seq or seq == 1:
            return
        assert log.log_fd is not None
        target = max(1, min(seq, log.base_seq - max(len(log.offsets), 64)))
        try:
            older = walk_back(
                self._reader(log.log_fd),
                log.header_len,
                log.offset_of(log.base_seq),
                log.base_seq,
                target,
            )
        except BadFrame as exc:
            raise _damaged(log, exc) from None
        log.offsets = array("q", older) + log.offsets
        log.base_seq = target

    # -- changes ---------------------------------------------------------------------------
    def append(self, log: SessionLog, frames: bytes, relative: list[int], ts_ns: int) -> None:
        """Write one framed batch at the end of an existing log and make it durable.

        On any failure the batch is cut off again, so a failed append leaves
        nothing behind (and if even that fails, the view is dropped and rebuilt,
        torn-tail repair included, on the next access).
        """
        assert log.log_fd is not None
        start = log.end
        try:
            if self.durable and start + len(frames) > log.allocated:
                # Extend ahead of the data (a sparse hole, nothing written): the
                # next appends overwrite zeros, and their fsync commits no new size.
                allocated = -(-(start + len(frames) + RESERVE) // _PAGE) * _PAGE
                self.fs.truncate(log.log_fd, allocated)
                log.allocated = allocated
            self.fs.write(log.log_fd, frames, start)
            if self.durable:
                self.fs.fsync(log.log_fd)
        except BaseException:
            try:
                self.fs.truncate(log.log_fd, start)
                log.allocated = start
            except OSError:
                log.forget_log(self.fs)
            raise
        self._indexed_append(log, start, relative, len(frames), ts_ns)

    def create(
        self, log: SessionLog, header: bytes, frames: bytes, relative: list[int], ts_ns: int
    ) -> None:
        """Create the log with its first batch: written whole to a temporary file, then renamed.

        A crash leaves either no log or the complete one, so a log file never
        starts with a torn header or a torn first batch.
        """
        fd = self._write_temporary(log, header + frames)
        self._install(log, fd, header)
        self._indexed_append(log, len(header), relative, len(frames), ts_ns)

    def rewrite(self, log: SessionLog, to_seq: int, header: bytes) -> None:
        """Keep records ``1..to_seq``: copy them after a new header into a temporary
        file, fsync it, bump the generation, rename it over the log, fsync the directory.

        A crash leaves the old log or the new one, never a mix. The generation is
        bumped before the rename, so no reader can see the shorter log with the
        old generation; a crash between the two only costs a generation number.
        """
        assert log.log_fd is not None
        self.ensure_indexed(log, to_seq + 1)
        cut = log.offset_of(to_seq + 1)
        batch_start, closing = self._close_batch(log, to_seq, cut)
        fd = self._write_temporary(log, header, (log.log_fd, log.header_len, batch_start), closing)
        try:
            self.bump_generation(log)
        except BaseException:
            self._discard_temporary(log, fd)
            raise
        # Records do not depend on where they are, so the kept ones only move by
        # the difference in header length (none: the id and fields are the same),
        # and the re-framed ones keep their lengths.
        shift = len(header) - log.header_len
        kept = max(to_seq - log.base_seq + 1, 0)
        offsets = array("q", [o + shift for o in log.offsets[:kept]])
        base_seq = log.base_seq if kept else to_seq + 1
        end = cut + shift
        self._install(log, fd, header)
        log.end = end
        log.head = to_seq
        log.base_seq = base_seq
        log.offsets = offsets

    def _close_batch(self, log: SessionLog, to_seq: int, cut: int) -> tuple[int, bytes]:
        """Re-frame the kept part of a batch that ``to_seq`` cuts in two.

        Frames announce how many events of their batch follow, and a batch that
        ends early reads as an interrupted append. The records of the cut batch
        up to ``to_seq`` are therefore framed again as a batch of their own (same
        payloads, seqs and timestamp). Returns where those records start and their
        new bytes (``cut`` and nothing when no batch is cut).
        """
        assert log.log_fd is not None
        if to_seq == 0:
            return cut, b""
        self.ensure_indexed(log, to_seq)
        if self._more(log, to_seq) == 0:
            return cut, b""
        first = to_seq
        while first > 1:
            self.ensure_indexed(log, first - 1)
            if self._more(log, first - 1) == 0:
                break
            first -= 1
        start = log.offset_of(first)
        data = self.fs.read(log.log_fd, cut - start, start)
        payloads: list[bytes] = []
        ts_ns = 0
        position = 0
        for seq in range(first, to_seq + 1):
            try:
                frame = verify_frame(data, position, seq, start + position)
            except (BadFrame, struct.error) as exc:
                raise CorruptStoreError(
                    log.session_id, f"record seq {seq} of {log.log_name}", str(exc)
                ) from None
            payloads.append(bytes(frame.payload))
            ts_ns = frame.ts_ns
            position = frame.end - start
        frames, _ = pack_frames(payloads, first, ts_ns)
        return start, frames

    def _more(self, log: SessionLog, seq: int) -> int:
        """The batch position of record ``seq`` (its header is checked, not its payload)."""
        assert log.log_fd is not None
        head = self.fs.read(log.log_fd, FRAME_HEAD.size, log.offset_of(seq))
        try:
            return frame_more(head)
        except ValueError as exc:
            raise CorruptStoreError(
                log.session_id, f"record seq {seq} of {log.log_name}", str(exc)
            ) from None

    def delete(self, log: SessionLog) -> bool:
        """Remove the log, after bumping the generation; False if there was none."""
        if self.fs.stat(log.log_path) is None:
            log.forget_log(self.fs)
            return False
        self.bump_generation(log)
        self.fs.unlink(log.log_path)
        log.forget_log(self.fs)
        if self.durable:
            self.fs.fsync_dir(os.path.dirname(log.log_path))
        return True

    def _write_temporary(
        self,
        log: SessionLog,
        header: bytes,
        copy_from: tuple[int, int, int] | None = None,
        tail: bytes = b"",
    ) -> int:
        """Write ``header``, then bytes ``[start, stop)`` of descriptor ``source`` (``copy_from``),
        then ``tail`` to the session's temporary file; fsync it; return its descriptor."""
        fd = self.fs.open(log.tmp_path, create=True, truncate=True)
        try:
            self.fs.write(fd, header, 0)
            position = len(header)
            if copy_from is not None:
                source, start, stop = copy_from
                while start < stop:
                    chunk = self.fs.read(source, min(_COPY_CHUNK, stop - start), start)
                    if not chunk:
                        raise CorruptStoreError(log.session_id, log.log_name, "the log ended early")
                    self.fs.write(fd, chunk, position)
                    start += len(chunk)
                    position += len(chunk)
            if tail:
                self.fs.write(fd, tail, position)
            if self.durable:
                self.fs.fsync(fd)
        except BaseException:
            self._discard_temporary(log, fd)
            raise
        return fd

    def _discard_temporary(self, log: SessionLog, fd: int) -> None:
        self.fs.close(fd)
        try:
            self.fs.unlink(log.tmp_path)
        except OSError:
            logger.warning("could not remove %s", log.tmp_path)

    def _install(self, log: SessionLog, fd: int, header: bytes) -> None:
        """Rename the temporary file over the log and adopt ``fd`` as the log's descriptor."""
        try:
            self.fs.rename(log.tmp_path, log.log_path)
        except BaseException:
            self._discard_temporary(log, fd)
            raise
        if log.log_fd is not None:
            self.fs.close(log.log_fd)
        log.log_fd = fd
        parsed = parse_header(header)
        log.allocated = self.fs.fstat(fd).size
        log.header_len = parsed.length
        log.header_mtime_ns = parsed.mtime_ns
        log.encoded = parsed.encoded
        log.last_ts_ns = 0  # the header's mtime is newer than every record kept
        if self.durable:
            self.fs.fsync_dir(os.path.dirname(log.log_path))

    def _indexed_append(
        self, log: SessionLog, start: int, relative: list[int], size: int, ts_ns: int
    ) -> None:
        if not log.offsets:
            log.base_seq = log.head + 1
        log.offsets.extend([start + r for r in relative])
        log.head += len(relative)
        log.end = start + size
        log.last_ts_ns = ts_ns


_COPY_CHUNK: Final = 1 << 20


def _damaged(log: SessionLog, bad: BadFrame) -> CorruptStoreError:
    """The error for a frame of ``log`` that fails its checks."""
    return CorruptStoreError(
        log.session_id, f"record seq {bad.seq} at offset {bad.offset} of {log.log_name}", bad.reason
    )
