"""ToolRegistry.call_future and call_again: the stats count every outcome as call() counts it, the outputSchema
check runs where the result is read (never on the client's callbacks thread), and a call is sent again once.

Real peers: the demo server over stdio, the HTTP fault server (a legacy-era session it forgets on demand), and a
memory-transport server whose structured content the test chooses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, wait
from typing import Any

import pytest

import mcpcall
from mcpcall import Client, InvalidRequest, SchemaValidationError, SessionExpired, ToolRegistry
from mcpcall.registry.failures import model_text
from mcpcall.transports.memory import MemoryTransport
from tests.conftest import demo_argv
from tests.servers.http_fault_server import FaultServer as HTTPFaultServer
from tests.session.test_output_check_thread import recording
from tests.session.test_output_check_thread import server as adder

pytestmark = pytest.mark.timeout(60)



def counted(registry: ToolRegistry, name: str) -> tuple[int, int, int, int, Any]:
    stats = registry.stats()[name]
    return stats.calls, stats.errors, stats.timeouts, stats.retries, stats.last_error


# -- calls refused before they were sent ----------------------------------------------------------


def test_a_call_refused_before_sending_counts_alike_through_call_and_call_future() -> None:
    demo = {"command": demo_argv()[0], "args": demo_argv()[1:]}
    with ToolRegistry({"demo": demo}, timeout=20, connect_options={"validate_arguments": True}) as registry:
        with pytest.raises(SchemaValidationError, match="inputSchema|input"):
            registry.call("mcp__demo__echo", {"message": 5})
        after_call = counted(registry, "mcp__demo__echo")
        assert after_call[:4] == (1, 1, 0, 0)
        with pytest.raises(SchemaValidationError):
            registry.call_future("mcp__demo__echo", {"message": 5})
        assert counted(registry, "mcp__demo__echo") == (2, 2, 0, 0, after_call[4])
        # What the model reads of it: the arguments were refused, and why (not a result that failed its check).
        message = registry.execute({"id": "c1", "type": "function",
                                    "function": {"name": "mcp__demo__echo", "arguments": '{"message": 5}'}})
        assert message["content"].startswith("Error: tool 'echo' of server 'demo' was not called: its arguments do not "
                                             "match its input schema at $.message: "), message["content"]
        assert after_call[4] == "its arguments do not match the tool's input schema at $.message"


# -- a session the server forgot ------------------------------------------------------------------


@pytest.fixture
def forgetful() -> Iterator[tuple[HTTPFaultServer, ToolRegistry]]:
    """A legacy-era HTTP server (sessions) behind a registry whose tools are listed already."""
    server = HTTPFaultServer().start()
    try:
        with ToolRegistry({"h": {"url": server.url}}, timeout=20, connect_options={"protocol": "legacy"}) as registry:
            assert "mcp__h__echo" in [t.name for t in registry.tools()]
            yield server, registry
    finally:
        server.stop()


def forget_session(server: HTTPFaultServer, registry: ToolRegistry) -> None:
    """The server forgets our session at its next request (as a remote server that restarted)."""
    sid = registry.client("h").transport.session_id  # type: ignore[attr-defined]
    server.expire_after = server.sessions[sid]


def expired(future: Future[Any]) -> SessionExpired:
    with pytest.raises(SessionExpired) as info:
        future.result(10)
    return info.value


@pytest.mark.parametrize("first", ["call_again", "callbacks thread"])
def test_an_expired_session_that_is_not_sent_again_is_counted_once(forgetful: tuple[HTTPFaultServer, ToolRegistry],
                                                                   first: str) -> None:
    server, registry = forgetful
    client = registry.client("h")
    gate = threading.Event()
    if first == "callbacks thread":  # the registry hears of the answer only after the deadline passed
        client.callbacks.submit(gate.wait, 10)
    forget_session(server, registry)
    future = registry.call_future("mcp__h__echo", {"message": "late"}, timeout=1.0)
    exc = expired(future)
    server.expire_after = None
    time.sleep(1.1)  # past the call's deadline: there is no time left to send it again
    if first == "callbacks thread":
        gate.set()
        assert drained(client)
        assert counted(registry, "mcp__h__echo")[:2] == (1, 1)  # counted there: call_again may never come
    assert registry.call_again(future, exc) is None
    assert drained(client)
    # As call() counts a SessionExpired it does not send again: one failed call, no retry.
    assert counted(registry, "mcp__h__echo") == (1, 1, 0, 0, model_text(exc))


def test_call_again_sends_a_call_once(forgetful: tuple[HTTPFaultServer, ToolRegistry]) -> None:
    server, registry = forgetful
    forget_session(server, registry)
    future = registry.call_future("mcp__h__echo", {"message": "once"})
    exc = expired(future)
    server.expire_after = None
    again = registry.call_again(future, exc)
    assert again is not None and again.result(10).text == "once"
    echoes = len([s for s in server.requests("tools/call")])
    with pytest.raises(InvalidRequest, match="sent again already"):
        registry.call_again(future, exc)
    assert len(server.requests("tools/call")) == echoes  # nothing sent the second time
    assert registry.call_again(again, exc) is None  # the second sending is not sent a third time
    assert drained(registry.client("h"))  # the registry hears of the answer on the callbacks thread
    assert counted(registry, "mcp__h__echo")[:4] == (1, 0, 0, 1)  # one call, sent twice, as call() counts it


def test_call_again_refuses_a_future_that_did_not_expire(forgetful: tuple[HTTPFaultServer, ToolRegistry]) -> None:
    _server, registry = forgetful
    future = registry.call_future("mcp__h__echo", {"message": "fine"})
    assert future.result(10).text == "fine"
    with pytest.raises(InvalidRequest, match="SessionExpired"):
        registry.call_again(future, SessionExpired("not this one"))
    with pytest.raises(InvalidRequest, match="call_future"):
        registry.call_again(Future(), SessionExpired("not ours"))


# -- the outputSchema check: on the reading side ----------------------------------------------------


def drained(client: Client) -> bool:
    """True once everything queued on the client's callbacks thread so far (the registry's done-callbacks) has run."""
    ran = threading.Event()
    assert client.callbacks.submit(ran.set)
    return ran.wait(10)


@pytest.mark.parametrize("structured", [{"sum": 3}, {"sum": "three"}], ids=["valid", "invalid"])
def test_call_future_checks_the_result_where_it_is_read_and_counts_it_as_call_does(structured: Any) -> None:
    client = Client(MemoryTransport(adder(structured), name="adder"), timeout=10).connect()
    with ToolRegistry({"adder": client}, timeout=10) as registry:
        assert [t.name for t in registry.tools()] == ["mcp__adder__add"]
        threads = recording(client)
        if structured == {"sum": 3}:
            assert registry.call("mcp__adder__add", {}).structured_content == {"sum": 3}
        else:
            with pytest.raises(SchemaValidationError):
                registry.call("mcp__adder__add", {})
        by_call = counted(registry, "mcp__adder__add")
        assert threads == [threading.current_thread().name]

        future = registry.call_future("mcp__adder__add", {})
        assert wait([future], 10).done and drained(client)  # done, and the registry heard of it (nothing read yet)
        assert threads == [threading.current_thread().name]  # not checked on the callbacks thread
        reader: list[Any] = []
        thread = threading.Thread(target=lambda: reader.append(future.exception(10)), name="user-reader")
        thread.start()
        thread.join(10)
        assert threads[1:] == ["user-reader"]
        assert isinstance(reader[0], SchemaValidationError) == (structured != {"sum": 3})
        calls, errors, timeouts, retries, last = counted(registry, "mcp__adder__add")
        assert (calls, errors, timeouts, retries, last) == (2, 2 * by_call[1], 0, 0, by_call[4])


def test_a_result_read_before_the_registry_heard_of_it_is_checked_once() -> None:
    client = Client(MemoryTransport(adder({"sum": "three"}), name="adder"), timeout=10).connect()
    with ToolRegistry({"adder": client}, timeout=10) as registry:
        registry.tools()
        threads = recording(client)
        gate = threading.Event()
        client.callbacks.submit(gate.wait, 10)  # the callbacks thread is busy: the reader reads first
        future = registry.call_future("mcp__adder__add", {})
        with pytest.raises(SchemaValidationError):
            future.result(10)
        gate.set()
        assert drained(client)
        assert threads == [threading.current_thread().name]
        assert counted(registry, "mcp__adder__add")[:2] == (1, 1)


def test_a_cancelled_call_future_is_counted_cancelled() -> None:
    with mcpcall.connect(demo_argv(), name="demo", timeout=20) as client, ToolRegistry({"demo": client}) as registry:
        future = registry.call_future("mcp__demo__slow", {"seconds": 5})
        assert future.cancel()
        assert drained(client)
        assert counted(registry, "mcp__demo__slow")[:2] == (1, 1)
        assert registry.stats()["mcp__demo__slow"].last_error == "cancelled"
