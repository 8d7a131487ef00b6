"""mcpcall.integrations.smolagents: MCP tools as smolagents Tools, through smolagents' own validation, ``tool(**kwargs)``
and a ``ToolCallingAgent`` run with a scripted model, against the demo server and server-everything."""

from __future__ import annotations

import asyncio
import importlib
import io
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import framework, kill, no_running_loop, run_async, while_loop_runs

smolagents = framework("smolagents")

from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import (  # noqa: E402
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    get_tool_json_schema,
)
from smolagents.tools import validate_tool_arguments  # noqa: E402

import PIL.Image  # noqa: E402

import mcpcall  # noqa: E402
from mcpcall.integrations._core import MCPTool  # noqa: E402
from mcpcall.types import CallToolResult, ImageContent, TextContent  # noqa: E402
from mcpcall.integrations import smolagents as mcp_smolagents  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Scripted(smolagents.Model):  # type: ignore[misc]
    """A model that asks for the given tool calls, one a step, then gives a final answer."""

    def __init__(self, calls: list[tuple[str, Any]], answer: str = "done") -> None:
        super().__init__(model_id="scripted")
        self.calls = list(calls)
        self.answer = answer
        self.offered: list[str] = []  # the tool names the agent offered at the first step
        self.ids = itertools.count(1)

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> Any:
        if not self.offered and tools_to_call_from:
            self.offered = [tool.name for tool in tools_to_call_from]
        name, arguments = self.calls.pop(0) if self.calls else ("final_answer", {"answer": self.answer})
        call = ChatMessageToolCall(function=ChatMessageToolCallFunction(name=name, arguments=arguments),
                                   id=f"call_{next(self.ids)}", type="function")
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def run_agent(tools: list[Any], calls: list[tuple[str, Any]]) -> tuple[Any, list[Any], Scripted]:
    """Run a ToolCallingAgent with a scripted model; its answer, its action steps (tool calls), the model."""
    model = Scripted(calls)
    agent = smolagents.ToolCallingAgent(tools=tools, model=model, max_steps=len(calls) + 2, verbosity_level=-1)
    answer = agent.run("use the tools")
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep) and called(s) != "final_answer"]
    assert len(steps) == len(calls), [called(s) for s in steps]
    return answer, steps, model


def called(step: Any) -> str:
    """The tool a step asked for (a failed step records no ``tool_calls``: read the model's message)."""
    return str(step.model_output_message.tool_calls[0].function.name)


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {tool.name: tool for tool in tools}


# ---------------------------------------------------------------- the tools and their inputs


def test_demo_tools_are_smolagents_tools_with_inputs_it_accepts(demo: mcpcall.Client) -> None:
    tools = by_name(mcp_smolagents.tools(demo, timeout=20))
    assert set(tools) == {"echo", "add", "slow", "weather", "fail", "boom", "confirm"}
    for tool in tools.values():
        assert isinstance(tool, smolagents.Tool)
        tool.validate_arguments()  # smolagents' own check of name, inputs, output_type
        get_tool_json_schema(tool)  # what a ToolCallingAgent sends the model
        for spec in tool.inputs.values():
            assert spec["description"] and spec["type"] in smolagents.tools.AUTHORIZED_TYPES
    assert tools["echo"].description == demo.list_tools()[0].description or tools["echo"].description
    assert tools["slow"].inputs["seconds"]["nullable"] is True and tools["slow"].inputs["seconds"]["default"] == 1
    assert "nullable" not in tools["echo"].inputs["message"]
    assert tools["add"].output_type == "object" and tools["add"].output_schema is not None
    assert tools["echo"].output_type == "string"
    assert get_tool_json_schema(tools["slow"])["function"]["parameters"]["required"] == []
    assert get_tool_json_schema(tools["add"])["function"]["parameters"]["required"] == ["a", "b"]


