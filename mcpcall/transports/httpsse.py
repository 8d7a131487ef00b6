"""The legacy HTTP+SSE transport (2024-11-05): one GET stream for everything the server says.

Thread ``mcpcall-sse-<server>`` reads the stream; requests are POSTed to the
endpoint the server names by the shared worker pool. The stream runs inside an
exchange that ``close()`` aborts, so closing never waits on a read.

A request's POST is only an acknowledgement; its answer comes on the stream.
Once the answer came, a POST still going :data:`ACK_GRACE` seconds later is
aborted (a server slow to acknowledge holds neither the caller nor a worker),
and when the stream dies every POST in flight is aborted with it.

The session is the stream's: its endpoint names it. A server that no longer
knows it (a POST answered 404, the stream perhaps still open) has lost every
answer that was to come on that stream: that POST fails with
:class:`SessionExpired` (it did not run), the requests still awaiting their
answers there fail with :class:`ConnectionClosed` at once, the stream is
closed, and :attr:`~SSETransport.session_lost` asks the client to start a new
session, on a new stream, before its next request (:meth:`SSETransport.start_session`).
A stream that ends, by contrast, ends the connection: the server is gone.
"""

from __future__ import annotations

import logging
import threading
from time import monotonic
from typing import Any
from urllib.parse import urljoin

from .. import jsonrpc
from ..errors import ConnectionClosed, HTTPError, MCPError, ProtocolError, RequestTimeout, SessionExpired
from ..scheduler import get_scheduler
from ..sse import LargeEvent, OversizeEvent, SSEStream
from ..urls import redact_url, same_origin
from ._exchanges import Exchange
from ._http_base import ACK_TIMEOUT, HTTPBase, Job, _short, body_chunks, error_in_body, excerpt
from .base import Receiver

__all__ = ["ACK_GRACE", "SSETransport"]

log = logging.getLogger("mcpcall.http")

#: How long a request's POST may go on after its answer came on the stream before it is aborted.
ACK_GRACE = 0.5


#: How a stream's session ended when a new one replaced it before the server had forgotten it.
_REPLACED = "had the session replaced by a new one"


class _Stream:
    """One GET stream and the session it carries: its endpoint, and the requests whose answers are to come on it."""

    __slots__ = ("awaiting", "endpoint", "error", "exchange", "initialized", "lost", "posting", "reader", "ready",
                 "retired")

    def __init__(self) -> None:
        self.exchange = Exchange("SSE stream")
        self.reader: threading.Thread | None = None
        #: Set once the endpoint came, or the stream ended before it did (then :attr:`error` says why).
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.endpoint: str | None = None
        #: The client initialized a session over it: a 404 from its endpoint now means the server forgot that session.
        self.initialized = False
        #: Over: the server forgot its session, a new stream replaced it, or it ended (under the transport's lock).
        self.retired = False
        #: Why the answers still to come on it will not (once the server forgot it or a new one replaced it; empty
        #: when it ended on its own: the connection ended with it, and every request failed).
        self.lost = ""
        #: Requests sent to its endpoint and not answered yet (id -> method); of them, those whose POST is still going.
        self.awaiting: dict[Any, str] = {}
        self.posting: set[Any] = set()


class _Post(Job):
    """A message to POST to the endpoint of :attr:`stream`, the stream it was sent for."""

    __slots__ = ("stream",)

    def __init__(self, message: dict[str, Any], data: bytes, headers: dict[str, str], request_id: Any,
                 stream: _Stream) -> None:
        super().__init__(message, data, headers, request_id)
        self.stream = stream


