"""A name lookup and a SOCKS proxy are as abortable as a TCP connect.

``socket.getaddrinfo`` ran on the worker thread: a resolver that hangs (a dead
DNS server) held the request past its deadline, and neither the deadline, a
cancel nor ``close()`` could stop it. The hanging resolver here is
``socket.getaddrinfo`` replaced in this process: a lookup of ``slow.invalid``
blocks until the test ends, one of ``mcp.test`` answers ``127.0.0.1``.

Through a ``socks5://`` proxy, urllib3's SOCKS connections kept their sockets to
themselves: an abort could not reach a proxy that accepts and then stalls. The
proxy here is a tiny SOCKS5 server in this file.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcpcall
from mcpcall.config import make_transport
from mcpcall.transports import _lookups
from mcpcall.transports._exchanges import Exchange
from tests.conftest import http_threads, wait_until
from tests.servers.http_fault_server import FaultServer
from tests.transports.test_http_hardening import Background, outcome_of

MARGIN = 1.5  # what a bound may take beyond its deadline on a loaded machine


def lookup_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == _lookups.THREAD_NAME and t.is_alive()]


class Resolver:
    """``socket.getaddrinfo`` for this process: ``slow.invalid`` hangs, ``mcp.test`` is 127.0.0.1."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.hanging = 0  # lookups of slow.invalid under way
        self.calls: list[tuple[str, str]] = []  # (host, the thread that looked it up)
        self.hang_too: set[str] = set()  # more names that hang from now on

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.calls.append((str(host), threading.current_thread().name))
        if host == "slow.invalid" or host in self.hang_too:
            with self.lock:
                self.hanging += 1
            try:
                self.release.wait(30)
            finally:
                with self.lock:
                    self.hanging -= 1
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if host == "again.invalid":  # what glibc says when no DNS server answers in time
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if host == "mcp.test":
            host = "127.0.0.1"
        return self.real(host, port, *args, **kwargs)

    def threads_that_looked_up(self, host: str) -> set[str]:
        with self.lock:
            return {name for looked_up, name in self.calls if looked_up == host}


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resolver]:
    fake = Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    try:
        yield fake
    finally:
        fake.release.set()  # the helpers still looking up finish now (the leak check waits for them)
        assert wait_until(lambda: fake.hanging == 0), "a hanging lookup did not end"


def name_url(server: FaultServer, host: str) -> str:
    return f"http://{host}:{server.port}/mcp"


# -- a lookup that hangs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", "modern", "legacy"])
def test_connect_through_a_hanging_lookup_ends_at_its_deadline(resolver: Resolver, protocol: str) -> None:
    # connect(timeout=1) waited for the resolver (here: forever) on the worker thread; close() then waited
    # 5 s for the worker, and left it alive.
    _, error, took = outcome_of(mcpcall.connect, "http://slow.invalid:9/mcp", timeout=1, protocol=protocol)
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 1 + MARGIN, f"connect(timeout=1) took {took:.1f} s"
    text = str(error)
    assert "slow.invalid" in text and "name lookup" in text and "within 1 s" in text, text
    assert http_threads() == []
    assert resolver.hanging >= 1  # it did reach the resolver, which is still stuck


def test_the_connect_timeout_ends_a_hanging_lookup(resolver: Resolver) -> None:
    # Within the request's deadline, the lookup still ends at connect_timeout, as a TCP connect does.
    transport = make_transport("http://slow.invalid:9/mcp", http={"connect_timeout": 0.5})
    _, error, took = outcome_of(mcpcall.Client(transport, timeout=20, protocol="legacy").connect)
    assert isinstance(error, mcpcall.ConnectionClosed), error
    assert took < 0.5 + MARGIN, f"connect() with connect_timeout=0.5 took {took:.1f} s"
    text = str(error)
    assert "slow.invalid" in text and "name lookup of its host did not finish within 0.5 s" in text, text


def test_close_ends_a_connect_in_a_hanging_lookup(resolver: Resolver) -> None:
    close_while_connecting(make_transport({"url": "http://slow.invalid:9/mcp"}), lambda: resolver.hanging >= 1,
                           "connect() never started its lookup")


