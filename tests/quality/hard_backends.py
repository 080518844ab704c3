"""File backends with one bug each that only several handles, processes, kills, codecs or disks show.

Each class is the file reference backend (`FileCheckpointer`) with one mistake put
in: a cached view that is trusted instead of re-validated, a batch written or a
truncate cut one event at a time, a directory never fsynced, a codec failure
handled as damage, papered over or sidestepped, a format marker overwritten,
trailing whitespace stripped from every text. Plain unit tests of
one handle in one process pass on most of them. Each docstring says the bug and
the rule the kit must report; ``violates`` holds that rule id.

The kit loads a backend by ``module:attribute``, also in the worker processes of
its multi-process checks, which import this module by name
(``tests/quality/conftest.py`` puts this folder on the path): every class is its
own factory, ``hard_backends:CachedHead.make``. ``HARD`` maps each class name to
its class.

The SQLite race of reading the head outside the write transaction is not repeated
here: ``racy_backends.CheckThenAppend`` is that bug, and
``test_stress_catches_races.py`` and ``test_kit_catches_hard_bugs.py`` use it.
Every class here is wrong on purpose: none is an example of how to write a backend.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import ClassVar, Self

import msgspec
from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.file.checkpointer import MARKER_NAME
from checkpointspec.backends.file.format import marker_bytes
from checkpointspec.backends.file.log import LogFiles, SessionLog
from checkpointspec.backends.fsport import HookedFileSystem, OsFileSystem
from checkpointspec.spec import (
    BackendContext,
    Codec,
    CodecError,
    FileSystem,
    SessionEvent,
    UserPrompt,
    decode_event,
    encode_event,
)

__all__ = ["HARD", "Hard"]


class Hard(FileCheckpointer):
    """A `FileCheckpointer` with one bug; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]

    @classmethod
    def make(cls, ctx: BackendContext) -> Self:
        """The kit's factory: a handle on ``ctx.path`` with the codec and durability asked for."""
        durability = Durability(ctx.options.get("durability", Durability.FSYNC.value))
        return cls(ctx.path, codec=ctx.codec, durability=durability)


# -- a cached view trusted under the lock --------------------------------------------------


class TrustingLogFiles(LogFiles):
    """`LogFiles` whose refresh believes a log it has loaded once is still as it left it."""

    def refresh(self, log: SessionLog) -> None:
        if log.log_fd is not None:
            return  # the bug: generation and end unchecked, so other writers' records go unseen
        super().refresh(log)


class CachedHead(Hard):
    """Bug: each handle caches the head and offset index of a log and trusts them.

    The lock is still taken, but under it the cached head is not re-validated
    against the files (generation and the bytes past the end): once a handle has loaded a log it
    never looks again. A second handle's append goes unseen, so an append with
    ``expected_head`` equal to the stale cached head is accepted and its frame
    overwrites the other handle's record. Kit must report HANDLE-001 (the check
    with two handles, a conflict across handles) and MP-001 (writers in several
    processes acknowledged with the same head).
    """

    violates = "HANDLE-001"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._files = TrustingLogFiles(self._fs, self._durable, self._repairs)


class HeadAheadOfAppend(Hard):
    """Bug: ``head`` names one more than the session's last seq once it has events.

    An append passing the head just read as ``expected_head`` then always conflicts,
    so MP-001's writers, which read the head and retry after each conflict, would
    retry forever. Kit must report MP-001 once a writer meets more conflicts than
    the other writers' appends can cause, not after a deadline on its worker.
    """

    violates = "MP-001"

    async def head(self, session_id: str) -> int:
        last = await super().head(session_id)
        return last + 1 if last else last


# -- a batch written one event at a time -------------------------------------------------


class EventAtATime(Hard):
    """Bug: appending to an existing log writes the batch one event per write and fsync.

    Each event is framed as a batch of its own and written (and fsynced) before the
    next, so each is committed on its own: a writer killed between two of those
    writes (the ``write.after`` or ``fsync.*`` fault points of its first event)
    leaves the first events of its batch in the log, a batch neither wholly there
    nor wholly absent. The first append of a session still creates the log whole.
    Kit must report KILL-001 (the commanded machine kills a paused writer).
    """

    violates = "KILL-001"

    def _write(self, log: SessionLog, payloads: list[bytes]) -> None:
        if log.log_fd is None or len(payloads) < 2:
            super()._write(log, payloads)
            return
        for payload in payloads:
            super()._write(log, [payload])


