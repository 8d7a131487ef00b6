"""JSON-RPC requests in flight: ids, the pending map, deadlines, cancellation, routing.

The dispatcher knows JSON-RPC, not MCP (apart from the progress and cancel
notifications every request may see). Each request gets a :class:`RequestFuture`
in a lock-guarded ``{id: entry}`` map. Whoever pops an entry first — the
response, the deadline, ``cancel()``, or the connection closing — completes the
Future; the others find nothing and do nothing. Futures are completed outside
the lock.

Threads: responses arrive on a transport's reader thread, deadlines fire on
the process-wide scheduler thread. Neither runs user code: a RequestFuture's
done-callbacks are handed to the client's callbacks thread, and so are
progress callbacks and (through the client) everything a server sends.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import threading
from concurrent.futures import Future, InvalidStateError
from os import getpid
from time import monotonic
from typing import Any, Callable, Optional

from ._condition import KNOWN_FUTURE, FutureCondition
from .callbacks import CallbackRunner, log_exception
from .errors import ConnectionClosed, InvalidRequest, MCPError, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from .forking import Owned
from .jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    RequestId,
    error_response,
    excerpt,
    notification,
    result_response,
)
from .scheduler import Deadline, get_scheduler
from .transports.base import Transport

__all__ = ["CONTINUED", "WARNINGS_PER_KIND", "Dispatcher", "ProgressCallback", "RequestFuture"]

log = logging.getLogger("mcpcall.dispatcher")

ProgressCallback = Callable[[float, Optional[float], Optional[str]], None]
#: ``transform(result, future)``: what the Future yields, or CONTINUED.
Transform = Callable[[dict[str, Any], "RequestFuture"], Any]
#: ``on_error(exc, future)``: CONTINUED to take over (a retry), else None.
ErrorHook = Callable[[BaseException, "RequestFuture"], Any]

#: How many warnings of one kind (a transport's ``on_warning(text, kind)``) a connection logs as warnings;
#: the rest of that kind go to debug level. A server repeating one fault must not flood the logs.
WARNINGS_PER_KIND = 10

#: Returned by a transform or error hook that has taken over completing the Future itself.
CONTINUED = object()


class RequestFuture(Future):  # type: ignore[type-arg]
    """A Future for one request; ``cancel()`` also tells the server to stop.

    ``request_id`` is the JSON-RPC id currently carrying the request (a
    multi-round-trip request moves to a new id on each round). Callbacks added
    with :meth:`add_done_callback` run on the client's callbacks thread (or at
    once, on the caller's thread, when the Future is already done), never on
    an mcpcall reader, worker or scheduler thread.
    """

    def __init__(self, method: str, context: Any = None, runner: CallbackRunner | None = None) -> None:
        if KNOWN_FUTURE:  # Future.__init__, inline, with a Condition a tenth of the size: 100,000 may be pending
            self._condition = FutureCondition()
            self._state = "PENDING"
            self._result = None
            self._exception = None
            self._waiters: list[Any] = []
            self._done_callbacks: list[Callable[[Future[Any]], object]] = []
        else:  # pragma: no cover - a Python whose Future keeps other state
            Future.__init__(self)
        self.method = method
        #: Whatever the sender keeps with the request (the client: what a retry needs).
        self.context = context
        self.request_id: RequestId | None = None
        #: Set (on the callbacks thread) once every progress callback queued before the answer has run.
        self.progress_drained: threading.Event | None = None
        self._dispatcher: Dispatcher | None = None
        self._runner = runner
        #: When the Future was completed (``time.monotonic()``), whoever waits for it and whenever.
        self.done_at: float | None = None

    def set_result(self, result: Any) -> None:
        if self.done_at is None:
            self.done_at = monotonic()  # before waking anyone who may read it
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if self.done_at is None:
            self.done_at = monotonic()
        super().set_exception(exception)

    def add_done_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(future)`` when done: on the client's callbacks thread, or now if already done."""
        runner = self._runner
        if runner is None or self.done():
            super().add_done_callback(fn)
            return

        def handoff(future: Future[Any]) -> None:
            if runner.submit(fn, future):
                return
            # The client is closed. close() fails everything it owns before its callbacks thread
            # stops, so this is a Future completed later: run the callback here, unless "here"
            # is one of mcpcall's own threads, which never run user code.
            if threading.current_thread().name.startswith("mcpcall-"):
                return
            try:
                fn(future)
            except Exception:  # noqa: BLE001 - as concurrent.futures does: a failing callback is logged
                log_exception(log, logging.ERROR, "a done-callback of %s raised", repr(future))

        super().add_done_callback(handoff)

    #: A check of the result still to run (:meth:`check_on_read`), the error it found, and who waits for
    #: its verdict (:meth:`add_checked_callback`). Class defaults: a Future without a check pays nothing for them.
    _check: Callable[[], None] | None = None
    _check_error: BaseException | None = None
    _checked_callbacks: list[Callable[[Future[Any]], object]] | None = None

    def check_on_read(self, check: Callable[[], None]) -> None:
        """Have ``check()`` (it raises if the result is bad) run on the thread that first reads the result.

        A check whose cost the server controls (``outputSchema``) then runs on
        the caller's thread, not on the reader thread that completes the
        Future, where it would hold up every other answer of the client. Its
        error is what :meth:`result` raises and :meth:`exception` returns, for
        every reader; two threads reading at once may both run it.
        """
        self._check = check

    @property
    def check_pending(self) -> bool:
        """Whether reading the result runs its check now (set, and not run yet by any reader). Once the Future is
        done, it only goes from True to False."""
        return self._check is not None

    def add_checked_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(future)`` once the outcome is final, the result's check included: reading it then runs no check.

        For a Future done with no check still to run, ``fn`` runs at once, on
        this thread. When a check is still to run, ``fn`` runs right after it,
        on the thread that runs it (the first to read the result): waiting for a
        verdict never moves the check (its cost is the server's to choose) onto
        this thread. A Future not done yet passes ``fn`` on when it is done, on
        the callbacks thread (see :meth:`add_done_callback`). An error ``fn``
        raises is logged.
        """
        if not self.done():
            self.add_done_callback(lambda _done: self.add_checked_callback(fn))
            return
        with self._condition:
            # Only a result is checked: a Future cancelled or failed after its check was set (a cancel between the
            # reader's transform and its settle) is final as it is, and no reader will ever run that check.
            if self._check is not None and self._state == "FINISHED" and self._exception is None:
                if self._checked_callbacks is None:
                    self._checked_callbacks = []
                self._checked_callbacks.append(fn)
                return
        _call_logged(fn, self)

    def _checked(self) -> BaseException | None:
        check = self._check
        if check is not None:
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - the result's own error, for every reader
                self._check_error = exc
            with self._condition:  # after the error is set: a reader (or a callback added) that sees None sees the verdict
                self._check = None
                waiting, self._checked_callbacks = self._checked_callbacks, None
            for fn in waiting or ():
                _call_logged(fn, self)
        return self._check_error

    def result(self, timeout: float | None = None) -> Any:
        """The result; waiting on the callbacks thread keeps that thread's queue running."""
        if self._state == "FINISHED" and self._exception is None and self._check is None and self._check_error is None:
            # Final, and set after its result: read without the lock (the common case, an answer already in).
            return self._result
        dispatcher = self._dispatcher
        if dispatcher is not None and self._state == "PENDING":
            dispatcher.transport.reading()  # someone waits who does not read for itself: the transport's threads do
        runner = self._runner
        if runner is not None and runner.in_callback_thread() and not self.done():
            runner.wait_for(self, timeout)
            timeout = 0
        value = super().result(timeout)
        if self._check is not None or self._check_error is not None:
            error = self._checked()
            if error is not None:
                raise error
        return value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The exception, as :meth:`result` waits."""
        dispatcher = self._dispatcher
        if dispatcher is not None and self._state == "PENDING":
            dispatcher.transport.reading()
        runner = self._runner
        if runner is not None and runner.in_callback_thread() and not self.done():
            runner.wait_for(self, timeout)
            timeout = 0
        error = super().exception(timeout)
        if error is None and not self.cancelled() and (self._check is not None or self._check_error is not None):
            return self._checked()
        return error

    def cancel(self) -> bool:
        """Cancel the request: the Future ends cancelled and the server is told to stop.

        Returns False when the Future is already done.
        """
        dispatcher = self._dispatcher
        entry = dispatcher._pop(self.request_id) if dispatcher is not None and self.request_id is not None else None
        if self.done():
            cancelled = self.cancelled()
        else:
            if self.done_at is None:
                self.done_at = monotonic()
            cancelled = super().cancel()
            if cancelled:
                with contextlib.suppress(RuntimeError):  # another thread cancelled it at the same moment
                    self.set_running_or_notify_cancel()  # wakes concurrent.futures.wait() and as_completed()
        if entry is not None and dispatcher is not None:
            dispatcher._transport_cancel(entry, "cancelled by the caller")
        return cancelled

    def settle(self, result: Any) -> bool:
        """Set the result unless the Future is already done (a lost race); True if set."""
        if self.done_at is None:
            self.done_at = monotonic()  # as set_result does
        if not KNOWN_FUTURE:  # pragma: no cover - a Python whose Future keeps other state
            try:
                Future.set_result(self, result)
            except InvalidStateError:
                return False
            return True
        # What Future.set_result does, without its frame and that of an empty _invoke_callbacks (every answer's path).
        cond = self._condition
        with cond:
            state = self._state
            if state != "PENDING" and state != "RUNNING":  # cancelled or finished: the race is lost
                return False
            self._result = result
            self._state = "FINISHED"
            for waiter in self._waiters:  # concurrent.futures.wait() and as_completed()
                waiter.add_result(self)
            cond.notify_all()
        if self._done_callbacks:
            self._invoke_callbacks()  # type: ignore[attr-defined]
        return True

    def fail(self, exc: BaseException) -> bool:
        """Set the exception unless the Future is already done; True if set."""
        try:
            self.set_exception(exc)
        except InvalidStateError:
            return False
        return True


def _call_logged(fn: Callable[[Future[Any]], object], future: Future[Any]) -> None:
    """``fn(future)``; an error it raises is logged, as ``concurrent.futures`` does for a done-callback."""
    try:
        fn(future)
    except Exception:  # noqa: BLE001 - user code: logged
        log_exception(log, logging.ERROR, "a callback of %s raised", repr(future))  # text: no record keeps the Future


class _Entry:
    """One request in flight."""

    __slots__ = (
        "cancel_on_timeout",
        "due",
        "future",
        "max_due",
        "max_timeout",
        "method",
        "on_error",
        "on_progress",
        "progressed",
        "request_id",
        "reset_on_progress",
        "skipped",
        "timeout",
        "transform",
    )

    def __init__(self, request_id: RequestId, method: str, future: RequestFuture) -> None:
        self.request_id = request_id
        self.method = method
        self.future = future
        self.transform: Transform | None = None
        self.on_error: ErrorHook | None = None
        self.timeout: float | None = None  # what the caller asked for (shown in the error)
        self.due = math.inf  # monotonic time when it times out
        self.max_due = math.inf  # the cap on ``due`` when progress resets it
        self.max_timeout: float | None = None  # that cap as the caller gave it (shown in the error)
        self.on_progress: ProgressCallback | None = None
        self.reset_on_progress = False
        self.progressed = False  # a progress notification has reset ``due``
        self.cancel_on_timeout = True
        self.skipped = 0  # the transport's count of skipped lines when the request was sent


class Dispatcher:
    """Matches responses to requests for one connection.

    ``on_request(message)`` is called (on the reader thread) for each request
    the server sends, except ``ping``, which is answered here;
    ``on_notification(message)`` for each notification except progress and
    cancellation. Both must hand user code to the callbacks runner.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        callbacks: CallbackRunner,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        on_notification: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.transport = transport
        self.name = name
        self.callbacks = callbacks
        self.on_request = on_request
        self.on_notification = on_notification
        self.owner = Owned()
        self._pending: dict[RequestId, _Entry] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed: BaseException | None = None
        # Deadlines: each entry has a ``due`` time, and one scheduler callback is armed
        # for the earliest; when it fires it expires what is overdue and re-arms.
        # ``_dues`` is a heap of ``(due, id)`` of the entries with a deadline, so that a
        # sweep looks only at what is due (not at every pending request: N requests with
        # spread-out deadlines would cost N * N / 2 looks under the lock). Entries that
        # were answered stay in it until they surface or outnumber the pending ones (see
        # request); one whose ``due`` progress moved later is pushed again when it surfaces.
        self._dues: list[tuple[float, RequestId]] = []
        self._compact_at = 1024  # the size of _dues at which the next push rebuilds it from the pending entries
        self._armed_at = math.inf
        self._armed: Deadline | None = None
        self._warned: dict[str, int] = {}  # on_warning's count by kind (under _lock)

    # -- sending ---------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        deadline: float | None = None,
        transform: Transform | None = None,
        on_error: ErrorHook | None = None,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        cancel_on_timeout: bool = True,
        future: RequestFuture | None = None,
    ) -> RequestFuture:
        """Send a request; the returned Future completes with the (transformed) result.

        ``timeout`` is in seconds (``None`` or ``inf``: no deadline); ``deadline``
        (a ``time.monotonic()`` value) overrides when it ends, ``timeout`` then
        only names it in the error (a request that continues an earlier one).
        With ``on_progress`` or ``reset_timeout_on_progress``, a progress token
        equal to the request id is added to ``params._meta`` (without one a
        server sends no progress); ``on_progress`` gets each notification.
        With ``reset_timeout_on_progress`` each notification restarts the
        timeout, but never past ``max_timeout`` from the start. ``future``
        continues an existing Future (a retry) under a new id.
        """
        owner = self.owner
        if getpid() != owner.pid:  # owner.check, inline: every request's path (the one system call a call makes
            owner.check(self.name)  # for it; Caller.send compares the generation, which a fork in C does not count)
        if timeout is not None and timeout != math.inf and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        rid = next(self._ids)
        if future is None:
            future = RequestFuture(method, runner=self.callbacks)
        entry = _Entry(rid, method, future)
        entry.transform = transform
        entry.on_error = on_error
        entry.cancel_on_timeout = cancel_on_timeout
        entry.skipped = self.transport.skipped()
        if on_progress is not None or reset_timeout_on_progress:
            params = dict(params) if params else {}
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = rid
            params["_meta"] = meta
        if on_progress is not None:
            entry.on_progress = on_progress
            if future.progress_drained is None:
                # The Future completes on the reader at once (nothing waits on the callbacks thread
                # for it); the barrier tells a waiter when the progress queued before it has run.
                future.progress_drained = drained = threading.Event()
                callbacks = self.callbacks

                def barrier(_: Future[Any]) -> None:
                    if not callbacks.submit(drained.set):
                        drained.set()

                Future.add_done_callback(future, barrier)
        if timeout is not None and timeout != math.inf:
            entry.timeout = timeout
            if deadline is not None and not reset_timeout_on_progress:
                entry.due = deadline
            else:
                now = monotonic()
                entry.due = deadline if deadline is not None else now + timeout
            if reset_timeout_on_progress:
                entry.reset_on_progress = True
                if max_timeout is not None:
                    entry.max_due = now + max_timeout
                    entry.max_timeout = max_timeout
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        future.request_id = rid
        future._dispatcher = self
        with self._lock:
            closed = self._closed
            if closed is None:
                pending = self._pending
                pending[rid] = entry
                if entry.due != math.inf:
                    dues = self._dues
                    if len(dues) < self._compact_at:
                        heapq.heappush(dues, (entry.due, rid))
                    else:  # mostly answered ones: keep only the pending (a pass per len(pending) + 1024 pushes)
                        dues = self._dues = [(e.due, r) for r, e in pending.items() if e.due != math.inf]
                        heapq.heapify(dues)
                        self._compact_at = 2 * len(dues) + 1024
                    if entry.due < self._armed_at:
                        self._arm_locked(entry.due)
        if closed is not None:
            future.fail(closed)
            return future
        if future._state != "PENDING":  # done: a continued request cancelled or timed out meanwhile
            self._pop(rid)
            return future
        try:
            self.transport.send(message)
        except BaseException as exc:  # noqa: BLE001 - the caller sees it through the Future
            popped = self._pop(rid)
            if popped is not None:
                future.fail(self._send_error(exc, method))
                if not isinstance(exc, Exception):
                    # Ctrl-C while the caller ran the request's exchange itself (HTTP, caller_waits): it may
                    # have reached the server, which is told, as a Ctrl-C while waiting tells it.
                    self._transport_cancel(popped, "interrupted by the caller")
        return future

    def _send_error(self, exc: BaseException, method: str) -> BaseException:
        """What a failed send means to the caller: a message that cannot be encoded is InvalidRequest."""
        if isinstance(exc, (TypeError, ValueError, RecursionError)) and not isinstance(exc, MCPError):
            error = InvalidRequest(f"{method} to server {self.name!r} cannot be sent: {exc}")
            error.__cause__ = exc
            return error
        return exc

    def notify(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> None:
        """Send a notification (no answer); ``timeout`` bounds waiting for an HTTP acknowledgement."""
        self.owner.check(self.name)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        self.transport.send(notification(method, params), timeout=timeout)

    # -- deadlines (the scheduler thread decides; it never waits or runs user code) --

    def _pop(self, rid: RequestId) -> _Entry | None:
        with self._lock:
            return self._pending.pop(rid, None)

    def _arm_locked(self, due: float) -> None:
        """Arm the sweep for ``due`` (earlier than the armed one); under ``_lock``."""
        superseded = self._armed
        self._armed_at = due
        self._armed = get_scheduler().schedule(max(due - monotonic(), 0.0), self._sweep)
        if superseded is not None:
            superseded.cancel()  # a no-op once it has fired

    def _sweep(self) -> None:
        """On the scheduler thread: expire what is overdue, re-arm for the next."""
        now = monotonic()
        expired = []
        with self._lock:
            self._armed_at = math.inf
            self._armed = None
            pending = self._pending
            dues = self._dues
            while dues:
                due, rid = dues[0]
                entry = pending.get(rid)
                if entry is None:  # answered, cancelled or failed already
                    heapq.heappop(dues)
                elif entry.due > due:  # progress moved its deadline later
                    heapq.heapreplace(dues, (entry.due, rid))
                elif due <= now:
                    heapq.heappop(dues)
                    del pending[rid]
                    expired.append(entry)
                else:
                    break
            if dues and self._closed is None:
                self._arm_locked(dues[0][0])
        for entry in expired:
            self._expire(entry)

    def _expire(self, entry: _Entry) -> None:
        timeout = entry.timeout or 0.0
        if entry.progressed and entry.max_timeout is not None and entry.due >= entry.max_due:
            # Progress kept resetting the timeout until the cap ended it: the cap is the real limit.
            limit = entry.max_timeout
            within = (f"within {limit:g} s (max_timeout; the timeout of {timeout:g} s was reset by progress)",
                      "raise max_timeout= if the operation is slow")
        elif entry.progressed:
            limit = timeout
            within = (f"within {timeout:g} s of its last progress notification",
                      "raise timeout= if the server reports progress less often")
        else:
            limit = timeout
            within = (f"within {timeout:g} s", "raise timeout= if the operation is slow")
        note = self.skipped_note(entry.skipped, entry.request_id)
        entry.future.fail(
            RequestTimeout(
                f"server {self.name!r} did not answer {entry.method} {within[0]}{'; ' + note if note else ''} "
                f"(the request was cancelled; {within[1]})",
                method=entry.method,
                timeout=limit,
                note=note,
            )
        )
        self._transport_cancel(entry, f"timed out after {limit:g} s")

    def skipped_note(self, since: int, request_id: RequestId) -> str:
        """What the transport skipped since its count was ``since`` (what the peer wrote instead), or what request
        ``request_id`` waited for (HTTP: its connect), or ""."""
        try:
            note = self.transport.skipped_note(since, request_id)
        except Exception:  # noqa: BLE001 - the timeout is reported whatever the transport says
            return ""
        return note or ""

    def _transport_cancel(self, entry: _Entry, reason: str) -> None:
        # Transport.cancel never blocks: it queues a notice or shuts a socket (it runs on the scheduler).
        # Without cancel_on_timeout the server is not told, but the transport still lets go of the
        # request's I/O (an HTTP worker blocked on a silent probe is freed).
        if self._closed is None:
            self._tell_transport(entry, reason)

    def _tell_transport(self, entry: _Entry, reason: str) -> None:
        try:
            self.transport.cancel(entry.request_id, reason, notify=entry.cancel_on_timeout)
        except Exception as exc:  # noqa: BLE001 - a cancel that cannot be sent changes nothing for the caller
            self.log(logging.DEBUG, "server %r: cancel of %r failed: %s", self.name, entry.request_id, str(exc))

    def log(self, level: int, fmt: str, *args: Any, logger: str = "") -> None:
        """Log from any thread; from an I/O or scheduler thread the record is emitted on the callbacks thread.

        Logging handlers are user code (a slow one must not stall a server's I/O);
        nothing is queued when the level is off for ``logger`` (default: this module's).
        """
        self.callbacks.log(logging.getLogger(logger) if logger else log, level, fmt, *args)  # the one place

    def defer(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on the callbacks thread (for transports with user code to run)."""
        return self.callbacks.submit(fn, *args)

    @property
    def closed_error(self) -> BaseException | None:
        """Why the dispatcher takes no more requests (the transport closed, or the client did), else None."""
        return self._closed

    def in_flight(self) -> int:
        """How many requests await an answer."""
        return len(self._pending)  # one read of a dict's size: no lock needed

    def fail_all(self, exc: BaseException) -> None:
        """Fail every pending request with ``exc`` and refuse new ones (the connection is gone)."""
        self._end(exc, cancel=None)

    def close(self, exc: BaseException, reason: str = "the client was closed") -> None:
        """The client is closing: cancel at the server what is in flight, then fail it with ``exc``.

        Each pending request is cancelled through the transport first, as a
        timeout cancels one (stdio: ``notifications/cancelled``; Streamable
        HTTP: its response stream is closed), so that a server that finishes
        its work before leaving is not kept busy for nobody and can exit as
        soon as the transport closes. A request that must not be cancelled
        (``cancel_on_timeout=False``: ``initialize``) is only let go of.
        Then, as :meth:`fail_all`, refuse new requests.
        """
        self._end(exc, cancel=reason)

    def _end(self, exc: BaseException, cancel: str | None) -> None:
        with self._lock:
            if self._closed is None:
                self._closed = exc
            entries = list(self._pending.values())
            self._pending.clear()
            self._dues = []
            armed, self._armed = self._armed, None
            self._armed_at = -math.inf  # never arm again
        if armed is not None:
            armed.cancel()  # do not keep a closed client reachable from the scheduler
        if cancel is not None:
            for entry in entries:  # first: whoever learns of the failure finds the server told already
                self._tell_transport(entry, cancel)
        for entry in entries:
            entry.future.fail(exc)

    def fail_pending(self, exc: BaseException) -> None:
        """Fail what is in flight now, but keep accepting requests."""
        with self._lock:
            entries = list(self._pending.values())
            self._pending.clear()
            self._dues = []
        for entry in entries:
            entry.future.fail(exc)

    # -- receiving (reader threads) ----------------------------------------------

    def on_message(self, message: dict[str, Any]) -> None:
        """Route one decoded message from the transport."""
        if "method" not in message:
            rid = message.get("id")
            if message.get("jsonrpc") == "2.0" and (rid.__class__ is int or rid.__class__ is str):
                result = message.get("result")
                if result.__class__ is dict and "error" not in message:
                    entry = self._pop(rid)
                    if entry is None:
                        self.log(logging.DEBUG, "server %r: dropped a response to unknown or finished request %r", self.name, rid)
                    else:
                        self._complete(entry, result)
                    return
                error = message.get("error")
                if "result" not in message and isinstance(error, dict) and _is_code(error.get("code")):
                    self._on_error_response(rid, error)
                    return
                self._malformed(rid, message)
                return
            error = message.get("error")
            if rid is None and isinstance(error, dict):
                self.log(logging.DEBUG, "server %r sent an error without a request id: %.300r", self.name, error)
                return
            self.log(logging.DEBUG, "server %r sent a message that is not JSON-RPC 2.0; ignored: %.200r", self.name, message)
            return
        method = message["method"]
        if not isinstance(method, str) or message.get("jsonrpc") != "2.0":
            self.log(logging.DEBUG, "server %r sent a message that is not JSON-RPC 2.0; ignored: %.200r", self.name, message)
            return
        if "id" not in message:
            self._on_notification(method, message)
            return
        rid = message["id"]
        if rid.__class__ is int or rid.__class__ is str:
            self._on_request(method, message)
        else:
            self.log(logging.DEBUG, "server %r sent a request with a bad id; ignored: %.200r", self.name, message)

    def _malformed(self, rid: RequestId, message: dict[str, Any]) -> None:
        """A response to ``rid`` that breaks JSON-RPC: that request fails now, not at its timeout."""
        entry = self._pop(rid)
        if entry is None:
            self.log(logging.DEBUG, "server %r: malformed response for unknown request %r: %.200r", self.name, rid, message)
            return
        if "result" in message and "error" in message:
            why = "both a result and an error"
        elif "result" in message:
            why = f"a result that is {type(message['result']).__name__}, not an object"
        elif "error" in message:
            why = "an error that is not an object with an integer code"
        else:
            why = "neither a result nor an error"
        entry.future.fail(ProtocolError(f"server {self.name!r} answered {entry.method} with {why}: {excerpt(message)}"))

    def _complete(self, entry: _Entry, result: dict[str, Any]) -> None:
        transform = entry.transform
        if transform is None:
            entry.future.settle(result)
            return
        try:
            value = transform(result, entry.future)
        except Exception as exc:  # noqa: BLE001 - a bad result fails its own request only
            entry.future.fail(exc)
            return
        if value is not CONTINUED:
            entry.future.settle(value)

    def _on_error_response(self, rid: RequestId, error: dict[str, Any]) -> None:
        entry = self._pop(rid)
        if entry is None:
            self.log(logging.DEBUG, "server %r: dropped an error for unknown or finished request %r", self.name, rid)
            return
        code = error["code"]
        cls = UnsupportedVersion if code == UNSUPPORTED_PROTOCOL_VERSION else RPCError
        msg = error.get("message")
        exc: BaseException = cls(
            code, msg if isinstance(msg, str) else excerpt(msg), error.get("data"), server=self.name, method=entry.method
        )
        if entry.on_error is not None:
            try:
                if entry.on_error(exc, entry.future) is CONTINUED:
                    return
            except Exception as hook_exc:  # noqa: BLE001 - the hook's failure is the request's
                exc = hook_exc
        entry.future.fail(exc)

    def _on_notification(self, method: str, message: dict[str, Any]) -> None:
        if method == "notifications/progress":
            self._on_progress(message.get("params"))
            return
        if method == "notifications/cancelled":
            self.log(logging.DEBUG, "server %r cancelled its request: %.200r", self.name, message.get("params"))
            return
        if self.on_notification is not None:
            self.on_notification(message)

    def _on_progress(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        token = params.get("progressToken")
        if token.__class__ is not int and token.__class__ is not str:
            return
        with self._lock:
            entry = self._pending.get(token)
            if entry is not None and entry.reset_on_progress and entry.timeout is not None:
                # Only ever later: the armed sweep finds it not yet due and re-arms for it.
                entry.due = max(entry.due, min(monotonic() + entry.timeout, entry.max_due))
                entry.progressed = True
        if entry is None:
            self.log(logging.DEBUG, "server %r: progress for unknown token %r", self.name, token)
            return
        if entry.on_progress is None:  # the token was sent only to reset the timeout
            return
        progress = params.get("progress")
        total = params.get("total")
        note = params.get("message")
        self.callbacks.offer(  # coalesced: a newer progress replaces the one of this request still queued
            entry.on_progress,
            progress if isinstance(progress, (int, float)) else 0.0,
            total if isinstance(total, (int, float)) else None,
            note if isinstance(note, str) else None,
            key=entry.future,
        )

    def _on_request(self, method: str, message: dict[str, Any]) -> None:
        if method == "ping":
            self.reply(result_response(message["id"], {}))
            return
        if self.on_request is not None:
            self.on_request(message)
            return
        self.reply(error_response(message["id"], METHOD_NOT_FOUND, f"method not found: {method}"))

    def reply(self, message: dict[str, Any]) -> None:
        """Send a response to a server request (errors are logged, not raised).

        An answer that cannot be encoded (a handler returned a datetime) still
        answers the server: with an internal error saying why.
        """
        try:
            self.transport.send(message)
        except MCPError as exc:
            self.log(logging.DEBUG, "server %r: could not answer its request: %s", self.name, str(exc))
        except (TypeError, ValueError, RecursionError) as exc:
            self.log(logging.WARNING, "server %r: the answer to its request %r cannot be sent as JSON: %s",
                     self.name, message.get("id"), str(exc))
            if "error" not in message:
                fallback = error_response(message.get("id"), INTERNAL_ERROR, f"the client's answer cannot be sent as JSON: {exc}")
                try:
                    self.transport.send(fallback)
                except MCPError as again:
                    self.log(logging.DEBUG, "server %r: could not answer its request: %s", self.name, str(again))

    def on_bad_message(self, error: BaseException, request_id: RequestId | None) -> None:
        """Fail the request a broken message answered, or everything in flight if unknown."""
        if request_id is not None:
            entry = self._pop(request_id)
            if entry is not None:
                entry.future.fail(error)
            else:
                self.log(logging.DEBUG, "server %r: %s (request %r already finished)", self.name, str(error), request_id)
            return
        self.log(logging.DEBUG, "server %r: %s", self.name, str(error))
        if isinstance(error, ProtocolError):
            self.fail_pending(error)

    def on_warning(self, text: str, kind: str = "") -> None:
        """Log ``text`` as a warning, away from an I/O thread (logging handlers are user code).

        The one rule for every transport: the first :data:`WARNINGS_PER_KIND` of a
        ``kind`` are warnings (the last of them says so), the rest debug records.
        """
        with self._lock:
            count = self._warned[kind] = self._warned.get(kind, 0) + 1
        if count > WARNINGS_PER_KIND:
            self.log(logging.DEBUG, "%s", text)
            return
        if count == WARNINGS_PER_KIND:
            text += " (further warnings of this kind are logged at debug level)"
        self.log(logging.WARNING, "%s", text)

    def on_close(self, error: BaseException) -> None:
        """The transport is gone: fail everything, now and later."""
        if not isinstance(error, ConnectionClosed):
            error = ConnectionClosed(f"connection to server {self.name!r} closed: {error}")
        self.fail_all(error)


def _is_code(value: Any) -> bool:
    return value.__class__ is int
