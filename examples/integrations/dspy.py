"""MCP tools in a DSPy ReAct agent: the demo server's tools, a scripted LM, no API key needed.

The scripted LM (DSPy's ``DummyLM``) asks for the weather in Paris, then calls
the demo's ``fail`` tool (ReAct records the error as the step's observation and
goes on), then finishes and answers. With ``OPENAI_API_KEY`` set, a real model
(``MCPCALL_MODEL``, default openai/gpt-4o-mini) plays the agent instead.

    python examples/integrations/dspy.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# This file is called dspy.py: run as a script, its folder comes first on sys.path and would stand in for the
# dspy package. Take the folder off.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import dspy
from dspy.utils.dummies import DummyLM

import mcpcall
from mcpcall.integrations import dspy as mcp_dspy

DEMO = [sys.executable, "-m", "mcpcall.demo_server"]


def model() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        return dspy.LM(os.environ.get("MCPCALL_MODEL", "openai/gpt-4o-mini"))
    return DummyLM([
        {"next_thought": "Look up the weather.", "next_tool_name": "weather", "next_tool_args": {"city": "Paris"}},
        {"next_thought": "Try the failing tool once.", "next_tool_name": "fail",
         "next_tool_args": {"message": "the umbrella service is down"}},
        {"next_thought": "I have what I need.", "next_tool_name": "finish", "next_tool_args": {}},
        {"reasoning": "The weather tool answered.", "answer": "Cloudy in Paris, about 23 °C."},
    ])


def main() -> None:
    with mcpcall.connect(DEMO, name="demo", timeout=20) as client:
        tools = mcp_dspy.tools(client, timeout=30)
        print("tools:", ", ".join(tool.name for tool in tools))
        with dspy.settings.context(lm=model()):
            react = dspy.ReAct("question -> answer", tools=tools, max_iters=5)
            prediction = react(question="What is the weather in Paris? Call `fail` once after the weather.")
        for key, value in prediction.trajectory.items():
            if key.startswith(("tool_name", "observation")):
                lines = str(value).strip().splitlines() or [""]
                # an error's observation holds a traceback: its first line and the error's own text are enough
                print(f"{key}: {lines[0]}" + (f" ... {lines[-1]}" if len(lines) > 1 else ""))
        print("answer:", prediction.answer)


if __name__ == "__main__":
    main()
