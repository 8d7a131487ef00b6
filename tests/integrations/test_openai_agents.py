"""mcpcall.integrations.openai_agents: MCP tools as agents.FunctionTool, through Runner.run_sync / Runner.run.

A scripted model (an ``agents.models.interface.Model`` of our own) asks for the tool calls it is given, then
answers with the outputs it was sent back, so every assertion is on what the model saw. Tracing is off, and no
API key is needed.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.integrations.conftest import framework, kill, on_a_thread, run_async, while_loop_runs

agents = framework("agents")

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import mcpcall
from mcpcall.integrations import openai_agents

agents.set_tracing_disabled(True)
ROOT = Path(__file__).resolve().parents[2]


class ScriptedModel(Model):
    """Asks for ``calls`` (name, arguments JSON) in its first turn, then answers with the outputs it got back."""

    def __init__(self, calls: Sequence[tuple[str, str]]) -> None:
        self.calls = list(calls)
        self.inputs: list[Any] = []
        self.tools: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        self.tools = list(tools)
        if len(self.inputs) == 1:
            output: list[Any] = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{i}", name=name, arguments=args)
                                 for i, (name, args) in enumerate(self.calls)]
        else:
            text = json.dumps(self.outputs())
            output = [ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                            content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")

    def outputs(self) -> list[Any]:
        """The function_call_output items' outputs the model was sent, in call order."""
        items = [item for item in self.inputs[-1] if isinstance(item, dict) and item.get("type") == "function_call_output"]
        by_id = {item["call_id"]: item["output"] for item in items}
        return [by_id.get(f"call_{i}") for i in range(len(self.calls))]


def run_sync(tools: list[Any], calls: Sequence[tuple[str, str]]) -> tuple[ScriptedModel, Any]:
    """``Runner.run_sync`` of an agent with ``tools`` and a model that makes ``calls``, on a thread with no loop."""
    model = ScriptedModel(calls)
    agent = agents.Agent(name="tester", instructions="Use the tools.", model=model, tools=tools)
    result = on_a_thread(lambda: agents.Runner.run_sync(agent, "go"), "Runner.run_sync")
    assert len(model.inputs) == 2, "the run did not go back to the model after the tool calls"
    return model, result


def seen(tools: list[Any], calls: Sequence[tuple[str, str]]) -> list[Any]:
    """What the model was sent for each of ``calls``."""
    model, result = run_sync(tools, calls)
    assert json.loads(result.final_output) == model.outputs()
    return model.outputs()


# ---------------------------------------------------------------- the tools


