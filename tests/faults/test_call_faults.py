"""The fault matrix, part A: what a server does wrong with its answers, on every transport; and what a
subprocess does wrong, on stdio.

Every fault is triggered the same way on every column (``call_tool("echo", ...)`` against a
:class:`~tests.faults.peers.Peer` with the fault's mode on) and held to the same expectations
(:class:`~tests.faults.conftest.Expect`). Where a transport cannot carry a fault as such, the peer acts
out its nearest equivalent (see :class:`~tests.faults.peers.MatrixHandler`), and the test says what
the client must make of it there.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

import mcpcall
from mcpcall import ConnectionClosed, ProtocolError, RequestTimeout
from mcpcall.callbacks import CLOSE_GRACE, DEFAULT_MAX_QUEUED
from tests.conftest import pid_alive, wait_until
from tests.faults.conftest import (
    HTTP_LEGACY_JSON,
    HTTP_MODERN_JSON,
    HTTPSSE,
    MARGIN,
    STDIO,
    TRANSPORTS,
    Expect,
    SlowCallback,
)
from tests.faults.peers import UNKNOWN_ID, Peer

#: The deadline of a faulty call: short, so that the matrix runs fast; a hang shows as a miss of it + MARGIN.
DEADLINE = 1.0
#: The deadline of a call behind a flood (the flood itself takes time to send and read on a loaded machine).
FLOOD_DEADLINE = 5.0
#: How many notifications a flood sends: far more than a slow callback can run within FLOOD_DEADLINE.
FLOOD = 5000
#: The user's slow callback, per call.
SLOW = 0.05
JSON_REPLIES = (HTTP_LEGACY_JSON, HTTP_MODERN_JSON)

every_transport = pytest.mark.parametrize("transport", TRANSPORTS)


@pytest.fixture
def open_peer(tmp_path: Path) -> Iterator[Callable[..., Peer]]:
    """``open_peer(transport, mode, **knobs)``: a server with a fault mode on; its clients are closed and it is
    stopped after the test (before the leak check)."""
    peers: List[Peer] = []

    def make(transport: str, mode: str, **knobs: Any) -> Peer:
        peer = Peer(transport, mode, tmp_path, **knobs)
        peers.append(peer)
        return peer

    try:
        yield make
    finally:
        for peer in peers:
            peer.stop()


def echo(client: mcpcall.Client, message: str, timeout: float = DEADLINE, **options: Any) -> Callable[[], Any]:
    """The call that meets the fault."""
    return lambda: client.call_tool("echo", {"message": message}, timeout=timeout, **options)


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """mcpcall's records, debug ones included: what shows that a stray message reached the client and was dropped."""
    caplog.set_level(logging.DEBUG, logger="mcpcall")
    return caplog


def dropped(records: pytest.LogCaptureFixture, request_id: Any) -> bool:
    """Whether the client dropped a response to ``request_id`` (unknown, or answered already)."""
    text = f"dropped a response to unknown or finished request {request_id!r}"
    return any(text in record.getMessage() for record in records.records)


def ready(peer: Peer, **options: Any) -> mcpcall.Client:
    """A connected client that has listed the tools (so that the faulty call is only the call)."""
    client = peer.connect(**options)
    client.list_tools()
    return client


# -- any transport ----------------------------------------------------------------------------------


@pytest.mark.fault("never answers")
@every_transport
def test_never_answers(transport: str, open_peer: Callable[..., Peer]) -> None:
    # A request timeout fails that call, tells the server (a cancel notice, or the stream closed) and
    # leaves the connection alone: requests the server does answer go on.
    peer = open_peer(transport, "hang")
    client = ready(peer)
    expect = Expect(peer.name)
    expect.fails(echo(client, "never"), RequestTimeout, deadline=DEADLINE, cause=r"did not answer tools/call within 1 s")
    assert wait_until(lambda: peer.cancels() >= 1), "the server was not told to stop the call"
    expect.usable(client, call=lambda: client.list_tools(cache=False))  # every tools/call hangs here


