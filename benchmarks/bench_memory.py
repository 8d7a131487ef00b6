"""Memory and size: a 10 MB tool result on every transport, 100,000 requests in flight, import time.

Three parts, each run in fresh worker processes (``--only large|pending|import``):

``large``
    One tool result of ``--size`` characters (10,000,000 by default: lines of
    plain text, so the JSON holds ``\\n`` escapes) over each path: stdio,
    Streamable HTTP answering with a JSON body (``Content-Length``), Streamable
    HTTP answering with an SSE stream (chunked, 1 MiB chunks) and the legacy
    HTTP+SSE transport (the result arrives on the GET stream). For each path:

    - **peak RSS growth**: a fresh process connects, makes one small call,
      resets its peak (``VmHWM``, by writing ``5`` to ``/proc/self/clear_refs``;
      not ``ru_maxrss``, which a forked child inherits), makes the large call
      and reads its peak: growth = peak - RSS before the call, shown as a
      multiple of the payload (the JSON-RPC message's bytes). The result itself
      (its text is a str of the payload's size) stays alive, so 1.0x is the floor.
      The same figure for the floor client (below) is shown beside it.
    - **time**: ``client.call_tool`` end to end against the *floor*: the least
      a client can do over the same path (stdio: a pipe read with ``os.read``
      until the newline; HTTP: ``http.client`` reading the body, or the GET
      stream up to the event's end) plus ``json.loads`` of the message. Rounds
      interleaved (mcpcall, floor, mcpcall, ...), each client in its own
      long-lived worker, best round kept; ratio = mcpcall / floor.

``pending``
    ``--pending`` (100,000) ``client.call_tool_future(..., timeout=300)`` to a
    stdio server that reads every request and never answers. Reported: bytes
    per pending request (RSS growth / N, and tracemalloc's count of Python
    allocations / N in a second fresh process), and the thread count before
    and after (one scheduler thread for every deadline: it must not grow).

``import``
    ``python -c "import mcpcall"`` against ``import mcp.client.session`` (the
    official SDK, when installed): best of 7 fresh processes minus a bare
    interpreter.

Everything is pinned to one CPU (``--cpu``, default 1; ``--no-pin`` lets it
float). ``--against DIR`` adds the mcpcall at DIR (another checkout, e.g. a
``git worktree add --detach /tmp/old REV``) as a second client in the same run,
interleaved with this one: an A/B of a change. Nothing is asserted: the figures
are reported, and the targets beside them (growth <= 2x the payload, time <=
1.2x the floor, < 2 KB per pending request, import < 1/5 of the SDK's).

    python benchmarks/bench_memory.py                      # all three parts, about a minute
    python benchmarks/bench_memory.py --only large --rounds 7
    python benchmarks/bench_memory.py --against /tmp/mcpcall-main --json mem.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PATHS = ("stdio", "http-json", "http-sse", "httpsse")
CHUNK = 1 << 20
HOST = "127.0.0.1"


# -- the payload -----------------------------------------------------------------------------


def text_of(size: int) -> str:
    """``size`` characters of plain text: lines of 79 letters and spaces, each ending in LF."""
    line = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor in" * 2)[:79] + "\n"
    return (line * (size // len(line) + 1))[:size]


class Payload:
    """The result's JSON, encoded once; each answer is ``head + middle + tail`` (no per-request copy)."""

    def __init__(self, size: int) -> None:
        self.middle = json.dumps({"content": [{"type": "text", "text": text_of(size)}], "isError": False},
                                 separators=(",", ":")).encode()

    def parts(self, request_id: Any) -> tuple[bytes, bytes, bytes]:
        return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":', self.middle, b"}"

    def size(self) -> int:
        return sum(len(p) for p in self.parts(1))


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The small answers both servers give (None: the big one, or none at all)."""
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        version = (message.get("params") or {}).get("protocolVersion", "2025-11-25")
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "big", "version": "1"}}}
    if method == "tools/call":
        name = (message.get("params") or {}).get("name")
        if name == "small":
            return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "ok"}]}}
        return None
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}}


# -- the servers (run as subprocesses of a worker) ------------------------------------------------


def serve_stdio(size: int) -> None:
    """Newline-delimited JSON-RPC on stdin/stdout: ``big`` is the payload, ``never`` is never answered."""
    payload = Payload(size)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        reply = answer(message)
        if reply is not None:
            out.write(json.dumps(reply).encode() + b"\n")
        elif message["params"]["name"] == "big":
            for part in payload.parts(message["id"]):
                out.write(part)
            out.write(b"\n")
        out.flush()


def make_handler(payload: Payload) -> type[BaseHTTPRequestHandler]:
    streams: dict[str, list[Any]] = {}  # HTTP+SSE session -> [condition, queued messages]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            if body:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def _chunked(self, pieces: Any) -> None:
            sock = self.connection
            for part in pieces:
                for start in range(0, len(part), CHUNK):
                    piece = part[start:start + CHUNK]
                    sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))

        def _sse_head(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            if not self.path.startswith("/sse"):
                self._send(405)
                return
            session = str(len(streams) + 1)
            box: list[Any] = [threading.Condition(), []]
            streams[session] = box
            self._sse_head()
            self._chunked([b"event: endpoint\ndata: /messages?s=" + session.encode() + b"\n\n"])
            while True:
                with box[0]:
                    while not box[1]:
                        box[0].wait()
                    item = box[1].pop(0)
                if item is None:
                    break
                self._chunked([b"event: message\ndata: ", *item, b"\n\n"])
            self.connection.sendall(b"0\r\n\r\n")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length))
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            rid = message.get("id")
            reply = answer(message) if rid is not None and "method" in message else None
            if url.path == "/messages":  # HTTP+SSE: acknowledged here, answered on the stream
                self._send(202)
                if rid is None or "method" not in message:
                    return
                box = streams[query["s"][0]]
                with box[0]:
                    box[1].append([json.dumps(reply).encode()] if reply is not None else list(payload.parts(rid)))
                    box[0].notify()
                return
            if rid is None or "method" not in message:
                self._send(202)
                return
            if reply is not None:
                self._send(200, json.dumps(reply).encode())
                return
            parts = payload.parts(rid)
            if query.get("reply", ["json"])[0] == "json":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(sum(len(p) for p in parts)))
                self.end_headers()
                self.wfile.flush()
                for part in parts:
                    self.connection.sendall(part)
                return
            self._sse_head()
            self._chunked([b"event: message\ndata: ", *parts, b"\n\n"])
            self.connection.sendall(b"0\r\n\r\n")

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a worker that went away mid-stream


def serve_http(size: int) -> None:
    httpd = QuietServer((HOST, 0), make_handler(Payload(size)))

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    print(f"http://{HOST}:{httpd.server_address[1]}", flush=True)
    httpd.serve_forever(poll_interval=0.2)


class Server:
    """A benchmark server in a subprocess of this (worker) process."""

    def __init__(self, kind: str, size: int) -> None:
        self.argv = [sys.executable, os.path.abspath(__file__), "--serve", kind, str(size)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        if kind == "http":
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert self.proc.stdout is not None
            self.url = self.proc.stdout.readline().decode().strip()

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(10)


def url_of(server: Server, path: str) -> str:
    return {"http-json": server.url + "/mcp?reply=json", "http-sse": server.url + "/mcp?reply=sse",
            "httpsse": server.url + "/sse"}[path]


# -- measuring inside a worker ---------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := the current RSS


def peak_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


class MCPCallClient:
    """mcpcall over one path; ``call()`` returns the big result's text."""

    def __init__(self, path: str, size: int) -> None:
        import mcpcall

        self.server = Server("stdio" if path == "stdio" else "http", size)
        if path == "stdio":
            target: Any = self.server.argv
            options: dict[str, Any] = {}
        else:
            target = url_of(self.server, path)
            options = {"transport": "sse" if path == "httpsse" else "streamable-http"}
        self.client = mcpcall.connect(target, protocol="legacy", timeout=120, **options)
        self.client.call_tool("small")

    def call(self) -> str:
        result = self.client.call_tool("big")
        return str(result.content[0].text)

    def close(self) -> None:
        self.client.close()
        self.server.close()


