"""mcpcall.integrations.pydantic_ai: MCP tools as pydantic_ai.Tool, through Agent.run_sync / Agent.run.

The model is a ``FunctionModel`` that asks for the tool calls it is given, then answers; every assertion is on
the tool-return parts it was sent back (what a real model would read), or on the run's events.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.integrations.conftest import framework, kill, on_a_thread, run_async, while_loop_runs

pydantic_ai = framework("pydantic_ai")

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import mcpcall
from mcpcall.integrations import pydantic_ai as pai

ROOT = Path(__file__).resolve().parents[2]


class Script:
    """A FunctionModel's function: ``turns`` of tool calls (name, args), then a final text; keeps what came back."""

    def __init__(self, *turns: Sequence[tuple[str, Any]]) -> None:
        self.turns = list(turns)
        self.returns: list[list[Any]] = []  # per turn after the first: the parts sent back for its calls

    def __call__(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        requests = [m for m in messages if isinstance(m, ModelRequest)]
        if len(requests) > 1:
            self.returns.append([p for p in requests[-1].parts if getattr(p, "tool_call_id", None)])
        turn = len(requests) - 1
        if turn < len(self.turns):
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=f"t{turn}c{i}")
                                        for i, (name, args) in enumerate(self.turns[turn])])
        return ModelResponse(parts=[TextPart("finished")])

    async def stream(self, messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        """The same turns, streamed (``event_stream_handler`` needs a streaming model)."""
        response = self(messages, info)
        for i, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            else:
                args = part.args if isinstance(part.args, str) else json.dumps(part.args)
                yield {i: DeltaToolCall(name=part.tool_name, json_args=args, tool_call_id=part.tool_call_id)}

    def model(self) -> FunctionModel:
        return FunctionModel(self, stream_function=self.stream)

    def parts(self, turn: int = 0) -> list[Any]:
        """The parts sent back for the calls of ``turn``, in call order."""
        by_id = {p.tool_call_id: p for p in self.returns[turn]}
        return [by_id[f"t{turn}c{i}"] for i in range(len(self.turns[turn]))]


def run_sync(tools: list[Any], *turns: Sequence[tuple[str, Any]], **agent_options: Any) -> Script:
    """``Agent.run_sync`` with ``tools`` and a model making ``turns`` of calls, on a thread that runs no loop."""
    script = Script(*turns)
    agent = pydantic_ai.Agent(FunctionModel(script), tools=tools, **agent_options)
    result = on_a_thread(lambda: agent.run_sync("go"), "Agent.run_sync")
    assert result.output == "finished"
    return script


def outcomes(parts: list[Any]) -> list[tuple[str, Any]]:
    return [(getattr(p, "outcome", type(p).__name__), p.content) for p in parts]


# ---------------------------------------------------------------- the tools


def test_tools_from_a_client(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    assert [t.name for t in tools] == ["echo", "add", "slow", "weather", "fail", "boom", "confirm"]
    echo = tools[0]
    assert isinstance(echo, pydantic_ai.Tool)
    assert echo.description == "Return the given message unchanged."
    assert echo.tool_def.parameters_json_schema["properties"] == {"message": {"type": "string"}}
    assert echo.tool_def.parameters_json_schema["required"] == ["message"]
    assert tools[2].tool_def.parameters_json_schema["properties"]["steps"]["default"] == 5


def test_options_set_tool_attributes(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, max_retries=4, sequential=True)
    assert all(t.max_retries == 4 and t.sequential for t in tools)
    with pytest.raises(TypeError, match="no_such_option"):
        pai.tools(demo, no_such_option=1)
    with pytest.raises(ValueError, match="tool_error_behavior"):
        pai.tools(demo, tool_error_behavior="explode")  # type: ignore[arg-type]


def test_tool_names_fit_the_model_apis() -> None:
    assert pai.tool_name("get-sum") == "get-sum"
    assert pai.tool_name("files.read") == "files_read"
    assert pai.tool_name("y" * 80, {"y" * 64}) == "y" * 62 + "_2"


# ---------------------------------------------------------------- calls through Agent.run_sync


def test_success_and_structured_content(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    script = run_sync(tools, [("echo", {"message": "hi"}), ("add", '{"a": 2, "b": 3}')])
    echo, add = script.parts()
    assert isinstance(echo, ToolReturnPart) and echo.outcome == "success" and echo.content == "hi"
    assert add.content == {"sum": 5}
    assert add.metadata == {"text": "5", "structured_content": {"sum": 5}}
    assert echo.metadata == {"text": "hi"}


def test_from_a_registry(registry: mcpcall.ToolRegistry) -> None:
    tools = pai.tools(registry, timeout=20)
    script = run_sync(tools, [("mcp__demo__echo", {"message": "via registry"}), ("mcp__demo__fail", {"message": "no"})])
    assert outcomes(script.parts()) == [("success", "via registry"), ("failed", "no")]


def test_optional_arguments_left_out(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    script = run_sync(tools, [("slow", {"seconds": 0.05}), ("slow", {"seconds": 0.05, "steps": None}), ("boom", "")])
    parts = script.parts()
    assert [p.content for p in parts[:2]] == ["done after 0.05 s", "done after 0.05 s"]
    assert parts[2].outcome == "failed"  # empty arguments are none: the call was made, and answered with an error


def test_failures_are_tool_failed_and_the_run_goes_on(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    # the same failing call three turns running: no retry budget is spent, so the run ends with the model's answer
    script = run_sync(tools, *[[("fail", {"message": "it broke"}), ("boom", {})]] * 3)
    for turn in range(3):
        assert outcomes(script.parts(turn)) == [
            ("failed", "it broke"), ("failed", "tool 'boom' of server 'demo' failed: boom (JSON-RPC error -32603)")]


def test_retry_behaviour(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=0.3, tool_error_behavior="retry")
    script = run_sync(tools, [("fail", {"message": "try again"}), ("echo", {}), ("slow", {"seconds": 10})])
    fail, echo, slow = script.parts()
    assert fail.outcome == "retried" and fail.content == "try again"
    assert echo.outcome == "retried" and "message" in echo.content  # the server refused the arguments
    assert slow.outcome == "failed" and "did not answer in 0.3 s" in slow.content  # calling again would not help
    with pytest.raises(pydantic_ai.UnexpectedModelBehavior, match="max retries"):
        run_sync(tools, *[[("fail", {"message": "again"})]] * 3)


def test_invalid_arguments(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    script = run_sync(tools, [("echo", "{not json"), ("echo", "[1, 2]"), ("echo", {}), ("echo", {"message": 5})])
    bad_json, not_object, missing, wrong_type = script.parts()
    assert bad_json.outcome == "retried" and "json_invalid" in str(bad_json.content)  # Pydantic AI's own validation
    assert not_object.outcome == "retried" and "dict_type" in str(not_object.content)
    assert missing.outcome == "failed" and "message" in missing.content  # the server's (or mcpcall's) refusal
    assert wrong_type.outcome == "failed" and "message" in wrong_type.content


def test_timeout(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=0.3)
    script = run_sync(tools, [("slow", {"seconds": 10})], [("echo", {"message": "still here"})])
    assert outcomes(script.parts(0)) == [
        ("failed", "tool 'slow' of server 'demo' did not answer in 0.3 s; the call was cancelled")]
    assert outcomes(script.parts(1)) == [("success", "still here")]


def test_dead_server(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    kill(demo)
    [part] = run_sync(tools, [("echo", {"message": "anyone?"})]).parts()
    assert part.outcome == "failed" and part.content.startswith("tool 'echo' of server 'demo' failed:")


# ---------------------------------------------------------------- the loop, progress


@pytest.mark.parametrize("use_registry", [False, True])
def test_agent_run_keeps_the_loop_running(demo: mcpcall.Client, registry: mcpcall.ToolRegistry, use_registry: bool) -> None:
    tools = pai.tools(registry if use_registry else demo, timeout=20)
    name = "mcp__demo__slow" if use_registry else "slow"
    script = Script([(name, {"seconds": 0.5, "steps": 2})])
    agent = pydantic_ai.Agent(FunctionModel(script), tools=tools)
    result, ticks = run_async(lambda: while_loop_runs(agent.run("go")))
    assert result.output == "finished"
    assert outcomes(script.parts()) == [("success", "done after 0.5 s")]
    assert ticks >= 10, f"the loop ticked {ticks} times during a 0.5 s tool: it was blocked"


def test_progress_events_in_the_stream(demo: mcpcall.Client) -> None:
    tools = pai.tools(demo, timeout=20)
    script = Script([("slow", {"seconds": 0.2, "steps": 3})])
    agent = pydantic_ai.Agent(script.model(), tools=tools)
    events: list[Any] = []

    async def handler(ctx: Any, stream: Any) -> None:
        async for event in stream:
            events.append(event)

    result = run_async(lambda: agent.run("go", event_stream_handler=handler))
    assert result.output == "finished"
    progress = [e for e in events if isinstance(e, pai.MCPProgress)]
    assert [e.progress for e in progress] == [1, 2, 3]
    assert {(e.total, e.tool_call_id, e.tool_name, e.name) for e in progress} == {(3, "t0c0", "slow", "mcpcall.progress")}
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("MCPProgress") < kinds.index("FunctionToolResultEvent")  # every event before the result


def test_run_sync_from_a_plain_thread_and_no_loop_to_list(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    # Pydantic AI calls a tool only from its own loop (Agent.run_sync runs one); listing the tools makes none.
    tools = pai.tools(demo, timeout=20)
    assert len(tools) == 7
    made = pai.tool_return(demo.call_tool("add", {"a": 1, "b": 1}))
    assert made.return_value == {"sum": 2}


def test_run_sync_on_a_thread(demo: mcpcall.Client) -> None:
    script = run_sync(pai.tools(demo), [("echo", {"message": "thread"})])
    assert outcomes(script.parts()) == [("success", "thread")]


# ---------------------------------------------------------------- server-everything


def test_everything_schemas_pass_pydantic_ai(everything: mcpcall.Client) -> None:
    from pydantic_ai.profiles.google import GoogleJsonSchemaTransformer
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    tools = pai.tools(everything, timeout=30)
    assert {t.name for t in tools} == {t.name for t in everything.list_tools()}
    for tool in tools:
        schema = tool.tool_def.parameters_json_schema
        assert schema["type"] == "object"
        OpenAIJsonSchemaTransformer(schema, strict=None).walk()
        GoogleJsonSchemaTransformer(schema).walk()
    safe = ["echo", "get-sum", "get-annotated-message", "get-structured-content", "get-resource-links"]
    agent = pydantic_ai.Agent(TestModel(call_tools=safe), tools=tools)
    result = on_a_thread(lambda: agent.run_sync("go"), "Agent.run_sync")
    returns = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert sorted(p.tool_name for p in returns) == sorted(safe)
    # TestModel makes up arguments from each schema (a made-up enum value, say); the call is made and answered
    assert all(p.outcome in ("success", "failed") for p in returns), outcomes(returns)


def test_everything_calls_and_image(everything: mcpcall.Client) -> None:
    tools = pai.tools(everything, timeout=30)
    script = run_sync(tools, [("get-sum", {"a": 2, "b": 3}), ("get-tiny-image", {}), ("get-structured-content", {"location": "Chicago"})])
    total, image, weather = script.parts()
    assert total.outcome == "success" and "5" in str(total.content)
    images = [c for c in image.files if isinstance(c, pydantic_ai.BinaryContent)] if hasattr(image, "files") else []
    content = image.content if isinstance(image.content, list) else [image.content]
    binary = [c for c in content if isinstance(c, pydantic_ai.BinaryContent)] + images
    assert binary and binary[0].media_type == "image/png" and binary[0].is_image and binary[0].data.startswith(b"\x89PNG")
    texts = [c for c in content if isinstance(c, str)]
    assert texts and "[image/png," in texts[0] and "base64" not in texts[0]
    assert weather.content["temperature"] == 36  # structured content as the return value


# ---------------------------------------------------------------- import, example


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.pydantic_ai", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[pydantic_ai\]'"):
        importlib.import_module("mcpcall.integrations.pydantic_ai")


def test_example_runs_without_an_api_key() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "PYDANTIC_AI_MODEL")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "examples/integrations/pydantic_ai.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "echo -> 'hello from mcpcall'" in proc.stdout
    assert "add -> {'sum': 5}" in proc.stdout
    assert "fail (failed) -> 'on purpose'" in proc.stdout
    assert "progress of slow: 1/2, 2/2" in proc.stdout
    assert "final:" in proc.stdout


def test_on_progress_hears_every_call(demo: mcpcall.Client) -> None:
    events: list[tuple[Any, ...]] = []
    tools = pai.tools(demo, timeout=20, on_progress=lambda *event: events.append(event))
    script = run_sync(tools, [("slow", {"seconds": 0.05, "steps": 2})])
    assert [p.content for p in script.parts()] == ["done after 0.05 s"]
    assert wait_until(lambda: len(events) == 2), events  # awaited calls: the callbacks thread may still be at it
    assert [event[:3] for event in events] == [("slow", 1, 2), ("slow", 2, 2)]
