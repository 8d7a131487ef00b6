"""What every integration shares: the tools of a source, one call, its failure as text a model may read.

:func:`mcp_tools` lists a :class:`~mcpcall.Client`'s or a
:class:`~mcpcall.ToolRegistry`'s tools as :class:`MCPTool`\\ s. An
:class:`MCPTool` calls its tool on the caller's thread (:meth:`MCPTool.call`)
or from a running event loop without blocking it (:meth:`MCPTool.acall`), and
turns every way a call can fail into one :class:`~mcpcall.errors.ToolCallFailed`
whose message is safe for a model: the tool's own error text, the server's
JSON-RPC error message, or a fixed phrase (never a URL, a header or a stderr
line; the whole error is its ``__cause__`` and is logged on ``mcpcall.integrations``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import keyword
import logging
import math
import re
import sys
import threading
from collections.abc import Awaitable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Optional, TypeVar

from ..client import Client
from ..dispatcher import ProgressCallback
from ..errors import MCPError, SessionExpired, ToolCallFailed
from ..registry import ToolRegistry, object_schema, result_text, tool_description
from ..registry.failures import failure_text
from ..registry.gemini import resolve_pointer
from ..registry.names import sanitize
from ..types import AudioContent, CallToolResult, ImageContent, Tool

log = logging.getLogger("mcpcall.integrations")

T = TypeVar("T")

ToolProgress = Callable[[str, float, Optional[float], Optional[str]], Any]
"""``on_progress(tool_name, progress, total, message)``: a server's progress notice for a call of ``tool_name``,
on the client's callbacks thread (never an I/O thread); on the sync path every one has come when the call returns."""