class FloorClient:
    """The least a client does over each path: read the message's bytes, then ``json.loads`` them."""

    def __init__(self, path: str, size: int) -> None:
        import http.client

        self.path = path
        self.next_id = 1
        self.server = Server("stdio" if path == "stdio" else "http", size)
        self.stream: Any = None
        if path == "stdio":
            self.proc = subprocess.Popen(self.server.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
            self.rest = b""
            return
        host, port = urlsplit(self.server.url).netloc.split(":")
        self.conn = http.client.HTTPConnection(host, int(port))
        if path == "httpsse":
            stream_conn = http.client.HTTPConnection(host, int(port))
            stream_conn.request("GET", "/sse", headers={"Accept": "text/event-stream"})
            self.stream = stream_conn.getresponse()
            self.stream_conn = stream_conn
            self.buffer = b""
            endpoint = self._event()
            self.endpoint = endpoint[endpoint.index(b"data: ") + 6:].decode()
        else:
            self.query = "/mcp?reply=" + ("json" if path == "http-json" else "sse")

    def _event(self) -> bytes:
        """The next SSE event of the GET stream, as bytes."""
        pieces = [self.buffer]
        while True:
            end = pieces[-1].find(b"\n\n")
            if end >= 0:
                break
            pieces.append(self.stream.read1(1 << 16))
        last = pieces.pop()
        pieces.append(last[:end])
        self.buffer = last[end + 2:]
        return b"".join(pieces)

    def call(self) -> str:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": "big", "arguments": {}}}).encode()
        if self.path == "stdio":
            os.write(self.proc.stdin.fileno(), body + b"\n")  # type: ignore[union-attr]
            pieces = [self.rest]
            while True:
                chunk = os.read(self.fd, 1 << 16)
                newline = chunk.find(b"\n")
                if newline >= 0:
                    pieces.append(chunk[:newline])
                    self.rest = chunk[newline + 1:]
                    break
                pieces.append(chunk)
            data = b"".join(pieces)
            del pieces
        elif self.path == "httpsse":
            self.conn.request("POST", self.endpoint, body, {"Content-Type": "application/json"})
            self.conn.getresponse().read()
            event = self._event()
            data = event[event.index(b"data: ") + 6:]
            del event
        else:
            self.conn.request("POST", self.query, body, {"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream"})
            data = self.conn.getresponse().read()
            if self.path == "http-sse":
                data = data[data.index(b"data: ") + 6: data.rindex(b"\n\n")]
        message = json.loads(data)
        del data
        return str(message["result"]["content"][0]["text"])

    def close(self) -> None:
        if self.path == "stdio":
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(10)
            self.proc.stdout.close()  # type: ignore[union-attr]
        else:
            self.conn.close()
            if self.stream is not None:
                self.stream_conn.sock.shutdown(socket.SHUT_RDWR)
                self.stream_conn.close()
        self.server.close()


CLIENTS: dict[str, Callable[[str, int], Any]] = {"mcpcall": MCPCallClient, "floor": FloorClient}


def worker_memory(client_kind: str, path: str, size: int) -> None:
    """A fresh process: one large call, its peak RSS growth; prints one JSON line."""
    import gc

    client = CLIENTS[client_kind](path, size)
    gc.collect()
    before = rss_bytes()
    reset_peak()
    started = time.perf_counter()
    text = client.call()
    seconds = time.perf_counter() - started
    peak = peak_bytes()
    assert len(text) == size, (len(text), size)
    del text
    client.close()
    print(json.dumps({"growth": peak - before, "seconds": seconds}), flush=True)


def worker_time(client_kind: str, path: str, size: int) -> None:
    """A long-lived worker: one warm-up call, then one timed call per line on stdin."""
    client = CLIENTS[client_kind](path, size)
    client.call()
    print("ready", flush=True)
    for _ in sys.stdin:
        cpu = time.process_time()
        started = time.perf_counter()
        text = client.call()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        assert len(text) == size
        del text
        print(seconds, cpu, flush=True)
    client.close()


def worker_pending(count: int, traced: bool) -> None:
    """``count`` calls that are never answered, each with a 300 s timeout; prints one JSON line."""
    import gc
    import tracemalloc

    import mcpcall

    server = Server("stdio", 10)
    client = mcpcall.connect(server.argv, protocol="legacy", timeout=120)
    client.call_tool("small")
    futures = [client.call_tool_future("never", {}, timeout=300) for _ in range(100)]  # warm every path
    for future in futures:
        future.cancel()
    del futures
    client.call_tool("small")
    gc.collect()
    threads_before = threading.active_count()
    if traced:
        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
    before = rss_bytes()
    started = time.perf_counter()
    futures = [client.call_tool_future("never", {}, timeout=300) for _ in range(count)]
    seconds = time.perf_counter() - started
    client.call_tool("small")  # every request is written (the server reads in order)
    gc.collect()
    after = rss_bytes()
    traced_bytes = tracemalloc.get_traced_memory()[0] - traced_before if traced else 0
    if traced:
        tracemalloc.stop()
    threads_after = threading.active_count()
    pending = sum(1 for f in futures if not f.done())
    started_close = time.perf_counter()
    client.close()
    close_seconds = time.perf_counter() - started_close
    failed = sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is not None)
    server.close()
    print(json.dumps({"rss_per_request": (after - before) / count, "traced_per_request": traced_bytes / count,
                      "threads_before": threads_before, "threads_after": threads_after, "pending": pending,
                      "failed_on_close": failed, "send_seconds": seconds, "close_seconds": close_seconds}), flush=True)


