"""A server built on the official MCP Python SDK (``mcp`` on PyPI), served over Streamable HTTP.

The peer for tests/test_peer_http.py. One endpoint, ``/mcp``, serves both
protocol eras: requests whose ``MCP-Protocol-Version`` header names a
2026-07-28 (modern) version are answered statelessly, one POST per request;
the others go through the legacy ``initialize`` handshake and an
``Mcp-Session-Id`` session.

It listens on 127.0.0.1 only, on the port given as the first argument (0 or
none: a free one), and writes ``mcpcall-test-port=<n>`` to stderr once the
socket is bound.

Tools:

- ``echo(message)``: the message back, as text;
- ``add(a, b)``: the sum;
- ``slow(seconds, steps)``: ``steps`` progress notifications spread over
  ``seconds``, then "done"; when cancelled it writes "slow cancelled ..." to
  stderr.

Run it: ``python tests/servers/sdk_http_server.py [port]``.
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("mcpcall-sdk-http-test-server", instructions="Test peer for mcpcall over HTTP.")


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
    done = 0
    try:
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            done = step
    except anyio.get_cancelled_exc_class():
        print(f"slow cancelled after {done} of {steps} steps", file=sys.stderr, flush=True)
        raise
    return "done"


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(f"mcpcall-test-port={sock.getsockname()[1]}", file=sys.stderr, flush=True)
    app = server.streamable_http_app(host="127.0.0.1", session_idle_timeout=None)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
