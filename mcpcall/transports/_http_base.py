"""What both HTTP transports share: the session, safe redirects, bounded bodies, the worker pool.

Used by :mod:`mcpcall.transports.http` (Streamable HTTP) and
:mod:`mcpcall.transports.httpsse` (the legacy HTTP+SSE transport).

- Every exchange runs inside an :class:`~._exchanges.Exchange`, so a cancel,
  a timeout or ``close()`` stops its I/O from any thread without waiting.
- Every body is read through :meth:`HTTPBase.read_body` (or an SSE decoder)
  under ``max_message_bytes``: replies, error bodies, notification answers.
- Redirects are followed only within the origin of the server URL, judged by
  the parser that connects (:mod:`mcpcall.urls`).
- Every exception raised while a worker serves a request ends in that
  request's Future, mapped to mcpcall's errors by :meth:`HTTPBase.transport_error`.
- A foreign error's text never reaches the mcpcall error that replaces it, its
  ``__cause__`` or its ``__context__``: requests and urllib3 quote the URL's
  path and query ("Max retries exceeded with url: /mcp?api_key=…"). The cause
  is a :class:`CauseSummary` (exception types and the operating system's
  error only), and mapped errors are raised outside the ``except`` block that
  caught the foreign one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Union
from urllib.parse import urljoin

from .. import jsonrpc, pieces
from ..errors import ConfigError, ConnectionClosed, HTTPError, MCPError, ProtocolError, RequestTimeout
from ..forking import Owned
from ..scheduler import get_scheduler
from ..sse import LargeEvent
from ..urls import origin, redact_url, same_origin
from ._bearer import BearerAuth
from ._exchanges import Exchange, Sending, sending, track_session
from ._lookups import LookupTimeout
from ._sender import DirectResponse, Sender
from .base import DEFAULT_MAX_MESSAGE_BYTES, Receiver, Transport, caller_waits, waiting_caller

__all__ = ["CauseSummary", "HTTPBase", "Job", "error_in_body"]

log = logging.getLogger("mcpcall.http")

_CHUNK = 64 * 1024
_PEEK = 4096  # bytes of an undecodable event looked at for its id
_MAX_REDIRECTS = 5
_EXCERPT = 300
#: How long a notification or a response may wait for its acknowledgement when the sender set no timeout.
ACK_TIMEOUT = 30.0

AuthOption = Union[None, str, Any, tuple[str, str]]


class Job:
    """One message for a worker to send, prepared on the caller's thread."""

    __slots__ = ("data", "exchange", "headers", "message", "method", "request_id", "session_id")

    def __init__(self, message: dict[str, Any], data: bytes, headers: dict[str, str], request_id: Any) -> None:
        self.message = message
        self.data = data
        self.headers = headers
        self.request_id = request_id
        self.method = str(message.get("method") or "a response")
        self.exchange = Exchange(request_id)
        #: The session the request was sent on (a late 404 for an old session must not end a new one).
        self.session_id = headers.get("Mcp-Session-Id")


def body_chunks(response: Any) -> Iterator[bytes]:
    """The body as it arrives (not waiting to fill a fixed-size buffer)."""
    if type(response) is DirectResponse:  # no content coding: each read as it came
        read, done = response.read1, response._original_response
        while True:
            data = read(_CHUNK)
            if not data:
                return
            yield data
            if done.fp is None:  # that was the end of the body (the connection is back in the pool)
                return
    if getattr(response, "_content_consumed", False) and isinstance(getattr(response, "_content", None), bytes):
        yield response._content  # already read (an auth hook looked at it first)
        return
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # pragma: no cover - urllib3 < 2
        yield from response.iter_content(chunk_size=None)
        return
    # Without a content coding each read is handed over as it came; decoding would copy every read
    # once more (through urllib3's queue of decoded bytes) to change nothing.
    decode = _content_coding(response) is not None
    while True:
        data = read1(_CHUNK, decode_content=decode)
        if not data:
            return
        yield data


def _content_coding(response: Any) -> str | None:
    """The body's content coding (``gzip``, ...), or None when the bytes are the body itself."""
    coding = str(response.headers.get("content-encoding") or "").strip().lower()
    return None if coding in ("", "identity") else coding


