"""mcpcall: a synchronous, thread-based MCP client. No event loop, works anywhere.

::

    import mcpcall

    with mcpcall.connect(["python", "-m", "mcpcall.demo_server"]) as client:
        for tool in client.list_tools():
            print(tool.name)
        print(client.call_tool("echo", {"message": "hi"}).text)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._version import __version__
from .client import LATEST_LEGACY_VERSION, LATEST_MODERN_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS, Client, Handler
from .config import ServerSpec, make_transport
from .dispatcher import RequestFuture
from .errors import (
    ConfigError,
    ConnectionClosed,
    ForkedClient,
    MCPError,
    ProtocolError,
    RequestTimeout,
    RPCError,
    ToolError,
    UnsupportedVersion,
)
from .types import CallToolResult, Implementation, Tool

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "CallToolResult",
    "Client",
    "ConfigError",
    "ConnectionClosed",
    "ForkedClient",
    "Handler",
    "Implementation",
    "MCPError",
    "ProtocolError",
    "RPCError",
    "RequestFuture",
    "RequestTimeout",
    "Tool",
    "ToolError",
    "UnsupportedVersion",
    "__version__",
    "connect",
]


def connect(
    server: ServerSpec,
    *,
    timeout: float = 60.0,
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
) -> Client:
    """Start or reach an MCP server and return a connected :class:`Client`.

    ``server`` is an argument list (run as is, never through a shell), a
    command string (split like a shell would, but not run by one), or an
    ``mcpServers``-style entry ``{"command": ..., "args": [...], "env": {...},
    "cwd": ...}``.

    Options: ``timeout`` (seconds per request, default 60; ``math.inf`` for
    none), ``protocol`` ("auto", "legacy", "modern" or an exact version),
    ``client_info``, ``stderr`` (None/"log": to logging; "inherit"; "devnull";
    a callable taking each line; or a text file object), ``env`` (added to a
    minimal inherited environment), ``inherit_env=True`` (pass the whole
    environment), ``cwd``, ``name`` (shown in errors and thread names),
    ``handlers`` (``{"sampling/createMessage": fn, ...}`` for requests the
    server makes), ``probe_timeout`` (how long "auto" waits on a silent
    legacy server), ``log_level`` (ask the server for log messages),
    ``max_message_bytes`` (default 64 MiB), ``close_timeout`` (each step of the
    close ladder, default 2 s).
    """
    transport = make_transport(
        server,
        name=name,
        env=env,
        inherit_env=inherit_env,
        cwd=cwd,
        stderr=stderr,
        max_message_bytes=max_message_bytes,
        close_timeout=close_timeout,
    )
    client = Client(
        transport,
        timeout=timeout,
        protocol=protocol,
        client_info=client_info,
        handlers=handlers,
        capabilities=capabilities,
        probe_timeout=probe_timeout,
        log_level=log_level,
    )
    return client.connect()
