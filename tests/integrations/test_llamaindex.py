"""mcpcall.integrations.llamaindex: MCP tools as LlamaIndex FunctionTools, through .call, .acall,
call_tool_with_selection and acall_tool_with_selection, a FunctionAgent and a ReActAgent run by a scripted LLM,
against the demo server and server-everything, from a Client and from a ToolRegistry."""

from __future__ import annotations

import pytest

from tests.integrations.conftest import framework, kill, nested_parameters, run_async, while_loop_runs

framework("llama_index.core")

import base64
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool, ToolOutput, acall_tool_with_selection, call_tool_with_selection
from pydantic import BaseModel

import mcpcall
from mcpcall.integrations import llamaindex
from tests.conftest import ROOT, child_pythonpath, demo_argv


def by_name(tools: list[FunctionTool]) -> dict[str, FunctionTool]:
    return {tool.metadata.name: tool for tool in tools}


def selection(name: str, **kwargs: Any) -> ToolSelection:
    return ToolSelection(tool_id="call_1", tool_name=name, tool_kwargs=kwargs)


class Script:
    """A scripted function-calling LLM: first all the given tool calls, then ``answer``; it keeps what it was sent."""

    def __init__(self, *calls: tuple[str, dict[str, Any]], answer: str = "finished") -> None:
        self.calls = calls
        self.answer = answer
        self.seen: list[list[ChatMessage]] = []
        self.llm = MockFunctionCallingLLM(response_generator=self.respond)

    def respond(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.seen.append(list(messages))
        if not any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role="assistant", blocks=[
                ToolCallBlock(tool_call_id=f"call_{i}", tool_name=name, tool_kwargs=args)
                for i, (name, args) in enumerate(self.calls)])
        return ChatMessage(role="assistant", content=self.answer)

    def tool_texts(self) -> list[str]:
        """What the LLM read of each tool's output, in its last turn."""
        return [m.content or "" for m in self.seen[-1] if m.role == MessageRole.TOOL]


async def run_agent(agent: Any, question: str = "go") -> tuple[Any, list[ToolCallResult]]:
    handler = agent.run(user_msg=question)
    results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    return await handler, results