def _content_length(response: Any) -> int | None:
    """The body's length in bytes as read (``Content-Length`` of an uncoded body), if the server said."""
    if type(response) is DirectResponse:
        return response.length  # http.client's reading of Content-Length (None when chunked or not said)
    if _content_coding(response) is not None or "chunked" in str(response.headers.get("transfer-encoding") or "").lower():
        return None
    value = str(response.headers.get("content-length") or "").strip()
    return int(value) if value.isdigit() and len(value) < 19 else None


def excerpt(body: bytes, limit: int = _EXCERPT) -> str:
    """The start of a body, as text for a message."""
    text = body[:limit].decode("utf-8", "replace").strip()
    return text + ("…" if len(body) > limit else "") if text else "(empty body)"


def error_in_body(body: bytes, request_id: Any) -> dict[str, Any] | None:
    """A JSON-RPC error in an HTTP error body, given the request's id if it had none."""
    if request_id is None:
        return None
    try:
        message = jsonrpc.decode(body)
    except ProtocolError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("error"), dict):
        return None
    if message.get("id") is None:
        message = dict(message, id=request_id)
    if message.get("id") != request_id or jsonrpc.classify(message) != jsonrpc.RESPONSE:
        return None
    return dict(message)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what it wraps (requests and urllib3 nest errors in args) and its causes."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend(a for a in getattr(item, "args", ()) if isinstance(a, BaseException))
        reason = getattr(item, "reason", None)
        if isinstance(reason, BaseException):
            todo.append(reason)
        for linked in (item.__cause__, item.__context__):
            if linked is not None:
                todo.append(linked)


def _os_error(causes: list[BaseException]) -> str:
    """The operating system's error among ``causes`` (``[Errno 111] Connection refused``), or ""."""
    for cause in causes:
        if isinstance(cause, OSError) and isinstance(cause.errno, int) and isinstance(cause.strerror, str):
            return f"[Errno {cause.errno}] {cause.strerror}"
    return ""


class CauseSummary(Exception):
    """Stands in, as ``__cause__``, for the foreign exception an mcpcall error replaces.

    It names the types of that exception and of those it wraps, and the
    operating system's error or the TLS library's reason, never their text:
    requests and urllib3 quote the URL (path and query, keys included) in
    theirs, and a traceback, ``logging.exception`` or an error tracker shows
    every cause.
    """

    @classmethod
    def of(cls, exc: BaseException) -> CauseSummary:
        causes = list(_causes(exc))
        names = []
        for cause in causes:
            kind = type(cause)
            name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            if name not in names:
                names.append(name)
        detail = _os_error(causes)
        tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
        if tls is not None and isinstance(getattr(tls, "reason", None), str):
            detail = f"TLS: {tls.reason}"
        return cls(" <- ".join(names) + (f": {detail}" if detail else ""))


