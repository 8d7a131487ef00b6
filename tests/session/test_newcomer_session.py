"""Regression tests for defects a newcomer found by testing the client against third-party servers.

Each test guards one defect; the comment at its top says what used to go wrong.
Real servers where one can show it: the demo server (both eras), the official SDK's
server (stdio), the HTTP fault server; scripted in-memory servers where the test
must see the exact wire message.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall import Client, ConfigError, ConnectionClosed, ProtocolError, RequestTimeout, ResourceNotFound, RPCError
from mcpcall.errors import MethodNotFound
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.conftest import ROOT, SERVERS, demo_argv, wait_until

pytestmark = pytest.mark.timeout(60)

Msg = dict[str, Any]
MODERN = "2026-07-28"
ERAS = ["legacy", "modern"]


def demo(era: str, **options: Any) -> Client:
    options.setdefault("timeout", 30)
    return mcpcall.connect(demo_argv(), name="demo", protocol=era, **options)


def sdk(**options: Any) -> Client:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    options.setdefault("timeout", 30)
    options.setdefault("protocol", "legacy")
    return mcpcall.connect([sys.executable, str(SERVERS / "sdk_server.py")], name="sdk", **options)


class Scripted:
    """An in-memory server: modern unless ``legacy``; asks the client ``ask`` (method, params) on each
    tools/call and records the client's answers to it."""

    def __init__(self, *, legacy: bool = False, capabilities: Msg | None = None,
                 ask: tuple[str, Msg] | None = None, errors: dict[str, Msg] | None = None) -> None:
        self.legacy = legacy
        self.capabilities = capabilities if capabilities is not None else {"tools": {}}
        self.ask = ask
        self.errors = errors or {}
        self.seen: list[Msg] = []
        self.lock = threading.Lock()

    def methods(self, method: str) -> list[Msg]:
        with self.lock:
            return [m for m in self.seen if m.get("method") == method]

    def answers(self) -> list[Msg]:
        with self.lock:
            return [m for m in self.seen if m.get("id") == "ask-1" and "method" not in m]

    def __call__(self, m: Msg, reply: Reply) -> None:
        with self.lock:
            self.seen.append(m)
        if "id" not in m or "method" not in m:
            return
        method, rid = m["method"], m["id"]

        def ok(result: Msg) -> None:
            reply({"jsonrpc": "2.0", "id": rid, "result": result if self.legacy else {"resultType": "complete", **result}})

        def error(code: int, message: str) -> None:
            reply({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

        if method == "server/discover":
            if self.legacy:
                error(-32601, "Method not found")
            else:
                ok({"supportedVersions": [MODERN], "capabilities": self.capabilities})
        elif method == "initialize" and self.legacy:
            ok({"protocolVersion": m["params"]["protocolVersion"], "capabilities": self.capabilities,
                "serverInfo": {"name": "scripted", "version": "1"}})
        elif method in self.errors:
            reply({"jsonrpc": "2.0", "id": rid, "error": self.errors[method]})
        elif method == "tools/call" and self.ask is not None:
            reply({"jsonrpc": "2.0", "id": "ask-1", "method": self.ask[0], "params": self.ask[1]})
            ok({"content": []})
        elif method == "tools/call":
            ok({"content": []})
        else:
            error(-32601, f"Method not found: {method}")


def scripted(server: Scripted, **options: Any) -> Client:
    options.setdefault("probe_timeout", 1)
    options.setdefault("timeout", 10)
    return Client(MemoryTransport(server, name="scripted"), **options).connect()


# -- 1. roots: a string is one root ----------------------------------------------------------------


def test_a_string_root_is_one_root_not_its_characters(tmp_path: Path) -> None:
    # roots="/tmp" was iterated character by character: the server got file:///, file:///…/t, … and a
    # filesystem server then granted access to "/". (The official SDK server lists the roots it gets.)
    with sdk(roots=str(tmp_path)) as client:
        assert client.call_tool("list_client_roots").text == tmp_path.resolve().as_uri()
        other = tmp_path / "other"
        other.mkdir()
        client.set_roots(lambda: str(other))  # a callable returning one string: one root too
        assert client.call_tool("list_client_roots").text == other.resolve().as_uri()
        client.set_roots(other)  # a PathLike on its own
        assert client.call_tool("list_client_roots").text == other.resolve().as_uri()


@pytest.mark.parametrize("bad", [42, b"/tmp", 3.5, object()])
def test_roots_that_are_no_roots_are_a_config_error(bad: Any) -> None:
    # roots=42 raised a bare TypeError ('int' object is not iterable); b"/tmp" became roots of numbers.
    server = Scripted(legacy=True)
    with pytest.raises(ConfigError, match="roots must be"):
        Client(MemoryTransport(server, name="scripted"), roots=bad)
    with scripted(server) as client, pytest.raises(ConfigError, match="roots must be"):
        client.set_roots(bad)


def test_a_one_shot_iterator_of_roots_is_kept(tmp_path: Path) -> None:
    # A generator given as roots was used up by the check at set_roots(): the server then got no roots.
    server = Scripted(legacy=True, ask=("roots/list", {}))
    with scripted(server, roots=(p for p in [tmp_path])) as client:
        client.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
    assert server.answers()[0]["result"]["roots"] == [{"uri": tmp_path.resolve().as_uri(), "name": tmp_path.name}]


def test_a_roots_callable_with_a_bad_answer_gets_an_error_to_the_server_and_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    # A callable returning a string had it split into characters; one returning 42 failed with a logged
    # traceback (as if the handler itself had crashed) instead of a warning saying what it got wrong.
    server = Scripted(legacy=True, ask=("roots/list", {}))
    with scripted(server, roots=lambda: "/tmp") as client:
        client.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
        assert server.answers()[0]["result"]["roots"] == [{"uri": "file:///tmp", "name": "tmp"}]
        client.set_roots(lambda: 42)  # type: ignore[arg-type, return-value]
        with caplog.at_level(logging.WARNING, logger="mcpcall.client"):
            client.call_tool("t", {})
            assert wait_until(lambda: len(server.answers()) == 2)
            assert wait_until(lambda: any("roots must be" in r.getMessage() for r in caplog.records))
    answer = server.answers()[1]
    assert "result" not in answer and answer["error"]["code"] == -32603
    assert "roots/list" in answer["error"]["message"]
    [record] = [r for r in caplog.records if "roots must be" in r.getMessage()]
    assert record.levelno == logging.WARNING and "'scripted'" in record.getMessage()


# -- 2. reset_timeout_on_progress without on_progress ------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_reset_timeout_on_progress_without_on_progress_sends_a_token(era: str) -> None:
    # Without on_progress no progressToken was sent: the server reported no progress, and the call
    # timed out after timeout= although the slow tool was making progress every 0.25 s.
    with demo(era) as client:
        result = client.call_tool("slow", {"seconds": 2.5, "steps": 10}, timeout=1, reset_timeout_on_progress=True)
        assert result.text == "done after 2.5 s"


@pytest.mark.parametrize("era", ERAS)
def test_max_timeout_names_the_real_limit(era: str) -> None:
    # The call ended by max_timeout said "did not answer tools/call within 1 s" (the reset timeout).
    with demo(era) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            client.call_tool("slow", {"seconds": 6, "steps": 24}, timeout=1, reset_timeout_on_progress=True, max_timeout=2)
        elapsed = time.monotonic() - started
        assert 1.8 < elapsed < 4, elapsed  # the cap, not the timeout, ended it
        assert "within 2 s (max_timeout; the timeout of 1 s was reset by progress)" in str(info.value)
        assert info.value.timeout == 2 and "'demo'" in str(info.value)
        assert client.call_tool("echo", {"message": "still fine"}).text == "still fine"


# -- 3. a dropped client under -W error::ResourceWarning ----------------------------------------------


def test_a_dropped_client_is_closed_even_when_its_warning_is_an_error() -> None:
    # collected() warned first; under -W error::ResourceWarning the warning was raised and the close
    # never happened: the server ran until the interpreter exited.
    script = textwrap.dedent("""
        import gc, sys, time
        import mcpcall

        def alive(pid):
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                return False
            return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] != b"Z"

        def use():
            client = mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="dropped", timeout=30)
            client.call_tool("echo", {"message": "hi"})
            return client.transport.process.pid

        pid = use()
        gc.collect()
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        print("alive" if alive(pid) else "gone", flush=True)
    """)
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", script], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=45)
    assert done.stdout.strip() == "gone", (done.stdout, done.stderr)
    assert "unclosed mcpcall client for server 'dropped'" in done.stderr  # still warned (raised, and reported)


# -- 4. subscribe() to a modern server without subscriptions/listen -----------------------------------


def test_modern_subscribe_to_a_server_that_declares_no_change_notifications() -> None:
    # Against the demo server (modern; tools.listChanged false, no subscriptions/listen) subscribe()
    # raised RPCError -32601 while the legacy era quietly returned acknowledged == {}.
    for era in ERAS:
        with demo(era) as client, client.subscribe(tools=True, prompts=True, resources=["file:///x"],
                                                   on_change=lambda e: None) as sub:
            assert sub.acknowledged == {}
            assert client.dispatcher.in_flight() == 0  # modern: no listen request was sent


def test_modern_subscribe_answered_method_not_found_acknowledges_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # A server that declares tools.listChanged but answers subscriptions/listen with -32601: subscribe() raised.
    server = Scripted(capabilities={"tools": {"listChanged": True}})
    with scripted(server) as client, caplog.at_level(logging.DEBUG, logger="mcpcall.client"):
        sub = client.subscribe(tools=True, on_change=lambda e: None)
        assert sub.acknowledged == {} and not sub.closed
        time.sleep(1.5)  # a re-listen would come after 0.5 s, 1 s, ...
        assert len(server.methods("subscriptions/listen")) == 1
        assert any("does not offer subscriptions/listen" in r.getMessage() for r in caplog.records)
        sub.close()


def test_modern_subscribe_keeps_other_errors() -> None:
    server = Scripted(capabilities={"tools": {"listChanged": True}},
                      errors={"subscriptions/listen": {"code": -32603, "message": "listen is broken"}})
    with scripted(server) as client:
        with pytest.raises(RPCError, match="listen is broken") as info:
            client.subscribe(tools=True, on_change=lambda e: None)
        assert info.value.code == -32603


# -- 5. features the server does not offer --------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_features_a_server_does_not_offer(era: str) -> None:
    # Against the demo server (capabilities: tools, logging) read_resource() raised ResourceNotFound for a
    # "Method not found" answer, and the listings, get_prompt() and complete() a bare RPCError -32601.
    with demo(era) as client:
        assert "resources" not in client.capabilities and "prompts" not in client.capabilities
        assert client.list_resources() == []
        assert client.list_resource_templates() == []
        assert client.list_prompts() == []
        with pytest.raises(MethodNotFound) as read:
            client.read_resource("file:///etc/hosts")
        assert not isinstance(read.value, ResourceNotFound) and read.value.code == -32601
        assert "server 'demo' does not offer resources (its capabilities have no 'resources'" in str(read.value)
        with pytest.raises(MethodNotFound, match="server 'demo' does not offer prompts"):
            client.get_prompt("review", {"code": "x"})
        with pytest.raises(MethodNotFound, match="server 'demo' does not offer completions") as completing:
            client.complete("review", "language", "p")
        assert isinstance(completing.value, RPCError) and completing.value.capability == "completions"


def test_a_declared_feature_answered_method_not_found_is_raised() -> None:
    server = Scripted(capabilities={"resources": {}, "prompts": {}})
    with scripted(server) as client:
        with pytest.raises(MethodNotFound, match="declares 'resources' but does not know resources/list"):
            client.list_resources()
        with pytest.raises(MethodNotFound, match="declares 'resources' but does not know resources/read"):
            client.read_resource("file:///x")
        with pytest.raises(MethodNotFound, match="declares 'prompts'"):
            client.list_prompts()


def test_a_real_not_found_stays_resource_not_found() -> None:
    server = Scripted(capabilities={"resources": {}},
                      errors={"resources/read": {"code": -32602, "message": "Resource not found: file:///x"}})
    with scripted(server) as client, pytest.raises(ResourceNotFound) as info:
        client.read_resource("file:///x")
    assert info.value.uri == "file:///x"


# -- 6. complete() with a prompt name ------------------------------------------------------------------


def test_complete_takes_a_prompt_name_or_a_template_uri() -> None:
    # complete("review", "language", "p") raised InvalidRequest: only Prompt objects and ref dicts were taken.
    with sdk() as client:
        assert client.complete("review", "language", "p").values == ("python", "perl", "php")
        assert client.complete("test://greeting/{name}", "name", "an").values == ("ann", "anna")


# -- 7. handler answers are checked ----------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    {"action": "maybe"},
    {"action": "decline", "content": {"confirmed": True}},
    {"action": "accept", "content": "yes"},
    {"content": {"confirmed": True}},
])
def test_a_bad_elicitation_answer_is_not_sent(answer: Msg, caplog: pytest.LogCaptureFixture) -> None:
    # The handler's answer went to the server unchecked ({"action": "maybe"} reached it).
    server = Scripted(legacy=True, ask=("elicitation/create", {"message": "ok?", "requestedSchema": {"type": "object"}}))
    with scripted(server, elicitation=lambda p: answer) as client, caplog.at_level(logging.WARNING, logger="mcpcall.client"):
        client.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
        assert wait_until(lambda: any("invalid answer" in r.getMessage() for r in caplog.records))
    [sent] = server.answers()
    assert "result" not in sent and sent["error"]["code"] == -32603
    assert "elicitation/create" in sent["error"]["message"] and "maybe" not in str(sent) and "yes" not in str(sent)
    [record] = [r for r in caplog.records if "invalid answer" in r.getMessage()]
    assert record.levelno == logging.WARNING and "elicitation/create" in record.getMessage()


