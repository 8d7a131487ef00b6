"""An agent loop in OpenAI's chat format: a model asks for tools, a ToolRegistry runs them, until an answer.

The model is scripted (no API key needed): it calls one tool, then two at once,
then sends arguments that are not JSON, reads the error it gets back, retries,
and answers. To use a real model, replace ``ScriptedModel`` with a function
that sends ``messages`` and ``tools`` to it, e.g.
``openai.OpenAI().chat.completions.create(model=..., messages=messages, tools=tools).choices[0].message``.

    python examples/agent_loop.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import mcpcall

DEMO = [sys.executable, "-m", "mcpcall.demo_server"]
Message = dict[str, Any]


def call(call_id: str, name: str, arguments: Any) -> Message:
    """One OpenAI chat tool call; ``arguments`` is sent as JSON text (a string is sent as is)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


class ScriptedModel:
    """Stands in for an LLM: given the conversation and the tools, returns the next assistant message."""

    def __init__(self) -> None:
        self.turn = 0

    def __call__(self, messages: Sequence[Message], tools: Sequence[Message]) -> Message:
        offered = [tool["function"]["name"] for tool in tools]

        def tool(short: str) -> str:  # the exposed name of a demo tool, as a model reads it from `tools`
            return next(name for name in offered if name.endswith("__" + short))

        answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        self.turn += 1
        if self.turn == 1:
            calls = [call("call_1", tool("weather"), {"city": "Paris"})]
        elif self.turn == 2:  # two calls in one turn: they run concurrently
            calls = [call("call_2a", tool("add"), {"a": 19, "b": 23}), call("call_2b", tool("echo"), {"message": "hi"})]
        elif self.turn == 3:  # models do send broken JSON now and then
            calls = [call("call_3", tool("add"), '{"a": 1, "b": ')]
        elif self.turn == 4 and answers["call_3"].startswith("Error"):  # it reads the error and tries again
            calls = [call("call_4", tool("add"), {"a": 1, "b": 2})]
        else:
            weather = json.loads(answers["call_1"])  # the tool's structured content, as JSON text
            text = (f"In Paris it is {weather['temperature_c']} °C and {weather['conditions']}; "
                    f"19 + 23 = {answers['call_2a']} (and 1 + 2 = {answers['call_4']}); the echo said {answers['call_2b']!r}.")
            return {"role": "assistant", "content": text}
        return {"role": "assistant", "content": None, "tool_calls": calls}


def run(registry: mcpcall.ToolRegistry, model: Any, question: str, max_turns: int = 10) -> list[Message]:
    """The loop: ask the model, run the tool calls of its reply, append their messages, until it answers."""
    tools = registry.to_openai_tools()
    messages: list[Message] = [
        {"role": "system", "content": "Use the tools to answer."},
        {"role": "user", "content": question},
    ]
    for _ in range(max_turns):
        reply = model(messages, tools)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return messages
        # One message per call, in order, each with the call's id; a failure is a message too, never an exception.
        messages.extend(registry.execute_many(reply["tool_calls"], timeout=30))
    raise RuntimeError(f"no answer after {max_turns} turns")


def show(messages: Sequence[Message]) -> str:
    """The conversation, one line per message or tool call."""
    lines = []
    for message in messages:
        if message["role"] == "tool":
            lines.append(f"  tool [{message['tool_call_id']}]: {message['content']}")
            continue
        if message.get("content"):
            lines.append(f"{message['role']}: {message['content']}")
        for tool_call in message.get("tool_calls") or []:
            function = tool_call["function"]
            lines.append(f"{message['role']} -> {function['name']}({function['arguments']}) [{tool_call['id']}]")
    return "\n".join(lines)


def main(server: Sequence[str] = DEMO) -> list[Message]:
    """Run the scripted conversation against ``server`` (the demo server); print it and return it."""
    with mcpcall.ToolRegistry({"demo": list(server)}) as registry:
        transcript = run(registry, ScriptedModel(), "What is the weather in Paris, and what is 19 + 23?")
    print(show(transcript))
    return transcript


if __name__ == "__main__":
    main()
