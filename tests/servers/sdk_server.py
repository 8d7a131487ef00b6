"""A server built on the official MCP Python SDK (``mcp`` on PyPI), served over stdio.

The peer for tests/test_peer_sdk.py. The SDK serves both protocol eras on one
stdio connection: the legacy ``initialize`` handshake and the modern
(2026-07-28) per-request ``_meta`` envelope; the client's first request decides.

Tools:

- ``echo(message)``: the message back, as text;
- ``add(a, b)``: the sum, as structured output (``{"result": a + b}``);
- ``slow(seconds, steps)``: ``steps`` progress notifications spread over
  ``seconds``, then "done"; when the client cancels it, it writes
  "slow cancelled ..." to stderr (tests watch for it);
- ``fail()``: raises a tool error (``isError: true``).

Run it: ``python tests/servers/sdk_server.py``.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("mcpcall-sdk-test-server", instructions="Test peer for mcpcall.")


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


if __name__ == "__main__":
    server.run("stdio")
