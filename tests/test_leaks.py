"""Nothing mcpcall registers for the life of the process keeps a closed client alive.

Counted with the garbage collector after many connect/close cycles per transport and many
restarts of a registry's server (:func:`tests.loadcheck.run_cycles`): what stays alive must not
grow with the number of cycles, nor the open descriptors, nor the threads, nor Python's
allocated blocks past a few per cycle (every stdio client ever connected used to stay reachable
through its fork hook, with its dispatcher, handlers, tool catalog, caches and stderr tail: about
300 blocks a cycle). ``benchmarks/bench_load.py`` runs the same cycles a thousand times.
"""

from __future__ import annotations

import gc
import logging
import os
import weakref
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall import forking
from tests import loadcheck
from tests.conftest import PYTHON, SERVERS, demo_argv
from tests.servers import http_fault_server
from tests.servers.http_fault_server import FaultServer

CYCLES = 100
#: Allocated blocks a cycle may add over the second half: what a closed client leaves for a while (the
#: scheduler keeps cancelled deadlines until they outnumber the live ones) is a few; a leaked stdio
#: client is about 300.
BLOCKS_PER_CYCLE = 40
HOLD = [PYTHON, str(SERVERS / "hold_server.py")]


@pytest.fixture(scope="module")
def http_server() -> Iterator[FaultServer]:
    server = FaultServer().start()
    try:
        yield server
    finally:
        server.stop()


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
