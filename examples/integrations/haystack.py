"""MCP tools in a Haystack Agent: the demo server's tools, a scripted chat generator, no API key needed.

The scripted generator asks for the weather in Paris, then calls the demo's
``fail`` tool (the Agent hands the model the error and goes on), then answers.
With ``OPENAI_API_KEY`` set, Haystack's ``OpenAIChatGenerator`` (model
``MCPCALL_MODEL``, default gpt-4o-mini) is the model instead.

    python examples/integrations/haystack.py
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

# This file is called haystack.py: run as a script, its folder comes first on sys.path and would stand in for the
# haystack package. Take the folder off.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from haystack import component
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall

import mcpcall
from mcpcall.integrations import haystack as mcp_haystack

DEMO = [sys.executable, "-m", "mcpcall.demo_server"]


@component
class ScriptedGenerator:
    """Stands in for a chat model: one tool call per step, then an answer made of what the tools said."""

    def __init__(self) -> None:
        self.script = [("weather", {"city": "Paris"}), ("fail", {"message": "the umbrella service is down"})]

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        if self.script:
            name, arguments = self.script.pop(0)
            return {"replies": [ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=name, arguments=arguments)])]}
        weather = next(m.tool_call_result.result for m in messages if m.tool_call_result is not None)
        return {"replies": [ChatMessage.from_assistant(f"I looked it up: {weather!r}")]}


def generator() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        from haystack.components.generators.chat import OpenAIChatGenerator

        return OpenAIChatGenerator(model=os.environ.get("MCPCALL_MODEL", "gpt-4o-mini"))
    return ScriptedGenerator()


def main() -> None:
    # the Agent logs every failed tool call (to stdout); this example prints the tool messages itself
    logging.getLogger("haystack.components.agents.tool_calling").setLevel(logging.CRITICAL)
    with mcpcall.connect(DEMO, name="demo", timeout=20) as client:
        tools = mcp_haystack.tools(client, timeout=30)
        print("tools:", ", ".join(tool.name for tool in tools))
        agent = Agent(chat_generator=generator(), tools=tools,
                      system_prompt="Use the tools. Call `fail` once after the weather, then answer.")
        result = agent.run(messages=[ChatMessage.from_user("What is the weather in Paris?")])
        for message in result["messages"]:
            outcome = message.tool_call_result
            if outcome is not None:
                flag = " (error)" if outcome.error else ""
                print(f"tool {outcome.origin.tool_name}{flag} -> {outcome.result}")
        print("answer:", result["last_message"].text)


if __name__ == "__main__":
    main()
