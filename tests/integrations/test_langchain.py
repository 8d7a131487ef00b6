"""mcpcall.integrations.langchain: MCP tools as LangChain StructuredTools, through .invoke, .ainvoke, LangGraph's
ToolNode, a LangGraph graph run by a scripted chat model and create_react_agent, against the demo server and
server-everything, from a Client and from a ToolRegistry."""

from __future__ import annotations

import pytest

from tests.integrations.conftest import framework, kill, nested_parameters, run_async, while_loop_runs

framework("langchain_core")
framework("langgraph")

import base64
import importlib
import os
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import PrivateAttr

import mcpcall
from mcpcall.integrations import langchain
from tests.conftest import ROOT, child_pythonpath, demo_argv


class ScriptedChat(BaseChatModel):
    """A chat model that answers with the next of its scripted messages (tool calls, then a final text)."""

    script: list[AIMessage]
    _turn: int = PrivateAttr(default=0)
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self._seen.append(list(messages))
        message = self.script[min(self._turn, len(self.script) - 1)]
        self._turn += 1
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        for tool in tools:  # what a real model's bind_tools does first: every tool as an OpenAI function
            convert_to_openai_tool(tool)
        return self


def calls(*calls: tuple[str, dict[str, Any]], answer: str = "finished") -> ScriptedChat:
    """A model that calls the given tools (all in its first turn) and then answers ``answer``."""
    first = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"}
                                             for i, (name, args) in enumerate(calls)])
    return ScriptedChat(script=[first, AIMessage(content=answer)])