def close_while_connecting(transport: Any, started: Callable[[], bool], never: str) -> None:
    """close() once ``started()``: it returns promptly, and the connect() in progress ends with ConnectionClosed."""
    client = mcpcall.Client(transport, timeout=30, protocol="legacy")
    job = Background(client.connect)
    try:
        assert wait_until(started), never
        _, error, took = outcome_of(client.close)
        assert error is None and took < MARGIN, f"close() took {took:.1f} s ({error})"
        assert job.done_within(MARGIN), "connect() still waits after close()"
        assert isinstance(job.error, mcpcall.ConnectionClosed), job.error
        assert http_threads() == []
    finally:
        client.close()
        job.done_within(30)


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_cancel_and_timeout_end_a_call_in_a_hanging_lookup(server: FaultServer, resolver: Resolver, protocol: str) -> None:
    # A connected client whose next request needs a new connection, whose lookup hangs.
    client = mcpcall.connect(name_url(server, "mcp.test"), timeout=10, protocol=protocol)
    transport: Any = client.transport
    try:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        resolver.hang_too.add("mcp.test")
        server._httpd.cut_connections()  # the pooled connection is gone: the next request connects anew
        future = client.call_tool_future("echo", {"message": "hi"}, timeout=30)
        assert wait_until(lambda: resolver.hanging >= 1), "the call never started its lookup"
        future.cancel()
        assert wait_until(lambda: not transport._exchanges, timeout=MARGIN), "the cancelled call still waits"
        _, error, took = outcome_of(client.call_tool, "echo", {"message": "hi"}, timeout=1)
        assert isinstance(error, mcpcall.RequestTimeout), error
        assert took < 1 + MARGIN, f"call_tool(timeout=1) took {took:.1f} s"
        assert "name lookup of 'mcp.test'" in str(error), error
        assert wait_until(lambda: not transport._exchanges, timeout=MARGIN), "the call's lookup goes on"
    finally:
        _, error, took = outcome_of(client.close)
        assert error is None and took < 2 + MARGIN, f"close() took {took:.1f} s ({error})"


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_notify_through_a_hanging_lookup_ends_at_its_timeout(server: FaultServer, resolver: Resolver, protocol: str) -> None:
    client = mcpcall.connect(name_url(server, "mcp.test"), timeout=10, protocol=protocol)
    try:
        resolver.hang_too.add("mcp.test")
        server._httpd.cut_connections()
        _, error, took = outcome_of(client.notify, "notifications/anything", timeout=1)
        assert isinstance(error, mcpcall.RequestTimeout), error
        assert took < 1 + MARGIN, f"notify(timeout=1) took {took:.1f} s"
        assert "could not connect" in str(error) and "name lookup of 'mcp.test'" in str(error), error
    finally:
        client.close()


def test_a_resolver_that_gives_up_is_not_called_a_name_that_does_not_resolve(resolver: Resolver) -> None:
    _, error, _ = outcome_of(mcpcall.connect, "http://again.invalid:9/mcp", timeout=5, protocol="legacy")
    assert isinstance(error, mcpcall.ConnectionClosed), error
    assert "name lookup of its host failed (Temporary failure in name resolution" in str(error), error


def test_a_lookup_that_works_goes_through_a_helper(server: FaultServer, resolver: Resolver) -> None:
    with mcpcall.connect(name_url(server, "mcp.test"), timeout=10) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert resolver.threads_that_looked_up("mcp.test") == {_lookups.THREAD_NAME}


def test_an_ip_address_starts_no_lookup_thread(server: FaultServer, resolver: Resolver) -> None:
    # The common case (127.0.0.1) costs nothing more: getaddrinfo of an address runs on the worker itself.
    started: list[str] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading.Thread, "start", start)
        with mcpcall.connect(server.url, timeout=10) as client:
            assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert _lookups.THREAD_NAME not in started, started
    looked_up_by = resolver.threads_that_looked_up("127.0.0.1")
    assert looked_up_by and all(name.startswith("mcpcall-http-") for name in looked_up_by), looked_up_by


