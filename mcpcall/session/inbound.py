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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable, Union

from .. import jsonrpc
from ..callbacks import CallbackRunner, log_exception
from ..dispatcher import Dispatcher
from ..errors import BadHandlerAnswer, ConfigError, NoHandler, ProtocolError, RPCError

__all__ = ["CHANGE_NOTIFICATIONS", "MAX_WAITING_REQUESTS", "BadHandlerAnswer", "Handler", "Inbound", "LogCallback", "RootsOption",
           "check_input_required", "input_requests", "root_entries", "root_items"]

log = logging.getLogger("mcpcall.client")

#: A handler for a request the server makes of the client: params in, result out.
Handler = Callable[[dict[str, Any]], dict[str, Any]]
#: ``on_log(level, logger, data)`` for each ``notifications/message``.
LogCallback = Callable[[str, Union[str, None], Any], None]
#: One root: a path, a ``file://`` URI, or a ``{"uri": ..., "name": ...}`` dict.
Root = Union[str, "os.PathLike[str]", Mapping[str, Any]]
#: Roots: one root, an iterable of roots, or a callable returning either (asked each time the server lists them).
RootsOption = Union[Root, Iterable[Root], Callable[[], Union[Root, Iterable[Root]]], None]

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

#: Notifications of which only the latest matters to a listener (one queued per listener and kind).
_LIST_CHANGED = frozenset({
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
})

#: Requests of the server that may wait for the callbacks thread at a time; more are refused at once.
MAX_WAITING_REQUESTS = 256


def root_items(roots: Any) -> list[Any]:
    """``roots`` as a list of single roots: a str, path or dict is ONE root, never split into its characters.

    Anything else must be an iterable of roots (not bytes, not a number): else :class:`ConfigError`.
    """
    if isinstance(roots, (str, os.PathLike, Mapping)):
        return [roots]
    if isinstance(roots, (bytes, bytearray, memoryview)) or not isinstance(roots, Iterable):
        raise ConfigError(
            f"roots must be a path, a file:// URI, a dict with a 'uri', or a list of them, not a {type(roots).__name__}"
        )
    return list(roots)


def root_entries(roots: Any) -> list[dict[str, Any]]:
    """``roots`` (one root or an iterable of them) as wire entries: a path becomes a ``file://`` URI
    (absolute), a URI stays as it is."""
    entries: list[dict[str, Any]] = []
    for item in root_items(roots):
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


_ELICIT_ACTIONS = ("accept", "decline", "cancel")
_ROLES = ("user", "assistant")


def _answer_problem(method: str, result: Any) -> str | None:
    """What is wrong with a handler's answer to ``method`` (None: nothing that mcpcall checks)."""
    if not isinstance(result, Mapping):
        return f"it returned a {type(result).__name__}, not a dict"
    if method == ELICITATION:
        action = result.get("action")
        if action not in _ELICIT_ACTIONS:
            return f"'action' must be one of {', '.join(_ELICIT_ACTIONS)} (got a {type(action).__name__} that is none of them)"
        content = result.get("content")
        if content is not None and action != "accept":
            return f"'content' goes only with the action 'accept', not {action!r}"
        if content is not None and not isinstance(content, Mapping):
            return f"'content' must be a dict of field values, not a {type(content).__name__}"
    elif method == SAMPLING:
        missing = [key for key in ("role", "content", "model") if key not in result]
        if missing:
            return f"a sampling result needs {', '.join(repr(k) for k in missing)} (role, content, model)"
        if result["role"] not in _ROLES:
            return "'role' must be 'user' or 'assistant'"
        if not isinstance(result["content"], (Mapping, list)):
            return f"'content' must be a content block (dict) or a list of them, not a {type(result['content']).__name__}"
        if not isinstance(result["model"], str):
            return f"'model' must be a string, not a {type(result['model']).__name__}"
    return None


