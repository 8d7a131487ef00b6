"""Floods of notifications behind a slow callback: bounded memory, progress coalesced, drops reported.

The flood comes from an in-memory server whose messages reach the client through a
small bounded queue (as a pipe would), so what grows is only what the client keeps.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
from typing import Any, Dict, List

import pytest

from mcpcall import Client
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.conftest import wait_until

Msg = Dict[str, Any]
MODERN = "2026-07-28"


class FloodServer:
    """A legacy server whose ``flood`` tool sends ``n`` progress or log notifications, then answers."""

    def __init__(self, n: int, kind: str = "progress", level: str = "info") -> None:
        self.n = n
        self.kind = kind
        self.level = level
        self.sent_all = threading.Event()

    def __call__(self, m: Msg, reply: Reply) -> None:
        if "id" not in m or "method" not in m:  # notifications, and the client's answers
            return
        rid, method, params = m["id"], m["method"], m.get("params") or {}
        if method == "server/discover":
            reply({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "initialize":
            reply({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": params["protocolVersion"], "serverInfo": {"name": "flood", "version": "1"},
                "capabilities": {"tools": {"listChanged": True}, "logging": {}}}})
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            for i in range(1, self.n + 1):
                if self.kind == "progress":
                    reply({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": i, "total": self.n}})
                elif self.kind == "log":
                    reply({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": self.level, "data": f"line {i}"}})
                elif self.kind == "requests":
                    reply({"jsonrpc": "2.0", "id": f"s{i}", "method": "roots/list"})
                else:
                    reply({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            if self.kind == "log":
                reply({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "error", "data": "last"}})
            self.sent_all.set()
            reply({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "done"}]}})
        else:
            reply({"jsonrpc": "2.0", "id": rid, "result": {}})


def piped_transport(server: FloodServer) -> MemoryTransport:
    """A memory transport whose messages to the client wait in a small queue, as in a pipe."""
    transport = MemoryTransport(server, name="flood")
    transport._to_client = queue.Queue(maxsize=64)  # type: ignore[assignment]
    return transport


FLOOD_SCRIPT = r"""
import json, resource, sys, threading
sys.path.insert(0, sys.argv[1])
from tests.session.test_callback_flood import FloodServer, piped_transport
from mcpcall import Client

def reset_peak():
    # ru_maxrss is no use here: a forked child starts with its parent's peak (a big pytest process).
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS

def peak_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024

server = FloodServer(int(sys.argv[2]))
seen = []
with Client(piped_transport(server), protocol="legacy").connect() as client:
    def slow(progress, total, message):
        if not seen:
            server.sent_all.wait(60)  # behind the whole flood
        seen.append(progress)
    base = rss_kib()
    reset_peak()
    client.call_tool("flood", {}, on_progress=slow, timeout=120)
    peak = peak_kib()
