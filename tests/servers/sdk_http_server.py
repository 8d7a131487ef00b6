"""A server built on the official MCP Python SDK (``mcp`` on PyPI), served over Streamable HTTP.

The peer for tests/peers/test_peer_http.py, with the tools of ``sdk_server.py``. One endpoint, ``/mcp``, serves both
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
- ``fail()``: raises a tool error;
- ``slow(seconds, steps)``: ``steps`` progress notifications spread over
  ``seconds``, then "done"; when cancelled it writes "slow cancelled ..." to
  stderr.

Run it: ``python tests/servers/sdk_http_server.py [port]``.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_server import server  # noqa: E402 - the same tools as the stdio peer


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
