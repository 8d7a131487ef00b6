"""The legacy HTTP+SSE transport (2024-11-05): one GET stream for everything the server says.

Thread ``mcpcall-sse-<server>`` reads the stream; requests are POSTed to the
endpoint the server names by the shared worker pool.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urljoin

from .. import jsonrpc
from ..errors import ConnectionClosed, HTTPError, MCPError, ProtocolError
from ..sse import SSEStream
from ._http_base import HTTPBase, abort_response, body_chunks, error_in_body, excerpt, same_origin, short_reason
from .base import Receiver

__all__ = ["SSETransport"]

log = logging.getLogger("mcpcall.http")


class SSETransport(HTTPBase):
    """The legacy HTTP+SSE transport (2024-11-05): one GET stream, POSTs to its endpoint.

    The server names the POST endpoint in the stream's first ``endpoint``
    event; an endpoint on another origin is refused.
    """

    #: This transport predates the modern era: the client goes straight to initialize.
    legacy_only = True

    def __init__(self, url: str, *, endpoint_timeout: float = 10.0, **options: Any) -> None:
        super().__init__(url, **options)
        self.endpoint: str | None = None
        self.endpoint_timeout = endpoint_timeout
        self._stream: Any = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    def start(self, receiver: Receiver) -> None:
        self._receiver = receiver
        self._session = self._open_session()
        headers = {"Accept": "text/event-stream"}
        headers.update(self.extra_headers)
        response = self._http("GET", self.url, headers=headers)
        ctype = response.headers.get("content-type", "")
        if response.status_code >= 400 or "event-stream" not in ctype:
            body = excerpt(response.content)
            response.close()
            raise HTTPError(
                f"server {self.name!r} answered GET {self.url} with HTTP {response.status_code} ({ctype or 'no type'}), "
                f"not an SSE stream: {body}", status=response.status_code, body=body,
            )
        self._stream = response
        self._reader = threading.Thread(target=self._read, name=f"mcpcall-sse-{self.name}", daemon=True)
        self._reader.start()
        if not self._ready.wait(self.endpoint_timeout):
            self.close()
            raise ProtocolError(f"server {self.name!r} sent no endpoint event within {self.endpoint_timeout:g} s")
        if self._start_error is not None:
            error = self._start_error
            self.close()
            raise error

    def _read(self) -> None:
        response = self._stream
        stream = SSEStream(body_chunks(response), response, self.max_message_bytes)
        reason = "closed the SSE stream"
        try:
            for event in stream.events():
                if event.event == "endpoint" and self.endpoint is None:
                    target = urljoin(self.url, event.data.strip())
                    if not same_origin(self.url, target):
                        self._start_error = ProtocolError(
                            f"server {self.name!r} named an endpoint on another origin ({target}); refused, "
                            "so requests and credentials stay with the server you named"
                        )
                        self._ready.set()
                        return
                    self.endpoint = target
                    self._ready.set()
                    continue
                if not event.data or event.event not in ("message", ""):
                    continue
                try:
                    self._deliver(jsonrpc.decode(event.data))
                except ProtocolError as exc:
                    log.warning("server %r sent an SSE event that is not JSON; skipped: %s", self.name, exc)
        except ProtocolError:
            reason = (f"sent an SSE event over the limit of {self.max_message_bytes} bytes "
                      "(raise max_message_bytes= if it is legitimate)")
        except Exception as exc:  # noqa: BLE001 - the stream broke (socket/urllib3 errors)
            reason = f"dropped the SSE stream ({short_reason(exc)})"
        finally:
            self._ready.set()
        if not self._closing.is_set() and self._receiver is not None:
            self._receiver.on_close(ConnectionClosed(f"server {self.name!r} {reason}"))

    def send(self, message: dict[str, Any]) -> None:
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if self.endpoint is None:
            raise ConnectionClosed(f"server {self.name!r} has not named its endpoint")
        if "method" in message and "id" in message:
            self._submit(("post", message.get("id"), message))
        else:
            self._post(message, None)

    def cancel(self, request_id: Any, reason: str) -> None:
        notice = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
        try:
            self._submit(("notify", None, notice))
        except MCPError:
            pass

    def _run_job(self, job: tuple[Any, ...]) -> None:
        _, request_id, message = job
        try:
            self._post(message, request_id)
        except MCPError as exc:
            self._fail(request_id, exc)

    def _post(self, message: dict[str, Any], request_id: Any) -> None:
        assert self.endpoint is not None
        headers = {"Content-Type": "application/json"}
        headers.update(self.extra_headers)
        response = self._http("POST", self.endpoint, headers=headers, data=jsonrpc.encode(message), stream=False,
                              read_timeout=30.0)
        if response.status_code >= 400:
            error = error_in_body(response.content, request_id)
            if error is not None:
                self._deliver(error)
                return
            raise HTTPError(
                f"server {self.name!r} answered HTTP {response.status_code} to {message.get('method') or 'a response'}: "
                f"{excerpt(response.content)}", status=response.status_code, body=excerpt(response.content),
            )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        if self._stream is not None:
            abort_response(self._stream)
            self._stream = None
        self._stop_workers()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5.0)
        self._close_session()
