"""The server's tools as the session knows them: the listing, its schema checks and HTTP headers.

:class:`ToolCatalog` lists tools (every page, within one timeout), compiles
the checks of their schemas on the caller's thread (results are checked on
the reader thread, which must not spend its time importing jsonschema), keeps
the modern Streamable HTTP header registry (``x-mcp-header``) and parses
``tools/call`` results. A tools change (``notifications/tools/list_changed``)
invalidates all of it: the next listing starts afresh.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from time import monotonic
from typing import Any

from ..dispatcher import RequestFuture
from ..errors import InvalidRequest, ProtocolError, RequestTimeout, RPCError
from ..headers import InvalidHeaderAnnotation, header_params
from ..jsonrpc import copy_json
from ..schema import Check, input_check, output_check
from ..types import CallToolResult, Tool, ToolList, parse_call_result, parse_tool
from ..types.tools import NestedTooDeep
from .calls import Call, Caller

__all__ = ["ToolCatalog"]

log = logging.getLogger("mcpcall.client")

_RELIST_AFTER = 30.0  # seconds before a call tries again to list tools that could not be listed


class ToolCatalog:
    """What ``list_tools()`` found, and what calling a tool needs from it."""

    def __init__(self, caller: Caller, *, validate_output: bool, validate_arguments: bool) -> None:
        self.caller = caller
        self.name = caller.name
        self.validate_output = validate_output
        self.validate_arguments = validate_arguments
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        self._output_checks: dict[str, Check] = {}
        self._input_checks: dict[str, Check | None] = {}
        self._listed_generation = -1
        self._listed: list[Tool] = []
        self.generation = 0  # bumped by every invalidation
        self._unlistable_until = 0.0  # after a failed listing for a call: when to try again
        self._listing: threading.Event | None = None  # a listing for calls under way; set when it ends (under _lock)
        caller.before_send["tools/call"] = self._before_call

    def list_tools(self, timeout: float | None = None, *, cache: bool = True) -> ToolList[Tool]:
        """Every tool of the server (all pages); see ``Client.list_tools``."""
        generation = self.generation
        cached: list[bool] = []
        raw = list(self.caller.paginate("tools/list", "tools", timeout, cache=cache,
                                        on_page=lambda page, hit: cached.append(hit)))
        with self._lock:
            if cached and all(cached) and self._listed and generation == self.generation == self._listed_generation:
                # Every page came from the cache: nothing to compile again. The pages are the cache's
                # copies, so Tools parsed from them share nothing with the catalog's own.
                kept_names = {tool.name for tool in self._listed}
                return ToolList(tool for tool in self._parse_all(raw, quiet=True) if tool.name in kept_names)
        tools = self._parse_all(raw)
        checks: dict[str, Check] = {}
        if self.validate_output:
            for tool in tools:
                if tool.output_schema is not None:
                    check = output_check(tool.output_schema, tool=tool.name, server=self.name, emit=self._emit)
                    if check is not None:
                        checks[tool.name] = check
        with self._lock:
            current = generation == self.generation
        if not current:
            return ToolList(tools)  # the tools changed while listing: the next listing refreshes what calls need
        kept = self._with_headers(tools)
        with self._lock:
            if generation == self.generation:  # not changed meanwhile either
                self._tools = {tool.name: tool for tool in kept}
                self._output_checks = checks
                self._input_checks = {}
                self._listed = kept
                self._listed_generation = generation
        # The caller's to change: the catalog keeps the schemas as the server sent them.
        return ToolList(parse_tool(copy_json(tool.raw), self.name) for tool in kept)

    def _emit(self, logger: logging.Logger, level: int, msg: str, *args: Any) -> None:
        """How a result's check logs: it runs on the reader thread, where no logging handler may run."""
        self.caller.callbacks.log(logger, level, msg, *args)

    def _parse_all(self, raw: list[Any], *, quiet: bool = False) -> list[Tool]:
        """The tools of a listing; one nested too deeply to copy, check or show is left out, with a warning."""
        tools = []
        for item in raw:
            try:
                tools.append(parse_tool(item, self.name))
            except NestedTooDeep as exc:
                if not quiet:
                    log.warning("%s; it is left out of the listing", str(exc))  # not exc: see _with_headers
        return tools

    def _before_call(self, call: Any) -> bool:
        """Before ``tools/call`` (caller's thread): list the tools once if the ``outputSchema`` is not known yet.

        Nothing to do once the tools were listed in this generation (the hot path:
        two reads). A failing listing (no tools capability, an error, no time)
        leaves the result unchecked, with a warning, and is not tried again for
        :data:`_RELIST_AFTER` seconds; a lost connection or session raises, as the
        call would. The listing's time comes out of the call's.
        """
        if not self.validate_output or self._listed_generation == self.generation:
            return False
        if monotonic() < self._unlistable_until:
            return False
        timeout = call.timeout if call.timeout is not None and call.timeout != math.inf else self.caller.timeout
        if call.max_timeout is not None:
            timeout = min(timeout, call.max_timeout)
        name = call.params.get("name") if isinstance(call.params, dict) else None
        with self._lock:
            listing = self._listing
            if listing is None:
                self._listing = mine = threading.Event()
        if listing is not None:
            # Calls made at once on a fresh client share one listing (each would list every page); this
            # one waits for it within its own timeout, then goes out whatever became of it.
            listing.wait(None if timeout == math.inf else timeout)
            return True
        try:
            self.list_tools(timeout)
        except (RPCError, ProtocolError, RequestTimeout) as exc:  # the server's refusal; a lost connection or session raises
            if isinstance(exc, RequestTimeout):  # what held the listing up holds the call up: its timeout says it too
                call.prepared_note = exc.note
            self._unlistable_until = monotonic() + _RELIST_AFTER
            log.warning("server %r: the tools could not be listed to learn the outputSchema of %r, so its result is "
                        "not checked (%s)", self.name, name, str(exc))
        finally:
            with self._lock:
                self._listing = None
            mine.set()
        return True

    def _with_headers(self, tools: list[Tool]) -> list[Tool]:
        """Over modern Streamable HTTP, register each tool's ``x-mcp-header`` params; leave out broken ones."""
        registry = getattr(self.caller.connection.transport, "tool_headers", None)
        if registry is None or self.caller.state.era != "modern":
            return tools
        kept = []
        for tool in tools:
            try:
                registry[tool.name] = header_params(tool.input_schema)
            except InvalidHeaderAnnotation as exc:
                registry.pop(tool.name, None)
                # The text, not the exception: a handler that keeps records (pytest's, a MemoryHandler) would keep
                # its traceback, whose frames hold this catalog and through it the whole client, closed or not.
                log.warning("server %r: tool %r left out: %s", self.name, tool.name, str(exc))
                continue
            kept.append(tool)
        return kept

    def invalidate(self) -> None:
        """The server's tools changed: forget the listing, its checks and its headers."""
        with self._lock:
            self.generation += 1
            self._listed = []
            self._tools = {}
            self._output_checks = {}
            self._input_checks = {}
        registry = getattr(self.caller.connection.transport, "tool_headers", None)
        if isinstance(registry, dict):
            registry.clear()
        self.caller.cache.invalidate("tools/list")

    # -- calling ----------------------------------------------------------------------------

    def check_arguments(self, name: str, arguments: Mapping[str, Any], validate: bool | None, timeout: float | None) -> None:
        """With ``validate`` (default: the client's ``validate_arguments``), check against ``inputSchema``."""
        if not (self.validate_arguments if validate is None else validate):
            return
        with self._lock:
            known = name in self._tools
        if not known:
            self.list_tools(timeout)
        with self._lock:
            tool = self._tools.get(name)
            if tool is None:
                raise InvalidRequest(f"server {self.name!r} has no tool {name!r} to check the arguments against")
            if name not in self._input_checks:
                self._input_checks[name] = input_check(tool.input_schema, tool=name, server=self.name)
            check = self._input_checks[name]
        if check is not None:
            check(dict(arguments))

    def call_result(self, result: dict[str, Any], future: RequestFuture) -> CallToolResult:
        """The transform of ``tools/call`` (reader thread): parse; ``outputSchema`` is checked where the result is read."""
        call = future.context
        params = call.params if call.__class__ is Call else getattr(call, "params", None)
        name = params.get("name", "") if params.__class__ is dict or isinstance(params, dict) else ""
        parsed = parse_call_result(result, name, self.name)  # what parse() does, without its frame: every answer's path
        if self.validate_output and not parsed.is_error:
            check = self._output_checks.get(name)
            if check is not None:
                self._check(parsed, name, check, future)
        return parsed

    def parse(self, result: dict[str, Any], name: str, future: Any = None) -> CallToolResult:
        """A ``tools/call`` result of tool ``name``, checked against its ``outputSchema``.

        With ``future`` (a :class:`RequestFuture`), the check runs when its
        result is first read, on the reading thread (see
        :meth:`RequestFuture.check_on_read`), and stops unchecked at the call's
        deadline; without one, here and now.
        """
        parsed = parse_call_result(result, name, self.name)
        if self.validate_output and not parsed.is_error:
            check = self._output_checks.get(name)
            if check is not None:
                self._check(parsed, name, check, future)
        return parsed

    def _check(self, parsed: CallToolResult, name: str, check: Check, future: Any) -> None:
        """Check ``parsed`` against the ``outputSchema`` of tool ``name``: when ``future``'s result is read, or now."""
        if parsed.structured_content is None:
            raise ProtocolError(
                f"server {self.name!r}: tool {name!r} declares an outputSchema but returned no structured content"
            )
        content = parsed.structured_content
        if isinstance(future, RequestFuture):
            # On the reader's thread, by the call's own deadline (a task's result: by the budget alone).
            deadline = getattr(future.context, "deadline", math.inf)
            future.check_on_read(lambda: check(content, deadline))
        else:
            check(content)
