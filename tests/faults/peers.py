"""The servers the fault matrix runs against: one fault mode, acted out as each transport allows.

A :class:`Peer` is a server with one fault mode switched on (:data:`MODES`)
and the clients connected to it. Every fault is triggered the same way on
every transport: ``client.call_tool("echo", {"message": ...})``.

- stdio: ``tests/servers/fault_server.py`` with the matching ``--fault`` modes.
- HTTP: :class:`MatrixServer`, the scriptable test server of
  ``tests/servers/http_fault_server.py`` (its sessions, header checks, GET
  stream and HTTP+SSE stream) with a handler that acts the mode out on
  ``tools/call``, in the flavour of its column: a JSON body, an SSE reply
  stream, or the one HTTP+SSE stream.

What a fault becomes where a transport cannot carry it as such is said per mode
in :class:`MatrixHandler`.
"""

from __future__ import annotations

import json
import queue
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import mcpcall
from tests.conftest import fault_argv
from tests.faults.conftest import (
    HTTP_LEGACY_JSON,
    HTTP_LEGACY_SSE,
    HTTP_MODERN_JSON,
    HTTP_MODERN_SSE,
    HTTPSSE,
    STDIO,
)
from tests.servers.http_fault_server import FaultServer, _Handler, _HTTPServer, sse_event

#: The ``_meta`` key that tags a modern subscription's notifications (the test keeps its own copy of the spec's).
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: The id of the response nobody asked for ("answers an unknown id").
UNKNOWN_ID = 999999

#: The fault modes, each with the stdio fault server's modes that act it out.
MODES: Dict[str, List[str]] = {
    "hang": ["hang"],
    "late": ["late-answer"],
    "twice": ["duplicate"],
    "unknown-id": ["unknown-id"],
    "reorder": ["out-of-order"],
    "garbage": ["garbage"],
    "truncated": ["truncated"],
    "big": ["big-line"],
    "progress-flood": ["progress-flood"],
    "log-flood": ["log-flood"],
    "list-changed-flood": ["list-changed-flood"],
    # stdio only
    "exit-at-start": ["exit-at-start"],
    "crash-on-call": ["crash-on-call"],
    "close-stdout": ["close-stdout"],
    "no-stdin-read": ["no-stdin-read"],
    "stderr-flood": ["stderr-flood"],
    "ignore-sigterm": ["ignore-sigterm"],
    "grandchild": ["grandchild"],
}

#: Modes that spoil only the first tools/call (the next one shows whether the client goes on).
FIRST_CALL_ONLY = ("late", "truncated", "big")

#: What the JSON flavours answer to "garbage" calls, in turn: no JSON, JSON that is no message, a batch of
#: things that are no messages.
JSON_GARBAGE = (b"this is not JSON", b'{"hello": 1}', b"[1, 2]")

#: Events that are no JSON-RPC message, sent before the answer by the SSE flavours for "garbage".
SSE_GARBAGE = (
    b"data: this is not JSON\n\n",
    b'data: {"hello": 1}\n\n',
    b"data: [1, 2]\n\n",
    b'data: {"jsonrpc": "2.0"}\n\n',
    b"event: weird\ndata: \x1b]52;c;Y2xpcA==\x07 ???\n\n",
    b": a comment\n\n",
    b"data:\n\n",
    b"\n\n",
)


def _text_result(rid: Any, text: str, modern: bool) -> Dict[str, Any]:
    result: Dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if modern:
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _is_modern(message: Dict[str, Any]) -> bool:
    meta = (message.get("params") or {}).get("_meta")
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta


def _peer_closed(conn: socket.socket, wait: float = 0.02) -> bool:
    """True when the client closed the connection (EOF or a reset is readable)."""
    readable, _, _ = select.select([conn], [], [], wait)
    if not readable:
        return False
    try:
        return not conn.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


