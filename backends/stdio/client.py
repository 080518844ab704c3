"""`StdioCheckpointer`: a `Checkpointer` whose work is done by a child process.

The child is a backend written in any language that speaks the stdio protocol
(`checkpointspec.backends.stdio.messages`, docs/stdio-protocol.md), spoken through
the protocol's one client wire (`checkpointspec.backends.stdio.wire`). One
open handle is one child: opening a handle takes a child (a spare started
ahead, or one that declared ``reusable`` and whose handle was closed) and sends
``hello`` with the store's path; every call becomes one request and its
replies. Two handles open on one store are two processes, so races between
handles are races between processes, as they are in production.

What stays on this side of the pipe, and why: JSON cannot tell ``1`` from
``1.0``, a dict from an event, or carry a lone surrogate, so the *types* of the
arguments are checked here with the spec's validators (a wrong type never
reaches the child); their *values* (an empty or over-long session id, a
negative seq, a ``to_seq`` beyond the head) are the child's to refuse. So is a
call on a closed handle: it is sent to the process that closed the handle, or,
once that process serves another handle, to one told ``hello`` and ``close`` for
the same store, and the backend answers it (`CheckpointerClosedError`, CLOSE-001).

A call is one request and its reply lines, one at a time per handle. The event
loop writes the request and waits for the replies itself (a reader on the
child's stdout), so a call costs two wake-ups, the child's and the loop's; a
thread takes the call only when the handle is busy or closed, when a request is
too long to write at once, or to run a fault hook, which may block. The one
exception to one request at a time: a child that declared ``pipelined`` gets a run
of reads in one write (`StdioCheckpointer.read_logs`), answered in order.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import select
import shlex
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

import msgspec

from ...spec import (
    BackendContext,
    Capability,
    CheckpointerClosedError,
    FaultHook,
    IntegrityReport,
    InvalidArgumentError,
    SessionEvent,
    SessionInfo,
    StoredEvent,
    UnsupportedOperationError,
    encode_event,
)
from ...spec.validation import check_events, check_seq, check_session_id
from .child import ReplyLines, end_process, stderr_tail
from .messages import (
    CAPABILITIES,
    PROTOCOL_VERSION,
    AcquireMaintenance,
    Append,
    CheckIntegrity,
    Close,
    DamageStore,
    Delete,
    FaultReports,
    Generation,
    Head,
    Hello,
    HelloResult,
    IntegrityResult,
    ListSessions,
    MarkNewerSchema,
    Read,
    ReadResult,
    ReleaseMaintenance,
    Reply,
    Request,
    Resume,
    SessionEntry,
    Truncate,
)
from .validation import MessageValidator
from .wire import Conversation, StdioBackendError, StdioProtocolError, quote, to_exception

__all__ = [
    "EMULATED_RULES",
    "KIT_SIDE_RULES",
    "PROCESS_OPTION",
    "VALIDATE_OPTION",
    "HookedStdioCheckpointer",
    "StdioBackendError",
    "StdioCheckpointer",
    "StdioProtocolError",
    "make",
    "without_spares",
]

PROCESS_OPTION: Final = "process"
"""The `BackendContext.options` key holding the command line that starts the child."""
VALIDATE_OPTION: Final = "validate_protocol"
"""Option key: ``"1"`` checks every message, both ways, against the published JSON Schema."""
TIMEOUT_OPTION: Final = "reply_timeout"
"""Option key: seconds to wait for any one reply line (default 60)."""
_OWN_OPTIONS: Final = frozenset({PROCESS_OPTION, VALIDATE_OPTION, TIMEOUT_OPTION})

KIT_SIDE_RULES: Final[dict[str, str]] = {
    "ARG-003": "an events argument that is not a list of events cannot be sent as JSON: "
    "the kit's stdio client refuses it, so the backend is never asked",
    "EVENT-002": "an event JSON cannot carry exactly (a lone surrogate, a wrongly typed "
    "field) is refused by the kit's stdio client, so the backend is never asked",
}
"""Rules this client judges on its own side for every backend behind it, with why."""

EMULATED_RULES: Final[dict[str, tuple[str, ...]]] = {
    "close": ("CLOSE-001", "CLOSE-002"),
    "check_integrity": ("INTEG-001",),
}
"""The rules whose only evidence is the answer to one request: when the child answers it
itself (its hello's ``emulated``, the backend behind it having no such operation),
the kit judges them on the child's answer, not the backend's. CAP-001's evidence is
every undeclared operation's refusal: it is the child's when it answers them all."""

_STDERR_LINES: Final = 20
"""The lines of a child's stderr an error quotes, from its end."""
_STDERR_CHARS: Final = 1 << 16
"""The most of a child's stderr read for those lines."""
_T = TypeVar("_T")


_NEEDS: Final[dict[str, Capability]] = {
    "truncate": Capability.TRUNCATE,
    "delete": Capability.DELETE,
    "list_sessions": Capability.LIST,
    "generation": Capability.GENERATION,
    "acquire_maintenance": Capability.MAINTENANCE,
    "release_maintenance": Capability.MAINTENANCE,
}


class _Child:
    """The child process: its reply lines (`ReplyLines`, a deadline on every one, read
    here waiting in ``select``) and its stderr, kept in a file."""

    def __init__(self, argv: list[str], cwd: str | None, timeout: float) -> None:
        # A file, not a pipe: a child that logs a lot never blocks on a full pipe
        # while the kit waits for its reply, and its end is there to quote.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by end()
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=cwd,
                bufsize=0,
            )
        except OSError as exc:
            self._stderr.close()
            raise StdioProtocolError(f"cannot start {shlex.join(argv)}: {exc}") from exc
        self.argv = argv
        self.timeout = timeout
        self._replies = ReplyLines()
        self.closed_for: object | None = None
        """While parked after a ``close``: the token of the handle it closed, the one
        handle whose calls after close it answers (`_Pool.reclaim`)."""

    def stderr_tail(self) -> str:
        lines = stderr_tail(self._stderr, _STDERR_CHARS).splitlines()[-_STDERR_LINES:]
        return "\n".join(lines) if lines else "(nothing on stderr)"

    def write(self, line: bytes, request_id: int) -> None:
        """Send ``line``, a request (or resume) of the request ``request_id``."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(line + b"\n")
        except (BrokenPipeError, ValueError):
            raise self.exited(request_id) from None

    def read_line(self, request_id: int) -> bytes:
        """The next reply line, while the request ``request_id`` waits for it."""
        stdout = self.process.stdout
        assert stdout is not None
        self._replies.ask(self.timeout)
        while (line := self._replies.line()) is None:
            remaining = self._replies.remaining()
            if remaining <= 0:
                raise self._overdue(request_id)
            ready, _, _ = select.select([stdout], [], [], remaining)
            if ready and not self._replies.took(os.read(stdout.fileno(), 1 << 16)):
                raise self.exited(request_id)
        return line

    async def next_line(self, request_id: int) -> bytes:
        """`read_line` on the running event loop: the loop waits for the child's stdout,
        no thread does, so a call costs the child's wake-up and the loop's, not a
        thread's besides (under load each wake-up waits for a time slice)."""
        stdout = self.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        loop = asyncio.get_running_loop()
        self._replies.ask(self.timeout)
        while (line := self._replies.line()) is None:
            remaining = self._replies.remaining()
            if remaining <= 0:
                raise self._overdue(request_id)
            woken: asyncio.Future[bool] = loop.create_future()

            def wake(readable: bool, woken: asyncio.Future[bool] = woken) -> None:
                if not woken.done():
                    woken.set_result(readable)

            loop.add_reader(fd, wake, True)
            timer = loop.call_later(remaining, wake, False)
            try:
                readable = await woken
            finally:
                loop.remove_reader(fd)
                timer.cancel()
            if readable and not self._replies.took(os.read(fd, 1 << 16)):
                raise await asyncio.to_thread(self.exited, request_id)
        return line

    def _overdue(self, request_id: int) -> StdioProtocolError:
        return StdioProtocolError(
            f"no reply within {self.timeout:.0f} s to request {request_id}; "
            f"the child's stderr ends:\n{self.stderr_tail()}",
            expected_id=request_id,
        )

    def exited(self, request_id: int) -> StdioProtocolError:
        """The error for a child gone while the request ``request_id`` was in flight, with
        the end of its stderr: wait for it to exit, which is when all it had to say of
        why is in its stderr file."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=self.timeout)
        return StdioProtocolError(
            f"the child {shlex.join(self.argv)} exited (status {self.process.returncode}) "
            f"before answering; its stderr ends:\n{self.stderr_tail()}",
            expected_id=request_id,
        )

    def end(self) -> None:
        """Close stdin and wait for the child to exit; kill it if it does not."""
        end_process(self.process, self.timeout)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._stderr.close()


_LOOP_WRITE_LIMIT: Final = 16 << 10
"""The longest request line the event loop writes itself: well inside a pipe's buffer,
which the child has emptied by answering the request before it."""

_Key = tuple[tuple[str, ...], str | None]
_IDLE_LIMIT: Final = 8
_CLOSED_LIMIT: Final = 2
"""Closed children that take no ``hello`` kept per command, for calls after close."""


class _Pool:
    """Children ready for a ``hello``: one started ahead per command line, and those
    that declared ``reusable`` and whose handle was closed.

    A handle is a process, and the kit opens hundreds of handles (every example
    of a state machine reopens its store). Starting the next child while the
    current one works hides part of a runtime's start-up; a child that may serve
    another handle after ``close`` saves all of it. Neither holds a store while it
    waits: a spare has been told nothing, a closed child has closed its store.

    A closed child also answers calls on the handle it closed, for as long as it
    is here: the handle takes it back (`reclaim`) for each such call, then gives
    it back (`park`). A child that is not reusable is kept for that alone, the last
    `_CLOSED_LIMIT` per command.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: dict[_Key, _Child] = {}
        self._idle: dict[_Key, list[_Child]] = {}
        self._closed: dict[_Key, list[_Child]] = {}
        self.starts_ahead = True
        """Whether a child is started ahead for the next handle (`without_spares`)."""
        atexit.register(self.end_all)

    def take(self, argv: list[str], cwd: str | None, timeout: float) -> _Child:
        """A child for a new handle: an idle reusable one, else the spare (starting the
        next spare), else a new one."""
        key = (tuple(argv), cwd)
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                reused = idle.pop()
                if reused.process.poll() is None:
                    reused.timeout = timeout
                    reused.closed_for = None  # it serves a new handle now
                    return reused
            spare = self._spares.pop(key, None)
        if spare is not None and spare.process.poll() is None:
            child = spare
            child.timeout = timeout
        else:
            child = _Child(argv, cwd, timeout)
        if not self.starts_ahead:
            return child
        with contextlib.suppress(StdioProtocolError):
            replacement = _Child(argv, cwd, timeout)
            with self._lock:
                previous = self._spares.pop(key, None)
                self._spares[key] = replacement
            if previous is not None:
                previous.end()
        return child

    def park(self, child: _Child, cwd: str | None, reusable: bool, closed_for: object) -> None:
        """Keep ``child``, which closed the handle whose token is ``closed_for``: a
        reusable one for the next handle (or end it when enough are idle), another
        only while it is among the last `_CLOSED_LIMIT` closed, to answer calls on
        that closed handle."""
        key = (tuple(child.argv), cwd)
        evicted: list[_Child] = []
        with self._lock:
            child.closed_for = closed_for
            if reusable:
                idle = self._idle.setdefault(key, [])
                if len(idle) < _IDLE_LIMIT:
                    idle.append(child)
                    return
                evicted.append(child)
            else:
                closed = self._closed.setdefault(key, [])
                closed.append(child)
                while len(closed) > _CLOSED_LIMIT:
                    evicted.append(closed.pop(0))
        for old in evicted:
            old.end()

    def reclaim(self, child: _Child, cwd: str | None, closed_for: object) -> bool:
        """Take ``child`` back from the pool for a call on the closed handle whose token
        is ``closed_for``; False when it has served another handle since, or has been
        ended."""
        key = (tuple(child.argv), cwd)
        with self._lock:
            if child.closed_for is not closed_for:
                return False
            for kept in (self._idle.get(key, []), self._closed.get(key, [])):
                if child in kept:
                    kept.remove(child)
                    return child.process.poll() is None
        return False

    def end_all(self) -> None:
        with self._lock:
            waiting = list(self._spares.values()) + [
                c for kept in (self._idle, self._closed) for cs in kept.values() for c in cs
            ]
            self._spares, self._idle, self._closed = {}, {}, {}
        for child in waiting:
            child.end()


