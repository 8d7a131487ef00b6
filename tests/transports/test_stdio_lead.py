"""A blocking call whose caller is the only one waiting reads its answer on the caller's thread.

The reader thread parks between lines while callers do so; every guarantee of a
wait still holds for a caller reading for itself: its timeout, a cancel and
close() reach it, the server's death ends it, what a server sends meanwhile
(progress, a line in pieces) is handled as the reader would, and several
threads calling at once are all answered.
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from typing import Any

import pytest

import mcpcall
from mcpcall import ConnectionClosed, RequestTimeout
from tests.conftest import demo_argv, fault_argv


def _watch(client: mcpcall.Client) -> list[str]:
    """The names of the threads that read each line of stdout from now on; leading noted as 'lead'."""
    transport: Any = client.transport
    seen: list[str] = []
    handle, read_for = transport._message, transport.read_for

    def traced_message(message: Any, head: bytes, receiver: Any) -> None:
        seen.append(threading.current_thread().name)
        handle(message, head, receiver)

    def traced_read_for(future: Any, deadline: float) -> bool:
        led = read_for(future, deadline)
        if led:
            seen.append("lead")
        return bool(led)

    transport._message = traced_message
    transport.read_for = traced_read_for
    return seen


def _warm(client: mcpcall.Client) -> None:
    for _ in range(3):  # the first asks the reader to park after its line; the next ones read for themselves
        client.ping(timeout=10)


def test_a_sole_blocking_call_reads_its_answer_on_its_own_thread() -> None:
    with mcpcall.connect(demo_argv(), protocol="legacy") as client:
        client.call_tool("echo", {"message": "first"})  # lists the tools first (a longer answer)
        _warm(client)
        seen = _watch(client)
        # Reading for itself is never required (on a loaded machine the reader may resume between two calls,
        # after its idle time): calls go on until three did, which they do at once on a quiet one.
        n = 0
        while seen.count("lead") < 3 and n < 300:
            assert client.call_tool("echo", {"message": str(n)}).text == str(n)
            n += 1
        me = threading.current_thread().name
        assert seen.count("lead") >= 3 and seen.count(me) >= 3, seen


def test_the_timeout_reaches_a_caller_reading_for_itself() -> None:
    with mcpcall.connect(fault_argv("hang"), protocol="legacy") as client:
        _warm(client)
        seen = _watch(client)
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            client.call_tool("echo", {"message": "x"}, timeout=0.5)
        assert time.monotonic() - started < 0.5 + 1.5
        assert "lead" in seen
        assert client.call_tool  # the client still works after a timeout
        client.ping(timeout=10)


def test_cancel_reaches_a_caller_reading_for_itself() -> None:
    with mcpcall.connect(fault_argv("hang"), protocol="legacy") as client:
        _warm(client)
        seen = _watch(client)
        future = client.call_tool_future("echo", {"message": "x"}, timeout=30)
        outcome: list[BaseException] = []

        def wait() -> None:
            try:
                client._caller.wait(future)
            except BaseException as exc:  # noqa: BLE001 - what the waiter got is the test's
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
        started = time.monotonic()
        future.cancel()
        waiter.join(5)
        assert not waiter.is_alive() and time.monotonic() - started < 1.5
        assert isinstance(outcome[0], concurrent.futures.CancelledError), outcome
        assert "lead" in seen


def test_close_reaches_a_caller_reading_for_itself() -> None:
    client = mcpcall.connect(fault_argv("hang"), protocol="legacy")
    _warm(client)
    seen = _watch(client)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("echo", {"message": "x"}, timeout=30)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    client.close()
    caller.join(5)
    assert not caller.is_alive()
    assert isinstance(outcome[0], ConnectionClosed), outcome
    assert "lead" in seen


def test_the_servers_death_ends_a_caller_reading_for_itself() -> None:
    with mcpcall.connect(fault_argv("crash-on-call"), protocol="legacy") as client:
        _warm(client)
        seen = _watch(client)
        with pytest.raises(ConnectionClosed) as caught:
            client.call_tool("echo", {"message": "x"}, timeout=20)
        assert caught.value.returncode == 3
        assert "lead" in seen


def test_an_answer_in_pieces_goes_to_the_reader_and_still_arrives() -> None:
    argv = fault_argv("big-line", extra=("--big-bytes", "300000", "--big-count", "2"))
    with mcpcall.connect(argv, protocol="legacy") as client:
        _warm(client)
        seen = _watch(client)
        for _ in range(2):
            assert len(client.call_tool("echo", {"message": "x"}, timeout=20).text) > 250_000
        assert client.call_tool("echo", {"message": "small"}).text == "small"
        assert "lead" in seen and any(name.startswith("mcpcall-reader-") for name in seen), seen


def test_progress_while_reading_for_itself_runs_on_the_callbacks_thread() -> None:
    with mcpcall.connect(demo_argv(), protocol="legacy") as client:
        _warm(client)
        seen = _watch(client)
        where: list[str] = []
        client.call_tool("slow", {"seconds": 0.3, "steps": 3}, on_progress=lambda *_: where.append(
            threading.current_thread().name), timeout=20)
        assert len(where) == 3 and all(name.startswith("mcpcall-callbacks-") for name in where), where
        assert "lead" in seen


def test_many_threads_at_once_are_all_answered() -> None:
    with mcpcall.connect(demo_argv(), protocol="legacy") as client:
        _warm(client)

        def calls(n: int) -> list[str]:
            return [client.call_tool("echo", {"message": f"{n}-{i}"}, timeout=20).text for i in range(25)]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(calls, range(8)))
        assert results == [[f"{n}-{i}" for i in range(25)] for n in range(8)]
        assert client.call_tool("echo", {"message": "after"}).text == "after"


def test_a_future_waited_elsewhere_is_answered_after_callers_read_for_themselves() -> None:
    with mcpcall.connect(demo_argv(), protocol="legacy") as client:
        _warm(client)  # the reader is parked now
        future = client.call_tool_future("echo", {"message": "f"})
        done, _ = concurrent.futures.wait([future], timeout=5)  # no result(): nothing tells the reader
        assert done and future.result().text == "f"
        assert client.call_tool_future("echo", {"message": "g"}).result(timeout=5).text == "g"


_CTRL_C = r"""
import os, signal, sys, threading, time
sys.path.insert(0, os.getcwd())
import mcpcall
from tests.conftest import fault_argv
# Python's own Ctrl-C handler, whatever this process inherited (a shell's background job ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)