def require(module: str, extra: str, framework: str) -> Any:
    """Import ``module`` (the framework); without it, an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        older = " (on Python 3.10 or newer: the frameworks need it)" if sys.version_info < (3, 10) else ""
        raise ImportError(
            f"mcpcall.integrations.{extra} needs {framework}, which is not installed: pip install 'mcpcall[{extra}]'{older}"
        ) from exc


class MCPTool:
    """One MCP tool of a client or a registry, as an integration wraps it.

    ``name`` is the name the framework shows (for a client, the server's tool
    name as model APIs take one: ``[A-Za-z0-9_-]``, at most 64 characters, a
    ``_2`` for the second of two that would be the same; for a registry, its
    exposed ``mcp__server__tool`` name); ``tool.name`` is what is called; ``schema``
    is the tool's ``inputSchema`` as an object schema (a deep copy: an
    integration may change it); ``timeout`` is the seconds a call may take
    when the caller gives none (None: the client's or registry's default);
    ``on_progress`` (:data:`ToolProgress`) hears every call's progress.
    """

    __slots__ = ("_renamed", "_source", "description", "name", "on_progress", "schema", "server", "timeout", "tool")

    def __init__(self, source: Client | ToolRegistry, name: str, server: str, tool: Tool, timeout: float | None,
                 on_progress: ToolProgress | None = None) -> None:
        self._source = source
        self.name = name
        self.server = server
        self.tool = tool
        self.timeout = timeout
        self.on_progress = on_progress
        self.description = tool_description(tool)
        self.schema, self._renamed = _without_reserved(object_schema(tool.input_schema))

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server!r})"

    @property
    def properties(self) -> dict[str, Any]:
        """The schema's ``properties`` (name -> subschema); only the mapping ones."""
        props = self.schema.get("properties")
        return {k: v for k, v in props.items() if isinstance(k, str) and isinstance(v, Mapping)} if isinstance(props, Mapping) else {}

    @property
    def required(self) -> list[str]:
        """The names the schema requires, in its order."""
        names = self.schema.get("required")
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    # -- arguments -----------------------------------------------------------------------------

    def arguments(self, values: Mapping[str, Any] | None, *, drop_unknown: bool = False) -> dict[str, Any]:
        """The arguments to send for what a framework passed.

        ``None`` for an argument the schema does not require is left out, so
        the server's default applies (frameworks fill optional fields the model
        left out with ``None``), unless the argument's schema says it takes
        ``null``: then ``null`` means something of its own ("clear it") and is
        sent. An integral float for an ``integer`` is sent as an int (2, not
        2.0). With ``drop_unknown``, names the schema does not list are left out
        (keys a framework adds of its own) when it lists any. An argument the
        framework knows by another name (``self_``: see :data:`RESERVED`) goes by its own.
        """
        if not values:
            return {}
        props = self.properties
        required = set(self.required)
        out: dict[str, Any] = {}
        renamed = self._renamed
        for key, value in values.items():
            sub = props.get(key)
            if value is None and key not in required and not (sub is not None and takes_null(sub, self.schema)):
                continue
            if sub is None and drop_unknown and props:
                continue
            out[renamed.get(key, key)] = _as_integer(sub, value) if sub is not None else value
        return out

    # -- calls ---------------------------------------------------------------------------------

    def call(self, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None,
             on_progress: ProgressCallback | None = None) -> CallToolResult:
        """Call the tool on this thread; its result, or :class:`ToolCallFailed` with text a model may read.

        ``on_progress(progress, total, message)`` hears this call's progress, as does the tool's own ``on_progress``.
        """
        seconds = self.timeout if timeout is None else timeout
        try:
            result = self._send(arguments, seconds, self._progress(on_progress))
        except (MCPError, FutureTimeout) as exc:
            raise self.failure(exc, seconds) from exc
        return self._checked(result)

    async def acall(self, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None,
                    on_progress: ProgressCallback | None = None) -> CallToolResult:
        """:meth:`call` from a running event loop, which keeps running meanwhile.

        The call is started on a short-lived thread of its own
        (``mcpcall-start-<server>``: starting may list the tools again, open a
        new session or connect a registry's server, and none of that may block
        the loop), then its Future is awaited (:func:`_outcome`: the check of
        the result against the tool's ``outputSchema``, whose cost is the
        server's to choose, runs in the loop's default executor, not on the
        loop). Cancelling the awaiting task cancels the call at the server, for
        a client and a registry alike.
        """
        seconds = self.timeout if timeout is None else timeout
        on_progress = self._progress(on_progress)
        try:
            future = await self._start(functools.partial(self._future, arguments, seconds, on_progress))
            try:
                result: CallToolResult = await _outcome(future, self._start)
            except SessionExpired as exc:  # not run: once more, in the new session the client opens
                again = await self._start(functools.partial(self._again, future, exc, arguments, seconds, on_progress))
                if again is None:
                    raise
                result = await _outcome(again, self._start)
        except (MCPError, FutureTimeout) as exc:
            raise self.failure(exc, seconds) from exc
        return self._checked(result)

    def _future(self, arguments: Mapping[str, Any] | None, seconds: float | None,
                on_progress: ProgressCallback | None) -> Future[CallToolResult]:
        source = self._source
        if isinstance(source, ToolRegistry):
            return source.call_future(self.name, arguments, timeout=seconds, on_progress=on_progress)
        return source.call_tool_future(self.tool.name, arguments, timeout=seconds, on_progress=on_progress)

    def _again(self, future: Future[CallToolResult], exc: SessionExpired, arguments: Mapping[str, Any] | None,
               seconds: float | None, on_progress: ProgressCallback | None) -> Future[CallToolResult] | None:
        source = self._source
        if isinstance(source, ToolRegistry):
            return source.call_again(future, exc)
        if not source.alive:
            return None
        return source.call_tool_future(self.tool.name, arguments, timeout=seconds, on_progress=on_progress)

    async def _start(self, start: Callable[[], T]) -> T:
        """``start()`` run on a short-lived thread of its own while the loop goes on; a Future it returns is
        cancelled should the awaiting task be cancelled first (its call would be nobody's), by whichever side
        comes second: the task as it is cancelled, or the thread as it ends (the loop may never run again)."""
        loop = asyncio.get_running_loop()
        box: asyncio.Future[T] = loop.create_future()
        lock = threading.Lock()
        handed: list[Any] = []  # what start() gave, once it gave it
        abandoned: list[bool] = []  # the awaiting task was cancelled

        def settle(value: Any, failed: bool) -> None:  # on the loop
            if box.cancelled():
                _cancel(value)
            elif failed:
                box.set_exception(value)
            else:
                box.set_result(value)

        def run() -> None:
            try:
                value: Any = start()
                failed = False
            except StopIteration as exc:  # an asyncio Future takes no StopIteration: an error the task can end with
                value, failed = RuntimeError(f"starting a call of {self.name!r} raised StopIteration"), True
                value.__cause__ = exc
            except BaseException as exc:  # noqa: BLE001 - ends in the awaiting task
                value, failed = exc, True
            with lock:
                handed.append(value)
                gone = bool(abandoned) or box.cancelled()  # cancelled: the task may never run to say so (a read only)
            if gone:
                _cancel(value)
                return
            try:
                loop.call_soon_threadsafe(settle, value, failed)
            except RuntimeError:  # the loop is closed: nobody waits
                _cancel(value)

        threading.Thread(target=run, name=f"mcpcall-start-{self.server}", daemon=True).start()
        try:
            return await box
        except BaseException:  # cancelled (or the loop is going away): what start() gives is nobody's
            with lock:
                abandoned.append(True)
                given = list(handed)
            for value in given:
                _cancel(value)
            raise

    def _progress(self, given: ProgressCallback | None) -> ProgressCallback | None:
        """What hears a call's progress: ``given`` (the call's), the tool's ``on_progress``, or both."""
        own = self.on_progress
        if own is None:
            return given
        name = self.name

        def both(progress: float, total: float | None, message: str | None) -> None:
            if given is not None:
                given(progress, total, message)
            own(name, progress, total, message)

        return both

    def _send(self, arguments: Mapping[str, Any] | None, seconds: float | None,
              on_progress: ProgressCallback | None) -> CallToolResult:
        source = self._source
        if isinstance(source, ToolRegistry):  # it retries an expired session itself
            return source.call(self.name, arguments, timeout=seconds, on_progress=on_progress)
        try:
            return source.call_tool(self.tool.name, arguments, timeout=seconds, on_progress=on_progress)
        except SessionExpired:  # the server did not run it: once more, in the new session the client opens
            if not source.alive:
                raise
            log.info("server %r no longer knew our session; calling tool %r again in a new session",
                     self.server, self.tool.name)
            return source.call_tool(self.tool.name, arguments, timeout=seconds, on_progress=on_progress)

    def _checked(self, result: CallToolResult) -> CallToolResult:
        if result.is_error:
            raise ToolCallFailed(result_text(result) if result.content or result.structured_content is not None
                                 else f"{self._what()} reported an error with no message", result)
        return result

    def _what(self) -> str:
        """The tool as the model knows it (its name here, not the server's), and its server."""
        return f"tool {self.name!r} of server {self.server!r}" if self.server else f"tool {self.name!r}"

    def failure(self, exc: BaseException, seconds: float | None = None) -> ToolCallFailed:
        """``exc`` (a call's failure) as a :class:`ToolCallFailed` whose message a model may read."""
        if isinstance(exc, ToolCallFailed):
            return exc
        what = self._what()
        log.warning("%s failed: %s", what, str(exc))  # the text: a kept record must not keep the client alive
        return ToolCallFailed(failure_text(what, exc, seconds))


