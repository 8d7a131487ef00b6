"""Load, requests in flight, connect/close cycles and a soak: what a long-lived process sees of mcpcall.

Four parts, each in fresh worker processes (``--only load,pending,cycles,soak``), every figure
counted with ``tests/loadcheck.py`` (the smoke test ``tests/test_load_smoke.py`` counts the same way):

``load``
    ``--threads`` (64) threads x ``--calls`` (1,000) calls at once on one client, each call's
    argument unique and its answer checked against it: lost (raised), mismatched and
    duplicated answers are counted. Against ``fast_server.py`` over stdio (both eras) and the
    official SDK's server over Streamable HTTP (``http_server.py sdk``) answering with JSON
    bodies (both eras) and with SSE streams (legacy era: a modern request gets JSON). Reported:
    calls/s and the calls' p50 and p99 latency, and the process's threads during the run.

``pending``
    ``--pending`` (100,000) requests in flight at once on one stdio client
    (``tests/servers/hold_server.py``): the first half ``hold`` calls (timeout 600 s) answered
    late, all at once and newest first, the second half ``never`` calls with a timeout of
    ``--expire`` seconds, left to time out. Reported: the threads before, with all of them in
    flight and after (one scheduler thread for every deadline: no thread per request), memory
    per pending request (RSS growth / N; tracemalloc's count in a second run), how each ended
    and what the dispatcher still holds at the end (must be 0).

``cycles``
    ``--cycles`` (1,000) connect / call / close cycles per transport: stdio, Streamable HTTP
    legacy and modern (JSON replies), legacy with SSE replies, HTTP+SSE; and as many restarts of
    a ToolRegistry's stdio server (its client closed, the next call restarts it). Before (after
    3 warm-up cycles) and after: live Client, Transport, Dispatcher, CallbackRunner, Popen and
    requests.Session objects after a full garbage collection, RSS, Python's allocated blocks
    (``sys.getallocatedblocks``) and RSS per cycle over the second half, open fds, threads.

``soak``
    ``--soak`` (100,000; ``make soak``: 1,000,000) checked calls over stdio (or, with
    ``--soak-server json|sse|httpsse``, the SDK's server over HTTP) from ``--soak-threads`` (4)
    threads, the process sampled 50 times along the way: RSS, allocated blocks, threads and fds
    at the 10 % mark and at the end, the growth between them and its least-squares slope per
    1,000 calls.

Everything is pinned to one CPU (``--cpu``, default 1; ``--no-pin``): the worker, its servers.
Nothing is asserted here; the smoke test asserts the counts on short runs. ``--quick`` is a
short run of every part (about 2 minutes); ``--json FILE`` keeps the figures.

    python benchmarks/bench_load.py --quick
    python benchmarks/bench_load.py --only soak --soak 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)  # for tests.loadcheck; last, so an installed mcpcall is the one measured

FAST_SERVER = [sys.executable, os.path.join(HERE, "fast_server.py")]
HOLD_SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "hold_server.py")]
HTTP_SERVER = os.path.join(HERE, "http_server.py")
PARTS = ("load", "pending", "cycles", "soak")
#: (label, server, era) of the load part: server "stdio" or an http_server.py reply kind.
LOAD_ROWS = (("stdio", "stdio", "legacy"), ("stdio", "stdio", "modern"), ("http json", "json", "legacy"),
             ("http json", "json", "modern"), ("http sse", "sse", "legacy"))
#: (label, server, era) of the cycles part; "registry" restarts a ToolRegistry's stdio server.
CYCLE_ROWS = (("stdio", "stdio", "legacy"), ("http json", "json", "legacy"), ("http json", "json", "modern"),
              ("http sse", "sse", "legacy"), ("http+sse", "httpsse", "legacy"), ("registry", "registry", "legacy"))
SERVER_FLAGS = {"json": ["--json-response"], "sse": [], "httpsse": ["--sse"]}
KINDS = ("Client", "Transport", "Dispatcher", "CallbackRunner", "Popen", "requests.Session")


# -- the workers -------------------------------------------------------------------------------------


class HTTPServer:
    """``http_server.py sdk`` with the flags of a reply kind, on 127.0.0.1, until closed."""

    def __init__(self, kind: str) -> None:
        argv = [sys.executable, HTTP_SERVER, "sdk", *SERVER_FLAGS[kind]]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line:
            raise SystemExit(f"the HTTP server ({' '.join(argv[1:])}) did not start")
        self.url = line[1]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def target_of(server: str) -> tuple[Any, HTTPServer | None]:
    """What to connect to for ``server``, and the HTTP server to close afterwards (None for stdio)."""
    if server in ("stdio", "registry"):
        return FAST_SERVER if server == "stdio" else HOLD_SERVER, None
    http = HTTPServer(server)
    return http.url, http


def emit(figures: dict[str, Any]) -> None:
    print(json.dumps(figures), flush=True)


def worker_load(server: str, era: str, threads: int, calls: int) -> None:
    import mcpcall
    from tests import loadcheck

    target, http = target_of(server)
    try:
        with mcpcall.connect(target, protocol=era, timeout=600) as client:

            def call(argument: str) -> str:
                return client.call_tool("echo", {"message": argument}).text

            loadcheck.echo_load(call, threads, max(1, 200 // threads))  # warm-up: every thread the client starts
            before = threading.active_count()
            result = loadcheck.echo_load(call, threads, calls)
            after = threading.active_count()
    finally:
        if http is not None:
            http.close()
    emit({"calls": result.calls, "answered": result.answered, "lost": result.lost, "mismatched": result.mismatched,
          "duplicated": result.duplicated, "seconds": result.seconds, "per_second": result.per_second(),
          "p50": result.percentile(50), "p99": result.percentile(99), "errors": result.errors,
          "threads_before": before, "threads_after": after})


def worker_pending(count: int, expire: float, traced: bool) -> None:
    import mcpcall
    from tests import loadcheck

    with mcpcall.connect(HOLD_SERVER, protocol="legacy", timeout=600) as client:
        report = loadcheck.hold_and_expire(client, count, expire, traced=traced)
    emit({**asdict(report), "ok": report.ok})


def worker_cycles(server: str, era: str, cycles: int) -> None:
    import mcpcall
    from tests import loadcheck

    target, http = target_of(server)
    registry: Any = None
    try:
        if server == "registry":
            registry = mcpcall.ToolRegistry({"hold": target})
            name = next(t.name for t in registry.tools() if t.name.endswith("__echo"))

            def cycle(n: int) -> None:
                registry.client("hold").close()  # closed by its user: the next call restarts it
                assert registry.call(name, {"message": str(n)}).text == str(n)
        else:

            def cycle(n: int) -> None:
                with mcpcall.connect(target, protocol=era, timeout=60) as client:
                    assert client.call_tool("echo", {"message": str(n)}).text == str(n)

        report = loadcheck.run_cycles(cycle, cycles)
    finally:
        if registry is not None:
            registry.close()
        if http is not None:
            http.close()
    emit({"cycles": cycles, "seconds": report.seconds, "start": report.start.row(), "half": report.half.row(),
          "end": report.end.row(), "leaked": report.leaked(), "blocks_per_cycle": report.blocks_per_cycle(),
          "rss_per_cycle": report.rss_per_cycle()})


def worker_soak(server: str, total: int, threads: int) -> None:
    import mcpcall
    from tests import loadcheck

    def progress(samples: loadcheck.Samples, per_second: float, p99: float) -> None:
        point = samples[-1]
        print(f"    {point.calls:>10,} calls  RSS {point.rss / 1e6:7.2f} MB  blocks {point.blocks:>8,}  threads "
              f"{point.threads}  fds {point.fds}  step {per_second:,.0f} calls/s  p99 {p99 * 1e3:.2f} ms",
              file=sys.stderr, flush=True)

    target, http = target_of(server)
    try:
        with mcpcall.connect(target, protocol="legacy", timeout=600) as client:

            def call(argument: str) -> str:
                return client.call_tool("echo", {"message": argument}).text

            loadcheck.echo_load(call, threads, 250)  # warm-up
            result, samples = loadcheck.soak(call, total, threads, progress=progress)
    finally:
        if http is not None:
            http.close()
    tail = samples.after(0.1)
    emit({"calls": result.calls, "answered": result.answered, "lost": result.lost, "mismatched": result.mismatched,
          "duplicated": result.duplicated, "seconds": result.seconds, "per_second": result.per_second(),
          "mark": asdict(tail[0]), "end": asdict(tail[-1]),
          "threads": [min(p.threads for p in samples.points), max(p.threads for p in samples.points)],
          "fds": [min(p.fds for p in samples.points), max(p.fds for p in samples.points)],
          "rss_growth": samples.growth("rss"), "rss_slope": samples.slope("rss"),
          "blocks_growth": samples.growth("blocks"), "blocks_slope": samples.slope("blocks"),
          "samples": [asdict(p) for p in samples.points]})


def run_worker(*args: Any) -> dict[str, Any]:
    """One worker process (inheriting the pinning); its last stdout line, as JSON."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", *map(str, args)]
    out = subprocess.run(argv, stdout=subprocess.PIPE, check=True, timeout=7200).stdout
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


