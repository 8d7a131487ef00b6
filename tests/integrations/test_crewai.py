"""mcpcall.integrations.crewai: MCP tools as CrewAI BaseTools, through ``.run(**kwargs)``, ``await .arun(**kwargs)`` and a
crew's agent run with a scripted LLM (CrewAI's ReAct text), against the demo server and server-everything."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# no telemetry, tracing or version check (each would reach the network): read when CrewAI runs
CREWAI_OFFLINE = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true", "OTEL_SDK_DISABLED": "true",
                  "CREWAI_TRACING_ENABLED": "false", "CREWAI_DISABLE_VERSION_CHECK": "true"}
os.environ.update(CREWAI_OFFLINE)

from tests.integrations.conftest import framework, kill, no_running_loop, run_async, while_loop_runs  # noqa: E402

crewai = framework("crewai")

from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from crewai.tools.tool_failure import ToolFailure, ToolFailureReason  # noqa: E402

import mcpcall  # noqa: E402
from mcpcall.integrations import crewai as mcp_crewai  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Scripted(BaseLLM):  # type: ignore[misc]
    """An LLM that answers in CrewAI's ReAct format: the scripted actions one by one, then a final answer."""

    script: list[Any] = []
    seen: list[Any] = []

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None, **kwargs: Any) -> str:
        self.seen.append(messages)
        if self.script:
            name, arguments = self.script.pop(0)
            return f"Thought: I should use {name}\nAction: {name}\nAction Input: {json.dumps(arguments)}"
        return "Thought: I now know the final answer\nFinal Answer: all done"

    def supports_function_calling(self) -> bool:
        return False


def run_crew(tools: list[Any], script: list[tuple[str, Any]]) -> tuple[Any, Any, Scripted]:
    """A crew of one agent with a scripted LLM, run; its output, the agent, the LLM."""
    llm = Scripted(model="scripted", script=list(script), seen=[])
    agent = crewai.Agent(role="tester", goal="use the tools", backstory="a test", llm=llm, tools=tools, verbose=False,
                         max_iter=len(script) + 3)
    task = crewai.Task(description="use the tools", expected_output="text", agent=agent)
    output = crewai.Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
    return output, agent, llm


def observations(llm: Scripted) -> list[str]:
    """What the agent told the model each tool gave (the text after ``Observation:``), in order."""
    texts = [str(m["content"]).split("Observation:", 1)[1] for m in llm.seen[-1]
             if m["role"] == "assistant" and "Observation:" in str(m["content"])]
    return [text.split(REMINDER, 1)[0].strip() for text in texts]  # every few uses CrewAI adds the tool list again


REMINDER = "You ONLY have access to the following tools"


@pytest.fixture(scope="module", autouse=True)
def crewai_started() -> None:
    """CrewAI starts its event bus (a loop, a thread, their descriptors) at its first run, for good: do that
    before the leak checks of the tests begin, with a crew that uses no tool."""
    run_crew([], [])


@pytest.fixture
def loops_in_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """CrewAI's own run makes event loops (its event bus, its flow): count only those made during an MCP call, or a
    call made inside a running loop. Yields what went wrong ("loop made", "running loop"); "call" for each call."""
    import asyncio.base_events
    import threading

    from mcpcall.integrations._core import MCPTool

    seen: list[str] = []
    inside = threading.local()
    original_init, original_call = asyncio.base_events.BaseEventLoop.__init__, MCPTool.call

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(inside, "call", False):
            seen.append("loop made")
        original_init(self, *args, **kwargs)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append("call" if no_running_loop() else "running loop")
        inside.call = True
        try:
            return original_call(self, *args, **kwargs)
        finally:
            inside.call = False

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "__init__", init)
    monkeypatch.setattr(MCPTool, "call", call)
    return seen


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {tool.name: tool for tool in tools}


# ---------------------------------------------------------------- the tools and their schemas


def test_demo_tools_are_crewai_tools(demo: mcpcall.Client) -> None:
    tools = by_name(mcp_crewai.tools(demo, timeout=20))
    assert set(tools) == {"echo", "add", "slow", "weather", "fail", "boom", "confirm"}
    for name, tool in tools.items():
        assert isinstance(tool, BaseTool)
        assert tool.description == tool.mcp_tool.description and tool.description
        assert tool.args_schema.model_json_schema()  # a pydantic model CrewAI can render
        assert tool.mcp_tool.name == name
    fields = tools["slow"].args_schema.model_fields
    assert not fields["seconds"].is_required() and fields["seconds"].default == 1
    assert tools["echo"].args_schema.model_fields["message"].is_required()


def test_every_server_everything_tool_passes_crewai_validation(everything: mcpcall.Client) -> None:
    listed = everything.list_tools()
    tools = mcp_crewai.tools(everything, timeout=30)
    assert [t.name for t in tools] == [t.name for t in listed]
    for tool, mcp in zip(tools, listed):
        structured = tool.to_structured_tool()  # what an agent calls
        assert structured.args_schema is tool.args_schema
        schema = tool.args_schema.model_json_schema()
        assert set(schema.get("properties", {})) == set(mcp.input_schema.get("properties", {}))
        assert set(schema.get("required", [])) == set(mcp.input_schema.get("required", []))
        assert tool.description
    assert "get-sum" in {t.name for t in tools}


