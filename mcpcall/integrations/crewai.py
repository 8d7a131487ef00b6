"""MCP tools as CrewAI tools: ``tools(source)`` gives one :class:`crewai.tools.BaseTool` per MCP tool.

Each tool keeps the MCP name and description; its ``args_schema`` is a pydantic
model of the tool's ``inputSchema`` (:func:`._models.model_for`: required vs
optional, defaults, enums, arrays, nested objects, ``$ref``/``$defs``; what
pydantic cannot express is ``Any``). CrewAI validates arguments with that model
and hands ``_run`` its ``model_dump()``: every optional field filled with
``None``, property names that are no Python names under their field names, and
keys of its own. ``_run`` validates them again and sends what the model gave:
keys the schema does not list are ignored (even with ``additionalProperties:
false``), a ``None`` for an argument left out is dropped so the server's
default applies (inside nested objects too), the original property names come
back, and an ``integer`` stays an int (2, not 2.0).

``_run`` (what ``tool.run(**kwargs)`` and an agent call) runs on the caller's
thread; ``await tool.arun(**kwargs)`` awaits the call without blocking the
loop (CrewAI's own async agent path runs ``_run`` in the loop's executor).
The result is the text a model should read (structured content as JSON when
there is no text; an image as ``[image/png, N bytes]``, never its base64).

A failing tool (``isError``, a timeout, a server that is gone, arguments the
server refused) returns, by default (``failures="report"``), a
:class:`crewai.tools.tool_failure.ToolFailure` with text the model may read:
CrewAI's own report of a tool that ran but failed (``reason`` ``mcp_error``
for ``isError``), which the agent shows the model once, records on
``TaskOutput.tool_failures`` and acts on by its ``tool_failure_policy``. With
``failures="raise"`` it raises :class:`mcpcall.ToolCallFailed` instead; an
agent then catches it and calls the tool again up to its parsing-attempt limit
(3 more times) before it tells the model ``Tool … failed: <text>``: a
timed-out call would wait its timeout four times, and a tool that does
something would do it four times, which is why reporting is the default.
CrewAI has no progress callback: ``on_progress`` given to :func:`tools`
(``on_progress(tool_name, progress, total, message)``) hears every call's progress.

Set ``CREWAI_DISABLE_TELEMETRY=true`` / ``OTEL_SDK_DISABLED=true`` to keep
CrewAI from sending telemetry; mcpcall sets nothing for you.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..client import Client
from ..errors import ToolCallFailed
from ..registry import ToolRegistry
from ._core import MCPTool, ToolProgress, mcp_tools, require, result_text
from ._models import model_for

crewai_tools = require("crewai.tools", "crewai", "CrewAI")
_failure = require("crewai.tools.tool_failure", "crewai", "CrewAI")
_pydantic = require("pydantic", "crewai", "CrewAI")

Failures = Literal["raise", "report"]


_BaseTool: Any = crewai_tools.BaseTool


class MCPCrewAITool(_BaseTool):  # type: ignore[misc]
    """The CrewAI tool of one MCP tool (made by :func:`tools`; ``mcp_tool`` is the :class:`~._core.MCPTool`)."""

    failures: str = "report"
    _mcp: Any = _pydantic.PrivateAttr(default=None)

    @property
    def mcp_tool(self) -> MCPTool:
        """The MCP tool this one calls."""
        tool: MCPTool = self._mcp
        return tool

    def _run(self, /, *args: Any, **kwargs: Any) -> Any:
        """Call the MCP tool on this thread with the arguments CrewAI validated; its text."""
        try:
            result = self.mcp_tool.call(self._arguments(args, kwargs))
        except ToolCallFailed as exc:
            return self._failed(exc)
        return result_text(result)

    async def _arun(self, /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_run` from a running event loop, which keeps running meanwhile."""
        try:
            result = await self.mcp_tool.acall(self._arguments(args, kwargs))
        except ToolCallFailed as exc:
            return self._failed(exc)
        return result_text(result)

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """What to send for what CrewAI passed (its ``model_dump()``, or what a caller gave ``_run`` directly)."""
        if args:  # CrewAI passes keywords; positional values are the schema's properties in order
            kwargs = {**dict(zip(self.args_schema.model_fields, args)), **kwargs}
        try:
            instance = self.args_schema.model_validate(kwargs)
        except _pydantic.ValidationError as exc:
            errors = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()[:5])
            raise ToolCallFailed(f"tool {self.name!r} was not called: its arguments do not match its input schema: {errors}") from exc
        values = _without_none(instance.model_dump(by_alias=True))
        given = {self._alias(k): v for k, v in kwargs.items()}
        for prop in self.mcp_tool.required:  # a null the model sent for a required argument is its to send
            if prop in given and given[prop] is None:
                values[prop] = None
        return self.mcp_tool.arguments(values, drop_unknown=True)

    def _alias(self, key: str) -> str:
        field = self.args_schema.model_fields.get(key)
        return field.alias if field is not None and field.alias else key

    def _failed(self, exc: ToolCallFailed) -> Any:
        if self.failures != "report":
            raise exc
        reason = _failure.ToolFailureReason.MCP_ERROR if exc.result is not None else _failure.ToolFailureReason.EXCEPTION
        return _failure.ToolFailure(message=str(exc), reason=reason)


def tools(source: Client | ToolRegistry, timeout: float | None = None, *, failures: Failures = "report",
          on_progress: ToolProgress | None = None) -> list[Any]:
    """The tools of ``source`` (a :class:`~mcpcall.Client` or a :class:`~mcpcall.ToolRegistry`) as CrewAI tools.

    ``timeout`` is the seconds to list them and each call's limit (None: the
    source's default). ``failures`` is how a failing call reaches CrewAI:
    ``"raise"`` (:class:`~mcpcall.ToolCallFailed`) or ``"report"`` (a
    returned :class:`~crewai.tools.tool_failure.ToolFailure`).
    """
    if failures not in ("raise", "report"):
        raise ValueError(f"failures is 'raise' or 'report', not {failures!r}")
    return [make_tool(mcp, failures=failures) for mcp in mcp_tools(source, timeout, on_progress=on_progress)]


def make_tool(mcp: MCPTool, *, failures: Failures = "report") -> Any:
    """One CrewAI tool for ``mcp``."""
    # nullable_defaults: CrewAI's native tool calling sends OpenAI strict-mode schemas, where every property is
    # required; an optional argument with a default must take null for the model to leave it out (_run drops it).
    schema = model_for(mcp.name, mcp.schema, description=mcp.description, nullable_defaults=True)
    tool = MCPCrewAITool(name=mcp.name, description=mcp.description or f"The MCP tool {mcp.name}.", args_schema=schema,
                         failures=failures)
    tool._mcp = mcp
    return tool


def _without_none(value: Any) -> Any:
    """``value`` with the ``None``\\ s of nested objects left out (a dump fills every optional field with one)."""
    if isinstance(value, Mapping):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


__all__ = ["MCPCrewAITool", "ToolCallFailed", "make_tool", "tools"]