class HTTPBase(Transport):
    """What both HTTP transports share: the session, safe redirects, the worker pool."""

    logger_name = "mcpcall.http"

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
        problem = None
        try:
            _, host, _ = origin(url)
        except ValueError as exc:  # the parser's own text may quote the URL: redacted too
            problem = redact_url(f"not a usable server URL: {url} ({exc})")
        if problem is not None:  # raised here, not in the except block: the parser's error is not its context
            raise ConfigError(problem)
        if isinstance(auth, str):
            try:
                auth = BearerAuth(auth)
            except ValueError as exc:
                problem = f"server {name or host!r}: {exc}"
            if problem is not None:
                raise ConfigError(problem)
        self.url = url
        #: The URL fit for messages and reprs (no credentials, no secret query values).
        self.display_url = redact_url(url)
        self.name = name or host
        self.extra_headers = dict(headers or {})
        self.auth = auth
        self.verify = verify
        self.cert = cert
        self.proxies = dict(proxies or {})
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_message_bytes = max_message_bytes
        self.max_workers = max(1, max_workers)
        self.era_cache_key = ("http", url)
        self._owner = Owned()
        self._receiver: Receiver | None = None
        self._session: Any = None
        self._sender: Sender | None = None
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._busy = 0  # exchanges submitted and not yet ended: the workers' (queued too) and the callers' own
        self._exchanges: dict[Any, Exchange] = {}  # request id -> its exchange, from send() until its job ends
        self._active: set[Exchange] = set()  # every exchange under way (requests, notices, acknowledgements)
        self._closing = threading.Event()
        self._closed = False
        self._ended: ConnectionClosed | None = None  # why the connection ended on its own (under _lock)

    def _log_as(self, level: int, fmt: str, *args: Any, logger: str = "") -> None:
        """A record of an auth hook's (on a worker), emitted off the I/O thread like the transport's own."""
        receiver = self._receiver
        if receiver is not None:
            receiver.log(level, fmt, *args, logger=logger)
        else:
            logging.getLogger(logger or self.logger_name).log(level, fmt, *args)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.display_url!r}>"

    # -- the session -----------------------------------------------------------------

    def _open_session(self) -> Any:
        import requests

        session = track_session(requests.Session(), pool_connections=2, pool_maxsize=self.max_workers + 2, max_retries=0)
        if self.verify is not None:
            session.verify = self.verify
        if self.cert is not None:
            session.cert = self.cert
        if self.proxies:
            session.proxies.update(self.proxies)
        # requests re-reads the environment on every request (proxies, no_proxy, netrc, CA
        # bundle), 100-200 us a call. Every request of a transport goes to one origin, so look
        # once here and turn the per-request lookups off.
        from requests.utils import get_auth_from_url, get_environ_proxies, get_netrc_auth

        for key, value in get_environ_proxies(self.url, no_proxy=self.proxies.get("no_proxy")).items():
            session.proxies.setdefault(key, value)
        if self.verify is None:
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            if bundle:
                session.verify = bundle
        if self.auth is None:
            self.auth = get_netrc_auth(self.url)
        if self.auth is None and any(get_auth_from_url(self.url)):  # as requests does: user:password@ in the URL
            self.auth = get_auth_from_url(self.url)
        session.trust_env = False
        # Each request: the adapter's pool straight, with what requests would resolve per request resolved once.
        self._sender = Sender(session, self.url)
        return session

    def _http(self, method: str, url: str, *, headers: dict[str, str], data: bytes | None = None,
              what: str = "", read_timeout: float | None = None, connect_timeout: float | None = None) -> Any:
        """One HTTP exchange (streamed), following redirects only within the origin of ``self.url``."""
        sender = self._sender
        if self._session is None or sender is None:
            raise ConnectionClosed(f"client for server {self.name!r} is not started")
        what = what or method
        connect = connect_timeout if connect_timeout is not None else self.connect_timeout
        timeout = (connect, read_timeout if read_timeout is not None else self.read_timeout)
        for _ in range(_MAX_REDIRECTS + 1):
            error: MCPError | None = None
            auth = self.auth
            try:
                if auth is None:
                    response = sender.send(method, url, headers=headers, data=data, timeout=timeout, auth=None)
                else:
                    with sending(Sending(self.url, self._log_as)):  # an auth hook's resource is self.url, whatever URL this is
                        response = sender.send(method, url, headers=headers, data=data, timeout=timeout, auth=auth)
            except Exception as exc:  # noqa: BLE001 - mapped to mcpcall's errors here, in one place
                error = self.transport_error(exc, what, url, connect_timeout=connect)
            if error is not None:
                raise error  # outside the except block: no foreign __context__
            if response.status_code not in (301, 302, 303, 307, 308) or "location" not in response.headers:
                return response
            target = urljoin(url, response.headers["location"])
            status = response.status_code
            response.close()
            if not same_origin(self.url, target):
                raise HTTPError(
                    f"server {self.name!r} redirected {method} {redact_url(url)} to another origin or an unclear URL "
                    f"({redact_url(target)}); not followed, so headers and credentials stay with the server you named",
                    status=status,
                )
            if method != "GET" and status in (301, 302, 303):
                raise HTTPError(
                    f"server {self.name!r} redirected {method} {redact_url(url)} with {status}, which would "
                    f"turn it into a GET; use the final URL ({redact_url(target)}) instead",
                    status=status,
                )
            url = target
        raise HTTPError(f"server {self.name!r} redirected more than {_MAX_REDIRECTS} times", status=310)

    def transport_error(self, exc: BaseException, what: str, url: str | None = None, *,
                        connect_timeout: float | None = None) -> MCPError:
        """``exc`` (requests, urllib3, OSError, anything) as an mcpcall error that says what happened.

        The one place foreign errors are mapped. The error's ``__cause__`` is a
        :class:`CauseSummary` of ``exc``, never ``exc`` itself (its text may
        quote the URL's secrets); raise it outside the ``except`` block that
        caught ``exc``, so that ``exc`` is not its ``__context__`` either.
        """
        if isinstance(exc, MCPError):
            return exc
        error = self._mapped(exc, what, url, self.connect_timeout if connect_timeout is None else connect_timeout)
        error.__cause__ = CauseSummary.of(exc)  # also sets __suppress_context__
        return error

    def _mapped(self, exc: BaseException, what: str, url: str | None, connect_timeout: float) -> MCPError:
        import requests
        import urllib3.exceptions as u3

        where = redact_url(url or self.url)
        causes = list(_causes(exc))
        tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
        if tls is not None or isinstance(exc, requests.exceptions.SSLError):
            reason = getattr(tls, "reason", None) or (str(tls) if tls else "handshake failed")
            hint = " (is it an http:// server? the URL says https://)" if "WRONG_VERSION" in str(reason).upper() or \
                "RECORD_LAYER" in str(reason).upper() else ""
            return ConnectionClosed(f"could not reach server {self.name!r} at {where}: TLS failed: {reason}{hint}")
        unreachable = next((c for c in causes if isinstance(c, (u3.NewConnectionError, u3.NameResolutionError))), None)
        timed_out = any(type(c) is u3.ConnectTimeoutError for c in causes)  # NewConnectionError subclasses it
        if timed_out or (unreachable is None and isinstance(exc, requests.exceptions.ConnectTimeout)):
            return ConnectionClosed(f"could not reach server {self.name!r} at {where}: no connection within "
                                    f"{connect_timeout:g} s")
        if any(isinstance(c, TimeoutError) and "handshake" in str(c) for c in causes):
            # The handshake is bounded by the connect timeout; urllib3 reports it as a read timeout.
            return ConnectionClosed(f"could not reach server {self.name!r} at {where}: the TLS handshake did not "
                                    f"finish within {connect_timeout:g} s")
        if unreachable is not None:
            os_error = next((c for c in causes if isinstance(c, OSError) and c.strerror), None)
            reason = os_error.strerror if os_error is not None else str(unreachable).rsplit(": ", 1)[-1]
            if isinstance(unreachable, u3.NameResolutionError):
                reason = _lookup_failure(causes, connect_timeout)
            return ConnectionClosed(f"could not reach server {self.name!r} at {where}: {reason}")
        if isinstance(exc, (requests.exceptions.ReadTimeout, u3.ReadTimeoutError)):
            waited = "too long" if self.read_timeout is None else f"{self.read_timeout:g} s (read_timeout)"
            return ConnectionClosed(f"server {self.name!r} sent nothing for {waited} while answering {what}")
        if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                            requests.exceptions.InvalidSchema, u3.LocationParseError)):
            return ProtocolError(f"server {self.name!r}: cannot send {what} to {where}: the URL is invalid "
                                 f"({redact_url(str(exc))})")
        if isinstance(exc, requests.exceptions.InvalidHeader):  # its text quotes the value: a token, perhaps
            return ProtocolError(f"server {self.name!r}: cannot send {what}: a header value is not valid (a line break, "
                                 "a NUL or leading whitespace)")
        if isinstance(exc, UnicodeEncodeError):
            return ProtocolError(f"server {self.name!r}: cannot send {what}: a header value is not valid (only Latin-1 "
                                 f"characters can be sent; {exc.reason} at position {exc.start})")
        if isinstance(exc, (requests.exceptions.RequestException, u3.HTTPError, OSError, ValueError)):
            # Connected, then the connection broke: the server was reached.
            return ConnectionClosed(f"server {self.name!r} closed the connection before answering {what} "
                                    f"({_short(exc)})")
        return ProtocolError(f"server {self.name!r}: {what} failed ({type(exc).__name__}: {_short(exc)})")

    def read_body(self, response: Any, what: str, limit: int | None = None) -> bytes:
        """The whole body of ``response``, at most ``limit`` (default ``max_message_bytes``) bytes."""
        return b"".join(self.read_parts(response, what, limit))

    def read_message(self, response: Any, what: str) -> Any:
        """The JSON body of ``response``, parsed (at most ``max_message_bytes``; :class:`ProtocolError` if not JSON).

        The body's reads are handed to :func:`pieces.decode_parts` as they came, which
        lets each go once its text is taken: a large result is held about once, not
        as bytes beside their text and then text beside the parsed value.
        """
        parts = self.read_parts(response, what)
        try:
            if len(parts) == 1 and parts[0].__class__ is bytes:  # a small body, in one read
                return jsonrpc.decode(parts[0])
            return pieces.decode_parts(parts)
        except ProtocolError as exc:  # the decoder's text says what is wrong, not whose body it was
            error = ProtocolError(f"server {self.name!r} answered {what} with a body that is not valid JSON: {exc}")
        raise error

    def read_parts(self, response: Any, what: str, limit: int | None = None) -> list[pieces.Piece]:
        """The whole body of ``response`` as the reads it came in, at most ``limit`` (default ``max_message_bytes``) bytes.

        A ``Content-Length`` over the limit is refused before anything is read, a body
        that grows past it as soon as it does.
        """
        limit = self.max_message_bytes if limit is None else limit
        length = _content_length(response)
        if length is not None and length > limit:
            raise self._over_limit(limit, what)
        parts = pieces.Pieces()  # past a MiB, in blocks mapped on their own: each unmapped once decoded
        try:
            for chunk in body_chunks(response):
                if parts.size + len(chunk) > limit:
                    raise self._over_limit(limit, what)
                parts.append(chunk)
        except MCPError:
            parts.clear()
            raise
        except Exception as exc:  # noqa: BLE001 - a body that breaks off mid-way
            parts.clear()
            error = self.transport_error(exc, what)
        else:
            return parts.take()
        raise error  # outside the except block: no foreign __context__

    def _over_limit(self, limit: int, what: str) -> ProtocolError:
        return ProtocolError(
            f"server {self.name!r} sent a body over the limit of {limit} bytes in answer to {what} "
            "(raise max_message_bytes= if it is legitimate)"
        )

    def excerpt_of(self, response: Any) -> bytes:
        """The first bytes of an error body (never more than a few KiB are read)."""
        parts: list[bytes] = []
        size = 0
        with contextlib.suppress(Exception):
            for chunk in body_chunks(response):
                parts.append(chunk)
                size += len(chunk)
                if size >= 8 * 1024:
                    break
        return b"".join(parts)

    def event_message(self, event: Any) -> tuple[Any, Any]:
        """The message an SSE event carries, and the id of a request failed instead (else None).

        An event whose data is not JSON is skipped, with a warning; if it names a
        request (its id comes first: an answer cut short), that request fails now
        with :class:`ProtocolError`, as a line of stdio does, rather than at its deadline.
        """
        if isinstance(event, LargeEvent):  # its data as the reads it came in, each let go once decoded
            parts = event.take()
            head = b"".join(bytes(part[:_PEEK]) for part in parts[:2])[:_PEEK]
            try:
                return pieces.decode_parts(parts, "replace"), None
            except ProtocolError as exc:
                problem = exc
        else:
            try:
                return jsonrpc.decode(event.data), None
            except ProtocolError as exc:
                problem = exc
            head = event.data[:_PEEK].encode("utf-8", "replace")
        request_id = jsonrpc.peek_id(head)
        receiver = self._receiver
        if receiver is None:
            return None, None
        if request_id is None:
            receiver.on_warning(f"server {self.name!r} sent an SSE event that is not JSON; skipped: {problem}",
                                kind="sse-not-json")
            return None, None
        receiver.on_bad_message(ProtocolError(f"server {self.name!r} answered request {request_id!r} with an SSE "
                                              f"event that is not valid JSON: {problem}"), request_id)
        return None, request_id

    def _deliver(self, message: Any) -> None:
        receiver = self._receiver
        if receiver is None:
            return
        if isinstance(message, list):  # a JSON-RPC batch (2025-03-26)
            for item in message:
                self._deliver(item)
            return
        if not isinstance(message, dict):
            receiver.on_warning(f"server {self.name!r} sent JSON that is not a message; skipped: {jsonrpc.excerpt(message)}",
                                kind="not-a-message")
            return
        receiver.on_message(message)

    def _fail(self, request_id: Any, error: BaseException) -> None:
        receiver = self._receiver
        if receiver is None or self._closing.is_set():
            return
        if request_id is None:
            self._log(logging.DEBUG, "server %r: %s", self.name, str(error))
            return
        receiver.on_bad_message(error, request_id)

    # -- the worker pool -----------------------------------------------------------

    def _submit(self, job: Job) -> None:
        here = job.request_id is not None and waiting_caller()
        with self._lock:
            if self._closing.is_set():
                raise ConnectionClosed(f"client for server {self.name!r} is closed")
            if job.request_id is not None:
                self._exchanges[job.request_id] = job.exchange
            self._active.add(job.exchange)
            # A caller that blocks on this request runs it itself (no hop to a worker and back), while
            # fewer than max_workers exchanges run: the pool has a connection for each of them.
            here = here and self._busy < self.max_workers
            self._busy += 1
            if here:
                pass
            elif self._idle > 0:
                self._idle -= 1  # an idle worker will take it
            elif len(self._workers) < self.max_workers:
                worker = threading.Thread(
                    target=self._work, name=f"mcpcall-http-{self.name}-{len(self._workers) + 1}", daemon=True
                )
                self._workers.append(worker)
                worker.start()
        if here:
            self._run_here(job)
        else:
            self._jobs.put(job)

    def _run_here(self, job: Job) -> None:
        """Run ``job`` on the calling thread, as a worker would: its deadline, a cancel and close() abort its exchange."""
        exchange = job.exchange
        try:
            with exchange, caller_waits(False):  # what it sends meanwhile (a next round) nobody blocks on here
                if not exchange.aborted.is_set():
                    self._run_job(job)
                else:
                    self._not_run(job)
        except Exception as exc:  # noqa: BLE001 - whatever happens ends in the Future it concerns
            if not exchange.aborted.is_set():
                self._fail(job.request_id, self.transport_error(exc, job.method))
        except BaseException:  # Ctrl-C on the caller's thread: the request ends here, its sockets with it
            exchange.abort()
            raise
        finally:
            with self._lock:
                if self._exchanges.get(job.request_id) is exchange:
                    del self._exchanges[job.request_id]
                self._active.discard(exchange)
                self._busy -= 1

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                with job.exchange:
                    if not job.exchange.aborted.is_set():
                        self._run_job(job)
                    else:
                        self._not_run(job)
            except BaseException as exc:  # noqa: BLE001 - whatever happens ends in the Future it concerns
                if not job.exchange.aborted.is_set():
                    self._fail(job.request_id, self.transport_error(exc, job.method))
            finally:
                with self._lock:
                    if self._exchanges.get(job.request_id) is job.exchange:
                        del self._exchanges[job.request_id]
                    self._active.discard(job.exchange)
                    self._idle += 1
                    self._busy -= 1

    def _run_job(self, job: Job) -> None:
        raise NotImplementedError

    def _not_run(self, job: Job) -> None:
        """``job`` was aborted before it ran (its request was cancelled, answered or failed, or the client closed):
        let go of what was kept for it until it ended."""

    def skipped_note(self, since: int = 0, request_id: Any = None) -> str | None:
        """What explains the silence of request ``request_id``, or None: a name lookup of its that had not finished
        (a dead DNS server), else a TCP connect or a TLS handshake of its that had not (a host that stopped
        accepting, a stalled handshake).

        The request's own exchange waits for it now (asked when its deadline
        passes, before the timeout aborts it: :attr:`RequestTimeout.note` keeps
        it). What other exchanges wait for says nothing about this request: a
        request the server has and does not answer is never told of another's
        connect. None when ``request_id`` is None.
        """
        if request_id is None:
            return None
        with self._lock:
            exchange = self._exchanges.get(request_id)
            if exchange is None:
                return None
            host, stage = exchange.unresolved, exchange.connecting
        if host is not None:
            return lookup_note(host)
        return f"{stage} {self.display_url} had not finished" if stage is not None else None

    def acknowledged(self, job: Job, timeout: float | None, run: Callable[[Job], None]) -> None:
        """Run ``run(job)`` on the calling thread: a POST whose reply is only an acknowledgement.

        It is one exchange like any other: ``close()`` aborts it, and so does
        its deadline (``timeout`` seconds, default :data:`ACK_TIMEOUT`), which
        then raises :class:`RequestTimeout`. Whatever else goes wrong is mapped
        to mcpcall's errors.
        """
        seconds = ACK_TIMEOUT if timeout is None else timeout
        exchange = job.exchange
        with self._lock:
            if self._closing.is_set():
                raise ConnectionClosed(f"client for server {self.name!r} is closed")
            ended = self._ended
            if ended is None:
                self._active.add(exchange)
        if ended is not None:
            raise ConnectionClosed(f"{ended} (not sent: {job.method})")
        timer = get_scheduler().schedule(seconds, exchange.abort) if seconds != math.inf else None
        error: BaseException | None = None
        try:
            with exchange:
                run(job)
        except BaseException as exc:  # noqa: BLE001 - raised below, outside this block (no foreign __context__)
            error = exc if not exchange.aborted.is_set() or not isinstance(exc, Exception) else None
            if error is not None and isinstance(error, Exception):
                error = self.transport_error(error, job.method)
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._active.discard(exchange)
        if error is not None:
            raise error
        if not exchange.aborted.is_set():
            return
        if self._closing.is_set():
            raise ConnectionClosed(f"client for server {self.name!r} was closed while sending {job.method}")
        ended = self._ended
        if ended is not None:  # aborted with every exchange when the connection ended, not by its deadline
            raise ConnectionClosed(f"{ended} (while sending {job.method})")
        if not exchange.connected:  # the deadline came while connecting: nothing was sent
            note = f" ({lookup_note(exchange.unresolved)})" if exchange.unresolved is not None else ""
            raise RequestTimeout(
                f"could not connect to server {self.name!r} at {self.display_url} within {seconds:g} s "
                f"to send {job.method}{note}", method=job.method, timeout=seconds,
            )
        raise RequestTimeout(
            f"server {self.name!r} did not acknowledge {job.method} within {seconds:g} s",
            method=job.method, timeout=seconds,
        )

    # -- shared contract -------------------------------------------------------------

    def cancel(self, request_id: Any, reason: str, *, notify: bool = True) -> None:
        with self._lock:
            exchange = self._exchanges.get(request_id)
        if exchange is not None:
            exchange.abort()  # its worker sees the shut socket, closes the response and moves on

    def _abort_exchanges(self) -> None:
        """Abort every exchange under way (requests, notices, acknowledgements): the connection is over (set
        ``_ended`` first: an acknowledgement aborted here, or sent from then on, raises it, not a timeout)."""
        with self._lock:
            exchanges = list(self._exchanges.values()) + list(self._active)
        for exchange in exchanges:
            exchange.abort()

    def _stop_workers(self) -> None:
        with self._lock:
            exchanges = list(self._exchanges.values()) + list(self._active)
            self._exchanges.clear()
            workers = list(self._workers)
        for exchange in exchanges:
            exchange.abort()
        for _ in workers:
            self._jobs.put(None)
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