# ---------------------------------------------------------------- .run(**kwargs) and .arun


def test_run(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    tools = by_name(mcp_crewai.tools(demo, timeout=20, failures="raise"))
    assert tools["echo"].run(message="hi") == "hi"
    assert tools["echo"].run(message="hi", security_context={"agent_fingerprint": "x"}) == "hi"  # a key of CrewAI's own
    assert tools["add"].run(a=2, b=3) == "5.0"  # its text; a number is a float to pydantic
    assert tools["slow"].run(steps=1) == "done after 1 s"  # seconds left out: the server's default
    assert tools["slow"].run(seconds=0.05, steps=2.0) == "done after 0.05 s"  # an integer stays an int
    with pytest.raises(mcpcall.ToolCallFailed, match="the disk is full"):
        tools["fail"].run(message="the disk is full")
    with pytest.raises(mcpcall.ToolCallFailed, match="JSON-RPC error"):
        tools["boom"].run()
    with pytest.raises(ValueError, match="arguments validation failed"):  # CrewAI's own validation
        tools["echo"].run(note="no message")


def test_what_run_sends(demo: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI hands _run its model_dump(): the Nones of what the model left out are not sent, aliases come back."""
    from mcpcall.integrations._core import MCPTool

    sent: list[Any] = []
    monkeypatch.setattr(MCPTool, "call", lambda self, arguments=None, **kw: sent.append(arguments) or _text("ok"))
    tools = by_name(mcp_crewai.tools(demo, timeout=20))
    tools["slow"].run()
    tools["slow"].run(steps=3.0)
    tools["fail"].run(message=None)
    assert sent == [{"seconds": 1, "steps": 5}, {"seconds": 1, "steps": 3}, {}]
    assert type(sent[1]["steps"]) is int

    schema = {"type": "object", "additionalProperties": False, "required": ["from"],
              "properties": {"from": {"type": "string"}, "where": {"type": "object", "properties": {
                  "city": {"type": "string"}, "zip": {"type": ["string", "null"]}}}}}
    tool = mcp_crewai.make_tool(_mcp_tool(demo, "nested", schema))
    tool.run(**{"from": "here", "where": {"city": "Oslo"}})
    tool.run(from_="there")
    assert sent[3:] == [{"from": "here", "where": {"city": "Oslo"}}, {"from": "there"}]


def _text(text: str) -> Any:
    from mcpcall.types import CallToolResult, TextContent

    return CallToolResult(content=(TextContent(text=text),))


def _mcp_tool(client: mcpcall.Client, name: str, schema: dict[str, Any]) -> Any:
    from mcpcall.integrations._core import MCPTool
    from mcpcall.types import Tool

    return MCPTool(client, name, client.name, Tool(name=name, input_schema=schema, description="a made-up tool"), 20)


def test_arun_keeps_the_loop_running(demo: mcpcall.Client) -> None:
    slow = by_name(mcp_crewai.tools(demo, timeout=20))["slow"]
    result, ticks = run_async(lambda: while_loop_runs(slow.arun(seconds=0.5, steps=2)))
    assert result == "done after 0.5 s"
    assert ticks >= 5, ticks


def test_arun_from_a_registry_keeps_the_loop_running(registry: mcpcall.ToolRegistry) -> None:
    slow = by_name(mcp_crewai.tools(registry, timeout=20))["mcp__demo__slow"]
    result, ticks = run_async(lambda: while_loop_runs(slow.arun(seconds=0.5, steps=2)))
    assert result == "done after 0.5 s" and ticks >= 5, ticks


# ---------------------------------------------------------------- an agent run


def test_agent_run_from_a_client(demo: mcpcall.Client, loops_in_calls: list[str]) -> None:
    tools = mcp_crewai.tools(demo, timeout=20)
    output, agent, llm = run_crew(tools, [
        ("echo", {"message": "hello"}),
        ("add", {"a": 2, "b": 3}),
        ("slow", {"steps": 1}),  # seconds left out: the server's default (1 s)
    ])
    assert output.raw == "all done"
    assert [r["tool_name"] for r in agent.tools_results] == ["echo", "add", "slow"]
    seen = observations(llm)
    assert seen == ["hello", "5.0", "done after 1 s"]  # add's text (its structured content is {"sum": 5})
    assert loops_in_calls == ["call", "call", "call"]  # on a worker thread of CrewAI's, with no loop running there


def test_agent_run_from_a_registry(registry: mcpcall.ToolRegistry) -> None:
    tools = mcp_crewai.tools(registry, timeout=20)
    output, agent, llm = run_crew(tools, [("mcp__demo__echo", {"message": "via registry"}),
                                          ("mcp__demo__weather", {"city": "Oslo"})])
    assert output.raw == "all done"
    seen = observations(llm)
    assert seen[0] == "via registry" and "Oslo" in seen[1]
    assert registry.stats()["mcp__demo__echo"].calls == 1


def test_agent_run_against_server_everything(everything: mcpcall.Client) -> None:
    tools = mcp_crewai.tools(everything, timeout=30)
    output, agent, llm = run_crew(tools, [
        ("get-sum", {"a": 2, "b": 3}),
        ("get-resource-links", {}),  # count left out: the server's default (3)
        ("get-structured-content", {"location": "Chicago"}),
    ])
    seen = observations(llm)
    assert seen[0] == "The sum of 2 and 3 is 5."
    assert seen[1].count("Resource ") >= 3, seen[1]
    assert "temperature" in seen[2]
    assert output.tasks_output[0].tool_failures == []


def test_a_raising_tool_does_not_stop_the_crew(registry: mcpcall.ToolRegistry) -> None:
    tools = by_name(mcp_crewai.tools(registry, timeout=20, failures="raise"))
    tools["mcp__demo__slow"].mcp_tool.timeout = 0.3
    output, agent, llm = run_crew(list(tools.values()), [
        ("mcp__demo__fail", {"message": "the disk is full"}),  # isError
        ("mcp__demo__boom", {}),  # a JSON-RPC error
        ("mcp__demo__slow", {"seconds": 5}),  # a timeout
        ("mcp__demo__echo", {"message": "still here"}),
    ])
    assert output.raw == "all done"
    seen = observations(llm)
    assert "the disk is full" in seen[0] and "JSON-RPC error" in seen[1] and "did not answer in 0.3 s" in seen[2]
    assert seen[3] == "still here"
    failures = output.tasks_output[0].tool_failures
    assert [f.tool_name for f in failures] == ["mcp_demo_fail", "mcp_demo_boom", "mcp_demo_slow"]  # CrewAI's spelling
    assert failures[0].failure.code == "ToolCallFailed"
    assert registry.stats()["mcp__demo__fail"].calls > 1  # CrewAI calls a tool that raised again (its parsing attempts)


def test_failures_reported_as_crewai_tool_failures(registry: mcpcall.ToolRegistry) -> None:
    tools = mcp_crewai.tools(registry, timeout=20)  # failures="report", the default
    failure = by_name(tools)["mcp__demo__fail"].run(message="reported")
    assert isinstance(failure, ToolFailure) and failure.message == "reported"
    assert failure.reason == ToolFailureReason.MCP_ERROR
    output, agent, llm = run_crew(tools, [("mcp__demo__fail", {"message": "the disk is full"}),
                                          ("mcp__demo__echo", {"message": "still here"})])
    assert output.raw == "all done"
    seen = observations(llm)
    assert "the disk is full" in seen[0] and seen[1] == "still here"
    assert [f.failure.reason for f in output.tasks_output[0].tool_failures] == [ToolFailureReason.MCP_ERROR]
    assert registry.stats()["mcp__demo__fail"].calls == 2  # .run once, the agent once: no retries
    with pytest.raises(ValueError):
        mcp_crewai.tools(registry, failures="ignore")  # type: ignore[arg-type]


def test_invalid_arguments_reach_the_model(demo: mcpcall.Client) -> None:
    tools = mcp_crewai.tools(demo, timeout=20)
    output, agent, llm = run_crew(tools, [("slow", {"seconds": -1}),  # refused by the schema (minimum 0)
                                          ("echo", {"message": "still here"})])
    seen = observations(llm)
    assert "'seconds' must be a number >= 0" in seen[0], seen[0]  # the server's words
    assert seen[-1] == "still here"


def test_a_dead_server(demo: mcpcall.Client) -> None:
    tools = by_name(mcp_crewai.tools(demo, timeout=20))
    kill(demo)
    failure = tools["echo"].run(message="anyone?")
    assert isinstance(failure, ToolFailure) and "echo" in failure.message and "exited" in failure.message, failure
    output, agent, llm = run_crew(list(tools.values()), [("echo", {"message": "anyone?"})])
    assert output.raw == "all done"
    assert observations(llm)[0] == "tool 'echo' of server 'demo' failed: its process exited with code -9"


# ---------------------------------------------------------------- without CrewAI, and the example


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "crewai" or n.startswith("crewai.")]:
        monkeypatch.setitem(sys.modules, name, None)  # imported already: each one, or the cached ones still import
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.crewai", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[crewai\]'"):
        importlib.import_module("mcpcall.integrations.crewai")
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.crewai", raising=False)


def test_the_example_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(CREWAI_OFFLINE, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "integrations" / "crewai.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "tools: echo, add, slow, weather, fail, boom, confirm" in out.stdout
    assert "echo -> hello from crewai" in out.stdout
    assert "fail failed: the scripted failure" in out.stdout
    assert "answer: 5" in out.stdout


def test_on_progress_hears_every_call(demo: mcpcall.Client) -> None:
    events: list[tuple[Any, ...]] = []
    tools = by_name(mcp_crewai.tools(demo, timeout=20, on_progress=lambda *event: events.append(event)))
    assert tools["slow"].run(seconds=0.05, steps=2) == "done after 0.05 s"
    assert [event[:3] for event in events] == [("slow", 1, 2), ("slow", 2, 2)]  # all in, on return
