"""MCP tools for Pydantic AI, as :class:`pydantic_ai.Tool`\\ s (``Agent(model, tools=tools)``).

``tools(source)`` gives one ``Tool`` per MCP tool, made with
``Tool.from_schema``: its name (letters, digits, ``_`` and ``-``, at most 64
characters, as the model APIs take them), the MCP description, and the tool's
``inputSchema`` as its JSON schema, sent to the model as it is (Pydantic AI
adapts it to each provider; it does not validate the arguments against it,
the server does). An optional argument the model leaves out, or sends as
``null``, is not sent, so the server's default applies.

Pydantic AI runs a tool from its event loop (``Agent.run``, or the loop
``Agent.run_sync`` runs on the caller's thread): the tool's function is a
coroutine that awaits :meth:`MCPTool.acall`, so no I/O happens on the loop's
thread and the loop keeps running during a slow tool.

A failing tool raises Pydantic AI's tool-failure types, with
:class:`~mcpcall.ToolCallFailed`'s text (no secret), so the model reads it and
the run goes on (a plain exception would end the run):

* by default (``tool_error_behavior="failed"``) every failure is a
  :class:`pydantic_ai.ToolFailed`: the model sees a failed tool result, and
  no retry budget is spent, so a timeout or a dead server never ends the run
  with ``UnexpectedModelBehavior`` (bound a model that keeps calling with
  ``UsageLimits``);
* with ``tool_error_behavior="retry"`` (the default of Pydantic AI's own MCP
  toolsets), a failure the model can mend, an ``isError`` result or arguments
  the server or mcpcall refused, is a :class:`pydantic_ai.ModelRetry`
  (a retry prompt; once the tool's ``max_retries`` are spent the run ends
  with ``UnexpectedModelBehavior``), while a timeout, a dead server or another
  JSON-RPC error stays a ``ToolFailed``, as calling again would not help.

Arguments that are not JSON, or not a JSON object, never reach the tool: Pydantic
AI's own validation answers them with a retry prompt, as for any of its tools
(and ends the run once the tool's ``max_retries`` are spent).

Results are a :class:`pydantic_ai.ToolReturn`: its ``return_value`` is the
structured content when the result has some and no image or audio (what
Pydantic AI's own MCP client does: the model reads it as JSON), else the text
(:func:`~mcpcall.registry.result_text`), with images and audio as
:class:`pydantic_ai.BinaryContent` beside it in a list (sent to the model in
the tool result); its ``metadata`` (for the application, not the model) is
``{"text": ..., "structured_content": ...}``.

Progress notifications of a call become :class:`MCPProgress` events
(a :class:`pydantic_ai.CustomEvent` named ``mcpcall.progress``) in the run's
event stream (``event_stream_handler``, ``Agent.run_stream_events``,
``Agent.iter``), stamped with the tool call's id, all emitted before the
tool's result.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
from concurrent.futures import Future
from typing import Any, Literal

from ..client import Client
from ..errors import InvalidRequest, RPCError, SchemaValidationError, ToolCallFailed
from ..registry import ToolRegistry
from ..types import CallToolResult
from ._core import MAX_NAME, MCPTool, ToolProgress, Unique, mcp_tools, media, model_name, require, result_text

pydantic_ai = require("pydantic_ai", "pydantic_ai", "Pydantic AI (pydantic-ai-slim)")
pydantic_core = require("pydantic_core", "pydantic_ai", "Pydantic AI (pydantic-ai-slim)")

INVALID_PARAMS = -32602  # the JSON-RPC error a server answers for arguments it refuses

ToolErrorBehavior = Literal["failed", "retry"]

_OBJECT = pydantic_core.SchemaValidator(
    pydantic_core.core_schema.dict_schema(keys_schema=pydantic_core.core_schema.str_schema(),
                                          values_schema=pydantic_core.core_schema.any_schema()))


_CustomEvent: Any = pydantic_ai.CustomEvent


@dataclasses.dataclass(kw_only=True)
class MCPProgress(_CustomEvent, name="mcpcall.progress"):  # type: ignore[misc, call-arg]
    """A progress notification of an MCP tool call, in a Pydantic AI run's event stream."""

    progress: float
    total: float | None = None
    message: str | None = None


