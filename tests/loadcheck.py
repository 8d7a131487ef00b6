"""What the load, leak and soak checks count, in one place.

``tests/test_leaks.py`` and ``tests/test_load_smoke.py`` check small runs with these;
``benchmarks/bench_load.py`` imports them for its long runs (a benchmark may use what
the tests own; the tests never depend on ``benchmarks/``), so the smoke and the
figures are counted the same way.

- what the process holds: mcpcall's objects alive after a full garbage collection,
  resident memory, Python's allocated memory blocks, open file descriptors, threads
  (:func:`snapshot`);
- calls checked one by one: every call echoes its own unique argument, from many
  threads at once, and any lost, mismatched or duplicated answer is counted
  (:func:`echo_load`);
- many requests in flight with deadlines: half answered late, half left to time
  out (:func:`hold_and_expire`);
- whether a run stays flat: the growth between a mark past the warm-up and the end,
  and its slope (:class:`Samples`, :func:`grown`).

Linux only (``/proc``), as the rest of the leak checks.
"""

from __future__ import annotations

import array
import collections
import concurrent.futures
import gc
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

PAGE = os.sysconf("SC_PAGE_SIZE")

#: How many of each kind may stay alive more after a run than before it, whatever the run's length: a
#: freed object may wait for its close thread, a cache may keep the last one. A leak of one per cycle
#: over a hundred cycles is far past it.
KEPT = 2


# -- what the process holds ----------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident memory of this process now."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * PAGE


def open_fds() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    """Python threads alive in this process (every thread mcpcall starts is one)."""
    return threading.active_count()


def _kinds() -> dict[str, type]:
    """The classes whose live instances are counted, by the name shown."""
    import subprocess

    import requests

    from mcpcall.callbacks import CallbackRunner
    from mcpcall.client import Client
    from mcpcall.dispatcher import Dispatcher
    from mcpcall.registry.registry import ToolRegistry
    from mcpcall.transports.base import Transport

    return {"Client": Client, "Transport": Transport, "Dispatcher": Dispatcher, "CallbackRunner": CallbackRunner,
            "ToolRegistry": ToolRegistry, "Popen": subprocess.Popen, "requests.Session": requests.Session}


def live_objects() -> dict[str, int]:
    """How many instances of each counted kind (subclasses included) are alive after a full collection."""
    kinds = _kinds()
    gc.collect()
    counts = dict.fromkeys(kinds, 0)
    for obj in gc.get_objects():
        cls = type(obj)
        for name, kind in kinds.items():
            if issubclass(cls, kind):
                counts[name] += 1
    return counts


@dataclass
class Snapshot:
    """What the process holds at one moment (after a full garbage collection)."""

    objects: dict[str, int]
    rss: int
    blocks: int  # sys.getallocatedblocks(): Python's own allocations, undisturbed by the allocator's arenas
    fds: int
    threads: int

    def row(self) -> dict[str, int]:
        """Every figure under one name each."""
        return {**self.objects, "rss": self.rss, "blocks": self.blocks, "fds": self.fds, "threads": self.threads}


def snapshot() -> Snapshot:
    """What the process holds now."""
    objects = live_objects()  # collects first
    return Snapshot(objects, rss_bytes(), sys.getallocatedblocks(), open_fds(), thread_count())


def grown(before: Snapshot, after: Snapshot, kept: int = KEPT) -> dict[str, int]:
    """The kinds of object, the descriptors and the threads that grew past ``kept`` (by how many)."""
    counts = {**before.objects, "fds": before.fds, "threads": before.threads}
    later = {**after.objects, "fds": after.fds, "threads": after.threads}
    return {name: later[name] - counts[name] for name in later if later[name] - counts[name] > kept}


def mcpcall_threads() -> collections.Counter:
    """mcpcall's threads alive now by name (the one scheduler thread of the process left out)."""
    return collections.Counter(t.name for t in threading.enumerate()
                               if t.name.startswith("mcpcall-") and t.name != "mcpcall-scheduler")


