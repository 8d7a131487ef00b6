"""One thread that fires every deadline in the process.

A request timeout is an entry in a heap, not a thread: :meth:`Scheduler.schedule`
pushes ``(when, callback)`` and returns a :class:`Deadline` that can be
cancelled. The thread ``mcpcall-scheduler`` sleeps until the earliest entry is
due and runs its callback. It serves every client in the process, so nothing on
it may wait: callbacks are mcpcall's own short functions that decide (fail a
Future, queue a cancel notice, shut a socket) and hand any other work off.
User code never runs here: a Future's done-callbacks go to its client's
callbacks thread.

A callback that raises is a bug in mcpcall; its record is not emitted here
(logging handlers are user code, and may be slow or re-enter a client): it
goes to :func:`~mcpcall.callbacks.log_later`, a small bounded buffer that the
next callbacks thread to run anything emits. Nothing here waits for it.

Cancelled entries stay in the heap until they surface or until they outnumber
the live ones, when the heap is rebuilt; so a million short requests with long
timeouts do not pile up a million dead entries.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from typing import Callable

from .callbacks import log_later

__all__ = ["Deadline", "Scheduler", "get_scheduler"]

log = logging.getLogger("mcpcall.scheduler")


class Deadline:
    """A scheduled callback; ``cancel()`` makes sure it never runs (unless it already has)."""

    __slots__ = ("_scheduler", "callback", "seq", "when")

    def __init__(self, when: float, seq: int, callback: Callable[[], None], scheduler: Scheduler) -> None:
        self.when = when
        self.seq = seq
        self.callback: Callable[[], None] | None = callback
        self._scheduler = scheduler

    def __lt__(self, other: Deadline) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)

    def cancel(self) -> None:
        """Drop the callback; cheap, and safe to call more than once or after it fired."""
        if self.callback is not None:
            self.callback = None
            self._scheduler._cancelled()


class Scheduler:
    """A heap of deadlines served by one daemon thread, started on first use."""

    def __init__(self, name: str = "mcpcall-scheduler") -> None:
        self._name = name
        self._heap: list[Deadline] = []
        self._cond = threading.Condition(threading.Lock())
        self._seq = itertools.count()
        self._dead = 0
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Run ``callback`` on the scheduler thread ``delay`` seconds from now."""
        entry = Deadline(time.monotonic() + delay, next(self._seq), callback, self)
        with self._cond:
            heap = self._heap
            heapq.heappush(heap, entry)
            if heap[0] is entry:
                if self._thread is None:
                    self._start()
                self._cond.notify()
        return entry

    def _cancelled(self) -> None:
        with self._cond:
            self._dead += 1
            if self._dead > 1024 and self._dead * 2 > len(self._heap):
                self._heap = [e for e in self._heap if e.callback is not None]
                heapq.heapify(self._heap)
                self._dead = 0

    def pending(self) -> int:
        """How many live deadlines are waiting (for tests and diagnostics)."""
        with self._cond:
            return sum(1 for e in self._heap if e.callback is not None)

    def _start(self) -> None:
        thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                heap = self._heap
                while True:
                    if not heap:
                        cond.wait()
                        heap = self._heap
                        continue
                    first = heap[0]
                    if first.callback is None:
                        heapq.heappop(heap)
                        self._dead = max(0, self._dead - 1)
                        continue
                    wait = first.when - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(heap)
                        callback = first.callback
                        first.callback = None
                        break
                    cond.wait(wait)
                    heap = self._heap
            try:
                callback()
            except BaseException:  # noqa: BLE001 - the one thread every client's deadlines need must not die
                log_later(log, logging.ERROR, "a scheduled callback failed", exc_info=True)
            # Not kept until the next deadline fires (which may be never): it holds its owner, a closed client's
            # dispatcher perhaps, and this thread lives as long as the process.
            del callback, first


_scheduler = Scheduler()


def get_scheduler() -> Scheduler:
    """The process-wide scheduler."""
    return _scheduler


def _after_fork_in_child() -> None:
    # The parent's thread does not exist in the child; start afresh.
    global _scheduler
    _scheduler = Scheduler()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
