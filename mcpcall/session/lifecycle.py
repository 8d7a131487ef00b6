"""What a client owns and how it ends: closing, the garbage collector, interpreter exit, fork.

:class:`Connection` holds everything a close must reach — the transport, the
dispatcher, the callbacks thread, calls between two rounds — and no reference
to the client. The client's finalizer holds only this; so does every thread.
A client nobody references is therefore freed by reference counting at once,
and its finalizer closes what it owned, with a ``ResourceWarning`` as an
unclosed file gives. ``close_all()`` closes every open connection at exit. In
a forked child a connection only lets go (see :mod:`mcpcall.forking`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import warnings
from concurrent.futures import Future
from typing import Any, Callable

from ..callbacks import CallbackRunner, log_exception
from ..dispatcher import Dispatcher, RequestFuture
from ..errors import ConnectionClosed
from ..forking import Owned
from ..transports.base import Transport

__all__ = ["Connection", "close_all", "collected"]

log = logging.getLogger("mcpcall.client")


class Connection:
    """What a client owns and must close."""

    def __init__(self, transport: Transport, dispatcher: Dispatcher, callbacks: CallbackRunner, name: str) -> None:
        self.transport = transport
        self.dispatcher = dispatcher
        self.callbacks = callbacks
        self.name = name
        self.owner = Owned()
        self.closed = False
        self._lock = threading.Lock()
        # Futures between two rounds of a multi-round request (or before a retry): in no pending
        # map, so close() fails them from here.
        self._between: set[RequestFuture] = set()
        #: Called once when closing, before the callbacks thread stops (subscriptions, tasks).
        self.closers: list[Callable[[], None]] = []

    def hold(self, future: RequestFuture) -> None:
        """``future`` is between rounds until it is sent again or done; close() fails it meanwhile."""
        with self._lock:
            closed = self.closed
            if not closed:
                self._between.add(future)
        if closed:
            future.fail(ConnectionClosed(f"client for server {self.name!r} was closed"))
            return
        Future.add_done_callback(future, self._release)  # runs where it completes: our code only

    def _release(self, future: Future[Any]) -> None:
        with self._lock:
            self._between.discard(future)

    def switch_transport(self, transport: Transport, timeout: float) -> None:
        """Replace the transport (auto's fallback to HTTP+SSE) and start the new one.

        A connection closed meanwhile (by another thread) starts nothing: the new
        transport is closed and ConnectionClosed raised. One closed while the new
        transport starts has closed it already (close() closes the current one).
        """
        with self._lock:
            if self.closed:
                transport.close()
                raise ConnectionClosed(f"client for server {self.name!r} was closed")
            old = self.dispatcher.transport
            self.dispatcher.transport = transport
            self.transport = transport
        old.close()
        transport.start(self.dispatcher, timeout=timeout)
        if self.closed:  # closed during start(): close() may have seen the transport before it had anything to end
            transport.terminate()

    def open(self) -> bool:
        """Count this connection among the open ones (closed at interpreter exit); False if closed already."""
        with self._lock:
            if self.closed:
                return False
            _open.add(self)
            return True

    def close(self, *, terminate: bool = False) -> None:
        """Close everything; ``terminate``: without the graceful steps (a connect that failed)."""
        if self.owner.forked:
            # The parent's threads may have held any of our locks at the fork; its server,
            # session and buffered files are its own. Let go of everything, touch nothing.
            self.closed = True
            _open.discard(self)
            return
        with self._lock:
            if self.closed:
                return
            self.closed = True
            between = list(self._between)
            self._between.clear()
        try:
            closed = ConnectionClosed(f"client for server {self.name!r} was closed")
            self.dispatcher.close(closed)  # cancels what is in flight at the server, then fails it
            for future in between:  # before the callbacks thread stops: their done-callbacks still run
                future.fail(closed)
            for closer in self.closers:
                try:
                    closer()
                except Exception:  # noqa: BLE001 - closing goes on
                    # close() may run on any thread (the garbage collector's choice): never emit on an I/O one.
                    self.callbacks.log(log, logging.DEBUG, "server %r: a closer failed", self.name, exc_info=True)
            if terminate:
                self.dispatcher.transport.terminate()
            else:
                self.dispatcher.transport.close()
        finally:
            self.callbacks.close()
            _open.discard(self)


#: Every connection not yet closed (closed at interpreter exit).
_open: set[Connection] = set()


def collected(connection: Connection) -> None:
    """The client of ``connection`` became unreachable without close(): close it, with a warning."""
    if connection.closed:
        return
    if connection.owner.forked:
        connection.close()
        return
    # Close first, warn after: under ``-W error::ResourceWarning`` the warning is raised as an
    # exception, which must not keep the server running until the interpreter exits.
    try:
        # Closing can take seconds (the stdio close ladder), and the collector may run anywhere.
        try:
            threading.Thread(target=connection.close, name=f"mcpcall-close-{connection.name}", daemon=True).start()
        except RuntimeError:  # interpreter shutting down: no new threads
            connection.close()
    finally:
        warnings.warn(
            f"unclosed mcpcall client for server {connection.name!r} (close it, or use it in a with block)",
            ResourceWarning,
            stacklevel=3,  # the line that dropped the last reference (under weakref.finalize.__call__)
        )


def close_all() -> None:
    """Close every open client of this process (runs at interpreter exit; a forked child only lets go)."""
    for connection in list(_open):
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            log_exception(log, logging.DEBUG, "closing the client for %r at exit failed", connection.name)


atexit.register(close_all)
