"""What both HTTP transports share: safe redirects, a worker pool, socket-level cancel, body limits.

Used by :mod:`mcpcall.transports.http` (Streamable HTTP) and
:mod:`mcpcall.transports.httpsse` (the legacy HTTP+SSE transport).
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
from ..errors import ConfigError, ConnectionClosed, HTTPError, ProtocolError
from .base import Receiver, Transport

if TYPE_CHECKING:  # pragma: no cover
    import requests

__all__ = ["BearerAuth", "HTTPBase", "same_origin"]

log = logging.getLogger("mcpcall.http")

META_VERSION = "io.modelcontextprotocol/protocolVersion"
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_MAX_REDIRECTS = 5
MAX_RESUMES = 10
DEFAULT_RETRY_MS = 500  # before resuming a stream whose server named no retry delay
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


def abort_response(response: Any) -> None:
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


LINGER_SECONDS = 0.05


def linger(response: Any, seconds: float) -> bool:
    """Give each further read of a stream ``seconds`` (urllib3 resets the timeout on reuse)."""
    raw = getattr(response, "raw", None)
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return False
    sock.settimeout(seconds)
    return True


def body_chunks(response: Any) -> Iterator[bytes]:
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


class HTTPBase(Transport):
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
                raise ConnectionClosed(f"could not reach server {self.name!r} at {url}: {short_reason(exc)}") from exc
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
        for chunk in body_chunks(response):
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
            abort_response(response)
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
            abort_response(response)
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


def short_reason(exc: BaseException) -> str:
    """A short cause for a requests/urllib3 exception (their text nests deeply)."""
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "Connection reset", "Remote end closed"):
        if marker in text:
            return marker.lower()
    return text[:200]


def excerpt(body: bytes, limit: int = 300) -> str:
    text = body[:limit].decode("utf-8", "replace").strip()
    return text + ("…" if len(body) > limit else "") if text else "(empty body)"


def error_in_body(body: bytes, request_id: Any) -> dict[str, Any] | None:
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