def _lookup_failure(causes: list[BaseException], connect_timeout: float) -> str:
    """Why the host name of a connection did not resolve, from the resolver's error among ``causes``."""
    failure = next((c for c in causes if isinstance(c, socket.gaierror)), None)
    if isinstance(failure, LookupTimeout):
        return f"the name lookup of its host did not finish within {connect_timeout:g} s (is a DNS server reachable?)"
    if failure is not None and failure.errno == getattr(socket, "EAI_AGAIN", None):
        return f"the name lookup of its host failed ({failure.strerror}; is a DNS server reachable?)"
    return "the host name does not resolve"


def lookup_note(host: str) -> str:
    """A clause for a timeout that came while the name of ``host`` was being looked up."""
    return f"the name lookup of {host!r} had not finished (is a DNS server reachable?)"


def _short(exc: BaseException) -> str:
    """A short cause for a requests/urllib3 exception (their text nests deeply, and quotes the URL)."""
    causes = list(_causes(exc))
    text = " ".join(str(c) for c in causes)
    for marker in ("Connection refused", "Connection reset", "Remote end closed connection without response",
                   "IncompleteRead", "Connection broken", "Connection aborted", "timed out"):
        if marker in text:
            return marker[0].lower() + marker[1:]
    return _os_error(causes) or type(causes[-1] if causes else exc).__name__
