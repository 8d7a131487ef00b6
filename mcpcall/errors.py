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
    │   ├── ResourceNotFound                       the resource asked for does not exist
    │   └── NoHandler                              the server asked for what the client has no handler for
    ├── ToolError                                  a tool result had isError: true
    │   └── ToolCallFailed                         a framework's tool call failed (mcpcall.integrations)
    ├── ProtocolError                              the peer broke the protocol
    │   ├── SchemaValidationError  (also ValueError) a value does not match a tool's schema
    │   ├── NestedTooDeep                          a tool definition nests too deep
    │   ├── BadHandlerAnswer                       a handler's answer the protocol does not allow
    │   └── TokenResponseError     (also ValueError) a token endpoint's answer is no token response
    ├── ConnectionClosed       (also ConnectionError) the server went away
    ├── HTTPError                                  an HTTP reply that is not MCP (status, body excerpt)
    │   └── SessionExpired                         404 for our session: the next request starts a new one
    ├── ForkedClient                               a client used in a forked child process
    ├── InsecureTokenFile      (also PermissionError) a token file others may read or write
    ├── RefreshTimeout         (also TimeoutError) another thread's token refresh took too long
    │   └── RefreshAborted                         the waiter's own request ended meanwhile
    └── AuthError                                  OAuth discovery or authorization failed
        ├── SignInRequired                         a person must sign in, and this thread may not ask
        ├── RedirectTimeout    (also TimeoutError) the browser did not come back in time
        ├── CryptoUnavailable  (also ImportError)  signing needs PyJWT with cryptography
        ├── InvalidKey         (also ValueError)   a key that cannot be loaded or does not fit
        ├── NoResourceMetadata                     the server's 401 is no OAuth challenge mcpcall can answer
        ├── TokenEndpointError                     the token endpoint refused (status, OAuth error code)
        ├── TokenStoreUnavailable                  the shared token store (Redis) did not answer
        └── RequestEnded       (also Abandoned)    a step stopped because its request ended

    Abandoned (an Exception, not an MCPError): a shared run's leader stopped for a reason of its own;
    its followers do the work themselves. Only RequestEnded reaches a caller.

