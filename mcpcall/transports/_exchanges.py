"""Abortable HTTP exchanges: any thread can stop a request's I/O at once, without waiting.

A worker runs each request inside an :class:`Exchange` (``with exchange:``).
The urllib3 connections that mcpcall's sessions use record every socket they
open or reuse for it in that exchange, and the pool takes it back out when the
connection returns to the pool. :meth:`Exchange.abort` then shuts exactly the
sockets of that request — before its response headers, while its body streams,
and on a close-delimited stream that ``http.client`` has already detached from
its connection — and sets an event that ends any wait (a ``retry:`` delay). It
never closes a response, never takes a lock another thread holds while doing
I/O, and never touches a socket another request picked up next: the worker
that owns the response closes it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Callable

from ..forking import on_fork_in_child

__all__ = ["Exchange", "Sending", "current_exchange", "current_sending", "sending", "tracked_pool_classes"]

_current = threading.local()


def _shut(sock: Any) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)


class Exchange:
    """One request's HTTP traffic; ``abort()`` is safe from any thread, any time, more than once."""

    __slots__ = ("_on_abort", "_outer", "_sockets", "aborted", "label")

    def __init__(self, label: Any = None) -> None:
        self.label = label
        #: Set by :meth:`abort`; waits between attempts use it to end early.
        self.aborted = threading.Event()
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
    exchange = getattr(_current, "exchange", None)
    sock = getattr(connection, "sock", None)
    if exchange is None or sock is None or connection._mcpcall_sock is sock:
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


def tracked_pool_classes() -> dict[str, Any]:
    """urllib3 pool classes (by scheme) whose connections record their sockets in the current exchange."""
    if not _classes:
        from urllib3 import connection, connectionpool

        class _HTTPConnection(connection.HTTPConnection):
            _mcpcall_exchange: Any = None
            _mcpcall_sock: Any = None

            def connect(self) -> None:
                super().connect()
                _connections.add(self)
                _track(self)

            def request(self, *args: Any, **kwargs: Any) -> None:
                _track(self)  # a reused connection: its socket exists already
                super().request(*args, **kwargs)

        class _HTTPSConnection(connection.HTTPSConnection):
            _mcpcall_exchange: Any = None
            _mcpcall_sock: Any = None

            def connect(self) -> None:
                super().connect()
                _connections.add(self)
                _track(self)

            def request(self, *args: Any, **kwargs: Any) -> None:
                _track(self)
                super().request(*args, **kwargs)

        class _HTTPPool(connectionpool.HTTPConnectionPool):
            ConnectionCls = _HTTPConnection

            def _put_conn(self, conn: Any) -> None:
                if conn is not None:
                    _untrack(conn)  # back in the pool: no longer this request's to abort
                super()._put_conn(conn)

        class _HTTPSPool(connectionpool.HTTPSConnectionPool):
            ConnectionCls = _HTTPSConnection

            def _put_conn(self, conn: Any) -> None:
                if conn is not None:
                    _untrack(conn)
                super()._put_conn(conn)

        _classes.update(http=_HTTPPool, https=_HTTPSPool)
    return _classes
