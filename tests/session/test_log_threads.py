"""Logging handlers are user code: no mcpcall log record is emitted on a reader, writer, stderr drain,
HTTP worker or scheduler thread (DESIGN.md), whatever happens: connect, calls, subscriptions that
end or break, bad lines, a server that dies, over stdio, HTTP and in memory."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcpcall
from mcpcall import Client, ConnectionClosed
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.conftest import fault_argv, wait_until
from tests.servers.http_fault_server import FaultServer

FAST = {"probe_timeout": 1.0, "close_timeout": 1.0}
MODERN = "2026-07-28"


class Where(logging.Handler):
    """Records, for every mcpcall record, the thread that emitted it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((threading.current_thread().name, record.name, record.getMessage()[:200]))

    def on_io_threads(self) -> list[tuple[str, str, str]]:
        """Records emitted on an mcpcall thread other than a callbacks thread."""
        return [s for s in self.seen if s[0].startswith("mcpcall-") and not s[0].startswith("mcpcall-callbacks-")]


@pytest.fixture
def where() -> Iterator[Where]:
    handler = Where()
    logger = logging.getLogger("mcpcall")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


def test_stdio_run_logs_on_no_io_thread(where: Where) -> None:
    with mcpcall.connect(fault_argv("garbage", "unknown-id", "duplicate"), **FAST) as c:  # type: ignore[arg-type]
        assert c.call_tool("echo", {"message": "fine"}).text == "fine"
        c.list_tools()
    with mcpcall.connect(fault_argv("crash-on-call"), stderr=lambda line: None, **FAST) as c:  # type: ignore[arg-type]
        with pytest.raises(ConnectionClosed):
            c.call_tool("echo", {"message": "x"})
    assert where.seen  # the run did log something
    assert where.on_io_threads() == []


def test_http_run_logs_on_no_io_thread(where: Where) -> None:
    server = FaultServer().start()
    try:
        url = server.url
        with mcpcall.connect(url, timeout=10) as c:
            assert c.call_tool("echo", {"message": "hi"}).text == "hi"
            c.list_tools()
            server.stop()  # the server dies under a connected client
            with pytest.raises(mcpcall.MCPError):
                c.call_tool("echo", {"message": "gone"}, timeout=3)
    finally:
        server.stop()
    assert where.on_io_threads() == []


