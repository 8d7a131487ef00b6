"""JSON-RPC requests in flight: ids, the pending map, timeouts, cancellation, routing.

The dispatcher knows JSON-RPC, not MCP (apart from the progress and cancel
notifications every request may see). Each request gets a :class:`RequestFuture`
in a lock-guarded ``{id: entry}`` map. Whoever pops an entry first — the
response, the timeout, ``cancel()``, or the connection closing — completes the
Future; the others find nothing and do nothing. Futures are completed outside
the lock.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import threading
from concurrent.futures import Future
from time import monotonic
from typing import Any, Callable, Optional

from . import jsonrpc
from .callbacks import CallbackRunner
from .errors import ConnectionClosed, ForkedClient, MCPError, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from .jsonrpc import RequestId
from .scheduler import Deadline, get_scheduler
from .transports.base import Transport

__all__ = ["CONTINUED", "Dispatcher", "ProgressCallback", "RequestFuture"]

log = logging.getLogger("mcpcall.dispatcher")

ProgressCallback = Callable[[float, Optional[float], Optional[str]], None]
#: ``transform(result, future)``: what the Future yields, or CONTINUED.
Transform = Callable[[dict[str, Any], "RequestFuture"], Any]
#: ``on_error(exc, future)``: CONTINUED to take over (a retry), else None.
ErrorHook = Callable[[BaseException, "RequestFuture"], Any]

#: Returned by a transform that has taken over completing the Future itself.
CONTINUED = object()


class RequestFuture(Future):  # type: ignore[type-arg]
    """A Future for one request; ``cancel()`` also tells the server to stop.

    ``request_id`` is the JSON-RPC id currently carrying the request (a
    multi-round-trip request moves to a new id on each retry).
    """

    def __init__(self, method: str, context: Any = None) -> None:
        super().__init__()
        self.method = method
        #: Whatever the sender keeps with the request (the client: what a retry needs).
        self.context = context
        self.request_id: RequestId | None = None
        self._dispatcher: Dispatcher | None = None

    def cancel(self) -> bool:
        """Cancel the request: the Future ends cancelled and the server is told to stop.

        Returns False when the answer is already in hand (or being delivered).
        """
        dispatcher = self._dispatcher
        if dispatcher is None or self.request_id is None:
            return super().cancel()
        entry = dispatcher._pop(self.request_id)
        if entry is None:
            return self.done() and self.cancelled()
        cancelled = super().cancel()
        if cancelled:
            self.set_running_or_notify_cancel()
        dispatcher._transport_cancel(entry, "cancelled by the caller")
        return cancelled


class _Entry:
    """One request in flight."""

    __slots__ = (
        "cancel_on_timeout",
        "due",
        "future",
        "max_due",
        "method",
        "on_error",
        "on_progress",
        "ordered",
        "request_id",
        "reset_on_progress",
        "timeout",
        "transform",
    )

    def __init__(self, request_id: RequestId, method: str, future: RequestFuture) -> None:
        self.request_id = request_id
        self.method = method
        self.future = future
        self.transform: Transform | None = None
        self.on_error: ErrorHook | None = None
        self.timeout: float | None = None
        self.due = math.inf  # monotonic time when it times out
        self.max_due = math.inf  # the cap on ``due`` when progress resets it
        self.on_progress: ProgressCallback | None = None
        self.reset_on_progress = False
        self.cancel_on_timeout = True
        self.ordered = False


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
        self._pending: dict[RequestId, _Entry] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed: BaseException | None = None
        self._pid = os.getpid()
        # Deadlines: each entry has a ``due`` time, and one scheduler callback is armed
        # for the earliest; when it fires it expires what is overdue and re-arms.
        # That is one float per request instead of a heap entry per request.
        self._armed_at = math.inf
        self._armed: Deadline | None = None

    # -- sending ---------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        transform: Transform | None = None,
        on_error: ErrorHook | None = None,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        cancel_on_timeout: bool = True,
        future: RequestFuture | None = None,
    ) -> RequestFuture:
        """Send a request; the returned Future completes with the (transformed) result.

        ``timeout`` is in seconds (``None`` or ``inf``: no deadline). With
        ``on_progress``, a progress token equal to the request id is added to
        ``params._meta`` and progress notifications for it are passed on. With
        ``reset_timeout_on_progress`` each notification restarts the timeout,
        but never past ``max_timeout`` from the start. ``future`` continues an
        existing Future (a retry) under a new id.
        """
        if os.getpid() != self._pid:
            raise ForkedClient(
                f"this client for {self.name!r} was created in process {self._pid}; "
                "create a new client after os.fork()"
            )
        rid = next(self._ids)
        if future is None:
            future = RequestFuture(method)
        entry = _Entry(rid, method, future)
        entry.transform = transform
        entry.on_error = on_error
        entry.cancel_on_timeout = cancel_on_timeout
        if on_progress is not None:
            params = dict(params) if params else {}
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = rid
            params["_meta"] = meta
            entry.on_progress = on_progress
            # Complete through the callbacks thread, after the progress callbacks queued
            # before the answer; unless we are on that thread (it would wait on itself).
            entry.ordered = not self.callbacks.in_callback_thread()
        if timeout is not None and timeout != math.inf:
            if timeout <= 0:
                raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
            now = monotonic()
            entry.timeout = timeout
            entry.due = now + timeout
            if reset_timeout_on_progress:
                entry.reset_on_progress = True
                if max_timeout is not None:
                    entry.max_due = now + max_timeout
        future.request_id = rid
        future._dispatcher = self
        with self._lock:
            closed = self._closed
            if closed is None:
                self._pending[rid] = entry
        if closed is not None:
            future.set_exception(closed)
            return future
        if entry.due < self._armed_at:
            self._arm(entry.due)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self.transport.send(message)
        except Exception as exc:  # noqa: BLE001 - the caller sees it through the Future
            if self._pop(rid) is not None:
                future.set_exception(exc)
        return future

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no answer)."""
        if os.getpid() != self._pid:
            raise ForkedClient(f"this client for {self.name!r} was created in another process")
        self.transport.send(jsonrpc.notification(method, params))

    # -- completing --------------------------------------------------------------

    def _pop(self, rid: RequestId) -> _Entry | None:
        with self._lock:
            return self._pending.pop(rid, None)

    def _arm(self, due: float) -> None:
        superseded = self._armed
        self._armed_at = due
        self._armed = get_scheduler().schedule(max(due - monotonic(), 0.0), self._sweep)
        if superseded is not None:
            superseded.cancel()  # an earlier due time replaces it (a no-op once it has fired)

    def _sweep(self) -> None:
        """On the scheduler thread: expire what is overdue, re-arm for the next."""
        self._armed_at = math.inf
        now = monotonic()
        with self._lock:
            entries = list(self._pending.values())
        earliest = math.inf
        for entry in entries:
            if entry.due <= now:
                self._expire(entry.request_id)
            elif entry.due < earliest:
                earliest = entry.due
        if earliest < self._armed_at:
            self._arm(earliest)

    def _expire(self, rid: RequestId) -> None:
        entry = self._pop(rid)
        if entry is None:
            return
        timeout = entry.timeout or 0.0
        entry.future.set_exception(
            RequestTimeout(
                f"server {self.name!r} did not answer {entry.method} within {timeout:g} s "
                "(the request was cancelled; raise timeout= if the operation is slow)",
                method=entry.method,
                timeout=timeout,
            )
        )
        if entry.cancel_on_timeout:
            self._transport_cancel(entry, f"timed out after {timeout:g} s")

    def _transport_cancel(self, entry: _Entry, reason: str) -> None:
        if entry.cancel_on_timeout and self._closed is None:
            self.transport.cancel(entry.request_id, reason)

    def in_flight(self) -> int:
        """How many requests await an answer."""
        with self._lock:
            return len(self._pending)

    def fail_all(self, exc: BaseException) -> None:
        """Fail every pending request with ``exc`` and refuse new ones."""
        with self._lock:
            if self._closed is None:
                self._closed = exc
            entries = list(self._pending.values())
            self._pending.clear()
        armed = self._armed
        if armed is not None:
            armed.cancel()  # do not keep a closed client reachable from the scheduler
        for entry in entries:
            if not entry.future.done():
                entry.future.set_exception(exc)

    def fail_pending(self, exc: BaseException) -> None:
        """Fail what is in flight now, but keep accepting requests."""
        with self._lock:
            entries = list(self._pending.values())
            self._pending.clear()
        for entry in entries:
            entry.future.set_exception(exc)

    # -- receiving (reader threads) ----------------------------------------------

    def on_message(self, message: dict[str, Any]) -> None:
        """Route one decoded message from the transport."""
        if "method" not in message and message.get("jsonrpc") == "2.0":
            if "result" in message:
                result = message["result"]
                rid = message.get("id")
                if isinstance(result, dict) and (rid.__class__ is int or rid.__class__ is str):
                    entry = self._pop(rid)
                    if entry is None:
                        log.debug("server %r: dropped a response to unknown or finished request %r", self.name, rid)
                        return
                    self._complete(entry, result)
                    return
            elif "error" in message and jsonrpc.classify(message) == jsonrpc.RESPONSE:
                self._on_error_response(message)
                return
        kind = jsonrpc.classify(message)
        if kind == jsonrpc.NOTIFICATION:
            self._on_notification(message)
        elif kind == jsonrpc.REQUEST:
            self._on_request(message)
        else:
            log.warning("server %r sent a message that is not JSON-RPC 2.0; ignored: %.200r", self.name, message)

    def _complete(self, entry: _Entry, result: dict[str, Any]) -> None:
        if entry.ordered:
            entry.ordered = False
            self.callbacks.submit(self._complete, entry, result)
            return
        transform = entry.transform
        if transform is None:
            entry.future.set_result(result)
            return
        try:
            value = transform(result, entry.future)
        except Exception as exc:  # noqa: BLE001 - a bad result fails its own request only
            entry.future.set_exception(exc)
            return
        if value is not CONTINUED:
            entry.future.set_result(value)

    def _on_error_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        error = message["error"]
        if rid is None:
            log.warning("server %r sent an error without a request id: %.300r", self.name, error)
            return
        entry = self._pop(rid)
        if entry is None:
            log.debug("server %r: dropped an error for unknown or finished request %r", self.name, rid)
            return
        code = error.get("code")
        cls = UnsupportedVersion if code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION else RPCError
        msg = error.get("message")
        exc: BaseException = cls(
            code, msg if isinstance(msg, str) else repr(msg), error.get("data"), server=self.name, method=entry.method
        )
        if entry.on_error is not None:
            try:
                if entry.on_error(exc, entry.future) is CONTINUED:
                    return
            except Exception as hook_exc:  # noqa: BLE001 - the hook's failure is the request's
                exc = hook_exc
        entry.future.set_exception(exc)

    def _on_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method == "notifications/progress":
            self._on_progress(message.get("params"))
            return
        if method == "notifications/cancelled":
            log.debug("server %r cancelled its request: %.200r", self.name, message.get("params"))
            return
        if self.on_notification is not None:
            self.on_notification(message)

    def _on_progress(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        token = params.get("progressToken")
        if not isinstance(token, (int, str)) or isinstance(token, bool):
            return
        with self._lock:
            entry = self._pending.get(token)
        if entry is None or entry.on_progress is None:
            log.debug("server %r: progress for unknown token %r", self.name, token)
            return
        if entry.reset_on_progress and entry.timeout is not None:
            self._restart_deadline(entry)
        progress = params.get("progress")
        total = params.get("total")
        note = params.get("message")
        self.callbacks.submit(
            entry.on_progress,
            progress if isinstance(progress, (int, float)) else 0.0,
            total if isinstance(total, (int, float)) else None,
            note if isinstance(note, str) else None,
        )

    def _restart_deadline(self, entry: _Entry) -> None:
        assert entry.timeout is not None
        entry.due = min(monotonic() + entry.timeout, entry.max_due)
        if entry.due < self._armed_at:
            self._arm(entry.due)

    def _on_request(self, message: dict[str, Any]) -> None:
        if message["method"] == "ping":
            self.reply(jsonrpc.result_response(message["id"], {}))
            return
        if self.on_request is not None:
            self.on_request(message)
            return
        self.reply(jsonrpc.error_response(message["id"], jsonrpc.METHOD_NOT_FOUND, f"method not found: {message['method']}"))

    def reply(self, message: dict[str, Any]) -> None:
        """Send a response to a server request (errors are logged, not raised)."""
        try:
            self.transport.send(message)
        except MCPError as exc:
            log.debug("server %r: could not answer its request: %s", self.name, exc)

    def on_bad_message(self, error: BaseException, request_id: RequestId | None) -> None:
        """Fail the request a broken message answered, or everything in flight if unknown."""
        if request_id is not None:
            entry = self._pop(request_id)
            if entry is not None:
                entry.future.set_exception(error)
            else:
                log.debug("server %r: %s (request %r already finished)", self.name, error, request_id)
            return
        log.error("server %r: %s", self.name, error)
        if isinstance(error, ProtocolError):
            self.fail_pending(error)

    def on_close(self, error: BaseException) -> None:
        """The transport is gone: fail everything, now and later."""
        if not isinstance(error, ConnectionClosed):
            error = ConnectionClosed(f"connection to server {self.name!r} closed: {error}")
        self.fail_all(error)
