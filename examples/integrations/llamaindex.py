"""A LlamaIndex FunctionAgent whose tools are an MCP server's, called through mcpcall.

Run it from the checkout (no API key needed: a scripted LLM plays the model)::

    python examples/integrations/llamaindex.py

With ``OPENAI_API_KEY`` set (and ``pip install llama-index-llms-openai``), a real
model (``MCPCALL_MODEL``, default ``gpt-4o-mini``) chooses the calls instead.

It starts the bundled demo server, first calls one tool the synchronous way
(``tool.call``: no event loop), then runs the agent, which awaits its tool
calls (``tool.acall``) on asyncio's loop, and prints each tool result. A
failing tool reaches the agent as ``ToolOutput(is_error=True)`` and the run
goes on.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

import mcpcall
from mcpcall.integrations import llamaindex

QUESTION = "What is 2 + 3? Then echo 'hello', and show me what a failing tool looks like."


def scripted(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Plays the LLM: first asks for three tool calls, then answers with what the tools said."""
    results = [m.content or "" for m in messages if m.role == MessageRole.TOOL]
    if not results:
        calls = [("add", {"a": 2, "b": 3}), ("echo", {"message": "hello"}), ("fail", {"message": "out of coffee"})]
        return ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id=f"call_{i}", tool_name=name, tool_kwargs=args) for i, (name, args) in enumerate(calls)])
    return ChatMessage(role="assistant", content="The tools said: " + "; ".join(results))


def llm() -> Any:
    if not os.environ.get("OPENAI_API_KEY"):
        return MockFunctionCallingLLM(response_generator=scripted)
    from llama_index.llms.openai import OpenAI  # pip install llama-index-llms-openai

    return OpenAI(model=os.environ.get("MCPCALL_MODEL", "gpt-4o-mini"))


async def run(agent: FunctionAgent) -> Any:
    handler = agent.run(user_msg=QUESTION)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            output = event.tool_output
            if output.is_error:
                print(f"{event.tool_name} -> error: {output.content}")
            else:
                print(f"{event.tool_name} -> {output.content}")
                structured = getattr(output.raw_output, "structured_content", None)
                if structured is not None:
                    print(f"   structured content: {structured}")
    return await handler


def main() -> None:
    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=30) as client:
        tools = llamaindex.tools(client, timeout=30)
        print("tools:", ", ".join(tool.metadata.name for tool in tools))
        echo = next(tool for tool in tools if tool.metadata.name == "echo")
        print("a sync call:", echo.call(message="no event loop here").content)
        answer = asyncio.run(run(FunctionAgent(tools=tools, llm=llm())))
        print("final answer:", answer.response.content)


if __name__ == "__main__":
    main()
