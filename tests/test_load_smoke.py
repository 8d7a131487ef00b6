"""A short run of what ``benchmarks/bench_load.py`` measures at length, with every count checked.

- calls from many threads at once: every call gets its own answer (stdio both eras, Streamable
  HTTP with JSON and SSE replies), and no thread is started per request;
- thousands of requests in flight with deadlines: all in flight at once with no thread each,
  then each answered (late, newest first) or timed out, and nothing left in flight;
- a mini soak: thousands of calls with the process sampled along the way, flat past the warm-up.

Connect/close cycles are in ``tests/test_leaks.py``. Counted with ``tests/loadcheck.py``, as the
benchmark counts. No speed is asserted: only counts, and flatness with a slack far below what one
leaked object per call would add.
"""

from __future__ import annotations

import threading

import pytest

import mcpcall
from tests import loadcheck
from tests.conftest import PYTHON, SERVERS, http_threads
from tests.servers.http_fault_server import FaultServer

HOLD = [PYTHON, str(SERVERS / "hold_server.py")]
THREADS = 16
CALLS = 200  # per thread

#: The mini soak: calls, from threads, sampled this many times.
SOAK_CALLS = 20_000
SOAK_THREADS = 4
SOAK_SAMPLES = 20
#: Past the 10 % mark, at most this many allocated blocks per call (one object kept per call is >= 1) and this
#: much resident memory in all (20,000 calls keeping 200 bytes each would be 3.6 MB).
SOAK_BLOCKS_PER_CALL = 0.05
SOAK_RSS_GROWTH = 3_000_000


def echo(client: mcpcall.Client):  # type: ignore[no-untyped-def]
    return lambda argument: client.call_tool("echo", {"message": argument}).text


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stdio_calls_from_many_threads_each_get_their_own_answer(era: str) -> None:
    with mcpcall.connect(HOLD, protocol=era, timeout=30) as client:
        threads = threading.active_count()
        result = loadcheck.echo_load(echo(client), THREADS, CALLS)
        assert threading.active_count() == threads  # the callers are gone; mcpcall started nothing per request
    assert result.ok, result
    assert result.answered == THREADS * CALLS


@pytest.mark.parametrize(("reply", "era"), [("json", "legacy"), ("json", "modern"), ("sse", "legacy")])
def test_http_calls_from_many_threads_each_get_their_own_answer(server: FaultServer, reply: str, era: str) -> None:
    server.reply = reply
    with mcpcall.connect(server.url, protocol=era, timeout=30) as client:
        result = loadcheck.echo_load(echo(client), THREADS, CALLS)
        workers = len(http_threads())
        assert workers <= client.transport.max_workers, f"{workers} HTTP threads for {THREADS} callers"  # type: ignore[attr-defined]
    assert result.ok, result
    assert result.answered == THREADS * CALLS
    assert len(server.requests("tools/call")) == THREADS * CALLS  # each sent once: none retried, none lost


def test_thousands_in_flight_end_answered_or_timed_out_with_no_thread_each() -> None:
    with mcpcall.connect(HOLD, protocol="legacy", timeout=30) as client:
        report = loadcheck.hold_and_expire(client, 2000, expire_after=3.0)
    assert report.in_flight == 2000, report  # all at once
    assert report.threads_before == report.threads_in_flight == report.threads_after, report
    assert (report.answered, report.timed_out) == (1000, 1000), report
    assert (report.mismatched, report.other, report.left_in_flight) == (0, 0, 0), report
    assert report.ok


def test_mini_soak_stays_flat() -> None:
    with mcpcall.connect(HOLD, protocol="legacy", timeout=30) as client:
        loadcheck.echo_load(echo(client), SOAK_THREADS, 250)  # warm-up
        result, samples = loadcheck.soak(echo(client), SOAK_CALLS, SOAK_THREADS, samples=SOAK_SAMPLES)
    assert result.ok and result.calls == SOAK_CALLS, result
    points = samples.points
    assert len({p.threads for p in points}) == 1, [p.threads for p in points]
    assert len({p.fds for p in points}) == 1, [p.fds for p in points]
    blocks = samples.growth("blocks")
    rss = samples.growth("rss")
    assert blocks < SOAK_BLOCKS_PER_CALL * SOAK_CALLS * 0.9, f"{blocks} blocks more after the 10 % mark"
    assert rss < SOAK_RSS_GROWTH, f"RSS grew by {rss:,} bytes after the 10 % mark"
