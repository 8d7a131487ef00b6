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

import contextlib
import logging
import os
import queue
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import urljoin, urlsplit

from .. import jsonrpc
from ..errors import ConfigError, ConnectionClosed, HTTPError, MCPError, ProtocolError, SessionExpired
from ..headers import HeaderParams, param_headers, standard_headers
from ..sse import SSEStream
from .base import Receiver, Transport

if TYPE_CHECKING:  # pragma: no cover
    import requests

__all__ = ["BearerAuth", "HTTPTransport", "SSETransport", "same_origin"]

log = logging.getLogger("mcpcall.http")

META_VERSION = "io.modelcontextprotocol/protocolVersion"
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_MAX_REDIRECTS = 5
_MAX_RESUMES = 10
_DEFAULT_RETRY_MS = 500  # before resuming a stream whose server named no retry delay
_STOP = object()

AuthOption = Union[None, str, "requests.auth.AuthBase", tuple[str, str]]


def _default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


def same_origin(a: str, b: str) -> bool:
    """True when two URLs share scheme, host and port (the browser's origin rule)."""
    x, y = urlsplit(a), urlsplit(b)
    if x.scheme.lower() != y.scheme.lower() or (x.hostname or "").lower() != (y.hostname or "").lower():
        return False
    return (x.port or _default_port(x.scheme.lower())) == (y.port or _default_port(y.scheme.lower()))


def _auth(option: AuthOption) -> Any:
    if isinstance(option, str):
        return BearerAuth(option)
    return option


def _make_bearer() -> type:
    import requests

    class _Bearer(requests.auth.AuthBase):
        """``Authorization: Bearer <token>``; the token never shows in a repr."""

        def __init__(self, token: str) -> None:
            self._token = token

        def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
            request.headers["Authorization"] = f"Bearer {self._token}"
            return request

        def __repr__(self) -> str:
            return "<BearerAuth ***>"

    return _Bearer


def BearerAuth(token: str) -> Any:
    """A ``requests`` auth object sending ``token`` as a bearer token."""
    return _make_bearer()(token)


def _abort(response: Any) -> None:
    """Close a streaming response from another thread, waking a blocked read."""
    raw = getattr(response, "raw", None)
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    with contextlib.suppress(Exception):  # a half-dead connection may fail to close any way it likes
        response.close()


# The connection each worker thread is using (so a request still waiting for its
# response headers can be interrupted too: only its socket can be shut).
_connections: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_pools: dict[str, Any] = {}


def _tracked_pools() -> dict[str, Any]:
    """urllib3 pool classes whose connections record themselves in ``_connections``."""
    if not _pools:
        from urllib3 import connection, connectionpool

        class _HTTPConnection(connection.HTTPConnection):
            def request(self, *args: Any, **kwargs: Any) -> None:
                _connections[threading.get_ident()] = self
                super().request(*args, **kwargs)

        class _HTTPSConnection(connection.HTTPSConnection):
            def request(self, *args: Any, **kwargs: Any) -> None:
                _connections[threading.get_ident()] = self
                super().request(*args, **kwargs)

        class _HTTPPool(connectionpool.HTTPConnectionPool):
            ConnectionCls = _HTTPConnection

        class _HTTPSPool(connectionpool.HTTPSConnectionPool):
            ConnectionCls = _HTTPSConnection

        _pools.update(http=_HTTPPool, https=_HTTPSPool)
    return _pools


def _shutdown_thread_connection(ident: int) -> None:
    """Shut the socket a worker thread is blocked on (before or after response headers)."""
    connection = _connections.get(ident)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


_LINGER_SECONDS = 0.05


def _linger(response: Any, seconds: float) -> bool:
    """Give each further read of a stream ``seconds`` (urllib3 resets the timeout on reuse)."""
    raw = getattr(response, "raw", None)
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return False
    sock.settimeout(seconds)
    return True


