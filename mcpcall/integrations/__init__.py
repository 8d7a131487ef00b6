"""MCP tools as the agent frameworks' own tool objects, called synchronously, with no event loop.

One module per framework, each with the same entry point::

    from mcpcall.integrations import langchain     # or smolagents, crewai, llamaindex, haystack,
    tools = langchain.tools(source, timeout=30)     #    dspy, openai_agents, pydantic_ai

``source`` is a connected :class:`mcpcall.Client` (the tools keep the names the
server gives them) or a :class:`mcpcall.ToolRegistry` (its ``mcp__server__tool``
names, its restarts and its stats). ``tools()`` lists the tools once and returns
one framework tool per MCP tool. A call runs on the caller's thread; from a
running event loop the framework's async path awaits the call without blocking
the loop. A failing tool (``isError``, a timeout, a server that is gone, bad
arguments) reaches the framework the way it expects a failing tool to report,
with text the model may read and no secret: each module's docstring says how.

Importing this package imports no framework, nor does importing one of its
modules until its framework is needed: without the framework installed, the
module raises :class:`ImportError` naming the extra to install
(``pip install 'mcpcall[langchain]'``).

:mod:`._core` is what every module shares (the source, the call, the failure
text, the arguments); :mod:`._models` turns a JSON Schema into a pydantic model
for the frameworks that want one.

It may import the registry, config, auth, the client and everything below; never the CLI.
"""

from __future__ import annotations

FRAMEWORKS = ("langchain", "smolagents", "crewai", "llamaindex", "haystack", "dspy", "openai_agents", "pydantic_ai")

__all__ = ["FRAMEWORKS"]
