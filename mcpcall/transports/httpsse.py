"""The legacy HTTP+SSE transport (2024-11-05): one GET stream for everything the server says.

Thread ``mcpcall-sse-<server>`` reads the stream; requests are POSTed to the
endpoint the server names by the shared worker pool. The stream runs inside an
exchange that ``close()`` aborts, so closing never waits on a read.

A request's POST is only an acknowledgement; its answer comes on the stream.
Once the answer came, a POST still going :data:`ACK_GRACE` seconds later is
aborted (a server slow to acknowledge holds neither the caller nor a worker),
and when the stream dies every POST in flight is aborted with it.
"""

from __future__ import annotations

import logging
import threading
from time import monotonic
from typing import Any
from urllib.parse import urljoin

from .. import jsonrpc
from ..errors import ConnectionClosed, HTTPError, MCPError, ProtocolError, RequestTimeout
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
        self.endpoint: str | None = None
        self.endpoint_timeout = endpoint_timeout
        self._stream_exchange = Exchange("SSE stream")
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        self._receiver = receiver
        self._session = self._open_session()
        started = monotonic()
        limit = self.endpoint_timeout if timeout is None else min(self.endpoint_timeout, timeout)
        self._reader = threading.Thread(target=self._read, args=(limit,), name=f"mcpcall-sse-{self.name}", daemon=True)
        self._reader.start()
        if not self._ready.wait(max(0.0, limit - (monotonic() - started))):
            stage = self._stream_exchange.connecting  # still connecting: the server never got to say anything
            self.close()
            if stage is not None:
                raise RequestTimeout(f"could not connect to server {self.name!r} within {limit:g} s: {stage} "
                                     f"{self.display_url} had not finished", timeout=limit)
            raise ProtocolError(f"server {self.name!r} sent no endpoint event within {limit:g} s "
                                f"(HTTP+SSE GET {self.display_url})")
        if self._start_error is not None:
            error = self._start_error
            self.close()
            raise error

    def renewed(self) -> SSETransport:
        """A new transport for the same URL and options: a failed start closed this one, and the stream cannot resume."""
        return SSETransport(self.url, **self._options)

    def _read(self, limit: float) -> None:
        """The reader thread: open the GET stream, wait for the endpoint, deliver every message."""
        reason = "closed the SSE stream"
        exchange = self._stream_exchange
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
                    reason = self._events(response)
                    if self.endpoint is None and not exchange.aborted.is_set():
                        raise ConnectionClosed(f"server {self.name!r} closed the HTTP+SSE stream (GET {self.display_url}) "
                                               "before naming its endpoint")
                finally:
                    response.close()
        except BaseException as exc:  # noqa: BLE001 - before the endpoint: start() raises it; after: it closes us
            if not self._ready.is_set():
                self._start_error = self.transport_error(exc, "the HTTP+SSE stream")
            elif not exchange.aborted.is_set():
                reason = f"dropped the SSE stream ({_short(exc)})"
        finally:
            self._ready.set()
        if self.endpoint is not None and not self._closing.is_set() and self._receiver is not None:
            # HTTP+SSE has no way to resume: the endpoint (the session) died with the stream.
            self._receiver.on_close(ConnectionClosed(
                f"server {self.name!r} {reason}; this HTTP+SSE connection is over: connect again (a new client)"
            ))
            # Its POSTs in flight too: a caller running its own (a connect that hangs) is freed now, not by a timeout.
            self._abort_exchanges()

    def _events(self, response: Any) -> str:
        # An event over the limit is skipped (not held) and fails the one request it names, as an oversize
        # line of stdio does: this one stream serves every request, and ending it would end them all.
        stream = SSEStream(body_chunks(response), response, self.max_message_bytes, skip_oversize=True)
        for event in stream.events():
            if isinstance(event, OversizeEvent):
                self._oversize(event)
                continue
            if event.event == "endpoint" and self.endpoint is None:
                if not event.data.strip():
                    raise ProtocolError(f"server {self.name!r} named an empty endpoint")
                target = urljoin(self.url, event.data.strip())
                if not same_origin(self.url, target):
                    raise ProtocolError(
                        f"server {self.name!r} named an endpoint on another origin or an unclear URL "
                        f"({redact_url(target)}); refused, so requests and credentials stay with the server you named"
                    )
                self.endpoint = target
                self._ready.set()
                continue
            large = isinstance(event, LargeEvent)
            if event.event not in ("message", "") or not (large or event.data):
                continue
            message, _ = self.event_message(event)
            if message is not None:
                self._deliver(message)
                self._answered(message)
        return "closed the SSE stream"

    def _oversize(self, event: OversizeEvent) -> None:
        """An event over ``max_message_bytes``, skipped: the request it names fails (all in flight if it names none)."""
        error = ProtocolError(
            f"server {self.name!r} sent an SSE event of {event.size} bytes, over the limit of {self.max_message_bytes} "
            "bytes (raise max_message_bytes= if it is legitimate); it was skipped"
        )
        if self.endpoint is None:
            raise error  # before the endpoint: start() fails with it
        if self._receiver is not None:
            self._receiver.on_bad_message(error, jsonrpc.peek_id(event.head))

    def _answered(self, message: Any) -> None:
        """``message`` came on the stream; if it answers a request whose POST is still going, end that POST
        :data:`ACK_GRACE` seconds from now (it has nothing left to give, and its caller may be running it)."""
        if not isinstance(message, dict) or "method" in message:
            return
        request_id = message.get("id")
        if request_id.__class__ not in (str, int):
            return
        with self._lock:
            exchange = self._exchanges.get(request_id)
        if exchange is not None:
            get_scheduler().schedule(ACK_GRACE, exchange.abort)

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if self.endpoint is None:
            raise ConnectionClosed(f"server {self.name!r} has not named its endpoint")
        data = jsonrpc.encode(message)
        headers = {"Content-Type": "application/json", **self.extra_headers}
        if "method" in message and "id" in message:
            self._submit(Job(message, data, headers, message.get("id")))
        else:
            self.acknowledged(Job(message, data, headers, None), timeout, self._post)

    def cancel(self, request_id: Any, reason: str, *, notify: bool = True) -> None:
        if notify:
            notice = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            try:
                self._submit(Job(notice, jsonrpc.encode(notice), {"Content-Type": "application/json", **self.extra_headers}, None))
            except MCPError:
                pass
        super().cancel(request_id, reason, notify=notify)

    def _run_job(self, job: Job) -> None:
        try:
            self._post(job)
        except MCPError as exc:
            self._fail(job.request_id, exc)

    def _post(self, job: Job) -> None:
        assert self.endpoint is not None
        response = self._http("POST", self.endpoint, headers=job.headers, data=job.data, what=job.method,
                              read_timeout=ACK_TIMEOUT)
        try:
            if response.status_code >= 400:
                body = self.excerpt_of(response)
                error = error_in_body(body, job.request_id)
                if error is not None:
                    self._deliver(error)
                    return
                raise HTTPError(
                    f"server {self.name!r} answered HTTP {response.status_code} to {job.method}: {excerpt(body)}",
                    status=response.status_code, body=excerpt(body),
                )
            self.read_body(response, job.method)  # the answer comes on the stream; this is an acknowledgement
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
        self._stream_exchange.abort()
        self._stop_workers()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5.0)
        self._close_session()