def _chunks(response: Any) -> Iterator[bytes]:
    """The body as it arrives (not waiting to fill a fixed-size buffer)."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # pragma: no cover - urllib3 < 2
        yield from response.iter_content(chunk_size=None)
        return
    while True:
        data = read1(_CHUNK, decode_content=True)
        if not data:
            return
        yield data


class _HTTPBase(Transport):
    """What both HTTP transports share: the session, safe redirects, the worker pool."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: AuthOption = None,
        verify: bool | str | None = None,
        cert: str | tuple[str, str] | None = None,
        proxies: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_workers: int = 8,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.name = name or parts.hostname
        self.extra_headers = dict(headers or {})
        self.auth = _auth(auth)
        self.verify = verify
        self.cert = cert
        self.proxies = dict(proxies or {})
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_message_bytes = max_message_bytes
        self.max_workers = max(1, max_workers)
        self.era_cache_key = ("http", url)
        self._receiver: Receiver | None = None
        self._session: Any = None
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._streams: dict[Any, Any] = {}  # request id -> open response
        self._running: dict[Any, int] = {}  # request id -> the worker thread sending it
        self._cancelled: set[Any] = set()
        self._closing = threading.Event()
        self._closed = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.url!r}>"

    # -- plumbing ----------------------------------------------------------------

    def _open_session(self) -> Any:
        import requests
        from requests.adapters import HTTPAdapter

        session = requests.Session()
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=self.max_workers + 2, max_retries=0)
        adapter.poolmanager.pool_classes_by_scheme = _tracked_pools()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        if self.verify is not None:
            session.verify = self.verify
        if self.cert is not None:
            session.cert = self.cert
        if self.proxies:
            session.proxies.update(self.proxies)
        # requests re-reads the environment on every request (proxies, no_proxy, netrc, CA
        # bundle), 100-200 us a call. Every request of a transport goes to one origin, so look
        # once here and turn the per-request lookups off.
        from requests.utils import get_environ_proxies, get_netrc_auth

        for key, value in get_environ_proxies(self.url, no_proxy=self.proxies.get("no_proxy")).items():
            session.proxies.setdefault(key, value)
        if self.verify is None:
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            if bundle:
                session.verify = bundle
        if self.auth is None:
            self.auth = get_netrc_auth(self.url)
        session.trust_env = False
        return session

    def _http(self, method: str, url: str, *, headers: dict[str, str], data: bytes | None = None,
              stream: bool = True, read_timeout: float | None = None) -> Any:
        """One HTTP exchange, following redirects only within the origin of ``self.url``."""
        import requests

        session = self._session
        if session is None:
            raise ConnectionClosed(f"client for server {self.name!r} is not started")
        for _ in range(_MAX_REDIRECTS + 1):
            try:
                response = session.request(
                    method, url, data=data, headers=headers, auth=self.auth, stream=stream,
                    timeout=(self.connect_timeout, read_timeout if read_timeout is not None else self.read_timeout),
                    allow_redirects=False,
                )
            except requests.exceptions.RequestException as exc:
                raise ConnectionClosed(f"could not reach server {self.name!r} at {url}: {_reason(exc)}") from exc
            if response.status_code not in (301, 302, 303, 307, 308) or "location" not in response.headers:
                return response
            target = urljoin(url, response.headers["location"])
            response.close()
            if not same_origin(self.url, target):
                raise HTTPError(
                    f"server {self.name!r} redirected {method} {url} to another origin ({target}); "
                    "not followed, so headers and credentials stay with the server you named",
                    status=response.status_code,
                )
            if method != "GET" and response.status_code in (301, 302, 303):
                raise HTTPError(
                    f"server {self.name!r} redirected {method} {url} with {response.status_code}, which would "
                    f"turn it into a GET; use the final URL ({target}) instead",
                    status=response.status_code,
                )
            url = target
        raise HTTPError(f"server {self.name!r} redirected more than {_MAX_REDIRECTS} times", status=310)

    def _read_body(self, response: Any) -> bytes:
        parts: list[bytes] = []
        size = 0
        for chunk in _chunks(response):
            size += len(chunk)
            if size > self.max_message_bytes:
                raise ProtocolError(
                    f"server {self.name!r} sent a body over the limit of {self.max_message_bytes} bytes "
                    "(raise max_message_bytes= if it is legitimate)"
                )
            parts.append(chunk)
        return b"".join(parts)

    def _deliver(self, message: Any) -> None:
        receiver = self._receiver
        if receiver is None:
            return
        if isinstance(message, list):  # a JSON-RPC batch (2025-03-26)
            for item in message:
                self._deliver(item)
            return
        if not isinstance(message, dict):
            log.warning("server %r sent JSON that is not a message; skipped: %.200r", self.name, message)
            return
        receiver.on_message(message)

    def _fail(self, request_id: Any, error: BaseException) -> None:
        receiver = self._receiver
        if receiver is None or self._closing.is_set():
            return
        if request_id is None:
            log.warning("%s", error)
            return
        receiver.on_bad_message(error, request_id)

    # -- the worker pool -----------------------------------------------------------

    def _submit(self, job: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closing.is_set():
                raise ConnectionClosed(f"client for server {self.name!r} is closed")
            if self._idle > 0:
                self._idle -= 1  # an idle worker will take it
            elif len(self._workers) < self.max_workers:
                worker = threading.Thread(
                    target=self._work, name=f"mcpcall-http-{self.name}-{len(self._workers) + 1}", daemon=True
                )
                self._workers.append(worker)
                worker.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            try:
                self._run_job(job)
            except Exception:
                log.exception("server %r: an HTTP job failed", self.name)
            finally:
                with self._lock:
                    self._idle += 1

    def _run_job(self, job: tuple[Any, ...]) -> None:
        raise NotImplementedError

    # -- shared contract -------------------------------------------------------------

    def cancel(self, request_id: Any, reason: str) -> None:
        with self._lock:
            self._cancelled.add(request_id)  # forgotten when its job ends
            response = self._streams.pop(request_id, None)
            worker = self._running.get(request_id)
        if response is not None:
            _abort(response)
        elif worker is not None:
            _shutdown_thread_connection(worker)  # still waiting for the response headers

    def _track(self, request_id: Any, response: Any) -> bool:
        """Remember the stream carrying ``request_id``; False if it was cancelled meanwhile."""
        with self._lock:
            if request_id in self._cancelled or self._closing.is_set():
                return False
            self._streams[request_id] = response
            return True

    def _untrack(self, request_id: Any, response: Any) -> None:
        with self._lock:
            if self._streams.get(request_id) is response:
                del self._streams[request_id]

    def _stop_workers(self) -> None:
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
            running = list(self._running.values())
            workers = list(self._workers)
        for response in streams:
            _abort(response)
        for ident in running:
            _shutdown_thread_connection(ident)
        for _ in workers:
            self._jobs.put(_STOP)
        deadline = time.monotonic() + 5.0
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))
                if worker.is_alive():
                    log.warning("HTTP worker %s of server %r did not stop", worker.name, self.name)

    def _close_session(self) -> None:
        """Close every pooled connection now (``Session.close`` leaves that to the garbage collector)."""
        session = self._session
        if session is None:
            return
        adapters = {id(adapter): adapter for adapter in session.adapters.values()}
        for adapter in adapters.values():
            managers = [getattr(adapter, "poolmanager", None), *getattr(adapter, "proxy_manager", {}).values()]
            for manager in managers:
                pools = getattr(manager, "pools", None)
                if pools is None:
                    continue
                for key in list(pools.keys()):
                    with contextlib.suppress(Exception):
                        pools[key].close()
        session.close()


