"""Abortable HTTP exchanges: any thread can stop a request's I/O at once, without waiting.

A worker runs each request inside an :class:`Exchange` (``with exchange:``).
The urllib3 connections that mcpcall's sessions use record every socket they
open or reuse for it in that exchange — a new socket as soon as it exists,
before its TCP connect starts — and the pool takes it back out when the
connection returns to the pool. :meth:`Exchange.abort` then shuts exactly the
sockets of that request — while it connects (TCP, a SOCKS proxy's
negotiation, the TLS handshake), before its response headers, while its body
streams, and on a close-delimited stream that ``http.client`` has already
detached from its connection — and sets an event that ends any wait (a
``retry:`` delay, a name lookup: :mod:`._lookups`). It never closes a response,
never takes a lock another thread holds while doing I/O, and never touches a
socket another request picked up next: the worker that owns the response
closes it.

For other code that sends HTTP on a thread inside an exchange (an auth hook
that refreshes a token in the middle of a request): a ``requests`` session
given :func:`track_session` records its sockets in the thread's current
exchange (:func:`current_exchange`), so the request's deadline, its cancel
and ``close()`` stop that nested traffic too, connect included; its
:attr:`Exchange.aborted` event ends any wait.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import select
import socket
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Callable

from ..forking import on_fork_in_child
from ..urls import redact_url
from ._lookups import resolve

__all__ = ["Exchange", "Sending", "current_exchange", "current_sending", "sending", "track_session", "tracked_pool_classes"]

_current = threading.local()


def _shut(sock: Any) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)


class Exchange:
    """One request's HTTP traffic; ``abort()`` is safe from any thread, any time, more than once."""

    __slots__ = ("_on_abort", "_outer", "_sockets", "aborted", "connected", "connecting", "label", "unresolved")

    def __init__(self, label: Any = None) -> None:
        self.label = label
        #: Set by :meth:`abort`; waits between attempts use it to end early.
        self.aborted = threading.Event()
        #: True once one of its sockets was connected (TCP, and TLS for https): the server was reached.
        self.connected = False
        #: What its newest socket waits for while it connects (``"the TCP connect to"``, ``"the TLS handshake
        #: with"``, followed by the URL in a message); None before its first socket and once connected.
        self.connecting: str | None = None
        #: The host whose name lookup it waits for; still set if it gave up before the lookup ended.
        self.unresolved: str | None = None
        self._sockets: list[Any] = []
        self._on_abort: list[Callable[[], None]] = []
        self._outer: Exchange | None = None  # the thread's exchange around this one (a reply POSTed by a worker)

    def __repr__(self) -> str:
        return f"<Exchange {self.label!r}{' aborted' if self.aborted.is_set() else ''}>"

    def attach(self, sock: Any) -> None:
        self._sockets.append(sock)
        if self.aborted.is_set():
            _shut(sock)

    def detach(self, sock: Any) -> None:
        with contextlib.suppress(ValueError):
            self._sockets.remove(sock)

    def abort(self) -> None:
        """Stop this request's I/O: shut its sockets (a syscall that does not block) and wake its waits."""
        self.aborted.set()
        for sock in list(self._sockets):
            _shut(sock)
        for callback in list(self._on_abort):
            with contextlib.suppress(Exception):
                callback()

    def on_abort(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` when this exchange is aborted (at once if it is); returns the undo.

        For work done inside this request on its behalf (an auth hook's token request, its
        wait for another thread's): it ends with the request's deadline, cancel or close.
        ``callback`` runs on the aborting thread (the scheduler's, ``close()``'s): it must
        not block, and it may be called twice.
        """
        self._on_abort.append(callback)
        if self.aborted.is_set():
            callback()

        def undo() -> None:
            with contextlib.suppress(ValueError):
                self._on_abort.remove(callback)

        return undo

    def __enter__(self) -> Exchange:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        self._outer = getattr(_current, "exchange", None)
        _current.exchange = self
        return self

    def __exit__(self, *exc: object) -> None:
        _current.exchange = self._outer  # nested: the worker's own exchange is current again
        self._outer = None
        self._sockets.clear()


def current_exchange() -> Exchange | None:
    """The exchange this thread is running (a request being sent, its hooks included), or ``None``."""
    return getattr(_current, "exchange", None)


class Sending:
    """What a request's auth hook may know of the connection it goes out on; a transport sets it around a send.

    ``url``: the server URL the user configured, the resource of every request of the
    connection (an HTTP+SSE POST goes to the endpoint the server named). ``log(level,
    fmt, *args, logger=name)``: a record emitted off the I/O thread (logging handlers are
    user code).
    """

    __slots__ = ("log", "url")

    def __init__(self, url: str, log: Callable[..., None]) -> None:
        self.url = url
        self.log = log


@contextlib.contextmanager
def sending(context: Sending) -> Iterator[None]:
    """Within: :func:`current_sending` on this thread is ``context``."""
    outer = getattr(_current, "sending", None)
    _current.sending = context
    try:
        yield
    finally:
        _current.sending = outer


def current_sending() -> Sending | None:
    """The connection whose request this thread is sending (inside mcpcall's transports), or ``None``."""
    return getattr(_current, "sending", None)


def _track(connection: Any) -> None:
    """``connection`` is connected (TLS included) or reused: its socket is in the thread's exchange, which has reached
    the server (a new connection's socket is in it already, since before its connect: :func:`track_socket`)."""
    exchange = getattr(_current, "exchange", None)
    sock = getattr(connection, "sock", None)
    if exchange is None or sock is None:
        return
    exchange.connected = True
    exchange.connecting = None
    if connection._mcpcall_sock is sock:
        return
    _untrack(connection)
    connection._mcpcall_exchange = exchange
    connection._mcpcall_sock = sock
    exchange.attach(sock)


def _untrack(connection: Any) -> None:
    exchange = getattr(connection, "_mcpcall_exchange", None)
    if exchange is not None:
        exchange.detach(connection._mcpcall_sock)
    connection._mcpcall_exchange = None
    connection._mcpcall_sock = None


_classes: dict[str, Any] = {}

#: Every connection the tracked pools opened (for a forked child to let go of their sockets).
_connections: weakref.WeakSet[Any] = weakref.WeakSet()


class _Sockets:
    """Owner of the fork hook below (the hook lives as long as this module)."""


_SOCKETS = _Sockets()


def _forget_sockets() -> None:
    """In a forked child: close our copies of the parent's connections (no I/O, no locks).

    ``socket.close`` only drops this process's descriptor: the parent's connection
    lives on, and its server sees it close when the parent closes it, not when a
    long-lived child (a gunicorn worker) finally exits.
    """
    for connection in list(_connections):
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(Exception):
                # Not sock.close(): that waits for the files made from it (an open response) to close.
                os.close(sock.detach())


on_fork_in_child(_SOCKETS, _forget_sockets)


def _wait_connected(sock: socket.socket, timeout: float | None) -> None:
    """Wait for a non-blocking connect to end (a shutdown by :meth:`Exchange.abort` ends it too)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLOUT | select.POLLERR | select.POLLHUP)
        ready = bool(poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000))))
    else:  # pragma: no cover - Windows: no poll(); the timeout still bounds it
        _, writable, failed = select.select([], [sock], [sock], timeout)
        ready = bool(writable or failed)
    if not ready:
        raise socket.timeout("timed out")
    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if code:
        raise OSError(code, os.strerror(code))


def connect_timeout(connection: Any) -> float | None:
    """The connect timeout of a urllib3 connection, in seconds (None: none)."""
    timeout = connection.timeout
    return timeout if timeout is None or isinstance(timeout, (int, float)) else socket.getdefaulttimeout()


def connect_socket(sock: socket.socket, address: Any, exchange: Exchange, timeout: float | None) -> None:
    """Connect ``sock``, already in ``exchange``, to ``address`` within ``timeout``; an abort ends it at once.

    The connect is started without blocking, and only then is the exchange
    looked at: an abort from then on shuts a socket that is connecting (which
    wakes the wait), and one before is seen here. Either way the connect ends.
    ``socket.socket``'s own methods are used: a subclass (PySocks') redefines them.
    """
    socket.socket.setblocking(sock, False)
    code = socket.socket.connect_ex(sock, address)
    if exchange.aborted.is_set():
        raise OSError(errno.ECONNABORTED, "the exchange was aborted")
    if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
        raise OSError(code, os.strerror(code))
    if code:
        _wait_connected(sock, timeout)
    if exchange.aborted.is_set():
        raise OSError(errno.ECONNABORTED, "the exchange was aborted")
    socket.socket.settimeout(sock, timeout)


def track_socket(connection: Any, exchange: Exchange, sock: socket.socket) -> None:
    """``sock`` is the new socket of ``connection``: in ``exchange`` (and taken out when the pool takes it back)."""
    exchange.attach(sock)
    exchange.connecting = "the TCP connect to"
    connection._mcpcall_exchange = exchange  # so that the pool's _put_conn takes it back out
    connection._mcpcall_sock = sock


def untrack_socket(connection: Any, sock: socket.socket) -> None:
    """``sock`` failed to connect: out of the exchange, and closed."""
    _untrack(connection)
    sock.close()


def before_handshake(connection: Any, exchange: Exchange, sock: socket.socket) -> None:
    """For an https connection: a second descriptor of ``sock`` in ``exchange``, so abort() ends the TLS handshake.

    Wrapping for TLS detaches the descriptor from ``sock`` (its shutdown then does nothing).
    ``_Tracking.connect`` closes it when the handshake is over.
    """
    if hasattr(connection, "ssl_context"):
        handle = socket.fromfd(sock.fileno(), sock.family, sock.type, sock.proto)
        connection._mcpcall_handshake = handle
        exchange.attach(handle)
        exchange.connecting = "the TLS handshake with"


def _open_socket(connection: Any, exchange: Exchange) -> socket.socket:
    """urllib3's ``create_connection``, with each socket in ``exchange`` before its connect starts.

    The host name is looked up on a helper thread that an abort or the connect
    timeout stops waiting for (:func:`._lookups.resolve`); the connect is
    :func:`connect_socket`.
    """
    from urllib3.exceptions import LocationParseError
    from urllib3.util.connection import allowed_gai_family

    from ._sender import TimedSocket

    host, port = connection._dns_host, connection.port
    if host.startswith("["):
        host = host.strip("[]")
    try:
        host.encode("idna")
    except UnicodeError:
        raise LocationParseError(f"'{host}', label empty or too long") from None
    timeout = connect_timeout(connection)

    def make(family: int, kind: int, proto: int) -> socket.socket:
        sock = TimedSocket(family, kind, proto)
        for option in connection.socket_options or ():
            sock.setsockopt(*option)
        return sock

    rows = resolve(exchange, timeout, host, port, allowed_gai_family(), socket.SOCK_STREAM)
    sock: socket.socket = connect_first(connection, exchange, rows, make,
                                        lambda sock, address: connect_socket(sock, address, exchange, timeout))
    return sock


def connect_first(connection: Any, exchange: Exchange, rows: Any, make: Callable[[int, int, int], Any],
                  link: Callable[[Any, Any], None]) -> Any:
    """The socket of the first ``getaddrinfo`` row that connects, as ``create_connection`` tries them.

    ``make(family, kind, proto)`` makes a socket with its options; it is bound
    to the connection's source address and recorded in ``exchange`` before
    ``link(sock, address)`` connects it, and prepared for its TLS handshake
    after. A socket that fails leaves the exchange; the last error is raised.
    """
    error: OSError | None = None
    for family, kind, proto, _, address in rows:
        sock = None
        try:
            sock = make(family, kind, proto)
            if connection.source_address:
                sock.bind(connection.source_address)
            track_socket(connection, exchange, sock)
            link(sock, address)
            before_handshake(connection, exchange, sock)
            return sock
        except OSError as exc:
            error = exc
            if sock is not None:
                untrack_socket(connection, sock)
    if error is not None:
        try:
            raise error
        finally:
            error = None
    raise OSError("getaddrinfo returns an empty list")


def _new_conn(connection: Any, exchange: Exchange) -> socket.socket:
    """What ``HTTPConnection._new_conn`` does, with urllib3's errors, through :func:`_open_socket`."""
    from urllib3 import exceptions

    try:
        sock = _open_socket(connection, exchange)
    except socket.gaierror as exc:
        resolution = getattr(exceptions, "NameResolutionError", None)  # urllib3 >= 2
        if resolution is not None:
            raise resolution(connection.host, connection, exc) from exc
        raise exceptions.NewConnectionError(connection, f"Failed to establish a new connection: {exc}") from exc
    except socket.timeout as exc:
        raise exceptions.ConnectTimeoutError(
            connection, f"Connection to {connection.host} timed out. (connect timeout={connection.timeout})",
        ) from exc
    except OSError as exc:
        raise exceptions.NewConnectionError(connection, f"Failed to establish a new connection: {exc}") from exc
    sys.audit("http.client.connect", connection, connection.host, connection.port)
    return sock


class _Tracking:
    """Mixed into urllib3's connection classes: every socket goes into the thread's exchange."""

    _mcpcall_exchange: Any = None
    _mcpcall_sock: Any = None
    _mcpcall_handshake: Any = None  # during a TLS handshake: a second descriptor of the socket, for abort()

    def _new_conn(self) -> socket.socket:
        exchange = current_exchange()
        if exchange is None:
            return super()._new_conn()  # type: ignore[misc, no-any-return]
        return _new_conn(self, exchange)

    def connect(self) -> None:
        try:
            super().connect()  # type: ignore[misc]
        finally:
            handle, self._mcpcall_handshake = self._mcpcall_handshake, None
            if handle is not None:
                exchange = self._mcpcall_exchange
                if exchange is not None:
                    exchange.detach(handle)
                handle.close()
        _connections.add(self)
        _track(self)  # the socket it ends with (TLS wraps the one that connected)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _track(self)  # a reused connection: its socket exists already
        super().request(*args, **kwargs)  # type: ignore[misc]


class _RedactInExchange(logging.Filter):
    """On urllib3's loggers: a record of traffic inside an exchange shows its URLs redacted.

    urllib3 logs each request line (``"POST /mcp?api_key=… HTTP/1.1" 200``) at
    DEBUG. Only records made on a thread inside an exchange are touched: the
    traffic of other code in the process is not mcpcall's to rewrite.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if current_exchange() is not None:
            with contextlib.suppress(Exception):
                record.msg, record.args = redact_url(record.getMessage()), None
        return True


def tracked_pool_classes() -> dict[str, Any]:
    """urllib3 pool classes (by scheme) whose connections record their sockets in the current exchange."""
    if not _classes:
        from urllib3 import connection, connectionpool

        for name in ("urllib3.connectionpool", "urllib3.util.retry"):
            logging.getLogger(name).addFilter(_RedactInExchange())

        from ._sender import OneWrite

        class _HTTPConnection(OneWrite, _Tracking, connection.HTTPConnection):
            pass

        class _HTTPSConnection(OneWrite, _Tracking, connection.HTTPSConnection):
            pass

        _classes.update(http=untracking_pool(connectionpool.HTTPConnectionPool, _HTTPConnection),
                        https=untracking_pool(connectionpool.HTTPSConnectionPool, _HTTPSConnection))
    return _classes


def untracking_pool(base: Any, connection_class: Any) -> Any:
    """A subclass of the urllib3 pool class ``base`` that makes ``connection_class`` connections and
    stops tracking each one it takes back (back in the pool, it is no longer that request's to abort)."""

    class Pool(base):  # type: ignore[misc]
        ConnectionCls = connection_class

        def _put_conn(self, conn: Any) -> None:
            if conn is not None:
                _untrack(conn)
            super()._put_conn(conn)

    Pool.__name__ = Pool.__qualname__ = f"Tracked{base.__name__}"
    return Pool


_adapter_class: list[Any] = []


def tracked_adapter(**options: Any) -> Any:
    """A ``requests`` adapter whose connections (direct, through an HTTP or a SOCKS proxy) use the tracked pools."""
    if not _adapter_class:
        from requests.adapters import HTTPAdapter

        class TrackedAdapter(HTTPAdapter):
            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                super().init_poolmanager(*args, **kwargs)
                self.poolmanager.pool_classes_by_scheme = tracked_pool_classes()

            def proxy_manager_for(self, proxy: Any, **kwargs: Any) -> Any:
                manager = super().proxy_manager_for(proxy, **kwargs)  # without PySocks, a SOCKS URL is refused here
                if not str(proxy).lower().startswith("socks"):
                    manager.pool_classes_by_scheme = tracked_pool_classes()
                else:  # SOCKS pools have connection classes of their own
                    from ._socks import socks_pool_classes

                    classes = socks_pool_classes()
                    if classes is not None:
                        manager.pool_classes_by_scheme = classes
                return manager

        _adapter_class.append(TrackedAdapter)
    return _adapter_class[0](**options)


def track_session(session: Any, **options: Any) -> Any:
    """Make a ``requests`` session's traffic abortable by the exchange it is sent in; returns the session.

    Mounts a :func:`tracked_adapter` (built with ``options``, as ``HTTPAdapter``
    takes them) for ``http://`` and ``https://``, in place of the adapters
    mounted there. Traffic sent outside any exchange goes on as before.
    """
    adapter = tracked_adapter(**options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