@pytest.mark.fault("answers late")
@every_transport
def test_answers_late(transport: str, open_peer: Callable[..., Peer], records: pytest.LogCaptureFixture) -> None:
    # The answer comes after the deadline: the call failed at its deadline, and the late answer (on
    # stdio and HTTP+SSE it does arrive, on the one stream) is dropped, never taken for the next call's.
    peer = open_peer(transport, "late", delay=DEADLINE + 0.5)
    client = ready(peer)
    expect = Expect(peer.name)
    late = client.call_tool_future("echo", {"message": "late"}, timeout=DEADLINE)
    expect.fails(late.result, RequestTimeout, deadline=DEADLINE, cause=r"did not answer tools/call within 1 s")
    peer.wait_late_sent()
    if transport in (STDIO, HTTPSSE):
        assert wait_until(lambda: dropped(records, late.request_id)), "the late answer never reached the client"
    expect.usable(client)


@pytest.mark.fault("answers twice")
@every_transport
def test_answers_twice(transport: str, open_peer: Callable[..., Peer], records: pytest.LogCaptureFixture) -> None:
    # The call returns once, with its answer; the copy is dropped. On modern JSON the copy comes as the
    # body of the next call's reply (no other stream there): that call fails at once (a body that is
    # not its response), and is never given the earlier call's result.
    peer = open_peer(transport, "twice")
    client = ready(peer)
    expect = Expect(peer.name)
    once = client.call_tool_future("echo", {"message": "once"}, timeout=DEADLINE)
    assert expect.returns(once.result, deadline=DEADLINE).text == "once"
    if transport != HTTP_MODERN_JSON:
        assert wait_until(lambda: dropped(records, once.request_id)), "the copy never reached the client"
    if transport == HTTP_MODERN_JSON:
        expect.fails(echo(client, "second"), ProtocolError, deadline=DEADLINE, cause=r"not its response")
        assert dropped(records, once.request_id), "the copy was not dropped"
    else:
        assert expect.returns(echo(client, "second"), deadline=DEADLINE).text == "second"
    expect.usable(client)


@pytest.mark.fault("answers an unknown id")
@every_transport
def test_answers_an_unknown_id(transport: str, open_peer: Callable[..., Peer], records: pytest.LogCaptureFixture) -> None:
    # A response nobody asked for is dropped and the real answer still counts; a JSON body (which holds
    # one message) that answers another id fails its call at once instead of leaving it to its deadline.
    peer = open_peer(transport, "unknown-id")
    client = ready(peer)
    expect = Expect(peer.name)
    if transport in JSON_REPLIES:
        expect.fails(echo(client, "mine"), ProtocolError, deadline=DEADLINE, cause=r"not its response \(id \d+\)")
    else:
        assert expect.returns(echo(client, "mine"), deadline=DEADLINE).text == "mine"
    assert wait_until(lambda: dropped(records, UNKNOWN_ID)), "the stray response never reached the client"
    expect.usable(client)


@pytest.mark.fault("answers out of order")
@every_transport
def test_answers_out_of_order(transport: str, open_peer: Callable[..., Peer]) -> None:
    # Four calls at once, answered last first: each gets its own answer.
    peer = open_peer(transport, "reorder", batch=4)
    client = ready(peer)
    expect = Expect(peer.name)
    futures = [client.call_tool_future("echo", {"message": str(i)}, timeout=DEADLINE * 2) for i in range(4)]
    texts = expect.returns(lambda: [f.result().text for f in futures], deadline=DEADLINE * 2)
    assert texts == ["0", "1", "2", "3"]
    expect.usable(client, call=lambda: client.list_tools(cache=False))  # a lone tools/call would wait for its batch