def _reason(exc: BaseException) -> str:
    """A short cause for a requests/urllib3 exception (their text nests deeply)."""
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "Connection reset", "Remote end closed"):
        if marker in text:
            return marker.lower()
    return text[:200]


class HTTPTransport(_HTTPBase):
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
                f"server {self.name!r} answered HTTP {status} to {what}: {_excerpt(response.content)}",
                status=status, body=_excerpt(response.content),
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
            _abort(response)
            return
        try:
            resume = self._reply(response, request_id, method)
        finally:
            self._untrack(request_id, response)
            response.close()
        attempts = 0
        while resume is not None and not self._closing.is_set():
            attempts += 1
            if attempts > _MAX_RESUMES:
                raise ConnectionClosed(f"server {self.name!r} kept dropping the stream for {method}; gave up")
            last_id, retry_ms = resume
            if self._closing.wait((retry_ms if retry_ms is not None else _DEFAULT_RETRY_MS) / 1000.0):
                return
            headers = self._headers(None, accept="text/event-stream")
            headers["Last-Event-ID"] = last_id
            response = self._http("GET", self.url, headers=headers)
            if not self._track(request_id, response):
                _abort(response)
                return
            try:
                if response.status_code >= 400 or "event-stream" not in response.headers.get("content-type", ""):
                    raise HTTPError(
                        f"server {self.name!r} refused to resume the stream for {method} "
                        f"(HTTP {response.status_code}): {_excerpt(response.content)}",
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
                "the next request will start a new session", status=404, body=_excerpt(body),
            )
        error = _error_message(body, request_id)
        if error is not None:
            self._deliver(error)
            return None
        raise HTTPError(
            f"server {self.name!r} answered HTTP {status} {response.reason or ''} to {method}: {_excerpt(body)}".replace("  ", " "),
            status=status, body=_excerpt(body),
        )

    def _read_events(self, response: Any, request_id: Any) -> tuple[bool, str | None, int | None]:
        """Deliver the messages of an SSE stream; True once the answer to ``request_id`` came."""
        stream = SSEStream(_chunks(response), response, self.max_message_bytes)
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
                    if not _linger(response, _LINGER_SECONDS):
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
                raise ConnectionClosed(f"the connection to server {self.name!r} dropped: {_reason(exc)}") from exc
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
                    _abort(response)
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
            _abort(listening)
        self._stop_workers()
        if self._listener is not None and self._listener is not threading.current_thread():
            self._listener.join(5.0)
        self._close_session()


def _excerpt(body: bytes, limit: int = 300) -> str:
    text = body[:limit].decode("utf-8", "replace").strip()
    return text + ("…" if len(body) > limit else "") if text else "(empty body)"


def _error_message(body: bytes, request_id: Any) -> dict[str, Any] | None:
    """A JSON-RPC error in an HTTP error body, given the request's id if it had none."""
    try:
        message = jsonrpc.decode(body)
    except ProtocolError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("error"), dict):
        return None
    if request_id is None:
        return None
    if message.get("id") is None:
        message = dict(message, id=request_id)
    if message.get("id") != request_id or jsonrpc.classify(message) != jsonrpc.RESPONSE:
        return None
    return dict(message)


class SSETransport(_HTTPBase):
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
            body = _excerpt(response.content)
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
        stream = SSEStream(_chunks(response), response, self.max_message_bytes)
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
            reason = f"dropped the SSE stream ({_reason(exc)})"
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
            error = _error_message(response.content, request_id)
            if error is not None:
                self._deliver(error)
                return
            raise HTTPError(
                f"server {self.name!r} answered HTTP {response.status_code} to {message.get('method') or 'a response'}: "
                f"{_excerpt(response.content)}", status=response.status_code, body=_excerpt(response.content),
            )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        if self._stream is not None:
            _abort(self._stream)
            self._stream = None
        self._stop_workers()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5.0)
        self._close_session()