def test_function_tools_from_a_client(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    assert [t.name for t in tools] == ["echo", "add", "slow", "weather", "fail", "boom", "confirm"]
    echo = tools[0]
    assert isinstance(echo, agents.FunctionTool)
    assert echo.description == "Return the given message unchanged."
    assert echo.strict_json_schema is False
    assert echo.params_json_schema["properties"] == {"message": {"type": "string"}}
    assert echo.params_json_schema["required"] == ["message"]
    slow = tools[2]
    assert "required" not in slow.params_json_schema
    assert slow.params_json_schema["properties"]["seconds"]["default"] == 1


def test_options_reach_every_function_tool(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, needs_approval=True)
    assert tools and all(t.needs_approval is True for t in tools)


def test_function_names_fit_the_openai_api() -> None:
    assert openai_agents.function_name("get-sum") == "get-sum"
    assert openai_agents.function_name("files.read/all") == "files_read_all"
    long = openai_agents.function_name("x" * 100)
    assert long == "x" * 64
    assert openai_agents.function_name("x" * 100, {long}) == "x" * 62 + "_2"
    assert openai_agents.function_name("", ()) == "_"


# ---------------------------------------------------------------- calls through Runner.run_sync


def test_success_and_structured_content(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    model, result = run_sync(tools, [("echo", '{"message": "hi"}'), ("add", '{"a": 2, "b": 3}')])
    assert model.outputs() == ["hi", "5"]
    data = [item.custom_data for item in result.new_items if isinstance(item, agents.ToolCallOutputItem)]
    assert data == [None, {"structured_content": {"sum": 5}}]


def test_from_a_registry(registry: mcpcall.ToolRegistry) -> None:
    tools = openai_agents.tools(registry, timeout=20)
    assert "mcp__demo__echo" in [t.name for t in tools]
    assert seen(tools, [("mcp__demo__echo", '{"message": "via registry"}'), ("mcp__demo__fail", '{"message": "no"}')]) == [
        "via registry", "Error: no"]
    assert registry.stats()["mcp__demo__echo"].calls == 1


def test_optional_arguments_left_out(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    outputs = seen(tools, [("slow", '{"seconds": 0.05}'), ("slow", '{"seconds": 0.05, "steps": null}'), ("boom", "")])
    assert outputs[0] == outputs[1] == "done after 0.05 s"
    assert outputs[2].startswith("Error: tool 'boom'")  # empty arguments are none, and the call is made


def test_failures_reach_the_model_as_text(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    outputs = seen(tools, [("fail", '{"message": "it broke"}'), ("boom", "{}")])
    assert outputs == ["Error: it broke", "Error: tool 'boom' of server 'demo' failed: boom (JSON-RPC error -32603)"]


def test_invalid_arguments(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    outputs = seen(tools, [("echo", "{not json"), ("echo", "[1, 2]"), ("echo", "{}"), ("echo", '{"message": 5}')])
    assert outputs[0].startswith("Error: tool 'echo' was not called: its arguments are not valid JSON")
    assert outputs[1] == "Error: tool 'echo' was not called: its arguments must be a JSON object, not list"
    assert all(o.startswith("Error: ") and "message" in o for o in outputs[2:]), outputs


def test_timeout(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=0.3)
    outputs = seen(tools, [("slow", '{"seconds": 10}')])
    assert outputs == ["Error: tool 'slow' of server 'demo' did not answer in 0.3 s; the call was cancelled"]
    assert seen(tools, [("echo", '{"message": "still here"}')]) == ["still here"]


def test_dead_server(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    kill(demo)
    [output] = seen(tools, [("echo", '{"message": "anyone?"}')])
    assert output.startswith("Error: tool 'echo' of server 'demo' failed:")


# ---------------------------------------------------------------- the loop


def test_runner_run_keeps_the_loop_running(demo: mcpcall.Client) -> None:
    tools = openai_agents.tools(demo, timeout=20)
    model = ScriptedModel([("slow", '{"seconds": 0.5, "steps": 2}')])
    agent = agents.Agent(name="tester", model=model, tools=tools)
    result, ticks = run_async(lambda: while_loop_runs(agents.Runner.run(agent, "go")))
    assert model.outputs() == ["done after 0.5 s"]
    assert json.loads(result.final_output) == ["done after 0.5 s"]
    assert ticks >= 10, f"the loop ticked {ticks} times during a 0.5 s tool: it was blocked"


def test_registry_call_keeps_the_loop_running(registry: mcpcall.ToolRegistry) -> None:
    tools = openai_agents.tools(registry, timeout=20)
    model = ScriptedModel([("mcp__demo__slow", '{"seconds": 0.5}')])
    agent = agents.Agent(name="tester", model=model, tools=tools)
    _, ticks = run_async(lambda: while_loop_runs(agents.Runner.run(agent, "go")))
    assert model.outputs() == ["done after 0.5 s"]
    assert ticks >= 10, f"the loop ticked {ticks} times during a 0.5 s tool: it was blocked"


def test_run_sync_refuses_a_running_loop_so_tests_use_a_thread(demo: mcpcall.Client) -> None:
    agent = agents.Agent(name="tester", model=ScriptedModel([]), tools=openai_agents.tools(demo))

    async def inside() -> None:
        agents.Runner.run_sync(agent, "go")

    with pytest.raises(RuntimeError):
        run_async(inside)


def test_listing_tools_makes_no_event_loop(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    # The SDK calls a tool only from its own loop (Runner.run_sync makes one); building the tools needs none.
    tools = openai_agents.tools(demo, timeout=20)
    assert len(tools) == 7
    assert openai_agents.output(demo.call_tool("echo", {"message": "x"})) == "x"


# ---------------------------------------------------------------- server-everything


def test_everything_tools_pass_the_sdk_converters(everything: mcpcall.Client) -> None:
    from agents.models.chatcmpl_converter import Converter as ChatConverter
    from agents.models.openai_responses import Converter as ResponsesConverter

    tools = openai_agents.tools(everything, timeout=30)
    names = {t.name for t in everything.list_tools()}
    assert {t.name for t in tools} == names and "get-sum" in names
    converted = ResponsesConverter.convert_tools(tools, [])
    assert [c["name"] for c in converted.tools] == [t.name for t in tools]  # type: ignore[index]
    assert all(c["strict"] is False for c in converted.tools)  # type: ignore[index]
    for tool in tools:
        chat = ChatConverter.tool_to_openai(tool)
        assert chat["function"]["parameters"] == tool.params_json_schema
        agents.Agent(name="check", tools=[tool])


def test_everything_calls_and_image(everything: mcpcall.Client) -> None:
    tools = openai_agents.tools(everything, timeout=30)
    outputs = seen(tools, [("get-sum", '{"a": 2, "b": 3}'), ("get-tiny-image", "{}"),
                           ("get-resource-links", "{}"), ("get-structured-content", '{"location": "Chicago"}')])
    assert "5" in outputs[0]
    parts = outputs[1]
    assert isinstance(parts, list), parts
    images = [p for p in parts if p["type"] == "input_image"]
    assert len(images) == 1 and images[0]["image_url"].startswith("data:image/png;base64,")
    assert base64.b64decode(images[0]["image_url"].split(",", 1)[1], validate=True).startswith(b"\x89PNG")
    texts = [p["text"] for p in parts if p["type"] == "input_text"]
    assert len(texts) == 1 and "[image/png," in texts[0] and "base64" not in texts[0]
    assert "3" in outputs[2] or "resource" in outputs[2].lower()  # the optional count left out: its default applies
    assert json.loads(outputs[3])["temperature"] == 36


# ---------------------------------------------------------------- import, example


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.openai_agents", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[openai_agents\]'"):
        importlib.import_module("mcpcall.integrations.openai_agents")


def test_example_runs_without_an_api_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "examples/integrations/openai_agents.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "echo -> hello from mcpcall" in proc.stdout
    assert "add -> 5" in proc.stdout
    assert "fail -> Error: " in proc.stdout
    assert "final:" in proc.stdout



def test_on_progress_hears_every_call(demo: mcpcall.Client) -> None:
    events: list[tuple[Any, ...]] = []
    tools = openai_agents.tools(demo, timeout=20, on_progress=lambda *event: events.append(event))
    assert seen(tools, [("slow", '{"seconds": 0.05, "steps": 2}')]) == ["done after 0.05 s"]
    assert wait_until(lambda: len(events) == 2), events  # awaited calls: the callbacks thread may still be at it
    assert [event[:3] for event in events] == [("slow", 1, 2), ("slow", 2, 2)]
