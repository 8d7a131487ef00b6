"""The MCP session over any transport, in either protocol era.

- **legacy** (2024-11-05 … 2025-11-25): the ``initialize`` handshake, then
  requests; the server may send requests of its own (ping, sampling, …),
  answered by the handlers on the callbacks thread.
- **modern** (2026-07-28): no handshake; every request carries the protocol
  version, client capabilities and client info in ``params._meta``; a server
  needing input answers ``resultType: "input_required"`` and the request is
  retried with the answers (multi round-trip requests).

How the era is chosen lives in :mod:`mcpcall.eras`.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any, Callable

from . import jsonrpc
from ._version import __version__ as _version
from .callbacks import CallbackRunner
from .dispatcher import CONTINUED, Dispatcher, ProgressCallback, RequestFuture
from .eras import (
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    EraNegotiation,
)
from .errors import ConfigError, ConnectionClosed, ProtocolError, RPCError, UnsupportedVersion
from .headers import InvalidHeaderAnnotation, header_params
from .schema import output_check
from .transports.base import Transport
from .types import CallToolResult, Implementation, Tool, parse_call_result, parse_tool

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Client",
    "Handler",
]

log = logging.getLogger("mcpcall.client")

#: A handler for a request the server makes of the client: params in, result out.
Handler = Callable[[dict[str, Any]], dict[str, Any]]

_MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
_MAX_ROUNDS = 16
_CAPABILITY_OF: dict[str, tuple[str, dict[str, Any]]] = {
    "sampling/createMessage": ("sampling", {}),
    "elicitation/create": ("elicitation", {"form": {}}),
    "roots/list": ("roots", {}),
}
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


class Client(EraNegotiation):
    """A connection to one MCP server. Thread-safe; use it as a context manager.

    Build one with :func:`mcpcall.connect`. Every method that waits takes a
    ``timeout`` in seconds (default: the client's ``timeout``); when it passes,
    the request is cancelled at the server and :class:`RequestTimeout` raised.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        timeout: float = 60.0,
        protocol: str = "auto",
        client_info: Implementation | Mapping[str, Any] | None = None,
        handlers: Mapping[str, Handler] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        probe_timeout: float = 5.0,
        log_level: str | None = None,
        validate_output: bool = True,
    ) -> None:
        if protocol not in ("auto", "legacy", "modern") and protocol not in LEGACY_VERSIONS + MODERN_VERSIONS:
            raise ConfigError(
                f"protocol must be 'auto', 'legacy', 'modern' or one of "
                f"{', '.join(MODERN_VERSIONS + LEGACY_VERSIONS)}; got {protocol!r}"
            )
        self.transport = transport
        self.name = transport.name
        self.timeout = timeout
        self.protocol = protocol
        self.probe_timeout = probe_timeout
        #: Check structured tool results against the outputSchema seen in list_tools().
        self.validate_output = validate_output
        self._output_schemas: dict[str, Any] = {}
        self._output_checks: dict[str, Any] = {}
        self.log_level = log_level
        if client_info is None:
            self.client_info = Implementation(name="mcpcall", version=_version)
        elif isinstance(client_info, Implementation):
            self.client_info = client_info
        else:
            self.client_info = Implementation.from_wire(dict(client_info))
        self._handlers: dict[str, Handler] = dict(handlers or {})
        self._client_capabilities = self._capabilities_for(capabilities)
        self._notification_handlers: dict[str, list[Callable[[dict[str, Any]], None]]] = {}
        self.callbacks = CallbackRunner(self.name)
        self.dispatcher = Dispatcher(
            transport,
            name=self.name,
            callbacks=self.callbacks,
            on_request=self._on_server_request,
            on_notification=self._on_server_notification,
        )
        self.era: str | None = None
        self.protocol_version: str | None = None
        self.server_info: Implementation | None = None
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.supported_versions: list[str] = []
        self._meta: dict[str, Any] = {}
        self._closed = False
        self._close_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._server_logger = logging.getLogger(f"mcpcall.server.{self.name}")

    def __repr__(self) -> str:
        state = "closed" if self._closed else (self.protocol_version or "not connected")
        return f"<mcpcall.Client {self.name!r} {state}>"

    # -- lifecycle ---------------------------------------------------------------

    def connect(self) -> Client:
        """Start the transport and agree on a protocol era and version."""
        _live_clients.add(self)
        try:
            self.transport.start(self.dispatcher)
            self._negotiate()
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> Client:  # noqa: PYI034 - no typing_extensions dependency for Self on 3.9/3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Fail what is in flight, stop the server (stdio) or connection, end every thread."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.dispatcher.fail_all(ConnectionClosed(f"client for server {self.name!r} was closed"))
        try:
            self.transport.close()
        finally:
            self.callbacks.close()
            _live_clients.discard(self)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    # -- era negotiation -----------------------------------------------------------

    def _capabilities_for(self, explicit: Mapping[str, Any] | None) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        for method in self._handlers:
            if method in _CAPABILITY_OF:
                key, value = _CAPABILITY_OF[method]
                caps[key] = dict(value)
        caps.update(explicit or {})
        return caps

    # -- requests ------------------------------------------------------------------

    def _params(self, params: dict[str, Any] | None, meta: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the modern per-request ``_meta`` (a caller's own ``_meta`` keys win)."""
        if not params:
            return {"_meta": meta}
        out = dict(params)
        extra = params.get("_meta")
        if extra:
            merged = dict(meta)
            merged.update(extra)
            out["_meta"] = merged
        else:
            out["_meta"] = meta
        return out

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> Future[dict[str, Any]]:
        """Send any request; returns a Future of the raw result dict.

        In the modern era the per-request ``_meta`` is added, and a request that
        needs input (``input_required``) is answered through the handlers and
        retried until it completes.
        """
        call = _Call(method, params, timeout, None, on_progress, reset_timeout_on_progress, max_timeout)
        return self._send(call)

    def _send(self, call: _Call) -> RequestFuture:
        if self._closed:
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if self.transport.session_lost:
            self._new_session()
        if call.timeout is None:
            call.timeout = self.timeout
        future = RequestFuture(call.method, call)
        return self._dispatch(call, future)

    def _dispatch(self, call: _Call, future: RequestFuture) -> RequestFuture:
        """Send ``call`` (again) under a new id, completing ``future``."""
        if self.era == "modern":
            params: dict[str, Any] | None = self._params(call.params, self._meta)
            transform: Any = self._modern_result
            on_error: Any = self._modern_error
        else:
            params = call.params
            transform = call.transform
            on_error = None
        return self.dispatcher.request(
            call.method,
            params,
            call.timeout,
            transform=transform,
            on_error=on_error,
            on_progress=call.on_progress,
            reset_timeout_on_progress=call.reset,
            max_timeout=call.max_timeout,
            future=future,
        )

    def _modern_result(self, result: dict[str, Any], future: RequestFuture) -> Any:
        """Check ``resultType``; on ``input_required`` take over and retry with the answers."""
        call: _Call = future.context
        kind = result.get("resultType", "complete")
        if kind == "complete":
            return call.transform(result, future) if call.transform is not None else result
        if kind == "input_required" and call.method in _MRTR_METHODS:
            call.rounds += 1
            if call.rounds > _MAX_ROUNDS:
                raise ProtocolError(f"server {self.name!r} asked for input {_MAX_ROUNDS} times on one {call.method}; gave up")
            self.callbacks.submit(self._answer_input_required, call, result, future)
            return CONTINUED
        raise ProtocolError(f"server {self.name!r} answered {call.method} with resultType {kind!r}, which mcpcall does not know")

    def _modern_error(self, exc: BaseException, future: RequestFuture) -> Any:
        """Retry once on a version the server names (-32022) or after re-listing tools (-32020)."""
        call: _Call = future.context
        if call.retried or not isinstance(exc, RPCError):
            return None
        if isinstance(exc, UnsupportedVersion):
            common = [v for v in MODERN_VERSIONS if v in exc.supported]
            if not common:
                return None
            call.retried = True
            self._meta = self._request_meta(common[0])
            self.protocol_version = common[0]
            self.callbacks.submit(self._retry, call, future)
            return CONTINUED
        if exc.code == jsonrpc.HEADER_MISMATCH and call.method == "tools/call":
            call.retried = True
            self.callbacks.submit(self._relist_and_retry, call, future)
            return CONTINUED
        return None

    def _retry(self, call: _Call, future: RequestFuture) -> None:
        if future.done():
            return
        try:
            self._dispatch(call, future)
        except Exception as exc:  # noqa: BLE001 - the caller's Future carries it
            if not future.done():
                future.set_exception(exc)

    def _relist_and_retry(self, call: _Call, future: RequestFuture) -> None:
        try:
            self.list_tools(timeout=call.timeout)
        except Exception as exc:  # noqa: BLE001
            log.debug("re-listing tools after a header mismatch failed: %s", exc)
        self._retry(call, future)

    def _answer_input_required(self, call: _Call, result: dict[str, Any], future: RequestFuture) -> None:
        if future.done():
            return
        try:
            requests = result.get("inputRequests")
            responses: dict[str, Any] = {}
            if isinstance(requests, dict):
                for key, req in requests.items():
                    if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                        raise ProtocolError(f"server {self.name!r} sent a malformed input request {key!r}")
                    responses[key] = self._run_handler(req["method"], req.get("params") or {})
            retry = dict(call.params or {})
            retry.pop("inputResponses", None)
            retry.pop("requestState", None)
            if responses:
                retry["inputResponses"] = responses
            state = result.get("requestState")
            if isinstance(state, str):
                retry["requestState"] = state
            follow_up = call.with_params(retry)
            future.context = follow_up
            self._dispatch(follow_up, future)
        except Exception as exc:  # noqa: BLE001 - a handler's failure belongs to the caller's Future
            if not future.done():
                future.set_exception(exc)

    @staticmethod
    def _wait(future: Future[Any]) -> Any:
        # Every request has a deadline on the scheduler, so this wait ends.
        try:
            return future.result()
        except BaseException:
            if not future.done():
                future.cancel()  # interrupted while waiting (Ctrl-C): tell the server
            raise

    # -- typed methods ---------------------------------------------------------------

    def list_tools(self, timeout: float | None = None) -> list[Tool]:
        """Every tool of the server (all pages).

        Over modern Streamable HTTP a tool whose ``x-mcp-header`` annotations
        break the rules is left out, with a warning, as the spec requires.
        """
        tools = [parse_tool(item) for item in self._paginate("tools/list", "tools", timeout)]
        self._output_schemas = {tool.name: tool.output_schema for tool in tools if tool.output_schema is not None}
        # Compiled here, on the caller's thread: results are checked on the reader thread,
        # which must not spend its time importing jsonschema or compiling schemas.
        self._output_checks = {
            name: output_check(schema, tool=name, server=self.name)
            for name, schema in self._output_schemas.items()
            if self.validate_output
        }
        registry = getattr(self.transport, "tool_headers", None)
        if registry is None or self.era != "modern":
            return tools
        kept = []
        for tool in tools:
            try:
                registry[tool.name] = header_params(tool.input_schema)
            except InvalidHeaderAnnotation as exc:
                registry.pop(tool.name, None)
                log.warning("server %r: tool %r left out: %s", self.name, tool.name, exc)
                continue
            kept.append(tool)
        return kept

    def _paginate(self, method: str, key: str, timeout: float | None) -> Iterator[Any]:
        cursor: str | None = None
        seen = set()
        while True:
            params = {"cursor": cursor} if cursor is not None else None
            page = self._wait(self._send(_Call(method, params, timeout)))
            items = page.get(key)
            if not isinstance(items, list):
                raise ProtocolError(f"server {self.name!r} answered {method} without a list {key!r}")
            yield from items
            cursor = page.get("nextCursor")
            if cursor is None or cursor == "":
                return
            if not isinstance(cursor, str) or cursor in seen:
                raise ProtocolError(f"server {self.name!r} repeated or sent a bad nextCursor {cursor!r} for {method}")
            seen.add(cursor)

    def call_tool_future(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Future[CallToolResult]:
        """Call a tool without waiting; the Future yields a :class:`CallToolResult`.

        ``future.cancel()`` cancels the call at the server too.
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
        if meta:
            params["_meta"] = dict(meta)

        call = _Call("tools/call", params, timeout, self._call_result, on_progress, reset_timeout_on_progress, max_timeout)
        return self._send(call)

    def _call_result(self, result: dict[str, Any], future: RequestFuture) -> CallToolResult:
        params = future.context.params if future.context is not None else None
        name = params.get("name", "") if isinstance(params, dict) else ""
        parsed = parse_call_result(result, name)
        if self.validate_output and not parsed.is_error and name in self._output_checks:
            check = self._output_checks[name]
            if check is not None:
                if parsed.structured_content is None:
                    raise ProtocolError(
                        f"server {self.name!r}: tool {name!r} declares an outputSchema but returned no structured content"
                    )
                check(parsed.structured_content)
        return parsed

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool and wait for its result.

        ``on_progress(progress, total, message)`` runs on the client's callbacks
        thread for each progress notification.
        """
        return self._wait(  # type: ignore[no-any-return]
            self.call_tool_future(
                name,
                arguments,
                timeout=timeout,
                on_progress=on_progress,
                reset_timeout_on_progress=reset_timeout_on_progress,
                max_timeout=max_timeout,
                meta=meta,
            )
        )

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification to the server."""
        self.dispatcher.notify(method, params)

    def ping(self, timeout: float | None = None) -> None:
        """Check the server answers (modern servers have no ping: ``server/discover`` is used)."""
        method = "server/discover" if self.era == "modern" else "ping"
        self._wait(self._send(_Call(method, None, timeout)))

    def list_resources(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every resource of the server (all pages), as wire dicts."""
        return list(self._paginate("resources/list", "resources", timeout))

    def read_resource(self, uri: str, timeout: float | None = None) -> dict[str, Any]:
        """The ``resources/read`` result for ``uri``."""
        return self._wait(self._send(_Call("resources/read", {"uri": uri}, timeout)))  # type: ignore[no-any-return]

    def list_prompts(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every prompt of the server (all pages), as wire dicts."""
        return list(self._paginate("prompts/list", "prompts", timeout))

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """The ``prompts/get`` result."""
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = dict(arguments)
        return self._wait(self._send(_Call("prompts/get", params, timeout)))  # type: ignore[no-any-return]

    # -- what the server sends us ----------------------------------------------------

    def set_handler(self, method: str, handler: Handler | None) -> None:
        """Answer the server's ``method`` requests with ``handler(params) -> result``.

        Set handlers before connecting so the capability is declared.
        """
        if handler is None:
            self._handlers.pop(method, None)
        else:
            self._handlers[method] = handler

    def on_notification(self, method: str, callback: Callable[[dict[str, Any]], None]) -> None:
        """Run ``callback(params)`` on the callbacks thread for each ``method`` notification ("*": all)."""
        self._notification_handlers.setdefault(method, []).append(callback)

    def _run_handler(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = self._handlers.get(method)
        if handler is None:
            raise RPCError(jsonrpc.METHOD_NOT_FOUND, f"the client has no handler for {method}")
        result = handler(params)
        if not isinstance(result, dict):
            raise ProtocolError(f"the handler for {method} returned {type(result).__name__}, not a dict")
        if method == "elicitation/create":
            result = _with_defaults(result, params.get("requestedSchema"))
        return result

    def _on_server_request(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method not in self._handlers:
            self.dispatcher.reply(jsonrpc.error_response(message["id"], jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        self.callbacks.submit(self._answer_server_request, message)

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        try:
            result = self._run_handler(message["method"], params if isinstance(params, dict) else {})
            reply = jsonrpc.result_response(message["id"], result)
        except RPCError as exc:
            reply = jsonrpc.error_response(message["id"], exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("handler for %s failed", message["method"])
            reply = jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        self.dispatcher.reply(reply)

    def _on_server_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            self._server_logger.log(level, "%s", params.get("data"))
        callbacks = self._notification_handlers.get(method, []) + self._notification_handlers.get("*", [])
        for callback in callbacks:
            self.callbacks.submit(callback, params)



class _Call:
    """What a request needs to be sent again (a retry, a multi-round-trip round)."""

    __slots__ = ("max_timeout", "method", "on_progress", "params", "reset", "retried", "rounds", "timeout", "transform")

    def __init__(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        transform: Callable[[dict[str, Any], RequestFuture], Any] | None = None,
        on_progress: ProgressCallback | None = None,
        reset: bool = False,
        max_timeout: float | None = None,
    ) -> None:
        self.method = method
        self.params = params
        self.timeout = timeout
        self.transform = transform
        self.on_progress = on_progress
        self.reset = reset
        self.max_timeout = max_timeout
        self.rounds = 0
        self.retried = False

    def with_params(self, params: dict[str, Any]) -> _Call:
        """The same call with other params (the original stays as it was)."""
        other = _Call(self.method, params, self.timeout, self.transform, self.on_progress, self.reset, self.max_timeout)
        other.rounds = self.rounds
        other.retried = self.retried
        return other


def _with_defaults(result: dict[str, Any], schema: Any) -> dict[str, Any]:
    """An accepted form elicitation with the schema's defaults for the fields left out."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if result.get("action") != "accept" or not isinstance(props, dict):
        return result
    content = result.get("content")
    content = dict(content) if isinstance(content, dict) else {}
    for name, prop in props.items():
        if name not in content and isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
    return {**result, "content": content}




def close_all() -> None:
    """Close every open client (runs at interpreter exit)."""
    for client in list(_live_clients):
        try:
            client.close()
        except Exception:  # pragma: no cover
            log.debug("closing %r at exit failed", client, exc_info=True)


atexit.register(close_all)

