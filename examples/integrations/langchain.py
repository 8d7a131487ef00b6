"""A LangGraph agent whose tools are an MCP server's, called through mcpcall with no event loop.

Run it from the checkout (no API key needed: a scripted chat model plays the LLM)::

    python examples/integrations/langchain.py

With ``OPENAI_API_KEY`` set (and ``pip install langchain-openai``), a real model
(``MCPCALL_MODEL``, default ``gpt-4o-mini``) chooses the calls instead.

It starts the bundled demo server, hands its tools to LangGraph's ``ToolNode``
with error handling on (without it, a failing tool's ``ToolException`` ends the
run), runs model -> tools -> model, and prints each tool message.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import mcpcall
from mcpcall.integrations import langchain

QUESTION = "What is 2 + 3? Then echo 'hello', and show me what a failing tool looks like."


class ScriptedModel(BaseChatModel):
    """Plays the LLM: first asks for three tool calls, then answers with what the tools said."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            calls = [("add", {"a": 2, "b": 3}), ("echo", {"message": "hello"}), ("fail", {"message": "out of coffee"})]
            message = AIMessage(content="", tool_calls=[
                {"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"} for i, (name, args) in enumerate(calls)])
        else:
            message = AIMessage(content="The tools said: " + "; ".join(str(m.content) for m in results))
        return ChatResult(generations=[ChatGeneration(message=message)])


def chat_model() -> Any:
    if not os.environ.get("OPENAI_API_KEY"):
        return ScriptedModel()
    from langchain_openai import ChatOpenAI  # pip install langchain-openai

    return ChatOpenAI(model=os.environ.get("MCPCALL_MODEL", "gpt-4o-mini"))


def main() -> None:
    with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo", timeout=30) as client:
        tools = langchain.tools(client, timeout=30)
        model = chat_model().bind_tools(tools)

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode(tools, handle_tool_errors=True))  # a failing tool -> an error message
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        graph = builder.compile()

        print("tools:", ", ".join(tool.name for tool in tools))
        state = graph.invoke({"messages": [HumanMessage(QUESTION)]})
        for message in state["messages"]:
            if isinstance(message, ToolMessage):
                if message.status == "error":
                    print(f"{message.name} -> error: {message.content}")
                else:
                    print(f"{message.name} -> {message.content}")
                    structured = (message.artifact or {}).get("structuredContent")
                    if structured is not None:
                        print(f"   structured content: {structured}")
        print("final answer:", state["messages"][-1].content)


if __name__ == "__main__":
    main()
