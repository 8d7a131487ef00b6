"""Regression tests from a review of the client's surface, over scripted in-memory servers.

Each test guards one defect that was found and fixed: the comment at its top
says what used to go wrong.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pytest

from mcpcall import Client, ProtocolError, RequestTimeout, RPCError, SchemaValidationError
from mcpcall.protocol import META_SUBSCRIPTION_ID
from mcpcall.transports.memory import MemoryTransport, Reply
from mcpcall.types import parse_call_result
from tests.conftest import wait_until

pytestmark = pytest.mark.timeout(60)

Msg = Dict[str, Any]
MODERN = "2026-07-28"


class Scripted:
    """A modern server for MemoryTransport: subclasses answer in ``handle`` (None: answer nothing, or later)."""

    capabilities: Msg = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}

    def __init__(self) -> None:
        self.seen: List[Msg] = []
        self.reply: Reply = lambda m: None
        self._lock = threading.Lock()

    def methods(self, method: str) -> List[Msg]:
        with self._lock:
            return [m for m in self.seen if m.get("method") == method]

    def send(self, method: str, params: Msg) -> None:
        self.reply({"jsonrpc": "2.0", "method": method, "params": params})

    def answer(self, rid: Any, result: Msg) -> None:
        self.reply({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}})

    def __call__(self, m: Msg, reply: Reply) -> None:
        with self._lock:
            self.seen.append(m)
        self.reply = reply
        if "id" not in m or "method" not in m:
            return  # a notification, or an answer to one of our requests
        out = self.opening(m)
        if out is None:
            out = self.handle(m["method"], m.get("params") or {}, m["id"])
        if out is None:
            return
        if set(out) <= {"code", "message", "data"} and "code" in out:
            reply({"jsonrpc": "2.0", "id": m["id"], "error": out})
        else:
            self.answer(m["id"], out)

    def opening(self, m: Msg) -> Optional[Msg]:
        if m["method"] == "server/discover":
            return {"supportedVersions": [MODERN], "capabilities": self.capabilities}
        return None

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        return {"code": -32601, "message": f"unknown {method}"}


class LegacyScripted(Scripted):
    """A legacy (initialize) server: server/discover is unknown, results carry no resultType."""

    capabilities: Msg = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}

    def answer(self, rid: Any, result: Msg) -> None:
        self.reply({"jsonrpc": "2.0", "id": rid, "result": result})

    def initialized(self, m: Msg) -> Msg:
        return {"protocolVersion": m["params"]["protocolVersion"], "capabilities": self.capabilities,
                "serverInfo": {"name": "legacy", "version": "1"}}

    def opening(self, m: Msg) -> Optional[Msg]:
        if m["method"] == "server/discover":
            return {"code": -32601, "message": "Method not found"}
        if m["method"] == "initialize":
            return self.initialized(m)
        return None


def connect(server: Scripted, **options: Any) -> Client:
    options.setdefault("probe_timeout", 1)
    return Client(MemoryTransport(server, name="fake"), **options).connect()


def tool(name: str, **extra: Any) -> Msg:
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


# -- tasks ------------------------------------------------------------------------------------------


class LostSessionTasks(LegacyScripted):
    """A legacy task server that forgets the session once the task runs; the new initialize waits for the test."""

    capabilities = {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}

    def __init__(self) -> None:
        super().__init__()
        self.transport: Optional[MemoryTransport] = None
        self.renewal: Optional[Msg] = None  # the initialize of the new session, unanswered

    def opening(self, m: Msg) -> Optional[Msg]:
        if m["method"] == "initialize" and self.transport is not None and self.transport.session_lost:
            self.renewal = m
            return None
        return super().opening(m)

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        status = {"taskId": "t1", "status": "working", "pollInterval": 100}
        if method == "tools/call":
            return {"task": status}
        if method == "tasks/result":
            assert self.transport is not None
            self.transport.session_lost = True  # the server dropped our session meanwhile (an HTTP 404)
            return None
        if method == "tasks/get":
            return status
        return super().handle(method, params, rid)


class Silent(LegacyScripted):
    capabilities = {"tools": {}}

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        return None


def test_a_legacy_task_poll_renewing_the_session_never_blocks_the_scheduler() -> None:
    # The poll was sent from the shared scheduler thread, which then waited for the new session's initialize:
    # every timeout of every client in the process stopped firing until the server answered.
    server = LostSessionTasks()
    with connect(server, timeout=5) as a, connect(Silent()) as other:
        server.transport = a.transport  # type: ignore[assignment]
        a.call_tool("slow", {}, task=True)
        outcome: List[BaseException] = []

        def call_other() -> None:
            try:
                other.call_tool("x", {}, timeout=0.5)
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome.append(exc)

        caller = threading.Thread(target=call_other)
        try:
            assert wait_until(lambda: server.renewal is not None), "the poll never tried to renew the session"
            caller.start()
            caller.join(5)
            assert not caller.is_alive(), "another client's call_tool(timeout=0.5) did not time out within 5 s"
            assert len(outcome) == 1 and isinstance(outcome[0], RequestTimeout), outcome
        finally:
            assert server.transport is not None
            server.transport.session_lost = False
            renewal = server.renewal
            if renewal is not None:
                server.answer(renewal["id"], server.initialized(renewal))
            if caller.ident is not None:
                caller.join(10)


class AskingTask(Scripted):
    """A modern task in input_required; the status is repeated while the client's handler runs."""

    ASK = {"q1": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}}

    def __init__(self) -> None:
        super().__init__()
        self.status = "input_required"
        self.repeated = False

    def task(self) -> Msg:
        out: Msg = {"taskId": "T", "status": self.status, "pollIntervalMs": 100}
        if self.status == "input_required":
            out["inputRequests"] = self.ASK
        if self.status == "completed":
            out["result"] = {"content": [{"type": "text", "text": "done"}]}
        return out

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/call" and params["name"] == "job":
            return {**self.task(), "resultType": "task"}
        if method == "tools/call":  # the handler's own call: the server repeats the task's status first
            if not self.repeated:
                self.repeated = True
                self.send("notifications/tasks", self.task())
            time.sleep(0.2)
            return {"content": [{"type": "text", "text": "lookup"}]}
        if method == "tasks/update":
            self.status = "completed"
            return {}
        if method == "tasks/get":
            return self.task()
        return super().handle(method, params, rid)


