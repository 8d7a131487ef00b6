"""A small, fast, dual-era MCP demo server over stdio (standard library only).

Run it with::

    python -m mcpcall.demo_server [--page-size N] [--verbose]
    python mcpcall/demo_server.py

It reads newline-delimited JSON-RPC 2.0 from stdin, writes one message per line
to stdout, logs only to stderr, and exits (code 0) as soon as stdin reaches EOF.

Both protocol eras are served, even by the same process:

* **Legacy** (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25): the client sends
  ``initialize`` (answered with its own version when supported, else 2025-11-25)
  and ``notifications/initialized``.  Before ``initialize`` only ``ping`` works.
  ``logging/setLevel`` sets the level for ``notifications/message`` (default info).
* **Modern** (2026-07-28): no handshake.  A request is modern when
  ``params._meta`` carries ``io.modelcontextprotocol/protocolVersion``; it must
  also carry ``io.modelcontextprotocol/clientCapabilities`` (else -32602).  An
  unknown version gets -32022 with ``data.supported``.  ``server/discover`` is
  answered only for modern requests (a legacy one gets -32601, which is what a
  dual-era client's probe expects from a legacy server).  Every modern result
  carries ``resultType`` and ``_meta["io.modelcontextprotocol/serverInfo"]``.

Tools:

* ``echo(message)``: returns ``message`` as text.
* ``add(a, b)``: returns ``a+b`` as text and ``structuredContent {"sum": a+b}``.
* ``slow(seconds=1, steps=5)``: logs once at level info, sends ``steps``
  ``notifications/progress`` (when the request has ``_meta.progressToken``)
  spread over ``seconds``, then returns "done after X s".  Runs on its own thread;
  ``notifications/cancelled`` stops it and no response is sent.
* ``weather(city)``: deterministic fake weather as structured content + JSON text.
* ``fail(message?)``: a tool execution error (``isError: true``).
* ``boom()``: a JSON-RPC error response (-32603, "boom").
* ``confirm(question)``: asks the user a yes/no question.  Legacy era: sends an
  ``elicitation/create`` request to the client (needs the ``elicitation``
  capability) and waits for its answer on a thread.  Modern era: multi
  round-trip request, answering ``resultType: "input_required"`` with an
  ``inputRequests.confirm`` elicitation and a ``requestState`` to echo back.
  Without the capability: a tool error (legacy) or -32021
  MissingRequiredClientCapability (modern, as the 2026-07-28 spec requires).

``tools/list`` pages with ``--page-size N`` (default: one page with everything).

Subclasses (see ``tests/servers/fault_server.py``) hook in by overriding
:meth:`DemoServer.handle` (every parsed incoming message),
:meth:`DemoServer.send` (every outgoing message), :meth:`DemoServer.write_raw`
(raw bytes to stdout) and :meth:`DemoServer.on_eof`; the ``legacy`` and
``modern`` constructor flags turn an era off.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

JSON = dict[str, Any]

# The server keeps its own copy of these facts (mcpcall.protocol has the client's): it runs as a plain
# script too, and a peer that shared the client's constants could not catch a wrong one.
MODERN_VERSIONS = ("2026-07-28",)
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[0]

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

SERVER_INFO: JSON = {"name": "mcpcall-demo", "version": "1.0.0"}
INSTRUCTIONS = (
    "Demo server bundled with mcpcall. Tools: echo, add, slow (progress and "
    "cancellation), weather (structured output), fail (tool error), boom "
    "(protocol error) and confirm (asks the user via elicitation)."
)
CAPABILITIES: JSON = {"tools": {"listChanged": False}, "logging": {}}
CACHE_TTL_MS = 60_000

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LOG_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}

_CONFIRM_SCHEMA: JSON = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean", "description": "Yes or no"}},
    "required": ["confirmed"],
}
_STATE_KEY = b"mcpcall-demo request state v1"  # integrity only binds state to the question
_WEATHER_CONDITIONS = ("sunny", "partly cloudy", "cloudy", "light rain", "rain", "windy", "fog", "snow")


def _object_schema(properties: JSON, required: Sequence[str] = ()) -> JSON:
    schema: JSON = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


TOOLS: list[JSON] = [
    {
        "name": "echo",
        "title": "Echo",
        "description": "Return the given message unchanged.",
        "inputSchema": _object_schema({"message": {"type": "string"}}, ["message"]),
    },
    {
        "name": "add",
        "title": "Add two numbers",
        "description": "Add a and b; the sum is also returned as structured content.",
        "inputSchema": _object_schema({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
        "outputSchema": {
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        },
    },
    {
        "name": "slow",
        "title": "Slow task",
        "description": "Wait `seconds`, reporting progress `steps` times; can be cancelled.",
        "inputSchema": _object_schema(
            {
                "seconds": {"type": "number", "minimum": 0, "default": 1},
                "steps": {"type": "integer", "minimum": 0, "default": 5},
            }
        ),
    },
    {
        "name": "weather",
        "title": "Fake weather",
        "description": "Deterministic fake weather for a city (same city, same answer).",
        "inputSchema": _object_schema({"city": {"type": "string"}}, ["city"]),
        "outputSchema": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "temperature_c": {"type": "number"},
                "conditions": {"type": "string"},
            },
            "required": ["city", "temperature_c", "conditions"],
        },
    },
    {
        "name": "fail",
        "title": "Always fails",
        "description": "Return a tool execution error (isError: true) with the message.",
        "inputSchema": _object_schema({"message": {"type": "string"}}),
    },
    {
        "name": "boom",
        "title": "Protocol error",
        "description": "Answer with a JSON-RPC error response (-32603).",
        "inputSchema": _object_schema({}),
    },
    {
        "name": "confirm",
        "title": "Ask the user",
        "description": "Ask the user a yes/no question through elicitation.",
        "inputSchema": _object_schema({"question": {"type": "string"}}, ["question"]),
    },
]
_TOOL_NAMES = frozenset(tool["name"] for tool in TOOLS)

_encode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_encode_json_ascii = json.JSONEncoder(separators=(",", ":")).encode


class RPCError(Exception):
    """A JSON-RPC error to send back as the response to a request."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JSON:
        """The wire ``error`` member."""
        error: JSON = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class Call:
    """An in-flight request that runs on its own thread and can be cancelled."""

    __slots__ = ("cancelled", "reply", "wake")

    def __init__(self) -> None:
        self.cancelled = False
        self.reply: JSON | None = None  # the client's response to our elicitation
        self.wake = threading.Event()  # set on cancellation or when `reply` arrives


