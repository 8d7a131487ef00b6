"""mcpcall: a synchronous, thread-based MCP client. No event loop, works anywhere.

::

    import mcpcall

    with mcpcall.connect(["python", "-m", "mcpcall.demo_server"]) as client:
        names = [tool.name for tool in client.list_tools()]
        answer = client.call_tool("echo", {"message": "hi"}).text

Each rule of the thread model is enforced in one place:

- user code runs only on a caller's thread or the client's callbacks thread:
  :class:`~mcpcall.callbacks.CallbackRunner`, which every done-callback of a
  :class:`~mcpcall.dispatcher.RequestFuture` goes through, and so do a stdio
  server's stderr lines and every record mcpcall logs from an I/O or scheduler
  thread (``Receiver.defer`` and ``Receiver.log``; logging handlers are user code);
- nothing waits on the callbacks thread for an answer: Futures complete where
  the answer arrives, and a waiter that wants the progress callbacks first waits
  on ``RequestFuture.progress_drained``;
- an exception on an internal thread ends in the Future it concerns: the
  dispatcher's ``fail`` (stdio) and the HTTP worker loop (``_http_base``);
- the scheduler only decides: what it fires fails a Future or hands work off, and
  ``Transport.cancel`` may never block (:mod:`mcpcall.transports.base`);
- every HTTP exchange can be aborted from any thread without blocking:
  :mod:`mcpcall.transports._exchanges`; every one under way (requests, cancel
  notices, the POSTs a caller waits on) is registered, so ``close()`` aborts it
  and a deadline bounds it (``HTTPBase.acknowledged``);
- everything a close must end is reachable from the client's connection, never
  only from the client (``_Connection``: the transport, calls between rounds):
  a client nobody references is freed by reference counting, then closed;
- every buffer is bounded: lines, bodies and events by ``max_message_bytes``,
  what waits for a server that does not read its stdin, stderr lines waiting
  for a slow consumer, pages of a listing;
- nothing leaves the origin the user named: :mod:`mcpcall.urls`;
- a forked child never touches what its parent owns: :mod:`mcpcall.forking`.

The package is built in floors; each folder (or module) may import its own floor and the floors below it,
never one above (``tests/test_import_graph.py`` checks it; ``python tests/import_graph.py`` prints the graph,
and its ``LAYERS`` is this diagram)::

    cli/, demo_server, __main__, mcpcall    the surface: connect(), the command line  -> everything below
    integrations/                           the tools as agent frameworks' own tools  -> registry and below
    registry/                               many servers' tools for an LLM            -> config and below
    config/                                 what a user names -> a transport; config files -> auth and below
    auth/                                   OAuth and other request signers           -> client and below
    client, notebook                        Client: one server's session, composed;   -> session and below
                                            which clients a notebook cell made
    session/                                the parts of a session (eras, calls, ...) -> dispatcher and below
    dispatcher                              requests and their answers (Futures)      -> transports and below
    transports/                             stdio, streamable HTTP, HTTP+SSE, memory  -> the ground
    the ground                              errors, urls, jsonrpc, sse, headers, schema, protocol, types/,
                                            scheduler, callbacks, forking, patterns, pieces (no floor above;
                                            errors and urls import nothing of mcpcall)

No circle of imports spans two folders.

The threads, each named as in the first column (``<server>`` is the server's name; ``tests/test_thread_table.py``
checks this table against every thread the package starts)::

    name                         how many                          does
    (a caller's own thread)      any                               builds a request, writes it (stdio), waits on its
                                                                   Future; a lone stdio caller reads its own answer
    mcpcall-reader-<server>      1 per stdio server (child)        reads stdout, parses, completes Futures
    mcpcall-writer-<server>      1 per stdio server                writes what the pipe did not take at once
    mcpcall-stderr-<server>      1 per stdio server, if captured   drains stderr into the tail and the callbacks
    mcpcall-http-<server>-<n>    up to max_workers per transport   POSTs and reads the JSON or SSE reply
    mcpcall-listen-<server>      0-1 per Streamable HTTP transport the GET stream of server-initiated messages
    mcpcall-sse-<server>         1 per HTTP+SSE transport          reads the event stream
    mcpcall-lookup               up to 8 per process               name lookups with a deadline
    mcpcall-scheduler            1 per process                     fires every deadline; decides, never does I/O
    mcpcall-callbacks-<server>   1 per client, from first use      runs user code in order
    mcpcall-close-<server>       1 per close handed off            closes a client nobody references (or the
                                                                   registry's), off the thread that let it go
    mcpcall-connect-<server>     1 per server being connected      the registry's connects, in parallel
    mcpcall-browser              1 per sign-in in progress         the OAuth redirect listener on loopback
    mcpcall-notice-cli           0-1 per CLI run                   prints "still waiting" on the command line
    mcpcall-server-<server>      1 per memory transport            the in-process server of the memory transport
                                                                   (its reader is mcpcall-reader-<server>)
    mcpcall-start-<server>       1 per awaited integration call    starts an integration's call off the event loop
                                                                   (a listing or a connect may come first), then ends;
                                                                   one more reads its result if the loop's executor is shut down

User code (handlers, progress, done-callbacks, logging handlers) runs only on a caller's thread or the callbacks
thread, never on a reader, writer, HTTP, listen, SSE, lookup or scheduler thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .client import (
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    LOG_LEVELS,
    MODERN_VERSIONS,
    Client,
    Handler,
    close_all,
)
from .config import ServerConfig, ServerSpec, find_config, load_config
from .config import make_transport as make_transport  # importable as before; connect() builds through config.connect
from .dispatcher import RequestFuture
from .errors import (
    AuthError,
    ConfigError,
    ConnectionClosed,
    ForkedClient,
    HTTPError,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    ProtocolError,
    RequestTimeout,
    ResourceNotFound,
    RPCError,
    SchemaValidationError,
    SessionExpired,
    SignInRequired,
    ToolCallFailed,
    ToolError,
    UnsupportedVersion,
)
from .session.inbound import LogCallback, RootsOption
from .session.subscriptions import ChangeEvent, Subscription
from .session.tasks import Task, TaskStatus
from .types import (
    AudioContent,
    CallToolResult,
    Completion,
    ContentBlock,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Implementation,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceContents,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    Tool,
    UnknownContent,
)

# A library never prints: without logging configured, nothing of mcpcall's goes to stderr.
logging.getLogger("mcpcall").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from .auth import (
        ClientCredentials,
        EnterpriseAuth,
        FileTokenStore,
        JWTBearer,
        MemoryTokenStore,
        OAuth,
        RedisTokenStore,
        Token,
    )
    from .registry import RegisteredTool, ToolRegistry, ToolStats

#: Imported on first use: a script that only connects pays for neither the registry nor OAuth.
_LAZY = {
    "RegisteredTool": "registry",
    "ToolRegistry": "registry",
    "ToolStats": "registry",
    "OAuth": "auth",
    "ClientCredentials": "auth",
    "JWTBearer": "auth",
    "EnterpriseAuth": "auth",
    "Token": "auth",
    "MemoryTokenStore": "auth",
    "FileTokenStore": "auth",
    "RedisTokenStore": "auth",
}


def __getattr__(name: str) -> Any:
    """The registry and OAuth on first use (the registry alone is a fifth of the start-up)."""
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'mcpcall' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Every public name, the ones imported on first use included (tab completion, ``help``), without importing them."""
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "LOG_LEVELS",
    "MODERN_VERSIONS",
    "AudioContent",
    "AuthError",
    "CallToolResult",
    "ChangeEvent",
    "Client",
    "ClientCredentials",
    "Completion",
    "ConfigError",
    "ConnectionClosed",
    "ContentBlock",
    "EmbeddedResource",
    "EnterpriseAuth",
    "FileTokenStore",
    "ForkedClient",
    "GetPromptResult",
    "HTTPError",
    "Handler",
    "ImageContent",
    "Implementation",
    "InvalidRequest",
    "JWTBearer",
    "LogCallback",
    "MCPError",
    "MemoryTokenStore",
    "MethodNotFound",
    "OAuth",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "ProtocolError",
    "RPCError",
    "ReadResourceResult",
    "RedisTokenStore",
    "RegisteredTool",
    "RequestFuture",
    "RequestTimeout",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceNotFound",
    "ResourceTemplate",
    "RootsOption",
    "SchemaValidationError",
    "ServerConfig",
    "SessionExpired",
    "SignInRequired",
    "Subscription",
    "Task",
    "TaskStatus",
    "TextContent",
    "Token",
    "Tool",
    "ToolCallFailed",
    "ToolError",
    "ToolRegistry",
    "ToolStats",
    "UnknownContent",
    "UnsupportedVersion",
    "__version__",
    "close_all",
    "connect",
    "find_config",
    "load_config",
]


