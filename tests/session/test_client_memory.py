"""The client's MCP logic over an in-memory transport: era negotiation, _meta, MRTR, pagination."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional

import pytest

import mcpcall
from mcpcall import Client, ConfigError, ProtocolError, RPCError
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.conftest import demo_argv, wait_until

Msg = Dict[str, Any]
MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


class FakeServer:
    """A configurable MCP server function for MemoryTransport."""

    def __init__(self, era: str = "dual", discover: str = "answer", supported: Optional[List[str]] = None) -> None:
        self.era = era  # "dual", "legacy", "modern"
        self.discover = discover  # "answer", "silent", "error", "unsupported"
        self.supported = supported or [MODERN]
        self.seen: List[Msg] = []
        self.pages: List[List[str]] = [["a", "b"]]
        self.result_type: Optional[str] = None

    def __call__(self, m: Msg, reply: Reply) -> None:
        self.seen.append(m)
        if "id" not in m:
            return
        rid, method, params = m["id"], m["method"], m.get("params") or {}
        meta = params.get("_meta") or {}
        modern = VERSION_KEY in meta

        def ok(result: Msg) -> None:
            if modern:
                result = dict(result, resultType=self.result_type or "complete")
            reply({"jsonrpc": "2.0", "id": rid, "result": result})

        def err(code: int, message: str, data: Any = None) -> None:
            error: Msg = {"code": code, "message": message}
            if data is not None:
                error["data"] = data
            reply({"jsonrpc": "2.0", "id": rid, "error": error})

        if method == "server/discover":
            if self.era == "legacy" or self.discover == "error":
                return err(-32601, "Method not found")
            if self.discover == "silent":
                return None
            if self.discover == "unsupported" or meta.get(VERSION_KEY) not in self.supported:
                return err(-32022, "Unsupported protocol version", {"supported": self.supported, "requested": meta.get(VERSION_KEY)})
            return ok({"supportedVersions": self.supported, "capabilities": {"tools": {}},
                       "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "9"}},
                       "instructions": "be nice"})
        if method == "initialize":
            if self.era == "modern":
                return err(-32601, "initialize is not supported; use 2026-07-28")
            return ok({"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                       "serverInfo": {"name": "fake-legacy", "version": "1"}})
        if method == "tools/list":
            index = int(params.get("cursor") or 0)
            result: Msg = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in self.pages[index]]}
            if index + 1 < len(self.pages):
                result["nextCursor"] = str(index + 1)
            return ok(result)
        if method == "tools/call":
            return ok({"content": [{"type": "text", "text": str(params.get("arguments"))}]})
        return err(-32601, f"unknown {method}")


def client_for(server: FakeServer, **options: Any) -> Client:
    options.setdefault("probe_timeout", 0.3)
    return Client(MemoryTransport(server, name="fake"), **options).connect()


def test_auto_finds_a_modern_server() -> None:
    server = FakeServer()
    with client_for(server) as c:
        assert (c.era, c.protocol_version) == ("modern", MODERN)
        assert c.server_info is not None and c.server_info.name == "fake"
        assert c.instructions == "be nice" and "tools" in c.capabilities
        c.call_tool("x", {"k": 1})
    call = [m for m in server.seen if m.get("method") == "tools/call"][0]
    meta = call["params"]["_meta"]
    assert meta[VERSION_KEY] == MODERN
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcpcall"
    assert not any(m.get("method") == "initialize" for m in server.seen)


@pytest.mark.parametrize("discover", ["error", "silent"])
def test_auto_falls_back_to_legacy(discover: str) -> None:
    server = FakeServer(era="legacy" if discover == "error" else "dual", discover=discover)
    with client_for(server) as c:
        assert (c.era, c.protocol_version) == ("legacy", "2025-11-25")
        assert c.server_info is not None and c.server_info.name == "fake-legacy"
        c.call_tool("x")
    methods = [m.get("method") for m in server.seen]
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]
    call = [m for m in server.seen if m.get("method") == "tools/call"][0]
    assert "_meta" not in call["params"]
    if discover == "silent":
        assert "notifications/cancelled" not in methods  # the probe is not cancelled


def test_unsupported_version_with_only_legacy_versions_initializes() -> None:
    server = FakeServer(discover="unsupported", supported=["2025-06-18"])
    with client_for(server) as c:
        assert (c.era, c.protocol_version) == ("legacy", "2025-06-18")


def test_unsupported_version_with_nothing_common_is_a_clear_error() -> None:
    server = FakeServer(discover="unsupported", supported=["1999-01-01"])
    with pytest.raises(ProtocolError, match="1999-01-01"):
        client_for(server)


def test_forced_legacy_and_modern() -> None:
    with client_for(FakeServer(), protocol="legacy") as c:
        assert c.era == "legacy"
    with client_for(FakeServer(), protocol="2025-03-26") as c:
        assert c.protocol_version == "2025-03-26"
    with client_for(FakeServer(), protocol="modern") as c:
        assert c.era == "modern"
    with pytest.raises(ProtocolError, match="not a modern"):
        client_for(FakeServer(era="legacy"), protocol="modern")


def test_bad_protocol_option() -> None:
    with pytest.raises(ConfigError):
        Client(MemoryTransport(FakeServer()), protocol="2020-01-01")


def test_legacy_client_against_modern_only_server_fails_clearly() -> None:
    with pytest.raises(RPCError, match="initialize"):
        client_for(FakeServer(era="modern"), protocol="legacy")


def test_pagination_follows_every_cursor() -> None:
    server = FakeServer()
    server.pages = [["a", "b"], ["c"], ["d", "e"]]
    with client_for(server) as c:
        assert [t.name for t in c.list_tools()] == ["a", "b", "c", "d", "e"]


def test_pagination_loop_is_detected() -> None:
    def looping(m: Msg, reply: Reply) -> None:
        if m.get("method") == "tools/list":
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [], "nextCursor": "same"}})
        else:
            FakeServer()(m, reply)

    with Client(MemoryTransport(looping), probe_timeout=0.3).connect() as c, pytest.raises(ProtocolError, match="nextCursor"):
        c.list_tools()


def test_unknown_result_type_is_invalid() -> None:
    server = FakeServer()
    with client_for(server) as c:
        server.result_type = "mystery"
        with pytest.raises(ProtocolError, match="mystery"):
            c.call_tool("x")


def mrtr_server(m: Msg, reply: Reply) -> None:
    """A modern server whose tools/call asks for an elicitation, then a second round."""
    if "id" not in m:
        return
    params = m.get("params") or {}
    if m["method"] == "server/discover":
        reply({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {}}})
        return
    responses = params.get("inputResponses")
    state = params.get("requestState")
    if responses is None:
        result = {"resultType": "input_required", "requestState": "s1",
                  "inputRequests": {"name": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}}}
    elif state == "s1":
        result = {"resultType": "input_required", "requestState": "s2", "inputRequests": {"again": {"method": "roots/list", "params": {}}}}
    else:
        result = {"resultType": "complete", "content": [{"type": "text", "text": f"{state}:{sorted(responses)}"}]}
    reply({"jsonrpc": "2.0", "id": m["id"], "result": result})


def test_multi_round_trip_requests_are_answered_and_retried() -> None:
    transport = MemoryTransport(mrtr_server)
    threads = set()

    def elicit(params: Msg) -> Msg:
        threads.add(threading.current_thread().name)
        return {"action": "accept", "content": {"name": "ann"}}

    handlers = {"elicitation/create": elicit, "roots/list": lambda p: {"roots": []}}
    with Client(transport, handlers=handlers).connect() as c:
        result = c.call_tool("who", {"x": 1})
    assert result.text == "s2:['again']"
    calls = [m for m in transport.sent if m.get("method") == "tools/call"]
    assert len(calls) == 3 and len({m["id"] for m in calls}) == 3
    assert "requestState" not in calls[0]["params"]
    assert calls[1]["params"]["requestState"] == "s1"
    assert calls[1]["params"]["inputResponses"] == {"name": {"action": "accept", "content": {"name": "ann"}}}
    assert calls[2]["params"]["requestState"] == "s2"
    assert all(m["params"]["arguments"] == {"x": 1} for m in calls)
    caps = calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert "elicitation" in caps and "roots" in caps
    assert threads == {"mcpcall-callbacks-memory"}


def test_input_required_without_a_handler_fails_the_call() -> None:
    with Client(MemoryTransport(mrtr_server)).connect() as c:
        with pytest.raises(RPCError, match="asked the client for elicitation/create, which this client has no handler for"):
            c.call_tool("who")


def test_legacy_server_requests_reach_handlers() -> None:
    answers: List[Msg] = []
    transport: Optional[MemoryTransport] = None

    def legacy(m: Msg, reply: Reply) -> None:
        if "result" in m or "error" in m:
            answers.append(m)
            return
        if m.get("method") == "tools/call":
            reply({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {"maxTokens": 5}})
            reply({"jsonrpc": "2.0", "id": "srv-2", "method": "roots/list", "params": {}})
        FakeServer(era="legacy")(m, reply)

    def sample(params: Msg) -> Msg:
        raise RPCError(-1, "user declined")

    transport = MemoryTransport(legacy)
    with Client(transport, handlers={"sampling/createMessage": sample}, probe_timeout=0.3).connect() as c:
        c.call_tool("x")
        deadline = threading.Event()
        for _ in range(200):
            if len(answers) == 2:
                break
            deadline.wait(0.01)
    by_id = {a["id"]: a for a in answers}
    assert by_id["srv-1"]["error"] == {"code": -1, "message": "user declined"}
    assert by_id["srv-2"]["error"]["code"] == -32601


def test_closed_client_refuses_requests_and_repr_hides_nothing_secret() -> None:
    c = client_for(FakeServer())
    c.close()
    c.close()
    with pytest.raises(mcpcall.ConnectionClosed):
        c.call_tool("x")
    assert "closed" in repr(c)


def test_close_between_rounds_ends_the_call_and_runs_its_done_callbacks() -> None:
    # Between rounds the Future is in no pending map: close() returned, the call lived on until the handler
    # came back, and its done-callback was dropped because the callbacks thread had stopped.
    import time

    entered = threading.Event()
    release = threading.Event()

    def elicit(params: Msg) -> Msg:
        entered.set()
        release.wait(10)
        return {"action": "accept", "content": {}}

    c = Client(MemoryTransport(mrtr_server), handlers={"elicitation/create": elicit}).connect()
    future = c.call_tool_future("who", timeout=30)
    ran = threading.Event()
    future.add_done_callback(lambda f: ran.set())
    assert entered.wait(5)
    closer = threading.Thread(target=c.close)
    closer.start()
    deadline = time.monotonic() + 5
    while not future.done():
        assert time.monotonic() < deadline, "close() left the call between rounds running"
        time.sleep(0.01)
    with pytest.raises(mcpcall.ConnectionClosed, match="closed"):
        future.result(0)
    release.set()
    closer.join(10)
    assert ran.wait(5), "the done-callback never ran"



# -- the session's parts: capabilities, roots, log level, cache ------------------------------------------


def _caps_sent(transport: MemoryTransport, method: str) -> Msg:
    message = next(m for m in transport.sent if m.get("method") == method)
    params = message["params"]
    return params["capabilities"] if method == "initialize" else params["_meta"]["io.modelcontextprotocol/clientCapabilities"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_capabilities_are_declared_from_what_was_given(era: str) -> None:
    # Only handlers={...} declared capabilities; sampling=, elicitation= and roots= are keywords now.
    transport = MemoryTransport(FakeServer())
    with Client(transport, protocol=era, sampling=lambda p: {}, elicitation=lambda p: {}, roots=["/tmp"]).connect() as c:
        c.call_tool("x")
    caps = _caps_sent(transport, "initialize" if era == "legacy" else "tools/call")
    assert caps["sampling"] == {} and caps["elicitation"] == {"form": {}, "url": {}} and "roots" in caps


def test_set_roots_tells_a_legacy_server() -> None:
    # The roots could not change after connecting, and the server was never told.
    transport = MemoryTransport(FakeServer())
    with Client(transport, protocol="legacy", roots=["/tmp"]).connect() as c:
        c.set_roots(["file:///elsewhere"])
    assert any(m.get("method") == "notifications/roots/list_changed" for m in transport.sent)


def test_the_modern_log_level_rides_in_every_requests_meta() -> None:
    # set_logging_level() did not exist; the modern era has no logging/setLevel, only the per-request _meta.
    transport = MemoryTransport(FakeServer())
    with Client(transport, protocol="modern").connect() as c:
        c.set_logging_level("error")
        c.call_tool("x")
    call = [m for m in transport.sent if m.get("method") == "tools/call"][-1]
    assert call["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "error"
    assert not any(m.get("method") == "logging/setLevel" for m in transport.sent)


class CachingServer(FakeServer):
    """Lists tools with a ``ttlMs`` (one page per cursor), and counts what reaches it."""

    def __init__(self, ttl: Any = 60_000) -> None:
        super().__init__(era="modern")
        self.ttl = ttl
        self.pages = [["a"], ["b"]]

    def __call__(self, m: Msg, reply: Reply) -> None:
        if m.get("method") == "tools/list" and "id" in m:
            self.seen.append(m)
            index = int((m.get("params") or {}).get("cursor") or 0)
            result: Msg = {"resultType": "complete", "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in self.pages[index]]}
            if self.ttl is not None:
                result["ttlMs"] = self.ttl
            if index + 1 < len(self.pages):
                result["nextCursor"] = str(index + 1)
            reply({"jsonrpc": "2.0", "id": m["id"], "result": result})
            return
        super().__call__(m, reply)

    def lists(self) -> int:
        return sum(1 for m in self.seen if m.get("method") == "tools/list")


def test_pages_are_cached_for_their_ttl_and_a_change_drops_them() -> None:
    # ttlMs was ignored; a tools/list_changed notification invalidates what was cached.
    server = CachingServer()
    transport = MemoryTransport(server)
    with Client(transport).connect() as c:
        assert [t.name for t in c.list_tools()] == ["a", "b"] and server.lists() == 2  # two pages
        assert [t.name for t in c.list_tools()] == ["a", "b"] and server.lists() == 2  # both cached
        c.list_tools(cache=False)
        assert server.lists() == 4
        server.pages = [["a"], ["c"]]
        transport.reply({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        assert wait_until(lambda: [t.name for t in c.list_tools()] == ["a", "c"]), "the change never invalidated the pages"


@pytest.mark.parametrize("ttl", [None, 0, -5])
def test_no_positive_ttl_means_no_cache(ttl: Any) -> None:
    # Absent, zero and negative ttlMs all mean "stale at once".
    server = CachingServer(ttl)
    with Client(MemoryTransport(server)).connect() as c:
        c.list_tools()
        c.list_tools()
    assert server.lists() == 4


def test_cache_off_for_the_whole_client() -> None:
    server = CachingServer()
    with Client(MemoryTransport(server), cache=False).connect() as c:
        c.list_tools()
        c.list_tools()
    assert server.lists() == 4


def test_a_result_built_on_input_responses_is_never_cached() -> None:
    # A later round of a multi round-trip request depends on inputs that are not part of the cache key.
    rounds: List[Msg] = []

    def server(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        if m["method"] == "server/discover":
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {}}})
            return
        rounds.append(m)
        params = m.get("params") or {}
        if "inputResponses" not in params:
            result: Msg = {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list", "params": {}}}}
        else:
            result = {"resultType": "complete", "contents": [{"uri": "x://1", "text": "t"}], "ttlMs": 60_000}
        reply({"jsonrpc": "2.0", "id": m["id"], "result": result})

    with Client(MemoryTransport(server), roots=["/tmp"]).connect() as c:
        assert c.read_resource("x://1").text == "t"
        assert c.read_resource("x://1").text == "t"
    assert len(rounds) == 4  # two rounds each time: the second read was not served from the cache


def test_on_log_alone_asks_a_modern_server_for_logs_at_info() -> None:
    # The level went in _meta only with log_level=: on_log alone received nothing from a modern server.
    transport = MemoryTransport(FakeServer())
    with Client(transport, protocol="modern", on_log=lambda level, logger, data: None).connect() as c:
        assert c.log_level is None  # nothing was asked explicitly
        c.call_tool("x")
        c.set_logging_level("error")
        c.call_tool("y")
    calls = [m for m in transport.sent if m.get("method") == "tools/call"]
    assert calls[0]["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "info"
    assert calls[1]["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "error"
    with Client(MemoryTransport(FakeServer()), protocol="modern").connect() as c:  # no on_log: no logs asked
        c.call_tool("x")
        sent = [m for m in c._connection.transport.sent if m.get("method") == "tools/call"]  # type: ignore[attr-defined]
    assert "io.modelcontextprotocol/logLevel" not in sent[0]["params"]["_meta"]


def test_on_log_alone_receives_a_modern_demo_servers_logs() -> None:
    got: List[Any] = []
    with mcpcall.connect(demo_argv(), protocol="modern", timeout=20,
                         on_log=lambda level, logger, data: got.append((level, data))) as c:
        c.call_tool("slow", {"seconds": 0, "steps": 0})  # logs "starting" at info when the request asks
        assert wait_until(lambda: bool(got), 5), "no log message reached on_log"
    assert got[0][0] == "info" and "slow: starting" in got[0][1]


def test_a_modern_server_that_takes_the_probe_late_is_spoken_to_in_the_modern_era() -> None:
    """Slow to start, it answers server/discover after the probe's time and then refuses initialize with -32022."""
    served: List[str] = []

    def slow_modern(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        rid, method = m["id"], m["method"]
        served.append(method)
        if method == "server/discover" and served.count("server/discover") == 1:
            time.sleep(0.6)  # past the probe's 0.3 s: the client has moved on to initialize
        if method == "initialize":
            reply({"jsonrpc": "2.0", "id": rid, "error": {"code": -32022, "message": "connection is serving the 2026-07-28 protocol"}})
        elif method == "server/discover":
            reply({"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "slow", "version": "1"}}}})
        else:
            reply({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete"}})

    with Client(MemoryTransport(slow_modern), probe_timeout=0.3, timeout=10).connect() as c:
        assert c.protocol_version == MODERN
        assert c.server_info is not None and c.server_info.name == "slow"
    assert served[:3] == ["server/discover", "initialize", "server/discover"]