# -- the parent: one table per part ------------------------------------------------------------------


def part_load(opts: argparse.Namespace, report: dict[str, Any]) -> None:
    print(f"\nload: {opts.threads} threads x {opts.calls:,} calls at once on one client, each answer checked "
          "against its own argument", flush=True)
    print(f"{'transport':<10}{'era':<8}{'calls':>9}{'lost':>6}{'mism':>6}{'dup':>5}{'calls/s':>10}{'p50 ms':>9}"
          f"{'p99 ms':>9}{'threads':>9}", flush=True)
    for label, server, era in LOAD_ROWS:
        row = run_worker("load", server, era, opts.threads, opts.calls)
        report.setdefault("load", {})[f"{label} {era}"] = row
        print(f"{label:<10}{era:<8}{row['calls']:>9,}{row['lost']:>6}{row['mismatched']:>6}{row['duplicated']:>5}"
              f"{row['per_second']:>10,.0f}{row['p50'] * 1e3:>9.2f}{row['p99'] * 1e3:>9.2f}{str(row['threads_before']) + '->' + str(row['threads_after']):>9}",
              flush=True)
        for error in row["errors"]:
            print(f"    {error}")


def part_pending(opts: argparse.Namespace, report: dict[str, Any]) -> None:
    print(f"\npending: {opts.pending:,} requests in flight at once over stdio, half answered late (newest first), "
          f"half timing out after {opts.expire:g} s", flush=True)
    print(f"{'run':<8}{'in flight':>10}{'threads':>12}{'RSS B/req':>11}{'traced B/req':>14}{'send s':>8}"
          f"{'answered':>10}{'timed out':>11}{'other':>7}{'left':>6}{'ended s':>9}", flush=True)
    for label, traced in (("rss", 0), ("traced", 1)):
        row = run_worker("pending", opts.pending, opts.expire, traced)
        report.setdefault("pending", {})[label] = row
        threads = f"{row['threads_before']}/{row['threads_in_flight']}/{row['threads_after']}"
        rss = "-" if traced else f"{row['rss_per_request']:,.0f}"  # tracemalloc's own records would count in RSS
        python = f"{row['traced_per_request']:,.0f}" if traced else "-"
        print(f"{label:<8}{row['in_flight']:>10,}{threads:>12}{rss:>11}{python:>14}{row['send_seconds']:>8.2f}{row['answered']:>10,}"
              f"{row['timed_out']:>11,}{row['other']:>7}{row['left_in_flight']:>6}{row['settle_seconds']:>9.2f}", flush=True)
        for error in row["errors"]:
            print(f"    {error}")
    print("threads: before / with every request in flight / after; 'ended s': from the release to the last timeout")