_pool = _Pool()


def without_spares() -> None:
    """Start no child ahead for the next handle in this process: for a process that
    opens one handle in its life (the kit's worker processes), where the spare would
    be started, never used, and killed with it."""
    _pool.starts_ahead = False


class StdioCheckpointer:
    """One handle served by one child process; see the module docstring.

    Implements `Checkpointer`, `GenerationalCheckpointer`, `MaintenanceLockable`
    and `FaultInjectable`; which of them the child really offers is what it
    declared in its ``hello`` (the others answer `UnsupportedOperationError`).
    Open it with `StdioCheckpointer.start` or the `make` factory.
    """

    def __init__(
        self,
        child: _Child,
        hello: HelloResult,
        validator: MessageValidator | None,
        launch: _Launch | None = None,
    ):
        self._child = child
        self._launch = launch
        self._hello = hello
        self._validator = validator
        self._lock = threading.Lock()
        self._conversation: Conversation[Reply] = Conversation(last_id=1)
        """The wire's ids and reply matching; no interim replies but the protocol's."""
        self._closed = False
        self._hook: FaultHook | None = None
        self._reporting = False
        self._capabilities = frozenset(Capability(c) for c in hello.capabilities)
        self._token = object()
        """What the pool knows this handle by: a child parked after closing it answers
        this handle's calls after close, and no other handle's."""

    @classmethod
    def start(
        cls,
        command: str | Sequence[str],
        path: Path,
        options: dict[str, str] | None = None,
        *,
        validate: bool = False,
        reply_timeout: float = 60.0,
        cwd: str | None = None,
    ) -> StdioCheckpointer:
        """Start ``command`` (a shell-style string or an argv), say ``hello`` for the
        store at ``path`` and return the handle. Raises `StdioProtocolError` when the
        child cannot be started, exits, or answers ``hello`` wrongly; a typed error
        it answers with (e.g. `SchemaVersionError`) is raised as such."""
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise StdioProtocolError("the process command is empty")
        launch = _Launch(argv, cwd, reply_timeout, validate, dict(options or {}), str(path))
        child = _pool.take(argv, cwd, reply_timeout)
        handle = cls(child, HelloResult(PROTOCOL_VERSION, []), launch.validator(), launch)
        try:
            raw = handle._exchange(Hello(0, PROTOCOL_VERSION, str(path), launch.options), "hello")
            hello = _decode_result(raw, HelloResult, "hello")
            _check_hello(hello)
        except BaseException:
            child.process.kill()
            child.end()
            raise
        if hello.store_hooks:
            handle = HookedStdioCheckpointer(child, hello, handle._validator, launch)
        handle._hello = hello
        handle._capabilities = frozenset(Capability(c) for c in hello.capabilities)
        return handle

    # -- the conversation --------------------------------------------------------

    def _exchange(self, request: Request, op: str) -> msgspec.Raw:
        """Send ``request`` and return its result; ``events`` chunks of a read are
        returned through `_read_chunks`. Holds the handle's lock throughout."""
        with self._lock:
            return self._exchange_locked(request, op, None)

    def _exchange_locked(
        self, request: Request, op: str, chunks: list[StoredEvent] | None
    ) -> msgspec.Raw:
        self._child.write(self._encode(request), request.id)
        return self._replies_locked(request.id, op, chunks)

    def _encode(self, request: Request) -> bytes:
        """The line of ``request``, now the request in flight."""
        line = self._unsent_line(request)
        self._conversation.begin(request)
        return line

    def _unsent_line(self, request: Request) -> bytes:
        """The line of ``request``, checked (`--validate-protocol`), not yet in flight."""
        line = self._conversation.encode(request)
        if self._validator is not None:
            self._validator.check_request(line)
        return line

    def _replies_locked(
        self, request_id: int, op: str, chunks: list[StoredEvent] | None
    ) -> msgspec.Raw:
        """Read the replies to the request ``request_id``, written, up to its result."""
        while True:
            raw = self._child.read_line(request_id)
            reply = self._judge_reply(raw, op, chunks, request_id)
            if reply is None:
                continue
            if reply.fault is not None:
                self._on_fault(reply.fault, request_id, raw)
                continue
            return reply.result

    def _finish_and_unlock(
        self, request_id: int, op: str, chunks: list[StoredEvent] | None
    ) -> None:
        """Read what is left of the replies to a request whose caller stopped waiting,
        then free the handle: its child never answers a request the handle forgot."""
        try:
            with contextlib.suppress(Exception):
                self._replies_locked(request_id, op, chunks)
        finally:
            self._lock.release()

    async def _exchange_on_loop(
        self, request: Request, op: str, chunks: list[StoredEvent] | None
    ) -> msgspec.Raw:
        """`_exchange_locked` with the event loop waiting for the replies; the caller
        holds the handle's lock. A fault point's hook may block, so it runs in a thread."""
        line = self._encode(request)
        if len(line) < _LOOP_WRITE_LIMIT:
            self._child.write(line, request.id)
        else:  # a pipe takes so much only as fast as the child reads it
            await asyncio.to_thread(self._child.write, line, request.id)
        while True:
            raw = await self._child.next_line(request.id)
            reply = self._judge_reply(raw, op, chunks, request.id)
            if reply is None:
                continue
            if reply.fault is not None:
                await asyncio.to_thread(self._on_fault, reply.fault, request.id, raw)
                continue
            return reply.result

    def _judge_reply(
        self, raw: bytes, op: str, chunks: list[StoredEvent] | None, request_id: int
    ) -> Reply | None:
        """One reply line to the request ``request_id``: its error raised, a read's
        events kept in ``chunks`` (None: more lines follow), else the reply, a fault
        point reported or the result."""
        if self._validator is not None:
            self._validator.check_reply(raw, op)
        reply = self._conversation.decode(raw)
        if reply.error is not None:
            raise to_exception(reply.error, raw)
        if reply.fault is None and reply.events is not None:
            if chunks is None:
                raise StdioProtocolError(
                    f"events in the reply to {op}: {quote(raw)}", line=raw, expected_id=request_id
                )
            chunks.extend(reply.events)
            return None
        return reply

    def _on_fault(self, point: str, request_id: int, raw: bytes) -> None:
        if not self._reporting:
            raise StdioProtocolError(
                f"a fault point reported while not enabled: {quote(raw)}",
                line=raw,
                expected_id=request_id,
            )
        if point not in self._hello.fault_points:
            raise StdioProtocolError(
                f"undeclared fault point {point!r}: {quote(raw)}", line=raw, expected_id=request_id
            )
        hook = self._hook
        if hook is not None:
            hook(point)  # may block (the kit holds the operation here) or never return
        resume = self._conversation.encode(Resume(request_id))
        if self._validator is not None:
            self._validator.check_request(resume)
        self._child.write(resume, request_id)

    async def _call(self, op: str, build: Callable[[int], Request], kind: type[_T]) -> _T:
        return _decode_result(await self._request(op, build, None), kind, op)

    async def _call_none(self, op: str, build: Callable[[int], Request]) -> None:
        _null_result(await self._request(op, build, None), op)

    async def _request(
        self, op: str, build: Callable[[int], Request], chunks: list[StoredEvent] | None
    ) -> msgspec.Raw:
        """`_send` the request ``build`` makes. An open handle whose lock is free talks to
        its child from the event loop; otherwise (the handle busy or closed) a thread
        waits its turn. A caller that stops waiting (cancelled) leaves its replies to
        a thread, which reads them to the end before the handle takes another call."""
        if not self._lock.acquire(blocking=False):
            return await asyncio.to_thread(self._send, op, build, chunks)
        if self._closed:
            self._lock.release()
            return await asyncio.to_thread(self._send, op, build, chunks)
        request = build(self._take_id())
        try:
            result = await self._exchange_on_loop(request, op, chunks)
        except asyncio.CancelledError:
            finish = (request.id, op, chunks)
            threading.Thread(target=self._finish_and_unlock, args=finish, daemon=True).start()
            raise
        except BaseException:
            self._lock.release()
            raise
        self._lock.release()
        return result

    def _take_id(self) -> int:
        return self._conversation.next_id()

    def _send(
        self, op: str, build: Callable[[int], Request], chunks: list[StoredEvent] | None
    ) -> msgspec.Raw:
        """Send the request ``build`` makes and return its result: to this handle's
        child while the handle is open, else to a child in the closed state."""
        with self._lock:
            if not self._closed:
                return self._exchange_locked(build(self._take_id()), op, chunks)
            child = self._closed_child()
            return self._in_closed_state(child, lambda: build(self._take_id()), op, chunks)

    def _in_closed_state(
        self,
        child: _Child,
        build: Callable[[], Request],
        op: str,
        chunks: list[StoredEvent] | None,
    ) -> msgspec.Raw:
        """One request to ``child``, a closed handle's child taken from the pool, which
        goes back to the pool after its answer; a child that broke the protocol is
        out of step with the kit, and is killed instead."""
        try:
            raw = self._exchange_locked(build(), op, chunks)
        except StdioProtocolError:
            child.process.kill()
            child.end()
            raise
        except BaseException:
            self._park(child)
            raise
        self._park(child)
        return raw

    def _closed_child(self) -> _Child:
        """A child in the state this closed handle left its own in, for a call after
        close: that child, if the pool still holds it, else one told ``hello`` and
        ``close`` for the same store (the backend answers for its handles, not the kit).
        Called holding the handle's lock."""
        launch = self._launch
        if launch is None:  # made by hand, not by `start`: no way to reach the backend
            raise CheckpointerClosedError("call after close")
        if _pool.reclaim(self._child, launch.cwd, self._token):
            return self._child
        self._child = _pool.take(launch.argv, launch.cwd, launch.timeout)
        try:
            hello = Hello(self._take_id(), PROTOCOL_VERSION, launch.path, launch.options)
            _decode_result(self._exchange_locked(hello, "hello", None), HelloResult, "hello")
            _null_result(self._exchange_locked(Close(self._take_id()), "close", None), "close")
        except BaseException:
            self._child.process.kill()
            self._child.end()
            raise
        return self._child

    def _park(self, child: _Child) -> None:
        """Give ``child``, closed, back to the pool (ended if the handle was made by hand)."""
        if self._launch is None:
            child.end()
        else:
            _pool.park(child, self._launch.cwd, self._hello.reusable, self._token)

    def _refuse_types(self, op: str, checks: Callable[[], _T]) -> _T:
        """Run the type-level argument checks of ``op`` here, in the contract's order:
        a closed handle, then an undeclared capability, then the argument. Only a call
        that cannot be sent is refused here; a closed handle's other calls go to the
        backend, whose answer it is."""
        try:
            return checks()
        except InvalidArgumentError:
            if self._closed:
                raise CheckpointerClosedError(op) from None
            needed = _NEEDS.get(op)
            if needed is not None and needed not in self._capabilities:
                raise UnsupportedOperationError(op, needed.value) from None
            raise

    # -- the Checkpointer protocol -----------------------------------------------

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the child declared in its ``hello``."""
        return self._capabilities

    @property
    def name(self) -> str | None:
        """The name the child gave in its ``hello``, if any."""
        return self._hello.name

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """See `Checkpointer.append`."""

        def checks() -> tuple[SessionEvent, ...]:
            _wire_session_id(session_id)
            batch = check_events(events)
            _wire_seq("expected_head", expected_head, optional=True)
            _wire_seq("expected_generation", expected_generation, optional=True)
            for event in batch:
                encode_event(event)  # EVENT-002: what JSON cannot carry exactly
            return batch

        batch = list(self._refuse_types("append", checks))
        return await self._call(
            "append",
            lambda id: Append(id, session_id, batch, expected_head, expected_generation),
            int,
        )

    async def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        """See `Checkpointer.read`. The child sends the whole snapshot before the first
        event is yielded, so other calls on this handle may run while it is iterated."""

        def checks() -> None:
            _wire_session_id(session_id)
            _wire_seq("since_seq", since_seq)

        self._refuse_types("read", checks)
        chunks: list[StoredEvent] = []
        raw = await self._request("read", lambda id: Read(id, session_id, since_seq), chunks)
        _check_read_count(raw, chunks)
        for stored in chunks:
            yield stored

    async def read_logs(self, session_ids: Sequence[str]) -> list[list[StoredEvent] | Exception]:
        """Every event of each of ``session_ids`` as ``read(session_id)`` yields it, or the
        exception that read raised: the reads made in turn, nothing else in between.

        A child that declared ``pipelined`` in its hello gets the read requests together,
        a pipe's worth in one write, and answers them in order while the kit reads the
        answers: one wake-up of each side for the lot instead of two per read, which is
        most of a read's cost on a busy machine. Otherwise (and while the handle is
        busy, closed or reporting fault points) the reads are made one after another.
        A breach of the protocol (`StdioProtocolError`) answers the read it broke and
        every read after it, which are not made: the conversation is out of step."""
        if not self._hello.pipelined or self._reporting or not self._lock.acquire(blocking=False):
            return await _reads_one_by_one(self, session_ids)
        if self._closed:
            self._lock.release()
            return await _reads_one_by_one(self, session_ids)
        outcomes: dict[int, list[StoredEvent] | Exception] = {}
        unanswered: list[Read] = []
        try:
            requests: list[tuple[int, Read, bytes]] = []
            for n, session_id in enumerate(session_ids):
                try:
                    self._refuse_types("read", partial(_wire_session_id, session_id))
                except InvalidArgumentError as exc:
                    outcomes[n] = exc
                    continue
                request = Read(self._take_id(), session_id, 0)
                requests.append((n, request, self._unsent_line(request)))
            for batch in _pipe_loads(requests):
                unanswered = [request for _, request, _ in batch]
                self._child.write(b"\n".join(line for _, _, line in batch), unanswered[0].id)
                for n, request, _ in batch:
                    outcomes[n] = await self._pipelined_read(request)
                    unanswered.pop(0)
        except asyncio.CancelledError:
            threading.Thread(target=self._drain_and_unlock, args=(unanswered,), daemon=True).start()
            raise
        except StdioProtocolError as breach:
            # A child that stopped answering costs one timeout, not one per read.
            self._lock.release()
            for n in range(len(session_ids)):
                outcomes.setdefault(n, breach)
        except BaseException:
            self._lock.release()
            raise
        else:
            self._lock.release()
        return [outcomes[n] for n in range(len(session_ids))]

    async def _pipelined_read(self, request: Read) -> list[StoredEvent] | Exception:
        """The answer to ``request``, sent already among others and now in flight: its
        events, or the typed error the child answered. A breach of the protocol (a
        fault point reported, which this handle never enabled, among them) is raised."""
        self._conversation.begin(request)
        chunks: list[StoredEvent] = []
        try:
            while True:
                raw = await self._child.next_line(request.id)
                reply = self._judge_reply(raw, "read", chunks, request.id)
                if reply is not None:
                    break
        except StdioProtocolError:
            raise
        except Exception as exc:  # the child's typed error: this read's answer
            return exc
        if reply.fault is not None:
            self._on_fault(reply.fault, request.id, raw)  # raises: not reporting
        _check_read_count(reply.result, chunks, request.id)
        return chunks

    def _drain_and_unlock(self, requests: Sequence[Read]) -> None:
        """Read the answers to pipelined ``requests`` whose caller stopped waiting, then
        free the handle, as `_finish_and_unlock` does for one request."""
        try:
            for request in requests:
                self._conversation.begin(request)
                try:
                    self._replies_locked(request.id, "read", [])
                except StdioProtocolError:
                    return
                except Exception:  # a typed answer nobody waits for
                    continue
        finally:
            self._lock.release()

    async def head(self, session_id: str) -> int:
        """See `Checkpointer.head`."""
        self._refuse_types("head", lambda: _wire_session_id(session_id))
        return await self._call("head", lambda id: Head(id, session_id), int)

    async def list_sessions(self) -> list[SessionInfo]:
        """See `Checkpointer.list_sessions`."""
        entries = await self._call("list_sessions", ListSessions, list[SessionEntry])
        return [SessionInfo(e.id, e.mtime) for e in entries]

    async def delete(self, session_id: str) -> None:
        """See `Checkpointer.delete`."""
        self._refuse_types("delete", lambda: _wire_session_id(session_id))
        await self._call_none("delete", lambda id: Delete(id, session_id))

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """See `Checkpointer.truncate`."""

        def checks() -> None:
            _wire_session_id(session_id)
            _wire_seq("to_seq", to_seq)
            _wire_seq("expected_head", expected_head, optional=True)
            _wire_seq("expected_generation", expected_generation, optional=True)

        self._refuse_types("truncate", checks)
        return await self._call(
            "truncate",
            lambda id: Truncate(id, session_id, to_seq, expected_head, expected_generation),
            int,
        )

    async def generation(self, session_id: str) -> int:
        """See `GenerationalCheckpointer.generation`."""
        self._refuse_types("generation", lambda: _wire_session_id(session_id))
        return await self._call("generation", lambda id: Generation(id, session_id), int)

    async def acquire_maintenance(self, session_id: str) -> None:
        """See `MaintenanceLockable.acquire_maintenance`."""
        self._refuse_types("acquire_maintenance", lambda: _wire_session_id(session_id))
        await self._call_none("acquire_maintenance", lambda id: AcquireMaintenance(id, session_id))

    async def release_maintenance(self, session_id: str) -> None:
        """See `MaintenanceLockable.release_maintenance`."""
        self._refuse_types("release_maintenance", lambda: _wire_session_id(session_id))
        await self._call_none("release_maintenance", lambda id: ReleaseMaintenance(id, session_id))

    async def check_integrity(self) -> IntegrityReport:
        """See `Checkpointer.check_integrity`."""
        found = await self._call("check_integrity", CheckIntegrity, IntegrityResult)
        return IntegrityReport(found.ok, found.detail, tuple(found.problems), tuple(found.repairs))

    async def close(self) -> None:
        """Send ``close`` and give the child to the pool, where it answers calls on this
        closed handle until it serves another handle (if it declared ``reusable``) or
        is ended. Closing again sends ``close`` again, to that child while the pool
        still holds it; once it is gone there is nothing left to close, and nothing is
        sent."""
        if self._closed:
            await asyncio.to_thread(self._close_again)
            return

        def finish() -> msgspec.Raw:
            parked = False
            with self._lock:
                self._closed = True
                try:
                    raw = self._exchange_locked(Close(self._take_id()), "close", None)
                    if bytes(raw) == b"null" and self._launch is not None:
                        self._park(self._child)
                        parked = True
                    return raw
                finally:
                    if not parked:
                        self._child.end()

        _null_result(await asyncio.to_thread(finish), "close")

    def _close_again(self) -> None:
        with self._lock:
            launch = self._launch
            if launch is None or not _pool.reclaim(self._child, launch.cwd, self._token):
                return
            raw = self._in_closed_state(self._child, lambda: Close(self._take_id()), "close", None)
        _null_result(raw, "close")

    # -- RefusesBeforeTheBackend -------------------------------------------------------

    def refused_before_the_backend(self) -> dict[str, str]:
        """The rules whose every case the kit checks is a value JSON cannot carry, so
        this client refuses it and the child is never asked, and those whose only
        evidence is a request the child answers itself (`EMULATED_RULES`)."""
        rules = dict(KIT_SIDE_RULES)
        emulated = self._hello.emulated
        for op, rule_ids in EMULATED_RULES.items():
            if op in emulated:
                rules.update(dict.fromkeys(rule_ids, emulated[op]))
        undeclared = [op for op, needed in _NEEDS.items() if needed not in self._capabilities]
        if undeclared and all(op in emulated for op in undeclared):
            rules["CAP-001"] = emulated[undeclared[0]]
        return rules

    # -- ScratchFiles ---------------------------------------------------------------

    def scratch_files(self) -> dict[str, str]:
        """The store files the child declared it maps writable and rebuilds on open."""
        return dict(self._hello.scratch_files)

    # -- FaultInjectable -----------------------------------------------------------

    @property
    def fault_points(self) -> tuple[str, ...]:
        """The fault points the child declared (empty if it reports none)."""
        return tuple(self._hello.fault_points)

    def set_fault_hook(self, hook: FaultHook | None) -> None:
        """Install (or remove) the hook; the child is told to report its points while one is set."""
        self._hook = hook
        wanted = hook is not None and bool(self._hello.fault_points)
        if wanted == self._reporting or self._closed:
            return
        request = FaultReports(self._take_id(), wanted)
        self._reporting = wanted
        raw = self._exchange(request, "fault_reports")
        if bytes(raw) != b"null":
            raise StdioProtocolError(f"the result of fault_reports must be null: {quote(raw)}")


class _Launch(msgspec.Struct, frozen=True):
    """How a handle's process was started, to start another for a store hook."""

    argv: list[str]
    cwd: str | None
    timeout: float
    validate: bool
    options: dict[str, str]
    path: str
    """The store the handle was opened on (a call after close says ``hello`` to it again)."""

    def validator(self) -> MessageValidator | None:
        return MessageValidator() if self.validate else None


