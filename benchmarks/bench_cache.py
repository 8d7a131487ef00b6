"""What a cached ``list_tools()`` costs: mcpcall with and without the modern-era cache, a raw pipe loop,
and the official SDK, each listing the bundled demo server's tools over stdio in the same run.

The demo server marks its modern ``tools/list`` results fresh for a minute (``ttlMs``), so after the
first listing mcpcall answers from its cache: no message is sent, and the cost is the lookup, a deep
copy of the cached result (the caller may change what it gets) and parsing it into ``Tool`` objects.
``cache=False`` asks the server every time. The raw loop and the SDK ask the server every time too
(the SDK has no result cache). Rounds are interleaved and the best round of each is kept.

    python benchmarks/bench_cache.py [--rounds 5] [--seconds 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
from typing import Any, Callable

from bench_stdio import RawClient
from common import run_sequential

import mcpcall

SERVER = [sys.executable, "-m", "mcpcall.demo_server"]


def per_call(call: Callable[[], Any], seconds: float) -> float:
    """Seconds per call of ``call``, called back to back for about ``seconds``."""
    calls, elapsed, _ = run_sequential(call, seconds)
    return elapsed / calls


class SDKLister:
    """The official SDK's ``list_tools()`` in one asyncio loop: a session per round (anyio wants its
    scopes left in the task that entered them); only the listing is timed."""

    def timed(self, seconds: float) -> float:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        async def run() -> float:
            params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()  # warm
                calls = 0
                start = time.perf_counter()
                end = start + seconds
                now = start
                while now < end:
                    await session.list_tools()
                    calls += 1
                    now = time.perf_counter()
                return (now - start) / calls

        return asyncio.run(run())

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per client; the best is kept")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one round")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    opts = parser.parse_args(argv)

    modern = mcpcall.connect(SERVER, protocol="modern", name="cached")
    legacy = mcpcall.connect(SERVER, protocol="legacy", name="legacy")
    raw = RawClient(SERVER)
    sdk = SDKLister() if importlib.util.find_spec("mcp") is not None else None
    tools = len(modern.list_tools())
    print(f"python {sys.version.split()[0]}, {opts.rounds} rounds x {opts.seconds:g} s, best kept; "
          f"the demo server lists {tools} tools", flush=True)
    kinds: dict[str, Callable[[float], float]] = {
        "mcpcall modern, cached": lambda s: per_call(modern.list_tools, s),
        "mcpcall modern, cache=False": lambda s: per_call(lambda: modern.list_tools(cache=False), s),
        "mcpcall legacy": lambda s: per_call(legacy.list_tools, s),
        "raw loop": lambda s: per_call(lambda: raw.request("tools/list", {}), s),
    }
    if sdk is not None:
        kinds["official SDK"] = sdk.timed
    best = {kind: float("inf") for kind in kinds}
    try:
        for n in range(opts.rounds):
            for kind, timed in kinds.items():
                best[kind] = min(best[kind], timed(opts.seconds))
            print(f"  round {n + 1}/{opts.rounds} done", flush=True)
    finally:
        modern.close()
        legacy.close()
        raw.close()
        if sdk is not None:
            sdk.close()
    print(f"\n{'list_tools()':<30}{'us per call':>12}{'calls/s':>12}{'vs raw':>9}{'vs SDK':>9}")
    for kind, seconds in best.items():
        vs_sdk = f"{best['official SDK'] / seconds:>8.1f}x" if sdk is not None else f"{'-':>9}"
        print(f"{kind:<30}{seconds * 1e6:>12,.1f}{1 / seconds:>12,.0f}{best['raw loop'] / seconds:>8.1f}x{vs_sdk}")
    if opts.json:
        with open(opts.json, "w") as out:
            json.dump({"tools": tools, "seconds_per_call": best}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
