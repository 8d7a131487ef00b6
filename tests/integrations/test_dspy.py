"""mcpcall.integrations.dspy: MCP tools as ``dspy.Tool``\\ s, called as ``tool(**kw)``, ``await tool.acall(**kw)`` and by
``dspy.ReAct`` with a scripted LM (``DummyLM``), sync and async, against the demo server and server-everything, from
a Client and from a ToolRegistry."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DSPY_CACHEDIR", tempfile.mkdtemp(prefix="mcpcall-dspy-cache-"))  # before dspy is imported

from tests.integrations.conftest import framework, kill, no_running_loop, run_async, while_loop_runs

framework("dspy")

import dspy
from dspy.utils.dummies import DummyLM
from jsonschema import Draft202012Validator

from mcpcall import ToolCallFailed
from mcpcall.integrations import dspy as mcp_dspy

ROOT = Path(__file__).resolve().parents[2]


def step(tool: str, args: dict[str, Any], thought: str = "next") -> dict[str, Any]:
    return {"next_thought": thought, "next_tool_name": tool, "next_tool_args": args}


def script(*steps: dict[str, Any], answer: str = "the answer") -> DummyLM:
    """A DummyLM that takes ``steps``, then ``finish``, then answers (ReAct's extract step)."""
    return DummyLM([*steps, step("finish", {}, "done"), {"reasoning": "read the observations", "answer": answer}])


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {t.name: t for t in tools}


# ---------------------------------------------------------------- the tools


def test_tools_are_dspy_tools_with_description_and_required_as_the_schema_says(demo: Any) -> None:
    tools = by_name(mcp_dspy.tools(demo))
    assert set(tools) == {"echo", "add", "slow", "weather", "fail", "boom", "confirm"}
    assert all(isinstance(t, dspy.Tool) for t in tools.values())
    listed = {t.name: t for t in demo.list_tools()}
    assert tools["echo"].desc == listed["echo"].description
    assert tools["echo"].args == {"message": {"type": "string"}}
    assert tools["fail"].args == {"message": {"type": "string", "default": None}}  # optional: not required for DSPy
    assert tools["slow"].args["seconds"]["default"] == 1
    for name, tool in tools.items():
        spec = tool.format_as_litellm_function_call()["function"]
        assert sorted(spec["parameters"]["required"]) == sorted(listed[name].input_schema.get("required", [])), name
        assert spec["description"] == listed[name].description


def test_every_server_everything_tool_passes_dspy_validation(everything: Any) -> None:
    listed = everything.list_tools()
    tools = mcp_dspy.tools(everything)
    assert [t.name for t in tools] == [t.name for t in listed]
    for tool, mcp in zip(tools, listed):
        assert tool.desc
        for name, arg in tool.args.items():
            Draft202012Validator.check_schema(arg)
            if "default" in arg and arg["default"] is not None:
                tool._validate_and_parse_args(**{name: arg["default"]})  # DSPy's own check of an argument
        spec = tool.format_as_litellm_function_call()["function"]["parameters"]
        assert sorted(spec["required"]) == sorted(mcp.input_schema.get("required", [])), tool.name


def test_arguments_inline_refs_and_loosen_what_they_cannot_check() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                  "Tree": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Tree"}}}},
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "where"},
            "tree": {"$ref": "#/$defs/Tree"},
            "pair": {"type": "array", "items": [{"type": "string"}], "description": "old draft"},
            "elsewhere": {"$ref": "https://example.com/schema.json"},
            "n": {"type": "integer", "default": 3},
            "must": {"type": "string", "default": "x"},
        },
        "required": ["at", "must"],
    }
    args = mcp_dspy.arguments(schema)
    assert args["at"] == {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "description": "where"}
    assert args["tree"] == {"type": "object", "properties": {"child": {}}, "default": None}  # recursion: anything
    assert args["pair"] == {"description": "old draft", "default": None}
    assert args["elsewhere"] == {"default": None}
    assert args["n"] == {"type": "integer", "default": 3}
    assert args["must"] == {"type": "string"}  # required: DSPy must not take it as optional
    for arg in args.values():
        Draft202012Validator.check_schema(arg)