# -- a directory never fsynced -------------------------------------------------------------


class SkipsDirectorySync(HookedFileSystem):
    """A file-system port that forwards every call but ``fsync_dir``, which it skips."""

    def fsync_dir(self, path: str) -> None:
        return None


class NoDirectorySync(Hard):
    """Bug: fsyncs file data but never a directory, trusting the file system to keep names.

    A new log is renamed into place and acknowledged, but the directory entry is
    not made durable: a power loss can take the whole log, acknowledged events
    and all. Kit must report DUR-003.
    """

    violates = "DUR-003"

    def __init__(
        self,
        path: Path | str,
        *,
        codec: Codec | None = None,
        durability: Durability = Durability.FSYNC,
        fs: FileSystem | None = None,
    ) -> None:
        port = SkipsDirectorySync(fs if fs is not None else OsFileSystem())
        super().__init__(path, codec=codec, durability=durability, fs=port)

    def on_filesystem(self, fs: FileSystem) -> NoDirectorySync:
        return NoDirectorySync(self._root, codec=self._codec, durability=self._durability, fs=fs)


# -- a truncate done one event at a time ---------------------------------------------------


class TruncatesEventAtATime(Hard):
    """Bug: a truncate removes its events one at a time, the last first, each cut durable.

    Each cut is a whole truncate of its own (the log rewritten to one event less,
    fsynced and renamed into place), so a writer killed between two cuts leaves
    the log cut part of the way: neither the log before the truncate nor the log
    after it. A read never sees the cut in progress, nor does a power loss add to
    what a kill shows. Kit must report KILL-001 (a writer held right after one of
    its system calls during the truncate, and killed there).
    """

    violates = "KILL-001"

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await self.head(session_id)
        cuts = isinstance(to_seq, int) and not isinstance(to_seq, bool) and 0 <= to_seq < head
        if not cuts:  # nothing to cut, or arguments the contract refuses: as it should be
            return await super().truncate(
                session_id, to_seq, expected_head, expected_generation=expected_generation
            )
        kept = await super().truncate(
            session_id, head - 1, expected_head, expected_generation=expected_generation
        )
        for seq in range(head - 2, to_seq - 1, -1):
            kept = await super().truncate(session_id, seq)
        return kept


# -- the format marker ---------------------------------------------------------------------


class UpgradesFormatOnOpen(Hard):
    """Bug: opening a store first stamps it with this version's format marker, then checks it.

    An eager in-place "upgrade": a store written by a newer format is overwritten
    with the older marker and opened as if it were the older format, instead of
    being refused untouched. Kit must report SCHEMA-001.
    """

    violates = "SCHEMA-001"

    def _open_store(self) -> None:
        marker = os.path.join(self._root, MARKER_NAME)
        if self._fs.stat(marker) is not None:
            fd = self._fs.open(marker, truncate=True)
            try:
                self._fs.write(fd, marker_bytes(), 0)
            finally:
                self._fs.close(fd)
        super()._open_store()


# -- codecs ----------------------------------------------------------------------------------


class EncodesOncePerLength(Hard):
    """Bug: with a codec, payloads of a batch that are equally long are encoded once, stored alike.

    An encode cache meant to spare encrypting one event twice is keyed by the
    payload's length, not its bytes: every event of a batch whose payloads are as
    long as an earlier one's reads back as that earlier event. Without a codec
    nothing is cached. Kit must report CODEC-001.
    """

    violates = "CODEC-001"

    def _encode(self, sid: str, plain: list[bytes]) -> list[bytes]:
        encoded = super()._encode(sid, plain)
        if self._codec is None:
            return encoded
        by_length: dict[int, bytes] = {}
        return [by_length.setdefault(len(p), e) for p, e in zip(plain, encoded, strict=True)]


class EncodeFailureStoresPlaintext(Hard):
    """Bug: when the codec fails to encode a batch, the batch is stored without it.

    "Better unencrypted than lost": append succeeds and the events sit in
    plaintext in a log marked as encoded, instead of append raising CodecError
    and writing nothing. Kit must report CODEC-002.
    """

    violates = "CODEC-002"

    def _encode(self, sid: str, plain: list[bytes]) -> list[bytes]:
        try:
            return super()._encode(sid, plain)
        except CodecError:
            return plain


class PlaintextSearchIndex(Hard):
    """Bug: each appended event's text also goes into a search index file beside the logs.

    The logs are encoded, the index is not: with a codec configured, the text of
    every event lies in plaintext under the store's path. Kit must report CODEC-005.
    """

    violates = "CODEC-005"

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )
        _index(Path(self._root) / "search-index.txt", session_id, events)
        return head


