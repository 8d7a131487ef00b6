"""The dispatcher over an in-memory transport: ids, timeouts, cancellation, routing, races."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError, wait
from typing import Any, Callable, Dict, List, Optional

import pytest

from mcpcall import ConnectionClosed, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from mcpcall.callbacks import CallbackRunner
from mcpcall.dispatcher import Dispatcher
from mcpcall.scheduler import Scheduler
from mcpcall.transports.memory import MemoryTransport, Reply

Msg = Dict[str, Any]


class Peer:
    """A scripted server: ``behaviour(message, reply)``; keeps what it saw."""

    def __init__(self, behaviour: Optional[Callable[[Msg, Reply], None]] = None) -> None:
        self.seen: List[Msg] = []
        self.behaviour = behaviour or self.echo

    @staticmethod
    def echo(message: Msg, reply: Reply) -> None:
        if "id" in message and "method" in message:
            reply({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message.get("params")}})

    def __call__(self, message: Msg, reply: Reply) -> None:
        self.seen.append(message)
        self.behaviour(message, reply)

    def cancels(self) -> List[Any]:
        return [m["params"]["requestId"] for m in self.seen if m.get("method") == "notifications/cancelled"]


@pytest.fixture
def make() -> Any:
    made: List[tuple] = []

    def factory(behaviour: Optional[Callable[[Msg, Reply], None]] = None) -> tuple:
        peer = Peer(behaviour)
        transport = MemoryTransport(peer, name="t")
        runner = CallbackRunner("t")
        dispatcher = Dispatcher(transport, name="t", callbacks=runner)
        transport.start(dispatcher)
        made.append((transport, runner, dispatcher))
        return dispatcher, transport, peer

    yield factory
    for transport, runner, dispatcher in made:
        dispatcher.fail_all(ConnectionClosed("test over"))
        transport.close()
        runner.close()


def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def silent(message: Msg, reply: Reply) -> None:
    pass


def test_response_completes_future(make: Any) -> None:
    d, _, _ = make()
    f = d.request("tools/list", {"a": 1}, timeout=5)
    assert f.result(5) == {"echo": {"a": 1}}
    assert d.in_flight() == 0


def test_ids_are_unique_integers(make: Any) -> None:
    d, _, peer = make()
    futures = [d.request("m", None, timeout=5) for _ in range(50)]
    wait(futures, 5)
    ids = [m["id"] for m in peer.seen]
    assert len(set(ids)) == 50 and all(type(i) is int for i in ids)


def test_transform_runs_and_its_error_fails_the_future(make: Any) -> None:
    d, _, _ = make()
    assert d.request("m", {"x": 2}, 5, transform=lambda r, f: r["echo"]["x"] * 10).result(5) == 20

    def bad(result: Msg, future: Any) -> Any:
        raise ProtocolError("bad shape")

    with pytest.raises(ProtocolError, match="bad shape"):
        d.request("m", {}, 5, transform=bad).result(5)


def test_timeout_fails_future_sends_cancel_and_drops_late_answer(make: Any) -> None:
    held: List[Msg] = []
    d, transport, peer = make(lambda m, r: held.append(m) if "id" in m else None)
    f = d.request("tools/call", {}, timeout=0.2)
    with pytest.raises(RequestTimeout) as info:
        f.result(5)
    assert isinstance(info.value, TimeoutError)
    assert "'t'" in str(info.value) and "tools/call" in str(info.value)
    until(lambda: peer.cancels() == [held[0]["id"]])
    transport.reply({"jsonrpc": "2.0", "id": held[0]["id"], "result": {}})  # late: dropped
    g = d.request("ping2", None, timeout=0.2)
    with pytest.raises(RequestTimeout):
        g.result(5)
    assert d.in_flight() == 0


def test_no_cancel_when_asked_not_to(make: Any) -> None:
    d, _, peer = make(silent)
    with pytest.raises(RequestTimeout):
        d.request("initialize", {}, timeout=0.1, cancel_on_timeout=False).result(5)
    time.sleep(0.1)
    assert peer.cancels() == []


def test_caller_cancel(make: Any) -> None:
    d, transport, peer = make(silent)
    f = d.request("tools/call", {}, timeout=5)
    assert f.cancel() is True
    assert f.cancelled()
    with pytest.raises(CancelledError):
        f.result(1)
    until(lambda: peer.cancels() == [f.request_id])
    transport.reply({"jsonrpc": "2.0", "id": f.request_id, "result": {}})
    time.sleep(0.05)
    assert d.in_flight() == 0


def test_cancel_after_result_is_refused(make: Any) -> None:
    d, _, peer = make()
    f = d.request("m", {}, timeout=5)
    f.result(5)
    assert f.cancel() is False
    assert not f.cancelled()
    assert peer.cancels() == []


def test_cancel_races_with_responses_never_break(make: Any) -> None:
    d, _, _ = make()
    for _ in range(300):
        f = d.request("m", {}, timeout=5)
        f.cancel()
        # Either the answer or the cancel won; never an InvalidStateError, never a hang.
        wait([f], 5)
        assert f.done()
        assert f.cancelled() or f.result() == {"echo": {}}
    assert d.in_flight() == 0


def test_duplicate_and_unknown_responses_are_dropped(make: Any) -> None:
    def twice(m: Msg, reply: Reply) -> None:
        if "id" in m:
            reply({"jsonrpc": "2.0", "id": 987654, "result": {"stray": True}})
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"n": 1}})
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"n": 2}})

    d, _, _ = make(twice)
    assert [d.request("m", {}, 5).result(5) for _ in range(3)] == [{"n": 1}] * 3


def test_out_of_order_responses_match_their_requests(make: Any) -> None:
    held: List[Msg] = []

    def batch(m: Msg, reply: Reply) -> None:
        held.append(m)
        if len(held) == 10:
            for item in reversed(held):
                reply({"jsonrpc": "2.0", "id": item["id"], "result": {"v": item["params"]["v"]}})

    d, _, _ = make(batch)
    futures = [d.request("m", {"v": i}, 5) for i in range(10)]
    assert [f.result(5)["v"] for f in futures] == list(range(10))


def test_error_responses(make: Any) -> None:
    def err(m: Msg, reply: Reply) -> None:
        code = m["params"]["code"]
        reply({"jsonrpc": "2.0", "id": m["id"], "error": {"code": code, "message": "no", "data": {"supported": ["x"]}}})

    d, _, _ = make(err)
    with pytest.raises(RPCError) as info:
        d.request("tools/call", {"code": -32602}, 5).result(5)
    assert (info.value.code, info.value.message, info.value.data) == (-32602, "no", {"supported": ["x"]})
    assert "tools/call" in str(info.value) and "-32602" in str(info.value)
    with pytest.raises(UnsupportedVersion) as v:
        d.request("m", {"code": -32022}, 5).result(5)
    assert list(v.value.supported) == ["x"]


def test_progress_goes_to_the_right_call_on_the_callbacks_thread(make: Any) -> None:
    def progress(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        token = m["params"]["_meta"]["progressToken"]
        for i in range(1, 4):
            reply({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": i, "total": 3, "message": f"{m['params']['who']}{i}"}})
        reply({"jsonrpc": "2.0", "id": m["id"], "result": {}})

    d, _, _ = make(progress)
    got: Dict[str, List[tuple]] = {"a": [], "b": []}
    threads = set()

    def callback(who: str) -> Callable[[float, Optional[float], Optional[str]], None]:
        def on(p: float, t: Optional[float], msg: Optional[str]) -> None:
            threads.add(threading.current_thread().name)
            got[who].append((p, t, msg))
        return on

    fa = d.request("m", {"who": "a"}, 5, on_progress=callback("a"))
    fb = d.request("m", {"who": "b"}, 5, on_progress=callback("b"))
    wait([fa, fb], 5)
    until(lambda: got["a"][-1:] == [(3, 3, "a3")] and got["b"][-1:] == [(3, 3, "b3")])
    # Progress is coalesced per request (a newer one replaces the one still queued): in order, none twice.
    assert got["a"] == sorted(set(got["a"])) and set(got["a"]) <= {(1, 3, "a1"), (2, 3, "a2"), (3, 3, "a3")}
    assert [x[2] for x in got["b"]] == sorted({x[2] for x in got["b"]})
    assert threads == {"mcpcall-callbacks-t"}


def test_progress_resets_the_timeout_but_not_past_max(make: Any) -> None:
    stop = threading.Event()

    def ticking(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            stop.set()  # a cancel arrived
            return
        token = m["params"]["_meta"]["progressToken"]

        def tick() -> None:
            i = 0
            while not stop.is_set() and i < 100:
                i += 1
                reply({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i}})
                time.sleep(0.05)

        threading.Thread(target=tick, daemon=True).start()

    d, _, _ = make(ticking)
    started = time.monotonic()
    f = d.request("m", {}, timeout=0.3, on_progress=lambda *a: None, reset_timeout_on_progress=True, max_timeout=1.0)
    with pytest.raises(RequestTimeout):
        f.result(10)
    elapsed = time.monotonic() - started
    # Progress every 50 ms keeps a 0.3 s timeout alive until the 1 s cap; not a timing
    # assertion on speed, just that the deadline moved and then stopped moving.
    assert 0.8 <= elapsed < 5.0
    stop.set()


def test_server_requests_ping_and_unknown(make: Any) -> None:
    answers: List[Msg] = []
    d, transport, _ = make(lambda m, r: answers.append(m))
    transport.reply({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
    transport.reply({"jsonrpc": "2.0", "id": "s2", "method": "sampling/createMessage", "params": {}})
    until(lambda: len(answers) == 2)
    by_id = {a["id"]: a for a in answers}
    assert by_id["s1"]["result"] == {}
    assert by_id["s2"]["error"]["code"] == -32601


def test_disconnect_fails_everything_and_refuses_new_requests(make: Any) -> None:
    d, transport, _ = make(silent)
    futures = [d.request("m", {}, 30) for _ in range(5)]
    transport.disconnect("process exited with code 3")
    for f in futures:
        with pytest.raises(ConnectionClosed, match="code 3"):
            f.result(5)
    with pytest.raises(ConnectionClosed):
        d.request("m", {}, 30).result(1)


def test_bad_message_with_id_fails_only_that_request(make: Any) -> None:
    d, _, _ = make(silent)
    f1 = d.request("m", {}, 30)
    f2 = d.request("m", {}, 30)
    d.on_bad_message(ProtocolError("too big"), f1.request_id)
    with pytest.raises(ProtocolError):
        f1.result(1)
    assert not f2.done()
    d.on_bad_message(ProtocolError("too big, no id"), None)
    with pytest.raises(ProtocolError):
        f2.result(1)
    assert d.request("m", {}, 0.1).exception(5) is not None  # still usable (times out, silent peer)


def test_no_thread_per_request(make: Any) -> None:
    d, _, _ = make(silent)
    before = threading.active_count()
    futures = [d.request("m", {}, 30) for _ in range(500)]
    assert threading.active_count() <= before + 1  # at most the scheduler starting
    for f in futures:
        f.cancel()


def test_scheduler_orders_and_cancels() -> None:
    s = Scheduler(name="mcpcall-scheduler")  # the shared name keeps the leak check quiet
    fired: List[int] = []
    done = threading.Event()
    s.schedule(0.15, lambda: fired.append(3))
    s.schedule(0.05, lambda: fired.append(1))
    dead = s.schedule(0.1, lambda: fired.append(99))
    s.schedule(0.1, lambda: fired.append(2))
    s.schedule(0.2, done.set)
    dead.cancel()
    dead.cancel()
    assert done.wait(5)
    assert fired == [1, 2, 3]


def test_scheduler_compacts_cancelled_entries() -> None:
    s = Scheduler(name="mcpcall-scheduler")
    entries = [s.schedule(3600, lambda: None) for _ in range(5000)]
    for e in entries:
        e.cancel()
    assert len(s._heap) < 5000
    assert s.pending() == 0


# -- hardening: user code off internal threads, the armed deadline, malformed answers ----------


def test_done_callbacks_run_on_the_callbacks_thread_never_the_reader_or_scheduler(make: Any) -> None:
    d, _, _ = make()
    quiet, _, _ = make(silent)
    threads: List[str] = []
    done = threading.Event()

    def record(future: Any) -> None:
        threads.append(threading.current_thread().name)
        if len(threads) == 2:
            done.set()

    d.request("x", {}, timeout=5).add_done_callback(record)  # completed by the reader thread
    quiet.request("y", {}, timeout=0.05).add_done_callback(record)  # completed by the scheduler (timeout)
    assert done.wait(5)
    assert threads == ["mcpcall-callbacks-t", "mcpcall-callbacks-t"]
    finished = d.request("z", {}, timeout=5)
    finished.result(5)
    here: List[str] = []
    finished.add_done_callback(lambda f: here.append(threading.current_thread().name))
    assert here == [threading.current_thread().name]  # already done: at once, on the caller's thread


def test_a_blocking_done_callback_stalls_no_other_clients_timeouts(make: Any) -> None:
    # It ran on the process-wide scheduler thread: every timeout of every client waited for it.
    first, _, _ = make(silent)
    second, _, _ = make(silent)
    released = threading.Event()
    other_fired = threading.Event()

    def blocks(future: Any) -> None:
        released.wait(10)

    first.request("a", {}, timeout=0.05).add_done_callback(blocks)
    later = second.request("b", {}, timeout=0.3)
    later.add_done_callback(lambda f: other_fired.set())
    try:
        with pytest.raises(RequestTimeout):
            later.result(5)  # a concurrent TimeoutError here means the scheduler was stuck in `blocks`
    finally:
        released.set()


def test_the_armed_deadline_is_never_lost_to_a_race(make: Any) -> None:
    # _arm read and wrote the armed deadline without the lock: two requests racing could lose the
    # earlier one (a 0.2 s timeout fired after 5 s). After any interleaving the armed time must be
    # no later than the earliest due time. A tiny switch interval makes the threads interleave.
    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _race_the_armed_deadline(make)
    finally:
        sys.setswitchinterval(interval)


def _race_the_armed_deadline(make: Any) -> None:
    import random

    for _ in range(20):
        d, _, _ = make(silent)
        barrier = threading.Barrier(8)

        def send(seed: int) -> None:
            rng = random.Random(seed)
            barrier.wait(5)
            for _ in range(100):
                d.request("r", {}, timeout=rng.uniform(20.0, 60.0))

        threads = [threading.Thread(target=send, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        with d._lock:
            earliest = min(entry.due for entry in d._pending.values())
            assert d._armed_at <= earliest
            assert d._armed is not None and d._armed.callback is not None and d._armed.when <= earliest + 0.01
        d.fail_all(ConnectionClosed("next trial"))


@pytest.mark.parametrize(
    "answer, why",
    [
        ({"result": None}, "a result that is NoneType"),
        ({"result": [1]}, "a result that is list"),
        ({"error": {"message": "no code"}}, "not an object with an integer code"),
        ({"error": {"code": "1", "message": "string code"}}, "not an object with an integer code"),
        ({"result": {}, "error": {"code": 1, "message": "both"}}, "both a result and an error"),
        ({}, "neither a result nor an error"),
    ],
)
def test_a_malformed_answer_to_a_known_id_fails_that_request_at_once(make: Any, answer: Msg, why: str) -> None:
    def broken(message: Msg, reply: Reply) -> None:
        if "id" in message and "method" in message:
            reply({"jsonrpc": "2.0", "id": message["id"], **answer})

    d, _, _ = make(broken)
    with pytest.raises(ProtocolError, match=why):
        d.request("m", {}, timeout=30).result(5)  # TimeoutError here: logged and dropped, as before


def test_user_code_that_raises_system_exit_does_not_kill_the_callbacks_thread() -> None:
    runner = CallbackRunner("se")
    ran = threading.Event()

    def exits() -> None:
        raise SystemExit(3)

    try:
        runner.submit(exits)
        runner.submit(ran.set)
        assert ran.wait(5)
    finally:
        runner.close()


# -- review findings: no wait on the callbacks thread, nothing lost after close, logging off the reader ----


def test_waiting_on_the_callbacks_thread_for_a_call_with_progress_does_not_deadlock(make: Any) -> None:
    # Its answer was queued behind the waiter on the callbacks thread, and its deadline was already gone:
    # concurrent.futures.wait() there waited out its own timeout and the Future never completed.
    def progress_then_answer(m: Msg, reply: Reply) -> None:
        if "id" in m:
            token = m["params"]["_meta"]["progressToken"]
            reply({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"ok": True}})

    d, _, _ = make(progress_then_answer)
    outcome: Dict[str, Any] = {}
    finished = threading.Event()

    def on_callbacks_thread() -> None:
        future = d.request("m", {}, 5, on_progress=lambda *a: None)
        done, _ = wait([future], timeout=3)  # a plain wait: it does not run the callbacks queue
        outcome["done"] = bool(done)
        finished.set()

    d.callbacks.submit(on_callbacks_thread)
    assert finished.wait(10)
    assert outcome["done"] is True


def test_a_call_with_progress_returns_after_its_progress_callbacks(make: Any) -> None:
    # The answer no longer waits on the callbacks thread; a waiter still sees the latest progress callback first.
    def progress_then_answer(m: Msg, reply: Reply) -> None:
        if "id" in m:
            token = m["params"]["_meta"]["progressToken"]
            for i in range(20):
                reply({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i}})
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {}})

    d, _, _ = make(progress_then_answer)
    seen: List[float] = []

    def slow(p: float, t: Optional[float], msg: Optional[str]) -> None:
        time.sleep(0.005)
        seen.append(p)

    future = d.request("m", {}, 5, on_progress=slow)
    future.result(5)
    assert future.progress_drained is not None and future.progress_drained.wait(5)
    assert seen[-1] == 19 and seen == sorted(set(seen))  # coalesced: the latest is seen, in order, before the answer


def test_callbacks_submitted_during_close_are_never_lost() -> None:
    # submit() racing close() could queue behind the stop marker: accepted, then never run.
    for _ in range(50):
        runner = CallbackRunner("race")
        ran: List[int] = []
        accepted: List[int] = []
        go = threading.Event()

        def submitter(n: int) -> None:
            go.wait()
            for i in range(200):
                if runner.submit(ran.append, n * 1000 + i):
                    accepted.append(n * 1000 + i)

        threads = [threading.Thread(target=submitter, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        go.set()
        runner.close()
        for t in threads:
            t.join(5)
        assert sorted(ran) == sorted(accepted)


def test_mcpcall_logs_from_the_reader_on_the_callbacks_thread(make: Any) -> None:
    # log.debug on the reader thread ran the application's (slow) logging handlers there.
    import logging

    def unknown_then_answer(m: Msg, reply: Reply) -> None:
        if "id" in m:
            reply({"jsonrpc": "2.0", "id": 999999, "result": {}})  # nobody asked: logged at debug
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {}})

    d, _, _ = make(unknown_then_answer)
    threads: List[str] = []

    class Record(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            threads.append(threading.current_thread().name)

    handler = Record(logging.DEBUG)
    logger = logging.getLogger("mcpcall.dispatcher")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        d.request("m", {}, 5).result(5)
        until(lambda: bool(threads))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    assert set(threads) == {"mcpcall-callbacks-t"}


def test_a_probe_that_times_out_still_frees_its_exchange(make: Any) -> None:
    # cancel_on_timeout=False skipped the transport's cancel altogether: an HTTP worker stayed blocked.
    d, transport, peer = make(silent)
    calls: List[tuple] = []
    transport.cancel = lambda rid, reason, notify=True: calls.append((rid, notify))  # type: ignore[method-assign]
    future = d.request("server/discover", {}, 0.05, cancel_on_timeout=False)
    with pytest.raises(RequestTimeout):
        future.result(5)
    until(lambda: bool(calls))
    assert calls == [(future.request_id, False)]  # freed, but the server is not told


def test_close_cancels_what_is_in_flight_before_failing_it(make: Any) -> None:
    d, _, peer = make(silent)
    call = d.request("tools/call", {}, timeout=30)
    handshake = d.request("initialize", {}, timeout=30, cancel_on_timeout=False)  # never cancelled
    until(lambda: len(peer.seen) == 2)
    d.close(ConnectionClosed("closing"))
    with pytest.raises(ConnectionClosed):
        call.result(1)
    with pytest.raises(ConnectionClosed):
        handshake.result(1)
    until(lambda: peer.cancels() == [call.request_id])
    assert [m["params"]["reason"] for m in peer.seen if m.get("method") == "notifications/cancelled"] == [
        "the client was closed"
    ]
    with pytest.raises(ConnectionClosed):
        d.request("tools/list", None, timeout=1).result(1)


def test_a_gone_connection_fails_what_is_in_flight_without_cancelling(make: Any) -> None:
    d, transport, peer = make(silent)
    call = d.request("tools/call", {}, timeout=30)
    until(lambda: len(peer.seen) == 1)
    d.fail_all(ConnectionClosed("gone"))
    with pytest.raises(ConnectionClosed):
        call.result(1)
    time.sleep(0.05)  # a cancel would be sent at once, on this thread
    assert peer.cancels() == []
