"""What one stdio call does on its way, counted: noise-free guards of the per-call path.

Each test counts calls (a profile hook) or notifications instead of timing
anything. What used to happen is said in each test's first comment line.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcpcall
from mcpcall import forking
from mcpcall.transports import stdio
from mcpcall.transports.stdio import StdioTransport
from tests.conftest import demo_argv


class _Calls:
    """Function calls by thread role while ``on``: ``'file.py:name'`` for Python, ``'<c> name'`` for builtins."""

    def __init__(self) -> None:
        self.on = False
        self.by_role: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if not self.on or event not in ("call", "c_call"):
            return
        name = threading.current_thread().name
        role = name.split("-")[1] if name.startswith("mcpcall-") else "caller"
        if event == "call":
            code = frame.f_code
            self.by_role[role][f"{os.path.basename(code.co_filename)}:{code.co_name}"] += 1
        else:
            self.by_role[role][f"<c> {getattr(arg, '__name__', arg)}"] += 1


@pytest.fixture
def counted() -> Iterator[tuple[mcpcall.Client, _Calls]]:
    calls = _Calls()
    threading.setprofile(calls.hook)  # the client's threads, started from here on
    sys.setprofile(calls.hook)
    client = mcpcall.connect(demo_argv(), name="demo", timeout=20)
    try:
        for _ in range(3):  # warm: the tool list, the reader parked for callers reading for themselves
            client.call_tool("echo", {"message": "warm"})
        yield client, calls
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        client.close()


def test_a_stdio_call_makes_one_getpid_system_call(counted: tuple[mcpcall.Client, _Calls]) -> None:
    # The dispatcher and the session each asked os.getpid() on every call (a system call each) to refuse a
    # forked child; the session now compares the fork generation, and only the dispatcher asks the pid
    # (which a fork made in C, running no at-fork hook, still changes).
    client, calls = counted
    calls.on = True
    for _ in range(20):
        assert client.call_tool("echo", {"message": "x"}).text == "x"
    calls.on = False
    assert calls.by_role["caller"]["<c> getpid"] == 20
    assert calls.by_role["caller"]["calls.py:send"] == 20  # the path was counted


def _child_refuses(fork: Callable[[], int]) -> bytes:
    """What a child made by ``fork`` says of an Owned made before it: b"ForkedClient" when it is refused there
    (and an Owned made in the child is not)."""
    owner = forking.Owned()
    assert not owner.forked
    read, write = os.pipe()
    pid = fork()
    if pid == 0:  # pragma: no cover - the child: nothing here takes a lock
        try:
            owner.check("demo")
            os.write(write, b"no error")
        except mcpcall.ForkedClient:
            os.write(write, b"ForkedClient" if owner.forked and forking.Owned().forked is False else b"wrong")
        finally:
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 100)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert not owner.forked
    return answer


def test_a_child_of_a_fork_made_in_c_is_refused_too() -> None:
    # A fork that runs no at-fork hook (the C fork(): uWSGI without its Python after-fork call, ctypes, an
    # extension) left the generation as it was: the child was not refused the parent's client, and its close()
    # ended the parent's server. The pid still tells it.
    import ctypes

    assert _child_refuses(ctypes.PyDLL(None).fork) == b"ForkedClient"


def test_the_fork_generation_tells_a_forked_child_from_its_parent() -> None:
    # The check the hot path inlines (owner.born != forking.generation) must still refuse a forked child.
    assert _child_refuses(os.fork) == b"ForkedClient"


def test_a_stdio_call_enters_no_caller_waits_block(counted: tuple[mcpcall.Client, _Calls]) -> None:
    # Every blocking call entered caller_waits() (a thread-local stack, three frames) although only HTTP asks
    # for it; stdio says it never does (uses_caller_waits = False) and its calls skip the block.
    client, calls = counted
    calls.on = True
    for _ in range(10):
        client.call_tool("echo", {"message": "x"})
    calls.on = False
    caller = calls.by_role["caller"]
    assert caller["base.py:caller_waits"] == 0
    assert caller["base.py:__enter__"] == 0
    assert caller["calls.py:wait"] == 10


def test_an_answer_the_reader_delivers_takes_no_futures_frames(counted: tuple[mcpcall.Client, _Calls]) -> None:
    # The reader completed each Future through Future.set_result and an empty _invoke_callbacks, and a waiting
    # caller went through RequestFuture.result and Future.result (asking reading() and the callbacks thread twice).
    client, calls = counted
    caller = client._caller
    calls.on = True
    futures = [client.call_tool_future("echo", {"message": str(n)}) for n in range(4)]
    texts = [caller.wait(future).text for future in futures]  # several pending: the reader thread reads
    calls.on = False
    assert texts == ["0", "1", "2", "3"]
    reader, waiter = calls.by_role["reader"], calls.by_role["caller"]
    assert reader["dispatcher.py:settle"] == 4
    assert reader["_base.py:set_result"] == 0
    assert reader["_base.py:_invoke_callbacks"] == 0
    assert waiter["_base.py:result"] == 0
    assert waiter["stdio.py:reading"] <= 4  # once per wait at most, not once more inside result()


def test_a_settled_future_still_wakes_waits_and_runs_its_callbacks() -> None:
    # settle() now does what Future.set_result did itself: concurrent.futures.wait, as_completed and
    # done-callbacks must all still see the result.
    with mcpcall.connect(demo_argv(), name="demo", timeout=20) as client:
        futures = [client.call_tool_future("echo", {"message": str(n)}) for n in range(3)]
        seen: list[str] = []
        done_all = threading.Event()

        def note(future: Any) -> None:
            seen.append(future.result().text)
            if len(seen) == 3:
                done_all.set()

        for future in futures:
            future.add_done_callback(note)
        done, _ = concurrent.futures.wait(futures, timeout=15)
        assert len(done) == 3
        assert sorted(f.result().text for f in concurrent.futures.as_completed(futures, timeout=15)) == ["0", "1", "2"]
        assert done_all.wait(15)
        assert sorted(seen) == ["0", "1", "2"]
        assert futures[0].settle("again") is False  # a lost race changes nothing


class _CountingCondition(threading.Condition):
    notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def _unstarted() -> tuple[StdioTransport, _CountingCondition]:
    transport = StdioTransport([sys.executable, "-c", "pass"], name="unstarted")
    cond = _CountingCondition(transport._park_lock)
    transport._park_cond = cond
    return transport, cond


def test_a_parked_reader_already_asked_to_read_is_not_notified_again() -> None:
    # With several threads calling, every waiter that came before the parked reader ran took the park lock
    # and notified it again (0.44 Condition.notify_all per call with 8 threads): once asked is enough.
    transport, cond = _unstarted()
    transport._parked = True
    for _ in range(5):
        transport.reading()
    assert transport._resume
    assert cond.notified == 1


def test_a_caller_that_stops_reading_for_itself_wakes_the_reader_another_waiter_asked_for() -> None:
    # A caller reading for itself left, its own answer in, without waking the reader, although another waiter
    # had asked for it meanwhile: the reader slept out its 10 ms slice with that waiter's answer unread.
    transport, cond = _unstarted()
    transport._parked = True
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def lead(future_: Any, deadline: float) -> bool:
        transport.reading()  # another waiter comes while this caller reads for itself
        future_.set_result("own answer")
        return False  # its own answer in: "the reader need not read again now"

    transport._lead = lead  # type: ignore[method-assign]
    asked = cond.notified
    assert transport.read_for(future, deadline=float("inf"))
    assert transport._leader is None
    assert cond.notified > asked + 1  # the other waiter's ask, and the wake-up once this caller left


def test_a_caller_alone_after_a_crowd_does_not_ask_the_reader_to_park() -> None:
    # With several threads, a caller that found itself alone for a moment asked the reader to park, and the
    # next waiter had to wake it again (a park and a wake-up every few calls). Within _PARK_IDLE of another
    # waiter asking a parked reader to read, no caller asks it to park; after that one does again.
    transport, _ = _unstarted()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    transport._parked = True
    transport.reading()  # a waiter that does not read for itself: a crowd
    transport._parked = transport._resume = False  # the reader left the park
    assert transport.read_for(future, deadline=0.0) is False
    assert not transport._want_lead
    transport._crowded_at -= stdio._PARK_IDLE  # as if _PARK_IDLE had passed
    assert transport.read_for(future, deadline=0.0) is False
    assert transport._want_lead


def test_a_waiter_that_does_not_read_for_itself_keeps_the_reader_from_parking() -> None:
    # A lone caller had asked the reader to park after its current line; a second waiter that came before the
    # park found the reader not parked and asked nothing, and its answer waited until the park ended (50 ms).
    transport, cond = _unstarted()
    transport._want_lead = True  # asked by a lone caller's read_for; the reader has not parked yet
    transport.reading()
    assert not transport._want_lead
    assert cond.notified == 0
