"""The errors mcpcall raises.

Every error derives from :class:`MCPError`; where a builtin exception means the
same thing, the error derives from it too, so ``except TimeoutError`` keeps
working::

    MCPError
    ├── ConfigError            (also ValueError)   a bad server spec or option
    ├── InvalidRequest         (also TypeError, ValueError) a request that cannot be sent as given
    ├── RequestTimeout         (also TimeoutError) no answer within the timeout
    ├── RPCError                                   the server answered with a JSON-RPC error
    │   ├── UnsupportedVersion                     -32022: the server wants another version
    │   ├── MethodNotFound                         -32601: the server does not offer that feature
    │   └── ResourceNotFound                       the resource asked for does not exist
    ├── ToolError                                  a tool result had isError: true
    ├── ProtocolError                              the peer broke the protocol
    │   └── SchemaValidationError  (also ValueError) a value does not match a tool's schema
    ├── ConnectionClosed       (also ConnectionError) the server went away
    ├── HTTPError                                  an HTTP reply that is not MCP (status, body excerpt)
    │   └── SessionExpired                         404 for our session: the next request starts a new one
    └── ForkedClient                               a client used in a forked child process

Foreign exceptions (``OSError``, ``json`` errors) are mapped to these at the
transport boundary, keeping the original as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ConfigError",
    "ConnectionClosed",
    "ForkedClient",
    "HTTPError",
    "InvalidRequest",
    "MCPError",
    "MethodNotFound",
    "ProtocolError",
    "RPCError",
    "RequestTimeout",
    "ResourceNotFound",
    "SchemaValidationError",
    "SessionExpired",
    "ToolError",
    "UnsupportedVersion",
]


class MCPError(Exception):
    """Root of every mcpcall error."""


class ConfigError(MCPError, ValueError):
    """The server spec or an option is wrong; nothing was started."""


class InvalidRequest(MCPError, TypeError, ValueError):
    """A request cannot be sent as given: arguments that are not JSON, a value no header can carry.

    Nothing was sent; the cause (from ``json`` or the header rules) is ``__cause__``.
    """


class RequestTimeout(MCPError, TimeoutError):
    """A request got no answer in time. The server was told to cancel it."""

    def __init__(self, message: str, *, method: str = "", timeout: float = 0.0) -> None:
        super().__init__(message)
        self.method = method
        self.timeout = timeout


class RPCError(MCPError):
    """The server answered a request with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None, *, server: str = "", method: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.server = server
        self.method = method
        where = f"server {server!r}" if server else "server"
        call = f" to {method}" if method else ""
        super().__init__(f"{where} answered{call} with error {code}: {message}")


class UnsupportedVersion(RPCError):
    """Error -32022: the server does not speak the requested protocol version."""

    @property
    def supported(self) -> Sequence[str]:
        """The versions the server says it supports (may be empty)."""
        data = self.data if isinstance(self.data, dict) else {}
        versions = data.get("supported")
        return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else []


class MethodNotFound(RPCError):
    """Error -32601: the server does not offer what was asked (resources, prompts, completions, ...).

    ``capability`` is the server capability the feature belongs to (``"resources"``; may be empty),
    ``declared`` whether the server's capabilities name it (False: the server said it does not offer it).
    """

    def __init__(self, code: int, message: str, data: Any = None, *, server: str = "", method: str = "",
                 capability: str = "", declared: bool = False) -> None:
        super().__init__(code, message, data, server=server, method=method)
        self.capability = capability
        self.declared = declared
        where = f"server {server!r}" if server else "the server"
        if capability and not declared:
            text = (f"{where} does not offer {capability} (its capabilities have no {capability!r}; "
                    f"{method} answered error {code}: {message}); check client.capabilities before asking")
        elif capability:
            text = (f"{where} declares {capability!r} but does not know {method} (error {code}: {message}); "
                    "the server does not implement what it declares")
        else:
            text = f"{where} does not know {method or 'the method'} (error {code}: {message})"
        self.args = (text,)


class ResourceNotFound(RPCError):
    """The server does not know the resource (-32002, or -32602 to ``resources/read``); ``uri`` names it."""

    def __init__(self, code: int, message: str, data: Any = None, *, server: str = "", method: str = "", uri: str = "") -> None:
        super().__init__(code, message, data, server=server, method=method)
        self.uri = uri


class ToolError(MCPError):
    """A tool ran and reported failure (``isError: true``); raised by ``raise_for_error()``."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class ProtocolError(MCPError):
    """The peer sent something the protocol does not allow (bad JSON-RPC, oversize message, …)."""


class SchemaValidationError(ProtocolError, ValueError):
    """A value does not match a tool's schema: structured content against its ``outputSchema``,
    or (with ``validate_arguments=True``) arguments against its ``inputSchema``.

    ``path`` is the JSON path of the offending value (``$.items[2].name``),
    ``reason`` what is wrong there, ``tool`` and ``server`` where it happened.
    """

    def __init__(self, message: str, *, path: str = "$", reason: str = "", tool: str = "", server: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason
        self.tool = tool
        self.server = server


class ConnectionClosed(MCPError, ConnectionError):
    """The server is gone: its process exited or its connection dropped.

    ``returncode`` and ``stderr_tail`` are set for stdio servers when known.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: Sequence[str] = (),
    ) -> None:
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)
        detail = message
        if self.stderr_tail:
            detail += "\nlast lines of its stderr:\n  " + "\n  ".join(self.stderr_tail)
        super().__init__(detail)
        self.reason = message


class ForkedClient(MCPError):
    """A client (and its pipes and threads) was created before ``os.fork()``.

    Its server and session belong to the parent process; connect a new client
    in the child instead.
    """


class HTTPError(MCPError):
    """The server answered with an HTTP status that carries no MCP answer.

    ``status`` is the HTTP status code; ``body`` an excerpt of what came back.
    """

    def __init__(self, message: str, *, status: int = 0, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class SessionExpired(HTTPError):
    """The server no longer knows our session (HTTP 404); the next request opens a new one."""
