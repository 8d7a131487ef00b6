"""The OpenAI Agents SDK with MCP tools through mcpcall: no event loop of ours, no API key needed.

Starts the bundled demo server, gives its tools to an ``agents.Agent`` and runs it with ``Runner.run_sync``.
By default the model is scripted (it calls echo, add and fail, then answers with what they returned); with
``OPENAI_API_KEY`` set, a real model (``MCPCALL_MODEL``, default gpt-4.1-mini) is asked instead.

    python examples/integrations/openai_agents.py
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import agents
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import mcpcall
from mcpcall.integrations import openai_agents

CALLS = [("echo", {"message": "hello from mcpcall"}), ("add", {"a": 2, "b": 3}), ("fail", {"message": "on purpose"})]


class ScriptedModel(Model):
    """A model that asks for CALLS, then answers with the outputs it got back (what a real model would read)."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        outputs = {item["call_id"]: item["output"] for item in input
                   if isinstance(item, dict) and item.get("type") == "function_call_output"}
        if not outputs:
            items: list[Any] = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{i}", name=name,
                                                         arguments=json.dumps(args))
                                for i, (name, args) in enumerate(CALLS)]
        else:
            text = "; ".join(f"{name} said {outputs.get(f'call_{i}')!r}" for i, (name, _) in enumerate(CALLS))
            items = [ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                           content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
        return ModelResponse(output=items, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def main() -> int:
    real = bool(os.environ.get("OPENAI_API_KEY"))
    if not real:
        agents.set_tracing_disabled(True)  # nothing leaves this machine
    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=30) as client:
        tools = openai_agents.tools(client, timeout=30)
        print("tools:", ", ".join(tool.name for tool in tools))
        model: Any = os.environ.get("MCPCALL_MODEL", "gpt-4.1-mini") if real else ScriptedModel()
        agent = agents.Agent(name="demo", instructions="Call echo with 'hello from mcpcall', add 2 and 3, and fail"
                             " with 'on purpose'; then say what each returned.", model=model, tools=tools)
        result = agents.Runner.run_sync(agent, "Go.")
        names = {item.raw_item.call_id: item.raw_item.name for item in result.new_items
                 if isinstance(item, agents.ToolCallItem) and hasattr(item.raw_item, "call_id")}
        for item in result.new_items:
            if isinstance(item, agents.ToolCallOutputItem):
                name = names.get(item.raw_item.get("call_id"), "tool")
                extra = f"  (structured: {item.custom_data['structured_content']})" if item.custom_data else ""
                print(f"{name} -> {item.output}{extra}")
        print("final:", result.final_output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
