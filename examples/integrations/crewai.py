"""A CrewAI crew whose agent uses the bundled demo server's tools through mcpcall, with no event loop.

Runs with no API key: a scripted LLM answers in CrewAI's ReAct format, asking for echo, add and fail (a
failing tool: the agent reads the error and goes on), then gives the sum. With OPENAI_API_KEY set it uses a
real model instead (MCPCALL_MODEL picks it, default gpt-4o-mini).

    python examples/integrations/crewai.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# this file is crewai.py: run as a script, its folder comes first on sys.path and would shadow the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
for _name in ("CREWAI_DISABLE_TELEMETRY", "CREWAI_DISABLE_TRACKING", "OTEL_SDK_DISABLED", "CREWAI_DISABLE_VERSION_CHECK"):
    os.environ.setdefault(_name, "true")  # no telemetry, no version check against PyPI
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

import crewai  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402

import mcpcall  # noqa: E402
from mcpcall.integrations import crewai as mcp_crewai  # noqa: E402


class ScriptedLLM(BaseLLM):  # type: ignore[misc]
    """Answers each turn with the next step of a fixed script, in CrewAI's ReAct text format."""

    script: list[Any] = [("echo", {"message": "hello from crewai"}), ("add", {"a": 2, "b": 3}),
                         ("fail", {"message": "the scripted failure"})]

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None, **kwargs: Any) -> str:
        if self.script:
            name, arguments = self.script.pop(0)
            return f"Thought: I should use {name}\nAction: {name}\nAction Input: {json.dumps(arguments)}"
        return "Thought: I now know the final answer\nFinal Answer: 5"

    def supports_function_calling(self) -> bool:
        return False


def llm() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        return crewai.LLM(model=os.environ.get("MCPCALL_MODEL", "gpt-4o-mini"))
    return ScriptedLLM(model="scripted")


def main() -> None:
    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=20) as client:
        tools = mcp_crewai.tools(client, timeout=20, failures="report")  # a failure is reported once, not retried
        print("tools:", ", ".join(tool.name for tool in tools))
        agent = crewai.Agent(role="calculator", goal="Use the tools you are given", backstory="A careful assistant.",
                             llm=llm(), tools=tools, max_iter=6, verbose=False)
        task = crewai.Task(description="Echo a greeting, add 2 and 3, try the fail tool, then tell me the sum.",
                           expected_output="the sum", agent=agent)
        output = crewai.Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
        for result in agent.tools_results:  # CrewAI adds the tool list to a result every few uses: the first line
            print(f"{result['tool_name']} -> {str(result['result']).strip().splitlines()[0]}")
        for record in output.tasks_output[0].tool_failures:
            print(f"{record.tool_name} failed: {record.failure.message}")
        print("answer:", output.raw)


if __name__ == "__main__":
    main()