def agent_graph(model: ScriptedChat, tools: list[BaseTool], **node_options: Any) -> Any:
    """model -> ToolNode -> model, as a compiled LangGraph graph."""
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    model.bind_tools(tools)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ToolNode(tools, **node_options))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def node_graph(tools: list[BaseTool], **node_options: Any) -> Any:
    """A graph of a ToolNode alone (the node needs a graph's runtime to run)."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(tools, **node_options))
    builder.add_edge(START, "tools")
    return builder.compile()


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in tools}


def tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": "call_1", "name": name, "args": args}


# ---------------------------------------------------------------- the tools


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.tools", None)
    monkeypatch.delitem(sys.modules, "mcpcall.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install 'mcpcall\[langchain\]'"):
        importlib.import_module("mcpcall.integrations.langchain")


def test_importing_the_package_imports_no_framework() -> None:
    code = ("import sys, mcpcall.integrations; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'langgraph')))")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": child_pythonpath()}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_tools_of_a_client_are_structured_tools_with_the_mcp_schema(demo: mcpcall.Client) -> None:
    tools = by_name(langchain.tools(demo))
    listed = {tool.name: tool for tool in demo.list_tools()}
    assert set(tools) == set(listed)
    for name, tool in tools.items():
        assert isinstance(tool, StructuredTool)
        assert tool.description == listed[name].description
        assert tool.args_schema == listed[name].input_schema
    function = convert_to_openai_tool(tools["slow"])["function"]
    assert function["parameters"]["properties"]["steps"] == {"type": "integer", "minimum": 0, "default": 5}
    assert "required" not in function["parameters"]
    assert convert_to_openai_tool(tools["echo"])["function"]["parameters"]["required"] == ["message"]


def test_every_server_everything_tool_passes_langchains_checks(everything: mcpcall.Client) -> None:
    tools = langchain.tools(everything)
    assert {tool.name for tool in tools} == {tool.name for tool in everything.list_tools()}
    assert "get-sum" in {tool.name for tool in tools}
    for tool in tools:
        function = convert_to_openai_tool(tool)["function"]
        assert function["name"] == tool.name
        assert function["parameters"]["type"] == "object"
        assert isinstance(tool.args, dict)
    ToolNode(tools)  # validates every tool for the node


def test_server_everything_calls_and_the_image_as_artifact(everything: mcpcall.Client) -> None:
    tools = by_name(langchain.tools(everything))
    assert tools["get-sum"].invoke({"a": 2, "b": 3}) == "The sum of 2 and 3 is 5."
    message = tools["get-tiny-image"].invoke(tool_call("get-tiny-image", {}))
    assert isinstance(message, ToolMessage)
    images = [b for b in message.artifact["content"] if b["type"] == "image"]
    assert images and images[0]["mimeType"] == "image/png"
    assert base64.b64decode(images[0]["data"])[:4] == b"\x89PNG"
    assert "[image/png" in message.content
    assert images[0]["data"][:40] not in message.content  # no base64 for the model to read


def test_invoke_runs_on_the_callers_thread_with_no_event_loop(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    tools = by_name(langchain.tools(demo))
    assert tools["echo"].invoke({"message": "hello"}) == "hello"
    message = tools["add"].invoke(tool_call("add", {"a": 2, "b": 3.5}))
    assert message.content == "5.5"
    assert message.artifact["structuredContent"] == {"sum": 5.5}
    assert message.status == "success"


def test_optional_arguments_left_out_or_null_get_the_servers_default(demo: mcpcall.Client) -> None:
    slow = by_name(langchain.tools(demo))["slow"]
    seen: list[tuple[str, float, Any, Any]] = []
    on_progress = by_name(langchain.tools(demo, on_progress=lambda *event: seen.append(event)))["slow"]
    assert slow.invoke({"seconds": 0.05, "steps": None}) == "done after 0.05 s"
    assert on_progress.invoke({"seconds": 0.05}) == "done after 0.05 s"
    assert len(seen) == 5 and all(event[0] == "slow" for event in seen)  # steps' default, 5, applied


def test_an_argument_named_config_reaches_the_function() -> None:
    got: dict[str, Any] = {}

    def run(**kwargs: Any) -> tuple[str, None]:
        got.update(kwargs)
        return "ok", None

    tool = langchain.MCPStructuredTool(name="t", description="d", func=run, coroutine=None,
                                       response_format="content_and_artifact",
                                       args_schema={"type": "object", "properties": {
                                           "config": {"type": "string"}, "run_manager": {"type": "string"}}})
    assert tool.invoke({"config": "mine", "run_manager": "too"}) == "ok"
    assert got == {"config": "mine", "run_manager": "too"}


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("name, args, text", [
    ("fail", {"message": "it broke"}, "it broke"),
    ("boom", {}, "JSON-RPC error -32603"),
    ("echo", {"message": 5}, "'message' must be a string"),  # refused by the server
])
def test_a_failing_tool_raises_tool_exception_with_its_text(demo: mcpcall.Client, name: str, args: dict[str, Any],
                                                            text: str) -> None:
    tool = by_name(langchain.tools(demo))[name]
    with pytest.raises(ToolException, match=text) as caught:
        tool.invoke(args)
    assert isinstance(caught.value.__cause__, mcpcall.ToolCallFailed)
    with pytest.raises(ToolException, match=text):
        run_async(lambda: tool.ainvoke(args))


def test_arguments_refused_by_the_client_before_sending() -> None:
    with mcpcall.connect(demo_argv(), name="demo", timeout=20, validate_arguments=True) as client:
        echo = by_name(langchain.tools(client))["echo"]
        with pytest.raises(ToolException, match="was not called: its arguments do not match"):
            echo.invoke({"message": 5})


def test_a_timeout_raises_tool_exception(demo: mcpcall.Client) -> None:
    slow = by_name(langchain.tools(demo, timeout=0.3))["slow"]
    with pytest.raises(ToolException, match=r"did not answer in 0.3 s"):
        slow.invoke({"seconds": 5})
    with pytest.raises(ToolException, match=r"did not answer in 0.3 s"):
        run_async(lambda: slow.ainvoke({"seconds": 5}))


def test_a_dead_server_raises_tool_exception(demo: mcpcall.Client) -> None:
    echo = by_name(langchain.tools(demo))["echo"]
    kill(demo)
    with pytest.raises(ToolException, match="tool 'echo' of server 'demo' failed"):
        echo.invoke({"message": "anyone?"})
    with pytest.raises(ToolException, match="tool 'echo' of server 'demo' failed"):
        run_async(lambda: echo.ainvoke({"message": "anyone?"}))


def test_handle_tool_error_makes_an_error_tool_message_with_the_text(demo: mcpcall.Client) -> None:
    fail = by_name(langchain.tools(demo, handle_tool_error=True))["fail"]
    message = fail.invoke(tool_call("fail", {"message": "it broke"}))
    assert isinstance(message, ToolMessage)
    assert (message.status, message.content) == ("error", "it broke")


def test_tool_node_reraises_a_tool_exception_unless_error_handling_is_on(demo: mcpcall.Client) -> None:
    tools = langchain.tools(demo)
    request = {"messages": [AIMessage(content="", tool_calls=[tool_call("fail", {"message": "it broke"})])]}
    with pytest.raises(ToolException, match="it broke"):
        node_graph(tools).invoke(request)
    (message,) = tool_messages(node_graph(tools, handle_tool_errors=True).invoke(request))
    assert message.status == "error" and "it broke" in message.content
    (message,) = tool_messages(node_graph(langchain.tools(demo, handle_tool_error=True)).invoke(request))
    assert (message.status, message.content) == ("error", "it broke")


# ---------------------------------------------------------------- LangGraph graphs with a scripted model


def test_a_graph_runs_tools_of_a_client_sync_with_no_event_loop(demo: mcpcall.Client, no_event_loop: list[str]) -> None:
    model = calls(("add", {"a": 1, "b": 2}), ("slow", {"seconds": 0.05}), ("fail", {"message": "nope"}))
    state = agent_graph(model, langchain.tools(demo), handle_tool_errors=True).invoke(
        {"messages": [HumanMessage("go")]})
    add, slow, fail = tool_messages(state)
    assert (add.content, add.artifact["structuredContent"]) == ("3", {"sum": 3})
    assert (slow.content, slow.status) == ("done after 0.05 s", "success")
    assert fail.status == "error" and "nope" in fail.content
    assert state["messages"][-1].content == "finished"
    assert [m.content for m in model._seen[1] if isinstance(m, ToolMessage)] == [add.content, slow.content, fail.content]


def test_a_graph_runs_tools_of_a_registry(registry: mcpcall.ToolRegistry) -> None:
    tools = langchain.tools(registry)
    assert "mcp__demo__echo" in {tool.name for tool in tools}
    model = calls(("mcp__demo__echo", {"message": "via registry"}), ("mcp__demo__fail", {"message": "bad"}))
    state = agent_graph(model, tools, handle_tool_errors=True).invoke({"messages": [HumanMessage("go")]})
    echo, fail = tool_messages(state)
    assert echo.content == "via registry"
    assert fail.status == "error" and "bad" in fail.content
    stats = registry.stats()
    assert (stats["mcp__demo__echo"].calls, stats["mcp__demo__fail"].errors) == (1, 1)


def test_a_graph_ainvoke_keeps_the_loop_running_during_a_slow_tool(demo: mcpcall.Client) -> None:
    model = calls(("slow", {"seconds": 0.5}))
    graph = agent_graph(model, langchain.tools(demo))
    state, ticks = run_async(lambda: while_loop_runs(graph.ainvoke({"messages": [HumanMessage("go")]})))
    assert tool_messages(state)[0].content == "done after 0.5 s"
    assert ticks >= 5, f"the loop ticked {ticks} times during a 0.5 s tool"


def test_ainvoke_keeps_the_loop_running_from_a_client_and_a_registry(demo: mcpcall.Client,
                                                                     registry: mcpcall.ToolRegistry) -> None:
    for tool in (by_name(langchain.tools(demo))["slow"], by_name(langchain.tools(registry))["mcp__demo__slow"]):
        text, ticks = run_async(lambda tool=tool: while_loop_runs(tool.ainvoke({"seconds": 0.5})))
        assert text == "done after 0.5 s"
        assert ticks >= 5, f"the loop ticked {ticks} times during a 0.5 s tool"


def test_create_react_agent_with_error_handling_on(demo: mcpcall.Client) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents, not installed here
        from langgraph.prebuilt import create_react_agent

        model = calls(("echo", {"message": "hi"}), ("fail", {"message": "bad"}))
        agent = create_react_agent(model, ToolNode(langchain.tools(demo), handle_tool_errors=True))
    state = agent.invoke({"messages": [HumanMessage("go")]})
    echo, fail = tool_messages(state)
    assert (echo.content, fail.status) == ("hi", "error")
    assert state["messages"][-1].content == "finished"


# ---------------------------------------------------------------- the example


def test_the_example_runs_with_a_scripted_model() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = child_pythonpath()
    out = subprocess.run([sys.executable, str(Path(ROOT, "examples", "integrations", "langchain.py"))],
                         check=False, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "add -> 5" in out.stdout
    assert "fail -> error:" in out.stdout
    assert "final answer:" in out.stdout


def test_a_schema_with_refs_enums_nullables_and_a_keyword_name_reaches_the_model_whole() -> None:
    parameters = nested_parameters(lambda mcp: convert_to_openai_tool(langchain._tool(mcp, False)))
    assert parameters["properties"]["items"]["items"]["properties"]["id"] == {"type": "integer"}  # the $ref, resolved
    assert parameters["properties"]["mode"] == {"enum": ["a", "b"], "default": "a"}
    assert parameters["properties"]["note"] == {"type": ["string", "null"]}