def test_a_task_input_is_answered_once_when_the_status_repeats_while_the_handler_waits() -> None:
    # The repeated status was handled inside the first handler's wait, before the key was marked answered:
    # the user was asked twice and tasks/update went out twice for one input key.
    server = AskingTask()
    asked: List[Msg] = []
    holder: Dict[str, Client] = {}

    def elicit(params: Msg) -> Msg:
        asked.append(params)
        holder["c"].call_tool("lookup", {}, timeout=5)
        return {"action": "accept", "content": {"name": "ann"}}

    with connect(server, elicitation=elicit) as c:
        holder["c"] = c
        task = c.call_tool("job", {}, task=True)
        assert task.result(10).text == "done"
    assert len(asked) == 1
    assert len(server.methods("tasks/update")) == 1


# -- the cache and the tool catalog -----------------------------------------------------------------


class ChangingTools(Scripted):
    """Each tools/list answer is followed by a change: the server says so before the answer arrives."""

    def __init__(self, ttl: Optional[int] = 60_000) -> None:
        super().__init__()
        self.version = 1
        self.ttl = ttl

    def listing(self, version: int) -> List[Msg]:
        return [tool(f"tool_v{version}")]

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/list":
            result: Msg = {"tools": self.listing(self.version)}
            if self.ttl is not None:
                result["ttlMs"] = self.ttl
            self.version += 1  # the tools change right after the server made its answer...
            self.send("notifications/tools/list_changed", {})  # ...and it says so while the answer is on its way
            return result
        return super().handle(method, params, rid)


