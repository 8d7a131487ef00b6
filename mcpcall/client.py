"""The MCP session over any transport, in either protocol era: the API a caller uses.

:class:`Client` is composed of parts that each do one job and none of which
holds the client (so a client nobody references is freed, then closed):

- :class:`~mcpcall.session.lifecycle.Connection`: what must be closed;
- :class:`~mcpcall.session.eras.Negotiator`: which era and version;
- :class:`~mcpcall.session.calls.Caller`: sending requests to completion
  (rounds, retries, one deadline), the era's ``_meta``, the wait;
- :class:`~mcpcall.session.inbound.Inbound`: the server's requests (sampling,
  elicitation, roots, handlers) and notifications (logs, changes);
- :class:`~mcpcall.session.tools.ToolCatalog`: tools, their schema checks, headers;
- :class:`~mcpcall.session.cache.ResultCache`: modern ``ttlMs`` caching;
- :class:`~mcpcall.session.subscriptions.Subscriptions`: change notifications;
- :class:`~mcpcall.session.tasks.Tasks`: the tasks extension.

The methods here validate what the caller gave, build the request, and turn
the answer into a typed result.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from time import monotonic
from typing import Any, Callable, Literal, overload

from . import jsonrpc
from ._version import __version__ as _version
from .callbacks import CallbackRunner
from .dispatcher import Dispatcher, ProgressCallback
from .errors import (
    ConfigError,
    ConnectionClosed,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    RequestTimeout,
    ResourceNotFound,
    RPCError,
    SignInRequired,
)
from .protocol import (
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    MODERN_VERSIONS,
    TASKS_EXTENSION,
)
from .session.cache import ResultCache
from .session.calls import Call, Caller, State
from .session.eras import DEFAULT_LOG_LEVEL, Agreement, Negotiator
from .session.inbound import Handler, Inbound, LogCallback, RootsOption
from .session.lifecycle import Connection, close_all, collected
from .session.subscriptions import ChangeEvent, Subscription, Subscriptions
from .session.tasks import Task, Tasks
from .session.tools import ToolCatalog
from .transports.base import Transport
from .types import (
    CallToolResult,
    Completion,
    GetPromptResult,
    Implementation,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
    ToolList,
    parse_completion,
    parse_prompt,
    parse_prompt_result,
    parse_read_result,
    parse_resource,
    parse_template,
)

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "LOG_LEVELS",
    "MODERN_VERSIONS",
    "Client",
    "Handler",
    "close_all",
]

#: The log levels of MCP (RFC 5424), lowest first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_RESOURCE_NOT_FOUND = (-32002, -32602)  # -32002 before 2026-07-28; -32602 since
# What servers that use neither code say (FastMCP 1.x: code 0, "Unknown resource: ...").
_NOT_FOUND = re.compile(r"not found|unknown resource|no such resource|does not exist", re.IGNORECASE)


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
        validate_arguments: bool = False,
        sampling: Handler | None = None,
        elicitation: Handler | None = None,
        roots: RootsOption = None,
        on_log: LogCallback | None = None,
        cache: bool = True,
    ) -> None:
        if protocol not in ("auto", "legacy", "modern") and protocol not in LEGACY_VERSIONS + MODERN_VERSIONS:
            raise ConfigError(
                f"protocol must be 'auto', 'legacy', 'modern' or one of "
                f"{', '.join(MODERN_VERSIONS + LEGACY_VERSIONS)}; got {protocol!r}"
            )
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be positive seconds (math.inf for none), not {timeout!r}")
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}")
        self.name = transport.name
        self.timeout = float(timeout)
        self.protocol = protocol
        if client_info is None:
            self.client_info = Implementation(name="mcpcall", version=_version)
        elif isinstance(client_info, Implementation):
            self.client_info = client_info
        else:
            self.client_info = Implementation.from_wire(dict(client_info))
        callbacks = CallbackRunner(self.name)
        dispatcher = Dispatcher(transport, name=self.name, callbacks=callbacks)
        self._connection = connection = Connection(transport, dispatcher, callbacks, self.name)
        self._inbound = inbound = Inbound(name=self.name, dispatcher=dispatcher, callbacks=callbacks, handlers=handlers,
                                          sampling=sampling, elicitation=elicitation, roots=roots, on_log=on_log)
        inbound.log_level = log_level  # below it, messages are dropped here too
        dispatcher.on_request = inbound.on_request
        dispatcher.on_notification = inbound.on_notification
        self._negotiator = Negotiator(
            dispatcher, protocol=protocol, probe_timeout=probe_timeout, client_info=self.client_info,
            capabilities=inbound.capabilities(capabilities), log_level=log_level,
            switch_transport=connection.switch_transport,
            default_log_level=DEFAULT_LOG_LEVEL if on_log is not None else None,  # modern: on_log alone gets logs
        )
        self._explicit_capabilities = dict(capabilities or {})
        self._state = State()
        self._cache = ResultCache(cache)
        self._caller = caller = Caller(name=self.name, connection=connection, state=self._state, negotiator=self._negotiator,
                                       timeout=self.timeout, run_handler=inbound.run_handler, cache=self._cache)
        self._tools = ToolCatalog(caller, validate_output=validate_output, validate_arguments=validate_arguments)
        caller.relist = self._tools.list_tools
        self._subscriptions = Subscriptions(caller)
        self._tasks = Tasks(caller, self._tools.parse)
        inbound.changed = _on_change(self._cache, self._tools, self._subscriptions, self._tasks)
        connection.closers += [self._subscriptions.close_all, self._tasks.close]
        self._finalizer = weakref.finalize(self, collected, connection)
        self._finalizer.atexit = False  # at exit, close_all() closes what is open, without warnings

    def __repr__(self) -> str:
        state = "closed" if self.closed else (self.protocol_version or "not connected")
        return f"<mcpcall.Client {self.name!r} {state}>"

    # -- what was agreed ---------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        """The transport in use (it changes once if auto falls back to HTTP+SSE)."""
        return self._connection.dispatcher.transport

    @property
    def dispatcher(self) -> Dispatcher:
        return self._connection.dispatcher

    @property
    def callbacks(self) -> CallbackRunner:
        """The client's callbacks thread (where handlers and callbacks run)."""
        return self._connection.callbacks

    era = property(lambda self: self._state.era, doc="'legacy' or 'modern', once connected.")
    protocol_version = property(lambda self: self._state.protocol_version, doc="The protocol version in use.")
    supported_versions = property(lambda self: self._state.supported_versions, doc="Versions the server named.")
    capabilities = property(lambda self: self._state.capabilities, doc="The server's capabilities.")
    server_info = property(lambda self: self._state.server_info, doc="The server's name and version.")
    instructions = property(lambda self: self._state.instructions, doc="The server's instructions, if any.")
    log_level = property(lambda self: self._negotiator.log_level, doc="The log level asked of the server.")

    @property
    def validate_output(self) -> bool:
        """Check structured tool results against the ``outputSchema`` seen in ``list_tools()``."""
        return self._tools.validate_output

    @validate_output.setter
    def validate_output(self, value: bool) -> None:
        self._tools.validate_output = value

    # -- lifecycle -------------------------------------------------------------------------

    def _sign_in(self, exc: BaseException) -> bool:
        """After ``exc``: an OAuth sign-in that needs a person is run now, on this (the caller's) thread.

        Only on a thread of the user's: mcpcall's own threads (a registry's connecting
        threads) never ask a person. True when a sign-in ran and connecting may go on.
        """
        auth: Any = getattr(self.transport, "auth", None)
        url = getattr(self.transport, "url", None)
        if not isinstance(exc, SignInRequired) or auth is None or not isinstance(url, str):
            return False
        if threading.current_thread().name.startswith("mcpcall-") or not callable(getattr(auth, "login", None)):
            return False
        auth.login(url)
        return True

    def _start(self, budget: float, deadline: float, *, started: bool = False) -> Agreement:
        """Start the transport (unless ``started``) and agree on the era and version, by ``deadline``."""
        if not started:
            self.transport.start(self.dispatcher, timeout=budget)
        if self._connection.closed:  # closed by another thread while the transport started
            self.transport.terminate()
            raise ConnectionClosed(f"client for server {self.name!r} was closed while it connected")
        if monotonic() >= deadline:
            raise RequestTimeout(
                f"server {self.name!r} did not finish connecting within {budget:g} s (starting the transport)",
                timeout=budget,
            )
        return self._negotiator.negotiate(budget, deadline)

    def connect(self, timeout: float | None = None) -> Client:
        """Start the transport and agree on a protocol era and version, within ``timeout`` in all
        (default: the client's ``timeout``, which stays the default of every later request)."""
        budget = self.timeout if timeout is None else timeout
        if not (isinstance(budget, (int, float)) and budget > 0):
            raise ConfigError(f"timeout must be positive seconds, not {budget!r}")
        self._connection.owner.check(self.name)
        if not self._connection.open():
            raise ConnectionClosed(f"client for server {self.name!r} was closed")
        try:
            deadline = monotonic() + budget
            try:
                agreement = self._start(budget, deadline)
            except MCPError as exc:
                if not self._sign_in(exc):
                    raise
                # Signed in (a person took their time, outside the deadline): connecting starts over, on a new
                # transport where the one that failed cannot go on (HTTP+SSE: the 401 ended its start).
                deadline = monotonic() + budget
                fresh = self.transport.renewed()
                if fresh is not None:
                    self._connection.switch_transport(fresh, budget)
                agreement = self._start(budget, deadline, started=True)
            meta = self._negotiator.request_meta(agreement.version) if agreement.era == "modern" else {}
            self._state.adopt(agreement, meta)
        except BaseException:
            # The caller's deadline has passed or the server failed: no grace period on top of it.
            self._finalizer.detach()
            self._connection.close(terminate=True)
            raise
        return self

    def __enter__(self) -> Client:  # noqa: PYI034 - no typing_extensions dependency for Self on 3.9/3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what is in flight (the server is told, as on a timeout) and fail it, stop the server
        (stdio) or connection, end every thread.

        In a process forked from the one that connected, only lets go of the
        client: the server and its session belong to the parent.
        """
        self._finalizer.detach()
        self._connection.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._connection.closed

    @property
    def alive(self) -> bool:
        """True while requests can be sent: not closed, and the server not gone (its process exited,
        its stream closed). A dead client stays dead: connect a new one."""
        return not self._connection.closed and self.dispatcher.closed_error is None

    # -- any request ---------------------------------------------------------------------------

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
        return self._caller.send(Call(method, params, timeout, None, on_progress, reset_timeout_on_progress, max_timeout))

    def notify(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> None:
        """Send a notification to the server.

        Over HTTP this waits for the server to acknowledge it, at most ``timeout``
        seconds (default: the client's timeout): :class:`RequestTimeout` then.
        """
        self.dispatcher.notify(method, params, timeout if timeout is not None else self.timeout)

    def ping(self, timeout: float | None = None) -> None:
        """Check the server answers (modern servers have no ping: ``server/discover`` is used)."""
        method = "server/discover" if self.era == "modern" else "ping"
        self._caller.result(Call(method, None, timeout), cache=False)

    # -- tools -------------------------------------------------------------------------------

    def list_tools(self, timeout: float | None = None, *, cache: bool = True) -> ToolList[Tool]:
        """Every tool of the server (all pages, within one ``timeout``).

        Over modern Streamable HTTP a tool whose ``x-mcp-header`` annotations
        break the rules is left out, with a warning, as the spec requires. In
        the modern era a listing the server marked fresh (``ttlMs``) is reused
        until it goes stale or the server says its tools changed.
        """
        return self._tools.list_tools(timeout, cache=cache)

    @overload
    def call_tool_future(self, name: str, arguments: Mapping[str, Any] | None = ..., *, timeout: float | None = ...,
                         on_progress: ProgressCallback | None = ..., reset_timeout_on_progress: bool = ...,
                         max_timeout: float | None = ..., meta: Mapping[str, Any] | None = ...,
                         validate_arguments: bool | None = ..., task: Literal[False] = ...) -> Future[CallToolResult]: ...

    @overload
    def call_tool_future(self, name: str, arguments: Mapping[str, Any] | None = ..., *, timeout: float | None = ...,
                         on_progress: ProgressCallback | None = ..., reset_timeout_on_progress: bool = ...,
                         max_timeout: float | None = ..., meta: Mapping[str, Any] | None = ...,
                         validate_arguments: bool | None = ..., task: Literal[True]) -> Future[Task]: ...

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
        validate_arguments: bool | None = None,
        task: bool = False,
    ) -> Future[Any]:
        """Call a tool without waiting; the Future yields a :class:`CallToolResult` (with ``task``, a :class:`Task`).

        ``future.cancel()`` cancels the call at the server too.
        """
        if not isinstance(name, str):
            raise InvalidRequest(f"the tool name must be a string, not {type(name).__name__}")
        if arguments is not None and arguments.__class__ is not dict and not isinstance(arguments, Mapping):
            raise InvalidRequest(
                f"call_tool({name!r}, ...): arguments must be a mapping of argument names to values "
                f"(a dict such as {{'message': ...}}), not {type(arguments).__name__}"
            )
        args = dict(arguments) if arguments else {}
        if validate_arguments or (validate_arguments is None and self._tools.validate_arguments):
            # Checking may list the tools first: that comes out of the call's own timeout.
            total = self.timeout if timeout is None else timeout
            started = monotonic()
            self._tools.check_arguments(name, args, True, total)
            left = total - (monotonic() - started)
            if left <= 0:
                raise RequestTimeout(f"server {self.name!r}: no time left for tools/call of {name!r} after checking "
                                     f"its arguments (timeout {total:g} s)", method="tools/call", timeout=total)
            timeout = left
        params: dict[str, Any] = {"name": name, "arguments": args}
        if meta:
            params["_meta"] = dict(meta)
        call = Call("tools/call", params, timeout, self._tools.call_result, on_progress, reset_timeout_on_progress, max_timeout)
        if task:
            self._as_task(call, name)
        return self._caller.send(call)

    def _as_task(self, call: Call, name: str) -> None:
        """Make ``call`` task-augmented: its Future yields a :class:`Task` (done at once if the server says so)."""
        tasks = self._tasks
        if self.era == "modern":
            call.transform = lambda result, future: tasks.done_at_once(result, name)
            call.on_task = lambda result, future: tasks.on_create(result, future, name)
            caps = self._negotiator.capabilities
            call.meta = {META_CAPABILITIES: {**caps, "extensions": {**caps.get("extensions", {}), TASKS_EXTENSION: {}}}}
            return
        offered = self.capabilities.get("tasks")
        requests = offered.get("requests") if isinstance(offered, dict) else None
        tools = requests.get("tools") if isinstance(requests, dict) else None
        if isinstance(tools, dict) and "call" in tools:  # 2025-11-25 tasks
            assert call.params is not None
            call.params["task"] = {}
            call.transform = lambda result, future: tasks.on_legacy_result(result, name)
        else:
            call.transform = lambda result, future: tasks.done_at_once(result, name)

    @overload
    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = ..., *, timeout: float | None = ...,
                  on_progress: ProgressCallback | None = ..., reset_timeout_on_progress: bool = ...,
                  max_timeout: float | None = ..., meta: Mapping[str, Any] | None = ...,
                  validate_arguments: bool | None = ..., task: Literal[False] = ...) -> CallToolResult: ...

    @overload
    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = ..., *, timeout: float | None = ...,
                  on_progress: ProgressCallback | None = ..., reset_timeout_on_progress: bool = ...,
                  max_timeout: float | None = ..., meta: Mapping[str, Any] | None = ...,
                  validate_arguments: bool | None = ..., task: Literal[True]) -> Task: ...

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any) -> Any:
        """Call a tool and wait for its result (options as :meth:`call_tool_future`).

        ``on_progress(progress, total, message)`` runs on the client's callbacks
        thread for each progress notification; all of them have run when this
        returns. With ``task=True`` (the tasks extension) this returns a
        :class:`Task` as soon as the server has taken the call on.
        """
        caller = self._caller
        if not caller.connection.transport.uses_caller_waits:
            return caller.wait(self.call_tool_future(name, arguments, **options))
        with caller.blocking():  # this thread waits for it: a transport may run its I/O right here
            future = self.call_tool_future(name, arguments, **options)
        return caller.wait(future)

    # -- resources -----------------------------------------------------------------------------

    def _listing(self, method: str, key: str, capability: str, timeout: float | None, cache: bool) -> list[Any]:
        """Every item of a listing; ``[]`` from a server that answers -32601 and declares no ``capability``."""
        try:
            return list(self._caller.paginate(method, key, timeout, cache=cache))
        except RPCError as exc:
            unoffered = self._unoffered(exc, capability)
            if unoffered is None:
                raise
            if not unoffered.declared:
                return []  # it said it has none, and it has none: an empty listing, as the CLI shows it
            raise unoffered from exc

    def _offered(self, call: Call, capability: str) -> dict[str, Any]:
        """The result of ``call`` (never cached); a -32601 answer as :class:`MethodNotFound` naming ``capability``."""
        try:
            result: dict[str, Any] = self._caller.result(call, cache=False)
            return result
        except RPCError as exc:
            unoffered = self._unoffered(exc, capability)
            if unoffered is not None:
                raise unoffered from exc
            raise

    def _unoffered(self, exc: RPCError, capability: str) -> MethodNotFound | None:
        """``exc`` as :class:`MethodNotFound` naming ``capability`` when it is a -32601 answer, else None."""
        if exc.code != jsonrpc.METHOD_NOT_FOUND:
            return None
        return MethodNotFound(exc.code, exc.message, exc.data, server=self.name, method=exc.method,
                              capability=capability, declared=capability in self.capabilities)

    def list_resources(self, timeout: float | None = None, *, cache: bool = True) -> list[Resource]:
        """Every resource of the server (all pages, within one ``timeout``).

        A server whose capabilities have no ``resources`` offers none: when it answers
        -32601 (Method not found) this returns ``[]``, as the spec reads the missing
        capability. (The request is still sent: some servers forget to declare what they
        serve.) A server that declares ``resources`` and answers -32601 raises
        :class:`~mcpcall.errors.MethodNotFound`.
        """
        items = self._listing("resources/list", "resources", "resources", timeout, cache)
        return [parse_resource(item, self.name) for item in items]

    def list_resource_templates(self, timeout: float | None = None, *, cache: bool = True) -> list[ResourceTemplate]:
        """Every resource template of the server (all pages, within one ``timeout``).

        ``[]`` from a server without the ``resources`` capability that answers -32601,
        as :meth:`list_resources`.
        """
        items = self._listing("resources/templates/list", "resourceTemplates", "resources", timeout, cache)
        return [parse_template(item, self.name) for item in items]

    def read_resource(self, uri: str, timeout: float | None = None, *, cache: bool = True) -> ReadResourceResult:
        """The contents of ``uri``; :class:`ResourceNotFound` when the server does not know it.

        A server that does not offer resources at all (it answers -32601 Method not
        found) raises :class:`~mcpcall.errors.MethodNotFound`, an :class:`RPCError`
        whose message says whether its capabilities declare ``resources``.
        """
        if not isinstance(uri, str):
            raise InvalidRequest(f"read_resource: the uri must be a string, not {type(uri).__name__}")
        try:
            result = self._caller.result(Call("resources/read", {"uri": uri}, timeout), cache=cache)
        except RPCError as exc:
            unoffered = self._unoffered(exc, "resources")
            if unoffered is not None:  # "Method not found" is no missing resource
                raise unoffered from exc
            if not isinstance(exc, ResourceNotFound) and (exc.code in _RESOURCE_NOT_FOUND or _NOT_FOUND.search(exc.message)):
                raise ResourceNotFound(exc.code, exc.message, exc.data, server=self.name, method="resources/read",
                                       uri=uri) from exc
            raise
        return parse_read_result(result, uri, self.name)

    # -- prompts and completion ------------------------------------------------------------------

    def list_prompts(self, timeout: float | None = None, *, cache: bool = True) -> list[Prompt]:
        """Every prompt of the server (all pages, within one ``timeout``).

        ``[]`` from a server without the ``prompts`` capability that answers -32601
        (Method not found); a server that declares ``prompts`` and answers -32601
        raises :class:`~mcpcall.errors.MethodNotFound` (as :meth:`list_resources`).
        """
        return [parse_prompt(item, self.name) for item in self._listing("prompts/list", "prompts", "prompts", timeout, cache)]

    def get_prompt(self, name: str | Prompt, arguments: Mapping[str, str] | None = None,
                   timeout: float | None = None) -> GetPromptResult:
        """The messages of prompt ``name`` filled with ``arguments`` (string values).

        A server that does not offer prompts (it answers -32601 Method not found)
        raises :class:`~mcpcall.errors.MethodNotFound`.
        """
        prompt = name.name if isinstance(name, Prompt) else name
        params: dict[str, Any] = {"name": prompt}
        if arguments:
            bad = [key for key, value in arguments.items() if not isinstance(value, str)]
            if bad:
                raise InvalidRequest(f"get_prompt({prompt!r}): argument values must be strings; {', '.join(bad)} are not")
            params["arguments"] = dict(arguments)
        return parse_prompt_result(self._offered(Call("prompts/get", params, timeout), "prompts"), prompt, self.name)

    def complete(self, ref: str | Mapping[str, Any] | Prompt | ResourceTemplate, argument_name: str, value: str,
                 context: Mapping[str, str] | None = None, timeout: float | None = None) -> Completion:
        """Suggested values for argument ``argument_name`` of a prompt or resource template.

        ``ref`` is a :class:`Prompt`, a :class:`ResourceTemplate`, a string, or
        the wire reference (``{"type": "ref/prompt", "name": ...}`` /
        ``{"type": "ref/resource", "uri": ...}``). A string is a prompt name
        (``complete("review", "language", "p")``), unless it contains ``://`` or
        ``{``: then it is a resource template URI (``"file:///{path}"``).
        ``context`` the values of the other arguments already chosen.

        A server that does not offer completions (it answers -32601 Method not
        found) raises :class:`~mcpcall.errors.MethodNotFound`.
        """
        if isinstance(ref, str):
            if "://" in ref or "{" in ref:
                wire: dict[str, Any] = {"type": "ref/resource", "uri": ref}
            else:
                wire = {"type": "ref/prompt", "name": ref}
        elif isinstance(ref, Prompt):
            wire = {"type": "ref/prompt", "name": ref.name}
        elif isinstance(ref, ResourceTemplate):
            wire = {"type": "ref/resource", "uri": ref.uri_template}
        elif isinstance(ref, Mapping) and ref.get("type") in ("ref/prompt", "ref/resource"):
            wire = dict(ref)
        else:
            raise InvalidRequest("complete: ref must be a prompt name, a resource template URI, a Prompt, a ResourceTemplate "
                                 "or a ref/prompt or ref/resource dict")
        params: dict[str, Any] = {"ref": wire, "argument": {"name": argument_name, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        return parse_completion(self._offered(Call("completion/complete", params, timeout), "completions"), self.name)

    # -- logging, roots, subscriptions -------------------------------------------------------------

    def set_logging_level(self, level: str, timeout: float | None = None) -> None:
        """Ask for the server's log messages at ``level`` and above (to ``on_log`` and the server's logger).

        Legacy: ``logging/setLevel`` (when the server declares ``logging``).
        Modern: the level goes in every later request's ``_meta`` (the server
        logs per request). Either way messages below ``level`` are dropped.
        """
        if level not in LOG_LEVELS:
            raise ConfigError(f"level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
        self._negotiator.log_level = level
        self._inbound.log_level = level  # messages below it are dropped here too, whatever the server sends
        if self.era == "modern" and self.protocol_version is not None:
            self._state.meta = self._negotiator.request_meta(self.protocol_version)
        elif self.era == "legacy" and "logging" in self.capabilities:
            self._caller.result(Call("logging/setLevel", {"level": level}, timeout), cache=False)

    def set_roots(self, roots: RootsOption, timeout: float | None = None) -> None:
        """Replace the roots offered to the server; a legacy server is told they changed.

        ``roots`` is one root (a path, a ``file://`` URI or a ``{"uri": ...}`` dict;
        a string is ONE root, never its characters), an iterable of roots, or a
        callable returning either. Anything else is a :class:`ConfigError`.
        """
        self._inbound.set_roots(roots)
        if self.era == "legacy" and not self.closed:
            self.notify("notifications/roots/list_changed", None, timeout)

    def subscribe(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: Sequence[str] = (),
        resources_list: bool = False,
        on_change: Callable[[ChangeEvent], Any] | None = None,
        timeout: float | None = None,
    ) -> Subscription:
        """Be told of changes: tool or prompt lists (``tools``, ``prompts``), the resource list
        (``resources_list``), or the contents of ``resources`` (URIs).

        ``on_change(event)`` runs on the callbacks thread; ``sub.acknowledged``
        is what the server agreed to send: ``{}`` from a server that cannot send
        any of it (in both eras: no ``listChanged`` / ``resources.subscribe`` in
        its capabilities, or, modern, no ``subscriptions/listen`` method), which
        is no error. Close the subscription (or use it as
        a context manager) to stop.
        """
        return self._subscriptions.subscribe(tools=tools, prompts=prompts, resources_list=resources_list,
                                             uris=list(resources), on_change=on_change, timeout=timeout)

    # -- what the server sends us ------------------------------------------------------------------

    def set_handler(self, method: str, handler: Handler | None) -> None:
        """Answer the server's ``method`` requests with ``handler(params) -> result``.

        Set handlers before connecting so the capability is declared.
        """
        self._inbound.set_handler(method, handler)

    def on_notification(self, method: str, callback: Callable[[dict[str, Any]], None]) -> None:
        """Run ``callback(params)`` on the callbacks thread for each ``method`` notification ("*": all)."""
        self._inbound.add_listener(method, callback)


def _on_change(cache: ResultCache, tools: ToolCatalog, subscriptions: Subscriptions, tasks: Tasks) -> Callable[[str, dict[str, Any]], None]:
    """What a change notification does to the session (on the reader thread; no user code)."""

    def changed(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            tools.invalidate()
        elif method == "notifications/prompts/list_changed":
            cache.invalidate("prompts/list")
        elif method == "notifications/resources/list_changed":
            cache.invalidate("resources/list")
            cache.invalidate("resources/templates/list")
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            cache.invalidate("resources/read", {"uri": uri} if isinstance(uri, str) else None)
        elif method in ("notifications/tasks", "notifications/tasks/status"):
            tasks.on_notification(params)
            return
        subscriptions.notify(method, params)

    return changed