def test_hanging_lookups_do_not_pile_up_threads(resolver: Resolver) -> None:
    # Three times as many requests as helpers, all to a host whose lookups hang: LIMIT helpers, the rest wait
    # in line; every one of them gives up at its abort, and those still in line never reach the resolver.
    count = 3 * _lookups.LIMIT
    exchanges = [Exchange(i) for i in range(count)]
    jobs = [Background(_lookups.resolve, exchange, 30, "slow.invalid", 80) for exchange in exchanges]
    assert wait_until(lambda: resolver.hanging == _lookups.LIMIT), resolver.hanging
    assert wait_until(lambda: all(exchange.unresolved == "slow.invalid" for exchange in exchanges))
    assert wait_until(lambda: len(lookup_threads()) == _lookups.LIMIT), lookup_threads()  # (a past test's may be ending)
    for exchange in exchanges:
        exchange.abort()
    for job in jobs:
        assert job.done_within(MARGIN), "an aborted lookup still waits"
        assert isinstance(job.error, ConnectionAbortedError), job.error
    assert resolver.hanging == _lookups.LIMIT  # the helpers are still stuck: nobody waits for them any more
    resolver.release.set()
    assert wait_until(lambda: lookup_threads() == [] and _lookups._HELPERS.running() == 0)
    assert len(resolver.threads_that_looked_up("slow.invalid")) == 1  # all on helpers ...
    assert len([call for call in resolver.calls if call[0] == "slow.invalid"]) == _lookups.LIMIT  # ... none after


def test_a_lookup_that_outlasts_its_timeout_raises_at_once(resolver: Resolver) -> None:
    exchange = Exchange("timeout")
    started = time.monotonic()
    with pytest.raises(_lookups.LookupTimeout, match="within 0.3 s"):
        _lookups.resolve(exchange, 0.3, "slow.invalid", 80)
    assert time.monotonic() - started < 0.3 + MARGIN
    assert exchange.unresolved == "slow.invalid"


# -- a SOCKS5 proxy -----------------------------------------------------------------------------------------


class Socks5:
    """A SOCKS5 proxy on 127.0.0.1, port 0: no authentication, CONNECT only, relayed both ways.

    ``stall=True``: it answers the greeting, reads the CONNECT and never answers it.
    """

    def __init__(self, *, stall: bool = False) -> None:
        self.stall = stall
        self.stopped = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = int(self.listener.getsockname()[1])
        self.url = f"socks5://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.targets: list[tuple[str, int]] = []  # what each CONNECT asked for
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name="test-socks5", daemon=True)
        with self.lock:
            self._threads.append(thread)
        thread.start()

    def _keep(self, sock: socket.socket) -> socket.socket:
        with self.lock:
            self._sockets.append(sock)
        return sock

    def _accept(self) -> None:
        while not self.stopped.is_set():
            ready, _, _ = select_read([self.listener], 0.1)
            if ready:
                conn, _ = self.listener.accept()
                self._spawn(self._serve, self._keep(conn))

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn.makefile("rb") as reader:
            _, methods = reader.read(2)
            reader.read(methods)
            conn.sendall(b"\x05\x00")  # no authentication
            _, command, _, kind = reader.read(4)
            if kind == 1:
                host = socket.inet_ntoa(reader.read(4))
            elif kind == 3:
                host = reader.read(reader.read(1)[0]).decode()
            else:
                host = socket.inet_ntop(socket.AF_INET6, reader.read(16))
            port = int.from_bytes(reader.read(2), "big")
            with self.lock:
                self.targets.append((host, port))
            if self.stall or command != 1:
                self.stopped.wait(30)
                return
            upstream = self._keep(socket.create_connection((host, port), timeout=5))
            conn.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + upstream.getsockname()[1].to_bytes(2, "big"))
            self._relay(conn, upstream)

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        while not self.stopped.is_set():
            ready, _, _ = select_read([a, b], 0.1)
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)

    def asked(self) -> list[tuple[str, int]]:
        with self.lock:
            return list(self.targets)

    def stop(self) -> None:
        self.stopped.set()
        with self.lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(5)
        with self.lock:
            sockets = list(self._sockets)
        for sock in [self.listener, *sockets]:
            sock.close()


def select_read(sockets: list[socket.socket], timeout: float) -> tuple[list[Any], list[Any], list[Any]]:
    import select

    return select.select(sockets, [], [], timeout)


@pytest.fixture
def relay() -> Iterator[Socks5]:
    proxy = Socks5()
    try:
        yield proxy
    finally:
        gc.collect()  # an error held in a cycle keeps a closed client's pooled sockets open
        proxy.stop()


