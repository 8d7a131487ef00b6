"""mcpcall.integrations.haystack: MCP tools as Haystack ``Tool``\\ s, run by Haystack's ``Agent`` with a scripted chat
generator (sync and async), against the demo server and server-everything, from a Client and from a ToolRegistry."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import framework, kill, no_running_loop, run_async, while_loop_runs

framework("haystack")

from haystack import component
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ImageContent, ToolCall
from haystack.tools import Tool
from haystack.tools.errors import ToolInvocationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mcpcall.integrations import haystack as mcp_haystack

ROOT = Path(__file__).resolve().parents[2]


@component
class ScriptedGenerator:
    """A chat generator that answers with the tool calls it was given, one step each, then a final text.

    It records the messages of every call, so a test can read what the model would have read.
    """

    def __init__(self, steps: list[list[tuple[str, dict[str, Any]]]], final: str = "finished") -> None:
        self.steps = list(steps)
        self.final = final
        self.seen: list[list[ChatMessage]] = []
        self.offered: list[list[str]] = []

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        self.seen.append(list(messages))
        self.offered.append([t.name for t in tools or []])
        if self.steps:
            calls = self.steps.pop(0)
            return {"replies": [ChatMessage.from_assistant(tool_calls=[
                ToolCall(tool_name=name, arguments=args, id=f"call_{len(self.seen)}_{i}") for i, (name, args) in enumerate(calls)
            ])]}
        return {"replies": [ChatMessage.from_assistant(self.final)]}


def agent_run(tools: list[Any], steps: list[list[tuple[str, dict[str, Any]]]], **options: Any) -> tuple[dict[str, Any], ScriptedGenerator]:
    generator = ScriptedGenerator(steps)
    agent = Agent(chat_generator=generator, tools=tools, **options)
    return agent.run(messages=[ChatMessage.from_user("go")]), generator


def tool_results(result: dict[str, Any]) -> list[Any]:
    """The ToolCallResults of a run, in order."""
    return [m.tool_call_result for m in result["messages"] if m.tool_call_result is not None]


# ---------------------------------------------------------------- the tools


def test_tools_are_haystack_tools_with_description_and_schema(demo: Any) -> None:
    tools = mcp_haystack.tools(demo)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"echo", "add", "slow", "weather", "fail", "boom", "confirm"}
    assert all(isinstance(t, Tool) for t in tools)
    listed = {t.name: t for t in demo.list_tools()}
    assert by_name["echo"].description == listed["echo"].description
    slow = by_name["slow"].parameters
    assert slow["properties"]["seconds"]["default"] == 1 and "required" not in slow
    assert by_name["echo"].parameters["required"] == ["message"]
    assert by_name["echo"].function is not None and by_name["echo"].async_function is not None


def test_every_server_everything_tool_passes_haystack_validation(everything: Any) -> None:
    listed = everything.list_tools()
    tools = mcp_haystack.tools(everything)
    assert [t.name for t in tools] == [t.name for t in listed]
    assert "get-sum" in {t.name for t in tools}
    for tool in tools:
        Draft202012Validator.check_schema(tool.parameters)
        Tool(name=tool.name, description=tool.description, parameters=tool.parameters, function=tool.function)
        assert tool.description


def test_a_schema_haystack_refuses_is_repaired_not_dropped() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": False},
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "odd": {"type": "no-such-type", "description": "kept"},
            "branch": {"anyOf": [{"type": 7}, {"type": "string"}]},
            "bad": 5,
        },
        "required": ["pair"],
    }
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema(schema)
    out = mcp_haystack.parameters(schema)
    Draft202012Validator.check_schema(out)
    props = out["properties"]
    assert props["pair"] == {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False}
    assert props["n"] == {"type": "number", "exclusiveMinimum": 0}
    assert props["odd"] == {"description": "kept"}
    assert props["branch"] == {"anyOf": [{}, {"type": "string"}]}
    assert props["bad"] == {} and out["required"] == ["pair"]
    valid = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "string"}}}
    assert mcp_haystack.parameters(valid) == valid


def test_a_pattern_that_is_no_regular_expression_is_dropped_and_the_tool_is_made() -> None:
    # Haystack's check runs the meta-schema's "format": "regex" (Python's re) on every pattern
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "(unclosed", "description": "kept", "maxLength": 8},
        "list": {"type": "array", "items": {"type": "string", "pattern": "[", "$ref": "#"}},
        "fine": {"type": "string", "pattern": "^[a-z]+$"},
        "huge": {"type": "string", "pattern": "a{99999999999999999999}"},  # re: OverflowError, not re.error
        "deep": {"type": "string", "pattern": "(" * 3000 + "a" + ")" * 3000},  # re: RecursionError
        "map": {"type": "object", "patternProperties": {"a{99999999999999999999}": {}}},
    }}
    with pytest.raises(Exception):  # noqa: B017 - SchemaError, or what re raised
        Draft202012Validator.check_schema(schema)
    out = mcp_haystack.parameters(schema)
    Draft202012Validator.check_schema(out)
    props = out["properties"]
    assert props["code"] == {"type": "string", "description": "kept", "maxLength": 8}
    assert props["list"] == {"type": "array", "items": {"type": "string", "$ref": "#"}}
    assert props["fine"] == schema["properties"]["fine"]  # type: ignore[index]
    assert props["huge"] == props["deep"] == {"type": "string"} and props["map"] == {"type": "object"}
    made = Tool(name="t", description="d", parameters=out, function=lambda **kw: kw)
    assert made.parameters == out


# ---------------------------------------------------------------- the Agent, sync


def test_agent_calls_a_tool_of_a_client_with_no_event_loop(demo: Any, no_event_loop: list[str]) -> None:
    result, generator = agent_run(mcp_haystack.tools(demo), [[("echo", {"message": "hello"})]])
    (res,) = tool_results(result)
    assert res.result == "hello" and res.error is False
    assert result["last_message"].text == "finished"
    assert generator.offered[0] and "echo" in generator.offered[0]
    assert generator.seen[1][-1].tool_call_result.result == "hello"  # what the model reads next
    assert result["tool_call_counts"]["echo"] == 1
    assert no_running_loop()


def test_agent_with_a_registry_structured_content_and_state(registry: Any) -> None:
    tools = mcp_haystack.tools(registry, outputs_to_state={"mcp__demo__add": {"sum": {"source": "structured_content"}}})
    assert "mcp__demo__add" in {t.name for t in tools}
    generator = ScriptedGenerator([[("mcp__demo__add", {"a": 2, "b": 3})]])
    agent = Agent(chat_generator=generator, tools=tools, state_schema={"sum": {"type": dict}})
    result = agent.run(messages=[ChatMessage.from_user("add")])
    (res,) = tool_results(result)
    assert res.error is False and "5" in res.result
    assert result["sum"] == {"sum": 5}
    add = next(t for t in tools if t.name == "mcp__demo__add")
    output = add.invoke(a=1, b=1)
    assert output["structured_content"] == {"sum": 2} and "2" in output["text"]


def test_optional_arguments_left_out_or_none_get_the_server_default(demo: Any) -> None:
    result, _ = agent_run(mcp_haystack.tools(demo), [[("slow", {"seconds": 0.1}), ("slow", {"seconds": 0.1, "steps": None})],
                                                     [("fail", {})]])
    first, second, failed = tool_results(result)
    assert first.error is False and first.result.startswith("done after")
    assert second.error is False and second.result.startswith("done after")
    assert failed.error is True  # fail(message?) with no message still ran


def test_a_failing_tool_is_an_error_message_and_the_agent_goes_on(demo: Any) -> None:
    result, generator = agent_run(mcp_haystack.tools(demo), [[("fail", {"message": "disk on fire"})], [("echo", {"message": "after"})]])
    failed, after = tool_results(result)
    assert failed.error is True and "disk on fire" in failed.result
    assert after.error is False and after.result == "after"
    assert result["last_message"].text == "finished" and len(generator.seen) == 3


def test_a_json_rpc_error_reaches_the_model_as_text(demo: Any) -> None:
    result, _ = agent_run(mcp_haystack.tools(demo), [[("boom", {})]])
    (res,) = tool_results(result)
    assert res.error is True and "boom" in res.result and "JSON-RPC error -32603" in res.result


def test_raise_on_tool_invocation_failure_raises_with_the_text(demo: Any) -> None:
    with pytest.raises(ToolInvocationError) as info:
        agent_run(mcp_haystack.tools(demo), [[("fail", {"message": "no way"})]], raise_on_tool_invocation_failure=True)
    assert "no way" in str(info.value)
    assert type(info.value.__cause__).__name__ == "ToolCallFailed"


def test_a_timeout_is_an_error_message(demo: Any) -> None:
    result, _ = agent_run(mcp_haystack.tools(demo, timeout=0.3), [[("slow", {"seconds": 5, "steps": 1})], [("echo", {"message": "still"})]])
    late, still = tool_results(result)
    assert late.error is True and "did not answer in 0.3 s" in late.result
    assert still.error is False and still.result == "still"


def test_a_dead_server_is_an_error_message(demo: Any) -> None:
    tools = mcp_haystack.tools(demo)
    kill(demo)
    result, _ = agent_run(tools, [[("echo", {"message": "anyone?"})]])
    (res,) = tool_results(result)
    assert res.error is True and "echo" in res.result
    assert result["last_message"].text == "finished"


def test_invalid_arguments_are_an_error_message(demo: Any) -> None:
    result, _ = agent_run(mcp_haystack.tools(demo), [[("echo", {})], [("add", {"a": "two", "b": 3})]])
    missing, wrong = tool_results(result)
    assert missing.error is True and "message" in missing.result
    assert wrong.error is True and "add" in wrong.result


def test_progress_reaches_on_progress(demo: Any) -> None:
    seen: list[tuple[str, float, Any]] = []
    tools = mcp_haystack.tools(demo, on_progress=lambda tool, progress, total, message: seen.append((tool, progress, total)))
    result, _ = agent_run(tools, [[("slow", {"seconds": 0.1, "steps": 3})]])
    assert tool_results(result)[0].error is False
    assert seen == [("slow", 1, 3), ("slow", 2, 3), ("slow", 3, 3)]


# ---------------------------------------------------------------- the Agent, async


def test_agent_run_async_keeps_the_loop_running(demo: Any) -> None:
    tools = mcp_haystack.tools(demo)

    async def main() -> tuple[dict[str, Any], int]:
        agent = Agent(chat_generator=ScriptedGenerator([[("slow", {"seconds": 0.5, "steps": 2})]]), tools=tools)
        return await while_loop_runs(agent.run_async(messages=[ChatMessage.from_user("go")]))

    result, ticks = run_async(main)
    (res,) = tool_results(result)
    assert res.error is False and res.result.startswith("done after")
    assert ticks >= 10, f"the loop ticked {ticks} times during a 0.5 s tool"


def test_the_async_function_awaits_the_call_itself(demo: Any, registry: Any) -> None:
    echo = next(t for t in mcp_haystack.tools(demo) if t.name == "echo")
    slow = next(t for t in mcp_haystack.tools(registry) if t.name == "mcp__demo__slow")

    async def main() -> tuple[Any, Any, int]:
        out = await echo.invoke_async(message="hi")
        (late, ticks) = await while_loop_runs(slow.invoke_async(seconds=0.5, steps=1))
        return out, late, ticks

    out, late, ticks = run_async(main)
    assert out["text"] == "hi" and late["text"].startswith("done after")
    assert ticks >= 10


def test_a_failure_on_the_async_path_is_an_error_message(demo: Any) -> None:
    tools = mcp_haystack.tools(demo)

    async def main() -> dict[str, Any]:
        agent = Agent(chat_generator=ScriptedGenerator([[("fail", {"message": "async trouble"})]]), tools=tools)
        return await agent.run_async(messages=[ChatMessage.from_user("go")])

    (res,) = tool_results(run_async(main))
    assert res.error is True and "async trouble" in res.result


# ---------------------------------------------------------------- server-everything


def test_server_everything_through_the_agent_with_an_image(everything: Any) -> None:
    tools = mcp_haystack.tools(everything)
    result, _ = agent_run(tools, [[("get-sum", {"a": 2, "b": 5}), ("get-tiny-image", {})]])
    total, image = tool_results(result)
    assert total.error is False and "7" in total.result
    assert image.error is False and isinstance(image.result, list)
    pictures = [p for p in image.result if isinstance(p, ImageContent)]
    assert len(pictures) == 1 and pictures[0].mime_type == "image/png"
    text = "".join(p.text for p in image.result if hasattr(p, "text"))
    assert "[image/png," in text and pictures[0].base64_image not in text


def test_server_everything_structured_content(everything: Any) -> None:
    tool = next(t for t in mcp_haystack.tools(everything) if t.name == "get-structured-content")
    output = tool.invoke(location="Chicago")
    assert isinstance(output["structured_content"], dict) and output["structured_content"]


# ---------------------------------------------------------------- import, example


def test_without_haystack_the_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "haystack", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.haystack", raising=False)
    with pytest.raises(ImportError) as info:
        importlib.import_module("mcpcall.integrations.haystack")
    assert "pip install 'mcpcall[haystack]'" in str(info.value)


def test_the_example_runs_with_a_scripted_model() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "integrations" / "haystack.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "tool weather ->" in done.stdout and "Paris" in done.stdout
    assert "tool fail (error) ->" in done.stdout
    assert "answer:" in done.stdout
