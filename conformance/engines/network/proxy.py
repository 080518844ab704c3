"""A fault-injecting TCP proxy on the loopback interface, between a backend and its server.

`FaultProxy` listens on 127.0.0.1 at a free port and forwards every connection
it accepts to a target address. What it does to each connection is a `Fault`
the caller draws (from the run's seed): cut it at a byte offset of one direction
(after so many whole chunks, and so many bytes of the next), with a FIN or a
reset, and delay every chunk of both directions. Every connection is tracked from
its accept: `arm` draws a fault for each one already open (a pooled connection a
client opened before the faults began, counted from then on) and for each one
after. Independently of those, `stall` holds every byte in both
directions until `resume`, and `sever` cuts every connection and refuses new
ones, as a host that dropped off the network.

The proxy runs its own event loop on its own thread, so that it keeps
forwarding whatever the caller's loop does (a check awaiting a server that
waits for a standby behind this proxy would otherwise deadlock). Its methods
may be called from any thread. Only loopback addresses are served or reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Final, Literal, TypeVar

import msgspec

from ....spec import ServerAddress

__all__ = ["CLEAN", "Direction", "Fault", "FaultProxy", "Fired"]

Direction = Literal["to_server", "to_client"]

_T = TypeVar("_T")

_CHUNK: Final = 65536
_STARTUP_TIMEOUT: Final = 10.0


class Fault(msgspec.Struct, frozen=True):
    """What the proxy does to one connection.

    With ``cut`` set, that direction carries ``at_chunk`` chunks (one chunk is
    what the peer sent at once: a request, or a response) and then
    ``torn_bytes`` bytes of the next one, and the connection is closed both ways:
    the cut falls at a message boundary, or inside a message with
    ``torn_bytes``. ``reset`` closes with a TCP reset instead of a FIN. ``delay``
    is how long each chunk of either direction waits before it is forwarded (a
    slow network), in seconds.
    """

    cut: Direction | None = None
    at_chunk: int = 0
    torn_bytes: int = 0
    reset: bool = False
    delay: float = 0.0

    def describe(self) -> str:
        """The fault in words, for evidence."""
        parts = []
        if self.cut is not None:
            torn = f" and {self.torn_bytes} bytes of the next" if self.torn_bytes else ""
            closed = "reset" if self.reset else "closed"
            direction = self.cut.replace("_", " ")
            parts.append(f"{direction}: cut after {self.at_chunk} chunks{torn}, {closed}")
        if self.delay:
            parts.append(f"every chunk delayed {self.delay * 1000:.1f} ms")
        return "; ".join(parts) or "forwarded untouched"


CLEAN: Final = Fault()
"""A connection forwarded untouched."""


class Fired(msgspec.Struct, frozen=True):
    """A cut that happened: which connection (numbered from 0 in order of arrival), the
    fault, and when (``time.monotonic_ns``)."""

    connection: int
    fault: Fault
    at: int


class _Link:
    """One proxied connection: both streams, and how far each direction got."""

    def __init__(
        self,
        number: int,
        fault: Fault,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.number = number
        self.fault = fault
        self.client = client
        self.server = server
        self.chunks: dict[Direction, int] = {"to_server": 0, "to_client": 0}
        self.closed = False

    def close(self, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for _, writer in (self.client, self.server):
            if reset:
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        # Linger 0: close() sends a reset instead of a FIN.
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                writer.transport.abort()
            else:
                writer.close()


class FaultProxy:
    """A loopback TCP proxy to ``target`` that applies ``faults(n)`` to its n-th connection.

    Use it as a context manager (``with FaultProxy(target, faults) as proxy``):
    the proxy listens from entry to exit, at `address`.
    """

    def __init__(
        self, target: ServerAddress, faults: Callable[[int], Fault] = lambda _number: CLEAN
    ) -> None:
        if target.host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the proxy reaches loopback servers only, not {target}")
        self.target = target
        self._faults = faults
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._flowing: asyncio.Event | None = None
        self._severed = False
        self._count = 0
        self._lock = threading.Lock()
        self.fired: list[Fired] = []
        """Every cut so far, in order (appended from the proxy's thread)."""
        self.address = ServerAddress("127.0.0.1", 0)
        """Where the proxy listens (set on entry)."""

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self.address = self._call(self._listen())
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening, cut every connection and stop the proxy's thread. Idempotent."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._call(self._shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STARTUP_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()

    # -- controls (any thread) ----------------------------------------------------------------

    def stall(self) -> None:
        """Hold every byte of every connection, in both directions, until `resume`."""
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        """Forward again what `stall` held, and everything after it."""
        self._call(self._set_flowing(True))

    def sever(self) -> None:
        """Cut every connection with a reset and refuse new ones: the server is unreachable."""
        self._call(self._sever())

    def arm(self, faults: Callable[[int], Fault]) -> None:
        """From now on apply ``faults(n)`` to the n-th connection: to each one open now
        (its chunks counted from here, so that a connection opened before, e.g. in a
        client's pool, is cut like a new one) and to each one accepted later."""
        self._call(self._arm(faults))

    @property
    def connections(self) -> int:
        """How many connections the proxy has accepted."""
        with self._lock:
            return self._count

    # -- the proxy's own loop -----------------------------------------------------------------

    def _call(self, coroutine: Coroutine[object, object, _T]) -> _T:
        """Run ``coroutine`` on the proxy's loop and return its result, within a deadline."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_STARTUP_TIMEOUT)

    async def _listen(self) -> ServerAddress:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return ServerAddress(str(host), int(port))

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _arm(self, faults: Callable[[int], Fault]) -> None:
        self._faults = faults
        for link in self._links:
            link.fault = faults(link.number)
            link.chunks = {"to_server": 0, "to_client": 0}

    async def _sever(self) -> None:
        self._severed = True
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.close(reset=True)

    async def _shut(self) -> None:
        await self._sever()
        # Links held by a stall, or waiting on a peer, end here rather than with the loop.
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            number = self._count
            self._count += 1
        if self._severed:
            writer.transport.abort()
            return
        try:
            server = await asyncio.open_connection(self.target.host, self.target.port)
        except OSError:
            writer.transport.abort()
            return
        # The fault is drawn once the link is tracked, on the proxy's loop like `arm`:
        # a connection is either drawn here with the faults armed, or re-drawn by `arm`.
        link = _Link(number, self._faults(number), (reader, writer), server)
        if self._severed:  # severed while this connection was being made
            link.close(reset=True)
            return
        self._links.add(link)
        try:
            await asyncio.gather(
                self._pump(link, "to_server", reader, server[1]),
                self._pump(link, "to_client", server[0], writer),
            )
        except asyncio.CancelledError:
            pass  # the proxy is closing: the link is cut below like any other
        finally:
            link.close(reset=False)
            self._links.discard(link)

    async def _pump(
        self,
        link: _Link,
        direction: Direction,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
    ) -> None:
        assert self._flowing is not None
        try:
            while not link.closed:
                chunk = await source.read(_CHUNK)
                if not chunk:
                    break
                fault = link.fault  # `arm` may have drawn it since the last chunk
                if fault.delay:
                    # An injected slow network, not a wait for anything.
                    await asyncio.sleep(fault.delay)
                await self._flowing.wait()
                if link.closed:
                    break
                if fault.cut == direction and link.chunks[direction] >= fault.at_chunk:
                    if fault.torn_bytes:
                        sink.write(chunk[: fault.torn_bytes])
                        await sink.drain()
                    self.fired.append(Fired(link.number, fault, time.monotonic_ns()))
                    link.close(fault.reset)
                    break
                sink.write(chunk)
                await sink.drain()
                link.chunks[direction] += 1
        except (ConnectionError, OSError):
            pass
        finally:
            # One direction ending ends the connection: a half-open link would hang its peer.
            link.close(reset=False)
