"""A forked child that closes its parent's clients on purpose still touches nothing of the parent's.

(A child that just exits: tests/transports/test_fork.py.) Here the child calls ``close()`` on each
inherited client, then ``mcpcall.close_all()``, then drops them for the garbage collector: the
parent's stdio server must live on, its HTTP session must not be DELETEd, and both must still answer.
"""

from __future__ import annotations

import gc
import os

import pytest

import mcpcall
from tests.conftest import demo_argv, pid_alive
from tests.servers.http_fault_server import FaultServer


@pytest.fixture
def server(server: FaultServer) -> FaultServer:
    server.modern = False  # a legacy session: what a DELETE would end
    return server


def test_a_child_closing_the_parents_clients_ends_nothing_of_the_parents(server: FaultServer) -> None:
    with mcpcall.connect(demo_argv(), name="stdio", timeout=10) as stdio, \
            mcpcall.connect(server.url, name="http", protocol="legacy", timeout=10) as http:
        for client in (stdio, http):
            assert client.call_tool("echo", {"message": "before"}).text == "before"
        server_pid = stdio.transport.process.pid  # type: ignore[attr-defined]
        pid = os.fork()
        if pid == 0:  # the child: close everything it inherited, every way there is, then leave at once
            code = 0
            try:
                stdio.close()
                http.close()
                mcpcall.close_all()
                del stdio, http
                gc.collect()
            except BaseException:  # noqa: BLE001 - a failure is the status below
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert pid_alive(server_pid), "the child's close() ended the parent's stdio server"
        assert server.requests(verb="DELETE") == [], "the child's close() DELETEd the parent's HTTP session"
        for client in (stdio, http):
            assert client.call_tool("echo", {"message": "after"}).text == "after"
    assert len(server.requests(verb="DELETE")) == 1  # the parent's own close()