def listen_server(fate: list[str]) -> Any:
    """A modern server whose subscriptions/listen streams end as ``fate`` says, one per listen:
    "graceful" (a result), "break" (an error: listened to again), "gone" (-32601)."""

    timers: list[threading.Timer] = []

    def serve(m: dict[str, Any], reply: Reply) -> None:
        if "id" not in m or "method" not in m:
            return
        rid, method = m["id"], m["method"]
        if method == "server/discover":
            reply({"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {"listChanged": True}}}})
        elif method == "subscriptions/listen":
            reply({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"toolsListChanged": True},
                              "_meta": {"io.modelcontextprotocol/subscriptionId": rid}}})
            how = fate.pop(0) if fate else "hold"
            if how == "graceful":
                reply({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete"}})
            elif how == "break":  # once subscribe() has returned
                broke = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "stream broke"}}
                timer = threading.Timer(0.3, reply, (broke,))
                timer.start()
                timers.append(timer)
            elif how == "gone":
                reply({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        else:
            reply({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "content": []}})

    return serve


@pytest.mark.parametrize("fate", [["graceful"], ["break", "gone"]])
def test_subscriptions_ending_log_on_no_io_thread(where: Where, fate: list[str]) -> None:
    # Subscriptions._ended (a done-callback on the reader thread) logged there.
    expected = "ended a subscription" if fate == ["graceful"] else "no longer offers subscriptions/listen"
    with Client(MemoryTransport(listen_server(list(fate)), name="subs"), probe_timeout=1.0).connect() as c:  # type: ignore[arg-type]
        sub = c.subscribe(tools=True, timeout=5)
        assert wait_until(lambda: sub.ended, 10)
        assert wait_until(lambda: any(expected in s[2] for s in where.seen), 5)
        if fate != ["graceful"]:
            assert any("listening again in" in s[2] for s in where.seen)
    assert where.on_io_threads() == []


def test_a_malformed_token_file_read_over_http_logs_on_no_io_thread(where: Where, tmp_path: Any) -> None:
    # FileTokenStore warned about a broken file on the HTTP worker that read it (every request).
    import requests

    from mcpcall.auth.tokens import FileTokenStore

    class StoredBearer(requests.auth.AuthBase):
        """An auth hook that looks its token up in a FileTokenStore on each request (as OAuth does)."""

        def __init__(self, store: FileTokenStore) -> None:
            self.store = store

        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            token = self.store.get("https://issuer.example", "https://resource.example")
            assert token is None
            return r

    path = tmp_path / "tokens.json"
    path.write_text('{"tokens": [{"bad": 1}]}')  # valid JSON, one malformed entry
    path.chmod(0o600)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    broken.chmod(0o600)
    auth = StoredBearer(FileTokenStore(str(path)))
    server = FaultServer().start()
    try:
        with mcpcall.connect(server.url, auth=auth, timeout=10) as c:
            assert c.call_tool("echo", {"message": "hi"}).text == "hi"
            auth.store = FileTokenStore(str(broken))
            assert c.call_tool("echo", {"message": "hi"}).text == "hi"
    finally:
        server.stop()
    assert any("ignored 1 malformed entr" in s[2] for s in where.seen)
    assert any("is not a valid token file" in s[2] for s in where.seen)
    assert where.on_io_threads() == []


def test_a_stderr_callback_that_raises_logs_on_no_io_thread(where: Where) -> None:
    def broken(line: str) -> None:
        raise RuntimeError("callback broke")

    with mcpcall.connect(fault_argv("crash-on-call"), stderr=broken, **FAST) as c:  # type: ignore[arg-type]
        with pytest.raises(ConnectionClosed):
            c.call_tool("echo", {"message": "x"})
        assert wait_until(lambda: any("stderr callback" in s[2] for s in where.seen), 10)
    assert where.on_io_threads() == []


def test_a_scheduled_callback_that_raises_is_logged_off_the_scheduler_thread(where: Where) -> None:
    from mcpcall.callbacks import CallbackRunner
    from mcpcall.scheduler import get_scheduler

    scheduler = get_scheduler()  # the process-wide one (a thread of one's own would outlive the test)
    fired = threading.Event()

    def broken() -> None:
        fired.set()
        raise RuntimeError("scheduled callback broke")

    after = threading.Event()
    scheduler.schedule(0, broken)
    scheduler.schedule(0, after.set)  # runs once the failure was handled
    assert after.wait(10) and fired.is_set()
    assert not any("scheduled callback failed" in s[2] for s in where.seen)  # kept, not emitted there
    runner = CallbackRunner("sched-test")  # the next callbacks thread to run anything emits it
    runner.submit(lambda: None)
    runner.close()
    failed = [s for s in where.seen if "scheduled callback failed" in s[2]]
    assert failed and failed[0][0] == "mcpcall-callbacks-sched-test"
    assert where.on_io_threads() == []


def test_a_logging_filter_that_raises_on_a_deferred_record_neither_kills_the_callbacks_thread_nor_loses_the_rest() -> None:
    # A record kept by log_later is emitted by the next callbacks thread before its next callback, outside the
    # try that guards user code: a logging filter (user code) that raised there ended the thread, and with it every
    # callback queued after (handlers, progress, the next round of a request), and the records after it were lost.
    from mcpcall.callbacks import CallbackRunner, log_later

    logger = logging.getLogger("mcpcall.test-deferred")
    seen: list[str] = []

    class Picky(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if "boom" in record.getMessage():
                raise RuntimeError("a user's logging filter broke")
            seen.append(record.getMessage())
            return False

    picky = Picky()
    logger.addFilter(picky)
    runner = CallbackRunner("deferred-test")
    try:
        log_later(logger, logging.ERROR, "first: boom")
        log_later(logger, logging.ERROR, "second: kept")
        ran = threading.Event()
        runner.submit(lambda: None)
        runner.submit(ran.set)
        assert ran.wait(10), "the callbacks thread died on the deferred record"
        assert seen == ["second: kept"]
    finally:
        runner.close()
        logger.removeFilter(picky)


def test_a_record_never_holds_an_exception_given_as_an_argument() -> None:
    # Whatever a log call passes, the record a handler keeps holds the exception's text, not the exception (whose
    # traceback's frames would keep what raised it alive as long as the record): every way a record is made.
    from mcpcall.auth.hooks import emit
    from mcpcall.callbacks import CallbackRunner, log_exception, log_later
    from mcpcall.transports.memory import MemoryTransport as Bare

    logger = logging.getLogger("mcpcall.test-as-text")
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    keep = Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    runner = CallbackRunner("as-text-test")
    error = ValueError("the cause")
    try:
        runner.log(logger, logging.WARNING, "runner: %s %s", error, 1)
        log_later(logger, logging.WARNING, "later: %s", error)
        log_exception(logger, logging.WARNING, "exception: %s", error)
        emit(logger, logging.WARNING, "hook: %s", error)
        bare = Bare(lambda message: None)
        bare.logger_name = logger.name
        bare._log(logging.WARNING, "transport: %s", error)
        ran = threading.Event()
        runner.submit(ran.set)  # the deferred record is emitted before this callback
        assert ran.wait(10)
        messages = sorted(record.getMessage().split("\n")[0] for record in kept)
        assert messages == ["exception: the cause", "hook: the cause", "later: the cause", "runner: the cause 1",
                            "transport: the cause"]
        assert not any(isinstance(arg, BaseException) for record in kept for arg in record.args or ())
    finally:
        runner.close()
        logger.removeHandler(keep)