def tools(source: Client | ToolRegistry, timeout: float | None = None, *,
          tool_error_behavior: ToolErrorBehavior = "failed", on_progress: ToolProgress | None = None,
          **options: Any) -> list[Any]:
    """The tools of ``source`` as ``pydantic_ai.Tool``\\ s, one per MCP tool, listed now.

    ``timeout`` bounds the listing and is every call's default;
    ``tool_error_behavior`` is how a failure reaches the model (see the module);
    ``options`` set those attributes of every ``Tool`` (``max_retries``,
    ``requires_approval``, ``sequential``, ``timeout``, ``strict``, ``metadata``, …).
    ``on_progress(tool_name, progress, total, message)`` hears every call's progress (on the client's callbacks thread). (besides the run's ``MCPProgress`` events)
    """
    if tool_error_behavior not in ("failed", "retry"):
        raise ValueError(f"tool_error_behavior must be 'failed' or 'retry', not {tool_error_behavior!r}")
    out: list[Any] = []
    taken = Unique(max_length=MAX_NAME)
    for tool in mcp_tools(source, timeout, on_progress=on_progress):
        name = tool_name(tool.name, taken)
        made = pydantic_ai.Tool.from_schema(_function(tool, tool_error_behavior), name=name,
                                            description=tool.description, json_schema=tool.schema, takes_ctx=True)
        # from_schema accepts any JSON value; arguments that are no object must be a validation error (a retry
        # prompt), not a TypeError from calling the function with them that ends the run.
        made.function_schema.validator = _OBJECT
        for key, value in options.items():
            if key.startswith("_") or key in ("function", "function_schema", "name", "description", "takes_ctx") \
                    or not hasattr(made, key):
                raise TypeError(f"tools() got an option pydantic_ai.Tool has no attribute for: {key!r}")
            setattr(made, key, value)
        out.append(made)
    return out


tool_name = model_name  # the core's: [A-Za-z0-9_-]{1,64}, unique in linear time


def _function(tool: MCPTool, behavior: ToolErrorBehavior) -> Any:
    async def call(ctx: Any, /, **values: Any) -> Any:
        loop = asyncio.get_running_loop()
        emitted: list[Future[Any]] = []

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # On the client's callbacks thread: the event is emitted on the run's loop.
            emit = ctx.emit(MCPProgress(progress=progress, total=total, message=message))
            try:
                emitted.append(asyncio.run_coroutine_threadsafe(emit, loop))
            except RuntimeError:  # the loop is closed: the run is over
                emit.close()

        try:
            result = await tool.acall(tool.arguments(values), on_progress=on_progress)
        except ToolCallFailed as exc:
            raise failure(exc, behavior) from exc
        finally:
            if emitted:  # every event before the result (or the failure) in the stream
                await asyncio.gather(*(asyncio.wrap_future(f) for f in emitted), return_exceptions=True)
        return tool_return(result)

    call.__name__ = tool.name
    call.__doc__ = tool.description
    return call


def failure(exc: ToolCallFailed, behavior: ToolErrorBehavior = "failed") -> Exception:
    """``exc`` as Pydantic AI's tool failure: ``ModelRetry`` (``"retry"``, a failure the model can mend), else ``ToolFailed``."""
    text = str(exc)
    if behavior == "retry" and mendable(exc):
        return pydantic_ai.ModelRetry(text)  # type: ignore[no-any-return]
    return pydantic_ai.ToolFailed(text)  # type: ignore[no-any-return]


def mendable(exc: ToolCallFailed) -> bool:
    """True for a failure other arguments may mend: an ``isError`` result, arguments refused; not a timeout or a dead server."""
    if exc.result is not None:
        return True
    cause = exc.__cause__
    if isinstance(cause, InvalidRequest):
        return True
    if isinstance(cause, SchemaValidationError):
        return cause.schema == "inputSchema"
    return isinstance(cause, RPCError) and cause.code == INVALID_PARAMS


def tool_return(result: CallToolResult) -> Any:
    """``result`` as a ``ToolReturn``: structured content or text for the model, images and audio as ``BinaryContent``."""
    text = result_text(result)
    blocks = []
    for block in media(result):
        data = _decoded(block.data)
        if data is not None:
            blocks.append(pydantic_ai.BinaryContent.narrow_type(pydantic_ai.BinaryContent(data=data, media_type=block.mime_type)))
    value: Any
    if blocks:
        value = [text, *blocks]
    elif result.structured_content is not None:
        value = result.structured_content
    else:
        value = text
    metadata: dict[str, Any] = {"text": text}
    if result.structured_content is not None:
        metadata["structured_content"] = result.structured_content
    return pydantic_ai.ToolReturn(return_value=value, metadata=metadata)


def _decoded(data: bytes | str) -> bytes | None:
    """A block's bytes (mcpcall decodes them; base64 text is decoded here), or None when it is not base64."""
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


__all__ = ["MCPProgress", "ToolErrorBehavior", "failure", "mendable", "tool_name", "tool_return", "tools"]
