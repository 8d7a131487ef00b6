"""An in-process transport: the "server" is a Python function. For tests and examples.

``MemoryTransport(serve)`` calls ``serve(message, reply)`` on its own server
thread for each message the client sends; ``reply(message)`` hands a message
back, delivered on a reader thread just as a real transport would.
:meth:`MemoryTransport.disconnect` plays a server that goes away.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from ..errors import ConnectionClosed
from .base import Receiver, Transport

__all__ = ["MemoryTransport", "Reply", "Serve"]

Reply = Callable[[dict[str, Any]], None]
Serve = Callable[[dict[str, Any], Reply], None]



class MemoryTransport(Transport):
    """Messages go to ``serve`` on one thread and come back on another."""

    def __init__(self, serve: Serve, *, name: str = "memory") -> None:
        self.name = name
        self._serve = serve
        self._to_server: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._to_client: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._receiver: Receiver | None = None
        self._threads: list[threading.Thread] = []
        self._gone: ConnectionClosed | None = None
        self._lock = threading.Lock()
        self.sent: list[dict[str, Any]] = []

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        self._receiver = receiver
        for target, role in ((self._server_loop, "server"), (self._reader_loop, "reader")):
            thread = threading.Thread(target=target, name=f"mcpcall-{role}-{self.name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        with self._lock:
            if self._gone is not None:
                raise self._gone
            self.sent.append(message)
        self._to_server.put(message)

    def reply(self, message: dict[str, Any]) -> None:
        """Deliver ``message`` to the client (callable from any thread)."""
        self._to_client.put(message)

    def _server_loop(self) -> None:
        while True:
            message = self._to_server.get()
            if message is None:
                return
            self._serve(message, self.reply)

    def _reader_loop(self) -> None:
        receiver = self._receiver
        assert receiver is not None
        while True:
            message = self._to_client.get()
            if message is None:
                return
            if isinstance(message, BaseException):
                receiver.on_close(message)
                return
            receiver.on_message(message)

    def disconnect(self, reason: str = "the server went away") -> None:
        """Act out a server that disappears: pending requests fail with ConnectionClosed."""
        exc = ConnectionClosed(f"server {self.name!r}: {reason}")
        with self._lock:
            if self._gone is None:
                self._gone = exc
        self._to_client.put(exc)

    def close(self) -> None:
        with self._lock:
            if self._gone is None:
                self._gone = ConnectionClosed(f"client for server {self.name!r} is closed")
        self._to_server.put(None)
        self._to_client.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5.0)
