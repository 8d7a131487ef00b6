"""Calls per second over stdio: mcpcall vs the official MCP SDK vs a raw pipe loop.

Every client talks to its own copy of ``fast_server.py`` (a one-thread stdlib
server) and runs in its own worker process, so one client's garbage, threads or
imports never slow another. The parent pins itself to one CPU (inherited by the
workers and their servers: client and server share that CPU), then runs the
rounds interleaved (each client in turn, round after round) and keeps the best
round of each, which is the least disturbed by a noisy machine.

    python benchmarks/bench_stdio.py [--rounds 5] [--seconds 2] [--threads 8] [--no-pin] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

from common import ARGS, MODES, Worker, add_round_options, interleave, pin_and_announce, serve_async, thread_worker

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = [sys.executable, os.path.join(HERE, "fast_server.py")]
CLIENTS = ("raw", "mcpcall-legacy", "mcpcall-modern", "sdk")


# -- the raw loop: the least a client can do ------------------------------------------


class RawClient:
    """Popen, one reader thread, ``{id: Future}``. No timeouts, no cancel, no checks."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None
        self._fd = self.proc.stdin.fileno()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        threading.Thread(target=self._read, daemon=True).start()
        info = {"name": "raw", "version": "1"}
        init = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info})
        self.instructions = init.get("instructions", "")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._fd, (self._dumps(message) + "\n").encode())  # one write below PIPE_BUF: atomic

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            future = self._pending.pop(message.get("id"), None)
            if future is not None:
                future.set_result(message.get("result") or {})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its result."""
        rid = next(self._ids)
        future: Future[dict[str, Any]] = Future()
        self._pending[rid] = future
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return future.result()

    def call_echo(self) -> str:
        """One ``tools/call`` of echo; the text it returned."""
        return str(self.request("tools/call", {"name": "echo", "arguments": ARGS})["content"][0]["text"])

    def close(self) -> None:
        """Close stdin; the server exits on EOF."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(5)


# -- workers: one client each, driven by the parent over stdin/stdout (see common) ----


async def sdk_worker() -> None:
    """A worker for the official SDK: ClientSession over stdio_client in one asyncio loop."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        await session.list_tools()  # call_tool would list once itself to learn output schemas

        async def call() -> str:
            result = await session.call_tool("echo", ARGS)
            return str(result.content[0].text)  # type: ignore[union-attr]

        await serve_async(call, init.instructions)


# -- the parent ---------------------------------------------------------------------


def import_time(module: str, repeats: int = 5) -> float:
    """Best seconds of ``python -c "import module"`` minus ``python -c "pass"`` (fresh processes)."""

    def best(code: str) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    return max(0.0, best(f"import {module}") - best("pass"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_round_options(parser, rounds=5, seconds=2.0)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin clients and servers to")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to one CPU")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.worker == "sdk":
        asyncio.run(sdk_worker())
        return 0
    if opts.worker:
        thread_worker(opts.worker, SERVER, "raw", RawClient)
        return 0

    pin_and_announce(None if opts.no_pin else opts.cpu, opts.rounds, opts.seconds)
    kinds = [kind for kind in CLIENTS if kind != "sdk" or importlib.util.find_spec("mcp") is not None]
    if "sdk" not in kinds:
        print("the official SDK (PyPI mcp, Python 3.10+) is not installed: measuring without it", flush=True)
    workers = [Worker(__file__, kind) for kind in kinds]
    for worker in workers:
        if not opts.no_pin and worker.server_cpus != f"cpus={opts.cpu}":
            print(f"warning: the {worker.kind} server runs on {worker.server_cpus}, not CPU {opts.cpu}", flush=True)
    best: dict[str, dict[str, float]] = {kind: {mode: 0.0 for mode in MODES} for kind in kinds}

    def step(worker: Worker, mode: str) -> None:
        calls, elapsed, _ = worker.measure(mode, opts.seconds, opts.threads)
        best[worker.kind][mode] = max(best[worker.kind][mode], calls / elapsed)

    try:
        interleave(workers, opts.rounds, step)
    finally:
        for worker in workers:
            worker.close()
    modules = ["mcpcall"] + (["mcp.client.session"] if "sdk" in kinds else [])
    imports = {module: import_time(module) for module in modules}

    ratios = {
        f"{kind}/{base}": {mode: best[kind][mode] / best[base][mode] for mode in MODES}
        for kind in ("mcpcall-legacy", "mcpcall-modern")
        for base in ("sdk", "raw")
        if base in kinds
    }
    par = f"{opts.threads} threads"
    print(f"\n{'calls/s':<16}{'sequential':>12}{par:>12}   server CPUs")
    for worker in workers:
        rates = best[worker.kind]
        print(f"{worker.kind:<16}{rates['seq']:>12,.0f}{rates['par']:>12,.0f}   {worker.server_cpus}")
    print(f"\n{'ratio':<24}{'sequential':>12}{par:>12}   target")
    for name, values in ratios.items():
        target = ">= 4x" if name.endswith("/sdk") else ">= 0.9x"
        print(f"{name:<24}{values['seq']:>11.2f}x{values['par']:>11.2f}x   {target}")
    print("\nimport time (best of 5, minus a bare interpreter)")
    for module, seconds in imports.items():
        print(f"  import {module:<22}{seconds * 1000:>8.1f} ms")
    if opts.json:
        report = {
            "python": sys.version.split()[0],
            "pinned_cpu": None if opts.no_pin else opts.cpu,
            "rounds": opts.rounds,
            "seconds": opts.seconds,
            "threads": opts.threads,
            "server_cpus": {w.kind: w.server_cpus for w in workers},
            "calls_per_second": best,
            "ratios": ratios,
            "import_seconds": imports,
        }
        with open(opts.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
