"""Remote servers: Streamable HTTP (both eras) and the legacy HTTP+SSE transport (2024-11-05).

Threads (each named ``mcpcall-<role>-<server>``):

- ``http`` workers, a bounded pool started on demand: each POSTs one request
  and reads its reply, a JSON body or an SSE stream that may carry progress
  notifications and server requests before the response. Callers only queue.
- ``listen`` (legacy Streamable HTTP): the GET stream for messages the server
  starts on its own; a 405 means the server offers none.
- ``sse`` (HTTP+SSE): the one GET stream every reply arrives on.

Notifications and responses to server requests are POSTed by the calling
thread (they are answered at once with 202). A request is cancelled by closing
its stream (modern) or with ``notifications/cancelled`` (legacy eras).

Redirects are followed only within the origin of the server URL; a server
cannot send our headers and credentials elsewhere.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .. import jsonrpc
from ..errors import ConnectionClosed, HTTPError, MCPError, ProtocolError, SessionExpired
from ..headers import HeaderParams, param_headers, standard_headers
from ..sse import SSEStream
from ._http_base import (
    DEFAULT_RETRY_MS,
    LINGER_SECONDS,
    MAX_RESUMES,
    META_VERSION,
    BearerAuth,
    HTTPBase,
    abort_response,
    body_chunks,
    error_in_body,
    excerpt,
    linger,
    same_origin,
    short_reason,
)
from .base import Receiver, Transport
from .httpsse import SSETransport

__all__ = ["BearerAuth", "HTTPTransport", "SSETransport", "same_origin"]

log = logging.getLogger("mcpcall.http")


class HTTPTransport(HTTPBase):
    """Streamable HTTP: one POST per message; replies as JSON or an SSE stream.

    Legacy era: ``Mcp-Session-Id`` from initialize on every request, a GET
    stream for server-initiated messages, resumption of broken streams with
    ``Last-Event-ID`` after the server's ``retry`` delay, DELETE on close. A
    404 for our session fails that request with :class:`SessionExpired` and
    sets :attr:`session_lost`; the client then starts a new session before the
    next request. Modern era: POST only, with ``Mcp-Method``/``Mcp-Name`` and
    the ``Mcp-Param-*`` headers of :attr:`tool_headers`.
    """

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        self.session_id: str | None = None
        self.session_lost = False
        self.era: str | None = None
        self.protocol_version: str | None = None
        #: Tool name -> its ``x-mcp-header`` parameters (filled in by the client's list_tools).
        self.tool_headers: dict[str, HeaderParams] = {}
        self._listener: threading.Thread | None = None
        self._listen_response: Any = None
        self._options = dict(options)

    def start(self, receiver: Receiver) -> None:
        self._receiver = receiver
        self._session = self._open_session()

    def negotiated(self, era: str, version: str) -> None:
        self.era = era
        self.protocol_version = version
        self.session_lost = False

    def _start_listener(self) -> None:
        """After ``notifications/initialized`` (legacy): open the GET stream for server messages."""
        with self._lock:
            if (self._listener is not None and self._listener.is_alive()) or self._closing.is_set():
                return
            self._listener = threading.Thread(target=self._listen, name=f"mcpcall-listen-{self.name}", daemon=True)
        self._listener.start()

    def fallback(self) -> Transport | None:
        """The legacy HTTP+SSE transport for the same URL, tried when Streamable HTTP is refused."""
        return SSETransport(self.url, **self._options)

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

    def send(self, message: dict[str, Any]) -> None:
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if "method" in message and "id" in message:
            self._submit(("post", message.get("id"), message))
            return
        # A notification or a response: answered at once with 202; sent from this thread.
        self._post_now(message)
        if message.get("method") == "notifications/initialized" and self.era == "legacy":
            self._start_listener()

    def _post_now(self, message: dict[str, Any]) -> None:
        headers = self._headers(message)
        headers["Content-Type"] = "application/json"
        response = self._http("POST", self.url, headers=headers, data=jsonrpc.encode(message), stream=False,
                              read_timeout=30.0)
        status = response.status_code
        if status >= 400:
            what = message.get("method") or "a response"
            raise HTTPError(
                f"server {self.name!r} answered HTTP {status} to {what}: {excerpt(response.content)}",
                status=status, body=excerpt(response.content),
            )

    def cancel(self, request_id: Any, reason: str) -> None:
        if self.era == "legacy":
            # Legacy servers take a closed stream as a network problem, not a cancel.
            notice = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            try:
                self._submit(("notify", None, notice))
            except MCPError:
                pass
        super().cancel(request_id, reason)

    def _run_job(self, job: tuple[Any, ...]) -> None:
        kind, request_id, message = job
        if kind == "notify":
            try:
                self._post_now(message)
            except MCPError as exc:
                log.debug("server %r: %s", self.name, exc)
            return
        try:
            self._exchange(request_id, message)
        except MCPError as exc:
            if request_id not in self._cancelled:
                self._fail(request_id, exc)
        finally:
            with self._lock:
                self._cancelled.discard(request_id)

    def _exchange(self, request_id: Any, message: dict[str, Any]) -> None:
        with self._lock:
            if request_id in self._cancelled:
                return
            self._running[request_id] = threading.get_ident()
        try:
            self._exchange_running(request_id, message)
        finally:
            with self._lock:
                self._running.pop(request_id, None)

    def _exchange_running(self, request_id: Any, message: dict[str, Any]) -> None:
        headers = self._headers(message)
        headers["Content-Type"] = "application/json"
        method = message.get("method", "")
        response = self._http("POST", self.url, headers=headers, data=jsonrpc.encode(message))
        if not self._track(request_id, response):
            abort_response(response)
            return
        try:
            resume = self._reply(response, request_id, method)
        finally:
            self._untrack(request_id, response)
            response.close()
        attempts = 0
        while resume is not None and not self._closing.is_set():
            attempts += 1
            if attempts > MAX_RESUMES:
                raise ConnectionClosed(f"server {self.name!r} kept dropping the stream for {method}; gave up")
            last_id, retry_ms = resume
            if self._closing.wait((retry_ms if retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0):
                return
            headers = self._headers(None, accept="text/event-stream")
            headers["Last-Event-ID"] = last_id
            response = self._http("GET", self.url, headers=headers)
            if not self._track(request_id, response):
                abort_response(response)
                return
            try:
                if response.status_code >= 400 or "event-stream" not in response.headers.get("content-type", ""):
                    raise HTTPError(
                        f"server {self.name!r} refused to resume the stream for {method} "
                        f"(HTTP {response.status_code}): {excerpt(response.content)}",
                        status=response.status_code,
                    )
                answered, new_last, new_retry = self._read_events(response, request_id)
            finally:
                self._untrack(request_id, response)
                response.close()
            if answered:
                return
            resume = (new_last or last_id, new_retry if new_retry is not None else retry_ms)

    def _reply(self, response: Any, request_id: Any, method: str) -> tuple[str, int | None] | None:
        """Handle the reply to a POSTed request; returns (last event id, retry ms) to resume from."""
        status = response.status_code
        session_id = response.headers.get("mcp-session-id")
        if session_id and self.era != "modern":
            self.session_id = session_id
        if 200 <= status < 300:
            ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype == "text/event-stream":
                try:
                    answered, last_id, retry_ms = self._read_events(response, request_id)
                except ConnectionClosed:
                    if self.era == "modern" or self._closing.is_set():
                        raise
                    answered, last_id, retry_ms = False, None, None
                if answered or self._closing.is_set():
                    return None
                if last_id is not None and self.era != "modern":
                    return last_id, retry_ms
                raise ConnectionClosed(f"server {self.name!r} closed the stream for {method} before answering it")
            if ctype == "application/json" or ctype.endswith("+json"):
                self._deliver(jsonrpc.decode(self._read_body(response)))
                return None
            if status in (202, 204):
                raise ProtocolError(f"server {self.name!r} accepted {method} (HTTP {status}) but sent no answer")
            raise ProtocolError(f"server {self.name!r} answered {method} with content type {ctype or 'none'!r}")
        body = self._read_body(response) if status != 204 else b""
        if status == 404 and self.session_id is not None and self.era == "legacy":
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
            f"server {self.name!r} answered HTTP {status} {response.reason or ''} to {method}: {excerpt(body)}".replace("  ", " "),
            status=status, body=excerpt(body),
        )

    def _read_events(self, response: Any, request_id: Any) -> tuple[bool, str | None, int | None]:
        """Deliver the messages of an SSE stream; True once the answer to ``request_id`` came."""
        stream = SSEStream(body_chunks(response), response, self.max_message_bytes)
        answered = False
        try:
            for event in stream.events():
                if not event.data or event.event not in ("message", ""):
                    continue
                try:
                    message = jsonrpc.decode(event.data)
                except ProtocolError as exc:
                    log.warning("server %r sent an SSE event that is not JSON; skipped: %s", self.name, exc)
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
                    if not linger(response, LINGER_SECONDS):
                        break
        except ProtocolError as exc:
            raise ProtocolError(f"server {self.name!r} sent an SSE event over the limit of {self.max_message_bytes} "
                                "bytes (raise max_message_bytes= if it is legitimate)") from exc
        except Exception as exc:  # urllib3/requests/socket errors when the stream breaks
            if self._closing.is_set() or request_id in self._cancelled:
                return True, None, None
            if answered:
                return True, None, None
            if self.era == "modern":
                raise ConnectionClosed(f"the connection to server {self.name!r} dropped: {short_reason(exc)}") from exc
        return answered, stream.decoder.last_event_id, stream.decoder.retry_ms

    # -- the GET stream (legacy) ----------------------------------------------------------

    def _listen(self) -> None:
        last_id: str | None = None
        delay = 1.0
        while not self._closing.is_set():
            headers = self._headers(None, accept="text/event-stream")
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                response = self._http("GET", self.url, headers=headers)
            except MCPError as exc:
                log.debug("server %r: GET stream: %s", self.name, exc)
                if self._closing.wait(delay):
                    return
                delay = min(delay * 2, 30.0)
                continue
            with self._lock:
                if self._closing.is_set():
                    abort_response(response)
                    return
                self._listen_response = response
            try:
                ctype = response.headers.get("content-type", "")
                if response.status_code >= 400 or "event-stream" not in ctype:
                    log.debug("server %r offers no GET stream (HTTP %d)", self.name, response.status_code)
                    return
                delay = 1.0
                _, new_last, retry_ms = self._read_events(response, None)
                last_id = new_last or last_id
                if retry_ms is not None:
                    delay = retry_ms / 1000.0
            except MCPError as exc:
                log.debug("server %r: GET stream ended: %s", self.name, exc)
            finally:
                with self._lock:
                    self._listen_response = None
                response.close()
            if self._closing.wait(delay):
                return

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.session_id is not None and self._session is not None:
            try:
                headers = self._headers(None)
                response = self._http("DELETE", self.url, headers=headers, stream=False, read_timeout=2.0)
                if response.status_code not in (200, 202, 204, 404, 405):
                    log.debug("server %r answered DELETE with HTTP %d", self.name, response.status_code)
            except MCPError as exc:
                log.debug("server %r: DELETE of the session failed: %s", self.name, exc)
        self._closing.set()
        with self._lock:
            listening = self._listen_response
        if listening is not None:
            abort_response(listening)
        self._stop_workers()
        if self._listener is not None and self._listener is not threading.current_thread():
            self._listener.join(5.0)
        self._close_session()