@pytest.mark.parametrize("answer", ["a text", {"text": "hi"}, {"role": "model", "content": {"type": "text", "text": "x"},
                                                                "model": "m"}])
def test_a_bad_sampling_answer_is_not_sent(answer: Any) -> None:
    server = Scripted(legacy=True, ask=("sampling/createMessage", {"messages": [], "maxTokens": 5}))
    with scripted(server, sampling=lambda p: answer) as client:
        client.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
    [sent] = server.answers()
    assert "result" not in sent and sent["error"]["code"] == -32603 and "sampling/createMessage" in sent["error"]["message"]


def test_a_good_elicitation_answer_still_goes_through() -> None:
    server = Scripted(legacy=True, ask=("elicitation/create", {"message": "ok?", "requestedSchema": {"type": "object"}}))
    with scripted(server, elicitation=lambda p: {"action": "decline", "content": None}) as client:
        client.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
    assert server.answers()[0]["result"] == {"action": "decline"}


@pytest.mark.parametrize("era", ERAS)
def test_a_bad_elicitation_answer_against_the_demo_server(era: str) -> None:
    # Legacy: the demo server got {"action": "maybe"} and failed the call with its own -32602; modern: the
    # answer went out in inputResponses. Now legacy answers the server with an error (the tool reports it),
    # and modern fails the call here, before anything is sent.
    with demo(era, elicitation=lambda p: {"action": "maybe"}) as client:
        if era == "legacy":
            result = client.call_tool("confirm", {"question": "ok?"})
            assert result.is_error and "elicitation failed" in result.text
        else:
            with pytest.raises(ProtocolError, match="'action' must be one of accept, decline, cancel"):
                client.call_tool("confirm", {"question": "ok?"})
        assert client.call_tool("echo", {"message": "still fine"}).text == "still fine"


# -- 8. HTTP+SSE: a dropped stream ends the client, and says so --------------------------------------------


def test_a_dropped_sse_stream_says_to_connect_again() -> None:
    # Every later call failed with "dropped the SSE stream (incompleteRead)", not saying the client was over.
    from tests.servers.http_fault_server import FaultServer

    server = FaultServer().start()
    try:
        server.modern = False
        with mcpcall.connect(server.origin + "/sse", name="sse", protocol="auto", timeout=10) as client:
            assert client.call_tool("echo", {"message": "hi"}).text == "hi"
            server.stop()  # the server restarts: its stream and endpoint are gone
            assert wait_until(lambda: not client.alive, 10)
            with pytest.raises(ConnectionClosed, match="this HTTP\\+SSE connection is over: connect again") as info:
                client.call_tool("echo", {"message": "again"})
            assert "server 'sse'" in str(info.value)
    finally:
        server.stop()
