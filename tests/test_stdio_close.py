"""Closing a stdio client with requests in flight, and servers whose stdout is not (only) JSON-RPC."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import mcpcall
from mcpcall import ConnectionClosed
from tests.conftest import fault_argv


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
