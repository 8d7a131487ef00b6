"""Over HTTP: calls per second of mcpcall vs the official MCP SDK, and a 10 MB result over SSE.

Part 1, calls/s. One server, the official SDK's ``MCPServer`` with an ``echo``
tool over Streamable HTTP (``http_server.py sdk``), run once answering with
JSON bodies and once with SSE streams. Every client runs in its own worker
process against that same server, sequentially (one caller) and with 8
concurrent callers; rounds are interleaved and the best round of each is kept.
Besides calls/s, each round records the CPU time the client process and the
server process spent per call: the SDK server costs far more per call than
either client, so it sets the pace and calls/s alone hides the clients' costs.

Part 2, one 10 MB tool result on one SSE ``message`` event from a stdlib server
(``http_server.py big``), written in 1 MiB chunks and in 1 KiB chunks: mcpcall's
``call_tool`` end to end vs the bare download (``requests.post(...).content``),
vs ``json.loads`` of the same JSON bytes, and vs ``sseclient.SSEClient`` over
the response (its own parser; it is capped, as it is quadratic).

Nothing is pinned by default: the HTTP servers run their own event loop or
threads, and sharing one CPU with the client would measure the scheduler more
than the clients. ``--pin`` pins everything to one CPU, as bench_stdio does.

    python benchmarks/bench_http.py [--rounds 3] [--seconds 1] [--threads 8] [--pin] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from common import ARGS, MODES, Worker, add_round_options, interleave, pin_and_announce, serve_async, thread_worker

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_SCRIPT = os.path.join(HERE, "http_server.py")
CLIENTS = ("http.client", "requests", "mcpcall-legacy", "mcpcall-modern", "sdk-legacy", "sdk-modern")
SERVER_MODES = ("json", "sse")
LEGACY_VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
BIG_VARIANTS = {"1 MiB chunks": 1 << 20, "1 KiB chunks": 1024}
BIG_CLIENTS = ("mcpcall", "requests", "json.loads", "sseclient")


# -- the requests loop: the least a requests-based client can do ----------------------


def parse_reply(content_type: str, body: bytes) -> dict[str, Any]:
    """The ``result`` of a JSON-RPC response sent as a JSON body or on an SSE stream, parsed by hand."""
    if content_type.startswith("text/event-stream"):
        for line in body.splitlines():
            if line.startswith(b"data:") and len(line) > 6:
                message = json.loads(line[5:])
                if "id" in message:
                    return message["result"]  # type: ignore[no-any-return]
        raise RuntimeError(f"no response in the SSE stream: {body[:200]!r}")
    return json.loads(body)["result"]  # type: ignore[no-any-return]


class RequestsClient:
    """One ``requests.Session``; initialize, then one POST per call, JSON or SSE reply parsed by hand.

    No timeouts, no cancellation, no checks, no worker threads: the ceiling for a
    client built on requests (mcpcall's HTTP library).
    """

    def __init__(self, url: str) -> None:
        import requests
        from requests.adapters import HTTPAdapter

        self.url = url
        self.session = requests.Session()
        self.session.mount("http://", HTTPAdapter(pool_maxsize=16, max_retries=0))
        self.headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        self._ids = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        info = {"name": "requests", "version": "1"}
        response = self.session.post(url, headers=self.headers, data=json.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": info},
        }))
        self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = LEGACY_VERSION
        self.instructions = self._result(response)["instructions"]
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.session.post(url, headers=self.headers, data=json.dumps(notice)).close()

    @staticmethod
    def _result(response: Any) -> dict[str, Any]:
        return parse_reply(response.headers.get("content-type", ""), response.content)

    def call_echo(self) -> str:
        with self._lock:
            rid = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                           "params": {"name": "echo", "arguments": ARGS}})
        response = self.session.post(self.url, headers=self.headers, data=body)
        return str(self._result(response)["content"][0]["text"])

    def close(self) -> None:
        self.session.delete(self.url, headers=self.headers).close()
        self.session.close()


class HTTPClientLoop:
    """Bare ``http.client``: one keep-alive connection per calling thread, one POST per call.

    The floor for a Python HTTP client: no session, no pool, no timeouts, no
    checks; the JSON or SSE reply is parsed by hand as in :class:`RequestsClient`.
    """

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        self._local = threading.local()
        self._ids = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        info = {"name": "http.client", "version": "1"}
        status, headers, body = self._post(json.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": info},
        }).encode())
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = LEGACY_VERSION
        self.instructions = self._result(headers, body)["instructions"]
        self._post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def _post(self, body: bytes, method: str = "POST") -> tuple[int, Any, bytes]:
        import http.client

        connection = getattr(self._local, "connection", None)
        for attempt in range(2):
            if connection is None:
                connection = self._local.connection = http.client.HTTPConnection(self.host, self.port)
            try:
                connection.request(method, self.path, body, self.headers)
                response = connection.getresponse()
                return response.status, response.headers, response.read()
            except (ConnectionError, http.client.HTTPException):
                # The server closed a connection idle past its keep-alive (uvicorn: 5 s) while other
                # workers ran: open a new one, as urllib3 does for a dropped pooled connection.
                connection.close()
                connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _result(headers: Any, body: bytes) -> dict[str, Any]:
        return parse_reply(headers.get("content-type") or "", body)

    def call_echo(self) -> str:
        with self._lock:
            rid = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                           "params": {"name": "echo", "arguments": ARGS}}).encode()
        _, headers, data = self._post(body)
        return str(self._result(headers, data)["content"][0]["text"])

    def close(self) -> None:
        self._post(b"", "DELETE")
        self._local.connection.close()


# -- workers: one client each, driven by the parent over stdin/stdout (see common) ----


async def sdk_worker(kind: str, url: str) -> None:
    """The official SDK: ClientSession over streamable_http_client in one asyncio loop."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        if kind == "sdk-modern":
            found = await session.discover()
            instructions = found.instructions
        else:
            init = await session.initialize()
            instructions = init.instructions
        await session.list_tools()  # call_tool would list once itself to learn output schemas

        async def call() -> str:
            result = await session.call_tool("echo", ARGS)
            return str(result.content[0].text)  # type: ignore[union-attr]

        await serve_async(call, instructions)


# -- the 10 MB result: one process per client, best of REPEATS -------------------------


def big_worker(kind: str, url: str, repeats: int) -> None:
    """Print ``ms ms ...``: one time per repeat (after one untimed warm-up) of fetching the big result."""
    import requests

    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": ARGS}})
    prefix = b"event: message\ndata: "

    def timed(fetch: Callable[[], int], times: int) -> list[float]:
        out = []
        for _ in range(times):
            start = time.perf_counter()
            size = fetch()
            out.append((time.perf_counter() - start) * 1000)
            assert size > 0
        return out

    if kind == "mcpcall":
        import mcpcall

        client = mcpcall.connect(url, protocol="legacy")

        def fetch() -> int:
            return len(client.call_tool("echo", ARGS).text)

        fetch()
        times = timed(fetch, repeats)
        client.close()
    elif kind == "requests":
        session = requests.Session()

        def fetch() -> int:
            return len(session.post(url, headers=headers, data=body).content)

        fetch()
        times = timed(fetch, repeats)
    elif kind == "json.loads":
        raw = requests.post(url, headers=headers, data=body).content
        assert raw.startswith(prefix) and raw.endswith(b"\n\n")
        payload = raw[len(prefix):-2]  # the one data line: the JSON-RPC message
        json.loads(payload)
        times = timed(lambda: len(json.loads(payload)["result"]["content"][0]["text"]), repeats)
    else:  # sseclient: its own parser over requests' default chunking (iterating a response: 128 bytes)
        import sseclient

        def fetch() -> int:
            response = requests.post(url, headers=headers, data=body, stream=True)
            # Iterating a Response is iter_content(128); sseclient's stub wants an Iterator.
            for event in sseclient.SSEClient(response).events():  # type: ignore[arg-type]
                if event.data:
                    text = json.loads(event.data)["result"]["content"][0]["text"]
                    response.close()
                    return len(text)
            return 0

        times = timed(fetch, repeats)
    print(" ".join(f"{t:.3f}" for t in times), flush=True)


def run_big(url: str, kind: str, repeats: int, timeout: float) -> float | None:
    """Best ms of ``kind`` fetching the big result from ``url``; None when it ran past ``timeout`` s."""
    argv = [sys.executable, os.path.abspath(__file__), "--big-worker", kind, url, str(repeats)]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    return min(float(t) for t in done.stdout.split())


# -- the parent ---------------------------------------------------------------------


class Server:
    """An ``http_server.py`` subprocess; ``url`` once it listens."""

    def __init__(self, *args: str) -> None:
        argv = [sys.executable, SERVER_SCRIPT, *args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if len(line) != 3 or line[0] != "listening":
            raise SystemExit(f"benchmark server {args} did not start (exit {self.proc.wait()})")
        self.url, self.cpus = line[1], line[2]
        pinned = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        if pinned is not None and len(pinned) == 1 and self.cpus != f"cpus={next(iter(pinned))}":
            print(f"warning: the {args[0]} server runs on {self.cpus}, not the pinned CPU", flush=True)

    def cpu_seconds(self) -> float | None:
        """User + system CPU the server process has used so far (Linux /proc), or None."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure_calls(opts: argparse.Namespace, kinds: list[str]) -> dict[str, Any]:
    """Part 1: per server mode, per client and mode, the best round (calls/s and CPU per call)."""
    return {server_mode: measure_server_mode(opts, kinds, server_mode) for server_mode in SERVER_MODES}


def measure_server_mode(opts: argparse.Namespace, kinds: list[str], server_mode: str) -> dict[str, Any]:
    """Part 1 against one server (``json`` or ``sse`` replies): its CPUs, and the best round per client and mode."""
    server = Server("sdk", *(["--json-response"] if server_mode == "json" else []))
    best: dict[str, dict[str, dict[str, float | None]]] = {}

    def step(worker: Worker, mode: str) -> None:
        before = server.cpu_seconds()
        calls, elapsed, cpu = worker.measure(mode, opts.seconds, opts.threads)
        after = server.cpu_seconds()
        rate = calls / elapsed
        entry = best.setdefault(worker.kind, {}).get(mode)
        if entry is None or rate > (entry["calls_per_second"] or 0.0):
            server_cpu = None if before is None or after is None else after - before
            best[worker.kind][mode] = {
                "calls_per_second": rate,
                "client_cpu_us": cpu / calls * 1e6,
                "server_cpu_us": None if server_cpu is None else server_cpu / calls * 1e6,
            }

    workers: list[Worker] = []
    try:
        workers = [Worker(__file__, kind, server.url) for kind in kinds]
        interleave(workers, opts.rounds, step, f"server {server_mode}: ")
    finally:
        for worker in workers:
            worker.close()
        server.close()
    return {"server_cpus": server.cpus, "clients": best}


def measure_big(opts: argparse.Namespace) -> dict[str, Any]:
    """Part 2: best ms per client and chunking for the big result (sseclient capped)."""
    server = Server("big", "--size", str(opts.big_size))
    results: dict[str, Any] = {}
    try:
        for variant, chunk in BIG_VARIANTS.items():
            url = f"{server.url}?chunk={chunk}"
            row: dict[str, float | None] = {}
            for kind in BIG_CLIENTS:
                if kind == "sseclient":
                    if opts.sseclient_timeout <= 0:
                        continue
                    # One run only: it is quadratic in the event size.
                    row[kind] = run_big(url, kind, 1, opts.sseclient_timeout)
                elif kind == "json.loads" and results:
                    row[kind] = next(iter(results.values()))["json.loads"]  # the same bytes: parse once
                else:
                    row[kind] = run_big(url, kind, opts.big_repeats, 300.0)
                print(f"  {opts.big_size / 1e6:g} MB, {variant}: {kind} done", flush=True)
            results[variant] = row
    finally:
        server.close()
    return results


def fmt_ms(value: float | None, cap: float) -> str:
    return f"> {cap:g} s" if value is None else f"{value:,.1f}"


def show_calls(calls: dict[str, Any], threads: int, server_stack: str) -> dict[str, Any]:
    """Print the calls/s tables; return the ratios per server mode."""
    par = f"{threads} thr"
    all_ratios: dict[str, Any] = {}
    for server_mode, result in calls.items():
        best = result["clients"]
        print(f"\nserver: MCPServer, {'JSON bodies' if server_mode == 'json' else 'SSE streams'} "
              f"(json_response={server_mode == 'json'}; {server_stack}; {result['server_cpus']})")
        print(f"{'':<16}{'calls/s':>20}{'client CPU us/call':>24}{'server CPU us/call':>24}")
        print(f"{'':<16}{'seq':>10}{par:>10}{'seq':>12}{par:>12}{'seq':>12}{par:>12}")
        for kind, row in best.items():
            cells = [f"{row[m]['calls_per_second']:>10,.0f}" for m in MODES]
            cells += [f"{row[m]['client_cpu_us']:>12,.0f}" for m in MODES]
            cells += [f"{'-' if row[m]['server_cpu_us'] is None else format(row[m]['server_cpu_us'], ',.0f'):>12}"
                      for m in MODES]
            print(f"{kind:<16}{''.join(cells)}")
        ratios: dict[str, dict[str, float]] = {}
        for era in ("legacy", "modern"):
            mine = best[f"mcpcall-{era}"]
            for base in (f"sdk-{era}", "requests", "http.client"):
                other = best[base]
                ratios[f"mcpcall-{era}/{base}"] = {
                    **{f"calls_{m}": mine[m]["calls_per_second"] / other[m]["calls_per_second"] for m in MODES},
                    **{f"cpu_{m}": other[m]["client_cpu_us"] / mine[m]["client_cpu_us"] for m in MODES},
                }
        all_ratios[server_mode] = ratios
        print(f"\n{'ratio':<30}{'calls/s':>20}{'client CPU, other/mcpcall':>27}")
        print(f"{'':<30}{'seq':>10}{par:>10}{'seq':>13}{par:>13}")
        for name, values in ratios.items():
            print(f"{name:<30}{values['calls_seq']:>9.2f}x{values['calls_par']:>9.2f}x"
                  f"{values['cpu_seq']:>12.2f}x{values['cpu_par']:>12.2f}x")
    return all_ratios


def show_big(big: dict[str, Any], opts: argparse.Namespace) -> dict[str, Any]:
    """Print the large-result table; return its ratios per chunking."""
    cap = opts.sseclient_timeout
    print(f"\n{opts.big_size / 1e6:g} MB text result on one SSE event, ms (best of {opts.big_repeats}; "
          f"sseclient: one run, capped at {cap:g} s)")
    print(f"{'':<16}" + "".join(f"{kind:>14}" for kind in BIG_CLIENTS)
          + f"{'mcpcall/dl':>12}{'mcpcall/json':>14}{'mcpcall/(dl+json)':>19}")
    ratios: dict[str, dict[str, float | None]] = {}
    notes = []
    for variant, row in big.items():
        mine, dl, parse = row["mcpcall"], row["requests"], row["json.loads"]
        sse = row.get("sseclient")
        ratios[variant] = {
            "mcpcall/requests": mine / dl,
            "mcpcall/json.loads": mine / parse,
            "mcpcall/(requests+json.loads)": mine / (dl + parse),
            "sseclient/mcpcall": None if sse is None else sse / mine,
        }
        cells = "".join(f"{'-' if kind not in row else fmt_ms(row[kind], cap):>14}" for kind in BIG_CLIENTS)
        print(f"{variant:<16}{cells}{mine / dl:>11.2f}x{mine / parse:>13.2f}x{mine / (dl + parse):>18.2f}x")
        if "sseclient" in row:
            notes.append(f"  sseclient, {variant}: " + (
                f"over {cap:g} s, more than {cap * 1000 / mine:,.0f}x mcpcall" if sse is None else f"{sse / mine:,.0f}x mcpcall"))
    print("  requests = requests.post(...).content (the bare download); json.loads = of the JSON message alone")
    print("\n".join(notes))
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_round_options(parser, rounds=3, seconds=1.0)
    parser.add_argument("--pin", action="store_true", help="pin clients and servers to one CPU (--cpu)")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU --pin uses")
    parser.add_argument("--big-size", type=int, default=10_000_000, help="characters in the large result")
    parser.add_argument("--big-repeats", type=int, default=5, help="timed fetches of the large result; best kept")
    parser.add_argument("--sseclient-timeout", type=float, default=45.0,
                        help="cap in seconds on each sseclient run (0: skip sseclient)")
    parser.add_argument("--only", choices=("calls", "big"), help="run one part only")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "URL"), help=argparse.SUPPRESS)
    parser.add_argument("--big-worker", nargs=3, metavar=("KIND", "URL", "REPEATS"), help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.worker:
        kind, url = opts.worker
        if kind.startswith("sdk-"):
            asyncio.run(sdk_worker(kind, url))
        elif kind == "http.client":
            thread_worker(kind, url, "http.client", HTTPClientLoop)
        else:
            thread_worker(kind, url, "requests", RequestsClient)
        return 0
    if opts.big_worker:
        kind, url, repeats = opts.big_worker
        big_worker(kind, url, int(repeats))
        return 0

    pin_and_announce(opts.cpu if opts.pin else None, opts.rounds, opts.seconds)
    server_stack = "uvicorn " + ("httptools" if importlib.util.find_spec("httptools") else "h11") + ", " + (
        "uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "pinned_cpu": opts.cpu if opts.pin else None,
        "rounds": opts.rounds,
        "seconds": opts.seconds,
        "threads": opts.threads,
    }
    if opts.only != "big":
        if importlib.util.find_spec("mcp") is None:
            print("the official SDK (PyPI mcp, Python 3.10+) is not installed: no server for the calls/s part", flush=True)
        else:
            calls = measure_calls(opts, list(CLIENTS))
            report["server"] = f"mcp MCPServer over Streamable HTTP ({server_stack})"
            report["calls"] = calls
            report["call_ratios"] = show_calls(calls, opts.threads, server_stack)
    if opts.only != "calls":
        big = measure_big(opts)
        report["big"] = {"size": opts.big_size, "repeats": opts.big_repeats,
                         "sseclient_timeout": opts.sseclient_timeout, "ms": big}
        report["big"]["ratios"] = show_big(big, opts)
    if opts.json:
        with open(opts.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