def part_cycles(opts: argparse.Namespace, report: dict[str, Any]) -> None:
    print(f"\ncycles: {opts.cycles:,} connect / call / close cycles per transport (registry: restarts of its server); "
          "live objects after gc, before -> after", flush=True)
    short = {"Client": "Client", "Transport": "Transp", "Dispatcher": "Disp", "CallbackRunner": "Callb",
             "Popen": "Popen", "requests.Session": "Session"}
    print(f"{'transport':<10}{'era':<8}{'ms/cycle':>9}" + "".join(f"{short[k]:>9}" for k in KINDS)
          + f"{'blocks/c':>9}{'RSS MB':>14}{'RSS B/c':>9}{'fds':>8}{'threads':>8}", flush=True)
    for label, server, era in CYCLE_ROWS:
        row = run_worker("cycles", server, era, opts.cycles)
        report.setdefault("cycles", {})[f"{label} {era}"] = row
        start, end = row["start"], row["end"]
        cells = "".join(f"{start[k]:>4}->{end[k]:<3}" for k in KINDS)
        print(f"{label:<10}{era if server != 'registry' else '':<8}{row['seconds'] / row['cycles'] * 1e3:>9.1f}{cells}"
              f"{row['blocks_per_cycle']:>9.1f}{start['rss'] / 1e6:>7.1f}->{end['rss'] / 1e6:<5.1f}"
              f"{row['rss_per_cycle']:>9,.0f}{start['fds']:>4}->{end['fds']:<3}{start['threads']:>4}->{end['threads']:<3}",
              flush=True)
        if row["leaked"]:
            print(f"    grew: {row['leaked']}")
    print("blocks/c and RSS B/c: growth per cycle over the second half (the first half warms caches up)")


