"""MCP tools as LangChain tools: :func:`tools` gives one ``StructuredTool`` per MCP tool, for LangGraph too.

::

    from langgraph.prebuilt import ToolNode
    from mcpcall.integrations import langchain

    tools = langchain.tools(client, timeout=30)
    node = ToolNode(tools, handle_tool_errors=True)

Each tool is a :class:`langchain_core.tools.StructuredTool` (a ``BaseTool``)
named as the source names it, with the MCP description and the tool's
``inputSchema`` as its ``args_schema``: the JSON Schema dict itself, which
LangChain accepts and hands to the model unchanged (no conversion to lose a
``$ref``, an ``anyOf`` or a default). LangChain does not check a dict schema
against the arguments; the server does (or the client, made with
``validate_arguments=True``), and a refusal is a failing call like any other.

**Calls.** ``.invoke(args)`` runs the call on the caller's thread (no event
loop); ``await .ainvoke(args)`` awaits it (a ``coroutine``, not a worker
thread LangChain would pick), so the loop keeps running during a slow tool.
LangGraph's ``ToolNode`` takes the same paths for ``graph.invoke`` and
``graph.ainvoke``. An argument the model leaves out, or sends as ``null``
when it is optional, is not sent: the server's default applies.

**Results** (``response_format="content_and_artifact"``): the content is the
text a model should read (:func:`~mcpcall.registry.result_text`: the text
blocks, structured content as JSON when there is no text, an image or audio
block as ``[image/png, N bytes]``, never its base64). The artifact, which the
application sees and the model does not, is the result's wire dict
(``content`` with every block, images' base64 included, ``structuredContent``,
``_meta``): a plain dict, so a LangGraph checkpointer stores and restores it
(it warns about, and will refuse, an unregistered class such as
:class:`~mcpcall.types.CallToolResult`). ``.invoke(args)`` returns the
content; ``.invoke(tool_call)`` (what ``ToolNode`` does) returns a
``ToolMessage`` with ``content`` and ``artifact``.

**Failures.** Every failing call (``isError``, a timeout, a server that is
gone, a JSON-RPC error, arguments refused) raises
:class:`langchain_core.tools.ToolException` whose text is the model-safe text of
:class:`~mcpcall.errors.ToolCallFailed` (its ``__cause__``). As with any
LangChain tool, that exception propagates unless error handling is on, and
**LangGraph's ToolNode re-raises it by default** (its default handler only
turns bad-argument errors into a message). Turn it on in either place:

- ``ToolNode(tools, handle_tool_errors=True)`` (or an exception type, a string
  or a function, as ToolNode takes): the node answers with an error
  ``ToolMessage`` (``status="error"``) quoting the exception; for
  ``create_react_agent(model, ToolNode(tools, handle_tool_errors=True))``;
- ``langchain.tools(source, handle_tool_error=True)``: each tool answers with
  the failure's text alone as an error ``ToolMessage``, whatever runs it
  (a bare ``.invoke(args)`` then returns the text instead of raising).

**Progress.** LangChain's callbacks have no progress event: ``on_progress``
(``on_progress(tool_name, progress, total, message)``, called on the client's
callbacks thread) receives the server's progress notifications of every call.
"""

from __future__ import annotations

from typing import Any

from ._core import MCPTool, ToolCallFailed, ToolProgress, mcp_tools, require, result_text

_tools = require("langchain_core.tools", "langchain", "langchain-core")
_StructuredTool: Any = _tools.StructuredTool



class MCPStructuredTool(_StructuredTool):  # type: ignore[misc]
    """A ``StructuredTool`` that hands its function the model's arguments and nothing else.

    ``StructuredTool`` gives its ``_run`` LangChain's own ``config`` and
    ``run_manager``, which would replace an MCP argument of the same name;
    these take none, so an MCP tool may have arguments called ``config``,
    ``run_manager`` or ``callbacks``.
    """

    def _run(self, /, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    async def _arun(self, /, *args: Any, **kwargs: Any) -> Any:
        return await self.coroutine(*args, **kwargs)


def tools(source: Any, timeout: float | None = None, *, handle_tool_error: Any = False,
          on_progress: ToolProgress | None = None) -> list[Any]:
    """One LangChain ``StructuredTool`` per tool of ``source`` (a :class:`~mcpcall.Client` or :class:`~mcpcall.ToolRegistry`).

    ``timeout`` bounds the listing and is every call's default.
    ``handle_tool_error`` is set on every tool (``True``: a failure becomes an
    error ``ToolMessage`` with its text; see the module docstring);
    ``on_progress`` receives every call's progress.
    """
    return [_tool(mcp, handle_tool_error) for mcp in mcp_tools(source, timeout, on_progress=on_progress)]


def _tool(mcp: MCPTool, handle_tool_error: Any) -> Any:
    def run(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        try:
            result = mcp.call(mcp.arguments(kwargs))
        except ToolCallFailed as exc:
            raise _tools.ToolException(str(exc)) from exc
        return result_text(result), dict(result.raw)

    async def arun(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        try:
            result = await mcp.acall(mcp.arguments(kwargs))
        except ToolCallFailed as exc:
            raise _tools.ToolException(str(exc)) from exc
        return result_text(result), dict(result.raw)

    run.__name__ = arun.__name__ = mcp.name
    return MCPStructuredTool(
        name=mcp.name,
        description=mcp.description,
        args_schema=mcp.schema,
        func=run,
        coroutine=arun,
        response_format="content_and_artifact",
        handle_tool_error=handle_tool_error,
        metadata={"mcp_server": mcp.server, "mcp_tool": mcp.tool.name},
    )


__all__ = ["MCPStructuredTool", "ToolProgress", "tools"]
