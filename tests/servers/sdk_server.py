"""A server built on the official MCP Python SDK (``mcp`` on PyPI), served over stdio.

The peer for tests/peers/test_peer_sdk.py. The SDK serves both protocol eras on one
stdio connection: the legacy ``initialize`` handshake and the modern
(2026-07-28) per-request ``_meta`` envelope; the client's first request decides.

Tools:

- ``echo(message)``: the message back, as text;
- ``add(a, b)``: the sum, as structured output (``{"result": a + b}``);
- ``slow(seconds, steps)``: ``steps`` progress notifications spread over
  ``seconds``, then "done"; when the client cancels it, it writes
  "slow cancelled ..." to stderr (tests watch for it);
- ``fail()``: raises a tool error (``isError: true``);
- ``log_messages()``, ``add_tool(name)`` (a tools change), ``touch(uri)`` (a resource update);
- ``greet_user()``, ``ask_llm(question)``, ``list_client_roots()``: ask the client (elicitation,
  sampling, roots) in either era.

Resources ``test://static/hello``, ``test://static/pixel.png``, ``test://counter`` (counts the
reads that reach it) and the template ``test://greeting/{name}``; prompt ``review(code,
language)``; completion of ``language`` and ``name``. Lists and reads carry a one-minute ``ttlMs``.

Run it: ``python tests/servers/sdk_server.py``.
"""

from __future__ import annotations

import sys

from typing import Any

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# Cache hints (2026-07-28): lists and reads stay fresh for a minute, so a client may serve them from its cache.
server = MCPServer(
    "mcpcall-sdk-test-server",
    instructions="Test peer for mcpcall.",
    cache_hints={
        method: CacheHint(ttl_ms=60_000, scope="public")
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
    },
)


@server.tool()
def echo(message: str) -> str:
    """Return the message unchanged."""
    return message


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times over ``seconds`` seconds, then return "done"."""
    steps = max(1, steps)
    try:
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
    except anyio.get_cancelled_exc_class():
        # Tests watch stderr for this line to see that a cancel reached the tool.
        print(f"slow cancelled after {step - 1} of {steps} steps", file=sys.stderr, flush=True)
        raise
    return "done"


@server.tool()
def fail() -> str:
    """Always fail with a tool error."""
    raise ToolError("this tool always fails")


# -- the whole surface: resources, templates, prompts, completion, logging, changes, and what the
# server asks of the client (elicitation, sampling, roots; each in either era through Resolve) --------

import base64  # noqa: E402
from typing import Annotated  # noqa: E402

from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample  # noqa: E402
from mcp_types import (  # noqa: E402
    Completion,
    CreateMessageResult,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel  # noqa: E402

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LANGUAGES = ["python", "perl", "php", "rust", "ruby"]
_counter = {"hits": 0}


@server.resource("test://static/hello", name="hello", title="Hello", description="A greeting", mime_type="text/plain")
def hello_resource() -> str:
    return "Hello, resource"


@server.resource("test://static/pixel.png", name="pixel", mime_type="image/png")
def pixel_resource() -> bytes:
    return PNG


@server.resource("test://counter", name="counter", mime_type="text/plain")
def counter_resource() -> str:
    _counter["hits"] += 1  # each read that reaches the server counts: a cached read does not
    return str(_counter["hits"])


@server.resource("test://greeting/{name}", name="greeting", mime_type="text/plain")
def greeting_resource(name: str) -> str:
    return f"Hello, {name}"


@server.prompt(title="Code review")
def review(code: str, language: str = "python") -> str:
    """Review a piece of code."""
    return f"Please review this {language} code:\n{code}"


@server.completion()
async def complete(ref: PromptReference | ResourceTemplateReference, argument: Any, context: Any) -> Completion | None:
    if argument.name == "language":
        values = [lang for lang in LANGUAGES if lang.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    if argument.name == "name":
        return Completion(values=[n for n in ("ann", "anna", "bob") if n.startswith(argument.value)], has_more=True)
    return None


@server.tool()
async def log_messages(ctx: Context) -> str:
    """Send one log message at each of debug, info, warning and error."""
    await ctx.debug("a debug line", logger_name="tests")
    await ctx.info("an info line", logger_name="tests")
    await ctx.warning({"careful": True}, logger_name="tests")
    await ctx.error("an error line")
    return "logged"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and tell subscribers the tool list changed."""

    def extra() -> str:
        return f"I am {name}"

    server.add_tool(extra, name=name, description=f"added at run time: {name}")
    await ctx.notify_tools_changed()  # to subscriptions/listen streams (2026-07-28)
    if not _modern(ctx):
        await ctx.session.send_tool_list_changed()  # the legacy notification, on the session
    return f"added {name}"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell subscribers the resource ``uri`` changed."""
    await ctx.notify_resource_updated(uri)
    if not _modern(ctx):
        await ctx.session.send_resource_updated(uri)
    return f"touched {uri}"


def _modern(ctx: Context) -> bool:
    return (ctx.protocol_version or "") >= "2026-07-28"


class Person(BaseModel):
    name: str = "stranger"
    age: int = 0


def ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


def ask_model(question: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=question))], max_tokens=50)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def greet_user(person: Annotated[Person, Resolve(ask_person)]) -> str:
    """Ask the user who they are (elicitation), then greet them."""
    return f"Hello, {person.name} ({person.age})"


@server.tool()
def ask_llm(question: str, answer: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model (sampling) and return what it said."""
    content = answer.content
    return f"the model said: {getattr(content, 'text', content)}"


@server.tool()
def list_client_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """List the client's roots."""
    return ",".join(str(root.uri) for root in roots.roots)


if __name__ == "__main__":
    server.run("stdio")
