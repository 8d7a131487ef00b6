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

What a server sends unasked is bounded here (a flood must not grow memory
without limit). There are two ways in:

- :meth:`CallbackRunner.submit`: must run (Future done-callbacks, the answers
  to the server's requests, the next round of a multi-round-trip request,
  mcpcall's own bookkeeping). Never dropped: each is bounded by what the
  client itself has in flight, or by its caller (the server's requests are
  capped in :mod:`mcpcall.session.inbound`, which answers the rest with an
  error at once).
- :meth:`CallbackRunner.offer`: may be dropped (notifications). With a
  ``key`` (progress of one request, one kind of ``list_changed``), a newer
  offer replaces the arguments of the one still queued under that key and
  not yet run: only the latest matters, and there is at most one entry per
  key, so keyed entries are not counted against the bound. Without a key, at
  most ``max_queued`` wait at a time; what comes past that is dropped and
  counted, and one warning per burst says how many (it is itself emitted on
  this thread: logging handlers are user code).

Once :meth:`CallbackRunner.close` began, droppable entries still queued run for
:data:`CLOSE_GRACE` seconds more, no longer: a slow callback behind a flood (a
thousand log messages queued) does not hold ``close()`` up for the whole
backlog; what is left is dropped, counted, and reported in one warning. What
must run still runs.

:meth:`CallbackRunner.log` emits a log record from any thread: at once on a
caller's or this thread, offered (droppable, like a notification) when the
current thread is one of mcpcall's I/O or scheduler threads (``mcpcall-*``),
which never run user code.

:func:`log_later` is for the one thread that serves every client (the
scheduler), which has no client to hand a record to and must never wait: the
record is kept in a small process-wide buffer (:data:`MAX_DEFERRED_RECORDS`;
past that the oldest go, counted) and emitted by whichever callbacks thread
next runs something, between two callbacks (holding no lock of mcpcall's), or
by :func:`flush_deferred`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import traceback
from collections import deque
from concurrent.futures import Future
from time import monotonic
from typing import Any, Callable

__all__ = ["CLOSE_GRACE", "DEFAULT_MAX_QUEUED", "MAX_DEFERRED_RECORDS", "CallbackRunner", "flush_deferred", "log_exception", "log_later",
           "on_io_thread", "with_traceback"]

log = logging.getLogger("mcpcall.callbacks")

_WAKE = object()

#: How many droppable (unkeyed) notifications may wait for the callbacks thread at a time.
DEFAULT_MAX_QUEUED = 1000

#: How long after close() began droppable entries still queued are run (the rest are dropped).
CLOSE_GRACE = 1.0

_CALLBACKS_PREFIX = "mcpcall-callbacks-"

#: How many records of :func:`log_later` wait for a callbacks thread at a time.
MAX_DEFERRED_RECORDS = 16

_deferred: deque[tuple[logging.Logger, int, str, tuple[Any, ...]]] = deque(maxlen=MAX_DEFERRED_RECORDS)
_deferred_lock = threading.Lock()
_deferred_lost = 0


def log_later(logger: logging.Logger, level: int, msg: str, *args: Any, exc_info: bool = False) -> None:
    """Keep a record for the next callbacks thread to emit; never blocks (for the scheduler thread).

    ``exc_info``: add the exception being handled, as text (:func:`with_traceback`). Past
    :data:`MAX_DEFERRED_RECORDS` waiting, the oldest is dropped and counted.
    """
    global _deferred_lost
    if not logger.isEnabledFor(level):
        return
    args = as_text(args)
    if exc_info:
        msg, args = with_traceback(msg, args)
    with _deferred_lock:
        if len(_deferred) == MAX_DEFERRED_RECORDS:
            _deferred_lost += 1
        _deferred.append((logger, level, msg, args))


def with_traceback(msg: str, args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """``msg`` and ``args`` followed by the exception being handled, its traceback and causes, as text.

    Never the exception itself in a record (as ``exc_info`` or an argument): a
    handler that keeps records (pytest's capture, ``logging.handlers.MemoryHandler``,
    a queue handler) would keep its traceback, whose frames hold what raised it
    (a client, its transport, a registry) for as long as it keeps the record.
    """
    return f"{msg}\n%s", (*args, traceback.format_exc().rstrip())


def as_text(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A record's ``args`` with every exception among them as its text: for the reason :func:`with_traceback`
    gives, a record must not hold an exception (nor, through it, its traceback's frames)."""
    for arg in args:
        if isinstance(arg, BaseException):
            return tuple(str(item) if isinstance(item, BaseException) else item for item in args)
    return args


def log_exception(logger: logging.Logger, level: int, msg: str, *args: Any) -> None:
    """``logger.exception``'s record, with the traceback as text (:func:`with_traceback`), at ``level``."""
    if logger.isEnabledFor(level):
        msg, args = with_traceback(msg, as_text(args))
        logger.log(level, msg, *args)


def flush_deferred() -> None:
    """Emit the records :func:`log_later` kept, here (a thread that may run user code, holding no mcpcall lock)."""
    global _deferred_lost
    with _deferred_lock:
        records = list(_deferred)
        _deferred.clear()
        lost, _deferred_lost = _deferred_lost, 0
    for logger, level, msg, args in records:
        _emit_guarded(logger, level, msg, args)
    if lost:
        _emit_guarded(log, logging.ERROR, "%d more records from mcpcall's scheduler thread were dropped (too many at "
                      "once)", (lost,))


def _emit_guarded(logger: logging.Logger, level: int, msg: str, args: tuple[Any, ...]) -> None:
    """Emit one record; a logging filter or handler (user code) that raises stops neither the caller nor the rest."""
    try:
        logger.log(level, msg, *args)
    except BaseException:  # noqa: BLE001 - user code may raise anything, SystemExit included
        with contextlib.suppress(BaseException):
            log_exception(log, logging.ERROR, "a logging filter or handler raised on a record of mcpcall's")


def _forget_deferred() -> None:  # a forked child does not emit its parent's records
    global _deferred_lost
    _deferred.clear()
    _deferred_lost = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_deferred)


def on_io_thread() -> bool:
    """True on one of mcpcall's own threads that must not run user code (readers, writers, stderr
    drains, HTTP workers, the scheduler): every ``mcpcall-*`` thread but a callbacks thread."""
    name = threading.current_thread().name
    return name.startswith("mcpcall-") and not name.startswith(_CALLBACKS_PREFIX)


class _Offer:
    """A droppable entry; ``args`` may be replaced (under the runner's lock) until it is taken."""

    __slots__ = ("args", "fn", "key")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Any) -> None:
        self.fn = fn
        self.args = args
        self.key = key


class CallbackRunner:
    """A lazily started worker thread running queued callables in FIFO order."""

    def __init__(self, name: str, *, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        self._name = f"{_CALLBACKS_PREFIX}{name}"
        self.server = name
        self.max_queued = max_queued
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = False  # the stop marker was taken while waiting inside a callback
        self._keyed: dict[Any, _Offer] = {}  # key -> its entry still queued
        self._offered = 0  # unkeyed offers queued and not yet taken
        self._dropped: dict[str, int] = {}  # what was dropped since the last report, by kind
        self._report_queued = False
        self._closed_at = 0.0  # monotonic time close() began
        self._lost_at_close = 0  # droppable entries not run: still queued CLOSE_GRACE after close() began

    def _put(self, item: Any) -> None:
        """Under the lock: queue ``item``, starting the thread on first use."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put(item)

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on the callbacks thread; False (and not queued) after close().

        Never dropped (see the module's docstring for what may be queued here).
        Under the lock, so nothing is ever queued behind the stop marker and lost.
        """
        with self._lock:
            if self._closed:
                return False
            self._put((fn, args))
        return True

    def offer(self, fn: Callable[..., Any], *args: Any, key: Any = None, what: str = "notifications dropped") -> bool:
        """Run ``fn(*args)`` on the callbacks thread unless too much is waiting already.

        With ``key`` (hashable, from a small set the client controls): replaces the
        arguments of the entry queued under ``key`` and not yet run, if any, else
        queues one. Without: dropped (and counted) when ``max_queued`` such entries
        wait, counted under ``what`` in the drop warning. Returns False when
        dropped or after close().
        """
        with self._lock:
            if self._closed:
                return False
            if key is not None:
                queued = self._keyed.get(key)
                if queued is not None:
                    queued.args = args
                    return True
                self._keyed[key] = item = _Offer(fn, args, key)
            elif self._offered >= self.max_queued:
                self._count_drop(what)
                return False
            else:
                self._offered += 1
                item = _Offer(fn, args, None)
            self._put(item)
        return True

    def count_drop(self, what: str) -> None:
        """Count one thing not run because the client is too far behind (``what``: "server requests
        refused", ...); one warning per burst says how many of each."""
        with self._lock:
            if not self._closed:
                self._count_drop(what)

    def _count_drop(self, what: str) -> None:
        """Under the lock."""
        self._dropped[what] = self._dropped.get(what, 0) + 1
        if not self._report_queued:  # one report per burst, queued after what waits now
            self._report_queued = True
            self._put((self._report_drops, ()))

    def _report_drops(self) -> None:
        with self._lock:
            dropped, self._dropped = self._dropped, {}
            self._report_queued = False
        counts = ", ".join(f"{n} {what}" for what, n in dropped.items())
        log.warning("server %r: %s: the client's callbacks (on_log, progress, listeners, handlers) fell too far "
                    "behind (at most %d notifications wait); a slow callback should hand its work to a thread of its own",
                    self.server, counts, self.max_queued)

    def queued(self) -> int:
        """How many entries wait (an estimate, for tests and diagnostics)."""
        return self._queue.qsize()

    def log(self, logger: logging.Logger, level: int, msg: str, *args: Any, exc_info: bool = False) -> None:
        """``logger.log(level, msg, *args)``, never on an mcpcall I/O or scheduler thread.

        There it is handed to the callbacks thread (logging handlers are user code)
        as a droppable entry (:meth:`offer`): an I/O thread logs about what a server
        sends, so a flood of records is bounded like a flood of notifications, and
        what is dropped is counted in the same warning. Nothing is queued when
        ``level`` is off for ``logger``, and nothing is emitted from an I/O thread
        after close(). ``exc_info``: add the exception being handled, as text (:func:`with_traceback`).
        """
        if not logger.isEnabledFor(level):
            return
        args = as_text(args)
        if exc_info:
            msg, args = with_traceback(msg, args)
        if not on_io_thread():
            logger.log(level, msg, *args)
            return
        self.offer(self._emit, logger, level, msg, args, what="log records dropped")

    @staticmethod
    def _emit(logger: logging.Logger, level: int, msg: str, args: tuple[Any, ...]) -> None:
        logger.log(level, msg, *args)

    def in_callback_thread(self) -> bool:
        """True when called from the callbacks thread itself."""
        thread = self._thread  # started on first use; before that no thread is it
        return thread is not None and thread.ident == threading.get_ident()

    def _call(self, item: Any) -> None:
        if _deferred:  # records kept for any callbacks thread (log_later): between two callbacks, no lock held
            flush_deferred()
        if item.__class__ is _Offer:
            with self._lock:  # taken: later offers under its key queue a new entry
                fn, args = item.fn, item.args
                if item.key is None:
                    self._offered -= 1
                elif self._keyed.get(item.key) is item:
                    del self._keyed[item.key]
                closed_at = self._closed_at
            if closed_at and monotonic() - closed_at > CLOSE_GRACE:
                self._lost_at_close += 1  # closing, and this fell too far behind: not run
                return
        else:
            fn, args = item
        try:
            fn(*args)
        except BaseException:  # noqa: BLE001 - user code may raise anything, SystemExit included
            log_exception(log, logging.ERROR, "a callback raised (%s)", str(getattr(fn, "__qualname__", fn)))

    def _run(self) -> None:
        get = self._queue.get
        while not self._stopping:
            item = get()
            if item is None:
                break
            if item is not _WAKE:
                self._call(item)
        if self._lost_at_close:  # this thread's last act: nothing runs after it
            _emit_guarded(log, logging.WARNING, "server %r: %d notifications still waiting for the client's callbacks "
                          "(on_log, progress, listeners) were dropped: the client was closed %.1f s before and a "
                          "callback was still that far behind", (self.server, self._lost_at_close, CLOSE_GRACE))

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
        """Run what is queued (droppable entries for :data:`CLOSE_GRACE` seconds at most), then stop the thread;
        idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closed_at = monotonic()
            thread = self._thread
            if thread is not None:
                self._queue.put(None)
        if thread is None:
            return
        if thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s still busy in a callback after %.1f s; leaving it (daemon)", self._name, timeout)