async def _outcome(future: Future[T], elsewhere: Callable[[Callable[[], T]], Awaitable[T]]) -> T:
    """``future``'s outcome, awaited from the loop without reading it there.

    A :class:`~mcpcall.RequestFuture` checks its result against the tool's
    ``outputSchema`` on the thread that first reads it, and ``asyncio.wrap_future``
    would read it on the loop's thread. The loop is only told when the call is
    done; a result with no check left to run is then read on the loop, and one
    with a check in the loop's default executor, holding one of its workers for
    the check alone (never for the wait), or, once that executor is shut down,
    by ``elsewhere`` (:meth:`MCPTool._start`: a thread of its own). Cancelling
    the awaiting task cancels the call.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake(_: Any) -> None:  # on whichever thread completes the call: only tells the loop
        try:
            loop.call_soon_threadsafe(_set_done, done)
        except RuntimeError:  # the loop is closed: nobody waits
            pass

    future.add_done_callback(wake)
    try:
        await done
    except BaseException:
        future.cancel()
        raise
    if future.cancelled():
        raise asyncio.CancelledError
    if not getattr(future, "check_pending", False):  # a failure, or a result with nothing to check: read here
        return future.result(0)
    try:
        reading = loop.run_in_executor(None, future.result, 0)
    except RuntimeError:  # the default executor is shut down (an application's, or asyncio.run's, way out)
        return await elsewhere(functools.partial(future.result, 0))
    return await reading


def _set_done(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _cancel(value: Any) -> None:
    """Cancel ``value`` if it is a Future (a call started for a task that no longer waits for it)."""
    if isinstance(value, Future):
        value.cancel()


RESERVED = frozenset({"self"})  # argument names no framework's own call(self, **kwargs) can pass on


def _without_reserved(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``schema`` with a property of :data:`RESERVED` renamed (``self`` -> ``self_``), and the new names' old ones.

    Every framework but two calls a tool as ``tool(**arguments)`` through a
    method of its own that takes ``self``: an MCP argument of that name could
    not get through. The framework sees ``self_``; :meth:`MCPTool.arguments` sends ``self``.
    """
    props = schema.get("properties")
    if not isinstance(props, dict) or not RESERVED.intersection(props):
        return schema, {}
    unique = Unique(k for k in props if isinstance(k, str))
    renamed = {unique(f"{name}_"): name for name in props if name in RESERVED}
    back = {old: new for new, old in renamed.items()}
    schema["properties"] = {back.get(k, k): v for k, v in props.items()}
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [back.get(k, k) if isinstance(k, str) else k for k in required]
    return schema, renamed


