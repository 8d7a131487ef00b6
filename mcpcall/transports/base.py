"""What every transport offers, and what it is handed.

A transport turns messages into bytes and back. It is started with a
:class:`Receiver` (the dispatcher) and calls it from its own reader thread(s):
``on_message`` for each decoded message, ``on_bad_message`` when something
unreadable arrived, ``on_close`` once when the connection is gone for good.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Protocol

from ..callbacks import as_text
from ..errors import MCPError
from ..jsonrpc import RequestId

log = logging.getLogger("mcpcall.transport")

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Receiver", "Transport", "caller_waits", "waiting_caller"]

#: The largest message a transport accepts (a stdio line, an HTTP body, an SSE event) unless told otherwise.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


_waits = threading.local()


class _CallerWaits:
    """``with caller_waits():`` around sending a request the thread then blocks on, alone (see :func:`caller_waits`)."""

    __slots__ = ("waits",)

    def __init__(self, waits: bool) -> None:
        self.waits = waits

    def __enter__(self) -> None:
        stack = getattr(_waits, "stack", None)
        if stack is None:
            stack = _waits.stack = []
        stack.append(self.waits)

    def __exit__(self, *exc: object) -> None:
        _waits.stack.pop()


_WAITS = _CallerWaits(True)
_DOES_NOT_WAIT = _CallerWaits(False)


def caller_waits(waits: bool = True) -> _CallerWaits:
    """Within: a request this thread sends is one it will block on until it ends, and nothing else waits for it.

    A transport may then run that request's I/O on this thread instead of
    handing it to a worker (HTTP: no thread hop), as long as its deadline,
    a cancel and ``close()`` still stop it from other threads.
    ``caller_waits(False)``: within, not so (again), as for a request sent
    while such a request is being run.
    """
    return _WAITS if waits else _DOES_NOT_WAIT


def waiting_caller() -> bool:
    """True inside :func:`caller_waits` on this thread (the innermost one)."""
    stack = getattr(_waits, "stack", None)
    return bool(stack[-1]) if stack else False


class Receiver(Protocol):
    """The side that consumes what a transport reads (the dispatcher)."""

    def on_message(self, message: dict[str, Any]) -> None:
        """A decoded JSON object arrived (not yet checked for JSON-RPC shape)."""

    def on_bad_message(self, error: BaseException, request_id: RequestId | None) -> None:
        """Something unusable arrived; ``request_id`` names the request it answered, if known."""

    def on_warning(self, text: str, kind: str = "") -> None:
        """Something worth a warning happened; logged away from the I/O thread that saw it.

        ``kind`` names the fault: only the first few of each kind are warnings (the
        receiver keeps that count, for every transport), the rest debug records.
        """

    def log(self, level: int, fmt: str, *args: Any, logger: str = "") -> None:
        """Log a record away from the I/O thread that saw it (logging handlers are user code).

        ``logger`` names the logger (default: the receiver's own).
        """

    def defer(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on the client's callbacks thread (user code); False once closed."""

    def on_close(self, error: BaseException) -> None:
        """The connection ended; ``error`` (a ConnectionClosed) says why. Called once."""


class Transport:
    """Base class: the small contract the dispatcher relies on.

    ``name`` is the server's display name, used in thread names and errors.
    """

    name: str = "server"
    #: Identifies the server for remembering its protocol era (argv or origin); None: do not remember.
    era_cache_key: Any = None
    #: True once the server forgot our session (legacy HTTP); the client then starts a new one.
    session_lost: bool = False
    #: True for a transport that predates the modern era (the client goes straight to initialize).
    legacy_only: bool = False
    #: True when a request sent within :func:`caller_waits` may run its I/O on the sending thread (HTTP); a
    #: transport that never asks :func:`waiting_caller` says False, and callers then skip the block.
    uses_caller_waits: bool = True
    _receiver: Receiver | None = None
    #: The logger a transport's records go to.
    logger_name = "mcpcall.transport"

    def _log(self, level: int, fmt: str, *args: Any) -> None:
        """Log from one of the transport's own threads: through the receiver, off that thread."""
        receiver = self._receiver
        if receiver is not None:
            receiver.log(level, fmt, *args, logger=self.logger_name)
        else:
            logging.getLogger(self.logger_name).log(level, fmt, *as_text(args))

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        """Open the connection and begin delivering incoming messages to ``receiver``.

        Waits at most ``timeout`` seconds (None: the transport's own limits).
        """
        raise NotImplementedError

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        """Queue one message for the peer without blocking on the peer past ``timeout``.

        Requests never wait here. A notification or a response may wait for the
        peer's acknowledgement (HTTP answers every POST) for at most ``timeout``
        seconds (None: the transport's own bound). Raises
        :class:`~mcpcall.errors.ConnectionClosed` when the connection is gone.
        """
        raise NotImplementedError

    def cancel(self, request_id: RequestId, reason: str, *, notify: bool = True) -> None:
        """Stop working on ``request_id``: let go of its I/O and, with ``notify``, tell the peer.

        Runs on the scheduler thread, which every client's deadlines share: it
        must never block. It queues a notice or shuts a socket, and leaves the
        rest to the thread that owns the request. ``notify=False`` (a probe the
        server may not know) sends nothing, but a transport still frees what the
        request holds.
        """
        if not notify:
            return
        params = {"requestId": request_id, "reason": reason}
        try:
            self.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        except MCPError as exc:  # the peer is gone; nothing left to cancel
            self._log(logging.DEBUG, "server %r: cancel of %r not sent: %s", self.name, request_id, str(exc))

    def read_for(self, future: Any, deadline: float) -> bool:
        """Read on the caller's thread until ``future`` is done or ``deadline`` (monotonic) passes, if this
        transport can: the caller is the only one waiting, and no thread hop is needed for its answer.

        False when it did not (the transport's own threads read, as always); either way the caller then
        waits for ``future`` as before. The base transport never does.
        """
        return False

    def reading(self) -> None:
        """Someone other than a caller reading for itself waits for an answer: the transport's threads read."""

    def skipped(self) -> int:
        """How many lines the peer has written so far that were not JSON-RPC messages (stdio), and were skipped."""
        return 0

    def skipped_note(self, since: int = 0, request_id: Any = None) -> str | None:
        """Those of :meth:`skipped` after the first ``since``, in a clause for an error about silence; None if none.

        What a peer wrote instead of answering explains a timeout: a server that
        prints a banner or logs to stdout, or a program that is no MCP server.
        ``request_id``: the request whose silence it explains, if one does; a
        transport that knows what each request waited for (HTTP: its own connect)
        says only that request's (and nothing without one).
        """
        return None

    def negotiated(self, era: str, version: str) -> None:
        """The client settled on a protocol era and version (HTTP uses it for headers)."""

    def start_session(self, timeout: float) -> None:
        """Before the ``initialize`` of a new session (the server forgot ours: :attr:`session_lost`): what must come
        first, within ``timeout`` seconds. HTTP+SSE opens a new stream and waits for its endpoint; others need nothing."""

    def quiet_since(self, started: float) -> None:
        """What the server logged since ``started`` (monotonic) was noise about a probe: keep little of it."""

    def fallback(self) -> Transport | None:
        """Another transport to try for the same server when this one is refused (HTTP+SSE), or None."""
        return None

    def renewed(self) -> Transport | None:
        """A new, unstarted transport like this one, to start over after a sign-in; None: this one goes on.

        Only a transport that cannot go on after its start failed needs one (HTTP+SSE closes itself).
        """
        return None

    def close(self) -> None:
        """End the connection and every thread the transport owns; idempotent."""
        raise NotImplementedError

    def terminate(self) -> None:
        """End at once, skipping the graceful steps (a connect that failed); idempotent.

        A stdio server is signalled without first waiting for it to exit on
        its own; other transports close as usual.
        """
        self.close()
