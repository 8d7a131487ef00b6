"""A small, scriptable MCP server over HTTP, for tests/transports/test_http*.py and tests/faults.

It runs in the test process (a stdlib ``ThreadingHTTPServer`` on 127.0.0.1,
port 0) and speaks just enough MCP to exercise what well-behaved servers never
do. Tests flip its switches (attributes) and read what it saw (:attr:`seen`).

Endpoints:

- ``POST /mcp`` (and ``/mcp2``, a same-origin redirect target): Streamable
  HTTP. Legacy requests need ``initialize`` first and carry ``Mcp-Session-Id``;
  modern (2026-07-28) requests carry the version in ``params._meta`` and are
  checked against their ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name``/
  ``Mcp-Param-*`` headers (a mismatch is a 400 with error -32020).
- ``GET /mcp``: 405, a standalone stream (``get_stream = "sse"``) carrying what
  :meth:`FaultServer.push` queues, or, with ``Last-Event-ID``, the replay of a
  stream the server broke off. With ``post_status = 405`` it is instead the
  legacy HTTP+SSE stream, as on ``GET /sse``.
- ``GET /sse`` + ``POST /messages?sessionId=…``: the 2024-11-05 HTTP+SSE
  transport; the ``endpoint`` event names ``sse_endpoint`` if set. Its
  sessions are in :attr:`FaultServer.sessions` too, and ``expire_after``
  forgets them alike (a POST for a session it no longer knows is a 404
  "unknown session"; the stream stays open, carrying only keep-alives).
- ``DELETE /mcp``: ends the session (``delete_status``).

Tools: ``echo(message)``; ``big(size, sse)`` (a text of ``size`` characters,
see :func:`big_text`); ``slow(seconds)`` (an SSE stream of keep-alives,
noticing when the client drops it); ``trickle(message)`` (an SSE reply with
comments, CRLFs and a progress notice, a few bytes per TCP write);
``hold(seconds)`` (no reply at all, not even headers, for ``seconds``, noticing
a client that hangs up); ``resume(message)`` (a priming event, then the stream closes; the answer
comes on the GET with ``Last-Event-ID``); ``hdr`` (``x-mcp-header``
parameters); ``bad_number`` and ``bad_empty`` (invalid annotations); ``elicit`` (legacy: asks the
client with ``elicitation/create`` on the standalone GET stream and answers with what it said; a
request it cannot deliver, no GET stream being open, is dropped, as stateful SDK servers do, and
the call then gets no answer: :attr:`FaultServer.undelivered` counts them); ``ask`` (an SSE reply
carrying ``elicitation/create``, then the answer with what the client said).

Fault switches beyond the above (see :class:`FaultServer`):

- ``fail``: canned replies by tool name or method, for notifications and
  HTTP+SSE ``/messages`` POSTs too (a canned ``/messages`` reply replaces the
  202, and nothing comes on the stream).
- ``stall``: tool names or methods answered with silence (no reply, not even
  headers) until the client hangs up, the server stops, or :attr:`release`
  is set; then the request gets its normal (or canned) answer. An HTTP+SSE
  ``/messages`` POST is counted in its session first, then stalled, then
  accepted (202), its answer going to that session's stream.
- ``close_delimited``: every SSE reply and stream ends by closing the
  connection (no Content-Length, not chunked).
- ``endpoint_event = False``: the HTTP+SSE stream never names its endpoint
  (keep-alives only).
- ``FaultServer(host="127.0.0.2")``: another loopback host, for origin tests.
- ``get_delay``: seconds the standalone GET stream takes to answer (its headers), so that a
  client that does not wait for it to open calls ``elicit`` before it is.
- :meth:`FaultServer.stop_accepting`: the host stops accepting connections (the
  accept loop ends and the listen backlog is kept full), so a new TCP connect
  hangs in SYN_SENT; connections already open are cut.
- :attr:`Seen.peer` is the client's port: which requests shared a connection.
- :attr:`FaultServer.keepalives` counts the keep-alives written on streams (a stream's age, in 50 ms steps).
- :meth:`FaultServer.cut`: every open connection is cut; new ones are served.
- ``reset``: tool names whose reply is cut by a TCP reset (RST) part-way: a JSON
  body after half its bytes, an SSE reply after a first comment and half an
  event; over HTTP+SSE the POST gets its 202 and then the stream is reset.
- ``drip``: tool names whose whole reply (status line, headers and body) goes
  out one byte every ``drip_interval`` seconds, so no single read ever waits
  long; over HTTP+SSE the answer's event on the stream is dripped.
- ``drip_ack`` (HTTP+SSE): tool names whose answer goes out on the stream at
  once while the POST's 202 is dripped.
- ``sse_junk``: bytes written into every SSE reply before its answer (and onto
  the HTTP+SSE stream before each message it carries): lines that are no SSE
  field, comments, invalid UTF-8, an ``id`` with a NUL, a bad ``retry``
  (:data:`SSE_JUNK` is such bytes).
- ``stream_body``: the HTTP+SSE ``GET`` answers with these bytes as a
  ``text/event-stream`` body and closes (no endpoint event unless they hold one).
- ``FaultServer(tls=(cert_file, key_file))``: the server speaks HTTPS (its
  :attr:`~FaultServer.origin` says ``https``); ``tls_handshake`` is
  ``"normal"``, ``"silent"`` (new connections are accepted and never answered)
  or ``"drip"`` (the server's handshake bytes go out one every
  ``drip_interval`` seconds).
- The ``slow`` tool also works over HTTP+SSE: 202, then the answer on the
  stream after ``seconds`` (keep-alives meanwhile).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import select
import socket
import ssl
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
HEADER_MISMATCH = -32020
MCP_PATHS = ("/mcp", "/mcp2")
_DRIP = "__drip__"  # a message on the HTTP+SSE stream to drip (see _Handler._pump)
_RESET = "__reset__"  # a reset of the HTTP+SSE stream in its queue


def big_text(size: int) -> str:
    """``size`` characters that show any lost, repeated or reordered piece."""
    out = []
    total = 0
    n = 0
    while total < size:
        piece = f"{n:08d}|"
        out.append(piece)
        total += len(piece)
        n += 1
    return "".join(out)[:size]


def _prop(kind: str, header: Any = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if header is not None:
        schema["x-mcp-header"] = header
    return schema


TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": _prop("string")}}},
    {"name": "big", "inputSchema": {"type": "object", "properties": {"size": _prop("integer"), "sse": _prop("boolean")}}},
    {"name": "slow", "inputSchema": {"type": "object", "properties": {"seconds": _prop("number")}}},
    {"name": "hold", "inputSchema": {"type": "object", "properties": {"seconds": _prop("number")}}},
    {"name": "trickle", "inputSchema": {"type": "object", "properties": {"message": _prop("string")}}},
    {"name": "resume", "inputSchema": {"type": "object", "properties": {"message": _prop("string")}}},
    {"name": "hdr", "inputSchema": {"type": "object", "properties": {
        "region": _prop("string", "Region"),
        "greeting": _prop("string", "Greeting"),
        "count": _prop("integer", "Count"),
        "flag": _prop("boolean", "Flag"),
        "plain": _prop("string"),
    }}},
    {"name": "bad_number", "inputSchema": {"type": "object", "properties": {"ratio": _prop("number", "Ratio")}}},
    {"name": "elicit", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "ask", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "bad_empty", "inputSchema": {"type": "object", "properties": {"x": _prop("string", "")}}},
]
HEADER_PARAMS = {"hdr": {"region": "Region", "greeting": "Greeting", "count": "Count", "flag": "Flag"}}


@dataclass
class Seen:
    """One HTTP request the server received."""

    verb: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any = None  # the decoded JSON body, if any
    at: float = field(default_factory=time.monotonic)
    peer: int = 0  # the client's port: requests on one connection share it

    @property
    def method(self) -> str | None:
        """The JSON-RPC method of the body, if it has one."""
        return self.body.get("method") if isinstance(self.body, dict) else None


@dataclass
class Reply:
    """A canned HTTP reply that replaces the normal answer (see :attr:`FaultServer.fail`)."""

    status: int
    body: bytes | Callable[[dict[str, Any]], bytes] = b""  # or built from the request
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


class FaultServer:
    """The server; :meth:`start` it, flip switches, :meth:`stop` it."""

    def __init__(self, host: str = "127.0.0.1", tls: tuple[str, str] | None = None) -> None:
        self.host = host
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        # -- switches --------------------------------------------------------
        self.modern = True  # answer server/discover (else -32601: a legacy-only server)
        self.reply = "json"  # how requests are answered: "json" or "sse"
        self.get_stream = "405"  # GET /mcp: "405" or "sse" (standalone stream)
        self.post_status: int | None = None  # refuse every POST /mcp with this (e.g. 405)
        self.delete_status = 200
        self.expire_after: int | None = None  # a session dies after this many requests
        self.redirect: str | None = None  # 307 every POST /mcp to this Location
        self.sse_endpoint: str | None = None  # the HTTP+SSE endpoint event (default: same origin)
        #: Canned replies by tool name (tools/call) or method (notifications and /messages too).
        self.fail: dict[str, Reply] = {}
        #: Tool names or methods that get no reply at all until the client hangs up, the server
        #: stops or :attr:`release` is set (then the normal or canned reply).
        self.stall: set[str] = set()
        self.release = threading.Event()
        self.close_delimited = False  # SSE replies and streams end by closing the connection
        self.endpoint_event = True  # the HTTP+SSE stream names its endpoint
        self.get_delay = 0.0  # seconds before the standalone GET stream answers
        self.get_retry_ms: int | None = None  # the standalone GET stream starts with this ``retry:``
        self.reset: set[str] = set()  # tool names whose reply is cut by a TCP reset part-way
        self.drip: set[str] = set()  # tool names whose whole reply goes out a byte at a time
        self.drip_ack: set[str] = set()  # HTTP+SSE: tool names answered at once on the stream, their 202 dripped
        self.drip_interval = 0.05  # seconds between two dripped bytes (replies and the TLS handshake)
        self.sse_junk = b""  # written into every SSE reply before its answer, and before each HTTP+SSE message
        self.stream_body: bytes | None = None  # the HTTP+SSE GET answers with this body and closes
        self.tls_handshake = "normal"  # with tls=: "normal", "silent" or "drip"
        # -- what happened -----------------------------------------------------
        self.seen: list[Seen] = []
        self.sessions: dict[str, int] = {}  # live session id -> requests seen
        self.dropped: list[Any] = []  # ids of slow/hold calls whose connection the client closed
        self.resume_closed_at: float | None = None
        self.undelivered = 0  # server requests dropped: no GET stream was open (the ``elicit`` tool)
        self.get_streams_open = 0
        self.keepalives = 0  # keep-alive comments written on streams (GET and HTTP+SSE): a stream's age in 50 ms steps
        self.responses: dict[Any, Any] = {}  # id -> what the client answered to a server request
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._notices: queue.Queue[dict[str, Any]] = queue.Queue()
        self._sse_queues: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._replay: dict[str, dict[str, Any]] = {}
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._backlog: list[socket.socket] = []  # connections that fill the listen backlog (stop_accepting)
        self._timers: list[threading.Timer] = []  # late answers of ``slow`` over HTTP+SSE

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FaultServer:
        self._httpd = _HTTPServer((self.host, 0), _Handler)
        self._httpd.fault = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fault-http-accept", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        return f"{'https' if self._tls is not None else 'http'}://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return self.origin + "/mcp"

    def stop(self) -> None:
        """Stop accepting, cut every open connection, wait for the handler threads."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        for timer in self._timers:
            timer.cancel()
            timer.join(5)
        httpd.shutdown()
        assert self._thread is not None
        self._thread.join(5)
        httpd.cut_connections()
        httpd.join_handlers(5)
        httpd.server_close()
        for sock in self._backlog:
            sock.close()
        self._backlog.clear()
        self._httpd = None

    def cut(self) -> None:
        """Cut every open connection (a client's pooled ones too): its next request opens a new one."""
        assert self._httpd is not None
        self._httpd.cut_connections()

    def stop_accepting(self) -> None:
        """Keep listening but never accept again, with the backlog full: a new TCP connect hangs.

        The accept loop ends, the backlog shrinks to its minimum and is filled
        with connections of our own until one of them gets no answer to its SYN
        (the kernel drops SYNs to a listener whose accept queue is full). Open
        connections are cut, so the client's pooled ones are gone too.
        """
        httpd = self._httpd
        assert httpd is not None and self._thread is not None
        httpd.shutdown()
        self._thread.join(5)
        httpd.socket.listen(0)
        for _ in range(64):
            sock = socket.socket()
            sock.setblocking(False)
            self._backlog.append(sock)
            sock.connect_ex((self.host, self.port))
            _, connected, _ = select.select([], [sock], [], 0.5)
            if not connected:  # its SYN went unanswered: the backlog is full
                break
        else:
            raise RuntimeError("the listen backlog never filled up")
        httpd.cut_connections()

    # -- for tests -------------------------------------------------------------------

    def push(self, message: dict[str, Any]) -> None:
        """Queue a message for the standalone GET stream."""
        self._notices.put(message)

    def requests(self, method: str | None = None, verb: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if (method is None or s.method == method) and (verb is None or s.verb == verb)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` (called under the lock) holds."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _record(self, seen: Seen) -> None:
        with self._changed:
            self.seen.append(seen)
            self._changed.notify_all()

    def _note_drop(self, request_id: Any) -> None:
        with self._changed:
            self.dropped.append(request_id)
            self._changed.notify_all()

    # -- MCP -----------------------------------------------------------------------------

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The response to a request that needs no streaming."""
        method = message.get("method")
        params = message.get("params") or {}
        modern = isinstance(params.get("_meta"), dict) and META_VERSION in params["_meta"]
        rid = message.get("id")
        if method == "initialize":
            asked = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": asked if asked in LEGACY else LEGACY[0],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "fault-server", "version": "1.0"},
            }
        elif method == "server/discover":
            if not self.modern:
                return _error(rid, -32601, "Method not found")
            result = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fault-server", "version": "1.0"}},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name = params.get("name")
            args = params.get("arguments") or {}
            if name in ("echo", "trickle", "resume"):
                text = str(args.get("message", ""))
            elif name == "big":
                text = big_text(int(args.get("size", 0)))
            elif name == "hdr":
                text = json.dumps(args, sort_keys=True)
            else:
                return _error(rid, -32602, f"unknown tool {name!r}")
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            return _error(rid, -32601, f"Method not found: {method}")
        if modern:
            result["resultType"] = "complete"
        return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def sse_event(data: Any = None, *, event_id: str | None = None, retry: int | None = None,
              event: str | None = None) -> bytes:
    """One SSE event; ``data`` is a message (encoded as JSON) or a string."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    text = data if isinstance(data, str) else ("" if data is None else json.dumps(data))
    lines.extend(f"data: {line}" for line in (text.split("\n") if text else [""]))
    return ("\n".join(lines) + "\n\n").encode()


def _decode_header(value: str) -> str:
    if value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[9:-2]).decode("utf-8")
    return value


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _HTTPServer(ThreadingHTTPServer):
    """Tracks its connections and handler threads, so :meth:`FaultServer.stop` ends them all."""

    daemon_threads = True
    fault: FaultServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._conns: set = set()
        self._handlers: list[threading.Thread] = []
        self._guard = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        if self.fault._tls is not None:
            wrapped = self._handshake(request)
            if wrapped is None:
                self.shutdown_request(request)
                return
            request = wrapped
        super().process_request_thread(request, client_address)

    def _handshake(self, request: socket.socket) -> ssl.SSLSocket | None:
        """The server's side of the TLS handshake, as :attr:`FaultServer.tls_handshake` says; None: no connection to serve."""
        fault = self.fault
        assert fault._tls is not None
        if fault.tls_handshake != "normal":
            self._stall_handshake(request, fault._tls, drip=fault.tls_handshake == "drip")
            return None
        request.settimeout(5)
        try:
            wrapped = fault._tls.wrap_socket(request, server_side=True)
        except (OSError, ValueError):
            return None
        wrapped.settimeout(None)
        with self._guard:
            self._conns.discard(request)
            self._conns.add(wrapped)
        return wrapped

    def _stall_handshake(self, request: socket.socket, context: ssl.SSLContext, *, drip: bool) -> None:
        """Never answer the ClientHello, or (``drip``) answer it a byte every ``drip_interval`` seconds,
        until the client hangs up or the server stops."""
        fault = self.fault
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_side=True)
        pending = b""
        while not fault._stopping.is_set():
            if drip:
                try:
                    tls.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    return
                pending += outgoing.read()
            readable, _, _ = select.select([request], [], [], fault.drip_interval if pending else 0.05)
            try:
                if readable:
                    data = request.recv(65536)
                    if not data:
                        return
                    incoming.write(data)
                elif pending:
                    request.sendall(pending[:1])
                    pending = pending[1:]
            except OSError:
                return

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name="fault-http-handler", daemon=True)
        with self._guard:
            self._conns.add(request)
            self._handlers = [t for t in self._handlers if t.is_alive()] + [thread]
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._guard:
            self._conns.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self._guard:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join_handlers(self, timeout: float) -> None:
        with self._guard:
            handlers = list(self._handlers)
        deadline = time.monotonic() + timeout
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall per reply
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def fault(self) -> FaultServer:
        return self.server.fault

    # -- plumbing ------------------------------------------------------------------------

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the client went away (or stop() cut the connection)
            self.close_connection = True

    def _seen(self, body: Any = None) -> Seen:
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                    peer=int(self.client_address[1]))
        self.fault._record(seen)
        return seen

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw

    def send_body(self, status: int, body: bytes, content_type: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, message: Any, headers: dict[str, str] | None = None) -> None:
        self.send_body(status, json.dumps(message).encode(), "application/json", headers)

    def start_sse(self, headers: dict[str, str] | None = None, *, chunked: bool = True) -> None:
        """Begin an SSE reply: chunked, or (``chunked=False``) ended by closing the connection."""
        chunked = chunked and not self.fault.close_delimited
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._chunked = chunked

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self._chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self.wfile.write(data)

    def end_sse(self) -> None:
        if self._chunked:
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.close_connection = True

    # -- verbs ---------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._read_json()
        self._seen(body)
        fault = self.fault
        if path == "/messages":
            self._post_legacy_sse(body)
        elif path not in MCP_PATHS:
            self.send_body(404, b"not found", "text/plain")
        elif fault.post_status is not None:
            self.send_body(fault.post_status, b"POST not supported here", "text/plain")
        elif fault.redirect is not None and path == "/mcp":
            self.send_body(307, b"", "text/plain", {"Location": fault.redirect})
        elif not isinstance(body, dict):
            self.send_json(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        else:
            self._post_mcp(body)

    def _post_mcp(self, message: dict[str, Any]) -> None:
        fault = self.fault
        method = message.get("method")
        params = message.get("params") or {}
        is_request = method is not None and "id" in message
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        headers: dict[str, str] = {}
        if version is not None:
            problem = self._modern_header_problem(message, version)
            if problem is not None:
                self.send_json(400, _error(message.get("id"), HEADER_MISMATCH, problem))
                return
        elif method == "initialize":
            new_sid = uuid.uuid4().hex
            with fault._lock:
                fault.sessions[new_sid] = 0
            headers["Mcp-Session-Id"] = new_sid
        elif method is not None or "result" in message or "error" in message:
            sid = self.headers.get("Mcp-Session-Id")
            if sid is None and method != "server/discover":
                self.send_json(400, _error(message.get("id"), -32000, "Bad Request: no session"))
                return
            if sid is not None:
                with fault._lock:
                    count = fault.sessions.get(sid)
                    if count is not None:
                        fault.sessions[sid] = count + 1
                        if fault.expire_after is not None and count + 1 > fault.expire_after:
                            del fault.sessions[sid]
                            count = None
                if count is None:
                    self.send_json(404, _error(message.get("id"), -32001, "Session not found"))
                    return
        key = params.get("name") if method == "tools/call" else method
        if str(key) in fault.stall and not self._stall(message):
            return
        canned = fault.fail.get(str(key))
        if canned is not None:
            self._send_canned(canned, message)
            return
        if not is_request and method is None and "id" in message:
            with fault._changed:
                fault.responses[message["id"]] = message
                fault._changed.notify_all()
        if not is_request:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "tools/call" and key in fault.reset:
            self._reply_reset(message, headers)
            return
        if method == "tools/call" and key in fault.drip:
            self._reply_drip(message, headers)
            return
        if method == "tools/call" and key in ("slow", "hold", "trickle", "resume", "elicit", "ask"):
            getattr(self, f"_tool_{key}")(message, headers)
            return
        reply = fault.answer(message)
        use_sse = fault.reply == "sse"
        if method == "tools/call" and key == "big" and "sse" in (params.get("arguments") or {}):
            use_sse = bool(params["arguments"]["sse"])
        if use_sse:
            self.start_sse(headers)
            self.write(fault.sse_junk)
            data = sse_event(reply, event_id=uuid.uuid4().hex)
            for start in range(0, len(data), 65536):
                self.write(data[start:start + 65536])
            self.end_sse()
        else:
            self.send_json(200, reply, headers)

    def _reply_reset(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """Part of the reply, then a TCP reset: half a JSON body, or a comment and half an event."""
        whole = json.dumps(self.fault.answer(message)).encode()
        if self.fault.reply == "sse":
            self.start_sse(headers)
            self.write(b": working\n\n" + sse_event(self.fault.answer(message))[: len(whole) // 2])
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(whole)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(whole[: len(whole) // 2])
        with self.server._guard:
            self.server._conns.discard(self.connection)
        _reset_socket(self.connection)
        self.close_connection = True

    def _reply_drip(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """The whole reply, status line and headers included, one byte every ``drip_interval`` seconds."""
        answer = self.fault.answer(message)
        if self.fault.reply == "sse":
            body = sse_event(answer)
            lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache"]
        else:
            body = json.dumps(answer).encode()
            lines = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}"]
        lines += ["Connection: close"] + [f"{name}: {value}" for name, value in headers.items()]
        self.close_connection = True
        self._drip(("\r\n".join(lines) + "\r\n\r\n").encode() + body, message.get("id"))

    def _drip(self, data: bytes, request_id: Any, send: Callable[[bytes], Any] | None = None) -> bool:
        """Send ``data`` a byte at a time (with ``send``, default: straight to the socket); False when the
        client hung up (noted) or the server stopped first."""
        conn = self.connection
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        send = send or conn.sendall
        for i in range(len(data)):
            if self.fault._stopping.is_set():
                return False
            try:
                gone = _peer_closed(conn, self.fault.drip_interval)
                if not gone:
                    send(data[i : i + 1])
            except OSError:
                gone = True
            if gone:
                self.fault._note_drop(request_id)
                return False
        return True

    def _send_canned(self, canned: Reply, message: dict[str, Any]) -> None:
        body = canned.body(message) if callable(canned.body) else canned.body
        self.send_body(canned.status, body, canned.content_type, canned.headers)

    def _stall(self, message: dict[str, Any]) -> bool:
        """Send nothing until :attr:`FaultServer.release` (True) or the client hangs up / the server stops (False)."""
        fault = self.fault
        conn = self.connection
        while not fault.release.is_set():
            if fault._stopping.is_set():
                self.close_connection = True
                return False
            if _peer_closed(conn):
                fault._note_drop(message.get("id"))
                self.close_connection = True
                return False
        return True

    def _modern_header_problem(self, message: dict[str, Any], version: str) -> str | None:
        """What is wrong with a modern request's headers (None: all fine)."""
        h = self.headers
        if self.headers.get("Mcp-Session-Id") is not None:
            return "a modern request carried Mcp-Session-Id"
        if h.get("MCP-Protocol-Version") != version:
            return f"MCP-Protocol-Version {h.get('MCP-Protocol-Version')!r} does not match the body's {version!r}"
        if h.get("Mcp-Method") != message.get("method"):
            return f"Mcp-Method {h.get('Mcp-Method')!r} does not match the body's {message.get('method')!r}"
        params = message.get("params") or {}
        if message.get("method") == "tools/call":
            if _decode_header(h.get("Mcp-Name", "")) != params.get("name"):
                return f"Mcp-Name {h.get('Mcp-Name')!r} does not match the body"
            args = params.get("arguments") or {}
            for prop, name in HEADER_PARAMS.get(str(params.get("name")), {}).items():
                sent = h.get(f"Mcp-Param-{name}")
                if prop not in args:
                    if sent is not None:
                        return f"Mcp-Param-{name} sent for an absent argument"
                    continue
                if sent is None or _decode_header(sent) != _header_text(args[prop]):
                    return f"Mcp-Param-{name} {sent!r} does not match the body"
        return None

    # -- streaming tools -------------------------------------------------------------------

    def _progress(self, message: dict[str, Any], progress: int, total: int) -> dict[str, Any] | None:
        meta = (message.get("params") or {}).get("_meta") or {}
        token = meta.get("progressToken")
        if token is None:
            return None
        return {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": progress, "total": total}}

    def _tool_slow(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """Keep-alives every 20 ms for ``seconds``; a failed write means the client dropped us."""
        args = (message.get("params") or {}).get("arguments") or {}
        seconds = float(args.get("seconds", 1))
        self.start_sse(headers)
        deadline = time.monotonic() + seconds
        try:
            progress = self._progress(message, 0, 1)
            if progress is not None:
                self.write(sse_event(progress))
            while time.monotonic() < deadline:
                if self.fault._stopping.wait(0.02):
                    self.close_connection = True
                    return
                self.write(b": keepalive\n\n")
        except OSError:
            self.fault._note_drop(message.get("id"))
            self.close_connection = True
            return
        self.write(sse_event({"jsonrpc": "2.0", "id": message.get("id"),
                              "result": {"content": [{"type": "text", "text": "slept"}]}}))
        self.end_sse()

    def _tool_hold(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """Send nothing, not even headers, for ``seconds`` (a server deciding between JSON and SSE);
        a client that closes the connection meanwhile is noticed (EOF on the socket)."""
        args = (message.get("params") or {}).get("arguments") or {}
        deadline = time.monotonic() + float(args.get("seconds", 1))
        conn = self.connection
        while time.monotonic() < deadline and not self.fault._stopping.is_set():
            if _peer_closed(conn):
                self.fault._note_drop(message.get("id"))
                self.close_connection = True
                return
        if self.fault._stopping.is_set():
            self.close_connection = True
            return
        self.send_json(200, {"jsonrpc": "2.0", "id": message.get("id"),
                             "result": {"content": [{"type": "text", "text": "held"}]}}, headers)

    def _tool_elicit(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        fault = self.fault
        rid = f"elicit-{uuid.uuid4().hex}"
        ask = {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": {
            "message": "Go on?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}
        with fault._changed:
            delivered = fault.get_streams_open > 0
            if not delivered:
                fault.undelivered += 1
                fault._changed.notify_all()
        if delivered:
            fault.push(ask)
        conn = self.connection
        answer = None
        while answer is None:  # an undelivered request is never answered: wait for the client to give up
            with fault._changed:
                fault._changed.wait_for(lambda: rid in fault.responses or fault._stopping.is_set(), 0.05)
                answer = fault.responses.pop(rid, None)
            if answer is None and (fault._stopping.is_set() or _peer_closed(conn)):
                self.close_connection = True
                return
        text = json.dumps(answer.get("result"), sort_keys=True)
        self.send_json(200, {"jsonrpc": "2.0", "id": message.get("id"),
                             "result": {"content": [{"type": "text", "text": text}], "isError": False}}, headers)

    def _tool_ask(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """An SSE reply that asks the client (``elicitation/create`` in the stream) and answers with what it said."""
        fault = self.fault
        rid = f"ask-{uuid.uuid4().hex}"
        ask = {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": {
            "message": "Go on?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}
        self.start_sse(headers)
        self.write(sse_event(ask))
        conn = self.connection
        answer = None
        while answer is None:
            with fault._changed:
                fault._changed.wait_for(lambda: rid in fault.responses or fault._stopping.is_set(), 0.05)
                answer = fault.responses.pop(rid, None)
            if answer is None and (fault._stopping.is_set() or _peer_closed(conn)):
                self.close_connection = True
                return
        text = json.dumps(answer.get("result"), sort_keys=True)
        self.write(sse_event({"jsonrpc": "2.0", "id": message.get("id"),
                              "result": {"content": [{"type": "text", "text": text}], "isError": False}}))
        self.end_sse()

    def _tool_trickle(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """Comments, CRLF line ends, a progress notice and the answer, 3 bytes per TCP write."""
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.start_sse(headers, chunked=False)
        stream = b": keepalive\r\n\r\n:\r\n"
        progress = self._progress(message, 1, 2)
        if progress is not None:
            stream += sse_event(progress).replace(b"\n", b"\r\n")
        stream += b": another comment\n\n" + sse_event(self.fault.answer(message), event_id="t1")
        for start in range(0, len(stream), 3):
            self.write(stream[start:start + 3])
            time.sleep(0.0005)
        self.end_sse()

    def _tool_resume(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """A priming event (id e1, retry 300 ms), then the stream ends; the answer waits for the GET."""
        self.fault._replay["e1"] = self.fault.answer(message)
        self.start_sse(headers)
        self.write(sse_event(None, event_id="e1", retry=300))
        self.end_sse()
        self.fault.resume_closed_at = time.monotonic()

    # -- GET and DELETE ----------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self._seen()
        fault = self.fault
        if path == "/sse" or (path == "/mcp" and fault.post_status is not None):
            self._legacy_sse_stream()
            return
        if path not in MCP_PATHS:
            self.send_body(404, b"not found", "text/plain")
            return
        last = self.headers.get("Last-Event-ID")
        if last is not None:
            reply = fault._replay.pop(last, None)
            if reply is None:
                self.send_body(404, b"no such stream", "text/plain")
                return
            self.start_sse()
            self.write(sse_event(reply, event_id="e2"))
            self.end_sse()
            return
        if fault.get_stream != "sse":
            self.send_body(405, b"no GET stream", "text/plain", {"Allow": "POST, DELETE"})
            return
        if fault.get_delay and fault._stopping.wait(fault.get_delay):
            return
        with fault._changed:  # open before its headers go out, as the SDKs register the stream first
            fault.get_streams_open += 1
        try:
            self.start_sse()
            if fault.get_retry_ms is not None:
                self.write(f"retry: {fault.get_retry_ms}\n\n".encode())
            self._pump(fault._notices)
        finally:
            with fault._changed:
                fault.get_streams_open -= 1
                fault._changed.notify_all()

    def _pump(self, source: queue.Queue[Any], junk: bool = False) -> None:
        """Send what ``source`` yields (each with :meth:`_stream_item`), with keep-alives, until the server stops,
        the client goes or an item ends the stream. ``junk``: each item is preceded by :attr:`FaultServer.sse_junk`.
        """
        fault = self.fault
        try:
            while not fault._stopping.is_set():
                try:
                    item = source.get(timeout=0.05)
                except queue.Empty:
                    self.write(b": keepalive\n\n")
                    with fault._changed:
                        fault.keepalives += 1
                        fault._changed.notify_all()
                    continue
                if junk:
                    self.write(fault.sse_junk)
                if not self._stream_item(item):
                    break
        except OSError:
            pass
        self.close_connection = True

    def _stream_item(self, message: dict[str, Any]) -> bool:
        """Write one message of a stream as an event; False when the stream is over. A message ``{_DRIP: message}``
        is dripped (see :meth:`_drip`); ``{_RESET: True}`` resets the stream."""
        if _RESET in message:
            self.write(b": going\n\n" + b'data: {"jsonrpc": "2.0", ')
            self.wfile.flush()
            with self.server._guard:
                self.server._conns.discard(self.connection)
            _reset_socket(self.connection)
            return False
        if _DRIP in message:
            return self._drip(sse_event(message[_DRIP]), message[_DRIP].get("id"), self.write)
        self.write(sse_event(message))
        return True

    def _legacy_sse_stream(self) -> None:
        fault = self.fault
        sid = uuid.uuid4().hex
        source: queue.Queue[dict[str, Any]] = queue.Queue()
        with fault._lock:
            fault._sse_queues[sid] = source
            fault.sessions[sid] = 0  # counted and forgotten as a Streamable HTTP session is (expire_after)
        if fault.stream_body is not None:
            self.start_sse(chunked=False)
            self.write(fault.stream_body)
            self.end_sse()
            return
        self.start_sse()
        try:
            if fault.endpoint_event:
                self.write(sse_event(fault.sse_endpoint or f"/messages?sessionId={sid}", event="endpoint"))
        except OSError:
            return
        self._pump(source, junk=True)

    def _post_legacy_sse(self, message: Any) -> None:
        fault = self.fault
        sid = parse_qs(urlsplit(self.path).query).get("sessionId", [""])[0]
        with fault._lock:
            target = fault._sse_queues.get(sid)
            count = fault.sessions.get(sid)
            if count is None:  # forgotten (expire_after, sessions cleared): its stream stays open, silent
                target = None
            else:
                fault.sessions[sid] = count + 1
                if fault.expire_after is not None and count + 1 > fault.expire_after:
                    del fault.sessions[sid]
                    target = None
        if target is None:
            self.send_body(404, b"unknown session", "text/plain")
            return
        params: dict[str, Any] = {}
        name = None  # the tool called, if any
        if isinstance(message, dict):
            params = message.get("params") or {}
            name = params.get("name") if message.get("method") == "tools/call" else None
            key = str(name if name is not None else message.get("method"))
            canned = fault.fail.get(key)
            if canned is not None:
                self._send_canned(canned, message)
                return
            if key in fault.stall and not self._stall(message):
                return
        if name in fault.drip_ack:
            target.put(fault.answer(message))
            self.close_connection = True
            self._drip(b"HTTP/1.1 202 Accepted\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\nAccepted",
                       message.get("id"))
            return
        self.send_body(202, b"Accepted", "text/plain")
        if isinstance(message, dict) and message.get("method") and "id" in message:
            if name in fault.reset:
                target.put({_RESET: True})
            elif name in fault.drip:
                target.put({_DRIP: fault.answer(message)})
            elif name == "slow":
                seconds = float((params.get("arguments") or {}).get("seconds", 1))
                slept = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"content": [{"type": "text", "text": "slept"}]}}
                timer = threading.Timer(seconds, target.put, args=(slept,))
                timer.daemon = True
                with fault._lock:
                    fault._timers.append(timer)
                timer.start()
            else:
                target.put(fault.answer(message))

    def do_DELETE(self) -> None:
        self._seen()
        sid = self.headers.get("Mcp-Session-Id")
        with self.fault._lock:
            self.fault.sessions.pop(sid or "", None)
        self.send_body(self.fault.delete_status, b"", "text/plain")


def _peer_closed(conn: socket.socket, wait: float = 0.02) -> bool:
    """True when the client closed the connection (EOF is readable), waiting at most ``wait`` seconds to see.

    Over TLS anything readable counts as closed (a client that waits for its answer sends nothing
    but its ``close_notify``): the record layer cannot be peeked at.
    """
    readable, _, _ = select.select([conn], [], [], wait)
    if not readable:
        return False
    if isinstance(conn, ssl.SSLSocket):
        return True
    try:
        return not conn.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def _reset_socket(conn: socket.socket) -> None:
    """Close ``conn`` with a TCP reset (RST) rather than a FIN; the socket object is left detached."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    os.close(conn.detach())


#: Lines an SSE decoder must survive: no field, a field without a colon, invalid UTF-8, a NUL in an
#: ``id`` (ignored), a ``retry`` that is no number (ignored), an unknown field, a lone CR, and an event of
#: invalid UTF-8 (data that is no JSON once decoded). A decoder that follows the WHATWG rules dispatches
#: that last event only.
SSE_JUNK = (
    b"<html><body>502 Bad Gateway</body></html>\n"
    b"\xff\xfe\x00garbage\n"
    b"event\n"
    b"id: a\x00b\n"
    b"retry: soon\n"
    b"colour: red\r"
    b"\n"
    b"data: \xc3\x28\xa0\xa1 not JSON\n\n"
)
