"""MCP tools behind a Flask app: one registry per worker process, shared by its request threads.

Run it under gunicorn, from the repository root::

    gunicorn -c examples/gunicorn_conf.py examples.flask_app:app

which is the same as::

    gunicorn --preload -w 2 --threads 4 -b 127.0.0.1:8000 --no-control-socket \\
        -c examples/gunicorn_conf.py examples.flask_app:app

then::

    curl 127.0.0.1:8000/tools
    curl -X POST 127.0.0.1:8000/call -H 'Content-Type: application/json' \\
        -d '{"name": "mcp__demo__echo", "arguments": {"message": "hi"}}'
    curl 127.0.0.1:8000/stats
    curl 127.0.0.1:8000/health

``python examples/flask_app.py`` runs the same requests through Flask's test
client (no server, no port) and prints the answers.

How the registry is made: once, at import, at module level. With ``--preload``
that import happens in the gunicorn master, before it forks the workers, and
that is fine: a :class:`~mcpcall.ToolRegistry` connects lazily, and one that
was created (even connected) before a fork lets go of the parent's servers in
the child and starts its own on first use. So each worker process gets its
own MCP server processes, shared by the worker's threads (the registry is
thread-safe), and the master's (if it connected any) are left alone.
``MCPCALL_CONNECT_AT_IMPORT=1`` connects the registry in the master at import,
to see that this holds. The registry is closed when a worker exits
(``worker_exit`` in ``examples/gunicorn_conf.py``; closing is idempotent).

The servers: the bundled demo server by default; ``MCPCALL_CONFIG`` may name
an ``mcpServers`` config file instead (Claude Desktop / VS Code / Cursor format).

Endpoints:

- ``GET /tools``: the tools in OpenAI Chat Completions format;
- ``POST /call``: an OpenAI tool call (``{"id", "type": "function", "function":
  {"name", "arguments"}}``) or ``{"name", "arguments"[, "id"]}``; answers the
  tool message (``{"role": "tool", "tool_call_id", "content"}``) with HTTP 200,
  also when the tool failed (the content says how, as the model should see it);
  HTTP 400 for a body that is not a tool call;
- ``GET /stats``: this worker's per-tool counts and latencies;
- ``GET /health``: this worker's pid and its servers.

Every answer carries this worker's pid in the ``X-Worker-Pid`` header.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import uuid
from typing import Any

from flask import Flask, Response, jsonify, request

import mcpcall

DEMO = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpcall.demo_server"]}}}


def make_registry() -> mcpcall.ToolRegistry:
    """The registry of the servers in ``$MCPCALL_CONFIG``, or of the demo server."""
    return mcpcall.ToolRegistry.from_config(os.environ.get("MCPCALL_CONFIG") or DEMO, timeout=30.0)


registry = make_registry()  # at import: in the gunicorn master with --preload (see the module docstring)
if os.environ.get("MCPCALL_CONNECT_AT_IMPORT") == "1":
    registry.connect_all()

app = Flask(__name__)
app.extensions["mcpcall"] = registry  # how gunicorn_conf.py finds it to close it


def _tool_call(body: Any) -> Any:
    """An OpenAI tool call from the request body (``{"name", "arguments"}`` is turned into one)."""
    if isinstance(body, dict) and "function" not in body and isinstance(body.get("name"), str):
        arguments = body.get("arguments", {})
        return {
            "id": str(body.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
            "type": "function",
            "function": {
                "name": body["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
    return body


@app.get("/tools")
def tools() -> Response:
    return jsonify(registry.to_openai_tools())


@app.post("/call")
def call() -> Any:
    body = request.get_json(silent=True)
    try:
        message = registry.execute(_tool_call(body))
    except mcpcall.InvalidRequest as exc:  # not a tool call at all
        return jsonify({"error": str(exc)}), 400
    return jsonify(message)


@app.get("/stats")
def stats() -> Response:
    tools = {name: dataclasses.asdict(s) for name, s in registry.stats().items()}
    return jsonify({"pid": os.getpid(), "tools": tools})


@app.get("/health")
def health() -> Response:
    return jsonify({"pid": os.getpid(), "servers": registry.servers, "closed": registry.closed})


@app.after_request
def worker_pid(response: Response) -> Response:
    response.headers["X-Worker-Pid"] = str(os.getpid())
    return response


def main() -> None:
    """Run a few requests through Flask's test client and print the answers."""
    with registry:
        client = app.test_client()
        names = [tool["function"]["name"] for tool in client.get("/tools").get_json()]
        print("tools:", ", ".join(names))
        for body in (
            {"name": "mcp__demo__echo", "arguments": {"message": "hello from Flask"}},
            {"id": "call_1", "type": "function", "function": {"name": "mcp__demo__add", "arguments": '{"a": 2, "b": 3}'}},
            {"name": "mcp__demo__fail", "arguments": {"message": "on purpose"}},
        ):
            print("call:", client.post("/call", json=body).get_json())
        print("stats:", json.dumps(client.get("/stats").get_json()["tools"], sort_keys=True))


if __name__ == "__main__":
    main()
