"""Every client, transport and era in one run: calls/s and client CPU per call, one table, one plot.

Clients: mcpcall, the official SDK (PyPI ``mcp``) and the least a client can do
(over stdio the raw Popen + reader-thread loop of ``bench_stdio.py``; over HTTP a
bare ``http.client`` keep-alive loop and a bare ``requests.Session`` loop).
Transports: stdio (``fast_server.py``, one server per worker), Streamable HTTP
answering with JSON bodies and with SSE streams, and HTTP+SSE (the official
SDK's ``MCPServer`` in ``http_server.py``, one server per transport shared by
its clients). Eras: legacy (``initialize``) and modern (2026-07-28, per-request
``_meta``); the raw loops and HTTP+SSE speak legacy only.

Every client runs in its own worker process; the rounds are interleaved (every
worker in turn, sequential then threaded, round after round) and by default
everything is pinned to one CPU, so the figures compare what each client costs.
Client CPU per call is the worker process's own CPU time (every thread of it,
never the server's) over the calls it made. The best round of each is kept
(highest calls/s, lowest CPU per call). Then the import time of ``mcpcall``
against ``mcp.client.session``, the performance targets with whether each is
met, and a PNG plot (matplotlib: ``pip install 'mcpcall[bench]'``; skipped with
a note without it).

    python benchmarks/bench_all.py [--quick] [--rounds 5] [--seconds 1.5] [--no-pin] [--json FILE] [--plot FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import importlib
import importlib.util
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Its neighbours, even where the script's folder is not put on sys.path (PYTHONSAFEPATH=1, as make test runs).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_http
import bench_stdio
from common import ARGS, MODES, Worker, pin_and_announce, serve_async, thread_worker

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PLOT = os.path.join(HERE, "results.png")
BASELINES = ("raw", "http.client", "requests")  # the least a client can do, per transport
STDIO = "stdio"
# Each transport's server: http_server.py's arguments (one server, shared by the transport's clients), or None for
# stdio (every worker starts its own fast_server.py).
TRANSPORTS = {
    "stdio": None,
    "http json": ("sdk", "--json-response"),
    "http sse": ("sdk",),
    "http+sse": ("sdk", "--sse"),
}


@dataclass(frozen=True)
class Row:
    """One line of the table: a client over a transport in an era."""

    transport: str  # a key of TRANSPORTS
    era: str  # legacy or modern
    client: str  # mcpcall, sdk, or one of BASELINES

    @property
    def label(self) -> str:
        return f"{self.transport} {self.era} {self.client}"


def rows_for(sdk: bool) -> list[Row]:
    """Every row measured, in table order (without the SDK's when it is not installed)."""
    rows = [Row("stdio", "legacy", "raw"), Row("stdio", "legacy", "mcpcall"), Row("stdio", "legacy", "sdk"),
            Row("stdio", "modern", "mcpcall"), Row("stdio", "modern", "sdk")]
    if sdk:  # every HTTP server is the SDK's
        for reply in ("json", "sse"):
            transport = f"http {reply}"
            rows += [Row(transport, "legacy", "http.client"), Row(transport, "legacy", "requests"),
                     Row(transport, "legacy", "mcpcall"), Row(transport, "legacy", "sdk"),
                     Row(transport, "modern", "mcpcall"), Row(transport, "modern", "sdk")]
        rows += [Row("http+sse", "legacy", "http.client"), Row("http+sse", "legacy", "mcpcall"),
                 Row("http+sse", "legacy", "sdk")]
    return [row for row in rows if sdk or row.client != "sdk"]


# -- the bare http.client loop: the floor over HTTP ------------------------------------


class HttpSseLoop:
    """The same floor over HTTP+SSE: one ``http.client`` GET stream read by one thread, ``{id: Future}``, and
    keep-alive POST connections (one per calling thread) to the endpoint the stream names.

    The legacy handshake first, then no timeouts, no cancellation, no checks.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._stream = http.client.HTTPConnection(self.host, self.port)
        self._stream.request("GET", parts.path, headers={"Accept": "text/event-stream"})
        self._events = self._stream.getresponse()
        event, data = self._next_event()
        if event != "endpoint":
            raise RuntimeError(f"the HTTP+SSE stream began with {event!r}, not the endpoint event")
        self.path = data
        self._local = threading.local()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        self.headers = {"Content-Type": "application/json"}
        self._closed = False
        threading.Thread(target=self._read, daemon=True).start()
        info = {"name": "http.client", "version": "1"}
        init = self.request("initialize", {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": info})
        self.instructions = init.get("instructions", "")
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _next_event(self) -> tuple[str, str]:
        event, data = "message", list[str]()
        while True:
            line = self._events.readline()
            if not line:
                raise EOFError("the HTTP+SSE stream ended")
            text = line.decode().rstrip("\r\n")
            if not text:
                if data:
                    return event, "\n".join(data)
                continue
            if text.startswith("event:"):
                event = text[6:].strip()
            elif text.startswith("data:"):
                data.append(text[5:].lstrip(" "))

    def _read(self) -> None:
        try:
            while True:
                _, data = self._next_event()
                message = json.loads(data)
                future = self._pending.pop(message.get("id"), None)
                if future is not None:
                    future.set_result(message.get("result") or {})
        except Exception:  # close() shut the stream under this read: http.client fails in many ways
            if not self._closed:
                raise

    def _post(self, message: dict[str, Any]) -> None:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self.host, self.port)
        conn.request("POST", self.path, self._dumps(message).encode(), self.headers)
        conn.getresponse().read()  # 202 Accepted; the answer comes on the stream

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        future: Future[dict[str, Any]] = Future()
        self._pending[rid] = future
        self._post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return future.result()

    def call_echo(self) -> str:
        return str(self.request("tools/call", {"name": "echo", "arguments": ARGS})["content"][0]["text"])

    def close(self) -> None:
        self._closed = True
        if self._stream.sock is not None:
            self._stream.sock.shutdown(socket.SHUT_RDWR)
        self._stream.close()


# -- workers ---------------------------------------------------------------------------


async def sdk_worker(era: str, target: str) -> None:
    """The official SDK in one asyncio loop, over stdio (``target == "stdio"``), HTTP+SSE or Streamable HTTP."""
    from contextlib import AbstractAsyncContextManager

    from mcp.client.session import ClientSession

    streams: AbstractAsyncContextManager[Any]
    if target == STDIO:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        streams = stdio_client(StdioServerParameters(command=bench_stdio.SERVER[0], args=bench_stdio.SERVER[1:]))
    elif target.endswith("/sse"):
        from mcp.client.sse import sse_client

        streams = sse_client(target)
    else:
        from mcp.client.streamable_http import streamable_http_client

        streams = streamable_http_client(target)
    async with streams as pair, ClientSession(pair[0], pair[1]) as session:
        found = await (session.discover() if era == "modern" else session.initialize())
        await session.list_tools()  # call_tool would list once itself to learn output schemas

        async def call() -> str:
            result = await session.call_tool("echo", ARGS)
            return str(result.content[0].text)  # type: ignore[union-attr]

        await serve_async(call, found.instructions)


PIN_ENV = "BENCH_ALL_CPU"  # set by the parent: the CPU a worker pins itself to once its imports are done


def worker_main(client: str, era: str, target: str) -> None:
    """One worker (see common): ``client`` in ``era`` against ``target`` (``stdio`` or a URL).

    The imports come first, on any CPU (the workers start side by side, which is most of
    a run's setup), then the worker pins itself to ``$BENCH_ALL_CPU`` before it connects:
    its threads and the stdio server it starts inherit that.
    """
    for module in (["mcp.client.session", "mcp.client.stdio", "mcp.client.sse", "mcp.client.streamable_http"]
                   if client == "sdk" else ["mcpcall", "requests"]):
        importlib.import_module(module)
    if os.environ.get(PIN_ENV):
        os.sched_setaffinity(0, {int(os.environ[PIN_ENV])})
    if client == "sdk":
        asyncio.run(sdk_worker(era, target))
        return
    kind = f"mcpcall-{era}" if client == "mcpcall" else client
    if target == STDIO:  # mcpcall or the raw loop, each with its own fast_server.py
        thread_worker(kind, bench_stdio.SERVER, "raw", bench_stdio.RawClient)
    else:
        baseline = ((HttpSseLoop if target.endswith("/sse") else bench_http.HTTPClientLoop) if client == "http.client"
                    else bench_http.RequestsClient)
        thread_worker(kind, target, client if client in BASELINES else "requests", baseline)


# -- the run ---------------------------------------------------------------------------


def measure(opts: argparse.Namespace, rows: list[Row]) -> dict[str, Any]:
    """Start the servers and one worker per row, run the interleaved rounds; per row and mode, every round."""
    servers: dict[str, bench_http.Server] = {}
    workers: dict[Row, Worker] = {}
    rounds: dict[Row, dict[str, list[tuple[int, float, float]]]] = {row: {m: [] for m in MODES} for row in rows}
    pinned = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    begun = time.perf_counter()
    try:
        for row in rows:
            spec = TRANSPORTS[row.transport]
            if spec is not None and row.transport not in servers:
                servers[row.transport] = bench_http.Server(*spec)  # inherits the pinning
        # The workers start side by side on every CPU; each pins itself once its imports are done (worker_main).
        if pinned is not None and len(pinned) == 1 and opts.all_cpus:
            os.environ[PIN_ENV] = str(next(iter(pinned)))
            os.sched_setaffinity(0, opts.all_cpus)
        try:
            with ThreadPoolExecutor(len(rows)) as pool:
                started = {row: pool.submit(Worker, __file__, row.client, row.era,
                                            STDIO if TRANSPORTS[row.transport] is None else servers[row.transport].url)
                           for row in rows}
                failed: BaseException | None = None
                for row in rows:  # every worker that did start is kept, so that it is closed below
                    try:
                        workers[row] = started[row].result()
                    except BaseException as error:  # noqa: BLE001 (SystemExit from Worker: a worker died while starting)
                        failed = failed or error
                if failed is not None:
                    raise failed
        finally:
            os.environ.pop(PIN_ENV, None)
            if pinned is not None:
                os.sched_setaffinity(0, pinned)
        print(f"  started {len(workers)} workers and {len(servers)} HTTP servers in {time.perf_counter() - begun:.0f} s", flush=True)
        for n in range(opts.rounds):
            for row, worker in workers.items():
                for mode in MODES:
                    rounds[row][mode].append(worker.measure(mode, opts.seconds, opts.threads))
            print(f"  round {n + 1}/{opts.rounds} done ({time.perf_counter() - begun:.0f} s)", flush=True)
    finally:
        for worker in workers.values():
            worker.close()
        for server in servers.values():
            server.close()
    cpus = {row.label: worker.server_cpus for row, worker in workers.items()}
    cpus.update({f"{name} server": server.cpus for name, server in servers.items()})
    return {"rounds": rounds, "server_cpus": cpus}


def best_of(rounds: list[tuple[int, float, float]]) -> dict[str, float]:
    """The least disturbed figures of a row's rounds: the highest calls/s and the lowest client CPU per call."""
    return {"calls_per_second": max(calls / wall for calls, wall, _ in rounds),
            "client_cpu_us": min(cpu / calls * 1e6 for calls, _, cpu in rounds)}


# -- targets ---------------------------------------------------------------------------


def find(best: dict[str, dict[str, dict[str, float]]], transport: str, era: str, client: str) -> dict[str, dict[str, float]] | None:
    return best.get(Row(transport, era, client).label)


def targets(best: dict[str, dict[str, dict[str, float]]], imports: dict[str, float]) -> list[dict[str, Any]]:
    """The performance targets, from the best figures: name, per-mode values, the goal and whether it is met."""
    out: list[dict[str, Any]] = []

    def add(name: str, mine: Any, other: Any, metric: str, invert: bool, op: str, goal: float) -> None:
        if mine is None or other is None:
            return
        values = {}
        for mode in MODES:
            a, b = mine[mode][metric], other[mode][metric]
            values[mode] = b / a if invert else a / b
        met = {mode: (v >= goal if op == ">=" else v <= goal) for mode, v in values.items()}
        out.append({"name": name, "values": values, "goal": f"{op} {goal:g}", "met": met})

    for era in ("legacy", "modern"):
        mine = find(best, "stdio", era, "mcpcall")
        add(f"stdio {era}: calls/s mcpcall/raw", mine, find(best, "stdio", "legacy", "raw"),
            "calls_per_second", False, ">=", 1.0)
        add(f"stdio {era}: calls/s mcpcall/sdk", mine, find(best, "stdio", era, "sdk"),
            "calls_per_second", False, ">=", 5.0)
    for transport in ("http json", "http sse"):
        for era in ("legacy", "modern"):
            mine = find(best, transport, era, "mcpcall")
            add(f"{transport} {era}: client CPU mcpcall/http.client", mine,
                find(best, transport, "legacy", "http.client"), "client_cpu_us", False, "<=", 2.0)
            add(f"{transport} {era}: client CPU sdk/mcpcall", mine, find(best, transport, era, "sdk"),
                "client_cpu_us", True, ">=", 3.0)
    mine = find(best, "http+sse", "legacy", "mcpcall")
    add("http+sse legacy: client CPU mcpcall/http.client", mine, find(best, "http+sse", "legacy", "http.client"),
        "client_cpu_us", False, "<=", 2.0)
    add("http+sse legacy: client CPU sdk/mcpcall", mine, find(best, "http+sse", "legacy", "sdk"),
        "client_cpu_us", True, ">=", 3.0)
    if imports.get("mcpcall") is not None and imports.get("mcp.client.session"):
        ratio = imports["mcpcall"] / imports["mcp.client.session"]
        out.append({"name": "import time mcpcall/mcp.client.session", "values": {"all": ratio}, "goal": "< 0.2",
                    "met": {"all": ratio < 0.2}})
    return out


MEMORY_SIZE = 10_000_000  # characters in the large result


def memory_growth(module: Any, quick: bool) -> dict[str, float]:
    """Peak RSS growth over the payload per transport, from ``bench_memory``: its ``summary(quick)`` if it has one,
    else its own pieces (``run_once``, ``Variant``, ``Payload``, ``PATHS``: one fresh process per measurement, the
    median of 1 run per path with ``--quick``, of 3 without)."""
    summary = getattr(module, "summary", None)
    if summary is not None:
        return dict(summary(quick))
    spec = importlib.util.find_spec("mcpcall")
    assert spec is not None and spec.origin is not None
    variant = module.Variant("mcpcall", os.path.dirname(os.path.dirname(spec.origin)))  # the mcpcall measured above
    payload = module.Payload(MEMORY_SIZE).size()
    growth = {}
    for path in module.PATHS:
        runs = sorted(module.run_once(variant, "memory", "mcpcall", path, str(MEMORY_SIZE))["growth"]
                      for _ in range(1 if quick else 3))
        growth[path] = runs[len(runs) // 2] / payload
    return growth


def memory_lines(quick: bool) -> list[dict[str, Any]] | None:
    """The 10 MB result's peak RSS growth per transport as target lines, when ``benchmarks/bench_memory.py`` exists.

    The hook: ``bench_memory.summary(quick: bool) -> dict[str, float]`` mapping a
    transport's name to peak RSS growth over the payload size (target <= 2); failing
    that, ``memory_growth`` uses the pieces bench_memory.py has. None (and a note)
    when there is no bench_memory.py or it cannot give the figures.
    """
    if importlib.util.find_spec("bench_memory") is None:
        return None
    try:
        print("  10 MB result: peak RSS growth (bench_memory.py)", flush=True)
        growth = memory_growth(importlib.import_module("bench_memory"), quick)
    except Exception as error:  # noqa: BLE001 (another script's API: report, do not lose the run)
        print(f"note: benchmarks/bench_memory.py gave no memory figures ({type(error).__name__}: {error}): "
              "give it summary(quick) -> {transport: growth/payload}", flush=True)
        return None
    return [{"name": f"10 MB result {name}: peak RSS growth/payload", "values": {"all": value}, "goal": "<= 2",
             "met": {"all": value <= 2.0}} for name, value in growth.items()]


# -- output ----------------------------------------------------------------------------


def format_table(best: dict[str, dict[str, dict[str, float]]], threads: int) -> str:
    """The one table: per row, calls/s and client CPU per call, sequential and with ``threads`` threads."""
    par = f"{threads} thr"
    lines = [f"{'transport':<10}{'era':<8}{'client':<13}{'calls/s':>18}{'client CPU us/call':>22}",
             f"{'':<31}{'seq':>9}{par:>9}{'seq':>11}{par:>11}"]
    last = ""
    for label, row in best.items():
        transport, era, client = label.rsplit(" ", 2)
        if last and transport != last:
            lines.append("")
        last = transport
        cells = "".join(f"{row[m]['calls_per_second']:>9,.0f}" for m in MODES)
        cells += "".join(f"{row[m]['client_cpu_us']:>11,.0f}" for m in MODES)
        lines.append(f"{transport:<10}{era:<8}{client:<13}{cells}")
    return "\n".join(lines)


def format_targets(checks: list[dict[str, Any]], threads: int) -> str:
    """The targets: the ratio per mode, the goal, and whether it is met (per mode)."""
    par = f"{threads} thr"
    lines = [f"{'target':<50}{'seq':>8}{par:>8}   {'goal':<7}met"]
    for check in checks:
        values, met = check["values"], check["met"]
        if "all" in values:
            cells, verdict = f"{values['all']:>8.2f}{'':>8}", "yes" if met["all"] else "no"
        else:
            cells = "".join(f"{values[m]:>7.2f}x" for m in MODES)
            verdict = "yes" if all(met.values()) else "no" if not any(met.values()) else (
                "seq only" if met["seq"] else f"{par} only")
        lines.append(f"{check['name']:<50}{cells}   {check['goal']:<7}{verdict}")
    return "\n".join(lines)


CLIENT_COLORS = {"mcpcall": "#1f77b4", "sdk": "#d62728", "raw": "#7f7f7f", "http.client": "#7f7f7f", "requests": "#bcbd22"}


def plot(best: dict[str, dict[str, dict[str, float]]], threads: int, path: str, title: str) -> str | None:
    """Write the table as a PNG (two panels: calls/s, client CPU per call); None and a note without matplotlib."""
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return "matplotlib is not installed (pip install 'mcpcall[bench]' or make bench): no plot"
    labels = list(best)
    ys = list(range(len(labels)))[::-1]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.28 * len(labels) + 1.4), sharey=True)
    for ax, metric, name in ((axes[0], "calls_per_second", "calls/s (higher is better)"),
                             (axes[1], "client_cpu_us", "client CPU µs per call (lower is better)")):
        for offset, mode, alpha in ((0.2, "seq", 1.0), (-0.2, "par", 0.45)):
            colors = [CLIENT_COLORS.get(label.rsplit(" ", 1)[1], "#2ca02c") for label in labels]
            ax.barh([y + offset for y in ys], [best[label][mode][metric] for label in labels], height=0.38,
                    color=colors, alpha=alpha)
        ax.set_xscale("log")
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels(labels, fontsize=7)
    from matplotlib.patches import Patch  # type: ignore[import-not-found,unused-ignore]

    handles = [Patch(color=CLIENT_COLORS[c], label=name) for c, name in
               (("mcpcall", "mcpcall"), ("sdk", "official SDK"), ("raw", "raw / http.client loop"), ("requests", "requests loop"))]
    handles.append(Patch(color="#7f7f7f", alpha=0.45, label=f"pale: {threads} threads"))
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles), frameon=False)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return None