def part_soak(opts: argparse.Namespace, report: dict[str, Any]) -> None:
    over = {"stdio": "stdio", "json": "Streamable HTTP (JSON replies)", "sse": "Streamable HTTP (SSE replies)",
            "httpsse": "HTTP+SSE"}[opts.soak_server]
    print(f"\nsoak: {opts.soak:,} checked calls over {over} (legacy) from {opts.soak_threads} threads, sampled 50 times",
          flush=True)
    row = run_worker("soak", opts.soak_server, opts.soak, opts.soak_threads)
    report["soak"] = row
    mark, end = row["mark"], row["end"]
    print(f"{'calls':>11}{'lost':>6}{'mism':>6}{'dup':>5}{'calls/s':>10}{'RSS MB at 10%':>15}{'at end':>8}{'growth':>10}"
          f"{'B/1k calls':>12}{'blocks/1k':>11}{'threads':>9}{'fds':>8}")
    print(f"{row['calls']:>11,}{row['lost']:>6}{row['mismatched']:>6}{row['duplicated']:>5}{row['per_second']:>10,.0f}"
          f"{mark['rss'] / 1e6:>15.2f}{end['rss'] / 1e6:>8.2f}{row['rss_growth'] / 1e6:>8.2f}MB{row['rss_slope'] * 1e3:>12.1f}"
          f"{row['blocks_slope'] * 1e3:>11.2f}{'{}-{}'.format(*row['threads']):>9}{'{}-{}'.format(*row['fds']):>8}", flush=True)
    print(f"from the 10 % mark ({mark['calls']:,} calls) to the end: growth, and its least-squares slope per 1,000 calls")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        part, rest = argv[1], argv[2:]
        workers: dict[str, Callable[..., None]] = {
            "load": lambda: worker_load(rest[0], rest[1], int(rest[2]), int(rest[3])),
            "pending": lambda: worker_pending(int(rest[0]), float(rest[1]), rest[2] == "1"),
            "cycles": lambda: worker_cycles(rest[0], rest[1], int(rest[2])),
            "soak": lambda: worker_soak(rest[0], int(rest[1]), int(rest[2])),
        }
        workers[part]()
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ",".join(PARTS))
    parser.add_argument("--quick", action="store_true", help="a short run of every part (about 2 minutes)")
    parser.add_argument("--threads", type=int, default=64, help="load: calling threads")
    parser.add_argument("--calls", type=int, help="load: calls per thread (1,000; quick: 100)")
    parser.add_argument("--pending", type=int, help="pending: requests in flight (100,000; quick: 20,000)")
    parser.add_argument("--expire", type=float, help="pending: timeout of the half left to time out (20 s; quick: 5 s)")
    parser.add_argument("--cycles", type=int, help="cycles: per transport (1,000; quick: 200)")
    parser.add_argument("--soak", type=int, help="soak: calls (100,000; quick: 20,000)")
    parser.add_argument("--soak-threads", type=int, default=4, help="soak: calling threads")
    parser.add_argument("--soak-server", choices=("stdio", "json", "sse", "httpsse"), default="stdio",
                        help="soak: fast_server.py over stdio, or the SDK's over HTTP with JSON or SSE replies, or HTTP+SSE")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to pin to")
    parser.add_argument("--no-pin", action="store_true", help="do not pin")
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    opts = parser.parse_args(argv)
    quick = opts.quick
    opts.calls = opts.calls or (100 if quick else 1000)
    opts.pending = opts.pending or (20_000 if quick else 100_000)
    opts.expire = opts.expire or (5.0 if quick else 20.0)
    opts.cycles = opts.cycles or (200 if quick else 1000)
    opts.soak = opts.soak or (20_000 if quick else 100_000)
    parts = [p for p in opts.only.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    if not opts.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {opts.cpu})
    import mcpcall

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, pinned: {'no' if opts.no_pin else opts.cpu}; "
          f"mcpcall {mcpcall.__version__} from {os.path.dirname(mcpcall.__file__)}", flush=True)
    report: dict[str, Any] = {"settings": {k: v for k, v in vars(opts).items() if k != "json"},
                              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    runs = {"load": part_load, "pending": part_pending, "cycles": part_cycles, "soak": part_soak}
    for part in PARTS:
        if part in parts:
            runs[part](opts, report)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