# ---------------------------------------------------------------- the tools


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("llama_index", "llama_index.core", "llama_index.core.tools", "llama_index.core.base.llms.types"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.llamaindex")
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[llamaindex\]'"):
        importlib.import_module("mcpcall.integrations.llamaindex")


def test_tools_of_a_client_are_function_tools_with_both_paths(demo: mcpcall.Client) -> None:
    tools = by_name(llamaindex.tools(demo))
    listed = {tool.name: tool for tool in demo.list_tools()}
    assert set(tools) == set(listed)
    for name, tool in tools.items():
        assert isinstance(tool, FunctionTool)
        assert tool.metadata.description == listed[name].description
        assert issubclass(tool.metadata.fn_schema, BaseModel)
        assert not inspect.iscoroutinefunction(tool.fn)  # ours, not LlamaIndex's asyncio_run wrapper
        assert inspect.iscoroutinefunction(tool.async_fn)
        assert tool.fn is tool.real_fn
    slow = tools["slow"].metadata.get_parameters_dict()
    assert "required" not in slow
    assert (slow["properties"]["seconds"]["default"], slow["properties"]["steps"]["type"]) == (1, "integer")
    assert tools["echo"].metadata.get_parameters_dict()["required"] == ["message"]


def test_every_server_everything_tool_passes_llamaindex_checks(everything: mcpcall.Client) -> None:
    tools = llamaindex.tools(everything)
    assert {tool.metadata.name for tool in tools} == {tool.name for tool in everything.list_tools()}
    for tool in tools:
        spec = tool.metadata.to_openai_tool()
        assert spec["function"]["name"] == tool.metadata.name  # unchanged: the agent finds the tool it shows
        json.loads(tool.metadata.fn_schema_str)
    annotated = by_name(tools)["get-annotated-message"].metadata.get_parameters_dict()
    assert annotated["required"] == ["messageType"]
    assert annotated["properties"]["messageType"]["enum"] == ["error", "success", "debug"]


def test_a_name_llamaindex_would_rewrite_is_rewritten_here() -> None:
    assert llamaindex._name("get-sum", set()) == "get-sum"
    assert llamaindex._name("files.read", {"files_read"}) == "files_read_2"


def test_server_everything_calls_and_the_image_as_an_image_block(everything: mcpcall.Client) -> None:
    tools = by_name(llamaindex.tools(everything))
    assert tools["get-sum"].call(a=2, b=3).content == "The sum of 2 and 3 is 5."
    output = tools["get-tiny-image"].call()
    images = [b for b in output.blocks if isinstance(b, ImageBlock)]
    assert len(images) == 1 and images[0].image_mimetype == "image/png"
    assert base64.b64decode(images[0].image)[:4] == b"\x89PNG"
    assert "[image/png" in output.content
    assert images[0].image[:40].decode() not in output.content  # no base64 text for the model
    assert isinstance(output.raw_output, mcpcall.CallToolResult)


def test_call_runs_on_the_callers_thread_with_no_event_loop(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    tools = by_name(llamaindex.tools(demo))
    assert tools["echo"].call(message="hello").content == "hello"
    output = tools["add"].call(a=2, b=3.5)
    assert isinstance(output, ToolOutput) and not output.is_error
    assert output.content == "5.5" and [type(b) for b in output.blocks] == [TextBlock]
    assert output.raw_output.structured_content == {"sum": 5.5}
    assert output.raw_input["kwargs"] == {"a": 2, "b": 3.5}
    assert call_tool_with_selection(selection("echo", message="picked"), list(tools.values())).content == "picked"


def test_optional_arguments_left_out_or_null_get_the_servers_default(demo: mcpcall.Client) -> None:
    seen: list[tuple[str, float, Any, Any]] = []
    slow = by_name(llamaindex.tools(demo, on_progress=lambda *event: seen.append(event)))["slow"]
    assert slow.call(seconds=0.05, steps=None).content == "done after 0.05 s"
    assert len(seen) == 5 and all(event[0] == "slow" for event in seen)  # steps' default, 5, applied
    output = call_tool_with_selection(selection("slow", seconds=0.05), [slow])
    assert (output.is_error, output.content) == (False, "done after 0.05 s")


def test_acall_keeps_the_loop_running_from_a_client_and_a_registry(demo: mcpcall.Client,
                                                                   registry: mcpcall.ToolRegistry) -> None:
    for tool in (by_name(llamaindex.tools(demo))["slow"], by_name(llamaindex.tools(registry))["mcp__demo__slow"]):
        output, ticks = run_async(lambda tool=tool: while_loop_runs(tool.acall(seconds=0.5)))
        assert output.content == "done after 0.5 s"
        assert ticks >= 5, f"the loop ticked {ticks} times during a 0.5 s tool"
    tools = llamaindex.tools(registry)
    output = run_async(lambda: acall_tool_with_selection(selection("mcp__demo__add", a=1, b=2), tools))
    assert output.raw_output.structured_content == {"sum": 3}


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("name, args, text", [
    ("fail", {"message": "it broke"}, "it broke"),
    ("boom", {}, "JSON-RPC error -32603"),
    ("echo", {"message": 5}, "'message' must be a string"),  # refused by the server
])
def test_a_failing_tool_raises_and_is_an_error_output_for_llamaindex(demo: mcpcall.Client, name: str,
                                                                      args: dict[str, Any], text: str) -> None:
    tools = llamaindex.tools(demo)
    tool = by_name(tools)[name]
    with pytest.raises(mcpcall.ToolCallFailed, match=text):
        tool.call(**args)
    with pytest.raises(mcpcall.ToolCallFailed, match=text):
        run_async(lambda: tool.acall(**args))
    output = call_tool_with_selection(selection(name, **args), tools)
    assert output.is_error and text in output.content
    assert isinstance(output.exception, mcpcall.ToolCallFailed)
    output = run_async(lambda: acall_tool_with_selection(selection(name, **args), tools))
    assert output.is_error and text in output.content


def test_arguments_refused_by_the_client_before_sending() -> None:
    with mcpcall.connect(demo_argv(), name="demo", timeout=20, validate_arguments=True) as client:
        tools = llamaindex.tools(client)
        output = call_tool_with_selection(selection("echo", message=5), tools)
        assert output.is_error and "was not called: its arguments do not match" in output.content


def test_a_timeout_is_an_error(demo: mcpcall.Client) -> None:
    tools = llamaindex.tools(demo, timeout=0.3)
    with pytest.raises(mcpcall.ToolCallFailed, match=r"did not answer in 0.3 s"):
        by_name(tools)["slow"].call(seconds=5)
    output = run_async(lambda: acall_tool_with_selection(selection("slow", seconds=5), tools))
    assert output.is_error and "did not answer in 0.3 s" in output.content


def test_a_dead_server_is_an_error(demo: mcpcall.Client) -> None:
    tools = llamaindex.tools(demo)
    kill(demo)
    output = call_tool_with_selection(selection("echo", message="anyone?"), tools)
    assert output.is_error and "tool 'echo' of server 'demo' failed" in output.content
    output = run_async(lambda: acall_tool_with_selection(selection("echo", message="anyone?"), tools))
    assert output.is_error and "tool 'echo' of server 'demo' failed" in output.content


# ---------------------------------------------------------------- agents with a scripted LLM


def test_a_function_agent_calls_tools_of_a_client(demo: mcpcall.Client) -> None:
    script = Script(("add", {"a": 1, "b": 2}), ("slow", {"seconds": 0.5}), ("fail", {"message": "nope"}))
    agent = FunctionAgent(tools=llamaindex.tools(demo), llm=script.llm)
    (answer, results), ticks = run_async(lambda: while_loop_runs(run_agent(agent)))
    outputs = {r.tool_name: r.tool_output for r in results}  # the calls run concurrently: in any order
    add, slow, fail = outputs["add"], outputs["slow"], outputs["fail"]
    assert (add.content, add.raw_output.structured_content) == ("3", {"sum": 3})
    assert (slow.content, slow.is_error) == ("done after 0.5 s", False)  # steps left out
    assert fail.is_error and fail.content == "nope"
    assert sorted(script.tool_texts()) == ["3", "done after 0.5 s", "nope"]
    assert str(answer.response.content) == "finished"
    assert ticks >= 5, f"the loop ticked {ticks} times during a 0.5 s tool"


def test_a_function_agent_calls_tools_of_a_registry(registry: mcpcall.ToolRegistry) -> None:
    script = Script(("mcp__demo__echo", {"message": "via registry"}), ("mcp__demo__boom", {}))
    agent = FunctionAgent(tools=llamaindex.tools(registry), llm=script.llm)
    _, results = run_async(lambda: run_agent(agent))
    outputs = {r.tool_name: r.tool_output for r in results}
    echo, boom = outputs["mcp__demo__echo"], outputs["mcp__demo__boom"]
    assert echo.content == "via registry"
    assert boom.is_error and "JSON-RPC error -32603" in boom.content
    stats = registry.stats()
    assert (stats["mcp__demo__echo"].calls, stats["mcp__demo__boom"].errors) == (1, 1)


def test_a_react_agent_calls_a_tool_it_read_from_the_prompt(demo: mcpcall.Client) -> None:
    seen: list[str] = []

    def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append("\n".join(m.content or "" for m in messages))
        if len(seen) == 1:
            return ChatMessage(role="assistant", content=(
                'Thought: I need to use a tool.\nAction: add\nAction Input: {"a": 2, "b": 3}'))
        return ChatMessage(role="assistant", content="Thought: I can answer.\nAnswer: it is 5")

    agent = ReActAgent(tools=llamaindex.tools(demo), llm=MockFunctionCallingLLM(response_generator=respond))
    answer, results = run_async(lambda: run_agent(agent))
    assert [r.tool_output.content for r in results] == ["5"]
    assert "Add a and b" in seen[0]  # the MCP description is in the ReAct prompt
    assert "Observation: 5" in seen[1]  # what the LLM read of the result
    assert "it is 5" in str(answer.response.content)


# ---------------------------------------------------------------- the example


def test_the_example_runs_with_a_scripted_llm() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = child_pythonpath()
    out = subprocess.run([sys.executable, str(Path(ROOT, "examples", "integrations", "llamaindex.py"))],
                         check=False, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "add -> 5" in out.stdout
    assert "fail -> error: out of coffee" in out.stdout
    assert "final answer:" in out.stdout


def test_a_schema_with_refs_enums_nullables_and_a_keyword_name_reaches_the_model() -> None:
    parameters = nested_parameters(lambda mcp: llamaindex._tool(mcp, "nested").metadata.to_openai_tool())
    (item,) = parameters["$defs"].values()
    assert parameters["properties"]["items"]["items"] == {"$ref": f"#/$defs/{item['title']}"}
    assert item["required"] == ["id"] and item["properties"]["id"]["type"] == "integer"
    assert (parameters["properties"]["mode"]["enum"], parameters["properties"]["mode"]["default"]) == (["a", "b"], "a")
    assert {"type": "null"} in parameters["properties"]["note"]["anyOf"]