def import_times(modules: list[str], repeats: int) -> dict[str, float]:
    """``bench_stdio.import_time`` of each module, with bytecode caches written first.

    Under ``PYTHONDONTWRITEBYTECODE`` a checkout's modules would be compiled on every
    import while installed ones load their ``.pyc``: one import with writing allowed
    first, so both sides load compiled code.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "; ".join(f"import {m}" for m in modules)], check=True, env=env)
    return {module: bench_stdio.import_time(module, repeats) for module in modules}


def show(report: dict[str, Any], plot_path: str | None) -> None:
    """Print the table, the targets and the notes of a run (``main``'s report or its ``--json`` file); plot it."""
    threads = report["threads"]
    print(f"\n{format_table(report['best'], threads)}\n")
    print(format_targets(report["targets"], threads))
    print("\nimport time (best of fresh interpreters, minus a bare one): "
          + ", ".join(f"{module} {seconds * 1000:.1f} ms" for module, seconds in report["import_seconds"].items()))
    if not report["memory_measured"]:
        print("10 MB result memory: not measured (no benchmarks/bench_memory.py, or it gave no figures)")
    pinned = report["pinned_cpu"]
    print(f"({len(report['best'])} rows, {report['rounds']} rounds x {report['seconds']:g} s each mode, "
          f"{report['elapsed_seconds']:.0f} s, pinned to {'no CPU' if pinned is None else f'CPU {pinned}'}; "
          "best round kept: highest calls/s, lowest client CPU per call)")
    if plot_path:
        title = (f"mcpcall benchmarks: python {report['python']}, pinned to "
                 f"{'no CPU' if pinned is None else f'CPU {pinned}'}, best of {report['rounds']} x {report['seconds']:g} s")
        note = plot(report["best"], threads, plot_path, title)
        print(note or f"plot: {plot_path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (2 rounds x 0.5 s, about 1.5 min)")
    parser.add_argument("--rounds", type=int, help="rounds per row and mode; the best is kept (default 5; --quick 2)")
    parser.add_argument("--seconds", type=float, help="length of one round (default 1.5; --quick 0.5)")
    parser.add_argument("--threads", type=int, default=8, help="callers in the concurrent mode")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin clients and servers to")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to one CPU")
    parser.add_argument("--json", metavar="FILE", help="also write the figures (every round) to FILE")
    parser.add_argument("--plot", metavar="FILE", default=DEFAULT_PLOT, help="the PNG to write (default %(default)s)")
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    parser.add_argument("--worker", nargs=3, metavar=("CLIENT", "ERA", "TARGET"), help=argparse.SUPPRESS)
    parser.add_argument("--replot", metavar="JSON", help="measure nothing: show and plot the run saved with --json")
    opts = parser.parse_args(argv)
    if opts.replot:
        with open(opts.replot) as saved:
            show(json.load(saved), None if opts.no_plot else opts.plot)
        return 0
    if opts.worker:
        worker_main(*opts.worker)
        return 0
    opts.rounds = opts.rounds or (2 if opts.quick else 5)
    opts.seconds = opts.seconds or (0.5 if opts.quick else 1.5)

    pinned = None if opts.no_pin else opts.cpu
    opts.all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pin_and_announce(pinned, opts.rounds, opts.seconds)
    spec = importlib.util.find_spec("mcpcall")
    print(f"mcpcall measured: {spec.origin if spec else 'not found'}", flush=True)  # the workers import the same
    sdk = importlib.util.find_spec("mcp") is not None
    if not sdk:
        print("the official SDK (PyPI mcp, Python 3.10+) is not installed: stdio only, without it", flush=True)
    rows = rows_for(sdk)
    started = time.perf_counter()
    measured = measure(opts, rows)
    best = {row.label: {mode: best_of(measured["rounds"][row][mode]) for mode in MODES} for row in rows}
    if pinned is not None:
        for name, cpus in measured["server_cpus"].items():
            if cpus != f"cpus={pinned}":
                print(f"warning: {name} runs on {cpus}, not CPU {pinned}", flush=True)
    modules = ["mcpcall"] + (["mcp.client.session"] if sdk else [])
    imports = import_times(modules, 2 if opts.quick else 5)
    checks = targets(best, imports)
    memory = memory_lines(opts.quick)
    checks += memory or []
    report = {
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "pinned_cpu": pinned,
        "rounds": opts.rounds, "seconds": opts.seconds, "threads": opts.threads,
        "elapsed_seconds": time.perf_counter() - started, "memory_measured": memory is not None,
        "server_cpus": measured["server_cpus"], "best": best,
        "rounds_measured": {row.label: measured["rounds"][row] for row in rows},
        "targets": checks, "import_seconds": imports,
    }
    if opts.json:
        with open(opts.json, "w") as out:
            json.dump(report, out, indent=2)
    show(report, None if opts.no_plot else opts.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
