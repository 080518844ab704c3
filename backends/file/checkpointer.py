"""The file reference backend: the default, zero-configuration store. One directory, no server.

**Layout.** ``ctx.path`` holds ``format.json`` (the format marker; a store
marked with a newer version is refused untouched with `SchemaVersionError`) and
``sessions/``, which holds per session id ``<stem>.log`` (the event log),
``<stem>.meta`` (its lock and generation), only during a truncate or the
first append ``<stem>.tmp``, and only while a handle holds the session for
maintenance ``<stem>.maint``. `checkpointspec.backends.file.naming` explains
the stems: an injective, case- and normalisation-proof escape of the id, or a
SHA-256 name for ids too long for a file name, with the id kept in the log's
header. Nothing is ever created outside ``ctx.path``.

**Format.** `checkpointspec.backends.file.format` documents the bytes: a log
header with the session id, then one frame per event carrying its length,
seq, timestamp, batch position, a CRC-32 of the payload and one of the frame
header, and a trailer. A torn tail (an interrupted append) is recognised and cut
off, with a `logging` warning and an entry in `IntegrityReport.repairs`;
anything else that fails a check raises `CorruptStoreError` and changes nothing.
Payloads are ``encode_event`` bytes passed through ``ctx.codec``; the checksums
cover the encoded bytes, so a payload the codec cannot decode is a `CodecError`,
never mistaken for damage or a torn tail, never repaired or skipped.

**Locking.** Every operation on a session holds the exclusive ``flock`` of its
``.meta`` file, which is never renamed or removed. flock locks belong to the open
file description, so every handle opens its own and handles exclude each other
within one process as across processes (``lockf`` would not do: its locks vanish
when any descriptor of the file is closed). Under the lock the cached head and
offset index are re-validated against the generation and the bytes past the
cached end (see `checkpointspec.backends.file.log`), never trusted. Tasks of one handle are
serialised per session by a task gate first, since they share a descriptor.

**Maintenance** (MAINTENANCE). A handle holds a session by creating its
``.maint`` file and taking that file's ``flock``, then setting the maintenance
mark in the ``.meta`` file (see `checkpointspec.backends.file.format`), all
under the session's lock; it keeps the descriptor until ``release_maintenance``
or ``close`` removes the file and clears the mark. Writers read the mark with
the generation, under the session's lock, so a session nobody holds costs them
nothing. Marked, a writer tries the ``.maint`` file's lock without waiting:
held by another description, it raises `SessionLockedError`; free (or no file),
the holder's process died (the kernel drops the ``flock`` of a killed process),
and the writer removes the file, clears the mark and writes (MAINT-004). Neither
is fsynced: after a power loss every holder is gone anyway. A process that forks
keeps the lock in the child as long as the child keeps the descriptor (it is
close-on-exec).

**Blocking.** The critical sections are short (a stat, a write, an fsync) and
run on the event loop thread. That is a deliberate trade: a hop to a worker
thread costs about 100 µs on a small VM, as much as half an fsync, and would
take durable appends well below the fsync limit. Waiting for a lock another
handle or process holds is never done on the loop: a worker thread waits in
``flock``. `check_integrity` scans large logs in a worker thread. A handle is
meant for one thread at a time; open one handle per thread.

**Durability** (``ctx.options["durability"]``). ``fsync`` (the default): every
acknowledged append is fdatasync'ed; new logs, truncates and deletes are made
durable with an fsync of the file and of the directory; generation changes are
fsynced before the change they announce. Logs are extended ahead of their data
(a sparse reserve of zeros, see `checkpointspec.backends.file.log`) so that an
append's fdatasync does not also have to commit a new file size. ``process``: no fsync at all, so
acknowledged writes survive the death of the process (the data is in the
kernel) but not a crash of the machine or a power loss; several times faster.

**Reads** are snapshots: under the lock ``read`` takes the validated end of the
log and a duplicate descriptor of the file, then reads up to that end without
the lock. Appends only add bytes past it, and truncates and deletes replace or
unlink the file, which leaves the duplicate reading the old one.

**Generations** live in the ``.meta`` file, which outlives its log, so a
generation survives delete and re-append.

**Modification times** are kept in the files, not taken from the file system:
each record carries the time its append was accepted and the header the time
of the log's creation or last truncate; a session's mtime is the later of the
two. Within a process the clock never goes back and successive stamps are at
least 1 µs apart, so sessions modified one after another list in that order.

**Limits.** POSIX only (``flock``), on a local file system: ``flock`` over NFS
is emulated with POSIX record locks on Linux and does not give the
per-description semantics this design needs. A handle keeps the descriptors of
its 64 most recently used sessions open. The files are the backend's: a handle
does not notice a log removed or replaced behind its back (by hand, or by a
restore from backup) while it holds it open, because it learns of replacements
through the generation, which only the backend bumps; close the handles first.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final

from ...spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    Codec,
    CodecError,
    CorruptStoreError,
    FaultHook,
    FileSystem,
    IntegrityReport,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    SessionEvent,
    SessionInfo,
    SessionLockedError,
    StoredEvent,
    check_append_arguments,
    check_expectations,
    check_seq,
    check_session_id,
    check_truncate_arguments,
    check_truncate_bound,
    encode_event,
)
from ..capabilities import store_capabilities
from ..fsport import FAULT_POINTS, HookedFileSystem, OsFileSystem
from .format import (
    FORMAT_VERSION,
    MAX_PAYLOAD,
    maintenance_marked,
    marker_bytes,
    pack_frames,
    pack_header,
    parse_marker,
)
from .integrity import StoreInspector, damage_first_record, decode_frames, read_session_id
from .log import LOG_SUFFIX, LogFiles, SessionLog, logger
from .naming import id_from_stem, is_hashed_stem, stem_for

__all__ = ["Durability", "FileCheckpointer", "make"]

MARKER_NAME: Final = "format.json"
SESSIONS_DIR: Final = "sessions"
_OPEN_SESSIONS: Final = 64
"""Session states (two descriptors each) a handle keeps open; older idle ones are closed."""
_READ_CHUNK: Final = 1 << 20


class Durability(enum.StrEnum):
    """How much an acknowledged write survives (``ctx.options["durability"]``)."""

    FSYNC = "fsync"
    """Process death, machine crash and power loss: everything is fsynced."""
    PROCESS = "process"
    """Process death only: nothing is fsynced."""


class _Clock:
    """Modification times for this process: never backwards, always 1 µs apart.

    The step keeps successive stamps distinct both as float seconds and in the
    microseconds of the ISO timestamp, so ``list_sessions`` orders sessions
    modified one after the other in this process the way they were modified.
    """

    _STEP: Final = 1000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def now_ns(self, after: int) -> int:
        with self._lock:
            now = max(time.time_ns(), self._last + self._STEP, after + self._STEP)
            self._last = now
            return now


_clock = _Clock()


class FileCheckpointer:
    """A conforming checkpointer that keeps each session in its own file (see the module docstring).

    Capabilities: DELETE, LIST, TRUNCATE, MULTI_PROCESS, CODEC, GENERATION and
    MAINTENANCE, plus DURABLE in
    ``fsync`` mode only: ``process`` mode survives a killed process but not a power
    loss, and DURABLE promises both (DUR-003). Also
    implements `StoreHooks`, and `on_filesystem` for crash simulation. ``fs``
    replaces the file system (tests, crash injection); ``durability`` is
    described on `Durability`.
    """

    capabilities: frozenset[Capability] = store_capabilities(durable=True, shared=True)
    """The declared set in the default ``fsync`` mode; a handle's own says its mode's."""

    def __init__(
        self,
        path: Path | str,
        *,
        codec: Codec | None = None,
        durability: Durability = Durability.FSYNC,
        fs: FileSystem | None = None,
    ) -> None:
        self._hooked = HookedFileSystem(fs if fs is not None else OsFileSystem())
        self._fs: FileSystem = self._hooked
        self._root = os.fspath(path)
        self._dir = os.path.join(self._root, SESSIONS_DIR)
        self._codec = codec
        self._durability = durability
        self._durable = durability is Durability.FSYNC
        # ``process`` mode survives a killed process but not a power loss: not DURABLE.
        self.capabilities = store_capabilities(durable=self._durable, shared=True)
        self._repairs: list[str] = []
        self._files = LogFiles(self._fs, self._durable, self._repairs)
        self._sessions: OrderedDict[str, SessionLog] = OrderedDict()
        self._held: dict[str, int] = {}
        """Sessions this handle holds for maintenance, with the descriptor of their flocked ``.maint`` file."""
        self._closed = False
        self._open_store()

    # -- opening the store -------------------------------------------------------------
    def _open_store(self) -> None:
        """Check the format marker (refusing newer stores untouched) or create the store."""
        fs = self._fs
        marker = os.path.join(self._root, MARKER_NAME)
        if fs.stat(marker) is not None:
            fd = fs.open(marker)
            try:
                data = fs.read(fd, 4096, 0)
            finally:
                fs.close(fd)
            try:
                version = parse_marker(data)
            except ValueError as exc:
                raise CorruptStoreError(None, MARKER_NAME, str(exc)) from None
            if version > FORMAT_VERSION:
                raise SchemaVersionError(version, FORMAT_VERSION)
            if fs.stat(self._dir) is None:
                fs.mkdir(self._dir)
            return
        fs.mkdir(self._root)
        fs.mkdir(self._dir)
        # Concurrent creators each rename their own temporary file; all hold the
        # same bytes, so whichever rename lands last is as good as the first.
        _replace_file(fs, marker, marker_bytes(), durable=self._durable)

    # -- handle state --------------------------------------------------------------------
    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise CheckpointerClosedError(operation)

    def _session(self, sid: str) -> SessionLog:
        log = self._sessions.get(sid)
        if log is not None:
            self._sessions.move_to_end(sid)
            return log
        log = self._sessions[sid] = SessionLog(sid, stem_for(sid), self._dir)
        if len(self._sessions) > _OPEN_SESSIONS:
            for old in list(self._sessions.values())[:-1]:
                if len(self._sessions) <= _OPEN_SESSIONS:
                    break
                if old.users == 0:
                    old.close(self._fs)
                    del self._sessions[old.session_id]
        return log

    async def _acquire(self, log: SessionLog, operation: str, *, create: bool) -> bool:
        """Take the session's task gate and file lock. False (and nothing held) when
        the session is unknown and ``create`` is not set."""
        log.users += 1
        if not log.gate.try_enter():
            try:
                await log.gate.enter()
            except BaseException:
                log.users -= 1
                raise
        try:
            self._check_open(operation)
            if log.meta_fd is None and not self._files.open_meta(log, create):
                self._leave(log)
                return False
            assert log.meta_fd is not None
            if not self._fs.lock(log.meta_fd, blocking=False):
                await self._wait_for_file_lock(log.meta_fd)
        except BaseException:
            self._leave(log)
            raise
        return True

    async def _wait_for_file_lock(self, fd: int) -> None:
        # flock cannot be interrupted, so a cancelled wait still ends with the
        # lock taken; it is then given back at once, and only after that does the
        # cancellation go through (the caller then leaves the task gate).
        waiter = asyncio.ensure_future(asyncio.to_thread(self._fs.lock, fd, blocking=True))
        cancelled = False
        while not waiter.done():
            try:
                await asyncio.shield(waiter)
            except asyncio.CancelledError:
                cancelled = True
        waiter.result()
        if cancelled:
            self._fs.unlock(fd)
            raise asyncio.CancelledError

    def _release(self, log: SessionLog) -> None:
        try:
            if log.meta_fd is not None:
                self._fs.unlock(log.meta_fd)
        finally:
            self._leave(log)

    def _leave(self, log: SessionLog) -> None:
        log.gate.leave()
        log.users -= 1
        if self._closed and log.users == 0:
            log.close(self._fs)

    # -- operations ------------------------------------------------------------------------
    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Append a batch atomically (see `Checkpointer.append`), durably in ``fsync`` mode."""
        self._check_open("append")
        sid, batch, want_head, want_generation = check_append_arguments(
            session_id, events, expected_head, expected_generation
        )
        payloads = self._encode(sid, [encode_event(event) for event in batch])
        log = self._session(sid)
        if not await self._acquire(log, "append", create=bool(payloads)):
            check_expectations(sid, 0, 0, want_head, want_generation)
            return 0
        try:
            self._files.refresh(log)
            if log.marked:
                self._check_writable(log, "append")
            check_expectations(sid, log.head, log.generation, want_head, want_generation)
            if payloads:
                self._write(log, payloads)
            return log.head
        finally:
            self._release(log)

    def _encode(self, sid: str, plain: list[bytes]) -> list[bytes]:
        codec = self._codec
        payloads = plain
        if codec is not None:
            payloads = []
            for data in plain:
                try:
                    encoded = codec.encode(data)
                except Exception as exc:
                    raise CodecError(sid, "encode", f"codec {codec.name!r} failed: {exc}") from exc
                if not isinstance(encoded, bytes | bytearray | memoryview):
                    raise CodecError(
                        sid, "encode", f"codec {codec.name!r} returned {type(encoded).__name__}"
                    )
                payloads.append(bytes(encoded))
        for payload in payloads:
            if len(payload) > MAX_PAYLOAD:
                raise InvalidArgumentError(
                    "events",
                    f"an event of {len(payload)} bytes is too large to store",
                    ReasonCode.TOO_LARGE,
                    "EVENT-002",
                )
        return payloads

    def _write(self, log: SessionLog, payloads: list[bytes]) -> None:
        ts_ns = _clock.now_ns(after=log.mtime_ns)
        frames, relative = pack_frames(payloads, log.head + 1, ts_ns)
        encoded = self._codec is not None
        if log.log_fd is None:
            header = pack_header(log.session_id, encoded=encoded, mtime_ns=ts_ns)
            self._files.create(log, header, frames, relative, ts_ns)
            return
        if log.encoded != encoded:
            raise CodecError(log.session_id, "encode", _codec_mismatch(log.encoded))
        self._files.append(log, frames, relative, ts_ns)

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        """Yield events after ``since_seq`` from one snapshot (see `Checkpointer.read`)."""
        self._check_open("read")
        sid = check_session_id(session_id)
        since = check_seq("since_seq", since_seq)
        log = self._session(sid)
        if not await self._acquire(log, "read", create=False):
            return
        fd: int | None = None
        try:
            self._files.refresh(log)
            if since >= log.head:
                return
            if log.encoded != (self._codec is not None):
                raise CodecError(sid, "decode", _codec_mismatch(log.encoded))
            self._files.ensure_indexed(log, since + 1)
            assert log.log_fd is not None
            start, end = log.offset_of(since + 1), log.end
            buf = self._fs.read(log.log_fd, min(end - start, _READ_CHUNK), start)
            if start + len(buf) < end:
                fd = self._fs.dup(log.log_fd)
        finally:
            self._release(log)
        try:
            position, seq = start, since + 1
            while True:
                events, position, needed = decode_frames(
                    buf, position, seq, sid, self._codec, log.log_name
                )
                seq += len(events)
                for stored in events:
                    yield stored
                if position >= end or fd is None:
                    break
                want = min(max(needed, _READ_CHUNK), end - position)
                buf = self._fs.read(fd, want, position)
                if len(buf) < min(needed, want) or not buf:
                    # Only an out-of-band change can shorten the bytes below a validated end.
                    raise CorruptStoreError(
                        sid, log.log_name, f"the log ends before offset {end}, its validated end"
                    )
                await asyncio.sleep(0)  # let other tasks run between chunks of a long read
        finally:
            if fd is not None:
                self._fs.close(fd)

    async def head(self, session_id: str) -> int:
        """The seq of the session's last event; 0 if it has none or is unknown."""
        self._check_open("head")
        log = self._session(check_session_id(session_id))
        if not await self._acquire(log, "head", create=False):
            return 0
        try:
            self._files.refresh(log)
            return log.head
        finally:
            self._release(log)

    async def generation(self, session_id: str) -> int:
        """The session id's generation: bumped by truncates that remove events and by deletes."""
        self._check_open("generation")
        log = self._session(check_session_id(session_id))
        if not await self._acquire(log, "generation", create=False):
            return 0
        try:
            return self._files.generation(log)
        finally:
            self._release(log)

    async def list_sessions(self) -> list[SessionInfo]:
        """Every session with a log, most recently modified first, ties by id."""
        self._check_open("list_sessions")
        infos: list[SessionInfo] = []
        for name in self._fs.listdir(self._dir):
            sid = self._session_id_of(name)
            if sid is None:
                continue
            log = self._session(sid)
            if not await self._acquire(log, "list_sessions", create=False):
                continue
            try:
                self._files.refresh(log)
            except CorruptStoreError as exc:
                # Damage does not hide a session: it is listed (with mtime 0, as
                # its times cannot be trusted) and reported by check_integrity.
                infos.append(SessionInfo(sid, log.mtime_ns / 1e9))
                logger.warning("listing a damaged session: %s", exc)
                continue
            finally:
                self._release(log)
            if log.log_fd is not None:
                infos.append(SessionInfo(sid, log.mtime_ns / 1e9))
        infos.sort(key=lambda info: info.id)
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos

    def _session_id_of(self, name: str) -> str | None:
        if not name.endswith(LOG_SUFFIX):
            return None
        stem = name[: -len(LOG_SUFFIX)]
        if is_hashed_stem(stem):
            return read_session_id(self._fs, os.path.join(self._dir, name), stem)
        return id_from_stem(stem)

    async def delete(self, session_id: str) -> None:
        """Remove a session; its generation grows. Unknown sessions: nothing happens."""
        self._check_open("delete")
        log = self._session(check_session_id(session_id))
        if not await self._acquire(log, "delete", create=False):
            return
        try:
            if maintenance_marked(self._files.meta_bytes(log)):
                self._check_writable(log, "delete")
            self._files.delete(log)
        finally:
            self._release(log)

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """Keep events ``1..to_seq`` (see `Checkpointer.truncate`); the old or new log survives a crash."""
        self._check_open("truncate")
        sid, target, want_head, want_generation = check_truncate_arguments(
            session_id, to_seq, expected_head, expected_generation
        )
        log = self._session(sid)
        if not await self._acquire(log, "truncate", create=False):
            check_expectations(sid, 0, 0, want_head, want_generation)
            check_truncate_bound(sid, target, 0)
            return target
        try:
            self._files.refresh(log)
            if log.marked:
                self._check_writable(log, "truncate")
            check_expectations(sid, log.head, log.generation, want_head, want_generation)
            check_truncate_bound(sid, target, log.head)
            if target < log.head:
                ts_ns = _clock.now_ns(after=log.mtime_ns)
                header = pack_header(sid, encoded=log.encoded, mtime_ns=ts_ns)
                self._files.rewrite(log, target, header)
            return target
        finally:
            self._release(log)

    async def check_integrity(self) -> IntegrityReport:
        """Verify every log, record by record, and every generation file; change nothing."""
        self._check_open("check_integrity")
        inspector = StoreInspector(self._fs, self._dir, decode=self._codec is None)
        for name in sorted(self._fs.listdir(self._dir)):
            sid = self._session_id_of(name)
            if sid is None:
                inspector.other_file(name)
                continue
            log = self._session(sid)
            if not await self._acquire(log, "check_integrity", create=False):
                continue
            try:
                # Our own descriptor and the size under the lock: the scan then
                # sees a fixed prefix of the file, whatever writers do meanwhile.
                opened = inspector.open_log(name)
            finally:
                self._release(log)
            if opened is not None:
                fd, size = opened
                try:
                    if size > _READ_CHUNK:
                        await asyncio.to_thread(inspector.check_log, sid, name, fd, size)
                    else:
                        inspector.check_log(sid, name, fd, size)
                finally:
                    self._fs.close(fd)
        return inspector.report(self._repairs)

    # -- maintenance ---------------------------------------------------------------------
    async def acquire_maintenance(self, session_id: str) -> None:
        """Hold ``session_id``: only this handle may write to it until it releases it or closes.

        The session need not exist. Raises `SessionLockedError` when any handle, in
        any process, this one included, holds it; takes over the lock of a holder
        whose process died.
        """
        self._check_open("acquire_maintenance")
        sid = check_session_id(session_id)
        log = self._session(sid)
        await self._acquire(log, "acquire_maintenance", create=True)
        try:
            if sid in self._held:
                raise SessionLockedError(sid, "acquire_maintenance")
            self._held[sid] = self._take(log)
        finally:
            self._release(log)

    def _take(self, log: SessionLog) -> int:
        """Create and lock the session's ``.maint`` file, then mark the session; the file's
        descriptor. Under the session's lock."""
        marked = maintenance_marked(self._files.meta_bytes(log))
        if marked and self._holder_alive(log):
            raise SessionLockedError(log.session_id, "acquire_maintenance")
        fd = self._fs.open(log.maint_path, create=True)
        try:
            # Files are created and removed only under the session's lock, which we
            # hold: no live holder locks a file it did not mark, so this lock is free.
            if not self._fs.lock(fd, blocking=False):
                raise SessionLockedError(log.session_id, "acquire_maintenance")
            if not marked:
                self._files.set_mark(log, True)
        except BaseException:
            self._fs.close(fd)
            raise
        return fd

    def _holder_alive(self, log: SessionLog) -> bool:
        """Whether a live holder locks the session's ``.maint`` file; a dead one's file is removed.

        Under the session's lock. The holder keeps the file's ``flock`` for as long
        as it holds the session, and the kernel drops it when the holder's process
        dies: a file whose lock is free was left by a dead holder (MAINT-004).
        """
        try:
            fd = self._fs.open(log.maint_path)
        except FileNotFoundError:
            return False
        try:
            if not self._fs.lock(fd, blocking=False):
                return True
            with contextlib.suppress(FileNotFoundError):
                self._fs.unlink(log.maint_path)
            return False
        finally:
            self._fs.close(fd)

    def _check_writable(self, log: SessionLog, operation: str) -> None:
        """Refuse a write to a marked session another handle holds (MAINT-001); clear a dead holder's mark.

        Called under the session's lock, only for a session whose ``.meta`` bytes,
        read under it, carry the mark (a refresh reads them anyway, so an unmarked
        session costs a writer nothing). The holder writes as usual (MAINT-002).
        """
        if log.session_id in self._held:
            return
        if self._holder_alive(log):
            raise SessionLockedError(log.session_id, operation)
        self._files.set_mark(log, False)

    async def release_maintenance(self, session_id: str) -> None:
        """Give ``session_id`` back to every writer. Does nothing unless this handle holds it."""
        self._check_open("release_maintenance")
        sid = check_session_id(session_id)
        if sid not in self._held:
            return
        log = self._session(sid)
        await self._acquire(log, "release_maintenance", create=True)
        try:
            self._give_back(log)
        finally:
            self._release(log)

    def _give_back(self, log: SessionLog) -> None:
        """Remove the session's ``.maint`` file and mark, then drop its lock. Under the session's lock."""
        fd = self._held.pop(log.session_id)
        try:
            with contextlib.suppress(FileNotFoundError):
                self._fs.unlink(log.maint_path)
            self._files.set_mark(log, False)
        finally:
            self._fs.close(fd)

    async def close(self) -> None:
        """Release the handle's maintenance locks and descriptors. Idempotent; other handles are unaffected."""
        if self._closed:
            return
        try:
            for sid in list(self._held):
                await self.release_maintenance(sid)
        finally:
            # Whatever could not be released in order (an I/O error, a
            # cancellation) loses its lock here, and the handle closes all the
            # same; the next writer clears what was left, as after a holder's death.
            for fd in self._held.values():
                self._fs.close(fd)
            self._held.clear()
            self._closed = True
            for log in list(self._sessions.values()):
                if log.users == 0:
                    log.close(self._fs)
            self._sessions.clear()

    # -- FaultInjectable: pause or kill points between the port's calls -----------------
    @property
    def fault_points(self) -> tuple[str, ...]:
        """Every point `HookedFileSystem` reports: before/after writes, fsyncs, renames."""
        return FAULT_POINTS

    def set_fault_hook(self, hook: FaultHook | None) -> None:
        """Report each mutating file-system call of this handle to ``hook``."""
        self._hooked.hook = hook

    def on_filesystem(self, fs: FileSystem) -> FileCheckpointer:
        """A new handle on this store (same path, codec and durability) doing all its I/O
        through ``fs``; shares nothing with this handle, which may be closed.

        This is how crash simulation plugs in a disk that keeps a volatile and a
        durable image (the kit's power-loss check, DUR-003).
        """
        return FileCheckpointer(self._root, codec=self._codec, durability=self._durability, fs=fs)

    # -- StoreHooks ------------------------------------------------------------------------
    def mark_newer_schema(self, path: Path) -> None:
        """Mark the closed store at ``path`` as written by the next format version."""
        marker = os.path.join(os.fspath(path), MARKER_NAME)
        _replace_file(self._fs, marker, marker_bytes(FORMAT_VERSION + 1), durable=True)

    def damage_store(self, path: Path) -> str:
        """Flip a byte inside the payload of a record that is not the last of its log."""
        return damage_first_record(self._fs, os.path.join(os.fspath(path), SESSIONS_DIR))