client = mcpcall.connect(fault_argv("hang"), protocol="legacy")
transport = client.transport
led = []
read_for = transport.read_for
def traced(future, deadline):
    led.append(None)
    led[-1] = read_for(future, deadline)
    return led[-1]
transport.read_for = traced
client.list_tools()
for _ in range(300):  # until a ping read its own answer: the reader is parked for the call that follows
    client.ping(timeout=10)
    if led[-1:] == [True]:
        break
del led[:]
sent = []
send = transport.send
def traced_send(message, **kw):
    sent.append(message.get("method"))
    return send(message, **kw)
transport.send = traced_send
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    client.call_tool("echo", {"message": "x"}, timeout=30)
    print("no interrupt")
except KeyboardInterrupt:
    pass
print("led", led, "pending", client._caller.connection.dispatcher.in_flight(),
      "cancelled", "notifications/cancelled" in sent, flush=True)
client.close()
"""


def test_ctrl_c_reaches_a_caller_reading_for_itself() -> None:
    # Ctrl-C while the caller reads its answer: the request ends (pending no more) and the server is told.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _CTRL_C], check=False, capture_output=True, text=True, timeout=45)
    assert done.stdout.strip().splitlines()[-1:] == ["led [None] pending 0 cancelled True"], (done.stdout, done.stderr[-2000:])


_INTERRUPTED_LEADER = r"""
import os, sys, threading, time
sys.path.insert(0, os.getcwd())
import mcpcall
from tests.conftest import fault_argv

client = mcpcall.connect(fault_argv("hang"), protocol="legacy")
transport = client.transport
client.list_tools()
led = []
read_for = transport.read_for
def traced(future, deadline):
    led.append(None)
    led[-1] = read_for(future, deadline)
    return led[-1]
transport.read_for = traced
for _ in range(300):  # until a ping read its own answer: the reader is parked for the call that follows
    client.ping(timeout=10)
    if led[-1:] == [True]:
        break
del led[:]
dispatcher = transport._receiver
on_message = dispatcher.on_message
def interrupted(message):  # a Ctrl-C that lands while the main thread handles another thread's answer
    if threading.current_thread() is threading.main_thread() and message.get("result") == {}:
        raise KeyboardInterrupt
    return on_message(message)
dispatcher.on_message = interrupted
other = []
def ping():
    time.sleep(0.3)
    try:
        client.ping(timeout=3)
        other.append("answered")
    except Exception as exc:
        other.append(type(exc).__name__)
thread = threading.Thread(target=ping)
thread.start()
try:
    client.call_tool("echo", {"message": "x"}, timeout=2)
except (KeyboardInterrupt, mcpcall.RequestTimeout):
    pass
thread.join()
print("led", led[:1], "other", other, flush=True)
client.close()
"""


def test_a_caller_reading_for_itself_leaves_other_answers_to_the_reader() -> None:
    # The caller's thread may be the main one, where a Ctrl-C lands anywhere: another thread's answer it
    # read was lost when the interrupt came while it handled it (that thread waited out its timeout).
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_LEADER], check=False, capture_output=True, text=True,
                          timeout=45)
    assert done.stdout.strip().splitlines()[-1:] == ["led [True] other ['answered']"], (done.stdout, done.stderr[-2000:])


_FORK = r"""
import os, sys, threading, time
sys.path.insert(0, os.getcwd())
import concurrent.futures
import sys
import mcpcall
from tests.conftest import fault_argv