def test_a_listing_answered_across_a_change_is_not_cached() -> None:
    # The answer was put in the cache after list_changed had invalidated it: the pre-change tools
    # were served for the whole ttlMs.
    server = ChangingTools()
    with connect(server) as c:
        assert [t.name for t in c.list_tools()] == ["tool_v1"]
        assert [t.name for t in c.list_tools()] == ["tool_v2"]
    assert len(server.methods("tools/list")) == 2


class ChangingSchema(ChangingTools):
    def listing(self, version: int) -> List[Msg]:
        kind = "integer" if version == 1 else "string"
        return [tool("t", outputSchema={"type": "object", "properties": {"x": {"type": kind}}, "required": ["x"]})]

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/call":
            return {"content": [], "structuredContent": {"x": "now a string"}}  # valid for the changed tool
        return super().handle(method, params, rid)


def test_the_catalog_keeps_no_output_check_outdated_while_listing() -> None:
    # ToolCatalog stored the listing's outputSchema checks even though a change came while it listed:
    # the old schema then rejected the changed tool's valid results.
    server = ChangingSchema(ttl=None)
    with connect(server) as c:
        c.list_tools(cache=False)
        try:
            result = c.call_tool("t", {})
        except SchemaValidationError as exc:
            pytest.fail(f"checked against the pre-change outputSchema: {exc}")
        assert result.structured_content == {"x": "now a string"}


class CachedResources(Scripted):
    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "resources/list":
            return {"resources": [{"uri": "file:///a", "name": "a"}], "ttlMs": 60_000}
        if method == "resources/read":
            return {"contents": [{"uri": params["uri"], "text": "v1"}], "ttlMs": 60_000}
        if method == "tools/list":
            return {"tools": [tool("t", inputSchema={"type": "object", "properties": {"x": {"type": "integer"}}})],
                    "ttlMs": 60_000}
        return super().handle(method, params, rid)


def test_changing_a_cached_result_does_not_change_later_answers() -> None:
    # The cache handed out its own dicts: a caller changing .raw changed what the next caller got.
    server = CachedResources()
    with connect(server) as c:
        c.list_resources()[0].raw["name"] = "changed by a caller"
        assert c.list_resources()[0].name == "a"
        c.read_resource("file:///a").raw["contents"][0]["text"] = "changed by a caller"
        assert c.read_resource("file:///a").text == "v1"
    assert len(server.methods("resources/list")) == 1 and len(server.methods("resources/read")) == 1  # from the cache


def test_changing_a_listed_tool_does_not_change_later_listings() -> None:
    # Same defect as above, for the tool catalog: its Tool records (and their schemas) were shared with callers.
    with connect(CachedResources()) as c:
        c.list_tools()[0].input_schema["properties"]["x"]["type"] = "string"
        assert c.list_tools()[0].input_schema["properties"]["x"] == {"type": "integer"}


