"""close() of a legacy Streamable HTTP client: the cancels of what was in flight reach the server before the DELETE.

Found with the TypeScript and Python SDK servers: three threads blocked in
``call_tool`` and a ``close()`` from a fourth. The cancels were queued for the
worker pool and the DELETE went out at once from the closing thread, so a cancel
could arrive after the session had ended (HTTP 404, and errors in the server's
log for a session it had just torn down).
"""

from __future__ import annotations

import threading

import pytest

import mcpcall
from tests.servers.http_fault_server import FaultServer



@pytest.mark.parametrize("blocking", [True, False])
def test_cancels_on_close_precede_the_delete(server: FaultServer, blocking: bool) -> None:
    client = mcpcall.connect(server.url, name="fault", timeout=10, protocol="legacy")
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("slow", {"seconds": 10})
        except mcpcall.MCPError as exc:
            errors.append(exc)

    if blocking:  # each caller runs its own exchange
        threads = [threading.Thread(target=call) for _ in range(4)]
        for thread in threads:
            thread.start()
    else:  # the worker pool runs them
        threads = []
        futures = [client.call_tool_future("slow", {"seconds": 10}) for _ in range(4)]
    assert server.wait_for(lambda: len([s for s in server.requests("tools/call")]) == 4)
    client.close()
    for thread in threads:
        thread.join(10)
    if blocking:
        assert len(errors) == 4 and all(isinstance(e, mcpcall.ConnectionClosed) for e in errors)
    else:
        for future in futures:
            assert isinstance(future.exception(5), mcpcall.ConnectionClosed)
    order = [s.method or s.verb for s in server.seen if s.verb == "DELETE" or s.method == "notifications/cancelled"]
    assert order == ["notifications/cancelled"] * 4 + ["DELETE"], order
