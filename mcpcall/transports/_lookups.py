"""Name lookups a request can give up on: ``getaddrinfo`` on short-lived helper threads, a few at a time.

``socket.getaddrinfo`` cannot be interrupted: a dead DNS server or a slow
resolver path holds the calling thread for as long as the resolver likes. A
worker that resolves a host name through :func:`resolve` hands the lookup to a
helper thread and waits for whichever comes first: the answer, its exchange's
abort (the request's deadline, its cancel, ``close()``), or the connect
timeout. If it gives up, it raises at once and the helper finishes on its own
(it owns nothing but the answer nobody reads any more).

At most :data:`LIMIT` helpers run in the process; more lookups wait in line
(each within its own request's deadline), so a flood of requests to a host
whose lookups hang cannot pile threads up. A host that is an IP address needs
no lookup: it is resolved on the calling thread, no helper is started. Nothing
is cached: each connection resolves its host anew, as it would without this.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import socket
import threading
from typing import Any

from ..forking import on_fork_in_child

__all__ = ["LIMIT", "LookupTimeout", "is_address", "resolve"]

#: Helper threads that may run name lookups at once in the process.
LIMIT = 8

#: The name of every helper thread.
THREAD_NAME = "mcpcall-lookup"


class LookupTimeout(socket.gaierror):
    """A name lookup that did not finish within the connect timeout (``errno`` is ``EAI_AGAIN``)."""


def is_address(host: str) -> bool:
    """True if ``host`` is an IPv4 or IPv6 address (nothing to look up)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return True
    return False


class _Lookup:
    """One call of ``getaddrinfo``, and its outcome once ``finished``."""

    __slots__ = ("args", "done", "error", "finished", "result")

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args
        self.done = threading.Event()  # set when it finished, and by an abort of the exchange waiting for it
        self.finished = False
        self.result: list[Any] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = socket.getaddrinfo(*self.args)  # looked up on the module: a test may replace it
        except BaseException as exc:  # noqa: BLE001 - the waiting worker raises it
            self.error = exc
        self.finished = True
        self.done.set()


class _Helpers:
    """The helper threads and the lookups waiting for one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Lookup] = collections.deque()
        self._threads = 0

    def submit(self, lookup: _Lookup) -> None:
        with self._lock:
            self._waiting.append(lookup)
            if self._threads >= LIMIT:
                return  # a helper takes it when one is free
            self._threads += 1
        try:
            threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True).start()
        except BaseException as exc:
            with self._lock:
                self._threads -= 1
            self.withdraw(lookup)
            if isinstance(exc, RuntimeError):  # "can't start new thread": an error of the connect, as urllib3's are
                raise OSError(errno.EAGAIN, f"cannot start a thread for the name lookup ({exc})") from None
            raise

    def withdraw(self, lookup: _Lookup) -> None:
        """Take ``lookup`` out of the line if no helper has started it (nobody waits for it any more)."""
        with self._lock, contextlib.suppress(ValueError):
            self._waiting.remove(lookup)

    def _serve(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._threads -= 1
                    return
                lookup = self._waiting.popleft()
            lookup.run()
            del lookup  # the next wait in line must not keep the answer alive

    def running(self) -> int:
        """How many helper threads there are (for tests)."""
        with self._lock:
            return self._threads

    def forget(self) -> None:
        """In a forked child: the parent's helpers do not exist here, nor does anyone who waited for them."""
        self._lock = threading.Lock()
        self._waiting = collections.deque()
        self._threads = 0


_HELPERS = _Helpers()
on_fork_in_child(_HELPERS, _HELPERS.forget)


def resolve(exchange: Any, timeout: float | None, host: str, port: Any, family: int = 0, kind: int = 0) -> list[Any]:
    """``socket.getaddrinfo(host, port, family, kind)``, given up when ``exchange`` is aborted or after ``timeout`` s.

    Given up: raises ``OSError(ECONNABORTED)`` (aborted; what an aborted connect
    raises) or :class:`LookupTimeout` (timed out), and leaves ``exchange.unresolved`` set to ``host``, which
    explains a timeout.
    """
    if is_address(host):
        return socket.getaddrinfo(host, port, family, kind)
    lookup = _Lookup((host, port, family, kind))
    exchange.unresolved = host
    undo = exchange.on_abort(lookup.done.set)
    try:
        if not exchange.aborted.is_set():
            _HELPERS.submit(lookup)
            lookup.done.wait(timeout)
    finally:
        undo()
    if not lookup.finished:
        _HELPERS.withdraw(lookup)
        if exchange.aborted.is_set():
            raise OSError(errno.ECONNABORTED, "the exchange was aborted during the name lookup")
        raise LookupTimeout(getattr(socket, "EAI_AGAIN", -3), f"the name lookup did not finish within {timeout:g} s")
    exchange.unresolved = None
    error, lookup.error = lookup.error, None
    if error is not None:
        try:
            raise error
        finally:
            error = None
    return lookup.result