# -- the parent --------------------------------------------------------------------------------------


class Variant:
    """One mcpcall to measure: this checkout, or the one named by --against."""

    def __init__(self, label: str, root: str) -> None:
        self.label = label
        self.root = root

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = self.root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env


def run_once(variant: Variant, *args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", *args], env=variant.env(),
                         stdout=subprocess.PIPE, check=True, timeout=600).stdout
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


class TimeWorker:
    def __init__(self, variant: Variant, client_kind: str, path: str, size: int) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "time", client_kind, path,
                                      str(size)], env=variant.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"worker {client_kind} {path} did not start")
        self.times: list[float] = []
        self.cpu: list[float] = []

    def step(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        wall, cpu = self.proc.stdout.readline().split()
        self.times.append(float(wall))
        self.cpu.append(float(cpu))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def part_large(variants: list[Variant], opts: argparse.Namespace, report: dict[str, Any]) -> None:
    size = opts.size
    payload = Payload(size).size()
    paths = opts.paths.split(",") if opts.paths else list(PATHS)
    labels = [v.label for v in variants]
    floor = Variant("floor", variants[0].root)
    print(f"\n{size:,}-character tool result ({payload / 1e6:.2f} MB of JSON-RPC message), per path")
    print(f"RSS: peak growth of one call in a fresh process, x the payload (median of {opts.memory_runs} processes)")
    print(f"wall / CPU: ms per call, best of {opts.rounds} interleaved rounds (CPU: the client process only); "
          "ratios to the floor")
    columns = [f"{label} RSS" for label in [*labels, "floor"]] + [f"{label} wall" for label in [*labels, "floor"]] + \
        [f"{label} CPU" for label in [*labels, "floor"]] + [f"{label}/floor wall" for label in labels] + \
        [f"{label}/floor CPU" for label in labels]
    width = max(12, *(len(c) + 2 for c in columns))
    print(f"{'path':<11}" + "".join(f"{c:>{width}}" for c in columns))
    for path in paths:
        growth: dict[str, float] = {}
        for variant in [*variants, floor]:
            kind = "floor" if variant is floor else "mcpcall"
            runs = sorted(run_once(variant, "memory", kind, path, str(size))["growth"] for _ in range(opts.memory_runs))
            growth[variant.label] = runs[len(runs) // 2] / payload
        workers = {v.label: TimeWorker(v, "floor" if v is floor else "mcpcall", path, size) for v in [*variants, floor]}
        try:
            for _ in range(opts.rounds):
                for worker in workers.values():
                    worker.step()
        finally:
            for worker in workers.values():
                worker.close()
        wall = {label: min(w.times) for label, w in workers.items()}
        cpu = {label: min(w.cpu) for label, w in workers.items()}
        cells = [f"{growth[label]:.2f}x" for label in [*labels, "floor"]] + \
            [f"{wall[label] * 1000:.1f}" for label in [*labels, "floor"]] + \
            [f"{cpu[label] * 1000:.1f}" for label in [*labels, "floor"]] + \
            [f"{wall[label] / wall['floor']:.2f}x" for label in labels] + [f"{cpu[label] / cpu['floor']:.2f}x" for label in labels]
        print(f"{path:<11}" + "".join(f"{c:>{width}}" for c in cells), flush=True)
        report.setdefault("large", {})[path] = {
            "payload_bytes": payload, "growth_x_payload": growth, "best_wall_seconds": wall, "best_cpu_seconds": cpu,
            "wall_x_floor": {label: wall[label] / wall["floor"] for label in labels},
            "cpu_x_floor": {label: cpu[label] / cpu["floor"] for label in labels}}
    print("targets: growth <= 2.00x the payload; time <= 1.20x the floor (bytes read + json.loads)")


def part_pending(variants: list[Variant], opts: argparse.Namespace, report: dict[str, Any]) -> None:
    count = opts.pending
    print(f"\n{count:,} pending call_tool_future(..., timeout=300) to a stdio server that never answers")
    print(f"{'client':<16}{'RSS B/req':>11}{'traced B/req':>14}{'threads':>12}{'send s':>9}{'close s':>9}")
    for variant in variants:
        rss = run_once(variant, "pending", str(count), "0")
        traced = run_once(variant, "pending", str(count), "1")
        threads = f"{rss['threads_before']}->{rss['threads_after']}"
        print(f"{variant.label:<16}{rss['rss_per_request']:>11,.0f}{traced['traced_per_request']:>14,.0f}{threads:>12}"
              f"{rss['send_seconds']:>9.2f}{rss['close_seconds']:>9.2f}", flush=True)
        report.setdefault("pending_requests", {})[variant.label] = {"rss": rss, "traced": traced}
    print("target: < 2,048 bytes per pending request; the thread count does not grow")


def import_seconds(module: str, env: dict[str, str], repeats: int = 7) -> float:
    def best(code: str) -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            times.append(time.perf_counter() - started)
        return min(times)

    return max(0.0, best(f"import {module}") - best("pass"))


def part_import(variants: list[Variant], opts: argparse.Namespace, report: dict[str, Any]) -> None:
    import importlib.util

    print("\nimport time (best of 7 fresh processes, minus a bare interpreter)")
    sdk = import_seconds("mcp.client.session", variants[0].env()) if importlib.util.find_spec("mcp") else None
    for variant in variants:
        seconds = import_seconds("mcpcall", variant.env())
        ratio = f"   {seconds / sdk:.2f}x the SDK's (target < 0.20x)" if sdk else ""
        print(f"  import mcpcall ({variant.label}){seconds * 1000:>10.1f} ms{ratio}")
        report.setdefault("import_seconds", {})[variant.label] = seconds
    if sdk is not None:
        print(f"  import mcp.client.session{sdk * 1000:>11.1f} ms")
        report.setdefault("import_seconds", {})["mcp.client.session"] = sdk


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        (serve_stdio if argv[1] == "stdio" else serve_http)(int(argv[2]))
        return 0
    if argv[:1] == ["--worker"]:
        kind, rest = argv[1], argv[2:]
        if kind == "memory":
            worker_memory(rest[0], rest[1], int(rest[2]))
        elif kind == "time":
            worker_time(rest[0], rest[1], int(rest[2]))
        else:
            worker_pending(int(rest[0]), rest[1] == "1")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("large", "pending", "import"), help="run one part")
    parser.add_argument("--paths", default="", help="large: comma-separated subset of " + ",".join(PATHS))
    parser.add_argument("--size", type=int, default=10_000_000, help="large: characters in the result")
    parser.add_argument("--rounds", type=int, default=5, help="large: timed rounds per client")
    parser.add_argument("--memory-runs", type=int, default=3, help="large: fresh processes per memory figure")
    parser.add_argument("--pending", type=int, default=100_000, help="pending: requests in flight")
    parser.add_argument("--against", metavar="DIR", help="also measure the mcpcall checkout at DIR, interleaved")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to pin to")
    parser.add_argument("--no-pin", action="store_true", help="do not pin")
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    opts = parser.parse_args(argv)
    if not opts.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {opts.cpu})
    variants = [Variant("mcpcall", ROOT)]
    if opts.against:
        variants = [Variant("against", os.path.abspath(opts.against)), Variant("this", ROOT)]
    print(f"python {sys.version.split()[0]}; pinned to CPU {opts.cpu}" if not opts.no_pin else "not pinned")
    report: dict[str, Any] = {"size": opts.size, "pending": opts.pending,
                              "variants": {v.label: v.root for v in variants}}
    for part, run in (("large", part_large), ("pending", part_pending), ("import", part_import)):
        if opts.only in (None, part):
            run(variants, opts, report)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
