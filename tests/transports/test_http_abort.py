"""Every deadline and ``close()`` reach an HTTP exchange that is still connecting (TCP or TLS).

An exchange learnt its socket only once ``connect()`` had
returned, so against a host that stops accepting ``connect(url, timeout=2)``
took 7 s, ``notify(timeout=1)`` 10 s (and then said "did not acknowledge
within 1 s"), and ``close()`` 5 s, leaving ``mcpcall-http-*`` workers alive;
the same for a TLS handshake that never ends.

The hosts: :meth:`FaultServer.stop_accepting` (a listener with its backlog full,
so the client's SYN goes unanswered) and a listening socket that never accepts
(the kernel completes the TCP handshake; nobody answers the ClientHello).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall.config import make_transport
from tests.conftest import http_threads, self_signed_cert, wait_until
from tests.servers.http_fault_server import FaultServer
from tests.transports.test_http_hardening import Background, outcome_of

MARGIN = 1.5  # what a bound may take beyond its deadline on a loaded machine


def connecting(transport: Any) -> bool:
    """True while one of the transport's exchanges has a socket that has not connected yet."""
    with transport._lock:
        exchanges = list(transport._active)
    return any(exchange._sockets and not exchange.connected for exchange in exchanges)


# -- a host that stops accepting (the SYN goes unanswered) --------------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_connect_to_a_host_that_stops_accepting_ends_at_its_deadline(server: FaultServer, protocol: str) -> None:
    # connect(url, timeout=2) took 7 s: the probe's abort could not reach the TCP connect, and close() then
    # waited 5 s for the workers, which lived on.
    server.stop_accepting()
    _, error, took = outcome_of(mcpcall.connect, server.url, timeout=2, protocol=protocol)
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 2 + MARGIN, f"connect(timeout=2) took {took:.1f} s"
    assert http_threads() == []


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_notify_to_a_host_that_stops_accepting_ends_at_its_timeout(server: FaultServer, protocol: str) -> None:
    # notify(timeout=1) took the connect timeout (10 s), then said "did not acknowledge ... within 1 s".
    client = mcpcall.connect(server.url, timeout=10, protocol=protocol)
    try:
        server.stop_accepting()
        _, error, took = outcome_of(client.notify, "notifications/anything", timeout=1)
        assert isinstance(error, mcpcall.RequestTimeout), error
        assert took < 1 + MARGIN, f"notify(timeout=1) took {took:.1f} s"
        assert "could not connect" in str(error) and "within 1 s" in str(error), error
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_close_ends_a_call_that_is_connecting(server: FaultServer, protocol: str) -> None:
    # close() waited 5 s for the worker stuck in its TCP connect, and left it alive.
    client = mcpcall.connect(server.url, timeout=10, protocol=protocol)
    server.stop_accepting()
    call = Background(client.call_tool, "echo", {"message": "hi"}, timeout=30)
    try:
        assert wait_until(lambda: connecting(client.transport)), "the call never started connecting"
        _, error, took = outcome_of(client.close)
        assert error is None, error
        assert took < 2 + MARGIN, f"close() took {took:.1f} s"  # legacy: its DELETE has 2 s
        assert http_threads() == []
        assert call.done_within(MARGIN), "the call still waits after close()"
        assert isinstance(call.error, mcpcall.ConnectionClosed), call.error
    finally:
        client.close()
        call.done_within(30)


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_request_timeout_ends_its_connect(server: FaultServer, protocol: str) -> None:
    # The request's timeout fired, but its worker stayed in connect for connect_timeout (10 s).
    client = mcpcall.connect(server.url, timeout=10, protocol=protocol)
    transport: Any = client.transport
    try:
        server.stop_accepting()
        _, error, _ = outcome_of(client.call_tool, "echo", {"message": "hi"}, timeout=1)
        assert isinstance(error, mcpcall.RequestTimeout), error
        # Its job is over (a legacy cancel notice may still try to connect, on its own exchange).
        assert wait_until(lambda: not transport._exchanges, timeout=MARGIN), "the request's connect goes on"
    finally:
        client.close()