def test_every_server_everything_tool_passes_smolagents_validation(everything: mcpcall.Client) -> None:
    listed = everything.list_tools()
    tools = mcp_smolagents.tools(everything, timeout=30)
    assert len(tools) == len(listed)
    names = {tool.name for tool in tools}
    assert "get_sum" in names and all(name.isidentifier() for name in names)
    for tool, mcp in zip(tools, listed):
        tool.validate_arguments()
        schema = get_tool_json_schema(tool)["function"]
        assert schema["description"] == tool.description and tool.description
        assert set(schema["parameters"]["properties"]) == set(mcp.input_schema.get("properties", {}))
        assert set(schema["parameters"]["required"]) == set(mcp.input_schema.get("required", []))
    enum = by_name(tools)["get_structured_content"].inputs["location"]
    assert enum["enum"] == ["New York", "Chicago", "Los Angeles"] and enum["type"] == "string"


@pytest.mark.parametrize("schema, kind, nullable", [
    ({"type": "string"}, "string", False),
    ({"type": ["integer", "null"]}, "integer", True),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string", True),
    ({"anyOf": [{"type": "string"}, {"type": "number"}]}, ["string", "number", "integer"], False),
    ({"allOf": [{"type": "string"}, {"minLength": 1}]}, "any", False),
    ({}, "any", False),
    ({"type": "date"}, "any", False),
    ({"enum": ["a", "b"]}, "string", False),
    ({"$ref": "#/$defs/Point"}, "object", False),
    ({"$ref": "#/$defs/Missing"}, "any", False),
    ({"properties": {"x": {"type": "number"}}}, "object", False),
])
def test_types_smolagents_accepts(schema: dict[str, Any], kind: Any, nullable: bool) -> None:
    root = {"$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}}
    assert mcp_smolagents.smolagents_type(schema, root) == (kind, nullable)


class _Schema:
    """A stand-in for an MCPTool: only what inputs_for reads."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.properties = schema["properties"]
        self.required = schema.get("required", [])


def test_inputs_write_out_refs_and_keep_what_the_model_reads() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "next": {"$ref": "#/$defs/Point"}}}},
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "where"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "from": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["at", "tags"],
    }
    inputs = mcp_smolagents.inputs_for(_Schema(schema))  # type: ignore[arg-type]
    assert inputs["at"]["type"] == "object" and inputs["at"]["description"] == "where"
    assert inputs["at"]["properties"]["x"] == {"type": "number"}
    assert "$ref" not in str(inputs) and "$defs" not in str(inputs)  # the recursion stops, written out as {}
    assert inputs["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                              "description": "The tags argument (array)."}
    assert inputs["from"]["type"] == "string" and inputs["from"]["nullable"] is True and "anyOf" not in inputs["from"]


# ---------------------------------------------------------------- direct calls: tool(**kwargs)


def test_direct_calls(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    tools = by_name(mcp_smolagents.tools(demo, timeout=20))
    assert tools["echo"](message="hi") == "hi"
    assert tools["echo"]({"message": "as a dict"}) == "as a dict"
    assert tools["add"](a=2, b=3) == {"sum": 5}  # structured content
    assert tools["slow"](seconds=0.05, steps=None) == "done after 0.05 s"  # None: the server's default steps
    with pytest.raises(mcpcall.ToolCallFailed, match="bad thing"):
        tools["fail"](message="bad thing")
    with pytest.raises(mcpcall.ToolCallFailed, match="JSON-RPC error"):
        tools["boom"]()
    assert no_running_loop()


def test_images_as_text_by_default(everything: mcpcall.Client) -> None:
    tool = by_name(mcp_smolagents.tools(everything, timeout=30))["get_tiny_image"]
    assert tool.output_type == "string"
    text = tool()
    assert isinstance(text, str) and "[image/png," in text and "MCP logo" in text and len(text) < 500


def test_images_on_request(everything: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = by_name(mcp_smolagents.tools(everything, timeout=30, images=True))["get_tiny_image"]
    assert tool.output_type == "any"
    # server-everything's tiny PNG has a bad checksum (its iCCP chunk): PIL refuses it, so the text stands in
    text = tool()
    assert isinstance(text, str) and "[image/png," in text
    picture = io.BytesIO()
    PIL.Image.new("RGB", (3, 2), "red").save(picture, format="PNG")
    made = CallToolResult(content=(TextContent(text="a red square"), ImageContent(data=picture.getvalue(), mime_type="image/png")))
    monkeypatch.setattr(MCPTool, "call", lambda self, arguments=None, **kw: made)
    image = tool()
    assert isinstance(image, smolagents.AgentImage) and image.to_raw().size == (3, 2)
    answer, steps, _ = run_agent([tool], [("get_tiny_image", {})])
    assert steps[0].observations == "Stored 'image.png' in memory."


# ---------------------------------------------------------------- a ToolCallingAgent run


def test_agent_run_from_a_client(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    tools = mcp_smolagents.tools(demo, timeout=20)
    answer, steps, model = run_agent(tools, [
        ("echo", {"message": "hello"}),
        ("add", {"a": 2, "b": 3.5}),
        ("slow", {"steps": 1}),  # seconds left out: the server's default (1 s)
        ("slow", {"seconds": 0.05, "steps": None}),  # an optional argument sent as null
    ])
    assert answer == "done"
    assert "echo" in model.offered and "final_answer" in model.offered
    assert [s.observations for s in steps] == ["hello", "{'sum': 5.5}", "done after 1 s", "done after 0.05 s"]
    assert all(s.error is None for s in steps)


def test_agent_run_from_a_registry(registry: mcpcall.ToolRegistry) -> None:
    tools = mcp_smolagents.tools(registry, timeout=20)
    assert {t.name for t in tools} >= {"mcp__demo__echo", "mcp__demo__weather"}
    answer, steps, _ = run_agent(tools, [("mcp__demo__echo", {"message": "via registry"}),
                                         ("mcp__demo__fail", {"message": "registry failure"})])
    assert answer == "done"
    assert steps[0].observations == "via registry"
    assert "registry failure" in str(steps[1].error)
    assert registry.stats()["mcp__demo__echo"].calls == 1


def test_agent_run_against_server_everything(everything: mcpcall.Client) -> None:
    tools = mcp_smolagents.tools(everything, timeout=30)
    answer, steps, model = run_agent(tools, [
        ("get_sum", {"a": 2, "b": 3}),  # the MCP tool get-sum
        ("get_resource_links", {}),  # count left out: the server's default (3)
        ("get_structured_content", {"location": "Chicago"}),
    ])
    assert "get_sum" in model.offered
    assert steps[0].observations == "The sum of 2 and 3 is 5."
    assert steps[1].observations.count("Resource ") >= 3, steps[1].observations
    assert "temperature" in steps[2].observations
    assert all(s.error is None for s in steps)


def test_failures_reach_the_model_and_the_run_goes_on(demo: mcpcall.Client) -> None:
    tools = by_name(mcp_smolagents.tools(demo, timeout=20))
    tools["slow"].mcp_tool.timeout = 0.3  # this tool's calls may take 0.3 s
    answer, steps, _ = run_agent(list(tools.values()), [
        ("fail", {"message": "the disk is full"}),  # isError
        ("boom", {}),  # a JSON-RPC error
        ("slow", {"seconds": 5}),  # a timeout
        ("echo", {"message": 5}),  # refused by smolagents' validation
        ("echo", {}),  # a required argument left out
        ("slow", {"seconds": -1}),  # refused by the schema (minimum 0)
        ("echo", {"message": "still here"}),
    ])
    assert answer == "done"
    errors = [str(s.error) for s in steps]
    assert "ToolCallFailed: the disk is full" in errors[0]
    assert "JSON-RPC error" in errors[1] and "boom" in errors[1]
    assert "did not answer in 0.3 s" in errors[2]
    assert "message has type 'integer' but should be 'string'" in errors[3]
    assert "Argument message is required" in errors[4]
    assert "seconds" in errors[5] and ("minimum" in errors[5] or "0" in errors[5])
    assert steps[6].error is None and steps[6].observations == "still here"


def test_a_dead_server(demo: mcpcall.Client) -> None:
    tools = mcp_smolagents.tools(demo, timeout=20)
    kill(demo)
    answer, steps, _ = run_agent(tools, [("echo", {"message": "anyone?"})])
    assert answer == "done"
    assert "ToolCallFailed" in str(steps[0].error) and "echo" in str(steps[0].error)


# ---------------------------------------------------------------- from a running event loop


def test_from_a_running_event_loop(demo: mcpcall.Client) -> None:
    """smolagents has no async path: in a loop, a tool (or a whole agent run) goes to a thread, and the loop runs on."""
    slow = by_name(mcp_smolagents.tools(demo, timeout=20))["slow"]

    async def main() -> tuple[Any, int, str]:
        inline = slow(seconds=0.01, steps=1)  # called on the loop's thread it still works: no asyncio.run inside
        result, ticks = await while_loop_runs(asyncio.to_thread(slow, seconds=0.5, steps=2))
        return result, ticks, inline

    result, ticks, inline = run_async(main)
    assert inline == "done after 0.01 s" and result == "done after 0.5 s"
    assert ticks >= 5, ticks


# ---------------------------------------------------------------- without smolagents, and the example


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "smolagents", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.smolagents", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[smolagents\]'"):
        importlib.import_module("mcpcall.integrations.smolagents")
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.smolagents", raising=False)


def test_validate_tool_arguments_with_the_schema(demo: mcpcall.Client) -> None:
    slow = by_name(mcp_smolagents.tools(demo, timeout=20))["slow"]
    validate_tool_arguments(slow, {})
    validate_tool_arguments(slow, {"seconds": 1, "steps": None})
    with pytest.raises(TypeError):
        validate_tool_arguments(slow, {"steps": "five"})


def test_the_example_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "HF_TOKEN")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "integrations" / "smolagents.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "tools: echo, add, slow, weather, fail, boom, confirm" in out.stdout
    assert "echo -> hello from smolagents" in out.stdout
    assert "add -> {'sum': 5}" in out.stdout
    assert "fail -> error: " in out.stdout and "the scripted failure" in out.stdout
    assert "answer: 5" in out.stdout


def test_on_progress_hears_every_call(registry: mcpcall.ToolRegistry) -> None:
    events: list[tuple[Any, ...]] = []
    tools = by_name(mcp_smolagents.tools(registry, timeout=20, on_progress=lambda *event: events.append(event)))
    assert tools["mcp__demo__slow"](seconds=0.05, steps=2) == "done after 0.05 s"
    assert [event[:3] for event in events] == [("mcp__demo__slow", 1, 2), ("mcp__demo__slow", 2, 2)]  # all in, on return


def test_a_huge_image_is_described_not_decoded(demo: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PNG of a few KB can say it is 20,000 x 20,000 pixels: its header is read, and it is not decoded."""
    import zlib

    def png(width: int, height: int) -> bytes:
        def chunk(kind: bytes, body: bytes) -> bytes:
            return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

        header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
        rows = zlib.compress(b"\x00" * (width + 1) * 16)  # a few rows: PIL would read on and on
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")

    tool = by_name(mcp_smolagents.tools(demo, timeout=20, images=True))["echo"]
    loaded: list[Any] = []
    monkeypatch.setattr(PIL.Image.Image, "load", lambda self: loaded.append(self.size))
    for size in ((20_000, 20_000), (6_000, 5_000)):
        made = CallToolResult(content=(ImageContent(data=png(*size), mime_type="image/png"),))
        monkeypatch.setattr(MCPTool, "call", lambda self, arguments=None, made=made, **kw: made)
        text = tool(message="x")
        assert isinstance(text, str) and text.startswith("[image/png, ") and loaded == []