def takes_null(schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether a property's schema says, in so many words, that it takes ``null``.

    A ``null`` type (alone, in a type list, or as a branch of ``anyOf``/``oneOf``,
    a local ``$ref`` followed once), ``None`` in an ``enum``, ``const: null`` or
    OpenAPI's ``nullable``. A schema that says nothing of types takes ``null``
    too, but does not say so: a framework's ``None`` for it is dropped.
    """
    for node in _alternatives(schema, root):
        kind = node.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind) or node.get("nullable") is True:
            return True
        if "const" in node and node["const"] is None:
            return True
        enum = node.get("enum")
        if isinstance(enum, list) and any(value is None for value in enum[:1000]):
            return True
    return False


def _alternatives(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``schema`` (its ``$ref`` followed once) and the branches of its ``anyOf``/``oneOf`` (each followed once)."""
    def followed(node: Any) -> Mapping[str, Any] | None:
        if not isinstance(node, Mapping):
            return None
        target = resolve_pointer(root, node["$ref"]) if "$ref" in node else None
        return target if target is not None else node

    top = followed(schema) or {}
    out = [top]
    for key in ("anyOf", "oneOf"):
        branches = top.get(key)
        if isinstance(branches, list):
            out += [b for b in (followed(branch) for branch in branches[:100]) if b is not None]
    return out


def _as_integer(schema: Mapping[str, Any], value: Any) -> Any:
    """An integral float as an int where the schema says ``integer`` (and not ``number`` too)."""
    if value.__class__ is not float or not math.isfinite(value) or not value.is_integer():
        return value
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return int(value) if "integer" in kinds and "number" not in kinds else value


def mcp_tools(source: Client | ToolRegistry, timeout: float | None = None, *,
              on_progress: ToolProgress | None = None) -> list[MCPTool]:
    """Every tool of ``source`` (listed now, within ``timeout``) as an :class:`MCPTool`.

    A registry leaves out a server it cannot reach (its ``errors`` say why);
    a client raises. ``timeout`` is also every call's default; ``on_progress``
    (``on_progress(tool_name, progress, total, message)``) hears every call's progress.
    """
    if isinstance(source, ToolRegistry):
        return [MCPTool(source, entry.name, entry.server, entry.tool, timeout, on_progress)
                for entry in source.tools(timeout)]
    if isinstance(source, Client):  # names a model API takes: [A-Za-z0-9_-], at most 64 characters, none twice
        unique = Unique(max_length=MAX_NAME)
        return [MCPTool(source, unique(api_name(tool.name)), source.name, tool, timeout, on_progress)
                for tool in source.list_tools(timeout)]
    raise TypeError(f"tools() takes an mcpcall.Client or an mcpcall.ToolRegistry, not {type(source).__name__}")


# ---------------------------------------------------------------- names and results


_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")
MAX_NAME = 64  # characters of a tool name OpenAI, Anthropic and Gemini take ([A-Za-z0-9_-]{1,64})


class Unique:
    """Names made unique as they come: a name already given gets ``_2``, ``_3``, … (cut to ``max_length``).

    Counting goes on per name, so n names that all want the same one cost
    O(n), not O(n²): a server choosing its tools' (or properties') names
    cannot make the naming slow.
    """

    def __init__(self, taken: Iterable[str] = (), max_length: int | None = None) -> None:
        self.used = set(taken)
        self.max_length = max_length
        self._next: dict[str, int] = {}

    def __call__(self, base: str) -> str:
        limit = self.max_length
        out = base[:limit] if limit else base
        if out not in self.used:
            self.used.add(out)
            return out
        key = out  # counted per name as cut: long names that share their first max_length characters share a count
        n = self._next.get(key, 2)
        while True:
            suffix = f"_{n}"
            out = (key[: limit - len(suffix)] if limit else key) + suffix
            n += 1
            if out not in self.used:
                break
        self._next[key] = n
        self.used.add(out)
        return out


def api_name(name: str) -> str:
    """``name`` with every character the model APIs refuse in a tool name as ``_`` (not yet cut to 64)."""
    return sanitize(name)


def model_name(name: str, taken: Iterable[str] | Unique = ()) -> str:
    """``name`` as the model APIs take a tool's name (``[A-Za-z0-9_-]{1,64}``), not in ``taken``."""
    return (taken if isinstance(taken, Unique) else Unique(taken, MAX_NAME))(api_name(name))


def identifier(name: str, taken: Iterable[str] | Unique = ()) -> str:
    """``name`` as a Python identifier (``get-sum`` -> ``get_sum``), not a keyword and not in ``taken``."""
    out = _NOT_IDENTIFIER.sub("_", name) or "_"
    if out[0].isdigit():
        out = "_" + out
    if keyword.iskeyword(out):
        out += "_"
    return (taken if isinstance(taken, Unique) else Unique(taken))(out)


def unique_strings(items: list[Any]) -> list[str]:
    """The strings of ``items``, each once, in order: a schema's ``required`` or ``type`` list as the JSON Schema
    meta-schema takes it (anything else there is refused, and jsonschema's ``uniqueItems`` compares a list it
    cannot sort, strings and numbers, pair by pair: a cost a server could make quadratic)."""
    return list(dict.fromkeys(item for item in items if isinstance(item, str)))


def media(result: CallToolResult) -> list[ImageContent | AudioContent]:
    """The image and audio blocks of a result (their ``data`` is the decoded bytes; ``mime_type`` says what)."""
    return [block for block in result.content if isinstance(block, (ImageContent, AudioContent))]


__all__ = ["MAX_NAME", "MCPTool", "ToolCallFailed", "ToolProgress", "Unique", "api_name", "identifier", "mcp_tools", "media", "model_name", "require", "result_text",
           "unique_strings"]