client = mcpcall.connect(fault_argv("hang"), protocol="legacy")
future = client.call_tool_future("echo", {"message": "x"}, timeout=30)
transport = client.transport
held, release = threading.Event(), threading.Event()
def hold():  # the parent's reader (or a caller) holds the park lock at the moment of the fork
    with transport._park_lock:
        transport._parked = True
        held.set()
        release.wait()
holder = threading.Thread(target=hold)
holder.start()
held.wait()
pid = os.fork()
if pid == 0:
    started = time.monotonic()
    try:
        future.result(1)
        outcome = "result"
    except concurrent.futures.TimeoutError:
        outcome = "timeout"
    except BaseException as exc:
        outcome = type(exc).__name__
    os.write(1, f"child {outcome} {time.monotonic() - started < 3}\n".encode())
    os._exit(0)
deadline = time.monotonic() + 8
while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
    time.sleep(0.05)
else:
    if time.monotonic() >= deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("child hung", flush=True)
release.set()
holder.join()
transport._parked = False
client.close()
"""


def test_a_forked_child_waiting_on_an_inherited_future_is_bounded_by_its_timeout() -> None:
    # The park lock, held by a parent's thread at the fork, stays held in the child forever: a wait there
    # took it with no bound (reading()), past the caller's timeout.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FORK], check=False, capture_output=True, text=True, timeout=45)
    assert done.stdout.strip().splitlines()[:1] == ["child timeout True"], (done.stdout, done.stderr[-2000:])


_INTERRUPTED_START = r"""
import os, sys, threading, time
sys.path.insert(0, os.getcwd())
import mcpcall
from tests.conftest import demo_argv

client = mcpcall.connect(demo_argv(), protocol="legacy")
transport = client.transport
led = []
read_for = transport.read_for
def traced(future, deadline):
    led.append(None)
    led[-1] = read_for(future, deadline)
    return led[-1]
transport.read_for = traced
for _ in range(300):  # until a ping read its own answer: the reader is parked for the call that follows
    client.ping(timeout=10)
    if led[-1:] == [True]:
        break
real = transport._park_lock
class Interrupting:  # a Ctrl-C that lands just as the caller, now the one reading, lets go of the park lock
    armed = True
    def __enter__(self):
        real.acquire()
    def __exit__(self, *exc):
        real.release()
        if Interrupting.armed and threading.current_thread() is threading.main_thread():
            Interrupting.armed = False
            raise KeyboardInterrupt
    def acquire(self, *a):
        return real.acquire(*a)
    def release(self):
        real.release()
transport._park_lock = Interrupting()
try:
    client.ping(timeout=10)
    print("no interrupt")
except KeyboardInterrupt:
    pass
transport._park_lock = real
try:
    client.ping(timeout=3)
    after = "answered"
except Exception as exc:
    after = type(exc).__name__
started = time.monotonic()
client.close()
print("interrupted", not Interrupting.armed, "after", after, "closed", time.monotonic() - started < 2, flush=True)
"""


def test_a_ctrl_c_as_a_caller_starts_reading_for_itself_leaves_the_reader_reading() -> None:
    # Interrupted after it took the lead but before the block that gives it back: the reader stayed parked
    # for good (every later call waited out its timeout, close() found the reader stuck).
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_START], check=False, capture_output=True, text=True,
                          timeout=45)
    assert done.stdout.strip().splitlines()[-1:] == ["interrupted True after answered closed True"], (
        done.stdout, done.stderr[-2000:])


NOTE_FIRST_SERVER = r"""
import json, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        result = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}, "logging": {}},
                  "serverInfo": {"name": "n", "version": "1"}}
    elif m["method"] == "tools/call":
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}
        sys.stdout.write(json.dumps(note) + "\n")
        sys.stdout.flush()
        time.sleep(0.2)  # the answer in a read of its own, after the reader handled the note
        result = {"content": [{"type": "text", "text": m["params"]["arguments"]["message"]}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


def test_a_line_before_a_lone_calls_answer_does_not_park_the_reader_with_the_answer_unread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A lone caller asks the reader to park after the line it reads now, for the next call. With a log message
    # before the answer, the reader parked after the message, and the answer sat unread until the park timed out
    # (50 ms on every such call; 5 s here, to make it plain): it parks only once the asking call is answered.
    from mcpcall.transports import stdio

    monkeypatch.setattr(stdio, "_PARK_IDLE", 5.0)
    with mcpcall.connect([sys.executable, "-c", NOTE_FIRST_SERVER], protocol="legacy") as client:
        for n in range(4):
            started = time.monotonic()
            assert client.call_tool("echo", {"message": str(n)}, timeout=20).text == str(n)
            assert time.monotonic() - started < 2.5, f"call {n} waited out the reader's park"
