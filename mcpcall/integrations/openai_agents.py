"""MCP tools for the OpenAI Agents SDK (``agents``), as :class:`agents.FunctionTool`\\ s.

``tools(source)`` gives one ``FunctionTool`` per MCP tool: its name (made fit
for the OpenAI API: letters, digits, ``_`` and ``-``, at most 64 characters),
the MCP description, and the tool's ``inputSchema`` as ``params_json_schema``
with ``strict_json_schema=False`` (a server's schema is seldom fit for strict
mode, and strict mode would make every optional argument required: the model
may leave an optional argument out, so the server's default applies).

The SDK's ``on_invoke_tool`` is a coroutine, run on the loop of
``Runner.run`` (or the loop ``Runner.run_sync`` makes): it awaits
:meth:`MCPTool.acall`, so no I/O happens on the loop's thread and the loop
keeps running during a slow tool (``run_sync`` refuses a running loop of the
caller's, so call it from a thread without one, or ``await Runner.run``).

A failing tool (``isError``, a timeout, a server that is gone, a JSON-RPC
error, arguments that are not a JSON object or that the server refuses) does
not raise: its text (:class:`~mcpcall.ToolCallFailed`'s, no secret) after
``Error: `` is returned to the model as the tool's output, as the SDK's docs say a tool
reports an error (an exception from ``on_invoke_tool`` would end the run, and
the SDK's default failure handler hides the exception's text from the model).

Results: the text of the result (:func:`~mcpcall.registry.result_text`); an
image block is sent to the model as a :class:`agents.ToolOutputImage` (a data
URL) beside a :class:`agents.ToolOutputText`; audio, which a function tool's
output cannot carry, is described in the text (``[audio/wav, N bytes]``).
Structured content (which the model reads in the text: servers repeat it
there, and :func:`result_text` gives its JSON when they do not) is kept for
the application as the output item's ``custom_data`` (``{"structured_content":
{...}}`` on the :class:`agents.items.ToolCallOutputItem` of ``result.new_items``).

The SDK has no progress callback for a function tool: ``on_progress`` given to
:func:`tools` (``on_progress(tool_name, progress, total, message)``) hears every
call's progress. Keyword ``options`` of :func:`tools` go to every
``FunctionTool`` (``needs_approval=True``, ``is_enabled=...``,
``timeout_seconds=...``).
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from typing import Any

from ..client import Client
from ..errors import ToolCallFailed
from ..registry import ToolRegistry
from ..types import CallToolResult, ImageContent
from ._core import MAX_NAME, MCPTool, ToolProgress, Unique, mcp_tools, media, model_name, require, result_text

agents = require("agents", "openai_agents", "the OpenAI Agents SDK (openai-agents)")

_PENDING_LIMIT = 1_000  # structured contents kept for output items not yet made (a run that stopped in between)


def tools(source: Client | ToolRegistry, timeout: float | None = None, *, on_progress: ToolProgress | None = None,
          **options: Any) -> list[Any]:
    """The tools of ``source`` as ``agents.FunctionTool``\\ s, one per MCP tool, listed now.

    ``timeout`` bounds the listing and is every call's default; ``options``
    are passed to every ``FunctionTool`` (e.g. ``needs_approval=True``).
    ``on_progress(tool_name, progress, total, message)`` hears every call's progress (on the client's callbacks thread).
    """
    out: list[Any] = []
    taken = Unique(max_length=MAX_NAME)
    for tool in mcp_tools(source, timeout, on_progress=on_progress):
        name = function_name(tool.name, taken)
        out.append(_function_tool(tool, name, options))
    return out


function_name = model_name  # the core's: [A-Za-z0-9_-]{1,64}, unique in linear time


def _function_tool(tool: MCPTool, name: str, options: dict[str, Any]) -> Any:
    pending: OrderedDict[str, Any] = OrderedDict()  # tool_call_id -> structured content, until its output item is made

    async def invoke(ctx: Any, args_json: str) -> Any:
        try:
            arguments = _arguments(tool, args_json)
            result = await tool.acall(arguments)
        except ToolCallFailed as exc:
            return f"Error: {exc}"  # the output carries no error flag: the model reads it here
        call_id = getattr(ctx, "tool_call_id", None)
        if result.structured_content is not None and isinstance(call_id, str):
            pending[call_id] = result.structured_content
            while len(pending) > _PENDING_LIMIT:
                pending.popitem(last=False)
        return output(result)

    def custom_data(data: Any) -> dict[str, Any] | None:
        call_id = getattr(data.tool_context, "tool_call_id", None)
        structured = pending.pop(call_id, None) if isinstance(call_id, str) else None
        return {"structured_content": structured} if structured is not None else None

    settings: dict[str, Any] = {"custom_data_extractor": custom_data, **options}
    return agents.FunctionTool(
        name=name,
        description=tool.description,
        params_json_schema=tool.schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        **settings,
    )


def _arguments(tool: MCPTool, args_json: str) -> dict[str, Any]:
    """The arguments the model sent (a JSON object as text; empty text is none), cleaned for the server."""
    if not args_json or not args_json.strip():
        return {}
    try:
        values = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise ToolCallFailed(f"tool {tool.name!r} was not called: its arguments are not valid JSON ({exc.msg})") from exc
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ToolCallFailed(f"tool {tool.name!r} was not called: its arguments must be a JSON object,"
                             f" not {type(values).__name__}")
    return tool.arguments(values)


def output(result: CallToolResult) -> Any:
    """What the model reads of ``result``: its text, and its images as ``ToolOutputImage``\\ s beside it."""
    text = result_text(result)
    images = [block for block in media(result) if isinstance(block, ImageContent)]
    if not images:
        return text
    return [agents.ToolOutputText(text=text)] + [
        agents.ToolOutputImage(image_url=f"data:{block.mime_type};base64,{_base64(block.data)}") for block in images
    ]


def _base64(data: bytes | str) -> str:
    """A block's data as base64 text (mcpcall gives the decoded bytes)."""
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


__all__ = ["function_name", "output", "tools"]