def settle(keep: collections.Counter, until: Callable[[], bool] = lambda: True, timeout: float = 10.0) -> None:
    """Wait for what closes on other threads to finish: no more mcpcall threads of any name than ``keep`` counts
    (a restarted client's threads have its predecessor's names), and ``until()`` true; at most ``timeout``
    seconds (then the snapshot shows what stayed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not (mcpcall_threads() - keep) and until():
            return
        time.sleep(0.02)


# -- cycles --------------------------------------------------------------------------------------------


@dataclass
class CycleReport:
    """A run of cycles: what the process held after the warm-up, at the half and at the end."""

    cycles: int
    seconds: float
    start: Snapshot
    half: Snapshot
    end: Snapshot

    def leaked(self, kept: int = KEPT) -> dict[str, int]:
        """What grew over the run past ``kept`` (object kinds, fds, threads)."""
        return grown(self.start, self.end, kept)

    def blocks_per_cycle(self) -> float:
        """Python allocations kept per cycle over the second half (the first half warms caches up)."""
        return (self.end.blocks - self.half.blocks) / max(1, self.cycles - self.cycles // 2)

    def rss_per_cycle(self) -> float:
        """Resident bytes gained per cycle over the second half."""
        return (self.end.rss - self.half.rss) / max(1, self.cycles - self.cycles // 2)


def run_cycles(cycle: Callable[[int], None], cycles: int, warmup: int = 3,
               settled: Callable[[], bool] = lambda: True) -> CycleReport:
    """``cycle(n)`` for ``warmup`` cycles, then ``cycles`` more, with a snapshot after the warm-up, at the half
    and at the end (each after :func:`settle`)."""
    keep = mcpcall_threads()
    for n in range(warmup):
        cycle(-1 - n)
    settle(keep, settled)
    start = snapshot()
    started = time.perf_counter()
    half = start
    for n in range(cycles):
        cycle(n)
        if n + 1 == cycles // 2:
            settle(keep, settled)
            half = snapshot()
    seconds = time.perf_counter() - started
    settle(keep, settled)
    return CycleReport(cycles, seconds, start, half, snapshot())


# -- calls checked one by one --------------------------------------------------------------------------


@dataclass
class LoadResult:
    """Calls from many threads, each checked against its own argument."""

    calls: int = 0
    answered: int = 0  # with exactly its own argument
    lost: int = 0  # raised, or gave no text
    mismatched: int = 0  # answered with something other than its own argument
    duplicated: int = 0  # answers that more than one call got
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list, repr=False)
    errors: list[str] = field(default_factory=list)  # the first few, as text

    @property
    def ok(self) -> bool:
        """Every call answered with its own argument, once."""
        return self.answered == self.calls and not (self.lost or self.mismatched or self.duplicated)

    def per_second(self) -> float:
        """Calls per second over the run."""
        return self.calls / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the calls' latencies, in seconds."""
        return percentile(self.latencies, q)

    def add(self, other: LoadResult, keep_latencies: bool = False) -> None:
        """Count ``other`` in (the seconds add up; latencies only if asked)."""
        self.calls += other.calls
        self.answered += other.answered
        self.lost += other.lost
        self.mismatched += other.mismatched
        self.duplicated += other.duplicated
        self.seconds += other.seconds
        if keep_latencies:
            self.latencies.extend(other.latencies)
        self.errors.extend(other.errors[: max(0, 5 - len(self.errors))])


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``; 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def echo_load(call: Callable[[str], str | None], threads: int, per_thread: int, timeout: float = 600.0) -> LoadResult:
    """``per_thread`` calls of ``call(argument)`` from each of ``threads`` threads at once (started together).

    Every argument is unique (thread, index and a run token); ``call`` returns the
    text the server answered, which must be that argument. Latency is measured
    around each call.
    """
    token = uuid.uuid4().hex[:8]
    answers: list[list[str | None]] = [[None] * per_thread for _ in range(threads)]
    latencies: list[list[float]] = [[0.0] * per_thread for _ in range(threads)]
    errors: list[str] = []
    failed = [0] * threads
    gate = threading.Barrier(threads + 1)
    clock = time.perf_counter

    def worker(k: int) -> None:
        mine, times = answers[k], latencies[k]
        gate.wait()
        for i in range(per_thread):
            began = clock()
            try:
                mine[i] = call(f"{token}:{k}:{i}")
            except Exception as exc:  # noqa: BLE001 - counted as lost, the first few kept
                failed[k] += 1
                if len(errors) < 5:
                    errors.append(f"{type(exc).__name__}: {exc}")
            times[i] = clock() - began

    pool = [threading.Thread(target=worker, args=(k,), name=f"load-{k}") for k in range(threads)]
    for thread in pool:
        thread.start()
    gate.wait()
    started = clock()
    for thread in pool:
        thread.join(timeout)
    seconds = clock() - started
    result = LoadResult(calls=threads * per_thread, seconds=seconds, errors=errors)
    seen = collections.Counter(a for row in answers for a in row if a is not None)
    for k in range(threads):
        for i, answer in enumerate(answers[k]):
            if answer is None:
                result.lost += 1
            elif answer != f"{token}:{k}:{i}":
                result.mismatched += 1
            else:
                result.answered += 1
        result.latencies.extend(latencies[k])
    result.duplicated = sum(n - 1 for n in seen.values() if n > 1)
    return result


