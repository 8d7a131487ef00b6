"""HTTP servers for ``bench_http.py``, each on 127.0.0.1 and a port the OS picks.

Two kinds, chosen by the first argument:

``sdk [--json-response | --sse]``
    The official SDK's ``MCPServer`` (PyPI ``mcp``) with one tool, ``echo``,
    served over Streamable HTTP at ``/mcp`` by uvicorn (access log off, log
    level WARNING: a benchmark measures the protocol, not the logging). Both
    protocol eras: the legacy ``initialize`` handshake with ``Mcp-Session-Id``,
    and the modern (2026-07-28) per-request ``_meta``. ``--json-response``
    answers every request with one JSON body; without it the server answers a
    legacy request with an SSE stream (a modern request that emits no
    notification still gets JSON: the SDK commits to SSE only when it must).
    ``--sse`` serves the older HTTP+SSE transport instead (2024-11-05: a GET
    stream at ``/sse`` that carries every response, POSTs to the endpoint it
    names; legacy era only).

``big [--size BYTES]``
    A minimal stdlib threaded HTTP/1.1 server for the large-result test: it
    answers the legacy handshake with JSON, refuses the GET stream (405) and
    answers every POSTed ``tools/call`` with an SSE stream whose one
    ``message`` event carries a text result of ``--size`` characters (10 MB by
    default). The body is sent with chunked transfer encoding, in chunks of
    ``?chunk=N`` bytes (query string of the URL; default 1 MiB), each chunk
    one ``sendall``: ``?chunk=1024`` makes the client see the result in ~10,000
    small pieces.

Either prints one line when it is ready, ``listening URL cpus=LIST`` (the CPUs
the server may run on, to check pinning), and serves until its stdin closes.

    python benchmarks/http_server.py sdk [--json-response]
    python benchmarks/http_server.py big [--size 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOST = "127.0.0.1"
PATH = "/mcp"
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
CPU_TEXT = "cpus=" + ",".join(map(str, CPUS))
DEFAULT_SIZE = 10_000_000
DEFAULT_CHUNK = 1 << 20


def announce(port: int, path: str = PATH) -> None:
    """The ready line the benchmark waits for."""
    print(f"listening http://{HOST}:{port}{path} {CPU_TEXT}", flush=True)


def until_stdin_closes(stop: Any) -> None:
    """Call ``stop()`` once stdin reaches EOF (the parent closed it or died), from a daemon thread."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            stop()

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


# -- the official SDK server ------------------------------------------------------------


def run_sdk(json_response: bool, sse: bool = False) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench-http", instructions=CPU_TEXT, log_level="WARNING")

    @server.tool()
    def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    if sse:
        app = server.sse_app(sse_path="/sse", host=HOST)
    else:
        app = server.streamable_http_app(streamable_http_path=PATH, json_response=json_response, host=HOST)
    # proto=IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP;
    # with proto 0 every JSON reply (headers, then body: two writes) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(128)  # connections queue from here on, before uvicorn is up
    # Keep-alive for 10 minutes, not uvicorn's 5 s: bench_all.py's workers wait their turn longer than that between
    # rounds, and a connection closed under them would add a reconnect to the round (or kill the bare http.client loop).
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=600)
    web = uvicorn.Server(config)

    def stop() -> None:
        web.should_exit = True

    until_stdin_closes(stop)
    announce(sock.getsockname()[1], "/sse" if sse else PATH)
    web.run(sockets=[sock])


# -- the large-result server (stdlib) ------------------------------------------------------


def text_of(size: int) -> str:
    """``size`` characters of plain text: lines of 79 letters and spaces, each ending in LF."""
    line = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor in" * 2)[:79] + "\n"
    return (line * (size // len(line) + 1))[:size]


class BigResult:
    """The SSE body of a ``tools/call`` answer, split so no per-request copy of the text is made."""

    def __init__(self, size: int) -> None:
        self.middle = json.dumps({"content": [{"type": "text", "text": text_of(size)}], "isError": False},
                                 separators=(",", ":")).encode()

    def parts(self, request_id: Any) -> tuple[bytes, bytes, bytes]:
        head = b'event: message\ndata: {"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'
        return head, self.middle, b"}\n\n"


def make_handler(big: BigResult) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
            self.send_response(status)
            if body:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(405)

        def do_DELETE(self) -> None:
            self._send(405)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length))
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                self._send(202)
                return
            if method == "initialize":
                version = message.get("params", {}).get("protocolVersion", "2025-11-25")
                result = {"protocolVersion": version, "capabilities": {"tools": {}},
                          "serverInfo": {"name": "big", "version": "1"}, "instructions": CPU_TEXT}
                self._send(200, json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())
                return
            if method != "tools/call":
                error = {"code": -32601, "message": f"method not found: {method}"}
                self._send(200, json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode())
                return
            query = parse_qs(urlsplit(self.path).query)
            chunk = int(query.get("chunk", [DEFAULT_CHUNK])[0])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            sock = self.connection
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small chunks leave as they are written
            for part in big.parts(rid):
                for start in range(0, len(part), chunk):
                    piece = part[start:start + chunk]
                    sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client went away mid-request (a capped sseclient run is killed): not news
        super().handle_error(request, client_address)


def run_big(size: int) -> None:
    big = BigResult(size)
    httpd = QuietServer((HOST, 0), make_handler(big))
    until_stdin_closes(httpd.shutdown)
    announce(httpd.server_address[1])
    httpd.serve_forever(poll_interval=0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("sdk", "big"))
    parser.add_argument("--json-response", action="store_true", help="sdk: answer with JSON bodies, not SSE")
    parser.add_argument("--sse", action="store_true", help="sdk: serve the HTTP+SSE transport (2024-11-05) at /sse")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="big: characters in the tool result")
    opts = parser.parse_args(argv)
    if opts.kind == "sdk":
        run_sdk(opts.json_response, opts.sse)
    else:
        run_big(opts.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