@pytest.fixture
def stalling() -> Iterator[Socks5]:
    proxy = Socks5(stall=True)
    try:
        yield proxy
    finally:
        gc.collect()
        proxy.stop()


needs_pysocks = pytest.mark.skipif(importlib.util.find_spec("socks") is None, reason="PySocks is not installed")


@needs_pysocks
@pytest.mark.parametrize(("scheme", "host", "proxy_sees"), [
    ("socks5", "127.0.0.1", "127.0.0.1"),
    ("socks5", "mcp.test", "127.0.0.1"),  # the client resolves (through a lookup helper)
    ("socks5h", "mcp.test", "mcp.test"),  # the proxy resolves
])
@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_calls_through_a_socks_proxy_work(server: FaultServer, relay: Socks5, resolver: Resolver, scheme: str, host: str,
                                          proxy_sees: str, protocol: str) -> None:
    proxy = relay.url.replace("socks5", scheme, 1)
    with mcpcall.connect(name_url(server, host), timeout=10, protocol=protocol, proxies={"http": proxy}) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        transport: Any = client.transport
        managers = transport._session.get_adapter(transport.url).proxy_manager.values()
        pools = [manager.pools[key] for manager in managers for key in manager.pools.keys()]
        assert pools and all(type(pool).__name__ == "TrackedSOCKSHTTPConnectionPool" for pool in pools), pools
    assert (proxy_sees, server.port) in relay.asked()
    assert set(relay.asked()) == {(proxy_sees, server.port)}
    looked_up_by = resolver.threads_that_looked_up("mcp.test")
    assert not any(name.startswith("mcpcall-http-") for name in looked_up_by), looked_up_by  # never on the worker


@needs_pysocks
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_connect_through_a_stalling_socks_proxy_ends_at_its_deadline(stalling: Socks5, protocol: str) -> None:
    # The SOCKS negotiation ran inside PySocks, on a socket no exchange knew: connect(timeout=1) took 1 s + 5 s
    # of close() waiting for the worker, which lived on until the proxy's answer or connect_timeout.
    _, error, took = outcome_of(mcpcall.connect, "http://127.0.0.1:9/mcp", timeout=1, protocol=protocol,
                                proxies={"http": stalling.url})
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 1 + MARGIN, f"connect(timeout=1) took {took:.1f} s"
    assert stalling.asked() and all(target == ("127.0.0.1", 9) for target in stalling.asked())
    assert http_threads() == []


@needs_pysocks
def test_close_ends_a_connect_stalled_in_the_socks_negotiation(stalling: Socks5) -> None:
    close_while_connecting(make_transport("http://127.0.0.1:9/mcp", http={"proxies": {"http": stalling.url}}),
                           lambda: bool(stalling.asked()), "connect() never reached the proxy")


@needs_pysocks
def test_a_socks_proxy_that_stops_accepting_ends_at_the_deadline(server: FaultServer) -> None:
    # The TCP connect to the proxy itself: a blocking connect inside PySocks, out of the exchange's reach.
    server.stop_accepting()
    proxy = f"socks5://127.0.0.1:{server.port}"
    _, error, took = outcome_of(mcpcall.connect, "http://127.0.0.1:9/mcp", timeout=1, protocol="legacy",
                                proxies={"http": proxy})
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 1 + MARGIN, f"connect(timeout=1) took {took:.1f} s"
    assert http_threads() == []


@needs_pysocks
def test_a_tls_handshake_through_a_socks_proxy_ends_at_the_deadline(relay: Socks5, silent_port: int, ca_file: str) -> None:
    # The proxy connects to a listener that never accepts: the ClientHello goes unanswered.
    _, error, took = outcome_of(mcpcall.connect, f"https://127.0.0.1:{silent_port}/mcp", timeout=1, protocol="legacy",
                                verify=ca_file, proxies={"https": relay.url})
    assert isinstance(error, mcpcall.RequestTimeout), error
    assert took < 1 + MARGIN, f"connect(timeout=1) took {took:.1f} s"
    assert relay.asked() == [("127.0.0.1", silent_port)]
    assert http_threads() == []


def test_without_pysocks_socks_pools_are_left_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpcall.transports import _socks

    monkeypatch.setattr(_socks, "_classes", {})
    monkeypatch.setitem(sys.modules, "socks", None)  # import socks raises ImportError
    assert _socks.socks_pool_classes() is None
