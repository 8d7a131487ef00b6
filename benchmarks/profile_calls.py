"""Where the time goes per call: function calls per tool call, counted in every thread of the client.

A noise-free figure to track (it does not move with the machine's load): N
sequential ``call_tool("echo", ...)`` calls, with a profile hook
(``sys.setprofile`` on the calling thread, ``threading.setprofile`` for the
threads the client starts: readers, workers, the scheduler) counting every
Python function call and every call of a C function, divided by N. The server
runs in its own process and is not counted. Per client: the totals, the share
per package (mcpcall's modules, requests, urllib3, http.client, threading, ...: a
Python function counts for its own module, a C function for the module that
called it, so each package's share is the work done in its code), and
with ``--top K`` the K functions called most often.

    python benchmarks/profile_calls.py [--calls 2000] [--top 12] [--only stdio|http] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import bench_http
import bench_stdio
from common import ARGS

WARMUP = 200


def package_of(filename: str) -> str:
    """A short name for where a function lives: ``mcpcall.x``, a third-party package, or a stdlib module."""
    path = filename.replace(os.sep, "/")
    if "/mcpcall/" in path:
        return "mcpcall." + path.rsplit("/mcpcall/", 1)[1].removesuffix(".py").replace("/", ".")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if path.startswith("<"):
        return path
    return path.rsplit("/", 2)[-2] + "/" if path.endswith("__init__.py") else path.rsplit("/", 1)[-1].removesuffix(".py")


class Counter:
    """Counts ``call`` and ``c_call`` profile events per function while ``on`` is set."""

    def __init__(self) -> None:
        self.on = False
        self.py: collections.Counter[tuple[str, str]] = collections.Counter()
        self.c: collections.Counter[tuple[str, str]] = collections.Counter()

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if not self.on:
            return
        if event == "call":
            code = frame.f_code
            self.py[(package_of(code.co_filename), getattr(code, "co_qualname", code.co_name))] += 1
        elif event == "c_call":  # a C function counts for the code that called it: where the time goes
            caller = package_of(frame.f_code.co_filename)
            self.c[(caller, f"{getattr(arg, '__qualname__', None) or repr(arg)} (C)")] += 1


def count(counter: Counter, connect: Callable[[], tuple[Callable[[], Any], Callable[[], None]]], calls: int) -> Counter:
    """Connect, warm up, count ``calls`` calls on ``counter`` (emptied first), close."""
    counter.py.clear()
    counter.c.clear()
    call, close = connect()
    try:
        for _ in range(WARMUP):
            call()
        counter.on = True
        for _ in range(calls):
            call()
        counter.on = False
    finally:
        close()
    return counter


def mcpcall_client(target: Any, era: str) -> Callable[[], tuple[Callable[[], Any], Callable[[], None]]]:
    def connect() -> tuple[Callable[[], Any], Callable[[], None]]:
        import mcpcall

        client = mcpcall.connect(target, protocol=era)
        return (lambda: client.call_tool("echo", ARGS).text), client.close

    return connect


def baseline_client(factory: Callable[[Any], Any], target: Any) -> Callable[[], tuple[Callable[[], Any], Callable[[], None]]]:
    def connect() -> tuple[Callable[[], Any], Callable[[], None]]:
        client = factory(target)
        return client.call_echo, client.close

    return connect


def summarize(counter: Counter, calls: int, top: int) -> dict[str, Any]:
    """Per call: Python calls, C calls, by package (sorted), and the ``top`` functions most called."""
    packages: collections.Counter[str] = collections.Counter()
    for (package, _), n in (counter.py + counter.c).items():
        packages[package] += n
    both = counter.py + counter.c
    return {
        "python_calls": sum(counter.py.values()) / calls,
        "c_calls": sum(counter.c.values()) / calls,
        "by_package": {package: n / calls for package, n in packages.most_common()},
        "top": [[f"{package}:{name}", n / calls] for (package, name), n in both.most_common(top)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls counted per client (after 200 uncounted)")
    parser.add_argument("--top", type=int, default=0, help="also list the K functions called most often")
    parser.add_argument("--only", choices=("stdio", "http"), help="one transport only")
    parser.add_argument("--json", metavar="FILE", help="also write the counts to FILE")
    opts = parser.parse_args(argv)
    clients: list[tuple[str, Callable[[], tuple[Callable[[], Any], Callable[[], None]]]]] = []
    servers: list[bench_http.Server] = []
    if opts.only != "http":
        clients += [("stdio raw loop", baseline_client(bench_stdio.RawClient, bench_stdio.SERVER)),
                    ("stdio legacy mcpcall", mcpcall_client(bench_stdio.SERVER, "legacy")),
                    ("stdio modern mcpcall", mcpcall_client(bench_stdio.SERVER, "modern"))]
    results: dict[str, Any] = {}
    try:
        if opts.only != "stdio":
            from bench_http import HTTPClientLoop as HttpClientLoop

            for reply, args in (("json", ("sdk", "--json-response")), ("sse", ("sdk",))):
                server = bench_http.Server(*args)
                servers.append(server)
                clients += [(f"http {reply} http.client loop", baseline_client(HttpClientLoop, server.url)),
                            (f"http {reply} requests loop", baseline_client(bench_http.RequestsClient, server.url)),
                            (f"http {reply} legacy mcpcall", mcpcall_client(server.url, "legacy")),
                            (f"http {reply} modern mcpcall", mcpcall_client(server.url, "modern"))]
            server = bench_http.Server("sdk", "--sse")
            servers.append(server)
            clients.append(("http+sse legacy mcpcall", mcpcall_client(server.url, "legacy")))
        # One hook for the whole run, set before any client exists: every thread a client starts gets it, and so
        # do the threads mcpcall keeps for the process (the scheduler) once the first client has started them.
        counter = Counter()
        threading.setprofile(counter.hook)
        sys.setprofile(counter.hook)
        for name, connect in clients:
            results[name] = summarize(count(counter, connect, opts.calls), opts.calls, opts.top)
            print(f"  {name} done", flush=True)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]
        for server in servers:
            server.close()
    print(f"\nfunction calls per tool call (sequential, {opts.calls} calls, every thread of the client)")
    print(f"{'client':<30}{'Python':>9}{'C':>9}{'total':>9}   largest shares (calls per tool call)")
    for name, row in results.items():
        shares = ", ".join(f"{package} {n:.0f}" for package, n in list(row["by_package"].items())[:5])
        print(f"{name:<30}{row['python_calls']:>9.1f}{row['c_calls']:>9.1f}{row['python_calls'] + row['c_calls']:>9.1f}"
              f"   {shares}")
    if opts.top:
        for name, row in results.items():
            print(f"\n{name}: the {opts.top} functions called most often, calls per tool call")
            for function, n in row["top"]:
                print(f"  {n:>6.1f}  {function}")
    if opts.json:
        with open(opts.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