class SSETransport(HTTPBase):
    """The legacy HTTP+SSE transport (2024-11-05): one GET stream, POSTs to its endpoint.

    The server names the POST endpoint in the stream's first ``endpoint``
    event; an endpoint on another origin (or one that parsers read
    differently) is refused.
    """

    legacy_only = True

    def __init__(self, url: str, *, endpoint_timeout: float = 10.0, **options: Any) -> None:
        options.pop("allow_fallback", None)
        super().__init__(url, **options)
        self._options = dict(options, endpoint_timeout=endpoint_timeout)
        self.endpoint_timeout = endpoint_timeout
        self._stream = _Stream()  # the current one (under _lock)
        self._streams: list[_Stream] = []  # every stream whose reader was started and may still run (under _lock)

    @property
    def endpoint(self) -> str | None:
        """Where messages are POSTed: the endpoint the current stream named (None before it did)."""
        return self._stream.endpoint

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        self._receiver = receiver
        self._session = self._open_session()
        limit = self.endpoint_timeout if timeout is None else min(self.endpoint_timeout, timeout)
        error = self._open(self._stream, limit)
        if error is not None:
            self.close()
            raise error

    def start_session(self, timeout: float) -> None:
        """The server forgot our session: open a new stream, and wait (at most ``timeout`` seconds) for the
        endpoint of the session it carries; the client then initializes it.

        The stream it replaces is closed (if it was not already), and so is the new one if its endpoint does not
        come in time: the next request tries again.
        """
        with self._lock:
            if self._closing.is_set():
                raise ConnectionClosed(f"client for server {self.name!r} is closed")
            ended = self._ended
            if ended is not None:  # the connection is over: no stream, no session is of use any more
                raise ConnectionClosed(str(ended))
            old = self._stream
            stream = self._stream = _Stream()  # before it is read from: a stream that ends closes the connection
        started = monotonic()
        self._retire(old, _REPLACED)
        if old.reader is not None and old.reader is not threading.current_thread():
            old.reader.join(min(5.0, max(0.0, timeout - (monotonic() - started))))  # aborted: it ends at once
        error = self._open(stream, min(self.endpoint_timeout, max(0.0, timeout - (monotonic() - started))))
        if error is not None:
            self._retire(stream, _REPLACED)
            raise error

    def _open(self, stream: _Stream, limit: float) -> BaseException | None:
        """Start ``stream``'s reader and wait up to ``limit`` seconds for its endpoint; what went wrong, if it did not come."""
        started = monotonic()
        with self._lock:
            if self._closing.is_set():
                return ConnectionClosed(f"client for server {self.name!r} is closed")
            self._streams = [s for s in self._streams if s.reader is not None and s.reader.is_alive()]
            self._streams.append(stream)
            stream.reader = threading.Thread(target=self._read, args=(stream, limit), name=f"mcpcall-sse-{self.name}",
                                             daemon=True)
            stream.reader.start()  # under the lock: close() joins only started readers
        if not stream.ready.wait(max(0.0, limit - (monotonic() - started))):
            stage = stream.exchange.connecting  # still connecting: the server never got to say anything
            if stage is not None:
                return RequestTimeout(f"could not connect to server {self.name!r} within {limit:.3g} s: {stage} "
                                      f"{self.display_url} had not finished", timeout=limit)
            return ProtocolError(f"server {self.name!r} sent no endpoint event within {limit:.3g} s "
                                 f"(HTTP+SSE GET {self.display_url})")
        return stream.error

    def renewed(self) -> SSETransport:
        """A new transport for the same URL and options: a failed start closed this one, and the stream cannot resume."""
        return SSETransport(self.url, **self._options)

    def negotiated(self, era: str, version: str) -> None:
        with self._lock:
            stream = self._stream
            stream.initialized = True
            if not stream.retired:
                self.session_lost = False

    def _read(self, stream: _Stream, limit: float) -> None:
        """The reader thread: open the GET stream, wait for the endpoint, deliver every message."""
        reason = "closed the SSE stream"
        exchange = stream.exchange
        try:
            with exchange:
                headers = {"Accept": "text/event-stream", **self.extra_headers}
                response = self._http("GET", self.url, headers=headers, what="the HTTP+SSE stream",
                                      connect_timeout=min(self.connect_timeout, limit))
                try:
                    ctype = response.headers.get("content-type", "")
                    if response.status_code >= 400 or "event-stream" not in ctype:
                        body = excerpt(self.excerpt_of(response))
                        raise HTTPError(
                            f"server {self.name!r} answered GET {self.display_url} with HTTP {response.status_code} "
                            f"({ctype or 'no type'}), not an SSE stream: {body}", status=response.status_code, body=body,
                        )
                    reason = self._events(response, stream)
                    if stream.endpoint is None and not exchange.aborted.is_set():
                        raise ConnectionClosed(f"server {self.name!r} closed the HTTP+SSE stream (GET {self.display_url}) "
                                               "before naming its endpoint")
                finally:
                    response.close()
        except BaseException as exc:  # noqa: BLE001 - before the endpoint: start() raises it; after: it closes us
            if not stream.ready.is_set():
                stream.error = self.transport_error(exc, "the HTTP+SSE stream")
            elif not exchange.aborted.is_set():
                reason = f"dropped the SSE stream ({_short(exc)})"
        finally:
            stream.ready.set()
        error = None
        with self._lock:
            # The current session's stream ended on its own: the connection is over. (One retired ended as told.)
            if stream is self._stream and not stream.retired and stream.endpoint is not None and not self._closing.is_set():
                # HTTP+SSE has no way to resume: the endpoint (the session) died with the stream. Known before
                # anyone hears of it: no new session is started, no notification sent, after it.
                error = self._ended = ConnectionClosed(
                    f"server {self.name!r} {reason}; this HTTP+SSE connection is over: connect again (a new client)"
                )
            stream.retired = True
        if error is not None and self._receiver is not None:
            self._receiver.on_close(error)
            # Its POSTs in flight too: a caller running its own (a connect that hangs) is freed now, not by a timeout.
            self._abort_exchanges()

    def _events(self, response: Any, stream: _Stream) -> str:
        # An event over the limit is skipped (not held) and fails the one request it names, as an oversize
        # line of stdio does: this one stream serves every request, and ending it would end them all.
        sse = SSEStream(body_chunks(response), response, self.max_message_bytes, skip_oversize=True)
        for event in sse.events():
            if isinstance(event, OversizeEvent):
                self._oversize(event, stream)
                continue
            if event.event == "endpoint" and stream.endpoint is None:
                if not event.data.strip():
                    raise ProtocolError(f"server {self.name!r} named an empty endpoint")
                target = urljoin(self.url, event.data.strip())
                if not same_origin(self.url, target):
                    raise ProtocolError(
                        f"server {self.name!r} named an endpoint on another origin or an unclear URL "
                        f"({redact_url(target)}); refused, so requests and credentials stay with the server you named"
                    )
                stream.endpoint = target
                stream.ready.set()
                continue
            large = isinstance(event, LargeEvent)
            if event.event not in ("message", "") or not (large or event.data):
                continue
            message, failed = self.event_message(event)
            if message is not None:
                self._deliver(message)
                self._answered(message, stream)
            elif failed is not None:  # an answer cut short: that request failed, no other answer is awaited
                self._settled(failed, stream)
        return "closed the SSE stream"

    def _oversize(self, event: OversizeEvent, stream: _Stream) -> None:
        """An event over ``max_message_bytes``, skipped: the request it names fails (all in flight if it names none)."""
        error = ProtocolError(
            f"server {self.name!r} sent an SSE event of {event.size} bytes, over the limit of {self.max_message_bytes} "
            "bytes (raise max_message_bytes= if it is legitimate); it was skipped"
        )
        if stream.endpoint is None:
            raise error  # before the endpoint: start() fails with it
        if event.event not in ("message", ""):  # no answer (a server's own kind of event), skipped as any of its size
            self._log(logging.DEBUG, "server %r: skipped an SSE event %r of %d bytes", self.name, event.event[:50],
                      event.size)
            return
        request_id = jsonrpc.peek_id(event.head)
        if request_id is not None:
            self._settled(request_id, stream)
        else:  # every request in flight fails: none of their answers is awaited any more
            with self._lock:
                stream.awaiting.clear()
        if self._receiver is not None:
            self._receiver.on_bad_message(error, request_id)

    def _answered(self, message: Any, stream: _Stream) -> None:
        """``message`` came on ``stream``: the requests it answers are settled (:meth:`_settled`)."""
        for item in message if isinstance(message, list) else (message,):  # a batch answers several
            if isinstance(item, dict) and "method" not in item and item.get("id").__class__ in (str, int):
                self._settled(item["id"], stream)

    def _settled(self, request_id: Any, stream: _Stream) -> None:
        """The answer to ``request_id`` came on ``stream`` (or one that failed it): it is awaited no more, and a POST
        of it still going ends :data:`ACK_GRACE` seconds from now (it has nothing left to give, and its caller may
        be running it)."""
        with self._lock:
            stream.awaiting.pop(request_id, None)
            exchange = self._exchanges.get(request_id)
        if exchange is not None:
            get_scheduler().schedule(ACK_GRACE, exchange.abort)

    def _retire(self, stream: _Stream, lost: str, *, forgotten: bool = False) -> None:
        """``stream``'s session is over (``lost``: how, for the requests it took with it): the stream is closed, and
        the requests still awaiting their answers on it fail now (those whose POST is still going, when it ends: a
        404 then says it did not run). ``forgotten``: the server forgot it; if current, the client starts a new one."""
        with self._lock:
            if stream.retired:
                return
            if forgotten and stream is self._stream:
                self.session_lost = True
            stream.retired = True
            stream.lost = lost
            gone = [(rid, method) for rid, method in stream.awaiting.items() if rid not in stream.posting]
            for rid, _ in gone:
                del stream.awaiting[rid]
        stream.exchange.abort()
        for rid, method in gone:
            self._fail(rid, self._unanswered(stream, method))

    def _unanswered(self, stream: _Stream, method: str) -> ConnectionClosed:
        return ConnectionClosed(f"server {self.name!r} {stream.lost}: the answer to {method} was to come on the stream "
                                "of that session and will not (the server may or may not have run it); the next request "
                                "will start a new session")

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        stream = self._stream
        if stream.endpoint is None:
            if self.session_lost:  # a new session's stream that did not name its endpoint (yet)
                raise SessionExpired(f"server {self.name!r} no longer knows our session; the next request will start a "
                                     "new session", status=404)
            raise ConnectionClosed(f"server {self.name!r} has not named its endpoint")
        data = jsonrpc.encode(message)
        headers = {"Content-Type": "application/json", **self.extra_headers}
        if "method" in message and "id" in message:
            request_id = message.get("id")
            job = _Post(message, data, headers, request_id, stream)
            with self._lock:
                stream.awaiting[request_id] = job.method
                stream.posting.add(request_id)
            self._submit(job)
        else:
            self.acknowledged(_Post(message, data, headers, None, stream), timeout, self._post_notice)

    def cancel(self, request_id: Any, reason: str, *, notify: bool = True) -> None:
        with self._lock:
            stream = self._stream
            stream.awaiting.pop(request_id, None)  # its answer is no longer awaited
            stream.posting.discard(request_id)  # its POST is aborted below: going no more
        if notify and stream.endpoint is not None:
            notice = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            headers = {"Content-Type": "application/json", **self.extra_headers}
            try:
                self._submit(_Post(notice, jsonrpc.encode(notice), headers, None, stream))
            except MCPError:
                pass
        super().cancel(request_id, reason, notify=notify)

    def _run_job(self, job: Job) -> None:
        assert isinstance(job, _Post)
        awaits = False
        try:
            awaits = self._post(job)
        except MCPError as exc:
            self._fail(job.request_id, exc)
        finally:
            if job.request_id is not None:
                self._posted(job, awaits)

    def _not_run(self, job: Job) -> None:
        assert isinstance(job, _Post)
        if job.request_id is not None:
            self._posted(job, False)  # never sent: nothing of it is to come on the stream

    def _posted(self, job: _Post, awaits: bool) -> None:
        """``job``'s POST ended; ``awaits``: acknowledged, its answer to come on the stream (unless that stream is over)."""
        stream = job.stream
        with self._lock:
            stream.posting.discard(job.request_id)
            method = stream.awaiting.pop(job.request_id, None) if not awaits or stream.retired else None
            lost = awaits and stream.lost != ""
        if method is not None and lost:
            self._fail(job.request_id, self._unanswered(stream, method))

    def _post_notice(self, job: Job) -> None:
        assert isinstance(job, _Post)
        self._post(job)

    def _post(self, job: _Post) -> bool:
        """POST ``job`` to its stream's endpoint; True when acknowledged (its answer, if any, comes on the stream)."""
        stream = job.stream
        assert stream.endpoint is not None
        response = self._http("POST", stream.endpoint, headers=job.headers, data=job.data, what=job.method,
                              read_timeout=ACK_TIMEOUT)
        try:
            if response.status_code >= 400:
                body = self.excerpt_of(response)
                if response.status_code == 404 and stream.initialized:
                    self._retire(stream, f"no longer knows our session (HTTP 404 to {job.method})", forgotten=True)
                    raise SessionExpired(
                        f"server {self.name!r} no longer knows our session (HTTP 404 to {job.method}); "
                        "the next request will start a new session", status=404, body=excerpt(body),
                    )
                error = error_in_body(body, job.request_id)
                if error is not None:
                    self._deliver(error)
                    return False
                raise HTTPError(
                    f"server {self.name!r} answered HTTP {response.status_code} to {job.method}: {excerpt(body)}",
                    status=response.status_code, body=excerpt(body),
                )
            self.read_body(response, job.method)  # the answer comes on the stream; this is an acknowledgement
            return True
        finally:
            response.close()

    def close(self) -> None:
        if self._owner.forked:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing.set()
            streams = list(self._streams)
        for stream in streams:
            stream.exchange.abort()
        self._stop_workers()
        for stream in streams:
            if stream.reader is not None and stream.reader is not threading.current_thread():
                stream.reader.join(5.0)
        self._close_session()
