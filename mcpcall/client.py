"""The MCP session over any transport, in either protocol era.

- **legacy** (2024-11-05 … 2025-11-25): the ``initialize`` handshake, then
  requests; the server may send requests of its own (ping, sampling, …),
  answered by the handlers on the callbacks thread.
- **modern** (2026-07-28): no handshake; every request carries the protocol
  version, client capabilities and client info in ``params._meta``; a server
  needing input answers ``resultType: "input_required"`` and the request is
  retried with the answers (multi round-trip requests), all rounds under the
  one deadline of the call.

How the era is chosen lives in :mod:`mcpcall.eras`.

Lifecycle: a client owns a transport, a dispatcher and a callbacks thread
(:class:`_Connection`). ``close()``, leaving a ``with`` block, interpreter exit,
and the garbage collector (with a ``ResourceWarning``, as for an unclosed file)
close it; none of mcpcall's threads keeps a client reachable. In a forked child
a client only lets go (see :mod:`mcpcall.forking`).
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from time import monotonic
from typing import Any, Callable

from . import jsonrpc
from ._version import __version__ as _version
from .callbacks import CallbackRunner
from .dispatcher import CONTINUED, Dispatcher, ProgressCallback, RequestFuture
from .eras import Agreement, Negotiator
from .errors import ConfigError, ConnectionClosed, InvalidRequest, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from .forking import Owned
from .headers import InvalidHeaderAnnotation, header_params
from .protocol import LATEST_LEGACY_VERSION, LATEST_MODERN_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS
from .scheduler import Deadline, get_scheduler
from .schema import Check, output_check
from .transports.base import Transport
from .types import CallToolResult, Implementation, Tool, parse_call_result, parse_tool

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Client",
    "Handler",
    "close_all",
]

log = logging.getLogger("mcpcall.client")

#: A handler for a request the server makes of the client: params in, result out.
Handler = Callable[[dict[str, Any]], dict[str, Any]]

_MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
_MAX_ROUNDS = 16
_MAX_PAGES = 10_000
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


class _Connection:
    """What a client owns and must close: no reference back to the client.

    Kept apart so that the garbage collector can close an unreachable client:
    its finalizer holds this, never the client itself.
    """

    def __init__(self, transport: Transport, dispatcher: Dispatcher, callbacks: CallbackRunner, name: str) -> None:
        self.transport = transport
        self.dispatcher = dispatcher
        self.callbacks = callbacks
        self.name = name
        self.owner = Owned()
        self.closed = False
        self._lock = threading.Lock()
        # Futures between two rounds of a multi-round request (or before a retry): in no pending
        # map, so close() fails them from here.
        self._between: set[RequestFuture] = set()

    def hold(self, future: RequestFuture) -> None:
        """``future`` is between rounds until it is sent again or done; close() fails it meanwhile."""
        with self._lock:
            closed = self.closed
            if not closed:
                self._between.add(future)
        if closed:
            future.fail(ConnectionClosed(f"client for server {self.name!r} was closed"))
            return
        Future.add_done_callback(future, self._release)  # runs where it completes: our code only

    def _release(self, future: Future[Any]) -> None:
        with self._lock:
            self._between.discard(future)

    def switch_transport(self, transport: Transport, timeout: float) -> None:
        """Replace the transport (auto's fallback to HTTP+SSE) and start the new one."""
        old = self.dispatcher.transport
        self.dispatcher.transport = transport
        self.transport = transport
        old.close()
        transport.start(self.dispatcher, timeout=timeout)

    def close(self, *, terminate: bool = False) -> None:
        """Close everything; ``terminate``: without the graceful steps (a connect that failed)."""
        if self.owner.forked:
            # The parent's threads may have held any of our locks at the fork; its server,
            # session and buffered files are its own. Let go of everything, touch nothing.
            self.closed = True
            _open.discard(self)
            return
        with self._lock:
            if self.closed:
                return
            self.closed = True
            between = list(self._between)
            self._between.clear()
        try:
            closed = ConnectionClosed(f"client for server {self.name!r} was closed")
            self.dispatcher.fail_all(closed)
            for future in between:  # before the callbacks thread stops: their done-callbacks still run
                future.fail(closed)
            if terminate:
                self.dispatcher.transport.terminate()
            else:
                self.dispatcher.transport.close()
        finally:
            self.callbacks.close()
            _open.discard(self)


#: Every connection not yet closed (closed at interpreter exit).
_open: set[_Connection] = set()


def _collected(connection: _Connection) -> None:
    """The client of ``connection`` became unreachable without close(): close it, with a warning."""
    if connection.closed:
        return
    if connection.owner.forked:
        connection.close()
        return
    warnings.warn(
        f"unclosed mcpcall client for server {connection.name!r} (close it, or use it in a with block)",
        ResourceWarning,
        stacklevel=3,  # the line that dropped the last reference (under weakref.finalize.__call__)
    )
    # Closing can take seconds (the stdio close ladder), and the collector may run anywhere.
    try:
        threading.Thread(target=connection.close, name=f"mcpcall-close-{connection.name}", daemon=True).start()
    except RuntimeError:  # interpreter shutting down: no new threads
        connection.close()


def _weakly(method: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """``method`` of an object, called only while the object lives (threads must not keep clients alive)."""
    ref = weakref.WeakMethod(method)

    def call(message: dict[str, Any]) -> None:
        bound = ref()
        if bound is not None:
            bound(message)

    return call


def _weak_hook(method: Callable[[Any, RequestFuture], Any], name: str) -> Callable[[Any, RequestFuture], Any]:
    """A transform or error hook that holds its client weakly.

    Pending entries (reachable from the reader thread) and Futures keep these;
    a strong reference would keep a dropped client, its threads and its server
    alive as long as one request is in flight. A client that is gone has been
    closed, so its requests fail with ConnectionClosed.
    """
    ref = weakref.WeakMethod(method)

    def call(value: Any, future: RequestFuture) -> Any:
        bound = ref()
        if bound is None:
            raise ConnectionClosed(f"client for server {name!r} was closed")
        return bound(value, future)

    return call


class Client:
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
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be positive seconds (math.inf for none), not {timeout!r}")
        self.name = transport.name
        self.timeout = float(timeout)
        self.protocol = protocol
        self.probe_timeout = probe_timeout
        #: Check structured tool results against the outputSchema seen in list_tools().
        self.validate_output = validate_output
        self._output_checks: dict[str, Check] = {}
        self.log_level = log_level
        if client_info is None:
            self.client_info = Implementation(name="mcpcall", version=_version)
        elif isinstance(client_info, Implementation):
            self.client_info = client_info
        else:
            self.client_info = Implementation.from_wire(dict(client_info))
        self._handlers: dict[str, Handler] = dict(handlers or {})
        self._notification_handlers: dict[str, list[Callable[[dict[str, Any]], None]]] = {}
        self.callbacks = CallbackRunner(self.name)
        self.dispatcher = Dispatcher(
            transport,
            name=self.name,
            callbacks=self.callbacks,
            on_request=_weakly(self._on_server_request),
            on_notification=_weakly(self._on_server_notification),
        )
        self.era: str | None = None
        self.protocol_version: str | None = None
        self.server_info: Implementation | None = None
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.supported_versions: list[str] = []
        self._meta: dict[str, Any] = {}
        self._session_lock = threading.Lock()
        self._on_modern_result = _weak_hook(self._modern_result, self.name)
        self._on_modern_error = _weak_hook(self._modern_error, self.name)
        self._on_call_result = _weak_hook(self._call_result, self.name)
        self._server_logger = logging.getLogger(f"mcpcall.server.{self.name}")
        # The negotiator and every thread reach the client's parts, never the client itself:
        # so a client nobody references is freed at once, and its finalizer closes it.
        self._connection = _Connection(transport, self.dispatcher, self.callbacks, self.name)
        self._negotiator = Negotiator(
            self.dispatcher,
            protocol=protocol,
            probe_timeout=probe_timeout,
            client_info=self.client_info,
            capabilities=self._capabilities_for(capabilities),
            log_level=log_level,
            switch_transport=self._connection.switch_transport,
        )
        self._finalizer = weakref.finalize(self, _collected, self._connection)
        self._finalizer.atexit = False  # at exit, close_all() closes what is open, without warnings

    def __repr__(self) -> str:
        state = "closed" if self.closed else (self.protocol_version or "not connected")
        return f"<mcpcall.Client {self.name!r} {state}>"

    @property
    def transport(self) -> Transport:
        """The transport in use (it changes once if auto falls back to HTTP+SSE)."""
        return self.dispatcher.transport

    # -- lifecycle ---------------------------------------------------------------

    def connect(self) -> Client:
        """Start the transport and agree on a protocol era and version, within ``timeout`` in all."""
        self._connection.owner.check(self.name)
        _open.add(self._connection)
        try:
            deadline = monotonic() + self.timeout
            self.transport.start(self.dispatcher, timeout=self.timeout)
            if monotonic() >= deadline:
                raise RequestTimeout(
                    f"server {self.name!r} did not finish connecting within {self.timeout:g} s (starting the transport)",
                    timeout=self.timeout,
                )
            self._adopt(self._negotiator.negotiate(self.timeout, deadline))
        except BaseException:
            # The caller's deadline has passed or the server failed: no grace period on top of it.
            self._finalizer.detach()
            self._connection.close(terminate=True)
            raise
        return self

    def _adopt(self, agreement: Agreement) -> None:
        self.era = agreement.era
        self.protocol_version = agreement.version
        self.supported_versions = agreement.supported_versions
        self.capabilities = agreement.capabilities
        self.server_info = agreement.server_info
        self.instructions = agreement.instructions
        self._meta = self._negotiator.request_meta(agreement.version) if agreement.era == "modern" else {}

    def __enter__(self) -> Client:  # noqa: PYI034 - no typing_extensions dependency for Self on 3.9/3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Fail what is in flight, stop the server (stdio) or connection, end every thread.

        In a process forked from the one that connected, only lets go of the
        client: the server and its session belong to the parent.
        """
        self._finalizer.detach()
        self._connection.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._connection.closed

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
        retried until it completes, within the one ``timeout``.
        """
        call = _Call(method, params, timeout, None, on_progress, reset_timeout_on_progress, max_timeout)
        return self._send(call)

    def _send(self, call: _Call) -> RequestFuture:
        self._connection.owner.check(self.name)
        if self._connection.closed:
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if call.timeout is None:
            call.timeout = self.timeout
        if call.timeout != math.inf:
            if call.timeout <= 0:
                raise ValueError(f"timeout must be positive seconds, not {call.timeout!r}")
            limit = call.max_timeout if call.reset and call.max_timeout is not None else call.timeout
            call.deadline = monotonic() + (math.inf if call.reset and call.max_timeout is None else limit)
        if self.transport.session_lost:
            self._new_session(call)
        future = RequestFuture(call.method, call, self.callbacks)
        return self._dispatch(call, future)

    def _dispatch(self, call: _Call, future: RequestFuture) -> RequestFuture:
        """Send ``call`` (again) under a new id, completing ``future``."""
        deadline: float | None = None
        if call.rounds or call.retried:
            # A later round: what is left of the call's one deadline.
            deadline = call.deadline
            if deadline - monotonic() <= 0:
                future.fail(self._call_timeout(call))
                return future
        if self.era == "modern":
            params: dict[str, Any] | None = self._params(call.params, self._meta)
            transform: Any = self._on_modern_result
            on_error: Any = self._on_modern_error
        else:
            params = call.params
            transform = call.transform
            on_error = None
        return self.dispatcher.request(
            call.method,
            params,
            call.timeout,
            deadline=deadline if deadline != math.inf else None,
            transform=transform,
            on_error=on_error,
            on_progress=call.on_progress,
            reset_timeout_on_progress=call.reset,
            max_timeout=call.max_timeout,
            future=future,
        )

    def _call_timeout(self, call: _Call) -> RequestTimeout:
        timeout = call.timeout or 0.0
        rounds = f" in {call.rounds + 1} rounds" if call.rounds else ""
        return RequestTimeout(
            f"server {self.name!r} did not complete {call.method} within {timeout:g} s{rounds} "
            "(raise timeout= if the operation is slow)",
            method=call.method,
            timeout=timeout,
        )

    def _modern_result(self, result: dict[str, Any], future: RequestFuture) -> Any:
        """Check ``resultType``; on ``input_required`` take over and answer on the callbacks thread."""
        call: _Call = future.context
        kind = result.get("resultType", "complete")
        if kind == "complete":
            return call.transform(result, future) if call.transform is not None else result
        if kind == "input_required" and call.method in _MRTR_METHODS:
            if call.rounds + 1 >= _MAX_ROUNDS:
                raise ProtocolError(f"server {self.name!r} asked for input {_MAX_ROUNDS} times on one {call.method}; gave up")
            self._guard_gap(call, future)
            self.callbacks.submit(self._answer_input_required, call, result, future)
            return CONTINUED
        raise ProtocolError(f"server {self.name!r} answered {call.method} with resultType {kind!r}, which mcpcall does not know")

    def _guard_gap(self, call: _Call, future: RequestFuture) -> None:
        """Between rounds no request is pending: the call's own deadline still runs, and close() ends it."""
        self._connection.hold(future)
        if call.deadline == math.inf:
            return
        timeout_error = self._call_timeout(call)

        def expire() -> None:
            future.fail(timeout_error)

        gap: Deadline = get_scheduler().schedule(max(0.0, call.deadline - monotonic()), expire)
        Future.add_done_callback(future, lambda _: gap.cancel())

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
            self._meta = self._negotiator.request_meta(common[0])
            self.protocol_version = common[0]
            self._guard_gap(call, future)
            self.callbacks.submit(self._retry, call, future)
            return CONTINUED
        if exc.code == jsonrpc.HEADER_MISMATCH and call.method == "tools/call":
            call.retried = True
            self._guard_gap(call, future)
            self.callbacks.submit(self._relist_and_retry, call, future)
            return CONTINUED
        return None

    def _retry(self, call: _Call, future: RequestFuture) -> None:
        if future.done():
            return
        try:
            self._dispatch(call, future)
        except BaseException as exc:  # noqa: BLE001 - the caller's Future carries it
            future.fail(exc)

    def _relist_and_retry(self, call: _Call, future: RequestFuture) -> None:
        try:
            left = call.deadline - monotonic()
            if left > 0:
                self.list_tools(timeout=left if left != math.inf else None)
        except Exception as exc:  # noqa: BLE001 - the retry shows what is still wrong
            log.debug("re-listing tools after a header mismatch failed: %s", exc)
        self._retry(call, future)

    def _answer_input_required(self, call: _Call, result: dict[str, Any], future: RequestFuture) -> None:
        if future.done():
            return  # cancelled or timed out before its turn
        try:
            requests = result.get("inputRequests")
            responses: dict[str, Any] = {}
            if isinstance(requests, dict):
                for key, req in requests.items():
                    if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                        raise ProtocolError(f"server {self.name!r} sent a malformed input request {key!r}")
                    responses[key] = self._run_handler(req["method"], req.get("params") or {})
                    if future.done():
                        return
            retry = dict(call.params or {})
            retry.pop("inputResponses", None)
            retry.pop("requestState", None)
            if responses:
                retry["inputResponses"] = responses
            state = result.get("requestState")
            if isinstance(state, str):
                retry["requestState"] = state
            follow_up = call.with_params(retry)
            follow_up.rounds += 1
            future.context = follow_up
            self._dispatch(follow_up, future)
        except BaseException as exc:  # noqa: BLE001 - a handler's failure belongs to the caller's Future
            future.fail(exc)

    def _wait(self, future: Future[Any]) -> Any:
        """The result, once the progress callbacks queued before it have run (within the call's deadline)."""
        # Every request has a deadline on the scheduler, so this wait ends.
        try:
            result = future.result()
        except BaseException:
            if not future.done():
                future.cancel()  # interrupted while waiting (Ctrl-C): tell the server
            raise
        drained = getattr(future, "progress_drained", None)
        if drained is not None and not self.callbacks.in_callback_thread():
            call = getattr(future, "context", None)
            deadline = call.deadline if isinstance(call, _Call) else math.inf
            drained.wait(None if deadline == math.inf else max(0.0, deadline - monotonic()))
        return result

    def _new_session(self, call: _Call) -> None:
        """The server dropped our (legacy HTTP) session: initialize again, once, for everyone.

        Within what is left of ``call``'s deadline, waiting for another caller's
        renewal included.
        """
        left = call.deadline - monotonic()
        if left <= 0 or not self._session_lock.acquire(timeout=-1 if left == math.inf else left):
            raise self._call_timeout(call)
        try:
            if self.transport.session_lost and self.protocol_version is not None:
                log.info("server %r: starting a new session", self.name)
                left = call.deadline - monotonic()
                if left <= 0:
                    raise self._call_timeout(call)
                self._adopt(self._negotiator.initialize(self.protocol_version, left))
        finally:
            self._session_lock.release()

    # -- typed methods ---------------------------------------------------------------

    def list_tools(self, timeout: float | None = None) -> list[Tool]:
        """Every tool of the server (all pages).

        Over modern Streamable HTTP a tool whose ``x-mcp-header`` annotations
        break the rules is left out, with a warning, as the spec requires.
        """
        tools = [parse_tool(item) for item in self._paginate("tools/list", "tools", timeout)]
        # Compiled here, on the caller's thread: results are checked on the reader thread,
        # which must not spend its time importing jsonschema or compiling schemas.
        checks: dict[str, Check] = {}
        if self.validate_output:
            for tool in tools:
                if tool.output_schema is not None:
                    check = output_check(tool.output_schema, tool=tool.name, server=self.name)
                    if check is not None:
                        checks[tool.name] = check
        self._output_checks = checks
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
        """Every item of every page, all pages within one ``timeout``."""
        total = self.timeout if timeout is None else timeout
        deadline = monotonic() + total if total != math.inf else math.inf
        cursor: str | None = None
        seen = set()
        pages = 0
        while True:
            pages += 1
            if pages > _MAX_PAGES:
                raise ProtocolError(f"server {self.name!r} sent more than {_MAX_PAGES} pages for {method}; gave up")
            left = deadline - monotonic()
            params = {"cursor": cursor} if cursor is not None else None
            try:
                if left <= 0:
                    raise RequestTimeout("no time left", method=method, timeout=total)
                page = self._wait(self._send(_Call(method, params, left)))
            except RequestTimeout as exc:
                if pages == 1:
                    raise
                raise RequestTimeout(
                    f"server {self.name!r} did not finish {method} within {total:g} s ({pages - 1} pages so far)",
                    method=method, timeout=total,
                ) from exc
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
        if not isinstance(name, str):
            raise InvalidRequest(f"the tool name must be a string, not {type(name).__name__}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidRequest(
                f"call_tool({name!r}, ...): arguments must be a mapping of argument names to values "
                f"(a dict such as {{'message': ...}}), not {type(arguments).__name__}"
            )
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
        if meta:
            params["_meta"] = dict(meta)
        call = _Call("tools/call", params, timeout, self._on_call_result, on_progress, reset_timeout_on_progress, max_timeout)
        return self._send(call)

    def _call_result(self, result: dict[str, Any], future: RequestFuture) -> CallToolResult:
        params = future.context.params if future.context is not None else None
        name = params.get("name", "") if isinstance(params, dict) else ""
        parsed = parse_call_result(result, name, self.name)
        if self.validate_output and not parsed.is_error:
            check = self._output_checks.get(name)
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

    def notify(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> None:
        """Send a notification to the server.

        Over HTTP this waits for the server to acknowledge it, at most ``timeout``
        seconds (default: the client's timeout): :class:`RequestTimeout` then.
        """
        self.dispatcher.notify(method, params, timeout if timeout is not None else self.timeout)

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

    # -- what the server sends us (handed to the callbacks thread) -------------------

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
        except BaseException as exc:  # user code may raise anything; the server still gets an answer
            log.exception("handler for %s failed", message["method"])
            reply = jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        self.dispatcher.reply(reply)

    def _on_server_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/message":
            self.callbacks.submit(self._log_server_message, params)
        callbacks = self._notification_handlers.get(method, []) + self._notification_handlers.get("*", [])
        for callback in callbacks:
            self.callbacks.submit(callback, params)

    def _log_server_message(self, params: dict[str, Any]) -> None:
        level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
        logger = params.get("logger")
        if isinstance(logger, str) and logger:
            self._server_logger.log(level, "[%s] %s", logger, params.get("data"))
        else:
            self._server_logger.log(level, "%s", params.get("data"))


class _Call:
    """What a request needs to be sent again (a retry, a multi-round-trip round)."""

    __slots__ = (
        "deadline",
        "max_timeout",
        "method",
        "on_progress",
        "params",
        "reset",
        "retried",
        "rounds",
        "timeout",
        "transform",
    )

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
        self.deadline = math.inf  # monotonic time by which every round must be done

    def with_params(self, params: dict[str, Any]) -> _Call:
        """The same call with other params (the original stays as it was)."""
        other = _Call(self.method, params, self.timeout, self.transform, self.on_progress, self.reset, self.max_timeout)
        other.rounds = self.rounds
        other.retried = self.retried
        other.deadline = self.deadline
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
    """Close every open client of this process (runs at interpreter exit; a forked child only lets go)."""
    for connection in list(_open):
        try:
            connection.close()
        except Exception:  # exiting anyway
            log.debug("closing the client for %r at exit failed", connection.name, exc_info=True)


atexit.register(close_all)
