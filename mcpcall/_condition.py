"""A light stand-in for the ``threading.Condition`` every ``concurrent.futures.Future`` makes.

A ``Condition`` costs about 1.1 KB (an ``RLock``, five bound methods in its
``__dict__`` and a ``deque`` that allocates a 64-slot block even when empty):
more than half of what a pending request costs. :class:`FutureCondition` does
what ``Future`` and ``concurrent.futures.wait``/``as_completed`` ask of it
(``with``, ``acquire``/``release``, ``wait``, ``notify_all``) with the same
``RLock`` and a list of waiters made only when someone waits: about 100 bytes.

:func:`init_future` gives a Future its pending state with one; where the
running Python's ``Future`` keeps other state than this module knows, it falls
back to ``Future.__init__`` (the standard Condition).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import PENDING
from typing import Any

__all__ = ["FutureCondition", "init_future"]

_allocate_lock = threading.Lock


class FutureCondition:
    """``threading.Condition(threading.RLock())`` as far as a Future uses it."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._waiters: list[Any] | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait for :meth:`notify_all` (or ``timeout``), take the lock back."""
        lock: Any = self._lock
        if not lock._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        waiter = _allocate_lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        saved = lock._release_save()
        got = False
        try:
            if timeout is None:
                got = waiter.acquire()
            elif timeout > 0:
                got = waiter.acquire(True, timeout)
            else:
                got = waiter.acquire(False)
            return got
        finally:
            lock._acquire_restore(saved)
            if not got:
                waiters = self._waiters
                if waiters is not None:
                    try:
                        waiters.remove(waiter)
                    except ValueError:  # notified meanwhile
                        pass

    def notify_all(self) -> None:
        """Wake every waiter (the lock must be held)."""
        lock: Any = self._lock
        if not lock._is_owned():
            raise RuntimeError("cannot notify on un-acquired lock")
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            try:
                waiter.release()
            except RuntimeError:  # pragma: no cover - it timed out and is about to leave (as threading does)
                pass

    notifyAll = notify_all  # the name threading.Condition also has


_FIELDS = frozenset({"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"})
_KNOWN = set(vars(Future())) == _FIELDS


def init_future(future: Future[Any]) -> None:
    """What ``Future.__init__`` does, with a :class:`FutureCondition` (or exactly that, on an unknown Python)."""
    if not _KNOWN:  # pragma: no cover - a Python whose Future keeps other state
        Future.__init__(future)
        return
    state: Any = future
    state._condition = FutureCondition()
    state._state = PENDING
    state._result = None
    state._exception = None
    state._waiters = []
    state._done_callbacks = []
