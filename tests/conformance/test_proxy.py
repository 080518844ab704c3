"""The kit's fault-injecting proxy (`checkpointspec.conformance.engines.network.proxy`).

Plain blocking sockets on both sides, with timeouts as deadlines: a server
socket the test accepts on, a client that connects to the proxy. A chunk is
what one side sent at once; each test lets the other side read a chunk before
the next is sent, so the proxy sees them apart.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from checkpointspec.conformance.engines.network.proxy import Fault, FaultProxy
from checkpointspec.spec import ServerAddress

DEADLINE = 10.0


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(DEADLINE)
        yield server


def _target(listener: socket.socket) -> ServerAddress:
    return ServerAddress("127.0.0.1", listener.getsockname()[1])


def _connect(proxy: FaultProxy) -> socket.socket:
    client = socket.create_connection((proxy.address.host, proxy.address.port), DEADLINE)
    client.settimeout(DEADLINE)
    return client


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(1024):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


def test_a_clean_connection_carries_both_directions(listener: socket.socket) -> None:
    with FaultProxy(_target(listener)) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            client.sendall(b"ping")
            assert _exactly(server, 4) == b"ping"
            server.sendall(b"pong")
            assert _exactly(client, 4) == b"pong"
    assert proxy.fired == []
    assert proxy.connections == 1


def test_a_cut_towards_the_client_passes_whole_chunks_then_part_of_the_next(
    listener: socket.socket,
) -> None:
    fault = Fault(cut="to_client", at_chunk=1, torn_bytes=3)
    with FaultProxy(_target(listener), lambda _n: fault) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            server.sendall(b"first")
            assert _exactly(client, 5) == b"first"
            server.sendall(b"second chunk")
            assert _read_until_closed(client) == b"sec"
            # The server's side is closed too: what it sends next goes nowhere.
            assert _read_until_closed(server) == b""
    assert [fired.fault for fired in proxy.fired] == [fault]


def test_a_cut_towards_the_server_drops_the_request_and_closes_both_sides(
    listener: socket.socket,
) -> None:
    fault = Fault(cut="to_server", at_chunk=0, reset=True)
    with FaultProxy(_target(listener), lambda _n: fault) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            client.sendall(b"COMMIT")
            assert _read_until_closed(server) == b""
            assert _read_until_closed(client) == b""
    assert len(proxy.fired) == 1


def test_faults_are_drawn_per_connection(listener: socket.socket) -> None:
    faults = {0: Fault(), 1: Fault(cut="to_client", at_chunk=0)}
    with FaultProxy(_target(listener), faults.__getitem__) as proxy:
        with _connect(proxy) as first:
            server, _ = listener.accept()
            with server:
                server.sendall(b"kept")
                assert _exactly(first, 4) == b"kept"
        with _connect(proxy) as second:
            server, _ = listener.accept()
            with server:
                server.sendall(b"dropped")
                assert _read_until_closed(second) == b""
    assert [fired.connection for fired in proxy.fired] == [1]


def test_arming_cuts_a_connection_opened_before_it(listener: socket.socket) -> None:
    """A pooled connection made before the faults began is cut like a new one, its
    chunks counted from the arming."""
    fault = Fault(cut="to_client", at_chunk=1)
    with FaultProxy(_target(listener)) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            server.sendall(b"before")
            assert _exactly(client, 6) == b"before"
            proxy.arm(lambda _n: fault)
            server.sendall(b"kept")
            assert _exactly(client, 4) == b"kept"
            server.sendall(b"dropped")
            assert _read_until_closed(client) == b""
    assert [(fired.connection, fired.fault) for fired in proxy.fired] == [(0, fault)]


def test_a_stalled_proxy_forwards_once_resumed(listener: socket.socket) -> None:
    with FaultProxy(_target(listener)) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            proxy.stall()
            client.sendall(b"held")
            proxy.resume()
            assert _exactly(server, 4) == b"held"


def test_a_severed_proxy_cuts_its_connections_and_refuses_new_ones(
    listener: socket.socket,
) -> None:
    with FaultProxy(_target(listener)) as proxy, _connect(proxy) as client:
        server, _ = listener.accept()
        with server:
            proxy.sever()
            assert _read_until_closed(client) == b""
            assert _read_until_closed(server) == b""
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy)


def test_the_proxy_reaches_loopback_servers_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy(ServerAddress("10.0.0.1", 5432))