class NewCursors(Scripted):
    """Two pages; only the first is cacheable, and a new version of the listing brings new cursors."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 1

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/list":
            v = self.version
            cursor = params.get("cursor")
            if cursor is None:
                return {"ttlMs": 60_000, "nextCursor": f"v{v}-p2", "tools": [tool(f"a_v{v}")]}
            if cursor != f"v{v}-p2":
                return {"code": -32602, "message": f"invalid cursor {cursor}"}
            return {"tools": [tool(f"b_v{v}")]}
        return super().handle(method, params, rid)


def test_a_cached_first_page_with_a_stale_cursor_starts_the_listing_over() -> None:
    # The cached first page led to a cursor the server no longer accepted, and list_tools() raised.
    server = NewCursors()
    with connect(server) as c:
        assert [t.name for t in c.list_tools()] == ["a_v1", "b_v1"]
        server.version = 2
        assert [t.name for t in c.list_tools()] == ["a_v2", "b_v2"]


class SlowTools(Scripted):
    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/list":
            time.sleep(0.9)
            return {"tools": [tool("t")]}
        if method == "tools/call":
            self.release.wait(10)
            return {"content": [{"type": "text", "text": "ok"}]}
        return super().handle(method, params, rid)


def test_validate_arguments_comes_out_of_the_calls_timeout() -> None:
    # The tools/list that validate_arguments needs got a timeout of its own, then the call another:
    # call_tool(timeout=1) could wait about 2 s.
    server = SlowTools()
    with connect(server) as c:
        started = time.monotonic()
        try:
            with pytest.raises(RequestTimeout):
                c.call_tool("t", {}, timeout=1.0, validate_arguments=True)
            waited = time.monotonic() - started
        finally:
            server.release.set()
    assert waited < 1.5, f"call_tool(timeout=1) took {waited:.2f} s"


# -- subscriptions --------------------------------------------------------------------------------------


class LegacySubscriptions(LegacyScripted):
    refuse = ("file:///b",)

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "resources/subscribe":
            if params["uri"] in self.refuse:
                return {"code": -32002, "message": "no such resource"}
            return {}
        if method == "resources/unsubscribe":
            return {}
        return super().handle(method, params, rid)

    def uris(self, method: str) -> List[str]:
        return [m["params"]["uri"] for m in self.methods(method)]


def test_a_legacy_subscribe_failing_halfway_unsubscribes_what_it_subscribed() -> None:
    # subscribe(resources=[a, b]) with b refused raised, but a stayed subscribed at the server.
    server = LegacySubscriptions()
    with connect(server) as c:
        with pytest.raises(RPCError, match="no such resource"):
            c.subscribe(resources=["file:///a", "file:///b"], on_change=lambda e: None)
        assert wait_until(lambda: server.uris("resources/unsubscribe") == ["file:///a"]), server.uris("resources/unsubscribe")
    assert server.uris("resources/subscribe") == ["file:///a", "file:///b"]


def test_concurrent_legacy_subscribes_to_one_uri_subscribe_it_once() -> None:
    # Two threads subscribing at once could each see the other as "already subscribed": neither sent
    # resources/subscribe, and the server never sent updates.
    server = LegacySubscriptions()
    rounds = 150
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # many more thread switches: the window was a few bytecodes wide
    try:
        with connect(server) as c:
            for i in range(rounds):
                uri = f"file:///x{i}"
                barrier = threading.Barrier(2)
                subs: List[Any] = []

                def go() -> None:
                    barrier.wait(5)
                    subs.append(c.subscribe(resources=[uri], on_change=lambda e: None))

                pair = [threading.Thread(target=go) for _ in range(2)]
                for t in pair:
                    t.start()
                for t in pair:
                    t.join(10)
                assert len(subs) == 2
                for sub in subs:
                    sub.close()
    finally:
        sys.setswitchinterval(old)
    counts = {f"file:///x{i}": 0 for i in range(rounds)}
    for uri in server.uris("resources/subscribe"):
        counts[uri] += 1
    assert {uri: n for uri, n in counts.items() if n != 1} == {}


class Listening(Scripted):
    def __init__(self) -> None:
        super().__init__()
        self.listens: List[Any] = []
        self.silent = False

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "subscriptions/listen":
            self.listens.append(rid)
            if not self.silent:
                self.send("notifications/subscriptions/acknowledged",
                          {"notifications": params["notifications"], "_meta": {META_SUBSCRIPTION_ID: rid}})
            return None  # the stream stays open
        return super().handle(method, params, rid)


def test_messages_for_closed_or_unknown_subscriptions_reach_nobody() -> None:
    # A message tagged with a closed (or never known) subscription id was handed to every other open
    # subscription; a subscribe() that timed out left its id routed.
    server = Listening()
    got: Dict[str, List[Any]] = {"A": [], "B": []}
    with connect(server) as c:
        a = c.subscribe(tools=True, on_change=got["A"].append)
        b = c.subscribe(tools=True, on_change=got["B"].append)
        a_id, b_id = server.listens
        server.send("notifications/tools/list_changed", {"_meta": {META_SUBSCRIPTION_ID: "nobody-knows-me"}})
        a.close()
        server.send("notifications/tools/list_changed", {"_meta": {META_SUBSCRIPTION_ID: a_id}})
        server.send("notifications/tools/list_changed", {"_meta": {META_SUBSCRIPTION_ID: b_id}})
        assert wait_until(lambda: len(got["B"]) >= 1)  # delivered in order: the earlier ones have been routed
        assert (len(got["A"]), len(got["B"])) == (0, 1)

        server.silent = True
        with pytest.raises(RequestTimeout):
            c.subscribe(tools=True, on_change=got["A"].append, timeout=0.3)
        assert set(c._subscriptions._by_id) == {b_id}  # nothing routed to the one that timed out
        b.close()


def test_a_legacy_close_unsubscribes_nothing_the_server_never_subscribed() -> None:
    # Against a server without resources.subscribe, sub.close() still sent resources/unsubscribe.
    server = LegacySubscriptions()
    server.capabilities = {"resources": {}}
    with connect(server) as c:
        sub = c.subscribe(resources=["file:///u"], on_change=lambda e: None)
        sub.close()
    assert server.methods("resources/subscribe") == [] and server.methods("resources/unsubscribe") == []


# -- handlers and logging -------------------------------------------------------------------------------


class AsksForSampling(LegacyScripted):
    capabilities = {"tools": {}}

    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/call":
            self.reply({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {"messages": []}})
            return {"content": []}
        return super().handle(method, params, rid)

    def answers(self) -> List[Msg]:
        with self._lock:
            return [m for m in self.seen if m.get("id") == "s1" and "method" not in m]


def test_a_failing_handlers_text_stays_in_the_client() -> None:
    # The handler's exception text (here an SDK error quoting an API key) was sent verbatim to the server.
    server = AsksForSampling()

    def sampling(params: Msg) -> Msg:
        raise RuntimeError("Error code: 401 - Incorrect API key provided: sk-proj-SECRET123456")

    with connect(server, sampling=sampling) as c:
        c.call_tool("t", {})
        assert wait_until(lambda: len(server.answers()) == 1)
    error = server.answers()[0]["error"]
    assert "SECRET" not in str(error)
    assert error["code"] == -32603 and "sampling/createMessage" in error["message"]


class Chatty(Scripted):
    def handle(self, method: str, params: Msg, rid: Any) -> Optional[Msg]:
        if method == "tools/call":  # a server that ignores the level it was asked for
            for level in ("debug", "info", "warning", "error"):
                self.send("notifications/message", {"level": level, "data": f"a {level} line"})
            return {"content": []}
        return super().handle(method, params, rid)


def test_connect_log_level_filters_like_set_logging_level() -> None:
    # connect(log_level=...) did not set the client-side filter set_logging_level() sets: lower messages reached on_log.
    got: List[str] = []
    on_log: Callable[[str, Any, Any], None] = lambda level, logger, data: got.append(level)
    with connect(Chatty(), on_log=on_log, log_level="warning") as c:
        c.call_tool("t", {})
        assert wait_until(lambda: "error" in got)
    assert got == ["warning", "error"]


# -- the types -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [[], "", None, True, 3])
def test_parse_call_result_of_a_non_object_is_a_protocol_error(data: Any) -> None:
    # A result that was not a JSON object escaped as AttributeError ('list' object has no attribute 'get').
    with pytest.raises(ProtocolError):
        parse_call_result(data, "t", "s")


# That every parser gives its record or a ProtocolError for any JSON: tests/fuzz/test_fuzz_types.py.
