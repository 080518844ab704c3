"""File backends with one bug each that only several handles, processes, kills or codecs show.

Each class is the file reference backend (`FileCheckpointer`) with one mistake put
in: a cached view that is trusted instead of re-validated, a batch written one
event at a time, a decode failure handled as damage or papered over. Plain unit
tests of one handle in one process pass on all of them. Each docstring says the
bug and the rule the kit must report; ``violates`` holds that rule id.

The kit loads a backend by ``module:function``, also in the worker processes of
its multi-process checks, which import this module by name
(``tests/quality/conftest.py`` puts this folder on the path). Each class has a
module-level factory ``make_<name>(ctx)``; ``HARD`` maps every name to its class.

The SQLite race of reading the head outside the write transaction is not repeated
here: ``racy_backends.CheckThenAppend`` is that bug, and
``test_stress_catches_races.py`` and ``test_kit_catches_hard_bugs.py`` use it.
Every class here is wrong on purpose: none is an example of how to write a backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

from checkpointspec.backends.file import Durability, FileCheckpointer
from checkpointspec.backends.file.log import LogFiles, SessionLog
from checkpointspec.spec import (
    BackendContext,
    Codec,
    CodecError,
    UserPrompt,
    decode_event,
    encode_event,
)

__all__ = ["HARD", "Hard"]


class Hard(FileCheckpointer):
    """A `FileCheckpointer` with one bug; ``violates`` is the rule the kit must report."""

    violates: ClassVar[str]


def _open(cls: type[Hard], ctx: BackendContext) -> Hard:
    """A ``cls`` handle on ``ctx.path``, with the codec and durability the context asks for."""
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


# -- decode failures -----------------------------------------------------------------------


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


# -- factories -----------------------------------------------------------------------------


def make_cached_head(ctx: BackendContext) -> Hard:
    return _open(CachedHead, ctx)


def make_event_at_a_time(ctx: BackendContext) -> Hard:
    return _open(EventAtATime, ctx)


def make_decode_failure_is_torn_tail(ctx: BackendContext) -> Hard:
    return _open(DecodeFailureIsTornTail, ctx)


def make_plaintext_fallback(ctx: BackendContext) -> Hard:
    return _open(PlaintextFallback, ctx)


HARD: dict[str, type[Hard]] = {
    "cached_head": CachedHead,
    "event_at_a_time": EventAtATime,
    "decode_failure_is_torn_tail": DecodeFailureIsTornTail,
    "plaintext_fallback": PlaintextFallback,
}
"""Every hard backend by name; its factory is ``hard_backends:make_<name>``."""