# -- a TLS handshake that never ends ----------------------------------------------------------------------


def test_connect_to_a_tls_server_that_never_answers_ends_at_its_deadline(silent_port: int, ca_file: str) -> None:
    # The handshake ran inside connect(), before the exchange knew the socket: 2 s + 5 s, workers left alive.
    url = f"https://127.0.0.1:{silent_port}/mcp"
    _, error, took = outcome_of(mcpcall.connect, url, timeout=2, verify=ca_file)
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 2 + MARGIN, f"connect(timeout=2) took {took:.1f} s"
    assert http_threads() == []


def test_close_ends_a_connect_in_its_tls_handshake(silent_port: int, ca_file: str) -> None:
    # close() from another thread could not stop a handshake that never ends.
    transport = make_transport({"url": f"https://127.0.0.1:{silent_port}/mcp", "verify": ca_file})
    client = mcpcall.Client(transport, timeout=30)
    job = Background(client.connect)
    try:
        assert wait_until(lambda: connecting(transport)), "connect() never started connecting"
        _, error, took = outcome_of(client.close)
        assert error is None and took < MARGIN, f"close() took {took:.1f} s ({error})"
        assert job.done_within(MARGIN), "connect() still runs after close()"
        assert isinstance(job.error, mcpcall.ConnectionClosed), job.error
        assert http_threads() == []
    finally:
        client.close()
        job.done_within(30)


def test_a_notify_never_acknowledged_on_a_new_connection_is_no_connect_failure(server: FaultServer) -> None:
    # An exchange on a new plain-HTTP connection never counted as connected: its socket was recorded before its
    # connect, and that made the "connected" mark skip it. notify(timeout=1) then said "could not connect to server".
    client = mcpcall.connect(server.url, timeout=10, protocol="legacy")
    try:
        server.cut()  # the notice goes out on a new connection
        server.stall = {"notifications/anything"}
        _, error, _ = outcome_of(client.notify, "notifications/anything", timeout=1)
        assert isinstance(error, mcpcall.RequestTimeout), error
        assert "did not acknowledge" in str(error), error
    finally:
        server.release.set()
        client.close()


# -- what a timeout says: the request's own connect, never another's ----------------------------------------------


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_timeout_names_only_the_connect_of_its_own_request(tmp_path: Path, protocol: str) -> None:
    # The note "the TLS handshake with URL had not finished" described the whole transport: a request the server had
    # and never answered got it too, as long as another request was connecting when it timed out.
    cert_file, key_file = self_signed_cert(tmp_path)
    server = FaultServer(tls=(cert_file, key_file)).start()
    try:
        client = mcpcall.connect(server.url, name="tls", timeout=10, protocol=protocol, verify=cert_file)
        try:
            server.cut()  # the pooled connections are gone: each request below opens its own
            reached = client.call_tool_future("hold", {"seconds": 30}, timeout=2)  # the server has it, never answers
            assert server.wait_for(lambda: any(s.body["params"]["name"] == "hold" for s in server.requests("tools/call")))
            server.tls_handshake = "silent"  # from now on a new connection never gets through its handshake
            stuck = client.call_tool_future("echo", {"message": "hi"}, timeout=4)
            assert wait_until(lambda: connecting(client.transport)), "the second call never started connecting"
            assert not reached.done(), "the first call timed out before the second one was connecting"
            error = reached.exception(timeout=2 + MARGIN)
            assert isinstance(error, mcpcall.RequestTimeout), error
            assert "did not answer tools/call within 2 s" in str(error), error
            assert "had not finished" not in str(error), f"the server had that request, yet: {error}"
            assert connecting(client.transport), "the second call was not connecting any more when the first timed out"
            error = stuck.exception(timeout=2 + MARGIN)
            assert isinstance(error, mcpcall.RequestTimeout), error
            assert f"within 4 s; the TLS handshake with {server.url} had not finished" in str(error), error
        finally:
            client.close()
    finally:
        gc.collect()
        server.stop()