class HookedStdioCheckpointer(StdioCheckpointer):
    """A `StdioCheckpointer` whose child declared ``store_hooks``: it implements
    `StoreHooks`, each hook a process of its own whose only request is the hook's.

    The kit calls the hooks on a closed store, after every handle on it is
    closed; a hook's process opens nothing but what it must change.
    """

    def mark_newer_schema(self, path: Path) -> None:
        """See `StoreHooks.mark_newer_schema`."""
        raw = self._run_store_hook(
            lambda id, options: MarkNewerSchema(id, PROTOCOL_VERSION, str(path), options),
            "mark_newer_schema",
        )
        if bytes(raw) != b"null":
            raise StdioProtocolError(f"the result of mark_newer_schema must be null: {quote(raw)}")

    def damage_store(self, path: Path) -> str:
        """See `StoreHooks.damage_store`."""
        raw = self._run_store_hook(
            lambda id, options: DamageStore(id, PROTOCOL_VERSION, str(path), options),
            "damage_store",
        )
        return _decode_result(raw, str, "damage_store")

    def _run_store_hook(
        self, build: Callable[[int, dict[str, str]], Request], op: str
    ) -> msgspec.Raw:
        launch = self._launch
        assert launch is not None  # set by start, the only way to make this class
        # A process of its own, never a reused one: the hook is its only request.
        child = _Child(launch.argv, launch.cwd, launch.timeout)
        runner = StdioCheckpointer(child, self._hello, launch.validator(), launch)
        try:
            return runner._exchange(build(0, launch.options), op)
        finally:
            child.end()