def input_requests(server: str, method: str, value: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """A modern ``inputRequests`` map (``{key: {method, params}}``) as ``(key, method, params)``,
    each shape the server controls checked: anything else is a :class:`ProtocolError` for that call
    (the server's mistake; no handler sees it). None (absent) is no requests."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise ProtocolError(f"server {server!r} answered {method} with inputRequests that is a "
                            f"{type(value).__name__}, not an object")
    parsed: list[tuple[str, str, dict[str, Any]]] = []
    for key, request in value.items():
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise ProtocolError(f"server {server!r} sent a malformed input request {key!r} in {method}: "
                                "not an object with a string 'method'")
        params = request.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ProtocolError(f"server {server!r} sent an input request {key!r} ({request['method']}) in {method} "
                                f"whose params is a {type(params).__name__}, not an object")
        parsed.append((key, request["method"], params))
    return parsed


def check_input_required(server: str, method: str, result: dict[str, Any]) -> None:
    """An ``input_required`` result: at least one of ``inputRequests`` and ``requestState``, the
    state a string (the spec's InputRequiredResult); else a :class:`ProtocolError`."""
    state = result.get("requestState")
    if state is not None and not isinstance(state, str):
        raise ProtocolError(f"server {server!r} answered {method} with a requestState that is a "
                            f"{type(state).__name__}, not a string")
    if result.get("inputRequests") is None and state is None:
        raise ProtocolError(f"server {server!r} answered {method} with input_required but neither "
                            "inputRequests nor requestState")


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
        self._waiting = 0  # server requests queued for the callbacks thread, not yet taken
        self._waiting_lock = threading.Lock()
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
        """Replace the roots: one path / URI / dict, an iterable of them, or a callable returning either.

        A single string is one root (``"/tmp"``), never split into characters. Roots
        given as values are checked (and copied) now: a bad one is a :class:`ConfigError`
        here, not when the server asks. A callable is called each time the server
        lists the roots; a bad answer from it is an error to the server and a warning.
        """
        if roots is not None and not callable(roots):
            items = root_items(roots)
            root_entries(items)  # a bad entry fails here, not when the server asks
            roots = items  # an iterator would be used up by the check: keep the list
        with self._roots_lock:
            self._roots = roots

    def _list_roots(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._roots_lock:
            roots = self._roots
        if not callable(roots):
            return {"roots": root_entries(roots or [])}
        try:
            return {"roots": root_entries(roots())}
        except ConfigError as exc:  # the callable's answer is wrong; its own exceptions pass as they are
            raise BadHandlerAnswer(ROOTS, str(exc), self.name) from exc

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
        problem = _answer_problem(method, result)
        if problem is not None:
            raise BadHandlerAnswer(method, problem, self.name)
        result = dict(result)
        if method == ELICITATION and "content" in result and result["content"] is None:
            del result["content"]  # null is no object: a declined answer built generically
        if method == ELICITATION and params.get("mode", "form") == "form":
            result = with_defaults(result, params.get("requestedSchema"))
        return result

    def on_request(self, message: dict[str, Any]) -> None:
        """A request from the server (reader thread): answered on the callbacks thread.

        Never dropped: past :data:`MAX_WAITING_REQUESTS` waiting for the callbacks
        thread, a request is answered at once with an error (the server is not left
        waiting, and a flood of requests does not grow the queue).
        """
        method = message["method"]
        if not self.knows(method):
            self.dispatcher.reply(jsonrpc.error_response(message["id"], jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        with self._waiting_lock:
            busy = self._waiting >= MAX_WAITING_REQUESTS
            if not busy:
                self._waiting += 1
        if busy:
            self.callbacks.count_drop("server requests refused")
            self.dispatcher.reply(jsonrpc.error_response(
                message["id"], jsonrpc.INTERNAL_ERROR,
                f"the client is busy: {MAX_WAITING_REQUESTS} requests of this server already wait for an answer"))
            return
        if not self.callbacks.submit(self._answer, message):
            with self._waiting_lock:
                self._waiting -= 1
            self.dispatcher.reply(jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR, "the client is closing"))

    def _answer(self, message: dict[str, Any]) -> None:
        with self._waiting_lock:
            self._waiting -= 1
        params = message.get("params")
        try:
            result = self.run_handler(message["method"], params if isinstance(params, dict) else {})
            reply = jsonrpc.result_response(message["id"], result)
        except RPCError as exc:
            reply = jsonrpc.error_response(message["id"], exc.code, exc.message, exc.data)
        except BadHandlerAnswer as exc:  # the user's mistake: say which, send nothing of the answer
            log.warning("%s", str(exc))
            reply = jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR,
                                           f"the client's handler for {message['method']} gave an invalid answer")
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything; the server still gets an answer
            # The details stay here (they may hold a secret): the server learns only that it failed.
            log_exception(log, logging.ERROR, "handler for %s failed", message["method"])
            reply = jsonrpc.error_response(message["id"], jsonrpc.INTERNAL_ERROR,
                                           f"the client's handler for {message['method']} failed ({type(exc).__name__})")
        self.dispatcher.reply(reply)

    # -- notifications (reader thread: hand over, run nothing of the user's here) -------------

    def add_listener(self, method: str, callback: Callable[[dict[str, Any]], None]) -> None:
        """Run ``callback(params)`` on the callbacks thread for each ``method`` notification ("*": all)."""
        self._listeners.setdefault(method, []).append(callback)

    def on_notification(self, message: dict[str, Any]) -> None:
        """Route a notification (reader thread): what would be filtered out is dropped here, before
        anything is queued; what is queued may be dropped when the client is too far behind, and a
        ``list_changed`` still queued for a listener is not queued twice (see :mod:`mcpcall.callbacks`)."""
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/message":
            if self._wants_log(params):
                self.callbacks.offer(self._log_message, params)
        elif method in CHANGE_NOTIFICATIONS and self.changed is not None:
            try:
                self.changed(method, params)
            except Exception:  # noqa: BLE001 - a bad notification must not end the read loop
                self.dispatcher.log(logging.DEBUG, "server %r: could not handle %s", self.name, method)
        coalesce = method in _LIST_CHANGED
        for callback in self._listeners.get(method, []) + self._listeners.get("*", []):
            self.callbacks.offer(callback, params, key=(id(callback), method) if coalesce else None)

    def _wants_log(self, params: dict[str, Any]) -> bool:
        """Whether a ``notifications/message`` passes the level filter and has anyone to go to."""
        name = params.get("level")
        level = name if isinstance(name, str) else "info"
        if self.log_level is not None and _RANK.get(level, 1) < _RANK.get(self.log_level, 0):
            return False
        return self.on_log is not None or self.logger.isEnabledFor(_LOG_LEVELS.get(level, logging.INFO))

    def _log_message(self, params: dict[str, Any]) -> None:
        """On the callbacks thread: a server log message to ``on_log`` and to the server's logger."""
        name = params.get("level")
        level = name if isinstance(name, str) else "info"
        logger = params.get("logger")
        logger = logger if isinstance(logger, str) and logger else None
        data = params.get("data")
        if self.on_log is not None:
            try:
                self.on_log(level, logger, data)
            except Exception:  # noqa: BLE001 - user code: logged
                log_exception(log, logging.ERROR, "on_log callback failed")
        number = _LOG_LEVELS.get(level, logging.INFO)
        if logger:
            self.logger.log(number, "[%s] %s", logger, data)
        else:
            self.logger.log(number, "%s", data)