# -- many requests in flight ---------------------------------------------------------------------------


@dataclass
class PendingReport:
    """Requests in flight at once, half answered late and half timed out."""

    count: int
    in_flight: int  # the dispatcher's count once all were sent
    threads_before: int
    threads_in_flight: int
    threads_after: int
    rss_per_request: float
    traced_per_request: float  # tracemalloc's bytes per request (0 when not traced)
    send_seconds: float
    answered: int  # with their own argument
    mismatched: int
    timed_out: int
    other: int  # ended any other way (or not at all)
    left_in_flight: int  # the dispatcher's count at the end
    settle_seconds: float
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """All in flight at once, every one answered or timed out, nothing left, no thread added."""
        return (self.in_flight == self.count and self.answered + self.timed_out == self.count
                and not (self.mismatched or self.other or self.left_in_flight)
                and self.threads_before == self.threads_in_flight == self.threads_after)


def hold_and_expire(client: Any, count: int, expire_after: float, traced: bool = False) -> PendingReport:
    """``count`` requests in flight at once on ``client`` (connected to ``tests/servers/hold_server.py``).

    The first half are ``hold`` calls (answered when ``release`` is called, newest
    first), with a long timeout; the second half are ``never`` calls with a timeout
    of ``expire_after`` seconds, which must be longer than sending them all takes.
    Once all are sent: threads and memory are read, ``release`` answers the first
    half, and the second half time out. Then nothing may be left in flight.
    """
    from mcpcall import RequestTimeout

    held, expiring = count // 2, count - count // 2
    warm = [client.call_tool_future("hold", {"message": "warm"}, timeout=600),
            client.call_tool_future("never", {"message": "warm"}, timeout=0.05)]
    client.call_tool("release", {"message": ""})
    concurrent.futures.wait(warm, timeout=30)  # every thread a request may need is started now
    gc.collect()
    threads_before = thread_count()
    tracer: Any = None
    if traced:
        import tracemalloc as tracer

        tracer.start()
    traced_before = tracer.get_traced_memory()[0] if tracer else 0
    rss_before = rss_bytes()
    started = time.perf_counter()
    answered_late = [client.call_tool_future("hold", {"message": f"h{i}"}, timeout=600) for i in range(held)]
    timing_out = [client.call_tool_future("never", {"message": f"n{i}"}, timeout=expire_after) for i in range(expiring)]
    send_seconds = time.perf_counter() - started
    in_flight = client.dispatcher.in_flight()
    threads_in_flight = thread_count()
    traced_bytes = tracer.get_traced_memory()[0] - traced_before if tracer else 0
    if tracer:
        tracer.stop()
    rss_growth = rss_bytes() - rss_before
    settle_started = time.perf_counter()
    released = client.call_tool("release", {"message": ""}, timeout=600).text
    futures = answered_late + timing_out
    concurrent.futures.wait(futures, timeout=expire_after + 60)
    settle_seconds = time.perf_counter() - settle_started
    report = PendingReport(count, in_flight, threads_before, threads_in_flight, 0, rss_growth / count,
                           traced_bytes / count, send_seconds, 0, 0, 0, 0, 0, settle_seconds)
    for i, future in enumerate(answered_late):
        if not future.done() or future.exception() is not None:
            report.other += 1
            if future.done() and len(report.errors) < 3:
                report.errors.append(repr(future.exception()))
        elif future.result().text == f"h{i}":
            report.answered += 1
        else:
            report.mismatched += 1
    for future in timing_out:
        if future.done() and isinstance(future.exception(), RequestTimeout):
            report.timed_out += 1
        else:
            report.other += 1
            if future.done() and len(report.errors) < 3:
                report.errors.append(repr(future.exception()) if future.exception() else f"answered {future.result()!r}")
    if released != str(held):
        report.errors.append(f"release answered {released!r}, not {held}")
        report.other += 1
    report.left_in_flight = client.dispatcher.in_flight()
    report.threads_after = thread_count()
    return report