class MatrixServer(FaultServer):
    """The scriptable HTTP test server in one column's flavour, with one fault mode on ``tools/call``."""

    def __init__(self, flavour: str, mode: Optional[str], *, delay: float = 1.0, flood: int = 5000, batch: int = 4,
                 big_bytes: int = 2 << 20) -> None:
        super().__init__()
        self.flavour = flavour
        self.mode = mode
        self.delay = delay
        self.flood = flood
        self.batch = batch
        self.big_bytes = big_bytes
        self.modern_era = flavour in (HTTP_MODERN_JSON, HTTP_MODERN_SSE)
        self.sse_replies = flavour in (HTTP_LEGACY_SSE, HTTP_MODERN_SSE)
        self.reply = "sse" if self.sse_replies else "json"
        # Legacy JSON has the standalone GET stream: where its faults put what a JSON body cannot hold.
        self.get_stream = "sse" if flavour == HTTP_LEGACY_JSON else "405"
        self.calls = 0  # tools/call seen with the mode on
        self.late_sent = threading.Event()  # "late": the late answer went out (or could not)
        self.stale: Optional[Dict[str, Any]] = None  # "twice", modern JSON: the answer to send again
        self.garbage_turn = 0
        self._batch: List[Any] = []  # "reorder": the calls held so far (handlers waiting, or HTTP+SSE answers)
        self._released: List[Any] = []
        self._order = threading.Condition()
        self.listen_queue: "queue.Queue[Any]" = queue.Queue()  # modern: the subscriptions/listen stream's messages
        self.listen_id: Any = None
        self.listening = threading.Event()

    def start(self) -> MatrixServer:
        self._httpd = _HTTPServer((self.host, 0), MatrixHandler)
        self._httpd.fault = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fault-http-accept",
                                        daemon=True)
        self._thread.start()
        return self

    def answer(self, message: Dict[str, Any]) -> Dict[str, Any]:
        """As the base server, declaring ``tools.listChanged`` for the list_changed flood."""
        reply = super().answer(message)
        result = reply.get("result")
        if self.mode == "list-changed-flood" and message.get("method") in ("initialize", "server/discover") \
                and isinstance(result, dict):
            result["capabilities"] = {**result.get("capabilities", {}), "tools": {"listChanged": True}}
        return reply

    def cancels(self) -> int:
        """How many times the client told the server to stop a request: a cancel notice, or a closed stream."""
        with self._lock:
            notices = sum(1 for s in self.seen if s.method == "notifications/cancelled")
            return notices + len(self.dropped)

    def faulty(self) -> bool:
        """Whether this tools/call gets the fault (counts it).

        Modes that leave no answer to a call spoil the first calls only (:data:`FIRST_CALL_ONLY`; the
        JSON flavours' ``unknown-id`` and ``garbage`` too), so that a next call shows whether the client
        goes on; the others spoil every call, as the stdio fault server does.
        """
        mode = self.mode
        if mode is None:
            return False
        limit = None
        if mode in FIRST_CALL_ONLY or (mode == "unknown-id" and not self.sse_replies and self.flavour != HTTPSSE):
            limit = 1
        elif mode == "garbage" and not self.sse_replies and self.flavour != HTTPSSE:
            limit = len(JSON_GARBAGE)
        with self._lock:
            self.calls += 1
            return limit is None or self.calls <= limit


