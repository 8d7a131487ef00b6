"""What ``bench_stdio.py`` and ``bench_http.py`` share: the timing loops, the workers' side and the
parent's side of the worker protocol, the interleaved best-of-rounds loop and the opening lines.

Imported as ``common``: both scripts are run as ``python benchmarks/bench_*.py``, which puts this
folder first on ``sys.path``, and their worker processes are started the same way.

The worker protocol: the parent starts ``SCRIPT --worker KIND [ARGS...]``; the worker connects,
warms up and prints ``ready INSTRUCTIONS`` (the benchmark servers' instructions name the CPUs they
may run on, e.g. ``cpus=0``); then it answers each ``MODE SECONDS THREADS`` line on stdin with
``CALLS ELAPSED CPU`` (wall and client CPU seconds), until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

MODES = ("seq", "par")
WARMUP_SECONDS = 0.5
ARGS = {"message": "x"}

Measurement = tuple[int, float, float]  # (calls, wall seconds, client CPU seconds)
Target = TypeVar("Target", str, list[str])  # what mcpcall.connect is given: a URL or an argv


# -- timing loops (shared by the thread-based clients) ------------------------------


def run_sequential(call: Callable[[], Any], seconds: float) -> Measurement:
    """Call ``call`` back to back for ``seconds``."""
    calls = 0
    cpu = time.process_time()
    start = time.perf_counter()
    end = start + seconds
    now = start
    while now < end:
        call()
        calls += 1
        now = time.perf_counter()
    return calls, now - start, time.process_time() - cpu


def run_threads(call: Callable[[], Any], seconds: float, threads: int) -> Measurement:
    """Call ``call`` in a loop from ``threads`` threads at once for ``seconds``."""
    counts = [0] * threads
    gate = threading.Barrier(threads + 1)
    box = [0.0]

    def loop(slot: int) -> None:
        gate.wait()
        end, n = box[0], 0
        while time.perf_counter() < end:
            call()
            n += 1
        counts[slot] = n

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    cpu = time.process_time()
    start = time.perf_counter()
    box[0] = start + seconds
    gate.wait()
    for worker in workers:
        worker.join()
    return sum(counts), time.perf_counter() - start, time.process_time() - cpu


# -- workers: one client each, driven by the parent over stdin/stdout ---------------


class EchoClient(Protocol):
    """A baseline client (the raw loop, the requests loop): connected, one echo call at a time."""

    instructions: str

    def call_echo(self) -> str: ...

    def close(self) -> None: ...


def serve(run: Callable[[str, float, int], Measurement], instructions: str) -> None:
    """Report readiness, then answer ``MODE SECONDS THREADS`` lines with ``CALLS ELAPSED CPU``."""
    print("ready", instructions, flush=True)
    for line in sys.stdin:
        mode, seconds, threads = line.split()
        calls, elapsed, cpu = run(mode, float(seconds), int(threads))
        print(calls, elapsed, cpu, flush=True)


def thread_worker(kind: str, target: Target, baseline: str, connect_baseline: Callable[[Target], EchoClient]) -> None:
    """A worker for the baseline client (``kind == baseline``) or mcpcall (both synchronous)."""
    if kind == baseline:
        raw = connect_baseline(target)
        call, close, instructions = raw.call_echo, raw.close, raw.instructions
    else:
        import mcpcall

        client = mcpcall.connect(target, protocol=kind.split("-")[1])

        def call() -> str:
            return client.call_tool("echo", ARGS).text

        close, instructions = client.close, client.instructions or ""
    assert call() == "x"
    run_sequential(call, WARMUP_SECONDS)
    run_threads(call, WARMUP_SECONDS / 2, 8)

    def run(mode: str, seconds: float, threads: int) -> Measurement:
        return run_sequential(call, seconds) if mode == "seq" else run_threads(call, seconds, threads)

    try:
        serve(run, instructions)
    finally:
        close()


async def serve_async(call: Callable[[], Awaitable[str]], instructions: str | None) -> None:
    """The async worker (the official SDK, in one asyncio loop): warm up, then ``serve`` with tasks for threads."""

    async def loop(end: float) -> int:
        n = 0
        while time.perf_counter() < end:
            await call()
            n += 1
        return n

    async def run(mode: str, seconds: float, threads: int) -> Measurement:
        cpu = time.process_time()
        start = time.perf_counter()
        tasks = 1 if mode == "seq" else threads
        counts = await asyncio.gather(*(loop(start + seconds) for _ in range(tasks)))
        return sum(counts), time.perf_counter() - start, time.process_time() - cpu

    assert await call() == "x"
    await run("seq", WARMUP_SECONDS, 1)
    await run("par", WARMUP_SECONDS / 2, 8)
    print("ready", instructions or "", flush=True)
    loop_ = asyncio.get_running_loop()
    while True:
        line = await loop_.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        mode, seconds, threads = line.split()
        calls, elapsed, cpu = await run(mode, float(seconds), int(threads))
        print(calls, elapsed, cpu, flush=True)


# -- the parent ---------------------------------------------------------------------


class Worker:
    """A worker process (``script --worker kind *args``) seen from the parent."""

    def __init__(self, script: str, kind: str, *args: str) -> None:
        self.kind = kind
        argv = [sys.executable, os.path.abspath(script), "--worker", kind, *args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.server_cpus = self._line().split(" ", 1)[1].strip()  # "ready cpus=0": the server's instructions

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"benchmark worker {self.kind!r} died (exit {self.proc.wait()})")
        return line

    def measure(self, mode: str, seconds: float, threads: int) -> Measurement:
        """One round: calls, wall seconds, client CPU seconds."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{mode} {seconds} {threads}\n")
        calls, elapsed, cpu = self._line().split()
        return int(calls), float(elapsed), float(cpu)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def interleave(workers: list[Worker], rounds: int, step: Callable[[Worker, str], None], label: str = "") -> None:
    """``step(worker, mode)`` for every worker and mode in turn, round after round; report each round."""
    for n in range(rounds):
        for worker in workers:
            for mode in MODES:
                step(worker, mode)
        print(f"  {label}round {n + 1}/{rounds} done", flush=True)


def add_round_options(parser: argparse.ArgumentParser, rounds: int, seconds: float) -> None:
    """``--rounds``, ``--seconds`` and ``--threads``, with these defaults."""
    parser.add_argument("--rounds", type=int, default=rounds, help="rounds per client and mode; the best is kept")
    parser.add_argument("--seconds", type=float, default=seconds, help="length of one round")
    parser.add_argument("--threads", type=int, default=8, help="callers in the concurrent mode")


def pin_and_announce(pinned_cpu: int | None, rounds: int, seconds: float) -> None:
    """Pin this process (and so its workers and their servers) to ``pinned_cpu`` if given; print the opening line."""
    if pinned_cpu is not None:
        os.sched_setaffinity(0, {pinned_cpu})
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, pinned: "
          f"{'no' if pinned_cpu is None else pinned_cpu}, {rounds} rounds x {seconds:g} s, best kept", flush=True)
