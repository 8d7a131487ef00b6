"""A FastMCP server from the official Python SDK's 1.x line (PyPI ``mcp==1.*``), the kind most deployed servers run.

The peer for tests/peers/test_peer_fastmcp1.py. It runs under its own venv
(``.venv-mcp1``, made by ``make test``), since the main test venv has ``mcp`` 2.x.
It speaks only the legacy era (``initialize``; 2025-11-25 and older); it knows
nothing of ``server/discover``.

Modes (the first argument), each with FastMCP's defaults otherwise:

- ``stdio``: ``mcp.run()`` over stdin/stdout;
- ``streamable-http``: what ``mcp.run(transport="streamable-http")`` serves:
  ``/mcp``, stateful sessions (``Mcp-Session-Id``), replies as SSE streams;
- ``stateless-json``: the same with ``stateless_http=True, json_response=True``:
  no sessions, every reply one JSON body;
- ``sse``: what ``mcp.run(transport="sse")`` serves: the legacy HTTP+SSE
  transport (2024-11-05), GET ``/sse`` and POST ``/messages/``.

The HTTP modes listen on 127.0.0.1 only, on the port given as the second
argument (0 or none: a free one), and write ``mcpcall-test-port=<n>`` to stderr
once the socket is bound. The app is the one ``mcp.run()`` builds
(``streamable_http_app()`` / ``sse_app()``) run by uvicorn as ``mcp.run()``
does, on a socket bound here so the port can be reported.

Tools:

- ``echo(message)``: the message back, as text;
- ``add(a, b)``: the sum, as structured output (``{"result": a + b}``);
- ``slow(seconds, steps)``: ``steps`` progress notifications (``ctx.report_progress``)
  spread over ``seconds``, then "done"; when cancelled it writes "slow cancelled ..."
  to stderr;
- ``log(message)``: sends ``message`` as an info log notification (``ctx.info``),
  then returns "logged";
- ``fail()``: raises a tool error (``isError: true``).

Resources: ``test://greeting`` (text) and the template ``test://greeting/{name}``.
Prompt: ``greet(name)``.

Set ``MCPCALL_FASTMCP1_DEBUG=1`` to log every HTTP request's method, path and
MCP headers, and the response status, to stderr (``fastmcp1-debug ...`` lines).

Run it: ``.venv-mcp1/bin/python tests/servers/fastmcp1_server.py MODE [port]``.
"""

from __future__ import annotations

import json
import os
import socket
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

NAME = "mcpcall-fastmcp1-test-server"
MODES = ("stdio", "streamable-http", "stateless-json", "sse")


def build(mode: str) -> FastMCP:
    options = {"stateless_http": True, "json_response": True} if mode == "stateless-json" else {}
    mcp = FastMCP(NAME, instructions="FastMCP 1.x test peer for mcpcall.", log_level="WARNING", **options)

    @mcp.tool()
    def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    @mcp.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @mcp.tool()
    async def slow(seconds: float, steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times over ``seconds`` seconds, then return "done"."""
        steps = max(1, steps)
        step = 0
        try:
            for step in range(1, steps + 1):
                await anyio.sleep(seconds / steps)
                await ctx.report_progress(step, steps, f"step {step} of {steps}")
        except anyio.get_cancelled_exc_class():
            # Tests watch stderr for this line to see that a cancel reached the tool.
            print(f"slow cancelled after {step - 1} of {steps} steps", file=sys.stderr, flush=True)
            raise
        return "done"

    @mcp.tool()
    async def log(message: str, ctx: Context) -> str:
        """Send ``message`` as an info log notification, then return "logged"."""
        await ctx.info(message)
        return "logged"

    @mcp.tool()
    def fail() -> str:
        """Always fail with a tool error."""
        raise ToolError("this tool always fails")

    @mcp.resource("test://greeting", mime_type="text/plain")
    def greeting() -> str:
        """A fixed greeting."""
        return "Hello from FastMCP 1.x"

    @mcp.resource("test://greeting/{name}", mime_type="text/plain")
    def greeting_for(name: str) -> str:
        """A greeting for ``name``."""
        return f"Hello, {name}"

    @mcp.prompt()
    def greet(name: str) -> str:
        """Ask for a greeting."""
        return f"Please greet {name}."

    return mcp


class DebugHeaders:
    """ASGI middleware: one stderr line per request (method, path, MCP headers) and per response status."""

    def __init__(self, app: object) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: object, send: object) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)  # type: ignore[operator]
            return
        wanted = (b"mcp-session-id", b"mcp-protocol-version", b"mcp-method", b"mcp-name", b"accept",
                  b"content-type", b"last-event-id")
        headers = {k.decode(): v.decode() for k, v in scope.get("headers", []) if k in wanted}
        where = f"{scope.get('method')} {scope.get('path')}"
        what = ""
        if scope.get("method") == "POST":
            # Read the body to name the JSON-RPC message, then hand it on unchanged.
            chunks = []
            while True:
                message = await receive()  # type: ignore[operator]
                chunks.append(message)
                if message.get("type") != "http.request" or not message.get("more_body"):
                    break
            body = b"".join(m.get("body", b"") for m in chunks)
            try:
                parsed = json.loads(body)
                what = f" {parsed.get('method', 'response')} id={parsed.get('id')}" if isinstance(parsed, dict) else " batch"
            except ValueError:
                what = " (not JSON)"
            pending, upstream = list(chunks), receive

            async def replay() -> dict:
                return pending.pop(0) if pending else await upstream()  # type: ignore[operator,no-any-return]

            receive = replay
        print(f"fastmcp1-debug request {where}{what} {headers}", file=sys.stderr, flush=True)

        async def logging_send(message: dict) -> None:
            if message.get("type") == "http.response.start":
                out = {k.decode(): v.decode() for k, v in message.get("headers", [])
                       if k.lower() in (b"mcp-session-id", b"content-type")}
                print(f"fastmcp1-debug response {where} {message.get('status')} {out}", file=sys.stderr, flush=True)
            await send(message)  # type: ignore[operator]

        await self.app(scope, receive, logging_send)  # type: ignore[operator]


def serve_http(mcp: FastMCP, mode: str, port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((mcp.settings.host, port))
    sock.listen(128)
    print(f"mcpcall-test-port={sock.getsockname()[1]}", file=sys.stderr, flush=True)
    app = mcp.sse_app() if mode == "sse" else mcp.streamable_http_app()
    if os.environ.get("MCPCALL_FASTMCP1_DEBUG") == "1":
        app = DebugHeaders(app)
    # As FastMCP's run_*_async do (host/port aside: the socket is bound above).
    config = uvicorn.Config(app, log_level=mcp.settings.log_level.lower(), timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode not in MODES:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(MODES)}}} [port]")
    mcp = build(mode)
    if mode == "stdio":
        mcp.run("stdio")
        return
    serve_http(mcp, mode, int(sys.argv[2]) if len(sys.argv) > 2 else 0)


if __name__ == "__main__":
    main()