def _check_read_count(
    raw: msgspec.Raw, chunks: list[StoredEvent], request_id: int | None = None
) -> None:
    """Refuse a read whose result counts other than the events its replies carried."""
    result = _decode_result(raw, ReadResult, "read")
    if result.count != len(chunks):
        raise StdioProtocolError(
            f"read's result says {result.count} events; its events replies carried {len(chunks)}",
            expected_id=request_id,
        )


async def _reads_one_by_one(
    handle: StdioCheckpointer, session_ids: Sequence[str]
) -> list[list[StoredEvent] | Exception]:
    """`StdioCheckpointer.read_logs` one read after another."""
    outcomes: list[list[StoredEvent] | Exception] = []
    for session_id in session_ids:
        try:
            outcomes.append([stored async for stored in handle.read(session_id)])
        except StdioProtocolError as breach:
            return outcomes + [breach] * (len(session_ids) - len(outcomes))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _pipe_loads(
    requests: Sequence[tuple[int, Read, bytes]],
) -> list[list[tuple[int, Read, bytes]]]:
    """``requests`` in runs whose lines the event loop writes at once (`_LOOP_WRITE_LIMIT`):
    the child's answers to one run are read before the next is written, so neither side
    ever waits on a full pipe."""
    runs: list[list[tuple[int, Read, bytes]]] = []
    size = _LOOP_WRITE_LIMIT
    for request in requests:
        if size + len(request[2]) + 1 >= _LOOP_WRITE_LIMIT:
            runs.append([])
            size = 0
        runs[-1].append(request)
        size += len(request[2]) + 1
    return runs


