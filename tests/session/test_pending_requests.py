"""Many requests in flight: what each costs, and that deadlines still need one thread for all of them.

Sizes are Python's own allocations (tracemalloc: exact, undisturbed by other
processes); bytes per request over 100,000 and RSS are in
``benchmarks/bench_memory.py``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import tracemalloc
from typing import Any

import pytest

from mcpcall import Client, RequestTimeout
from mcpcall._condition import FutureCondition
from mcpcall.dispatcher import RequestFuture
from mcpcall.scheduler import Scheduler
from mcpcall.transports.memory import MemoryTransport, Reply

PENDING = 5_000


def never_answers_calls(message: dict[str, Any], reply: Reply) -> None:
    if "id" not in message:
        return
    method = message["method"]
    if method == "initialize":
        reply({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "silent", "version": "1"}}})
    elif method != "tools/call":
        reply({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})


@pytest.mark.timeout(60)
def test_a_pending_request_costs_under_2_kb_and_no_thread() -> None:
    # Before: 2.4 KB each, most of it the threading.Condition (and its deque) inside every Future.
    with Client(MemoryTransport(never_answers_calls, name="silent"), protocol="legacy").connect() as client:
        warm = [client.call_tool_future("never", {}, timeout=300) for _ in range(50)]
        for future in warm:
            future.cancel()
        threads = threading.active_count()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            futures = [client.call_tool_future("never", {}, timeout=300) for _ in range(PENDING)]
            per_request = (tracemalloc.get_traced_memory()[0] - before) / PENDING
        finally:
            tracemalloc.stop()
        assert threading.active_count() == threads  # one scheduler thread for every deadline, no thread per request
        assert per_request < 2048, f"{per_request:.0f} bytes per pending request"
        assert not any(f.done() for f in futures)
    assert all(f.done() and f.exception() is not None for f in futures)  # close() ended every one


def test_pending_requests_still_time_out_and_cancel() -> None:
    with Client(MemoryTransport(never_answers_calls, name="silent"), protocol="legacy").connect() as client:
        short = [client.call_tool_future("never", {}, timeout=0.2) for _ in range(20)]
        cancelled = client.call_tool_future("never", {}, timeout=300)
        assert cancelled.cancel() and cancelled.cancelled()
        done, left = concurrent.futures.wait(short, timeout=10)
        assert not left
        assert all(isinstance(f.exception(), RequestTimeout) for f in done)


# -- the Future's condition ------------------------------------------------------------------------------------


def test_future_condition_is_small() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        futures = [RequestFuture("x") for _ in range(1000)]
        each = (tracemalloc.get_traced_memory()[0] - before) / len(futures)
    finally:
        tracemalloc.stop()
    assert isinstance(futures[0]._condition, FutureCondition)
    assert each < 700, f"{each:.0f} bytes per RequestFuture"  # with threading.Condition: about 1,600


def test_future_waits_wake_on_result_timeout_and_cancel() -> None:
    future = RequestFuture("x")
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.05)
    assert future._condition._waiters == []  # a waiter that timed out is gone

    got: list[Any] = []
    waiters = [threading.Thread(target=lambda: got.append(future.result(timeout=10))) for _ in range(3)]
    for thread in waiters:
        thread.start()
    time.sleep(0.1)
    future.set_result("ok")
    for thread in waiters:
        thread.join(10)
    assert got == ["ok", "ok", "ok"]

    other = RequestFuture("y")
    canceller = threading.Thread(target=lambda: (time.sleep(0.1), other.cancel()))
    canceller.start()
    with pytest.raises(concurrent.futures.CancelledError):
        other.result(timeout=10)
    canceller.join(10)


def test_futures_work_with_wait_and_as_completed() -> None:
    futures = [RequestFuture(str(i)) for i in range(5)]

    def finish() -> None:
        for i, future in enumerate(reversed(futures)):
            time.sleep(0.01)
            future.set_result(i)

    thread = threading.Thread(target=finish)
    thread.start()
    first = concurrent.futures.wait(futures, timeout=10, return_when=concurrent.futures.FIRST_COMPLETED)
    assert first.done
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures, timeout=10)) == [0, 1, 2, 3, 4]
    thread.join(10)
    assert repr(futures[0]).startswith("<RequestFuture at") and "finished" in repr(futures[0])


def test_future_condition_refuses_use_without_its_lock() -> None:
    condition = FutureCondition()
    with pytest.raises(RuntimeError):
        condition.wait(0)
    with pytest.raises(RuntimeError):
        condition.notify_all()
    with condition:
        assert condition.wait(0) is False
        condition.notify_all()


# -- deadlines: each pending request looked at a bounded number of times ---------------------------------------


class _CountingPending(dict):  # type: ignore[type-arg]
    """The dispatcher's pending map, counting the entries looked at (every entry a whole-map pass visits, each get)."""

    looked = 0

    def items(self) -> Any:
        self.looked += len(self)
        return super().items()

    def values(self) -> Any:
        self.looked += len(self)
        return super().values()

    def keys(self) -> Any:
        self.looked += len(self)
        return super().keys()

    def __iter__(self) -> Any:
        self.looked += len(self)
        return super().__iter__()

    def get(self, *args: Any) -> Any:
        self.looked += 1
        return super().get(*args)

    def __getitem__(self, key: Any) -> Any:
        self.looked += 1
        return super().__getitem__(key)