def _index(path: Path, session_id: str, events: Sequence[SessionEvent]) -> None:
    with path.open("a", encoding="utf-8") as index:
        for event in events:
            index.write(f"{session_id}\t{getattr(event, 'text', '')}\n")


class DecodeFailureIsTornTail(Hard):
    """Bug: a record the codec cannot decode is handled as the torn tail of an interrupted append.

    The read stops at that record without an error, and the log is cut there, as
    the backend cuts an interrupted append: a wrong key or a failing codec
    destroys every event from the first it cannot decode. Kit must report CODEC-003.
    """

    violates = "CODEC-003"

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[object]:  # type: ignore[override]
        try:
            async for stored in super().read(session_id, since_seq):
                yield stored
        except CodecError as error:
            if error.direction != "decode" or error.seq is None:
                raise
            await self._cut(session_id, error.seq)

    async def _cut(self, session_id: str, seq: int) -> None:
        log = self._session(session_id)
        if not await self._acquire(log, "read", create=False):
            return
        try:
            self._files.refresh(log)
            if log.log_fd is None or seq > log.head:
                return
            self._files.ensure_indexed(log, seq)
            self._fs.truncate(log.log_fd, log.offset_of(seq))
            self._repairs.append(f"session {session_id!r}: cut an undecodable tail at seq {seq}")
            log.forget_log(self._fs)
        finally:
            self._release(log)


class PlaintextFallbackCodec:
    """Wraps the configured codec; when it fails, the payload is taken as plaintext."""

    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.name = inner.name

    def encode(self, data: bytes) -> bytes:
        return self.inner.encode(data)

    def decode(self, data: bytes) -> bytes:
        try:
            plain = self.inner.decode(data)
            decode_event(plain)
            return plain
        except Exception:
            pass
        try:
            decode_event(data)  # a record written before the codec was configured
            return data
        except Exception:
            return encode_event(UserPrompt(data.decode("utf-8", "replace")))


class PlaintextFallback(Hard):
    """Bug: a payload the codec cannot decode is returned as plaintext, not raised.

    The reasoning is that such a record was written before the codec was
    configured; bytes that are not an event either are returned as the text of a
    user prompt. A wrong key or a corrupting codec thus reads as events holding
    the stored bytes. Kit must report CODEC-004.
    """

    violates = "CODEC-004"

    def __init__(self, *args: object, codec: Codec | None = None, **kwargs: object) -> None:
        wrapped = PlaintextFallbackCodec(codec) if codec is not None else None
        super().__init__(*args, codec=wrapped, **kwargs)  # type: ignore[arg-type]


# -- a lossy round trip --------------------------------------------------------------------


class StripsTrailingWhitespace(Hard):
    """Bug: the text of every event is stored with its trailing whitespace stripped.

    A "tidy" encoder: ``"ls -la \\n"`` comes back as ``"ls -la"``. Nothing else is
    wrong, so every multi-process, kill and hold check runs its whole course on a
    backend that is durable and atomic, and must still end in a verdict. Kit must
    report EVENT-001 (an event reads back as it was appended).
    """

    violates = "EVENT-001"

    def _encode(self, sid: str, plain: list[bytes]) -> list[bytes]:
        return super()._encode(sid, [encode_event(_stripped(decode_event(p))) for p in plain])


def _stripped(event: SessionEvent) -> SessionEvent:
    text = getattr(event, "text", None)
    if isinstance(text, str):
        return msgspec.structs.replace(event, text=text.rstrip())
    return event


# -- the maintenance lock --------------------------------------------------------------------


class LockOutlivesHolder(Hard):
    """Bug: a held session is told by its ``.maint`` file alone, a marker file, not by its lock.

    The holder still creates the file and removes it on release, but writers
    never test whether anyone holds the file's ``flock``: a holder killed before
    its release leaves the session locked for good, as a stale pid file would.
    In one process nothing is wrong. Kit must report MAINT-004.
    """

    violates = "MAINT-004"

    def _holder_alive(self, log: SessionLog) -> bool:
        try:
            fd = self._fs.open(log.maint_path)
        except FileNotFoundError:
            return False
        self._fs.close(fd)
        return True


HARD: dict[str, type[Hard]] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, Hard) and hasattr(value, "violates")
}
"""Every hard backend by class name; its factory is ``hard_backends:<name>.make``."""