def _wire_session_id(session_id: object) -> None:
    """Refuse here what JSON cannot carry as a session id (not a str, a lone surrogate);
    every other refusal (empty, too long, NUL) is the child's."""
    if not isinstance(session_id, str):
        check_session_id(session_id)
        return
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        check_session_id(session_id)


def _wire_seq(name: str, value: object, *, optional: bool = False) -> None:
    """Refuse here a seq argument JSON cannot carry as an integer (a float, a bool,
    anything else; None unless ``optional``); its value, negative or huge, is the
    child's to refuse (ARG-002)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        check_seq(name, value)  # the spec's own refusal of a wrong type


def _null_result(raw: msgspec.Raw, op: str) -> None:
    if bytes(raw) != b"null":
        raise StdioProtocolError(f"the result of {op} must be null: {quote(raw)}")


def _decode_result(raw: msgspec.Raw, kind: type[_T], op: str) -> _T:
    try:
        return msgspec.json.decode(bytes(raw), type=kind)
    except msgspec.DecodeError as exc:
        raise StdioProtocolError(f"malformed result of {op}: {exc}: {quote(raw)}") from None


def _check_hello(hello: HelloResult) -> None:
    if hello.protocol != PROTOCOL_VERSION:
        raise StdioProtocolError(
            f"the child speaks protocol version {hello.protocol}; this kit speaks "
            f"{PROTOCOL_VERSION}"
        )
    unknown = [c for c in hello.capabilities if c not in CAPABILITIES]
    if "codec" in unknown:
        raise StdioProtocolError(
            "the child declares 'codec', which cannot be offered over stdio: the codec is "
            "a Python object the kit cannot hand to another process"
        )
    if unknown:
        raise StdioProtocolError(
            f"the child declares unknown capabilities {unknown}; known: {', '.join(CAPABILITIES)}"
        )


async def make(ctx: BackendContext) -> StdioCheckpointer:
    """The factory behind ``checkpointspec run --process COMMAND``: starts
    ``ctx.options["process"]`` for the store at ``ctx.path``.

    ``validate_protocol=1`` checks every message against the JSON Schema;
    ``reply_timeout`` (seconds, default 60) bounds the wait for any reply. Every
    other option is passed on to the child in ``hello``.
    """
    command = ctx.options.get(PROCESS_OPTION)
    if not command:
        raise InvalidArgumentError(
            "options", f"the stdio backend needs the {PROCESS_OPTION!r} option: the command"
        )
    try:
        timeout = float(ctx.options.get(TIMEOUT_OPTION, "60"))
    except ValueError:
        raise InvalidArgumentError(
            "options", f"{TIMEOUT_OPTION} must be a number of seconds"
        ) from None
    forwarded = {k: v for k, v in ctx.options.items() if k not in _OWN_OPTIONS}
    validate = ctx.options.get(VALIDATE_OPTION) == "1"
    return await asyncio.to_thread(
        lambda: StdioCheckpointer.start(
            command, ctx.path, forwarded, validate=validate, reply_timeout=timeout
        )
    )