class _Idle(Scheduler):
    """A scheduler that never fires: its thread is never started."""

    def _start(self) -> None:
        pass


def test_requests_expiring_one_by_one_cost_no_pass_over_every_pending_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: each expiry (every distinct deadline) swept the whole pending map under the dispatcher's lock, so N
    # requests with spread-out deadlines cost N * N / 2 looks; 100,000 of them kept the scheduler thread busy
    # for as long as they took to expire, and every answer waited on the lock behind it.
    import mcpcall.dispatcher as dispatcher_module

    clock = [0.0]
    monkeypatch.setattr(dispatcher_module, "monotonic", lambda: clock[0])  # what the sweeps below take for now
    monkeypatch.setattr(dispatcher_module, "get_scheduler", lambda: _Idle())  # only the sweeps below run
    count = 2000
    with Client(MemoryTransport(never_answers_calls, name="silent"), protocol="legacy").connect() as client:
        dispatcher = client.dispatcher
        futures = [client.call_tool_future("never", {}, timeout=100 + i * 0.01) for i in range(count)]
        with dispatcher._lock:
            dues = sorted(entry.due for entry in dispatcher._pending.values())
            pending = dispatcher._pending = _CountingPending(dispatcher._pending)
        assert len(dues) == count
        for expired, due in enumerate(dues, 1):
            clock[0] = due  # the next request's deadline
            dispatcher._sweep()
            assert sum(f.done() for f in futures) == expired
        assert all(isinstance(f.exception(0), RequestTimeout) for f in futures)
        assert dispatcher.in_flight() == 0
    assert pending.looked < 10 * count, f"{pending.looked:,} looks at pending requests to expire {count:,}"


def answers_every_call(message: dict[str, Any], reply: Reply) -> None:
    if "id" in message and message["method"] == "tools/call":
        reply({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
    else:
        never_answers_calls(message, reply)


def test_answered_requests_do_not_pile_up_in_the_deadlines() -> None:
    # The deadlines heap keeps an answered request's (due, id) until it surfaces: 5,000 answered calls with a
    # 300 s timeout must not leave 5,000 of them (a million calls would leave a million).
    with Client(MemoryTransport(answers_every_call, name="quick"), protocol="legacy").connect() as client:
        client.call_tool_future("never", {}, timeout=300).result(10)  # the first call may list the tools first
        dispatcher = client.dispatcher
        sizes = []
        for _ in range(5000):
            client.call_tool_future("never", {}, timeout=300).result(10)
            sizes.append(len(dispatcher._dues))
        assert dispatcher.in_flight() == 0
    assert max(sizes) < 1100, max(sizes)  # rebuilt from the pending ones past 1,024
