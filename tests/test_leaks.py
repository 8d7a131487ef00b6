"""Nothing mcpcall registers for the life of the process keeps a closed client alive.

Counted with the garbage collector after many connect/close cycles per transport and many
restarts of a registry's server (:func:`tests.loadcheck.run_cycles`): what stays alive must not
grow with the number of cycles, nor the open descriptors, nor the threads, nor Python's
allocated blocks past a few per cycle (every stdio client ever connected used to stay reachable
through its fork hook, with its dispatcher, handlers, tool catalog, caches and stderr tail: about
300 blocks a cycle). ``benchmarks/bench_load.py`` runs the same cycles a thousand times.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import logging.handlers
import os
import weakref
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall import forking
from tests import loadcheck
from tests.conftest import PYTHON, SERVERS, demo_argv, fault_argv, running_fault_server
from tests.servers import http_fault_server
from tests.servers.http_fault_server import FaultServer, Reply

CYCLES = 100
#: Allocated blocks a cycle may add over the second half: what a closed client leaves for a while (the
#: scheduler keeps cancelled deadlines until they outnumber the live ones) is a few, and a loaded machine
#: has shown 44 once (not reproduced since); a leaked stdio client is about 300,
#: and a leaked client of any transport is also counted as an object (``report.leaked()``).
BLOCKS_PER_CYCLE = 100
HOLD = [PYTHON, str(SERVERS / "hold_server.py")]


@pytest.fixture(scope="module")
def http_server() -> Iterator[FaultServer]:
    """One fault server for the module: a server per test would be cycles of its own."""
    with running_fault_server() as server:
        yield server


def _check(report: loadcheck.CycleReport, what: str) -> None:
    rows = f"before {report.start.row()}, at the half {report.half.row()}, after {report.end.row()}"
    assert report.leaked() == {}, f"grew over {report.cycles} {what}: {report.leaked()}; {rows}"
    assert report.end.fds <= report.start.fds, f"open fds grew over {report.cycles} {what}; {rows}"
    assert report.blocks_per_cycle() < BLOCKS_PER_CYCLE, \
        f"{report.blocks_per_cycle():.0f} allocated blocks kept per cycle over {what}; {rows}"


def _connect_cycle(target: Any, era: str, reset: Callable[[], None] = lambda: None) -> Callable[[int], None]:
    def cycle(n: int) -> None:
        with mcpcall.connect(target, protocol=era, timeout=10, close_timeout=2.0) as client:
            assert client.call_tool("echo", {"message": str(n)}).text == str(n)
            client.list_tools()  # the catalog and caches are what made a leaked client heavy
        reset()

    return cycle


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stdio_connect_close_cycles_leave_nothing_alive(era: str) -> None:
    _check(loadcheck.run_cycles(_connect_cycle(HOLD, era), CYCLES), "stdio connect/close cycles")


@pytest.mark.parametrize(("path", "reply", "era"), [("/mcp", "json", "legacy"), ("/mcp", "json", "modern"),
                                                    ("/mcp", "sse", "legacy"), ("/sse", "json", "legacy")])
def test_http_connect_close_cycles_leave_nothing_alive(http_server: FaultServer, monkeypatch: pytest.MonkeyPatch,
                                                       path: str, reply: str, era: str) -> None:
    http_server.reply = reply
    # Only the tools a modern client keeps: each one left out is a warning per cycle, which pytest's log capture
    # keeps until the test ends (about 35 allocated blocks a record).
    monkeypatch.setattr(http_fault_server, "TOOLS", [t for t in http_fault_server.TOOLS if not t["name"].startswith("bad_")])

    def forget() -> None:  # what the test server records grows with every request: not the client's
        with http_server._lock:
            http_server.seen.clear()
            http_server.sessions.clear()

    def served() -> bool:  # the server's side of each connection (its socket, its thread) is gone too
        httpd = http_server._httpd
        return httpd is not None and not any(t.is_alive() for t in httpd._handlers)

    report = loadcheck.run_cycles(_connect_cycle(http_server.origin + path, era, forget), CYCLES, settled=served)
    _check(report, f"connect/close cycles ({path}, {reply} replies, {era})")


def test_registry_restart_cycles_leave_nothing_alive() -> None:
    registry = mcpcall.ToolRegistry({"hold": HOLD})
    try:
        name = next(t.name for t in registry.tools() if t.name.endswith("__echo"))

        def restart(n: int) -> None:
            registry.client("hold").close()  # closed by its user: the next call restarts it
            assert registry.call(name, {"message": str(n)}).text == str(n)

        report = loadcheck.run_cycles(restart, CYCLES)
    finally:
        registry.close()
    _check(report, "registry restarts")


def test_a_kept_log_record_does_not_keep_a_closed_client_alive(http_server: FaultServer) -> None:
    # A handler that keeps records (pytest's capture, logging.handlers.MemoryHandler) keeps their arguments: an
    # exception among them keeps its traceback, whose frames hold the listing's catalog and through it the client.
    kept: list = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("mcpcall")
    logger.addHandler(handler)
    try:
        with mcpcall.connect(http_server.url, protocol="modern", timeout=10) as client:
            client.list_tools()  # two of the test server's tools have broken x-mcp-header annotations: left out
        ref = weakref.ref(client)
        del client
        gc.collect()
    finally:
        logger.removeHandler(handler)
    assert any("left out" in record.getMessage() for record in kept), [r.getMessage() for r in kept]
    assert ref() is None, "a log record kept the closed client alive"


#: What must not outlive a registry or client that was closed and dropped, whatever a handler kept.
_CLIENT_KINDS = ("Client", "Transport", "Dispatcher", "CallbackRunner", "ToolRegistry")


def test_kept_log_records_of_failed_calls_keep_no_client_alive(http_server: FaultServer) -> None:
    # Failed calls are logged (the registry's tool messages, the integrations' ToolCallFailed, a session that is
    # started again): a record with the exception among its arguments (or its traceback as exc_info) keeps the
    # frames that raised it, and through them the registry, its clients, their transports and dispatchers, for
    # as long as the handler keeps the record.
    from mcpcall.integrations._core import mcp_tools

    http_server.fail["echo"] = Reply(500, b"the server broke")  # an HTTP error for every echo
    before = loadcheck.live_objects()
    kept = logging.handlers.MemoryHandler(capacity=1_000_000, flushLevel=logging.CRITICAL + 1)  # keeps every record
    logger = logging.getLogger("mcpcall")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(kept)
    try:
        servers = {"demo": demo_argv(), "hang": fault_argv("hang"), "crash": fault_argv("crash-on-call"),
                   "web": {"url": http_server.url, "transport": "streamable-http"}}
        wanted = {("demo", "fail"): {"message": "refused"}, ("hang", "echo"): {"message": "never"},
                  ("crash", "echo"): {"message": "dies"}, ("web", "echo"): {"message": "500"}}
        with mcpcall.ToolRegistry(servers, timeout=10) as registry:
            failing = {t.name: wanted[t.server, t.tool.name] for t in registry.tools() if (t.server, t.tool.name) in wanted}
            assert len(failing) == len(wanted), failing
            for name, arguments in failing.items():
                call = {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
                message = registry.execute(call, timeout=1)
                assert "error" in json.dumps(message).lower() or "fail" in json.dumps(message).lower(), message
                with pytest.raises(mcpcall.MCPError):
                    result = registry.call(name, arguments, timeout=1)
                    if result.is_error:
                        raise mcpcall.ToolCallFailed("isError")
            for tool in mcp_tools(registry, timeout=10):
                if tool.name in failing:
                    with pytest.raises(mcpcall.ToolCallFailed):
                        tool.call(failing[tool.name], timeout=1)
                    with pytest.raises(mcpcall.ToolCallFailed):
                        asyncio.run(tool.acall(failing[tool.name], timeout=1))
        with mcpcall.connect(fault_argv("crash-on-call"), name="lone", timeout=10) as client:
            for tool in mcp_tools(client, timeout=10):
                if tool.name == "echo":
                    with pytest.raises(mcpcall.ToolCallFailed):
                        tool.call({"message": "dies"}, timeout=1)
        del registry, client, tool
        after = loadcheck.live_objects()
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)
        http_server.fail.clear()
    records = [r.getMessage() for r in kept.buffer]
    for said in ("failed", "HTTP 500", "exited with code 3", "did not answer"):
        assert any(said in text for text in records), f"no record says {said!r}: {records}"
    alive = {kind: after[kind] - before[kind] for kind in _CLIENT_KINDS if after[kind] > before[kind]}
    holding = [(r.name, r.msg, [type(a).__name__ for a in r.args if not isinstance(a, (str, int, float, type(None)))],
                r.exc_info is not None) for r in kept.buffer
               if r.exc_info is not None or any(not isinstance(a, (str, int, float, type(None))) for a in r.args)]
    assert alive == {}, f"kept log records keep closed clients alive: {alive}; records holding objects: {holding}"
    kept.close()


def test_a_kept_record_of_a_failing_callback_keeps_no_client_alive() -> None:
    # User code that raises (here a done-callback) is logged with its traceback: as exc_info, a kept
    # record kept the frames that ran it, the callbacks runner and the Future, and through them the client.
    kept = logging.handlers.MemoryHandler(capacity=1_000_000, flushLevel=logging.CRITICAL + 1)
    logger = logging.getLogger("mcpcall")
    logger.addHandler(kept)
    before = loadcheck.live_objects()
    try:
        with mcpcall.connect(demo_argv(), name="raising", timeout=10) as client:
            future = client.call_tool_future("echo", {"message": "hi"})
            future.add_done_callback(lambda done: 1 / 0)
            assert future.result(timeout=10).text == "hi"
        del client, future
        after = loadcheck.live_objects()
    finally:
        logger.removeHandler(kept)
    alive = {kind: after[kind] - before[kind] for kind in _CLIENT_KINDS if after[kind] > before[kind]}
    assert alive == {}, f"a kept log record keeps a closed client alive: {alive}"
    raised = [r for r in kept.buffer if "raised" in r.getMessage()]  # the information is kept, as text
    assert raised and "ZeroDivisionError" in raised[0].getMessage() and "Traceback" in raised[0].getMessage(), \
        [r.getMessage() for r in kept.buffer]
    assert all(r.exc_info is None for r in kept.buffer), "a record keeps a traceback"
    kept.close()


class _Owner:
    def __init__(self) -> None:
        self.seen = 0

    def hook(self) -> None:
        self.seen += 1


def test_a_fork_hook_never_keeps_its_owner_alive() -> None:
    owner = _Owner()
    forking.on_fork_in_child(owner, owner.hook)  # a bound method holds its object: held weakly
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def test_a_fork_hook_that_holds_its_owner_is_refused() -> None:
    owner = _Owner()
    with pytest.raises(ValueError, match="must not hold its owner"):
        forking.on_fork_in_child(owner, lambda: owner.hook())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_method_hook_still_runs_in_a_forked_child() -> None:
    owner = _Owner()
    forking.on_fork_in_child(owner, owner.hook)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, str(owner.seen).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        seen: Any = os.read(read, 16)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert seen == b"1" and owner.seen == 0


def test_registries_made_and_closed_do_not_stay_alive() -> None:
    def make_and_close(_: int) -> None:
        mcpcall.ToolRegistry({"demo": demo_argv()}, lazy=True).close()  # a notebook cell run again and again

    _check(loadcheck.run_cycles(make_and_close, CYCLES), "registries made and closed")