print(json.dumps({"base_kib": base, "peak_kib": peak, "calls": len(seen), "last": seen[-1]}))
"""


@pytest.mark.timeout(120)
def test_a_progress_flood_behind_a_slow_callback_is_coalesced_and_bounded() -> None:
    # 300k progress notifications while the callback waits: all were queued (+123 MB), now only the latest.
    n = 300_000
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", FLOOD_SCRIPT, root, str(n)], capture_output=True, text=True, timeout=110,
                         cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(figures)
    growth_mib = (figures["peak_kib"] - figures["base_kib"]) / 1024
    assert figures["last"] == n  # the callback saw the last value
    assert figures["calls"] <= 10  # the first (blocked), then the latest of what waited
    assert growth_mib < 25, figures  # before: +50 MiB (every one of the 300k queued)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []
        self.threads: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.threads.append(threading.current_thread().name)


@pytest.fixture
def records() -> Any:
    handler = Records()
    logger = logging.getLogger("mcpcall")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_a_log_flood_behind_a_slow_on_log_is_bounded_and_the_drops_are_reported(records: Records) -> None:
    server = FloodServer(5000, kind="log")
    got: List[Any] = []

    def on_log(level: str, logger: Any, data: Any) -> None:
        if not got:
            server.sent_all.wait(30)
        got.append(data)

    with Client(piped_transport(server), protocol="legacy", on_log=on_log) as client:
        client.connect()
        assert client.call_tool("flood", {}).text == "done"
        client.close()  # runs what is queued
    assert got[0] == "line 1"
    # What waited behind on_log, plus what was still in the 64-message pipe when the flood was sent.
    assert len(got) <= client._connection.callbacks.max_queued + 64 + 2  # type: ignore[attr-defined]
    drops = [r for r in records.records if r.name == "mcpcall.callbacks" and "dropped" in r.getMessage()]
    assert drops, [r.getMessage() for r in records.records][-5:]
    assert "notifications dropped" in drops[0].getMessage() and "'flood'" in drops[0].getMessage()
    dropped = sum(int(r.getMessage().split(": ")[1].split()[0]) for r in drops)
    assert dropped + len(got) == 5001
    assert all(name.startswith("mcpcall-callbacks-") for r, name in zip(records.records, records.threads)
               if r.name == "mcpcall.callbacks")


def test_messages_below_the_level_are_never_queued() -> None:
    # The level filter ran on the callbacks thread, after queueing: a debug flood filled the queue.
    server = FloodServer(5000, kind="log", level="debug")
    got: List[Any] = []
    with Client(piped_transport(server), protocol="legacy", log_level="error",
                on_log=lambda level, logger, data: got.append(data)) as client:
        client.connect()
        callbacks = client._connection.callbacks  # type: ignore[attr-defined]
        callbacks.max_queued = 10  # far less than the flood: anything queued for it would be dropped
        blocked = threading.Event()
        callbacks.submit(blocked.wait, 30)  # the callbacks thread is busy for the whole flood
        future = client.call_tool_future("flood", {})
        assert server.sent_all.wait(30)
        assert callbacks.queued() <= 3  # the blocker's wake-ups, the answer, "last": no debug line
        blocked.set()
        future.result(30)
        client.close()
    assert got == ["last"]


def test_list_changed_is_coalesced_per_listener() -> None:
    server = FloodServer(20_000, kind="list_changed")
    seen: List[Any] = []
    release = threading.Event()

    def listener(params: Msg) -> None:
        if not seen:
            release.wait(30)
        seen.append(params)

    with Client(piped_transport(server), protocol="legacy") as client:
        client.connect()
        client.on_notification("notifications/tools/list_changed", listener)
        future = client.call_tool_future("flood", {})
        assert server.sent_all.wait(30)
        release.set()
        future.result(30)
        client.close()
    assert 1 <= len(seen) <= 3


def test_a_flood_of_server_requests_is_answered_every_one_and_the_excess_refused_at_once(records: Records) -> None:
    # Requests are never dropped silently: past the cap they are answered with an error, not queued.
    from mcpcall.session.inbound import MAX_WAITING_REQUESTS

    n = MAX_WAITING_REQUESTS + 100
    server = FloodServer(n, kind="requests")
    answered: List[int] = []

    def roots() -> List[str]:
        if not answered:
            server.sent_all.wait(30)
        answered.append(1)
        return []

    transport = piped_transport(server)
    with Client(transport, protocol="legacy", roots=roots) as client:
        client.connect()
        client.call_tool("flood", {})
        assert wait_until(lambda: sum(1 for m in list(transport.sent) if "method" not in m) >= n, timeout=30)
        client.close()
    replies = {m["id"]: m for m in transport.sent if "method" not in m}
    assert len(replies) == n  # every request got its answer
    refused = [m for m in replies.values() if "error" in m]
    assert refused and all("busy" in m["error"]["message"] for m in refused)
    # Waiting behind the first handler, plus what was still in the 64-message pipe when the flood was sent.
    assert len(answered) + len(refused) == n and len(answered) <= MAX_WAITING_REQUESTS + 64 + 1
    assert any("server requests refused" in r.getMessage() for r in records.records)


class UnknownProgress(FloodServer):
    """A server whose ``flood`` tool sends ``n`` progress notifications for a token nobody gave it."""

    def __call__(self, m: Msg, reply: Reply) -> None:
        if m.get("method") == "tools/call":
            for i in range(self.n):
                reply({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "nope", "progress": i}})
            self.sent_all.set()
            reply({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "done"}]}})
            return
        super().__call__(m, reply)


def test_log_records_from_the_reader_are_bounded_behind_a_blocked_callbacks_thread(records: Records) -> None:
    # The reader logs one debug record per unknown-token progress; each was queued for the
    # callbacks thread and never dropped: 50,000 waited (the bound is 1000).
    server = UnknownProgress(50_000)
    with Client(piped_transport(server), protocol="legacy") as client:
        client.connect()
        callbacks = client._connection.callbacks  # type: ignore[attr-defined]
        blocked = threading.Event()
        callbacks.submit(blocked.wait, 30)  # the callbacks thread is busy for the whole flood
        future = client.call_tool_future("flood", {})
        assert server.sent_all.wait(30)
        assert wait_until(future.done, 30)  # the answer came after the flood: the reader has handled all of it
        queued = callbacks.queued()
        blocked.set()
        assert future.result(30).text == "done"
        client.close()
    assert queued <= callbacks.max_queued + 10, queued
    unknown = [r for r in records.records if "progress for unknown token" in r.getMessage()]
    assert 0 < len(unknown) <= callbacks.max_queued
    drops = [r.getMessage() for r in records.records if r.name == "mcpcall.callbacks" and "log records dropped" in r.getMessage()]
    assert drops


BAD_EVENTS = 300


@pytest.mark.parametrize("kind", ["streamable-http", "sse"])
def test_a_flood_of_bad_sse_events_over_http_yields_a_bounded_number_of_warnings(records: Records, kind: str) -> None:
    # Every SSE event that was not JSON was a warning of its own (stdio capped its own; HTTP did not).
    from mcpcall import connect
    from mcpcall.dispatcher import WARNINGS_PER_KIND
    from tests.servers.http_fault_server import FaultServer, Reply, sse_event

    server = FaultServer().start()
    try:
        server.modern = False
        if kind == "streamable-http":
            def body(message: Msg) -> bytes:
                answer = server.answer(message)
                return b"".join(sse_event(f"not json {i}") for i in range(BAD_EVENTS)) + sse_event(answer)

            server.fail["echo"] = Reply(200, body, "text/event-stream")
            url = server.url
        else:
            url = server.origin + "/sse"
        with connect(url, timeout=10) as client:
            if kind == "sse":
                with server._lock:
                    streams = list(server._sse_queues.values())
                for stream in streams:
                    for i in range(BAD_EVENTS):
                        stream.put(f"not json {i}")  # type: ignore[arg-type]
            assert client.call_tool("echo", {"message": "hi"}, timeout=10).text == "hi"
            client.close()  # runs what is queued
    finally:
        server.stop()
    bad = [r for r in records.records if "is not JSON; skipped" in r.getMessage()]
    warnings = [r for r in bad if r.levelno == logging.WARNING]
    assert len(bad) == BAD_EVENTS  # each one is still logged (at debug past the cap)
    assert len(warnings) == WARNINGS_PER_KIND, len(warnings)
    assert "further warnings of this kind are logged at debug level" in warnings[-1].getMessage()


def test_close_drops_a_slow_backlog_of_notifications_but_runs_what_must_run(records: Records) -> None:
    # close() ran every notification still queued: a thousand behind a slow on_log held it up for its whole
    # join timeout (5 s), and the callbacks thread ran on after it returned.
    import time

    from mcpcall.callbacks import CLOSE_GRACE, CallbackRunner

    runner = CallbackRunner("slowpoke")
    ran: List[int] = []
    must: List[str] = []
    for i in range(100):
        runner.offer(lambda i=i: (time.sleep(0.05), ran.append(i)))
    runner.submit(must.append, "done-callback")
    started = time.monotonic()
    runner.close()
    took = time.monotonic() - started
    assert runner._thread is not None and not runner._thread.is_alive()
    assert took < CLOSE_GRACE + 2.0, took  # a bound that shows the backlog was not run whole (5 s), not a speed figure
    assert must == ["done-callback"]
    assert 0 < len(ran) < 100
    dropped = [r.getMessage() for r in records.records if "were dropped" in r.getMessage()]
    assert dropped and f"{100 - len(ran)} notifications" in dropped[0] and "'slowpoke'" in dropped[0]