# ---------------------------------------------------------------- direct calls


def test_sync_call_of_a_client_tool_makes_no_event_loop(demo: Any, no_event_loop: list[str]) -> None:
    tools = by_name(mcp_dspy.tools(demo))
    assert tools["echo"](message="hello") == "hello"
    assert "5" in tools["add"](a=2, b=3)
    assert no_running_loop()


def test_structured_content_with_structured_true(demo: Any, registry: Any) -> None:
    assert by_name(mcp_dspy.tools(demo, structured=True))["add"](a=2, b=3) == {"sum": 5}
    assert by_name(mcp_dspy.tools(registry, structured=True))["mcp__demo__add"](a=1, b=1) == {"sum": 2}
    text = by_name(mcp_dspy.tools(demo))["add"](a=2, b=3)
    assert isinstance(text, str) and "5" in text


def test_optional_arguments_left_out_or_none_are_not_sent(demo: Any) -> None:
    slow = by_name(mcp_dspy.tools(demo))["slow"]
    assert slow(seconds=0.1).startswith("done after")
    assert slow(seconds=0.1, steps=None).startswith("done after")
    fail = by_name(mcp_dspy.tools(demo))["fail"]
    with pytest.raises(ToolCallFailed):  # ran without a message: the server's error result, not a refusal
        fail(message=None)


def test_await_acall_keeps_the_loop_running_client_and_registry(demo: Any, registry: Any) -> None:
    slow = by_name(mcp_dspy.tools(demo))["slow"]
    reg_slow = by_name(mcp_dspy.tools(registry))["mcp__demo__slow"]
    echo = by_name(mcp_dspy.tools(demo))["echo"]

    async def main() -> tuple[Any, int, Any, int, Any]:
        a, ticks_a = await while_loop_runs(slow.acall(seconds=0.5, steps=1))
        b, ticks_b = await while_loop_runs(reg_slow.acall(seconds=0.5, steps=1))
        return a, ticks_a, b, ticks_b, await echo.acall(message="hi")

    a, ticks_a, b, ticks_b, hi = run_async(main)
    assert a.startswith("done after") and b.startswith("done after") and hi == "hi"
    assert ticks_a >= 10 and ticks_b >= 10, (ticks_a, ticks_b)


def test_failures_raise_tool_call_failed_with_the_text(demo: Any) -> None:
    tools = by_name(mcp_dspy.tools(demo, timeout=0.3))
    with pytest.raises(ToolCallFailed, match="disk on fire"):
        tools["fail"](message="disk on fire")
    with pytest.raises(ToolCallFailed, match=r"boom.*JSON-RPC error -32603"):
        tools["boom"]()
    with pytest.raises(ToolCallFailed, match="did not answer in 0.3 s"):
        tools["slow"](seconds=5, steps=1)
    with pytest.raises(ToolCallFailed, match="message"):
        tools["echo"]()  # the required argument is missing
    with pytest.raises(ValueError, match="Arg message is invalid"):  # DSPy's own check
        tools["echo"](message=5)

    async def main() -> None:
        await tools["fail"].acall(message="async trouble")

    with pytest.raises(ToolCallFailed, match="async trouble"):
        run_async(main)


def test_a_dead_server_raises_tool_call_failed(demo: Any) -> None:
    echo = by_name(mcp_dspy.tools(demo))["echo"]
    kill(demo)
    with pytest.raises(ToolCallFailed, match="echo"):
        echo(message="anyone?")


def test_dspy_callbacks_see_both_paths(demo: Any) -> None:
    from dspy.utils.callback import BaseCallback

    seen: list[tuple[str, str]] = []

    class Recorder(BaseCallback):  # type: ignore[misc]
        def on_tool_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
            seen.append(("start", instance.name))

        def on_tool_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
            seen.append(("end", str(outputs)))

    echo = by_name(mcp_dspy.tools(demo))["echo"]

    async def main() -> Any:
        with dspy.settings.context(callbacks=[Recorder()]):
            return await echo.acall(message="async")

    with dspy.settings.context(callbacks=[Recorder()]):
        assert echo(message="sync") == "sync"
    assert run_async(main) == "async"
    assert seen == [("start", "echo"), ("end", "sync"), ("start", "echo"), ("end", "async")]


