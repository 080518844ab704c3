"""The backend's end of the stdio protocol, in Python: serve any checkpointer over stdin/stdout.

``python -m checkpointspec.backends.stdio.serve BACKEND`` (a built-in name such as
``sqlite``, or ``module:function``, named and opened by
`checkpointspec.backends.registry`) answers the protocol for one handle of that
backend at a time, declaring ``reusable`` (``--one-handle``: one handle, then
exit). It is how the protocol itself is checked: the reference backends pass
the whole kit through `StdioCheckpointer` and this server, and a bug planted in
a Python backend is found with the same rule ids directly and through the pipe.
It is also a model for authors in other languages: requests are answered one at
a time, in order, and a read is sent in chunks before its result.

`Server` is the one server loop of the protocol, with its one pause at a fault
point. The kit's own worker processes are this server plus requests of the
kit's own (`checkpointspec.conformance.engines.processes.worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Final, cast

import msgspec

from ...spec import (
    BackendContext,
    BackendFactory,
    Capability,
    CheckpointConflictError,
    Checkpointer,
    CheckpointerClosedError,
    CheckpointError,
    CorruptStoreError,
    FaultInjectable,
    GenerationalCheckpointer,
    InvalidArgumentError,
    MaintenanceLockable,
    SchemaVersionError,
    ScratchFiles,
    SessionLockedError,
    StoreBusyError,
    StoreHooks,
    UnsupportedOperationError,
)
from ..registry import BackendLoadError, BackendTarget, open_backend
from .messages import (
    PROTOCOL_VERSION,
    AcquireMaintenance,
    Append,
    CheckIntegrity,
    Close,
    DamageStore,
    Delete,
    ErrorBody,
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
    Request,
    Resume,
    SessionEntry,
    Truncate,
)

__all__ = ["Server", "error_body", "reply_stream", "serve"]

CHUNK: Final = 1000
"""Events per ``events`` reply of a read."""

_encoder = msgspec.json.Encoder()


def error_body(error: Exception) -> ErrorBody:
    """The protocol's form of ``error``: the spec's attributes for a contract error,
    the type name and text for anything else."""
    message = str(error)
    match error:
        case InvalidArgumentError():
            code = error.reason_code.value if error.reason_code is not None else None
            return ErrorBody(
                type(error).__name__,
                message,
                argument=error.argument,
                reason=error.reason,
                reason_code=code,
                rule_id=error.rule_id,
            )
        case CheckpointConflictError():
            return ErrorBody(
                "CheckpointConflictError",
                message,
                session_id=error.session_id,
                expected=error.expected,
                actual=error.actual,
                kind=error.kind,
            )
        case UnsupportedOperationError():
            return ErrorBody(
                "UnsupportedOperationError",
                message,
                operation=error.operation,
                capability=error.capability,
            )
        case CheckpointerClosedError():
            return ErrorBody("CheckpointerClosedError", message, operation=error.operation)
        case CorruptStoreError():
            return ErrorBody(
                "CorruptStoreError",
                message,
                session_id=error.session_id,
                location=error.location,
                detail=error.detail,
            )
        case SchemaVersionError():
            return ErrorBody(
                "SchemaVersionError", message, found=error.found, supported=error.supported
            )
        case StoreBusyError():
            return ErrorBody(
                "StoreBusyError",
                message,
                operation=error.operation,
                waited_seconds=error.waited_seconds,
            )
        case SessionLockedError():
            return ErrorBody(
                "SessionLockedError",
                message,
                session_id=error.session_id,
                operation=error.operation,
            )
    return ErrorBody(type(error).__name__, message)


def _load(name: str) -> BackendTarget:
    try:
        target = BackendTarget.named(name)
        target.factory()
        return target
    except BackendLoadError as exc:  # one line on stderr: the kit quotes it as the reason
        raise SystemExit(f"serve: {exc}") from exc


class Server:
    """The protocol's answering end: one handle at a time, over a pair of byte streams.

    Requests are read and answered one at a time, in order. The exception is a
    pause at a fault point: `hook`, called on whichever thread the backend works
    on, sends the ``fault`` reply and reads the ``resume`` itself, holding the
    backend exactly where it is. Fault points are reported while the kit has
    enabled `FaultReports` (every point) or, for one request, while `pause` is
    set (that point, on that arrival only).

    The kit's worker processes subclass it for requests of their own
    (`checkpointspec.conformance.engines.processes.worker`); a subclass may
    extend `decoder` with its requests and override `open`, `answer`,
    `answered`, `reply_error` and `finish`.
    """

    decoder: ClassVar[msgspec.json.Decoder[Any]] = msgspec.json.Decoder(Request)
    """Decodes one request line: a subclass adds its own requests to the union."""

    def __init__(
        self,
        target: BackendTarget,
        requests: BinaryIO,
        replies: BinaryIO,
        reusable: bool = True,
    ) -> None:
        self.target = target
        """The backend served; its options are added to each ``hello``'s."""
        self.factory: BackendFactory = target.factory()
        self.reusable = reusable
        self.requests = requests
        self.replies = replies
        self.cp: Checkpointer | None = None
        """The open handle, from the last ``hello``; None before it and after ``close``."""
        self.closed: Checkpointer | None = None
        """The handle the last ``close`` closed: requests after ``close`` go to it, so the
        backend's own handle answers them (CLOSE-001), until the next ``hello``."""
        self.current = 0
        """The id of the request being answered (the one a ``fault`` reply names)."""
        self.reporting = False
        """`FaultReports` is enabled: every fault point is reported."""
        self.pause: tuple[str, int] | None = None
        """For the next request only (set by a subclass's request): the point to
        report, and on which arrival there."""
        self.arrivals = 0
        self._sending = threading.Lock()  # the fault hook may send from the backend's thread

    def send(self, **reply: object) -> None:
        """Write one reply line (``id`` and one more field)."""
        with self._sending:
            self.replies.write(_encoder.encode(reply) + b"\n")
            self.replies.flush()

    def hook(self, point: str) -> None:
        """The backend's fault hook: report ``point`` if asked to, and wait for ``resume``."""
        if self.pause is not None:
            wanted, arrival = self.pause
            if point != wanted:
                return
            self.arrivals += 1
            if self.arrivals < arrival:
                return
            self.pause = None
        elif not self.reporting:
            return
        # The main loop is not reading while the request is in flight: wait for the
        # kit's resume here, on the backend's thread, holding what it holds.
        self.send(id=self.current, fault=point)
        line = self.requests.readline()
        if not line or not isinstance(self.decoder.decode(line), Resume):
            os._exit(3)  # the kit is gone, or broke the protocol: stop as if killed

    async def open(self, ctx: BackendContext) -> Checkpointer:
        """A new handle from the factory (a subclass may check or wrap it)."""
        return await open_backend(self.factory, ctx)

    async def hello(self, request: Hello) -> HelloResult:
        if self.cp is not None:  # a hello replaces the open handle
            cp, self.cp = self.cp, None
            await cp.close()
        self.closed = None
        self.reporting = False  # a new handle starts with fault reports off
        self.cp = await self.open(self.target.context(Path(request.path), options=request.options))
        if isinstance(self.cp, FaultInjectable):
            self.cp.set_fault_hook(self.hook)
        capabilities = sorted(c.value for c in self.cp.capabilities if c != Capability.CODEC)
        points = list(self.cp.fault_points) if isinstance(self.cp, FaultInjectable) else []
        hooks = isinstance(self.cp, StoreHooks)
        scratch = self.cp.scratch_files() if isinstance(self.cp, ScratchFiles) else {}
        return HelloResult(
            PROTOCOL_VERSION,
            capabilities,
            points,
            hooks,
            reusable=self.reusable,
            name=f"serve {type(self.cp).__name__}",
            scratch_files=dict(scratch),
            # One request at a time, in order; a fault report's resume is read only
            # while the kit enabled reports, when it sends one request at a time.
            pipelined=True,
        )

    async def store_hook(self, request: MarkNewerSchema | DamageStore) -> str | None:
        # Python's StoreHooks are methods of the checkpointer class, called on a closed
        # store: a handle on a scratch store of our own gives us the methods without
        # opening the store the hook must change.
        with tempfile.TemporaryDirectory(prefix="checkpointspec-serve-") as scratch:
            cp = await self.open(self.target.context(Path(scratch), options=request.options))
            await cp.close()
        if not isinstance(cp, StoreHooks):
            raise UnsupportedOperationError(type(request).__name__, "store_hooks")
        if isinstance(request, MarkNewerSchema):
            cp.mark_newer_schema(Path(request.path))
            return None
        return cp.damage_store(Path(request.path))

    def handle(self) -> Checkpointer:
        """The open handle, else the one ``close`` closed (whose answer to a call after
        close is the backend's to give); `RuntimeError` before the first ``hello``."""
        cp = self.cp if self.cp is not None else self.closed
        if cp is None:
            raise RuntimeError("the first request must be hello")
        return cp

    async def answer(self, request: Request) -> object:
        """The result of ``request`` (replies before it, if any, are sent from here)."""
        if isinstance(request, Hello):
            return await self.hello(request)
        if isinstance(request, MarkNewerSchema | DamageStore):
            return await self.store_hook(request)
        if isinstance(request, Close) and self.cp is None and self.closed is None:
            return None  # nothing was opened: nothing to close
        cp = self.handle()
        match request:
            case Append():
                if request.expected_generation is not None:
                    return await cast(GenerationalCheckpointer, cp).append(
                        request.session_id,
                        request.events,
                        request.expected_head,
                        expected_generation=request.expected_generation,
                    )
                return await cp.append(request.session_id, request.events, request.expected_head)
            case Read():
                return await self.read(cp, request)
            case Head():
                return await cp.head(request.session_id)
            case ListSessions():
                return [SessionEntry(s.id, s.mtime) for s in await cp.list_sessions()]
            case Delete():
                await cp.delete(request.session_id)
                return None
            case Truncate():
                if request.expected_generation is not None:
                    return await cast(GenerationalCheckpointer, cp).truncate(
                        request.session_id,
                        request.to_seq,
                        request.expected_head,
                        expected_generation=request.expected_generation,
                    )
                return await cp.truncate(request.session_id, request.to_seq, request.expected_head)
            case Generation():
                if not isinstance(cp, GenerationalCheckpointer):
                    raise UnsupportedOperationError("generation", Capability.GENERATION.value)
                return await cp.generation(request.session_id)
            case AcquireMaintenance() | ReleaseMaintenance():
                if not isinstance(cp, MaintenanceLockable):
                    raise UnsupportedOperationError(
                        type(request).__name__, Capability.MAINTENANCE.value
                    )
                if isinstance(request, AcquireMaintenance):
                    await cp.acquire_maintenance(request.session_id)
                else:
                    await cp.release_maintenance(request.session_id)
                return None
            case CheckIntegrity():
                report = await cp.check_integrity()
                return IntegrityResult(
                    report.ok, report.detail, list(report.problems), list(report.repairs)
                )
            case FaultReports():
                self.reporting = request.enabled
                return None
            case Close():
                # Reusable: the next hello opens a handle afresh; nothing of this one stays
                # but the closed handle itself, which answers until then (a second close
                # included: close is idempotent).
                self.cp, self.closed = None, cp
                await cp.close()
                return None
        raise RuntimeError(f"unexpected request {type(request).__name__}")

    async def read(self, cp: Checkpointer, request: Read) -> ReadResult:
        # Take the whole snapshot before sending any of it: an error of the read
        # comes as its one reply, never after some events.
        events = [stored async for stored in cp.read(request.session_id, request.since_seq)]
        for start in range(0, len(events), CHUNK):
            self.send(id=request.id, events=events[start : start + CHUNK])
        return ReadResult(len(events))

    def answered(self, request: Request) -> None:
        """After ``request``'s answer, or its error: the pause was for it alone."""
        self.pause = None

    def reply_error(self, request: Request, error: Exception) -> None:
        """Send ``error`` as ``request``'s reply (a subclass may re-raise what it will not send)."""
        self.send(id=request.id, error=error_body(error))

    async def finish(self) -> None:
        """At the end of the requests: close the handle left open, if any."""
        if self.cp is not None:
            with contextlib.suppress(CheckpointError):
                await self.cp.close()

    async def run(self) -> None:
        """Answer requests until the request stream ends, then `finish`."""
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, self.requests.readline):
            request = self.decoder.decode(line)
            self.current = request.id
            try:
                result = await self.answer(request)
            except Exception as exc:  # every error goes back to the kit, typed when it can be
                self.reply_error(request, exc)
                continue
            finally:
                self.answered(request)
            self.send(id=request.id, result=result)
        await self.finish()


def reply_stream() -> BinaryIO:
    """This process's stdout as a stream of its own for the replies; whatever else
    writes to stdout (the backend's prints) goes to stderr instead, so it cannot
    garble the replies. `os.dup`'s descriptor is not inherited, so processes the
    backend starts cannot hold the reply pipe open."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return replies


def serve(backend: str, reusable: bool = True) -> None:
    """Serve ``backend`` on this process's stdin and stdout until stdin ends; with
    ``reusable`` (the default) a closed handle's process may serve the next one."""
    server = Server(_load(backend), sys.stdin.buffer, reply_stream(), reusable)
    asyncio.run(server.run())


USAGE: Final = "usage: python -m checkpointspec.backends.stdio.serve [--one-handle] BACKEND"

if __name__ == "__main__":
    arguments = sys.argv[1:]
    one_handle = "--one-handle" in arguments
    rest = [a for a in arguments if a != "--one-handle"]
    if len(rest) != 1:
        raise SystemExit(USAGE)
    serve(rest[0], reusable=not one_handle)