class MatrixHandler(_Handler):
    """Acts a fault mode out on ``tools/call``; everything else is the base server's.

    Per mode and flavour (JSON body / SSE reply stream / the HTTP+SSE stream):

    - ``hang``: no reply at all (not even headers) / headers, then silence / 202, then nothing on the stream;
      until the client hangs up.
    - ``late``: the answer after ``delay`` seconds, in the flavour's way (the client has hung up by then,
      but on HTTP+SSE, where the answer comes on the shared stream and must be dropped).
    - ``twice``: legacy JSON: the JSON body, and the same response again on the GET stream; modern JSON
      (no other stream): the same response again as the JSON body of the next tools/call, as a
      replaying cache would; SSE: the response event twice; HTTP+SSE: the answer twice on the stream.
    - ``unknown-id``: JSON: the body is a response to an id never sent (a body holds one message, so the
      real answer never comes); SSE and HTTP+SSE: a response to an id never sent, then the answer.
    - ``reorder``: each ``batch`` calls are held until the last arrives, then answered last first.
    - ``garbage``: JSON: the body is no JSON-RPC message (:data:`JSON_GARBAGE`, in turn); SSE and
      HTTP+SSE: events that are none (:data:`SSE_GARBAGE`), then the answer.
    - ``truncated``: the answer cut in the middle: a JSON body whose Content-Length fits what is sent; an
      event whose data stops half-way, the stream then left open (silent) until the client hangs up.
    - ``big``: an answer of ``big_bytes`` (a body, or one event).
    - ``progress-flood``: ``flood`` progress notifications, then the answer. JSON bodies cannot carry
      notifications: the JSON flavours answer such a call with an SSE reply (the spec lets a server
      choose per request), so there they are the SSE flavours' cases with JSON for everything else.
    - ``log-flood``: ``flood`` log messages, then the answer: legacy JSON on the GET stream (the answer
      once they are written), modern JSON on an SSE reply (modern log messages belong to a request).
    - ``list-changed-flood``: ``flood`` ``notifications/tools/list_changed``, then the answer: legacy
      JSON on the GET stream, modern (both) on the subscriptions/listen stream (tagged with its id), the
      others on the reply stream; the answer once they are written.
    """

    @property
    def fault(self) -> MatrixServer:  # type: ignore[override]
        return self.server.fault  # type: ignore[return-value]

    # -- the streams: raw events and markers as well as messages --------------------------------

    def _stream_item(self, item: Any) -> bool:
        """As the base server's, also writing raw event bytes as they are and setting markers (Events) when reached."""
        if isinstance(item, threading.Event):
            item.set()
        elif isinstance(item, bytes):
            self.write(item)
        else:
            return super()._stream_item(item)
        return True

    # -- Streamable HTTP ---------------------------------------------------------------------------

    def _post_mcp(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        method = message.get("method")
        name = (message.get("params") or {}).get("name")
        if method == "subscriptions/listen" and fault.modern_era and "id" in message:
            if self._refused(message):
                return
            self._listen(message)
            return
        if method != "tools/call" or name != "echo" or fault.mode is None or self._refused(message):
            super()._post_mcp(message)
            return
        stale, fault.stale = fault.stale, None
        if stale is not None:  # "twice", modern JSON: the answer of an earlier call, again
            self.send_json(200, stale)
            return
        if not fault.faulty():
            super()._post_mcp(message)
            return
        getattr(self, "_mode_" + fault.mode.replace("-", "_"))(message)

    def _refused(self, message: Dict[str, Any]) -> bool:
        """The base server's checks of a request's headers and session; True if it was refused (and answered)."""
        if _is_modern(message):
            version = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
            problem = self._modern_header_problem(message, version)
            if problem is not None:
                self.send_json(400, {"jsonrpc": "2.0", "id": message.get("id"),
                                     "error": {"code": -32020, "message": problem}})
                return True
            return False
        sid = self.headers.get("Mcp-Session-Id")
        with self.fault._lock:
            known = sid is not None and sid in self.fault.sessions
        if not known:
            self.send_json(404, {"jsonrpc": "2.0", "id": message.get("id"),
                                 "error": {"code": -32001, "message": "Session not found"}})
            return True
        return False

    def _answer_of(self, message: Dict[str, Any]) -> Dict[str, Any]:
        args = (message.get("params") or {}).get("arguments") or {}
        return _text_result(message.get("id"), str(args.get("message", "")), _is_modern(message))

    def _reply(self, message: Dict[str, Any], before: List[Any] = (), *, answer: Any = None, sse: Optional[bool] = None,
               after: List[Any] = ()) -> None:
        """The answer (or ``answer``: a message or raw bytes), with ``before``/``after`` (messages or raw events) around it.

        JSON flavours (``sse`` False) send only the answer as the body.
        """
        answer = self._answer_of(message) if answer is None else answer
        if not (self.fault.sse_replies if sse is None else sse):
            body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_body(200, body, "application/json")
            return
        self.start_sse()
        for item in [*before, answer, *after]:
            self.write(item if isinstance(item, bytes) else sse_event(item))
        self.end_sse()

    def _silence(self, message: Dict[str, Any]) -> None:
        """Send nothing more until the client hangs up or the server stops; a hang-up is noted as a drop."""
        conn = self.connection
        while not self.fault._stopping.is_set():
            if _peer_closed(conn):
                self.fault._note_drop(message.get("id"))
                break
        self.close_connection = True

    def _mode_hang(self, message: Dict[str, Any]) -> None:
        if self.fault.sse_replies:
            self.start_sse()
            self.wfile.flush()
        self._silence(message)

    def _mode_late(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        try:
            if fault.sse_replies:
                self.start_sse()
            if fault._stopping.wait(fault.delay):
                return
            if fault.sse_replies:
                self.write(sse_event(self._answer_of(message)))
                self.end_sse()
            else:
                self._reply(message)
        except OSError:
            self.close_connection = True  # the client hung up long ago, as it should have
        finally:
            fault.late_sent.set()

    def _mode_twice(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        answer = self._answer_of(message)
        if fault.sse_replies:
            self._reply(message, after=[answer])
            return
        self._reply(message)
        if fault.flavour == HTTP_LEGACY_JSON:
            fault.push(answer)
        else:
            fault.stale = answer

    def _mode_unknown_id(self, message: Dict[str, Any]) -> None:
        stray = _text_result(UNKNOWN_ID, "nobody asked", _is_modern(message))
        if self.fault.sse_replies:
            self._reply(message, [stray])
        else:
            self._reply(message, answer=stray)

    def _mode_reorder(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        rid = message.get("id")
        with fault._order:
            fault._batch.append(rid)
            batch = list(fault._batch) if len(fault._batch) == fault.batch else None
            if batch is not None:
                fault._batch = []
                fault._released = batch[::-1]
                fault._order.notify_all()
            # Wait for this call's turn: last arrived, first answered (looking at stop() now and then: it does
            # not notify this condition).
            deadline = time.monotonic() + 10.0
            while fault._released[:1] != [rid] and not fault._stopping.is_set() and time.monotonic() < deadline:
                fault._order.wait(0.05)
            ok = fault._released[:1] == [rid]
        if not ok or fault._stopping.is_set():
            self.close_connection = True
            return
        try:
            self._reply(message)
        finally:
            with fault._order:
                fault._released.pop(0)
                fault._order.notify_all()

    def _mode_garbage(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        if fault.sse_replies:
            self._reply(message, list(SSE_GARBAGE))
            return
        body = JSON_GARBAGE[fault.garbage_turn % len(JSON_GARBAGE)]
        fault.garbage_turn += 1
        self.send_body(200, body, "application/json")

    def _mode_truncated(self, message: Dict[str, Any]) -> None:
        line = json.dumps(self._answer_of(message)).encode()
        cut = line[: len(line) // 2]
        if not self.fault.sse_replies:
            self.send_body(200, cut, "application/json")
            return
        self.start_sse()
        self.write(b"data: " + cut + b"\n\n")
        self._silence(message)

    def _mode_big(self, message: Dict[str, Any]) -> None:
        answer = _text_result(message.get("id"), "x" * self.fault.big_bytes, _is_modern(message))
        try:
            self._reply(message, answer=answer)
        except OSError:  # the client stopped reading at its limit and hung up
            self.close_connection = True

    def _flood_events(self, notes: Callable[[int], Dict[str, Any]]) -> List[bytes]:
        """The flood as raw events, a thousand to a write."""
        count = self.fault.flood
        return [b"".join(sse_event(notes(n)) for n in range(start, min(start + 1000, count + 1)))
                for start in range(1, count + 1, 1000)]

    def _mode_progress_flood(self, message: Dict[str, Any]) -> None:
        token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
        total = self.fault.flood
        events = self._flood_events(lambda n: {"jsonrpc": "2.0", "method": "notifications/progress",
                                               "params": {"progressToken": token, "progress": n, "total": total}})
        self._reply(message, events if token is not None else [], sse=True)

    def _mode_log_flood(self, message: Dict[str, Any]) -> None:
        total = self.fault.flood
        events = self._flood_events(lambda n: {"jsonrpc": "2.0", "method": "notifications/message",
                                               "params": {"level": "info", "logger": "flood",
                                                          "data": f"line {n} of {total}"}})
        if self.fault.flavour == HTTP_LEGACY_JSON:
            self._through(self.fault._notices, events)
            self._reply(message)
            return
        self._reply(message, events, sse=True)

    def _mode_list_changed_flood(self, message: Dict[str, Any]) -> None:
        fault = self.fault
        meta = {"_meta": {META_SUBSCRIPTION_ID: fault.listen_id}} if fault.modern_era else {}
        events = self._flood_events(lambda n: {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                               **({"params": meta} if meta else {})})
        if fault.modern_era:
            fault.listening.wait(5.0)
            self._through(fault.listen_queue, events)
            self._reply(message)
        elif fault.flavour == HTTP_LEGACY_JSON:
            self._through(fault._notices, events)
            self._reply(message)
        else:
            self._reply(message, events)

    def _through(self, stream: "queue.Queue[Any]", items: List[Any]) -> None:
        """Put ``items`` on a stream (GET, listen or HTTP+SSE) and wait until they are written."""
        written = threading.Event()
        for item in items:
            stream.put(item)
        stream.put(written)
        written.wait(30.0)

    def _listen(self, message: Dict[str, Any]) -> None:
        """subscriptions/listen (modern): the acknowledgement, then what :attr:`MatrixServer.listen_queue` gets."""
        fault = self.fault
        rid = message.get("id")
        fault.listen_id = rid
        wanted = (message.get("params") or {}).get("notifications") or {}
        self.start_sse()
        self.write(sse_event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                              "params": {"notifications": wanted, "_meta": {META_SUBSCRIPTION_ID: rid}}}))
        fault.listening.set()
        self._pump(fault.listen_queue)

    # -- HTTP+SSE ----------------------------------------------------------------------------------

    def _post_legacy_sse(self, message: Any) -> None:
        fault = self.fault
        is_call = isinstance(message, dict) and message.get("method") == "tools/call" and \
            (message.get("params") or {}).get("name") == "echo" and "id" in message
        if not is_call or fault.mode is None:
            super()._post_legacy_sse(message)
            return
        from urllib.parse import parse_qs, urlsplit

        sid = parse_qs(urlsplit(self.path).query).get("sessionId", [""])[0]
        with fault._lock:
            target = fault._sse_queues.get(sid)
        if target is None:
            self.send_body(404, b"unknown session", "text/plain")
            return
        self.send_body(202, b"Accepted", "text/plain")
        if not fault.faulty():
            target.put(fault.answer(message))
            return
        self._on_stream(fault.mode, message, target)

    def _on_stream(self, mode: str, message: Dict[str, Any], target: "queue.Queue[Any]") -> None:
        """A fault acted out on the HTTP+SSE stream (the POST was answered 202 already)."""
        fault = self.fault
        answer = self._answer_of(message)
        rid = message.get("id")
        if mode == "hang":
            return
        if mode == "late":
            def later() -> None:
                if not fault._stopping.wait(fault.delay):
                    target.put(answer)
                fault.late_sent.set()

            threading.Thread(target=later, name="fault-late", daemon=True).start()
        elif mode == "twice":
            target.put(answer)
            target.put(answer)
        elif mode == "unknown-id":
            target.put(_text_result(UNKNOWN_ID, "nobody asked", False))
            target.put(answer)
        elif mode == "reorder":
            with fault._order:
                fault._batch.append(answer)
                if len(fault._batch) == fault.batch:
                    for item in fault._batch[::-1]:
                        target.put(item)
                    fault._batch = []
        elif mode == "garbage":
            for raw in SSE_GARBAGE:
                target.put(raw)
            target.put(answer)
        elif mode == "truncated":
            line = json.dumps(answer).encode()
            target.put(b"data: " + line[: len(line) // 2] + b"\n\n")
        elif mode == "big":
            target.put(_text_result(rid, "x" * fault.big_bytes, False))
        elif mode in ("progress-flood", "log-flood", "list-changed-flood"):
            token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
            total = fault.flood

            def note(n: int) -> Dict[str, Any]:
                if mode == "progress-flood":
                    return {"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": n, "total": total}}
                if mode == "log-flood":
                    return {"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "logger": "flood", "data": f"line {n} of {total}"}}
                return {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}

            if mode != "progress-flood" or token is not None:
                for chunk in self._flood_events(note):
                    target.put(chunk)
            target.put(answer)
        else:  # pragma: no cover - a mode without an HTTP+SSE form
            raise AssertionError(f"no HTTP+SSE form for {mode!r}")


# -- peers: a server and its clients ---------------------------------------------------------------


class Peer:
    """A server of one transport with one fault mode, and the clients connected to it (closed by :meth:`stop`)."""

    def __init__(self, transport: str, mode: Optional[str], tmp: Path, *, delay: float = 1.0, flood: int = 5000,
                 batch: int = 4, big_bytes: int = 2 << 20, extra: tuple = ()) -> None:
        self.transport = transport
        self.mode = mode
        self.delay = delay
        self.flood = flood
        self.batch = batch
        self.big_bytes = big_bytes
        self.clients: List[mcpcall.Client] = []
        self.server: Optional[MatrixServer] = None
        self.cancel_log = tmp / "cancelled.log"
        self.pidfile = tmp / "grandchild.pid"
        self.extra = extra
        if transport != STDIO:
            self.server = MatrixServer(transport, mode, delay=delay, flood=flood, batch=batch, big_bytes=big_bytes).start()

    @property
    def name(self) -> str:
        """The client's name: distinctive, so that an error naming it is an error about this cell."""
        return f"matrix-{self.mode or 'plain'}-{self.transport}"

    def argv(self) -> List[str]:
        modes = MODES[self.mode] if self.mode else []
        extra = ["--cancel-log", str(self.cancel_log), "--delay", str(self.delay), "--flood", str(self.flood),
                 "--batch", str(self.batch), "--big-bytes", str(self.big_bytes), "--pidfile", str(self.pidfile),
                 *self.extra]
        return fault_argv(*modes, extra=tuple(extra))

    def target(self) -> Any:
        """What to connect to."""
        if self.server is None:
            return self.argv()
        if self.transport == HTTPSSE:
            return self.server.origin + "/sse"
        return self.server.url

    def options(self) -> Dict[str, Any]:
        """The connect options of this column."""
        options: Dict[str, Any] = {"name": self.name, "timeout": 10.0}
        if self.transport == STDIO:
            options.update(probe_timeout=2.0, close_timeout=1.0)
        elif self.transport == HTTPSSE:
            options.update(transport="sse", protocol="legacy")
        else:
            options.update(transport="streamable-http",
                           protocol="modern" if self.transport in (HTTP_MODERN_JSON, HTTP_MODERN_SSE) else "legacy")
        return options

    def connect(self, *, start: bool = True, **options: Any) -> mcpcall.Client:
        """A client of this server (``start=False``: built, not connected); closed by :meth:`stop`."""
        client = mcpcall.connect(self.target(), start=start, **{**self.options(), **options})
        self.clients.append(client)
        return client

    def cancels(self) -> int:
        """How many requests the server was told to stop (a cancel notice, or, over HTTP, a stream the client closed)."""
        if self.server is not None:
            return self.server.cancels()
        try:
            return len(self.cancel_log.read_text().splitlines())
        except OSError:
            return 0

    def wait_late_sent(self, timeout: float = 10.0) -> None:
        """ "late": until the late answer went out (stdio: until it is due)."""
        if self.server is not None:
            assert self.server.late_sent.wait(timeout), "the late answer never went out"
        else:
            time.sleep(self.delay + 0.2)

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.server is not None:
            self.server.stop()