Every class is defined here; the modules that first defined them (``mcpcall.auth.discovery``,
``mcpcall.auth.flow``, ``mcpcall.auth.tokens``, ``mcpcall.auth.jose``, ``mcpcall.auth.redirect``,
``mcpcall.types.tools``, ``mcpcall.session.inbound``) re-export them, and ``mcpcall.X`` stays as it was.
Private exceptions that never leave a module (``_OverBudget``, ``_StaleCursor``, ``CauseSummary``,
the CLI's ``OutputClosed``) and the CLI's ``UsageError`` stay where they are used.

This module imports nothing of mcpcall: it is the ground floor every layer may import.

Foreign exceptions (``OSError``, ``json`` errors) are mapped to these at the
transport boundary, keeping the original as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AuthError",
    "BadHandlerAnswer",
    "ConfigError",
    "ConnectionClosed",
    "CryptoUnavailable",
    "ForkedClient",
    "HTTPError",
    "InsecureTokenFile",
    "InvalidKey",
    "InvalidRequest",
    "MCPError",
    "MethodNotFound",
    "NestedTooDeep",
    "NoHandler",
    "NoResourceMetadata",
    "ProtocolError",
    "RPCError",
    "RedirectTimeout",
    "RefreshAborted",
    "RefreshTimeout",
    "RequestEnded",
    "RequestTimeout",
    "ResourceNotFound",
    "SchemaValidationError",
    "SessionExpired",
    "SignInRequired",
    "TokenEndpointError",
    "TokenResponseError",
    "TokenStoreUnavailable",
    "ToolCallFailed",
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
    """A request got no answer in time. The server was told to cancel it.

    ``note``: what explains the silence, when the transport knew (a TCP connect, TLS
    handshake or name lookup of that request that had not finished; lines a stdio
    server wrote instead of answering), as the message says it; "" otherwise.
    """

    def __init__(self, message: str, *, method: str = "", timeout: float = 0.0, note: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.timeout = timeout
        self.note = note


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


class ToolCallFailed(ToolError):
    """A tool call made for an agent framework failed (:mod:`mcpcall.integrations`).

    Its message is what the model may read: the tool's own error text
    (``isError``), the server's JSON-RPC error message, or a fixed phrase for a
    timeout or a server that is gone; never a URL, a header or a stderr line.
    ``result`` is the :class:`~mcpcall.types.CallToolResult` when the tool
    itself reported the failure; the error behind it is ``__cause__``.
    """


class ProtocolError(MCPError):
    """The peer sent something the protocol does not allow (bad JSON-RPC, oversize message, …)."""


class SchemaValidationError(ProtocolError, ValueError):
    """A value does not match a tool's schema: structured content against its ``outputSchema``,
    or (with ``validate_arguments=True``) arguments against its ``inputSchema``.

    ``path`` is the JSON path of the offending value (``$.items[2].name``),
    ``reason`` what is wrong there, ``tool`` and ``server`` where it happened,
    ``schema`` which of the two (``"inputSchema"`` or ``"outputSchema"``).
    """

    def __init__(self, message: str, *, path: str = "$", reason: str = "", tool: str = "", server: str = "",
                 schema: str = "") -> None:
        super().__init__(message)
        self.schema = schema
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


# -- raised by the session, the types and auth (re-exported where they were first defined) ----------


class NestedTooDeep(ProtocolError):
    """A tool definition nests dicts and lists deeper than :data:`~mcpcall.schema.MAX_DEPTH`."""


class NoHandler(RPCError):
    """The server asked for something no callable was given for (sampling, elicitation, roots, ...)."""

    def __init__(self, method: str, server: str) -> None:
        super().__init__(-32601, f"the client has no handler for {method}", server=server, method=method)
        text = (f"server {server!r} asked the client for {method}, which this client has no handler for "
                "(give connect() sampling=, elicitation=, roots= or handlers={method: fn})")
        self.args = (text,)


class BadHandlerAnswer(ProtocolError):
    """A handler (sampling, elicitation, roots, ...) returned an answer the protocol does not allow.

    Nothing of it is sent: the server gets a JSON-RPC error (legacy) or the call fails (modern).
    ``reason`` says what is wrong with the answer, without repeating its values.
    """

    def __init__(self, method: str, reason: str, server: str) -> None:
        super().__init__(f"the client's handler for {method} (server {server!r}) gave an invalid answer: {reason}; "
                         "fix what the handler returns")
        self.method = method
        self.reason = reason
        self.server = server


class TokenResponseError(ProtocolError, ValueError):
    """The token endpoint's answer is not a usable token response (the message never holds a token)."""


class InsecureTokenFile(MCPError, PermissionError):
    """A token file is readable or writable by other users, or is not a regular file."""


class RefreshTimeout(MCPError, TimeoutError):
    """Another thread's refresh for the same key did not finish within the timeout."""


class RefreshAborted(RefreshTimeout):
    """The waiter's own request ended (its deadline, a cancel, ``close()``) while another thread's run went on."""


class AuthError(MCPError):
    """OAuth discovery or authorization failed: a bad URL, or metadata the client must not use."""


class SignInRequired(AuthError):
    """Authorization needs a person (a browser tab, a prompt), and this thread may not ask one.

    mcpcall asks a person only in ``OAuth.login()``, on the calling thread; ``connect()``
    does that by itself when it meets this error on its own thread.
    """


class RedirectTimeout(AuthError, TimeoutError):
    """The browser did not come back to the loopback listener in time."""


class CryptoUnavailable(AuthError, ImportError):
    """Signing needs PyJWT with cryptography: ``pip install 'mcpcall[auth]'``."""


class InvalidKey(AuthError, ValueError):
    """A key that cannot be loaded, or an algorithm that does not fit it (the message shows no key material)."""


class NoResourceMetadata(AuthError):
    """The server published no protected resource metadata: its 401 is not an OAuth challenge mcpcall can answer."""


class TokenEndpointError(AuthError):
    """The token endpoint refused a request; ``status`` is the HTTP status, ``error`` the OAuth error code."""

    def __init__(self, message: str, *, status: int, error: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


class TokenStoreUnavailable(AuthError):
    """A shared token store (:class:`~mcpcall.auth.redis_store.RedisTokenStore`) could not be read or written.

    The message names the store (never its password) and the cause; no token can be read, stored
    or refreshed until the store answers again.
    """


class Abandoned(Exception):
    """Raised by a leader that stopped for a reason of its own (its request ended): its followers run ``fn`` themselves."""


class RequestEnded(AuthError, Abandoned):
    """A step made inside a request was stopped because that request ended (its deadline, a cancel, ``close()``).

    Not a failure of the step: threads waiting for its outcome do it themselves.
    """
