"""Same-run A/B of mcpcall's HTTP client CPU per call, and function counts per call.

Two mcpcall trees (``--against DIR``, the "A" tree, e.g. a worktree of main; "B" is
this checkout's) each run in their own worker processes of ``bench_http.py``
against one official-SDK server (JSON replies, then SSE replies), next to the bare
``http.client`` loop and the official SDK; rounds are interleaved A, B, A, B, ...
and everything runs pinned to one CPU (``--cpu``). Reported: the median round's
client CPU per call (or the best round's, ``--best``), and the ratios mcpcall/http.client, SDK/mcpcall, A/B.

``--count N`` instead counts the function calls (Python and C) per ``call_tool``
over N sequential calls, on every thread of the process (the HTTP workers
included), for each tree and era: a figure free of noise.

    python benchmarks/ab_http.py --against /tmp/main-tree [--rounds 5] [--seconds 1] [--cpu 1]
    python benchmarks/ab_http.py --against /tmp/main-tree --count 300
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import threading
from typing import Any

from bench_http import Server
from common import ARGS, MODES, Worker

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "bench_http.py")
ROOT = os.path.dirname(HERE)


def _where(filename: str) -> str:
    """``requests/sessions.py``, ``mcpcall/transports/http.py``: the package and the file."""
    parts = filename.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if "site-packages" in filename or "mcpcall" in filename else parts[-1]


def count_calls(kind: str, url: str, n: int) -> dict[str, Any]:
    """Function calls per call_tool (all threads), by kind of event, and the most frequent functions."""
    counts: collections.Counter[str] = collections.Counter()
    active = [False]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if not active[0]:
            return
        if event == "call":
            code = frame.f_code
            counts[f"{_where(code.co_filename)}:{code.co_name}"] += 1
        elif event == "c_call":
            counts[f"<c>:{getattr(arg, '__qualname__', repr(arg))}"] += 1

    threading.setprofile(profile)
    if kind == "http.client":
        from bench_http import HTTPClientLoop

        loop = HTTPClientLoop(url)
        call, close = loop.call_echo, loop.close
    else:
        import mcpcall

        client = mcpcall.connect(url, protocol=kind.split("-")[1])
        call, close = (lambda: client.call_tool("echo", ARGS)), client.close
    try:
        for _ in range(20):
            call()
        sys.setprofile(profile)
        active[0] = True
        for _ in range(n):
            call()
        active[0] = False
        sys.setprofile(None)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        close()
    python = sum(v for k, v in counts.items() if not k.startswith("<c>"))
    native = sum(v for k, v in counts.items() if k.startswith("<c>"))
    files: collections.Counter[str] = collections.Counter()
    for name, value in counts.items():
        if not name.startswith("<c>"):
            files[name.split(":")[0]] += value
    return {"python": python / n, "c": native / n, "files": [(f, round(v / n, 1)) for f, v in files.most_common(25)],
            "top": [(name, round(v / n, 2)) for name, v in counts.most_common(150)]}


def run_count(tree: str, kind: str, url: str, n: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=tree)
    done = subprocess.run([sys.executable, __file__, "--count-worker", kind, url, str(n)], env=env,
                          stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=ROOT, help="the A tree (a checkout whose mcpcall/ is compared)")
    parser.add_argument("--mine", default=ROOT, help="the B tree (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--cpu", type=int, default=1)
    parser.add_argument("--servers", default="json,sse", help="server modes, comma-separated (json, sse)")
    parser.add_argument("--eras", default="legacy,modern")
    parser.add_argument("--best", action="store_true", help="report the best round (least CPU), not the median")
    parser.add_argument("--no-sdk", action="store_true", help="leave the official SDK client out")
    parser.add_argument("--count", type=int, default=0, help="count function calls per call over N calls instead")
    parser.add_argument("--top", type=int, default=0, help="with --count: show the N most frequent functions")
    parser.add_argument("--count-worker", nargs=3, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.count_worker:
        kind, url, n = opts.count_worker
        print(json.dumps(count_calls(kind, url, int(n))))
        return 0
    os.sched_setaffinity(0, {opts.cpu})
    trees = {"A": os.path.abspath(opts.against), "B": os.path.abspath(opts.mine)}
    eras = opts.eras.split(",")
    print(f"python {sys.version.split()[0]}, pinned to CPU {opts.cpu}; A = {trees['A']}, B = {trees['B']}", flush=True)
    for server_mode in opts.servers.split(","):
        server = Server("sdk", *(["--json-response"] if server_mode == "json" else []))
        try:
            if opts.count:
                got = run_count(trees["B"], "http.client", server.url, opts.count)
                print(f"{server_mode:>4} http.client: {got['python']:8.1f} Python calls/call {got['c']:8.1f} C calls/call",
                      flush=True)
                for name, value in (got["files"] + got["top"])[:opts.top]:
                    print(f"        {value:8.2f}  {name}")
                for era in eras:
                    for label, tree in trees.items():
                        got = run_count(tree, f"mcpcall-{era}", server.url, opts.count)
                        print(f"{server_mode:>4} {era:<6} {label}: {got['python']:8.1f} Python calls/call "
                              f"{got['c']:8.1f} C calls/call", flush=True)
                        for name, value in (got["files"] + got["top"])[:opts.top]:
                            print(f"        {value:8.2f}  {name}")
                continue
            workers: list[tuple[str, Worker]] = []
            kinds = [("http.client", "B")] + [(f"mcpcall-{era}", t) for era in eras for t in ("A", "B")]
            if not opts.no_sdk:
                kinds += [(f"sdk-{era}", "B") for era in eras]
            for kind, tree in kinds:
                os.environ["PYTHONPATH"] = trees[tree]
                label = kind if kind in ("http.client",) or kind.startswith("sdk") else f"{kind} {tree}"
                workers.append((label, Worker(BENCH, kind, server.url)))
            cpu: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
            try:
                for _ in range(opts.rounds):
                    for label, worker in workers:
                        for mode in MODES:
                            calls, _, seconds = worker.measure(mode, opts.seconds, opts.threads)
                            cpu[(label, mode)].append(seconds / calls * 1e6)
            finally:
                for _, worker in workers:
                    worker.close()
            pick = min if opts.best else statistics.median
            med = {key: pick(values) for key, values in cpu.items()}
            print(f"\nserver {server_mode}: client CPU us/call, {'best' if opts.best else 'median'} of {opts.rounds} rounds "
                  f"(seq, {opts.threads} thr)")
            for label, _ in workers:
                print(f"  {label:<22}" + "".join(f"{med[(label, m)]:>10.0f}" for m in MODES))
            print("  ratios" + " " * 16 + "".join(f"{m:>10}" for m in MODES))
            for era in eras:
                for tree in ("A", "B"):
                    mine = f"mcpcall-{era} {tree}"
                    print(f"  {mine + ' / http.client':<34}" + "".join(
                        f"{med[(mine, m)] / med[('http.client', m)]:>9.2f}x" for m in MODES))
                    if not opts.no_sdk:
                        print(f"  {'sdk-' + era + ' / ' + mine:<34}" + "".join(
                            f"{med[(f'sdk-{era}', m)] / med[(mine, m)]:>9.2f}x" for m in MODES))
                print(f"  {'A / B ' + era:<34}" + "".join(
                    f"{med[(f'mcpcall-{era} A', m)] / med[(f'mcpcall-{era} B', m)]:>9.2f}x" for m in MODES), flush=True)
        finally:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
