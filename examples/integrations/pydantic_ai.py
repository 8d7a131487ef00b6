"""Pydantic AI with MCP tools through mcpcall: no event loop of ours, no API key needed.

Starts the bundled demo server, gives its tools to a ``pydantic_ai.Agent`` and runs it with ``run_sync``.
By default the model is a scripted ``FunctionModel`` (it calls echo, add, fail and slow, then answers with what
they returned); with ``MCPCALL_MODEL`` set (e.g. ``openai:gpt-4.1-mini``, with ``OPENAI_API_KEY``), or
``OPENAI_API_KEY`` alone, a real model is asked instead. Progress of the slow tool arrives as events.

    python examples/integrations/pydantic_ai.py
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

# This file is named pydantic_ai.py: run as a script, its folder comes first on sys.path and would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import mcpcall
from mcpcall.integrations import pydantic_ai as mcp_pydantic_ai

CALLS = [("echo", {"message": "hello from mcpcall"}), ("add", {"a": 2, "b": 3}), ("fail", {"message": "on purpose"}),
         ("slow", {"seconds": 0.2, "steps": 2})]


def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
    """Asks for CALLS, then answers with what came back (what a real model would read)."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)] if len(messages) > 1 else []
    if not returns:
        return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=f"call_{i}")
                                    for i, (name, args) in enumerate(CALLS)])
    return ModelResponse(parts=[TextPart("; ".join(f"{p.tool_name} said {p.content!r}" for p in returns))])


async def scripted_stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
    """The same answers, streamed: an ``event_stream_handler`` (which gets the progress events) streams the model."""
    for i, part in enumerate(scripted(messages, info).parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {i: DeltaToolCall(name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=part.tool_call_id)}


def main() -> int:
    name = os.environ.get("MCPCALL_MODEL") or ("openai:gpt-4.1-mini" if os.environ.get("OPENAI_API_KEY") else "")
    model: Any = name or FunctionModel(scripted, stream_function=scripted_stream)
    progress: list[str] = []

    async def on_events(ctx: Any, stream: Any) -> None:
        async for event in stream:
            if isinstance(event, mcp_pydantic_ai.MCPProgress):
                progress.append(f"{event.progress:g}/{event.total:g}" if event.total else f"{event.progress:g}")

    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=30) as client:
        tools = mcp_pydantic_ai.tools(client, timeout=30)
        print("tools:", ", ".join(tool.name for tool in tools))
        agent = Agent(model, tools=tools, instructions="Call echo with 'hello from mcpcall', add 2 and 3, fail with"
                      " 'on purpose' and slow for 0.2 s in 2 steps; then say what each returned.")
        result = agent.run_sync("Go.", event_stream_handler=on_events)
        for message in result.all_messages():
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        outcome = "" if part.outcome == "success" else f" ({part.outcome})"
                        print(f"{part.tool_name}{outcome} -> {part.content!r}")
        if progress:
            print("progress of slow:", ", ".join(progress))
        print("final:", result.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