class Context:
    """Everything a handler needs to know about one request."""

    __slots__ = ("call", "capabilities", "log_level", "modern", "params", "progress_token", "request_id")

    def __init__(
        self,
        request_id: Any,
        params: JSON,
        *,
        modern: bool,
        capabilities: JSON,
        log_level: str | None,
    ) -> None:
        self.request_id = request_id
        self.params = params
        self.modern = modern
        self.capabilities = capabilities
        self.log_level = log_level  # None: send no notifications/message
        meta = params.get("_meta")
        self.progress_token: Any = meta.get("progressToken") if isinstance(meta, dict) else None
        self.call: Call | None = None


if TYPE_CHECKING:  # only in annotations: `X | None` is not valid at run time on Python 3.9
    Handler = Callable[[Context], JSON | None]


def _text_result(text: str, *, is_error: bool = False) -> JSON:
    result: JSON = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _supports_form_elicitation(capabilities: JSON) -> bool:
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)


class DemoServer:
    """The demo server's protocol logic; :meth:`serve` runs it over stdin/stdout."""

    def __init__(
        self,
        *,
        page_size: int | None = None,
        legacy: bool = True,
        modern: bool = True,
        out: BinaryIO | None = None,
        verbose: bool = False,
    ) -> None:
        self.page_size = page_size
        self.legacy = legacy
        self.modern = modern
        self.verbose = verbose
        self.supported_versions: list[str] = [
            *(MODERN_VERSIONS if modern else ()),
            *(LEGACY_VERSIONS if legacy else ()),
        ]
        # Legacy session state (one session per process).
        self.initialized = False
        self.protocol_version: str | None = None
        self.client_capabilities: JSON = {}
        self.log_level = "info"

        self._out: BinaryIO = out if out is not None else sys.stdout.buffer
        self._write_lock = threading.Lock()
        self._broken = False
        self._state_lock = threading.Lock()
        self._calls: dict[Any, Call] = {}  # client request id -> threaded call
        self._server_requests: dict[int, Call] = {}  # our request id -> call awaiting reply
        self._next_server_id = 0

        self._modern_methods: dict[str, Handler] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }
        self._legacy_methods: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": lambda ctx: {},
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "logging/setLevel": self._set_level,
        }
        self._tools: dict[str, Callable[[JSON, Context], JSON | None]] = {
            "echo": self._tool_echo,
            "add": self._tool_add,
            "slow": self._tool_slow,
            "weather": self._tool_weather,
            "fail": self._tool_fail,
            "boom": self._tool_boom,
            "confirm": self._tool_confirm,
        }

    # ----------------------------------------------------------------- I/O

    def serve(self, stdin: BinaryIO | None = None) -> int:
        """Handle lines from ``stdin`` until EOF, then call :meth:`on_eof`; returns 0."""
        readline = (stdin if stdin is not None else sys.stdin.buffer).readline
        handle_line = self.handle_line
        while True:
            line = readline()
            if not line:
                break
            handle_line(line)
        self.on_eof()
        return 0

    def on_eof(self) -> None:
        """Called once stdin is at EOF, before :meth:`serve` returns (hook)."""

    def handle_line(self, line: bytes) -> None:
        """Parse one raw input line and pass the message to :meth:`handle`."""
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.send({"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": f"Parse error: {exc}"}})
            return
        self.handle(message)

    def encode(self, message: JSON) -> bytes:
        """One outgoing message as a line of bytes (newline included)."""
        try:
            return (_encode_json(message) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: fall back to \\u escapes
            return (_encode_json_ascii(message) + "\n").encode("ascii")

    def send(self, message: JSON) -> None:
        """Write one message to stdout (hook: every outgoing message passes here)."""
        self.write_raw(self.encode(message))

    def write_raw(self, data: bytes) -> None:
        """Write bytes to stdout and flush, atomically with respect to other writers."""
        with self._write_lock:
            if self._broken:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except OSError as exc:  # the client closed our stdout: keep reading until EOF
                self._broken = True
                self.log(f"cannot write to stdout: {exc}")

    def log(self, text: str) -> None:
        """A line on stderr."""
        sys.stderr.write(f"mcpcall-demo: {text}\n")
        sys.stderr.flush()

    def exit(self, code: int) -> None:
        """Flush and end the process at once (daemon threads may still be running)."""
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        if self._write_lock.acquire(timeout=1.0):  # a writer stuck on a full pipe must not stop us
            with contextlib.suppress(OSError, ValueError):
                self._out.flush()
        os._exit(code)

    def send_result(self, request_id: Any, result: JSON) -> None:
        """Send a result response."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def send_error(self, request_id: Any, error: RPCError) -> None:
        """Send an error response."""
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})

    def notify(self, method: str, params: JSON) -> None:
        """Send a notification."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # ------------------------------------------------------------ dispatch

    def handle(self, message: Any) -> None:
        """Process one parsed incoming message (hook: wrap this to add faults)."""
        if not isinstance(message, dict):
            self.send_error(None, RPCError(INVALID_REQUEST, "Invalid Request: expected a JSON object"))
            return
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                self._handle_response(message)
                return
            request_id = message.get("id")
            self.send_error(
                request_id if _valid_id(request_id) else None,
                RPCError(INVALID_REQUEST, "Invalid Request: missing method"),
            )
            return
        if "id" not in message:
            if isinstance(method, str):
                self._handle_notification(method, message.get("params"))
            return
        self._handle_request(message, method)

    def _handle_request(self, message: JSON, method: Any) -> None:
        request_id = message["id"]
        if not _valid_id(request_id):
            self.send_error(None, RPCError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer"))
            return
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            self.send_error(
                request_id, RPCError(INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string method')
            )
            return
        params = message.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            self.send_error(request_id, RPCError(INVALID_PARAMS, "Invalid params: params must be an object"))
            return
        if self.verbose:
            self.log(f"<- {method} id={request_id!r}")
        ctx: Context | None = None
        try:
            ctx, handler = self._route(request_id, method, params)
            result = handler(ctx)
        except RPCError as exc:
            self.send_error(request_id, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a bug here must not kill the server
            self.log(f"internal error in {method}:\n{traceback.format_exc()}")
            self.send_error(request_id, RPCError(INTERNAL_ERROR, f"Internal error: {exc}"))
            return
        if result is not None:
            self.send_result(request_id, self._finish(ctx, result))

    def _route(self, request_id: Any, method: str, params: JSON) -> tuple[Context, Handler]:
        meta = params.get("_meta")
        is_modern = self.modern and method != "initialize" and isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        if is_modern:
            assert isinstance(meta, dict)
            ctx = self._modern_context(request_id, params, meta)
            handler = self._modern_methods.get(method)
            if handler is None:
                raise RPCError(METHOD_NOT_FOUND, f"Method not found: {method}")
            return ctx, handler
        if not self.legacy:
            if method == "initialize":
                versions = ", ".join(self.supported_versions)
                raise RPCError(
                    METHOD_NOT_FOUND,
                    f"Method not found: initialize. This server speaks only MCP {versions} "
                    "(no initialize handshake); upgrade the client.",
                    {"supported": self.supported_versions},
                )
            if method not in self._modern_methods:
                raise RPCError(METHOD_NOT_FOUND, f"Method not found: {method}")
            raise RPCError(INVALID_PARAMS, f"Invalid params: missing _meta[{META_PROTOCOL_VERSION!r}]")
        handler = self._legacy_methods.get(method)
        if handler is None:
            raise RPCError(METHOD_NOT_FOUND, f"Method not found: {method}")
        if not self.initialized and method not in ("initialize", "ping"):
            raise RPCError(INVALID_REQUEST, f"Server not initialized: send initialize before {method}")
        ctx = Context(request_id, params, modern=False, capabilities=self.client_capabilities, log_level=self.log_level)
        return ctx, handler

    def _modern_context(self, request_id: Any, params: JSON, meta: JSON) -> Context:
        version = meta[META_PROTOCOL_VERSION]
        if not isinstance(version, str):
            raise RPCError(INVALID_PARAMS, f"Invalid params: _meta[{META_PROTOCOL_VERSION!r}] must be a string")
        if version not in MODERN_VERSIONS:
            raise RPCError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": self.supported_versions, "requested": version},
            )
        capabilities = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise RPCError(INVALID_PARAMS, f"Invalid params: missing _meta[{META_CLIENT_CAPABILITIES!r}]")
        log_level = meta.get(META_LOG_LEVEL)
        if log_level is not None and log_level not in _LOG_RANK:
            raise RPCError(INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}")
        return Context(request_id, params, modern=True, capabilities=capabilities, log_level=log_level)

    def _finish(self, ctx: Context | None, result: JSON) -> JSON:
        if ctx is not None and ctx.modern:
            result.setdefault("resultType", "complete")
            meta = result.get("_meta")
            result["_meta"] = {**meta, META_SERVER_INFO: SERVER_INFO} if meta else {META_SERVER_INFO: SERVER_INFO}
        return result

    def _handle_notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            request_id = params.get("requestId")
            if not _valid_id(request_id):
                return
            with self._state_lock:
                call = self._calls.get(request_id)
                if call is not None:
                    call.cancelled = True
                    call.wake.set()
            if self.verbose:
                self.log(f"cancelled id={request_id!r} ({'in flight' if call else 'unknown or done'})")
        elif self.verbose:
            self.log(f"<- notification {method}")

    def _handle_response(self, message: JSON) -> None:
        request_id = message["id"]
        with self._state_lock:
            call = self._server_requests.pop(request_id, None) if isinstance(request_id, int) else None
            if call is not None:
                call.reply = message
                call.wake.set()
        if call is None:
            self.log(f"ignoring response to unknown request id {request_id!r}")

    # ---------------------------------------------------------- threading

    def _run_threaded(self, ctx: Context, name: str, work: Callable[[], JSON | None]) -> None:
        """Answer ``ctx`` from a new thread, so the read loop keeps going."""
        call = Call()
        ctx.call = call
        with self._state_lock:
            self._calls[ctx.request_id] = call

        def run() -> None:
            response: JSON | None = None
            try:
                result = work()
                if result is not None:
                    response = {"jsonrpc": "2.0", "id": ctx.request_id, "result": self._finish(ctx, result)}
            except RPCError as exc:
                response = {"jsonrpc": "2.0", "id": ctx.request_id, "error": exc.to_json()}
            except Exception as exc:  # noqa: BLE001 - report it as -32603, keep serving
                self.log(f"internal error in tool {name}:\n{traceback.format_exc()}")
                error = RPCError(INTERNAL_ERROR, f"Internal error: {exc}")
                response = {"jsonrpc": "2.0", "id": ctx.request_id, "error": error.to_json()}
            with self._state_lock:
                if self._calls.get(ctx.request_id) is call:
                    del self._calls[ctx.request_id]
            if response is not None and not call.cancelled:
                self.send(response)

        threading.Thread(target=run, name=f"demo-{name}-{ctx.request_id}", daemon=True).start()

    # ------------------------------------------------------------ methods

    def _initialize(self, ctx: Context) -> JSON:
        params = ctx.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RPCError(INVALID_PARAMS, "Invalid params: initialize needs a protocolVersion string")
        capabilities = params.get("capabilities", {})
        if not isinstance(capabilities, dict):
            raise RPCError(INVALID_PARAMS, "Invalid params: capabilities must be an object")
        version = requested if requested in LEGACY_VERSIONS else LATEST_LEGACY_VERSION
        self.protocol_version = version
        self.client_capabilities = capabilities
        self.initialized = True
        return {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    def _discover(self, ctx: Context) -> JSON:
        return {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "public",
        }

    def _set_level(self, ctx: Context) -> JSON:
        level = ctx.params.get("level")
        if level not in _LOG_RANK:
            raise RPCError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        self.log_level = level
        return {}

    def _tools_list(self, ctx: Context) -> JSON:
        start = 0
        cursor = ctx.params.get("cursor")
        if cursor is not None:
            start = self._decode_cursor(cursor)
        end = len(TOOLS) if not self.page_size else start + self.page_size
        result: JSON = {"tools": TOOLS[start:end]}
        if end < len(TOOLS):
            result["nextCursor"] = base64.urlsafe_b64encode(f"tools:{end}".encode()).decode()
        if ctx.modern:
            result["ttlMs"] = CACHE_TTL_MS
            result["cacheScope"] = "public"
        return result

    @staticmethod
    def _decode_cursor(cursor: Any) -> int:
        try:
            kind, _, offset = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
            if kind == "tools" and 0 < int(offset) <= len(TOOLS):
                return int(offset)
        except (AttributeError, ValueError):
            pass
        raise RPCError(INVALID_PARAMS, f"Invalid params: unknown cursor {cursor!r}")

    def _tools_call(self, ctx: Context) -> JSON | None:
        name = ctx.params.get("name")
        if not isinstance(name, str):
            raise RPCError(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        tool = self._tools.get(name)
        if tool is None:
            raise RPCError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = ctx.params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise RPCError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        return tool(arguments, ctx)

    # -------------------------------------------------------------- tools

    def _tool_echo(self, args: JSON, ctx: Context) -> JSON:
        message = args.get("message")
        if not isinstance(message, str):
            return _text_result("echo: 'message' must be a string", is_error=True)
        return {"content": [{"type": "text", "text": message}]}

    def _tool_add(self, args: JSON, ctx: Context) -> JSON:
        a: Any = args.get("a")
        b: Any = args.get("b")
        if not (_is_number(a) and _is_number(b)):
            return _text_result("add: 'a' and 'b' must be numbers", is_error=True)
        total = a + b
        return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}

    def _tool_weather(self, args: JSON, ctx: Context) -> JSON:
        city = args.get("city")
        if not isinstance(city, str) or not city.strip():
            return _text_result("weather: 'city' must be a non-empty string", is_error=True)
        digest = hashlib.sha256(city.strip().lower().encode("utf-8")).digest()
        report = {
            "city": city,
            "temperature_c": round(-10 + int.from_bytes(digest[:2], "big") % 451 / 10, 1),
            "conditions": _WEATHER_CONDITIONS[digest[2] % len(_WEATHER_CONDITIONS)],
        }
        return {"content": [{"type": "text", "text": _encode_json(report)}], "structuredContent": report}

    def _tool_fail(self, args: JSON, ctx: Context) -> JSON:
        message = args.get("message")
        return _text_result(message if isinstance(message, str) else "this tool always fails", is_error=True)

    def _tool_boom(self, args: JSON, ctx: Context) -> JSON:
        raise RPCError(INTERNAL_ERROR, "boom")

    def _tool_slow(self, args: JSON, ctx: Context) -> JSON | None:
        seconds, steps = args.get("seconds", 1), args.get("steps", 5)
        if not _is_number(seconds) or seconds < 0:
            return _text_result("slow: 'seconds' must be a number >= 0", is_error=True)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            return _text_result("slow: 'steps' must be an integer >= 0", is_error=True)
        self._run_threaded(ctx, "slow", lambda: self._slow_work(float(seconds), steps, ctx))
        return None

    def _slow_work(self, seconds: float, steps: int, ctx: Context) -> JSON | None:
        call = ctx.call
        assert call is not None
        if ctx.log_level is not None and _LOG_RANK[ctx.log_level] <= _LOG_RANK["info"]:
            self.notify(
                "notifications/message",
                {"level": "info", "logger": "slow", "data": f"slow: starting, {seconds:g} s in {steps} steps"},
            )
        token = ctx.progress_token
        for step in range(1, steps + 1):
            if call.wake.wait(seconds / steps):
                return None
            if token is not None:
                self.notify(
                    "notifications/progress",
                    {"progressToken": token, "progress": step, "total": steps, "message": f"step {step} of {steps}"},
                )
        if steps == 0 and call.wake.wait(seconds):
            return None
        if call.cancelled:
            return None
        return _text_result(f"done after {seconds:g} s")

    def _tool_confirm(self, args: JSON, ctx: Context) -> JSON | None:
        question = args.get("question")
        if not isinstance(question, str):
            return _text_result("confirm: 'question' must be a string", is_error=True)
        elicitation: JSON = {"message": question, "requestedSchema": _CONFIRM_SCHEMA}
        if ctx.modern:
            return self._confirm_modern(question, {"mode": "form", **elicitation}, ctx)
        if not _supports_form_elicitation(ctx.capabilities):
            return _text_result(
                "confirm: the client did not declare the elicitation capability, so the user cannot be asked",
                is_error=True,
            )
        if self.protocol_version == LATEST_LEGACY_VERSION:  # "mode" was added in 2025-11-25
            elicitation = {"mode": "form", **elicitation}
        self._run_threaded(ctx, "confirm", lambda: self._confirm_legacy(elicitation, ctx))
        return None

    def _confirm_legacy(self, elicitation: JSON, ctx: Context) -> JSON | None:
        call = ctx.call
        assert call is not None
        with self._state_lock:
            self._next_server_id += 1
            server_id = self._next_server_id
            self._server_requests[server_id] = call
        self.send({"jsonrpc": "2.0", "id": server_id, "method": "elicitation/create", "params": elicitation})
        call.wake.wait()
        with self._state_lock:
            self._server_requests.pop(server_id, None)
        if call.cancelled:
            self.notify("notifications/cancelled", {"requestId": server_id, "reason": "tools/call was cancelled"})
            return None
        reply = call.reply or {}
        if "error" in reply:
            error = reply["error"]
            message = error.get("message") if isinstance(error, dict) else error
            return _text_result(f"confirm: elicitation failed: {message}", is_error=True)
        return self._confirm_answer(reply.get("result"))

    @staticmethod
    def _confirm_answer(answer: Any) -> JSON:
        if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
            raise RPCError(INVALID_PARAMS, "Invalid params: expected an ElicitResult with an action")
        if answer["action"] != "accept":
            return _text_result("declined")
        content = answer.get("content")
        confirmed = content.get("confirmed") if isinstance(content, dict) else None
        if not isinstance(confirmed, bool):
            return _text_result("confirm: the answer has no boolean 'confirmed'", is_error=True)
        return _text_result(f"confirmed: {'true' if confirmed else 'false'}")

    def _confirm_modern(self, question: str, elicitation: JSON, ctx: Context) -> JSON:
        expected_state = "confirm." + hmac.new(_STATE_KEY, question.encode("utf-8"), hashlib.sha256).hexdigest()[:32]
        responses = ctx.params.get("inputResponses")
        state = ctx.params.get("requestState")
        if responses is not None or state is not None:
            if state != expected_state:
                raise RPCError(INVALID_PARAMS, "Invalid params: requestState is missing or does not match")
            if responses is not None and not isinstance(responses, dict):
                raise RPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            answer = (responses or {}).get("confirm")
            if answer is not None:
                return self._confirm_answer(answer)
        if not _supports_form_elicitation(ctx.capabilities):
            raise RPCError(
                MISSING_CLIENT_CAPABILITY,
                "Server requires the elicitation capability (form mode) for the confirm tool",
                {"requiredCapabilities": {"elicitation": {"form": {}}}},
            )
        return {
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": elicitation}},
            "requestState": expected_state,
        }


def build_arg_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command-line options (reused by the test fault server)."""
    parser = argparse.ArgumentParser(prog=prog, description="mcpcall demo MCP server (stdio, both eras).")
    parser.add_argument("--page-size", type=int, default=None, help="tools per tools/list page (default: all)")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on stdin/stdout until EOF; returns the exit code."""
    args = build_arg_parser("python -m mcpcall.demo_server").parse_args(argv)
    if args.page_size is not None and args.page_size < 1:
        print("mcpcall-demo: --page-size must be at least 1", file=sys.stderr)
        return 2
    server = DemoServer(page_size=args.page_size, verbose=args.verbose)
    try:
        code = server.serve()
    except KeyboardInterrupt:
        code = 130
    server.exit(code)  # do not wait for daemon threads of cancelled or unfinished calls
    return code


if __name__ == "__main__":
    sys.exit(main())