@pytest.mark.fault("garbage / non-JSON-RPC messages")
@every_transport
def test_garbage(transport: str, open_peer: Callable[..., Peer], records: pytest.LogCaptureFixture) -> None:
    # Lines or events that are no JSON-RPC message are skipped and the answers after them count; a JSON
    # body that is none (not JSON, JSON but no message, a batch of non-messages) fails its call at once.
    peer = open_peer(transport, "garbage")
    client = ready(peer)
    expect = Expect(peer.name)
    for n in range(3):
        if transport in JSON_REPLIES:
            expect.fails(echo(client, str(n)), ProtocolError, deadline=DEADLINE,
                         cause=r"not (valid )?JSON|not its response")
        else:
            assert expect.returns(echo(client, str(n)), deadline=DEADLINE).text == str(n)
    if transport not in JSON_REPLIES:  # (a JSON body that is none is the call's error)
        assert wait_until(lambda: any("not JSON" in r.getMessage() for r in records.records)), "no garbage was seen"
        skipped = [r.getMessage() for r in records.records if r.levelno == logging.WARNING and "skipped" in r.getMessage()]
        assert skipped and all(repr(peer.name) in text for text in skipped), skipped
    expect.usable(client)


@pytest.mark.fault("truncated message")
@every_transport
def test_truncated_message(transport: str, open_peer: Callable[..., Peer]) -> None:
    # An answer cut in the middle names its request (its id comes first): that call fails at once with
    # ProtocolError, not at its deadline; the next call is answered.
    peer = open_peer(transport, "truncated")
    client = ready(peer)
    expect = Expect(peer.name)
    expect.fails(echo(client, "cut me"), ProtocolError, deadline=DEADLINE, cause=r"not (valid )?JSON")
    expect.usable(client)


@pytest.mark.fault("message over the size limit")
@every_transport
def test_message_over_the_size_limit(transport: str, open_peer: Callable[..., Peer]) -> None:
    # An answer over max_message_bytes fails its call with ProtocolError saying so (and how to raise the
    # limit), without being held whole; the connection goes on.
    peer = open_peer(transport, "big", big_bytes=2 << 20)
    client = ready(peer, max_message_bytes=1 << 20)
    expect = Expect(peer.name)
    expect.fails(echo(client, "big", timeout=DEADLINE * 3), ProtocolError, deadline=DEADLINE * 3,
                 cause=r"over the limit of 1048576 bytes.*max_message_bytes")
    expect.usable(client)


@pytest.mark.fault("progress flood, slow callback")
@every_transport
def test_progress_flood(transport: str, open_peer: Callable[..., Peer]) -> None:
    # Progress is coalesced: one entry per call waits for the callback, holding the latest value; the
    # call returns within its deadline, once the progress before its answer has been shown.
    peer = open_peer(transport, "progress-flood", flood=FLOOD)
    client = ready(peer)
    expect = Expect(peer.name)
    progress = SlowCallback(SLOW)
    progress.watch(client)
    result = expect.returns(echo(client, "after", FLOOD_DEADLINE, on_progress=progress), deadline=FLOOD_DEADLINE)
    assert result.text == "after"
    assert progress.calls[-1][0] == FLOOD, "the last progress shown is not the latest"
    expect.bounded(progress, flood=FLOOD, most_waiting=3, most_runs=int((FLOOD_DEADLINE + MARGIN) / SLOW) + 2)
    expect.usable(client)