def test_progress_reaches_on_progress(demo: Any) -> None:
    seen: list[tuple[str, float]] = []
    slow = by_name(mcp_dspy.tools(demo, on_progress=lambda tool, progress, total, message: seen.append((tool, progress))))["slow"]
    assert slow(seconds=0.1, steps=3).startswith("done after")
    assert seen == [("slow", 1), ("slow", 2), ("slow", 3)]


# ---------------------------------------------------------------- ReAct


def test_react_runs_the_tools_records_a_failure_and_goes_on(demo: Any, no_event_loop: list[str]) -> None:
    lm = script(step("echo", {"message": "hello"}), step("fail", {"message": "kaput"}), step("slow", {"seconds": 0.1}),
                step("weather", {"city": "Paris"}))
    with dspy.settings.context(lm=lm):
        prediction = dspy.ReAct("question -> answer", tools=mcp_dspy.tools(demo))(question="say hello")
    trajectory = prediction.trajectory
    assert trajectory["observation_0"] == "hello"
    assert trajectory["observation_1"].startswith("Execution error in fail") and "kaput" in trajectory["observation_1"]
    assert trajectory["observation_2"].startswith("done after")  # steps left out: the server's default
    assert "Paris" in trajectory["observation_3"]
    assert trajectory["tool_name_4"] == "finish" and prediction.answer == "the answer"


def test_react_with_a_registry(registry: Any) -> None:
    lm = script(step("mcp__demo__add", {"a": 2, "b": 3}), step("mcp__demo__boom", {}))
    with dspy.settings.context(lm=lm):
        prediction = dspy.ReAct("question -> answer", tools=mcp_dspy.tools(registry))(question="add")
    assert "5" in prediction.trajectory["observation_0"]
    assert "Execution error in mcp__demo__boom" in prediction.trajectory["observation_1"]
    assert "boom" in prediction.trajectory["observation_1"]


def test_react_async_awaits_the_tool_and_keeps_the_loop_running(demo: Any) -> None:
    tools = mcp_dspy.tools(demo)

    async def main() -> tuple[Any, int]:
        lm = script(step("slow", {"seconds": 0.5, "steps": 2}), step("fail", {"message": "async kaput"}))
        with dspy.settings.context(lm=lm):
            react = dspy.ReAct("question -> answer", tools=tools)
            return await while_loop_runs(react.acall(question="wait"))

    prediction, ticks = run_async(main)
    assert prediction.trajectory["observation_0"].startswith("done after")
    assert "async kaput" in prediction.trajectory["observation_1"]
    assert ticks >= 10, f"the loop ticked {ticks} times during a 0.5 s tool"


def test_react_with_server_everything_and_an_image(everything: Any) -> None:
    lm = script(step("get-sum", {"a": 2, "b": 5}), step("get-tiny-image", {}), step("get-annotated-message", {"messageType": "success"}))
    with dspy.settings.context(lm=lm):
        prediction = dspy.ReAct("question -> answer", tools=mcp_dspy.tools(everything))(question="sum")
    trajectory = prediction.trajectory
    assert "7" in trajectory["observation_0"]
    assert "[image/png," in trajectory["observation_1"] and len(trajectory["observation_1"]) < 500  # no base64
    assert not trajectory["observation_2"].startswith("Execution error")  # includeImage left out


# ---------------------------------------------------------------- import, example


def test_without_dspy_the_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dspy", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.dspy", raising=False)
    with pytest.raises(ImportError) as info:
        importlib.import_module("mcpcall.integrations.dspy")
    assert "pip install 'mcpcall[dspy]'" in str(info.value)


def test_the_example_runs_with_a_scripted_model() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    env["DSPY_CACHEDIR"] = os.environ["DSPY_CACHEDIR"]
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "integrations" / "dspy.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "observation_0: " in done.stdout and "Paris" in done.stdout
    assert "Execution error in fail" in done.stdout and "the umbrella service is down" in done.stdout
    assert "answer: " in done.stdout
