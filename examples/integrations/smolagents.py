"""A smolagents ToolCallingAgent using the bundled demo server's tools through mcpcall, with no event loop.

Runs with no API key: a scripted model asks for echo, add and fail (a failing tool: the agent reads the error
and goes on), then answers. With OPENAI_API_KEY set it uses a real model instead (smolagents' OpenAIModel,
``pip install 'smolagents[openai]'``; MCPCALL_MODEL picks it, default gpt-4o-mini).

    python examples/integrations/smolagents.py
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path
from typing import Any

# this file is smolagents.py: run as a script, its folder comes first on sys.path and would shadow the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import smolagents  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole  # noqa: E402

import mcpcall  # noqa: E402
from mcpcall.integrations import smolagents as mcp_smolagents  # noqa: E402


class ScriptedModel(smolagents.Model):  # type: ignore[misc]
    """Asks for one tool call a step from a fixed script, then answers with the sum it was given."""

    script = [("echo", {"message": "hello from smolagents"}), ("add", {"a": 2, "b": 3}),
              ("fail", {"message": "the scripted failure"})]

    def __init__(self) -> None:
        super().__init__(model_id="scripted")
        self.steps = iter(self.script)
        self.ids = itertools.count(1)

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        name, arguments = next(self.steps, ("final_answer", {"answer": "5"}))
        call = ChatMessageToolCall(function=ChatMessageToolCallFunction(name=name, arguments=arguments),
                                   id=f"call_{next(self.ids)}", type="function")
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def model() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        return smolagents.OpenAIModel(model_id=os.environ.get("MCPCALL_MODEL", "gpt-4o-mini"))
    return ScriptedModel()


def main() -> None:
    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=20) as client:
        tools = mcp_smolagents.tools(client, timeout=20)
        print("tools:", ", ".join(tool.name for tool in tools))
        agent = smolagents.ToolCallingAgent(tools=tools, model=model(), max_steps=6, verbosity_level=-1)
        answer = agent.run("Echo a greeting, add 2 and 3, try the fail tool, then tell me the sum.")
        for step in agent.memory.steps:
            if not isinstance(step, ActionStep) or step.model_output_message is None:
                continue
            name = step.model_output_message.tool_calls[0].function.name  # a failed step records no tool_calls
            if name != "final_answer":
                print(f"{name} -> {f'error: {step.error}' if step.error else step.observations}")
        print("answer:", answer)


if __name__ == "__main__":
    main()