@pytest.mark.fault("log flood, slow callback")
@every_transport
def test_log_flood(transport: str, open_peer: Callable[..., Peer]) -> None:
    # Log messages wait for on_log in a bounded queue (what comes past it is dropped and counted); the
    # call does not wait for them, and closing does not wait for the backlog.
    peer = open_peer(transport, "log-flood", flood=FLOOD)
    on_log = SlowCallback(SLOW)
    client = ready(peer, on_log=lambda level, logger, data: on_log(data))
    on_log.watch(client)
    expect = Expect(peer.name)
    assert expect.returns(echo(client, "after", FLOOD_DEADLINE), deadline=FLOOD_DEADLINE).text == "after"
    expect.usable(client)
    assert wait_until(lambda: len(on_log.calls) >= 3)
    # Whatever is still queued (up to the bound: a thousand slow callbacks) must not hold close() up for long.
    expect.returns(client.close, deadline=CLOSE_GRACE + SLOW, what="close() after a log flood")
    expect.bounded(on_log, flood=FLOOD, most_waiting=DEFAULT_MAX_QUEUED + 10, most_runs=FLOOD // 2)


@pytest.mark.fault("list_changed flood, slow callback")
@every_transport
def test_list_changed_flood(transport: str, open_peer: Callable[..., Peer]) -> None:
    # Only the latest list_changed matters: one waits per subscription (and per listener), however many
    # come; the call returns within its deadline.
    peer = open_peer(transport, "list-changed-flood", flood=FLOOD)
    client = ready(peer)
    expect = Expect(peer.name)
    on_change = SlowCallback(SLOW)
    listener = SlowCallback(SLOW)
    for callback in (on_change, listener):
        callback.watch(client)
    client.on_notification("notifications/tools/list_changed", listener)
    subscription = client.subscribe(tools=True, on_change=on_change, timeout=DEADLINE * 2)
    assert subscription.acknowledged.get("toolsListChanged") is True
    assert expect.returns(echo(client, "after", FLOOD_DEADLINE), deadline=FLOOD_DEADLINE).text == "after"
    assert wait_until(lambda: len(on_change.calls) >= 1 and len(listener.calls) >= 1)
    runs = int((FLOOD_DEADLINE + MARGIN) / SLOW) + 2
    expect.bounded(on_change, flood=FLOOD, most_waiting=4, most_runs=runs)
    expect.bounded(listener, flood=FLOOD, most_waiting=4, most_runs=runs)
    expect.usable(client)


# -- a subprocess -----------------------------------------------------------------------------------


@pytest.mark.fault("exits at start (stderr message)", transport=STDIO)
def test_exits_at_start(open_peer: Callable[..., Peer]) -> None:
    # connect() fails with ConnectionClosed carrying the exit code and the server's last words.
    peer = open_peer(STDIO, "exit-at-start")
    client = peer.connect(start=False)
    expect = Expect(peer.name)
    error = expect.fails(lambda: client.connect(timeout=DEADLINE * 5), ConnectionClosed, deadline=DEADLINE * 5,
                         cause=r"exited with code 2[\s\S]*missing API key DEMO_API_KEY")
    assert isinstance(error, ConnectionClosed) and error.returncode == 2
    expect.closed(client)


@pytest.mark.fault("dies mid-call", transport=STDIO)
def test_dies_mid_call(open_peer: Callable[..., Peer]) -> None:
    # Every call in flight fails at once with the exit code and the last stderr lines; later calls too.
    peer = open_peer(STDIO, "crash-on-call")
    client = ready(peer)
    expect = Expect(peer.name)
    other = client.call_tool_future("slow", {"seconds": 30}, timeout=30)
    error = expect.fails(echo(client, "x", timeout=30), ConnectionClosed, deadline=DEADLINE,
                         cause=r"exited with code 3[\s\S]*crashing on purpose")
    assert isinstance(error, ConnectionClosed) and error.returncode == 3
    expect.fails(lambda: other.result(30), ConnectionClosed, deadline=0.0, cause=r"exited with code 3",
                 what="the other call in flight")
    expect.closed(client)


@pytest.mark.fault("closes stdout, keeps running", transport=STDIO)
def test_closes_stdout_keeps_running(open_peer: Callable[..., Peer]) -> None:
    # No answer can come any more: the call fails with ConnectionClosed saying so (not at its deadline),
    # although the process lives on; close() ends it.
    peer = open_peer(STDIO, "close-stdout")
    client = ready(peer)
    expect = Expect(peer.name)
    pid = client.transport.process.pid  # type: ignore[attr-defined]
    # (A second for the exit status that would explain it; then no waiting for a stderr that stays open.)
    expect.fails(echo(client, "x", timeout=DEADLINE * 2), ConnectionClosed, deadline=DEADLINE * 2,
                 cause=r"closed its stdout")
    assert pid_alive(pid), "the server was to keep running"
    expect.closed(client)
    expect.returns(client.close, deadline=3.0, what="close()")
    assert not pid_alive(pid)


@pytest.mark.fault("stops reading stdin", transport=STDIO)
def test_stops_reading_stdin(open_peer: Callable[..., Peer]) -> None:
    # A call fails at its deadline (a full pipe never blocks a caller); what waits for the server is
    # bounded, and past the bound a call fails at once saying why; close() does not wait on the pipe.
    peer = open_peer(STDIO, "no-stdin-read")
    client = peer.connect(max_message_bytes=1 << 20, validate_output=False)  # the server reads nothing after connect
    expect = Expect(peer.name)
    big = "x" * (256 * 1024)  # more than a pipe holds
    expect.fails(echo(client, big), RequestTimeout, deadline=DEADLINE, cause=r"did not answer tools/call within 1 s")
    waiting = []
    for _ in range(8):  # 2 MiB, if nothing stopped it
        future = client.call_tool_future("echo", {"message": big}, timeout=30)
        waiting.append(future)
        if future.done():
            break
    expect.fails(lambda: waiting[-1].result(0), ConnectionClosed, deadline=0.0, cause=r"is not reading its stdin",
                 what="a call past the bound")
    expect.fails(echo(client, big), ConnectionClosed, deadline=0.0, cause=r"is not reading its stdin",
                 what="the next call")
    assert client.transport._pending_bytes <= 1 << 20  # type: ignore[attr-defined]
    expect.returns(client.close, deadline=2 * 1.0, what="close()")  # the close ladder: 1 s steps
    for future in waiting:
        assert future.done()
    expect.closed(client)


@pytest.mark.fault("floods stderr", transport=STDIO)
def test_floods_stderr(open_peer: Callable[..., Peer]) -> None:
    # 20 MB on stderr behind a slow consumer: the drain never waits for it (the server is never blocked
    # on its stderr), so the call returns within its deadline; the lines waiting for the consumer are
    # bounded (1000, and one read's worth), the rest left out of what it is shown (the tail keeps the last).
    peer = open_peer(STDIO, "stderr-flood")
    sink = SlowCallback(0.01)
    client = ready(peer, stderr=sink)
    transport: Any = client.transport
    sink.watch(client, waiting=lambda: transport._stderr_queued - transport._stderr_shown)
    expect = Expect(peer.name)
    assert expect.returns(echo(client, "after", FLOOD_DEADLINE), deadline=FLOOD_DEADLINE).text == "after"
    expect.usable(client)
    expect.returns(client.close, deadline=CLOSE_GRACE + 1.0, what="close() after a stderr flood")
    expect.bounded(sink, flood=18_000, most_waiting=1000 + 100, most_runs=int((FLOOD_DEADLINE + 2 * MARGIN) / 0.01))


@pytest.mark.fault("ignores SIGTERM", transport=STDIO)
def test_ignores_sigterm(open_peer: Callable[..., Peer]) -> None:
    # The close ladder ends in SIGKILL: close() takes its two steps, no more, and the process is gone.
    peer = open_peer(STDIO, "ignore-sigterm")
    client = ready(peer, close_timeout=0.3)
    expect = Expect(peer.name)
    expect.usable(client)
    pid = client.transport.process.pid  # type: ignore[attr-defined]
    expect.returns(client.close, deadline=2 * 0.3, what="close()")
    assert not pid_alive(pid)
    assert client.transport.returncode == -9  # type: ignore[attr-defined]
    expect.closed(client)


@pytest.mark.fault("leaves grandchildren", transport=STDIO)
def test_leaves_grandchildren(open_peer: Callable[..., Peer]) -> None:
    # A process the server started (same group, holding its stdout) ends with it.
    peer = open_peer(STDIO, "grandchild")
    client = ready(peer)
    expect = Expect(peer.name)
    assert wait_until(lambda: peer.pidfile.exists() and peer.pidfile.read_text().strip() != "")
    grandchild = int(peer.pidfile.read_text())
    assert pid_alive(grandchild)
    expect.usable(client)
    expect.returns(client.close, deadline=3 * 1.0, what="close()")
    assert wait_until(lambda: not pid_alive(grandchild)), "the grandchild outlived close()"
    expect.closed(client)
