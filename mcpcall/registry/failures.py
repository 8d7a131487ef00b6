"""What a model may read of a failed call: :func:`model_text` (an error's kind and a few fixed facts) and
:func:`failure_text` (one failed call, in one line), shared by the registry and the integrations.

Pure: functions of an error, no I/O. Never an error's own text, except the words a model may read on
purpose: the server's JSON-RPC error message (cut short) and mcpcall's own reasons for refusing the
model's arguments before sending them. A URL, a header or a stderr line never gets through.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout

from ..errors import (
    ConfigError,
    ConnectionClosed,
    ForkedClient,
    HTTPError,
    InvalidRequest,
    RequestTimeout,
    RPCError,
    SchemaValidationError,
    SessionExpired,
    SignInRequired,
    TokenStoreUnavailable,
)

__all__ = ["MAX_REASON_TEXT", "MAX_RPC_TEXT", "failure_text", "model_text", "one_line", "refused", "unreachable"]

MAX_RPC_TEXT = 500  # characters of a server's JSON-RPC error message a model may read
MAX_REASON_TEXT = 500  # characters of why the model's arguments were refused before sending


def one_line(text: str, limit: int = 300) -> str:
    """``text`` with its white space folded into single spaces, cut to ``limit`` characters (``…`` where cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unreachable(exc: BaseException) -> bool:
    """A remote server that could not be reached at all (refused, unresolvable, no TCP connection in time)."""
    return isinstance(exc, ConnectionClosed) and exc.reason.startswith("could not reach")


def model_text(exc: BaseException | None, started: bool = True) -> str:
    """What a model may read of an error: its kind and a few fixed facts.

    Never the error's own text: that can hold a URL with a key in its path,
    an HTTP body that echoes a header, or a stderr line. The whole error is
    logged on ``mcpcall.registry`` for whoever runs the application.
    """
    if exc is None:
        return "unknown error"
    if isinstance(exc, RequestTimeout):
        return "it did not answer in time"
    if isinstance(exc, SignInRequired):
        return ("it needs the user to sign in (OAuth) first: the application has to call auth.login(url) "
                "or run `mcpcall login URL`")
    if isinstance(exc, TokenStoreUnavailable):
        return "the shared store of its OAuth tokens did not answer; details are in the application's log"
    if isinstance(exc, ConnectionClosed):
        if exc.returncode is not None:
            return f"its process exited with code {exc.returncode}"
        if not started:
            return "it could not be started or reached; details are in the application's log"
        return "it could not be reached" if unreachable(exc) else "its connection closed"
    if isinstance(exc, SessionExpired):
        return "it no longer knew our session (it may have restarted); the next call starts a new session"
    if isinstance(exc, HTTPError):
        return f"it answered HTTP {exc.status}" if exc.status else "its HTTP endpoint failed"
    if isinstance(exc, ConfigError):
        return "its configuration is invalid; details are in the application's log"
    if isinstance(exc, ForkedClient):
        return "its client was made in another process"
    if isinstance(exc, SchemaValidationError):
        if exc.schema == "inputSchema":
            return f"its arguments do not match the tool's input schema at {exc.path}"
        return f"its result does not match the tool's output schema at {exc.path}"
    return f"{type(exc).__name__}; details are in the application's log"


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` refused the model's arguments before the call was sent (the model may mend them)."""
    return isinstance(exc, InvalidRequest) or (isinstance(exc, SchemaValidationError) and exc.schema == "inputSchema")


def failure_text(what: str, exc: BaseException, seconds: float | None = None) -> str:
    """The one line a model reads of a call of ``what`` that failed with ``exc``.

    ``what`` names the call as the model knows it (``"tool 'search' of server
    'github'"``); ``seconds`` is the time the call had (said of a timeout).
    A timeout says the call was cancelled (the server was told); a JSON-RPC
    error gives the server's message; arguments refused before sending say
    why; anything else gives :func:`model_text`.
    """
    if isinstance(exc, (RequestTimeout, FutureTimeout)):
        after = f" in {seconds:.3g} s" if seconds is not None else ""
        return f"{what} did not answer{after}; the call was cancelled"
    if isinstance(exc, RPCError):  # the server's own words about the call: the model may read them
        return f"{what} failed: {one_line(exc.message, MAX_RPC_TEXT)} (JSON-RPC error {exc.code})"
    if isinstance(exc, SchemaValidationError) and exc.schema == "inputSchema":  # validate_arguments refused them
        reason = one_line(exc.reason, MAX_REASON_TEXT)
        return f"{what} was not called: its arguments do not match its input schema at {exc.path}: {reason}"
    if isinstance(exc, InvalidRequest):  # refused before sending: mcpcall's own words about the model's arguments
        return f"{what} was not called: {one_line(str(exc), MAX_REASON_TEXT)}"
    return f"{what} failed: {model_text(exc)}"
