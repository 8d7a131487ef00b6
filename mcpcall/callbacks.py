"""The one thread per client that runs user code, in order.

Progress callbacks, notification handlers and server-request handlers are
queued here by the reader threads, so a slow or re-entrant handler never stalls
I/O. The thread starts on first use and stops on :meth:`CallbackRunner.close`.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

__all__ = ["CallbackRunner"]

log = logging.getLogger("mcpcall.callbacks")

_STOP = object()


class CallbackRunner:
    """A lazily started worker thread running queued callables in FIFO order."""

    def __init__(self, name: str) -> None:
        self._name = f"mcpcall-callbacks-{name}"
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the callbacks thread; dropped after close()."""
        if self._closed:
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._closed:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put((fn, args))

    def in_callback_thread(self) -> bool:
        """True when called from the callbacks thread itself."""
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("a callback raised (%s)", getattr(fn, "__qualname__", fn))

    def close(self, timeout: float = 5.0) -> None:
        """Run what is queued, then stop the thread; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        if thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s still busy in a callback after %.1f s; leaving it (daemon)", self._name, timeout)