def connect(
    server: ServerSpec,
    *,
    timeout: float | None = None,
    protocol: str = "auto",
    client_info: Implementation | Mapping[str, Any] | None = None,
    stderr: Any = None,
    env: Mapping[str, str] | None = None,
    inherit_env: bool | None = None,
    cwd: str | None = None,
    name: str | None = None,
    handlers: Mapping[str, Handler] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    probe_timeout: float = 5.0,
    log_level: str | None = None,
    max_message_bytes: int | None = None,
    close_timeout: float | None = None,
    headers: Mapping[str, str] | None = None,
    auth: Any = None,
    token_store: Any = None,
    verify: bool | str | None = None,
    cert: str | tuple[str, str] | None = None,
    proxies: Mapping[str, str] | None = None,
    transport: str | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float | None = None,
    max_workers: int = 8,
    validate_output: bool = True,
    validate_arguments: bool = False,
    sampling: Handler | None = None,
    elicitation: Handler | None = None,
    roots: RootsOption = None,
    on_log: LogCallback | None = None,
    cache: bool = True,
    start: bool = True,
) -> Client:
    """Start or reach an MCP server and return a connected :class:`Client`.

    ``server`` is an argument list (run as is, never through a shell), a
    command string (split like a shell would, but not run by one), a URL
    (``https://host/mcp``: a remote server), or an ``mcpServers``-style entry:
    ``{"command": ..., "args": [...], "env": {...}, "cwd": ...}`` for a local
    server, ``{"url": ..., "headers": {...}}`` for a remote one. An entry
    takes a config file's fields (:func:`load_config`): ``envFile`` and
    ``cwd`` (relative to the current directory), ``timeout`` (the default of
    ``timeout``), ``disabled``, other tools' keys ignored; it may also hold
    ``name``, ``inherit_env``, ``auth`` and ``verify``. Nothing in an entry
    is ``${VAR}``-expanded: values built in Python are used as they are, so a
    URL or header that came from a user cannot pull a secret out of the
    environment. A whole config (``{"mcpServers": {...}}`` with one enabled
    server) is read as a file's content, ``${VAR}`` expanded.

    Options: ``timeout`` (seconds per request, default 60; ``math.inf`` for
    none), ``protocol`` ("auto", "legacy", "modern" or an exact version),
    ``client_info``, ``stderr`` (None/"log": to logging; "inherit"; "devnull";
    a callable taking each line; or a text file object), ``env`` (added to a
    minimal inherited environment), ``inherit_env=True`` (pass the whole
    environment), ``cwd``, ``name`` (shown in errors and thread names),
    ``handlers`` (``{"sampling/createMessage": fn, ...}`` for requests the
    server makes), ``probe_timeout`` (how long "auto" waits on a silent
    legacy server), ``log_level`` (ask the server for log messages),
    ``validate_output`` (check structured tool results against the tool's
    ``outputSchema`` from ``list_tools()``, default on: a mismatch raises
    ProtocolError),
    ``max_message_bytes`` (default 64 MiB), ``close_timeout`` (each step of the
    close ladder, default 2 s), ``validate_arguments`` (check arguments against
    a tool's ``inputSchema`` before sending, default off), ``cache`` (modern
    era: reuse results the server marked fresh with ``ttlMs``, default on),
    ``start=False`` (return the client built but not connected: call its
    ``connect()`` yourself, e.g. so that another thread can ``close()`` it while
    it connects).

    What the server may ask of the client: ``sampling=fn(params) -> dict``,
    ``elicitation=fn(params) -> dict`` (form and URL modes), ``roots=`` a list
    of paths or URIs (or a callable returning one); ``on_log(level, logger,
    data)`` gets its log messages (with no ``log_level``: what a legacy server
    logs by default; a modern one is asked for ``"info"`` and above). Each is declared as a capability, and runs
    on the client's callbacks thread, in both eras.

    Remote servers take ``headers``, ``auth`` (a ``requests`` auth object, or
    a string sent as a bearer token), ``token_store`` (where the OAuth object
    made for an entry's ``oauth`` settings keeps its tokens, instead of the
    token file: a :class:`RedisTokenStore` shared by a fleet of workers),
    ``verify``, ``cert``, ``proxies``,
    ``transport`` ("auto", "streamable-http" or "sse"; auto picks SSE for a
    path ending in ``/sse`` and falls back to it when Streamable HTTP is
    refused), ``connect_timeout``, ``read_timeout`` (between bytes; default
    none: request timeouts govern) and ``max_workers`` (concurrent requests).

    In Jupyter or IPython, a ``connect()`` run again by a later cell with the
    same ``name`` and server closes the client the earlier run made, so
    re-running a cell does not pile up servers (:mod:`mcpcall.notebook`).
    """
    import sys

    from .config.connect import _Expanded
    from .config.connect import connect as _connect
    from .config.entries import _bare_entry

    caller = sys._getframe(1)
    if isinstance(server, _Expanded):
        pass  # a ServerConfig's spec: checked and expanded already
    elif isinstance(server, Mapping) and ("mcpServers" in server or "servers" in server):
        configs = load_config(server)
        if len(configs) != 1:
            names = ", ".join(map(repr, configs))
            raise ConfigError(
                f"connect() takes one server, and this config has {len(configs)} enabled"
                + (f" ({names}): connect to one with mcpcall.load_config(config)[name].connect(), "
                   "or to all of them with mcpcall.ToolRegistry" if configs else " (disabled servers do not count)")
            )
        (only,) = configs.values()
        server = only.spec
        name = name if name is not None else only.name
        timeout = timeout if timeout is not None else only.timeout
    elif isinstance(server, Mapping):  # a bare entry: read as a config file's entry would be
        entry = _bare_entry(server, name)
        server = entry.spec
        timeout = timeout if timeout is not None else entry.timeout
    return _connect(
        server,
        caller,
        timeout=timeout,
        protocol=protocol,
        client_info=client_info,
        stderr=stderr,
        env=env,
        inherit_env=inherit_env,
        cwd=cwd,
        name=name,
        handlers=handlers,
        capabilities=capabilities,
        probe_timeout=probe_timeout,
        log_level=log_level,
        max_message_bytes=max_message_bytes,
        close_timeout=close_timeout,
        headers=headers,
        auth=auth,
        token_store=token_store,
        verify=verify,
        cert=cert,
        proxies=proxies,
        transport=transport,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_workers=max_workers,
        validate_output=validate_output,
        validate_arguments=validate_arguments,
        sampling=sampling,
        elicitation=elicitation,
        roots=roots,
        on_log=on_log,
        cache=cache,
        start=start,
    )