def _codec_mismatch(log_encoded: bool) -> str:
    if log_encoded:
        return "the log was written through a codec, but none is configured"
    return "the log was written without a codec, but one is configured"


def _replace_file(fs: FileSystem, path: str, data: bytes, *, durable: bool) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file, fsynced, renamed over it."""
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = fs.open(tmp, create=True, truncate=True)
    try:
        fs.write(fd, data, 0)
        if durable:
            fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    if durable:
        fs.fsync_dir(os.path.dirname(path))


def make(ctx: BackendContext) -> FileCheckpointer:
    """Factory for the kit and for applications: a file store in ``ctx.path``.

    ``ctx.options``: ``durability=fsync`` (default) or ``durability=process``
    (see `Durability`). Unknown options raise `InvalidArgumentError`, so a typo
    is not silently ignored.
    """
    options = dict(ctx.options)
    mode = options.pop("durability", Durability.FSYNC.value)
    if options:
        raise InvalidArgumentError(
            "options",
            f"unknown file backend options {sorted(options)}; known: durability",
            ReasonCode.UNKNOWN_OPTION,
        )
    try:
        durability = Durability(mode)
    except ValueError:
        known = ", ".join(d.value for d in Durability)
        raise InvalidArgumentError(
            "options", f"durability={mode!r}; use one of {known}", ReasonCode.BAD_OPTION
        ) from None
    return FileCheckpointer(ctx.path, codec=ctx.codec, durability=durability)
