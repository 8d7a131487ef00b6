"""Closing a stdio client with requests in flight, and servers whose stdout is not (only) JSON-RPC."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

import mcpcall
from mcpcall import ConnectionClosed, RequestTimeout
from tests.conftest import PYTHON, fault_argv


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_close_cancels_calls_in_flight_so_a_careful_server_exits_by_itself(protocol: str, tmp_path: Path) -> None:
    """A server that finishes its calls before leaving on stdin EOF is told to stop them first."""
    cancel_log = tmp_path / "cancelled"
    grace = 8.0  # the server's call would run 30 s: without the cancel, close() has to SIGTERM it after this
    client = mcpcall.connect(
        fault_argv("finish-on-eof", extra=("--cancel-log", str(cancel_log))), protocol=protocol, close_timeout=grace
    )
    client.list_tools()  # the tools' schemas known: the call is the one request in flight
    future = client.call_tool_future("slow", {"seconds": 30, "steps": 0}, timeout=60)
    started = time.monotonic()
    client.close()
    elapsed = time.monotonic() - started
    with pytest.raises(ConnectionClosed):
        future.result(1)
    assert client.transport.returncode == 0, "the server was signalled: it never learnt its call was cancelled"
    cancelled = [json.loads(line) for line in cancel_log.read_text().splitlines()]
    assert cancelled == [future.request_id]  # type: ignore[attr-defined]
    assert elapsed < grace


# -- what a server wrote to stdout instead of JSON-RPC -----------------------------------


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_server_that_never_speaks_mcp_is_told_apart_by_what_it_wrote(protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpcall")
    started = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        mcpcall.connect(fault_argv("garbage-only"), protocol=protocol, timeout=2.0, probe_timeout=0.5, close_timeout=1.0)
    assert time.monotonic() - started < 2.0 + 1.5
    message = str(info.value)
    assert "did not finish connecting within 2 s" in message
    assert "lines to stdout that are not JSON-RPC, the first: 'Starting server...'" in message
    assert "it has not written one JSON-RPC message" in message
    # Each skipped line is logged as it comes (the early word), escaped: no terminal command gets through.
    logged = [record.getMessage() for record in caplog.records if "not JSON" in record.getMessage()]
    assert any("'\\x1b]52;c;Y2xpcA==\\x07 not JSON either'" in text for text in logged)
    assert not any("\x1b" in text or "\x07" in text for text in logged)


def test_a_program_that_prints_a_url_and_exits_is_named_with_its_line() -> None:
    argv = [PYTHON, "-c", "import sys; print('Uvicorn running on http://127.0.0.1:8000', flush=True); sys.stdin.readline()"]
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect(argv, protocol="legacy", timeout=10.0, close_timeout=1.0)
    message = str(info.value)
    assert "the server wrote 1 line to stdout that is not JSON-RPC: 'Uvicorn running on http://127.0.0.1:8000'" in message
    assert "connect to its URL instead" in message


def test_a_banner_then_mcp_connects_and_later_timeouts_do_not_blame_the_banner() -> None:
    with mcpcall.connect(fault_argv("banner", "hang", extra=("--banner-lines", "3")), probe_timeout=1.0, close_timeout=1.0) as c:
        assert len(c.list_tools()) == 7
        with pytest.raises(RequestTimeout) as info:
            c.call_tool("echo", {"message": "x"}, timeout=0.5)
    assert "did not answer tools/call within 0.5 s" in str(info.value)
    assert "not JSON-RPC" not in str(info.value)


def test_a_timeout_names_what_the_server_wrote_while_the_request_waited() -> None:
    # garbage: every answer comes after lines that are not JSON-RPC; hang: tools/call gets no answer
    with mcpcall.connect(fault_argv("garbage", "hang"), probe_timeout=1.0, close_timeout=1.0) as c:
        c.list_tools()  # what was skipped before the call is not the call's business
        future = c.call_tool_future("echo", {"message": "x"}, timeout=1.0)
        c.list_tools(cache=False)  # answered after 3 more such lines, while the call waits
        with pytest.raises(RequestTimeout) as info:
            future.result(5)
    message = str(info.value)
    assert "did not answer tools/call within 1 s; the server wrote 3 lines to stdout that are not JSON-RPC, " \
           "the last: '{\"hello\": 1}' (the request was cancelled" in message
