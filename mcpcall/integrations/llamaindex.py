"""MCP tools as LlamaIndex tools: :func:`tools` gives one ``FunctionTool`` per MCP tool.

::

    from llama_index.core.agent.workflow import FunctionAgent
    from mcpcall.integrations import llamaindex

    agent = FunctionAgent(tools=llamaindex.tools(client, timeout=30), llm=llm)

Each tool is a :class:`llama_index.core.tools.FunctionTool` with the MCP
description and, as ``fn_schema``, a pydantic model of the tool's
``inputSchema`` (:func:`mcpcall.integrations._models.model_for`: required vs
optional, defaults, enums, nested objects, ``$ref``; the loosest type where a
model cannot say it). The model is what the LLM is shown; the arguments it
sends go to the server as they are (a pydantic pass would turn the integer 2
of a ``number`` into 2.0), and the server, or the client made with
``validate_arguments=True``, checks them. An argument the LLM leaves out, or
sends as ``null`` when it is optional, is not sent: the server's default
applies. A name is kept as the source gives it, except that a character
outside ``[A-Za-z0-9_-]`` becomes ``_``: LlamaIndex rewrites it so in what it
shows the LLM, and would then not find the tool the LLM asks for.

**Calls.** The tool has both a ``fn`` and an ``async_fn``: ``.call(**kw)`` (and
``call_tool_with_selection``) runs the call on the caller's thread with no event
loop; ``await .acall(**kw)`` (``acall_tool_with_selection``, and every
``FunctionAgent``/``ReActAgent`` step) awaits it without blocking the loop.
(Given only an ``async_fn``, LlamaIndex's sync path would run an event loop of
its own for every call.)

**Results.** ``ToolOutput.blocks`` holds a ``TextBlock`` with the text a model
should read (:func:`~mcpcall.registry.result_text`: structured content as JSON
when there is no text; an image as ``[image/png, N bytes]``), then an
``ImageBlock`` or ``AudioBlock`` per image or audio block, which an agent
passes to a multimodal LLM as such (never as base64 text). ``raw_output`` is
the :class:`~mcpcall.types.CallToolResult` (``.structured_content``,
``.content``).

**Failures.** Every failing call (``isError``, a timeout, a server that is gone,
a JSON-RPC error, arguments refused) raises :class:`~mcpcall.errors.ToolCallFailed`
from ``.call``/``.acall``, its text safe for the LLM. LlamaIndex's own callers
catch it: ``call_tool_with_selection`` returns
``ToolOutput(is_error=True, content="Encountered error: <text>")``, and an
agent gives the LLM ``ToolOutput(is_error=True, content="<text>")`` and goes on.

**Progress.** LlamaIndex tools have no progress callback: ``on_progress``
(``on_progress(tool_name, progress, total, message)``, called on the client's
callbacks thread) receives the server's progress notifications of every call.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ..types import CallToolResult
from ._core import MCPTool, ToolCallFailed, ToolProgress, mcp_tools, media, require, result_text
from ._models import model_for

_tools = require("llama_index.core.tools", "llamaindex", "llama-index-core")
_blocks = require("llama_index.core.base.llms.types", "llamaindex", "llama-index-core")
_FunctionTool: Any = _tools.FunctionTool

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")  # what ToolMetadata.to_openai_tool rewrites to "_"


class MCPFunctionTool(_FunctionTool):  # type: ignore[misc]
    """A ``FunctionTool`` whose ``ToolOutput`` has the result as blocks and the ``CallToolResult`` as ``raw_output``."""

    def _parse_tool_output(self, raw_output: Any) -> list[Any]:
        if not isinstance(raw_output, CallToolResult):
            return super()._parse_tool_output(raw_output)  # type: ignore[no-any-return]
        out: list[Any] = [_blocks.TextBlock(text=result_text(raw_output))]
        for block in media(raw_output):
            data = base64.b64encode(block.data)  # base64 in: LlamaIndex guesses whether raw bytes are base64
            if block.type == "image":
                out.append(_blocks.ImageBlock(image=data, image_mimetype=block.mime_type or None))
            else:
                out.append(_blocks.AudioBlock(audio=data, format=_audio_format(block.mime_type)))
        return out


def tools(source: Any, timeout: float | None = None, *, on_progress: ToolProgress | None = None) -> list[Any]:
    """One LlamaIndex ``FunctionTool`` per tool of ``source`` (a :class:`~mcpcall.Client` or :class:`~mcpcall.ToolRegistry`).

    ``timeout`` bounds the listing and is every call's default;
    ``on_progress`` receives every call's progress.
    """
    out: list[Any] = []
    taken: set[str] = set()
    for mcp in mcp_tools(source, timeout, on_progress=on_progress):
        name = _name(mcp.name, taken)
        taken.add(name)
        out.append(_tool(mcp, name))
    return out


def _tool(mcp: MCPTool, name: str) -> Any:
    def call(**kwargs: Any) -> Any:
        return mcp.call(mcp.arguments(kwargs))

    async def acall(**kwargs: Any) -> Any:
        return await mcp.acall(mcp.arguments(kwargs))

    call.__name__ = acall.__name__ = name
    schema = model_for(name, mcp.schema, description=mcp.description)
    metadata = _tools.ToolMetadata(name=name, description=mcp.description, fn_schema=schema)
    return MCPFunctionTool(fn=call, async_fn=acall, metadata=metadata)


def _name(name: str, taken: set[str]) -> str:
    out = _NOT_NAME.sub("_", name) or "tool"
    base, n = out, 2
    while out in taken:
        out = f"{base}_{n}"
        n += 1
    return out


def _audio_format(mime_type: str) -> str | None:
    """``audio/wav`` -> ``wav`` (what LlamaIndex's AudioBlock calls a format)."""
    kind = mime_type.partition("/")[2].partition(";")[0].strip().lower()
    return {"mpeg": "mp3", "x-wav": "wav", "wave": "wav"}.get(kind, kind) or None

__all__ = ["MCPFunctionTool", "ToolCallFailed", "ToolProgress", "tools"]
