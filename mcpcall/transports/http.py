"""Remote servers over Streamable HTTP (both eras).

Threads (each named ``mcpcall-<role>-<server>``):

- ``http`` workers, a bounded pool started on demand: each POSTs one request
  and reads its reply, a JSON body or an SSE stream that may carry progress
  notifications and server requests before the response. Callers only queue.
- ``listen`` (legacy era): the GET stream for messages the server starts on
  its own; a 405 means the server offers none. ``notifications/initialized``
  (the last step of connecting) returns once that stream is open or refused,
  within its deadline: a stateful server drops a request (an elicitation) it
  sends while no GET stream is open, so a call made right after ``connect()``
  must find the stream there.

Notifications and responses to server requests are POSTed by the calling
thread (they are answered at once with 202). A request is cancelled by
aborting its exchange (modern) or with ``notifications/cancelled`` plus the
abort (legacy eras). A stream that breaks before its answer is resumed with
``Last-Event-ID`` after the server's ``retry:`` delay, capped at
:data:`MAX_RETRY_SECONDS`; the wait ends early on timeout, cancel or close.

Redirects are followed only within the origin of the server URL; a server
cannot send our headers and credentials elsewhere.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .. import jsonrpc
from ..errors import ConnectionClosed, HTTPError, MCPError, ProtocolError, SessionExpired
from ..headers import HeaderParams, param_headers, standard_headers
from ..protocol import META_VERSION
from ..scheduler import get_scheduler
from ..sse import LargeEvent, SSEStream
from ._exchanges import Exchange
from ._http_base import ACK_TIMEOUT, HTTPBase, Job, _short, body_chunks, error_in_body, excerpt
from .base import Receiver, Transport
from .httpsse import SSETransport

__all__ = ["MAX_RETRY_SECONDS", "HTTPTransport", "SSETransport"]

log = logging.getLogger("mcpcall.http")

MAX_RESUMES = 10
DEFAULT_RETRY_MS = 500  # before resuming a stream whose server named no retry delay
#: The longest a server's ``retry:`` makes us wait before resuming (a cancel, timeout or close ends it sooner).
MAX_RETRY_SECONDS = 30.0
_LINGER_SECONDS = 0.05
_LISTEN_MAX_DELAY = 30.0
_DELETE_SECONDS = 2.0
#: How long close() waits at most for the cancels queued before it to be posted, before its DELETE.
_NOTICE_FLUSH_SECONDS = 1.0
#: How long connect() waits at most for a legacy session's GET stream to open (never past its deadline).
GET_OPEN_WAIT = 2.0


def _retry_seconds(retry_ms: int | None) -> float:
    return min((retry_ms if retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0, MAX_RETRY_SECONDS)


def _answers(message: Any, request_id: Any) -> bool:
    """True when ``message`` (or a batch) holds the response to ``request_id``."""
    items = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and "method" not in m and m.get("id") == request_id for m in items)


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable()


def _linger(response: Any, seconds: float) -> bool:
    """Give each further read of a stream ``seconds`` (urllib3 resets the timeout on reuse)."""
    raw = getattr(response, "raw", None)
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return False
    sock.settimeout(seconds)
    return True


class HTTPTransport(HTTPBase):
    """Streamable HTTP: one POST per message; replies as JSON or an SSE stream.

    Legacy era: ``Mcp-Session-Id`` from a successful initialize on every
    request, a GET stream for server-initiated messages, resumption of broken
    streams with ``Last-Event-ID``, DELETE on close. A 404 for our session fails
    that request with :class:`SessionExpired` and sets :attr:`session_lost`;
    the client then starts a new session before the next request. Modern era:
    POST only, with ``Mcp-Method``/``Mcp-Name`` and the ``Mcp-Param-*``
    headers of :attr:`tool_headers`.

    ``allow_fallback`` (``transport="auto"``) lets the client try the HTTP+SSE
    transport when this one is refused; ``transport="streamable-http"`` does not.
    """

    def __init__(self, url: str, *, allow_fallback: bool = True, **options: Any) -> None:
        super().__init__(url, **options)
        self.session_id: str | None = None
        self.session_lost = False
        self.era: str | None = None
        self.protocol_version: str | None = None
        #: Tool name -> its ``x-mcp-header`` parameters (filled in by the client's list_tools).
        self.tool_headers: dict[str, HeaderParams] = {}
        self.allow_fallback = allow_fallback
        self._listener: threading.Thread | None = None
        self._listen_ready = threading.Event()  # the GET stream is open, refused or failed (the session's)
        self._listen_exchange = Exchange("GET stream")  # the listener's current GET (under _lock)
        self._listen_wake = threading.Event()  # a new session or close(): the listener stops waiting to ask again
        # Cancels queued for a worker and not posted yet: close() lets them go out before its DELETE,
        # which would otherwise overtake them (a POST for a session that is gone: a 404, server errors).
        self._notices = 0
        self._notices_posted = threading.Condition(threading.Lock())
        self._options = dict(options)

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        self._receiver = receiver
        self._session = self._open_session()

    def negotiated(self, era: str, version: str) -> None:
        self.era = era
        self.protocol_version = version
        self.session_lost = False

    def _start_listener(self) -> threading.Event:
        """After ``notifications/initialized`` (legacy): open the GET stream for server messages.

        Returns an event set once the stream's first answer came (open or
        refused), its first attempt failed, or the transport closed. A listener
        still running belongs to a session that ended (a new one was just
        initialized): its stream, or its wait before asking again (a server's
        ``retry:``, up to 30 s), ends now, and it asks for the new session's stream.
        """
        with self._lock:
            if self._closing.is_set():
                return self._listen_ready
            ready = self._listen_ready = threading.Event()
            if self._listener is not None and self._listener.is_alive():
                self._listen_wake.set()
                self._listen_exchange.abort()
                return ready
            self._listener = threading.Thread(target=self._listen, args=(ready,), name=f"mcpcall-listen-{self.name}",
                                              daemon=True)
        self._listener.start()
        return ready

    def fallback(self) -> Transport | None:
        """The legacy HTTP+SSE transport for the same URL (only with ``transport="auto"``)."""
        return SSETransport(self.url, **self._options) if self.allow_fallback else None

    # -- headers -----------------------------------------------------------------

    def _headers(self, message: dict[str, Any] | None, *, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"Accept": accept}
        headers.update(self.extra_headers)
        params = message.get("params") if message is not None else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        if isinstance(version, str) and message is not None:
            headers["MCP-Protocol-Version"] = version
            headers.update(standard_headers(message))
            if message.get("method") == "tools/call" and isinstance(params, dict):
                spec = self.tool_headers.get(params.get("name", ""))
                if spec:
                    headers.update(param_headers(spec, params.get("arguments")))
        else:
            if self.protocol_version is not None and self.era == "legacy":
                headers["MCP-Protocol-Version"] = self.protocol_version
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
        return headers

    # -- sending -------------------------------------------------------------------

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        # Encoded and given headers here, on the caller's thread: what cannot be sent fails the call at once.
        data = jsonrpc.encode(message)
        headers = self._headers(message)
        headers["Content-Type"] = "application/json"
        if "method" in message and "id" in message:
            self._submit(Job(message, data, headers, message.get("id")))
            return
        # A notification or a response: answered at once with 202; sent from this thread, in order
        # (initialized must be acknowledged before the next request), bounded by ``timeout``.
        started = time.monotonic()
        self.acknowledged(Job(message, data, headers, None), timeout, self._post_now)
        if message.get("method") == "notifications/initialized" and self.era == "legacy":
            # Connecting ends once the GET stream is open or refused, or after a short wait (never past
            # ``timeout``, which may be math.inf): a server or proxy that holds the SSE headers back until
            # the first event must not make every connect take its whole deadline.
            ready = self._start_listener()
            left = (ACK_TIMEOUT if timeout is None else timeout) - (time.monotonic() - started)
            wait = min(GET_OPEN_WAIT, max(0.0, left))
            if not ready.wait(wait) and not self._closing.is_set():
                log.info("server %r: the GET stream did not answer within %.3g s; connecting without waiting for it "
                         "(requests the server sends before it opens may be lost)", self.name, wait)

    def _post_now(self, job: Job) -> None:
        what = job.method
        response = self._http("POST", self.url, headers=job.headers, data=job.data, what=what, read_timeout=ACK_TIMEOUT)
        try:
            status = response.status_code
            if status >= 400:
                body = self.excerpt_of(response)
                raise HTTPError(
                    f"server {self.name!r} answered HTTP {status} to {what}: {excerpt(body)}", status=status, body=excerpt(body)
                )
            self.read_body(response, what)  # bounded, and the connection goes back to the pool
        finally:
            response.close()

    def cancel(self, request_id: Any, reason: str, *, notify: bool = True) -> None:
        if self.era == "legacy" and notify:
            # Legacy servers take a closed stream as a network problem, not a cancel.
            notice = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            with self._notices_posted:
                self._notices += 1
            try:
                self._submit(Job(notice, jsonrpc.encode(notice), {**self._headers(notice), "Content-Type": "application/json"}, None))
            except MCPError:
                self._notice_done()
        super().cancel(request_id, reason, notify=notify)

    def _run_job(self, job: Job) -> None:
        if job.request_id is None:  # a notice queued by cancel()
            try:
                self._post_now(job)
            except MCPError as exc:
                self._log(logging.DEBUG, "server %r: %s", self.name, str(exc))
            finally:
                self._notice_done()
            return
        self._exchange(job)

    def _notice_done(self) -> None:
        with self._notices_posted:
            self._notices -= 1
            if self._notices <= 0:
                self._notices_posted.notify_all()

    def _exchange(self, job: Job) -> None:
        method = job.method
        exchange = job.exchange
        response = self._http("POST", self.url, headers=job.headers, data=job.data, what=method)
        try:
            resume = self._reply(response, job)
        finally:
            response.close()
        attempts = 0
        while resume is not None:
            attempts += 1
            if attempts > MAX_RESUMES:
                raise ConnectionClosed(f"server {self.name!r} kept dropping the stream for {method}; gave up")
            last_id, retry_ms = resume
            if exchange.aborted.wait(_retry_seconds(retry_ms)):
                return  # cancelled, timed out or closed while waiting
            if not _header_safe(last_id):
                raise ProtocolError(f"server {self.name!r} gave the stream for {method} an event id that cannot "
                                    "be sent back in a header; it cannot be resumed")
            headers = self._headers(None, accept="text/event-stream")
            headers["Last-Event-ID"] = last_id
            response = self._http("GET", self.url, headers=headers, what=method)
            try:
                if response.status_code >= 400 or "event-stream" not in response.headers.get("content-type", ""):
                    body = self.excerpt_of(response)
                    raise HTTPError(
                        f"server {self.name!r} refused to resume the stream for {method} "
                        f"(HTTP {response.status_code}): {excerpt(body)}",
                        status=response.status_code,
                    )
                answered, new_last, new_retry, _ = self._read_events(response, job.request_id, method, exchange)
            finally:
                response.close()
            if answered:
                return
            resume = (new_last or last_id, new_retry if new_retry is not None else retry_ms)

    def _reply(self, response: Any, job: Job) -> tuple[str, int | None] | None:
        """Handle the reply to a POSTed request; returns (last event id, retry ms) to resume from."""
        request_id, method, exchange = job.request_id, job.method, job.exchange
        status = response.status_code
        ok = 200 <= status < 300
        session_id = response.headers.get("mcp-session-id")
        if ok and session_id and method == "initialize" and self.era != "modern":
            # A session exists only once initialize succeeded (a server may hand out ids on errors too).
            self.session_id = session_id
        if ok:
            ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype == "text/event-stream":
                try:
                    answered, last_id, retry_ms, broken = self._read_events(response, request_id, method, exchange)
                except ConnectionClosed:
                    if self.era == "modern" or self._closing.is_set():
                        raise
                    answered, last_id, retry_ms, broken = False, None, None, None
                if answered or exchange.aborted.is_set():
                    return None
                if last_id is not None and self.era != "modern":
                    return last_id, retry_ms
                how = f"broke off the stream for {method} before answering it ({broken})" if broken else \
                    f"closed the stream for {method} before answering it"
                raise ConnectionClosed(f"server {self.name!r} {how}")
            if ctype == "application/json" or ctype.endswith("+json"):
                message = self.read_message(response, method)
                self._deliver(message)
                if not _answers(message, request_id):
                    # Delivered, yet it answers nothing we wait for here: the request would wait forever.
                    raise ProtocolError(f"server {self.name!r} answered {method} with a JSON body that is not "
                                        f"its response (id {request_id!r}): {excerpt(jsonrpc.encode(message))}")
                return None
            if status in (202, 204):
                raise ProtocolError(f"server {self.name!r} accepted {method} (HTTP {status}) but sent no answer")
            raise ProtocolError(f"server {self.name!r} answered {method} with content type {ctype or 'none'!r}")
        body = self.excerpt_of(response) if status != 204 else b""
        if status == 404 and job.session_id is not None and self.era == "legacy":
            with self._lock:
                if self.session_id == job.session_id:  # not a late 404 for a session already replaced
                    self.session_id = None
                    self.session_lost = True
            raise SessionExpired(
                f"server {self.name!r} no longer knows our session (HTTP 404 to {method}); "
                "the next request will start a new session", status=404, body=excerpt(body),
            )
        error = error_in_body(body, request_id)
        if error is not None:
            self._deliver(error)
            return None
        raise HTTPError(
            f"server {self.name!r} answered HTTP {status} {response.reason or ''} to {method} "
            f"(Streamable HTTP POST {self.display_url}): {excerpt(body)}".replace("  ", " "),
            status=status, body=excerpt(body),
        )

    def _read_events(self, response: Any, request_id: Any, method: str,
                     exchange: Exchange | None) -> tuple[bool, str | None, int | None, str | None]:
        """Deliver the messages of an SSE stream: (True once the answer to ``request_id`` came, the last event id,
        the ``retry`` delay, why the stream broke off if it did (legacy: it may be resumed; modern raises))."""
        stream = SSEStream(body_chunks(response), response, self.max_message_bytes)
        answered = False
        broken: str | None = None
        error: MCPError | None = None
        try:
            for event in stream.events():
                large = isinstance(event, LargeEvent)
                if event.event not in ("message", "") or not (large or event.data):
                    continue
                message, failed = self.event_message(event)
                if failed is not None and failed == request_id:
                    answered = True  # answered with an event that is not JSON: the request failed with that
                    break
                if failed is not None or message is None:
                    continue
                self._deliver(message)
                if (
                    request_id is not None and isinstance(message, dict) and message.get("id") == request_id
                    and "method" not in message
                ):
                    answered = True
                    # Servers end the stream right after the answer. Read on to that end, briefly, so
                    # the connection goes back to the pool: closing a chunked stream before its last
                    # chunk closes the connection, and the next request would pay for a new one.
                    if not _linger(response, _LINGER_SECONDS):
                        break
        except ProtocolError as exc:
            raise ProtocolError(f"server {self.name!r} sent an SSE event over the limit of {self.max_message_bytes} "
                                f"bytes in answer to {method} (raise max_message_bytes= if it is legitimate)") from exc
        except Exception as exc:  # noqa: BLE001 - urllib3/requests/socket errors when the stream breaks
            if answered or self._closing.is_set() or (exchange is not None and exchange.aborted.is_set()):
                return True, None, None, None
            if self.era == "modern":
                error = self.transport_error(exc, method)
            broken = _short(exc)
        if error is not None:
            raise error  # outside the except block: no foreign __context__
        return answered, stream.decoder.last_event_id, stream.decoder.retry_ms, broken

    # -- the GET stream (legacy) ----------------------------------------------------------

    def _listen(self, ready: threading.Event) -> None:
        try:
            self._listen_loop()
        finally:
            with self._lock:
                ready = self._listen_ready
            ready.set()

    def _listen_loop(self) -> None:
        last_id: str | None = None
        delay = 1.0
        session = self.session_id
        while True:
            with self._lock:  # each GET its own exchange: a new session aborts the old one's stream
                if self._closing.is_set():
                    return
                exchange = self._listen_exchange = Exchange("GET stream")
                ready = self._listen_ready
                self._listen_wake.clear()
            if self.session_id != session:
                session, last_id, delay = self.session_id, None, 1.0  # nothing of the old session's to resume
            headers = self._headers(None, accept="text/event-stream")
            if last_id is not None and _header_safe(last_id):
                headers["Last-Event-ID"] = last_id
            try:
                with exchange:
                    try:
                        response = self._http("GET", self.url, headers=headers, what="the GET stream")
                    finally:
                        ready.set()  # open, refused or failed: connect() waits no longer
                    try:
                        ctype = response.headers.get("content-type", "")
                        if response.status_code >= 400 or "event-stream" not in ctype:
                            self._log(logging.DEBUG, "server %r offers no GET stream (HTTP %d)", self.name, response.status_code)
                            return
                        delay = 1.0
                        _, new_last, retry_ms, _ = self._read_events(response, None, "the GET stream", exchange)
                        last_id = new_last or last_id
                        if retry_ms is not None:
                            delay = _retry_seconds(retry_ms)
                    finally:
                        response.close()
            except Exception as exc:  # noqa: BLE001 - the stream is optional; try again later
                self._log(logging.DEBUG, "server %r: GET stream: %s", self.name, str(exc))
                delay = min(delay * 2, _LISTEN_MAX_DELAY)
            self._listen_wake.wait(delay)  # set by a new session (ask again now) and by close()

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._owner.forked:
            return  # the session is the parent's: no DELETE from a forked child
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.session_id is not None and self._session is not None:
            with self._notices_posted:  # the cancels of what was in flight first: they name the session
                self._notices_posted.wait_for(lambda: self._notices <= 0, timeout=_NOTICE_FLUSH_SECONDS)
            # Two seconds in all, however slowly the server trickles its answer.
            exchange = Exchange("DELETE")
            timer = get_scheduler().schedule(_DELETE_SECONDS, exchange.abort)
            try:
                with exchange:
                    response = self._http("DELETE", self.url, headers=self._headers(None), what="DELETE of the session",
                                          read_timeout=_DELETE_SECONDS,
                                          connect_timeout=min(self.connect_timeout, _DELETE_SECONDS))
                    try:
                        if response.status_code not in (200, 202, 204, 404, 405):
                            log.debug("server %r answered DELETE with HTTP %d", self.name, response.status_code)
                    finally:
                        response.close()
            except MCPError as exc:
                log.debug("server %r: DELETE of the session failed: %s", self.name, str(exc))
            finally:
                timer.cancel()
        with self._lock:
            self._closing.set()
            ready, listening = self._listen_ready, self._listen_exchange
        ready.set()  # a connect() waiting for the GET stream waits no longer (also an event no listener will set)
        listening.abort()
        self._listen_wake.set()
        self._stop_workers()
        if self._listener is not None and self._listener is not threading.current_thread():
            self._listener.join(5.0)
        self._close_session()
