"""What the server asks of the client and tells it: handlers, roots, log messages, notifications.

Requests the server makes (legacy: over the wire; modern: as ``inputRequests``
of a multi round-trip request) are answered by the same callables:
``sampling``, ``elicitation``, ``roots`` and any ``handlers={method: fn}``.
They and every user callback run on the client's callbacks thread; the
reader and worker threads only hand them over. Capabilities are declared from
what was given, in both eras.

Notifications are routed here from the dispatcher: log messages go to
``on_log`` and to the ``mcpcall.server.<name>`` logger; change notifications
go to :attr:`Inbound.changed` (the session's cache, tool catalog and
subscriptions); everything goes to the listeners added with
``client.on_notification``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Union

from .. import jsonrpc
from ..callbacks import CallbackRunner
from ..dispatcher import Dispatcher
from ..errors import ConfigError, ProtocolError, RPCError

__all__ = ["CHANGE_NOTIFICATIONS", "Handler", "Inbound", "LogCallback", "RootsOption", "root_entries"]

log = logging.getLogger("mcpcall.client")

#: A handler for a request the server makes of the client: params in, result out.
Handler = Callable[[dict[str, Any]], dict[str, Any]]
#: ``on_log(level, logger, data)`` for each ``notifications/message``.
LogCallback = Callable[[str, Union[str, None], Any], None]
#: Roots: paths, ``file://`` URIs, ``{"uri": ..., "name": ...}`` dicts, or a callable returning them.
RootsOption = Union[Sequence[Union[str, "os.PathLike[str]", Mapping[str, Any]]], Callable[[], Sequence[Any]], None]

SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"
ROOTS = "roots/list"

#: Notifications that say something the client may have cached changed.
CHANGE_NOTIFICATIONS = frozenset({
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    "notifications/subscriptions/acknowledged",
    "notifications/tasks",  # the tasks extension (2026-07-28)
    "notifications/tasks/status",  # 2025-11-25 tasks
})

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


_RANK = {name: rank for rank, name in enumerate(_LOG_LEVELS)}


def root_entries(roots: Sequence[Any]) -> list[dict[str, Any]]:
    """``roots`` as wire entries: a path becomes a ``file://`` URI (absolute), a URI stays as it is."""
    entries: list[dict[str, Any]] = []
    for item in roots:
        if isinstance(item, Mapping):
            if not isinstance(item.get("uri"), str):
                raise ConfigError(f"a root given as a dict needs a string 'uri', not {item!r}")
            _check_root(item["uri"])
            entries.append(dict(item))
        elif isinstance(item, str) and "://" in item:
            _check_root(item)
            entries.append({"uri": item})
        elif isinstance(item, (str, os.PathLike)):
            path = Path(item).expanduser().resolve()
            entries.append({"uri": path.as_uri(), "name": path.name or str(path)})
        else:
            raise ConfigError(f"a root must be a path, a URI or a dict with a 'uri', not a {type(item).__name__}")
    return entries


class NoHandler(RPCError):
    """The server asked for something no callable was given for (sampling, elicitation, roots, ...)."""

    def __init__(self, method: str, server: str) -> None:
        super().__init__(jsonrpc.METHOD_NOT_FOUND, f"the client has no handler for {method}", server=server, method=method)
        text = (f"server {server!r} asked the client for {method}, which this client has no handler for "
                "(give connect() sampling=, elicitation=, roots= or handlers={method: fn})")
        self.args = (text,)


def _check_root(uri: str) -> None:
    """Roots are ``file://`` URIs (the spec's MUST; a server may refuse the whole list otherwise)."""
    if not uri.lower().startswith("file://"):
        raise ConfigError(f"a root must be a path or a file:// URI, not {uri!r}")


