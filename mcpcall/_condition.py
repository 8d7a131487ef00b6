"""A light stand-in for the ``threading.Condition`` every ``concurrent.futures.Future`` makes.

A ``Condition`` costs about 1.1 KB (an ``RLock``, five bound methods in its
``__dict__`` and a ``deque`` that allocates a 64-slot block even when empty):
more than half of what a pending request costs. :class:`FutureCondition` does
what ``Future`` and ``concurrent.futures.wait``/``as_completed`` ask of it
(``with``, ``acquire``/``release``, ``wait``, ``notify_all``): it is an ``RLock``
itself (a subclass of the C one, so taking it runs no Python code) with a list
of waiters made only when someone waits: about 80 bytes.

:func:`init_future` gives a Future its pending state with one; where the
running Python's ``Future`` keeps other state than this module knows, it falls
back to ``Future.__init__`` (the standard Condition).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import PENDING
from typing import Any

__all__ = ["KNOWN_FUTURE", "FutureCondition", "init_future"]

_allocate_lock = threading.Lock
#: The C RLock (its pure-Python twin where there is none: the same methods, only slower).
_RLock: Any = getattr(threading, "_CRLock", None) or threading._PyRLock  # type: ignore[attr-defined]


class FutureCondition(_RLock):  # type: ignore[misc]
    """``threading.Condition(threading.RLock())`` as far as a Future uses it.

    It *is* the RLock (a subclass of the C one): ``with``, ``acquire`` and
    ``release`` run no Python code, and the only field of its own is the
    list of waiters, made when someone waits.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[Any] | None = None

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait for :meth:`notify_all` (or ``timeout``), take the lock back."""
        if not self._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        waiter = _allocate_lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        saved = self._release_save()
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
            self._acquire_restore(saved)
            if not got:
                waiters = self._waiters
                if waiters is not None:
                    try:
                        waiters.remove(waiter)
                    except ValueError:  # notified meanwhile
                        pass

    def notify_all(self) -> None:
        """Wake every waiter (the lock must be held)."""
        if not self._is_owned():
            raise RuntimeError("cannot notify on un-acquired lock")
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            try:
                waiter.release()
            except RuntimeError:  # pragma: no cover - it timed out and is about to leave (as threading does)
                pass

    notifyAll = notify_all  # the name threading.Condition also has


_FIELDS = frozenset({"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"})
#: True when ``Future.__init__`` sets exactly these fields (what :func:`init_future` and RequestFuture do instead).
KNOWN_FUTURE = set(vars(Future())) == _FIELDS


def init_future(future: Future[Any]) -> None:
    """What ``Future.__init__`` does, with a :class:`FutureCondition` (or exactly that, on an unknown Python)."""
    if not KNOWN_FUTURE:  # pragma: no cover - a Python whose Future keeps other state
        Future.__init__(future)
        return
    state: Any = future
    state._condition = FutureCondition()
    state._state = PENDING
    state._result = None
    state._exception = None
    state._waiters = []
    state._done_callbacks = []
