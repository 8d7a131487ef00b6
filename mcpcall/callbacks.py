"""The one thread per client that runs user code, in order.

Progress callbacks, log messages, notification handlers, server-request
handlers, multi-round-trip answers and Future done-callbacks are queued here by
the reader, worker and scheduler threads, so a slow or re-entrant callback
never stalls I/O or another client's timeouts. The thread starts on first use
and stops on :meth:`CallbackRunner.close`.

User code may raise anything (``SystemExit`` included): it is logged and the
thread goes on. User code may also wait for a request of its own client from
this thread (a handler that calls a tool): while it waits, the thread keeps
running what is queued (:meth:`CallbackRunner.wait_for`), so a request whose
completion needs this thread (the next round of a multi-round-trip request, an
answer ordered after its progress) cannot deadlock.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from concurrent.futures import Future
from time import monotonic
from typing import Any, Callable

__all__ = ["CallbackRunner"]

log = logging.getLogger("mcpcall.callbacks")

_WAKE = object()


class CallbackRunner:
    """A lazily started worker thread running queued callables in FIFO order."""

    def __init__(self, name: str) -> None:
        self._name = f"mcpcall-callbacks-{name}"
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = False  # the stop marker was taken while waiting inside a callback

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on the callbacks thread; False (and not queued) after close().

        Under the lock, so nothing is ever queued behind the stop marker and lost.
        """
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put((fn, args))
        return True

    def in_callback_thread(self) -> bool:
        """True when called from the callbacks thread itself."""
        return threading.current_thread() is self._thread

    def _call(self, item: tuple[Callable[..., Any], tuple[Any, ...]]) -> None:
        fn, args = item
        try:
            fn(*args)
        except BaseException:  # user code may raise anything, SystemExit included
            log.exception("a callback raised (%s)", getattr(fn, "__qualname__", fn))

    def _run(self) -> None:
        get = self._queue.get
        while not self._stopping:
            item = get()
            if item is None:
                return
            if item is not _WAKE:
                self._call(item)

    def wait_for(self, future: Future[Any], timeout: float | None = None) -> bool:
        """On the callbacks thread: run queued callbacks until ``future`` is done.

        Returns ``future.done()`` when ``timeout`` (seconds) passes first.
        """
        if future.done():
            return True
        wake = self._queue.put
        Future.add_done_callback(future, lambda _: wake(_WAKE))  # the plain method: runs where it completes
        deadline = None if timeout is None else monotonic() + timeout
        while not future.done():
            if self._stopping:
                # Closing: nothing more runs here; just wait for the Future (close fails it).
                remaining = None if deadline is None else max(0.0, deadline - monotonic())
                with contextlib.suppress(BaseException):  # timeout or cancelled: the caller looks at the Future
                    Future.exception(future, remaining)
                break
            remaining = None if deadline is None else deadline - monotonic()
            if remaining is not None and remaining <= 0:
                break
            try:
                item = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if item is None:
                self._stopping = True
            elif item is not _WAKE:
                self._call(item)
        return future.done()

    def close(self, timeout: float = 5.0) -> None:
        """Run what is queued, then stop the thread; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(None)
        if thread is None:
            return
        if thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s still busy in a callback after %.1f s; leaving it (daemon)", self._name, timeout)