# -- whether a long run stays flat ---------------------------------------------------------------------


@dataclass
class Sample:
    """What the process held after ``calls`` calls."""

    calls: int
    seconds: float
    rss: int
    blocks: int
    threads: int
    fds: int


class Samples:
    """Samples along a long run; flat means no growth with the number of calls past the warm-up.

    Kept in arrays allocated up front (``capacity`` samples), so that taking one allocates no
    Python object that would itself count as growth.
    """

    FIELDS = ("calls", "seconds", "rss", "blocks", "threads", "fds")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self._columns = {name: array.array("d" if name == "seconds" else "q", bytes(8 * capacity)) for name in self.FIELDS}

    def take(self, calls: int, seconds: float) -> None:
        """Sample the process now (after a full collection); ignored past ``capacity``."""
        if self.count == self.capacity:
            return
        gc.collect()
        index, columns = self.count, self._columns
        columns["rss"][index] = rss_bytes()
        columns["blocks"][index] = sys.getallocatedblocks()
        columns["threads"][index] = threading.active_count()
        columns["fds"][index] = open_fds()
        columns["calls"][index] = calls
        columns["seconds"][index] = seconds
        self.count = index + 1

    def __getitem__(self, index: int) -> Sample:
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError(index)
        columns = self._columns
        return Sample(*(columns[name][index] for name in self.FIELDS))  # type: ignore[arg-type]

    @property
    def points(self) -> list[Sample]:
        """Every sample taken, in order."""
        return [self[i] for i in range(self.count)]

    def after(self, fraction: float) -> list[Sample]:
        """The samples from the first one at or past ``fraction`` of the calls on."""
        points = self.points
        return [p for p in points if p.calls >= fraction * points[-1].calls]

    def growth(self, what: str, fraction: float = 0.1) -> int:
        """``what`` (rss, blocks, threads, fds) at the end minus at the ``fraction`` mark."""
        tail = self.after(fraction)
        return int(getattr(tail[-1], what) - getattr(tail[0], what))

    def slope(self, what: str, fraction: float = 0.1) -> float:
        """Least-squares growth of ``what`` per call from the ``fraction`` mark on."""
        tail = self.after(fraction)
        if len(tail) < 2:
            return 0.0
        xs = [float(p.calls) for p in tail]
        ys = [float(getattr(p, what)) for p in tail]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        spread = sum((x - mean_x) ** 2 for x in xs)
        return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


def soak(call: Callable[[str], str | None], total: int, threads: int, samples: int = 50,
         progress: Callable[[Samples, float, float], None] | None = None) -> tuple[LoadResult, Samples]:
    """``total`` checked calls (:func:`echo_load`) from ``threads`` threads, in ``samples`` equal steps, with the
    process sampled before the first step and after each; returns the calls counted together, and the samples.

    ``progress(samples, calls_per_second, p99_seconds)`` follows each sample (the figures are the step's).
    """
    per_thread = max(1, total // samples // threads)
    steps = max(1, total // (per_thread * threads))
    overall = LoadResult()
    points = Samples(steps + 1)
    points.take(0, 0.0)
    for _ in range(steps):
        step = echo_load(call, threads, per_thread)
        overall.add(step)
        rate, p99 = step.per_second(), step.percentile(99)
        del step  # its latencies (a float per call) must not count in the sample
        points.take(overall.calls, overall.seconds)
        if progress is not None:
            progress(points, rate, p99)
    return overall, points