def with_defaults(result: dict[str, Any], schema: Any) -> dict[str, Any]:
    """An accepted form elicitation with the schema's defaults for the fields left out (SEP-1034)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if result.get("action") != "accept" or not isinstance(props, dict):
        return result
    content = result.get("content")
    content = dict(content) if isinstance(content, dict) else {}
    for name, prop in props.items():
        if name not in content and isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
    return {**result, "content": content}


class Inbound:
    """Answers the server's requests and routes its notifications, for one client."""

    def __init__(
        self,
        *,
        name: str,
        dispatcher: Dispatcher,
        callbacks: CallbackRunner,
        handlers: Mapping[str, Handler] | None = None,
        sampling: Handler | None = None,
        elicitation: Handler | None = None,
        roots: RootsOption = None,
        on_log: LogCallback | None = None,
    ) -> None:
        self.name = name
        self.dispatcher = dispatcher
        self.callbacks = callbacks
        self.handlers: dict[str, Handler] = dict(handlers or {})
        if sampling is not None:
            self.handlers[SAMPLING] = sampling
        if elicitation is not None:
            self.handlers[ELICITATION] = elicitation
        self._roots: RootsOption = None
        self._roots_lock = threading.Lock()
        if roots is not None:
            self.set_roots(roots)
        self.on_log = on_log
        #: Messages below this level (an MCP level name) are dropped; None: all are passed on.
        self.log_level: str | None = None
        self.logger = logging.getLogger(f"mcpcall.server.{name}")
        self._listeners: dict[str, list[Callable[[dict[str, Any]], None]]] = {}
        #: ``changed(method, params)``: a change notification arrived (reader thread; mcpcall's own code only).
        self.changed: Callable[[str, dict[str, Any]], None] | None = None

    # -- capabilities ------------------------------------------------------------------------

    def capabilities(self, explicit: Mapping[str, Any] | None, *, extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the client declares: one capability per answer it can give, then ``explicit`` on top."""
        caps: dict[str, Any] = {}
        if SAMPLING in self.handlers:
            caps["sampling"] = {}
        if ELICITATION in self.handlers:
            caps["elicitation"] = {"form": {}, "url": {}}
        if ROOTS in self.handlers or self._roots is not None:
            caps["roots"] = {"listChanged": True}
        if extensions:
            caps["extensions"] = {**caps.get("extensions", {}), **extensions}
        caps.update(explicit or {})
        return caps

    # -- roots ---------------------------------------------------------------------------------

    def set_roots(self, roots: RootsOption) -> None:
        """Replace the roots (checked now when given as a list)."""
        if roots is not None and not callable(roots):
            root_entries(roots)  # a bad entry fails here, not when the server asks
        with self._roots_lock:
            self._roots = roots

    def _list_roots(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._roots_lock:
            roots = self._roots
        items = roots() if callable(roots) else (roots or [])
        return {"roots": root_entries(items)}

    # -- requests the server makes (callbacks thread) ---------------------------------------

    def set_handler(self, method: str, handler: Handler | None) -> None:
        """Answer ``method`` requests with ``handler`` (None: stop answering them)."""
        if handler is None:
            self.handlers.pop(method, None)
        else:
            self.handlers[method] = handler

    def knows(self, method: str) -> bool:
        return method in self.handlers or (method == ROOTS and self._roots is not None)

    def run_handler(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to the server's ``method`` request, from the callable given for it."""
        handler = self.handlers.get(method)
        if handler is None and method == ROOTS and self._roots is not None:
            handler = self._list_roots
        if handler is None:
            raise NoHandler(method, self.name)
        result = handler(params)
        if not isinstance(result, dict):
            raise ProtocolError(f"the handler for {method} returned {type(result).__name__}, not a dict")
        if method == ELICITATION and params.get("mode", "form") == "form":
            result = with_defaults(result, params.get("requestedSchema"))
        return result

    def on_request(self, message: dict[str, Any]) -> None:
        """A request from the server (reader thread): answered on the callbacks thread."""
        method = message["method"]
        if not self.knows(method):
            self.dispatcher.reply(jsonrpc.error_response(message["id"], jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        self.callbacks.submit(self._answer, message)

    def _answer(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        try:
            result = self.run_handler(message["method"], params if isinstance(params, dict) else {})
            reply = jsonrpc.result_response(message["id"], result)
        except RPCError as exc:
            reply = jsonrpc.error_response(message["id"], exc.code, exc.message, exc.data)
        except BaseException as exc:  # user code may raise anything; the server still gets an answer
            # The details stay here (they may hold a secret): the server learns only that it failed.
            log.exception("handler for %s failed", message["method"])
            reply = jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR,
                                           f"the client's handler for {message['method']} failed ({type(exc).__name__})")
        self.dispatcher.reply(reply)

    # -- notifications (reader thread: hand over, run nothing of the user's here) -------------

    def add_listener(self, method: str, callback: Callable[[dict[str, Any]], None]) -> None:
        """Run ``callback(params)`` on the callbacks thread for each ``method`` notification ("*": all)."""
        self._listeners.setdefault(method, []).append(callback)

    def on_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/message":
            self.callbacks.submit(self._log_message, params)
        elif method in CHANGE_NOTIFICATIONS and self.changed is not None:
            try:
                self.changed(method, params)
            except Exception:  # noqa: BLE001 - a bad notification must not end the read loop
                self.dispatcher.log(logging.DEBUG, "server %r: could not handle %s", self.name, method)
        for callback in self._listeners.get(method, []) + self._listeners.get("*", []):
            self.callbacks.submit(callback, params)

    def _log_message(self, params: dict[str, Any]) -> None:
        """On the callbacks thread: a server log message to ``on_log`` and to the server's logger."""
        name = params.get("level")
        level = name if isinstance(name, str) else "info"
        if self.log_level is not None and _RANK.get(level, 1) < _RANK.get(self.log_level, 0):
            return
        logger = params.get("logger")
        logger = logger if isinstance(logger, str) and logger else None
        data = params.get("data")
        if self.on_log is not None:
            try:
                self.on_log(level, logger, data)
            except Exception:
                log.exception("on_log callback failed")
        number = _LOG_LEVELS.get(level, logging.INFO)
        if logger:
            self.logger.log(number, "[%s] %s", logger, data)
        else:
            self.logger.log(number, "%s", data)
