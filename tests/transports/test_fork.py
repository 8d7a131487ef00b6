"""Clients across os.fork(): a child lets go of what its parent owns and touches nothing.

The first test forks inside a helper process (the driver below), so that the
child can exit normally (``sys.exit``: atexit runs ``mcpcall.close_all``)
without unwinding into pytest. Each test's first comment line says what used
to go wrong.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

import pytest

import mcpcall
from tests.conftest import PYTHON, ROOT, wait_until
from tests.servers.http_fault_server import FaultServer

DRIVER = r'''
import json, os, sys, time
import mcpcall

stdio = mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="stdio", timeout=10)
http = mcpcall.connect(sys.argv[1], name="http", protocol="legacy", timeout=10)
stdio.call_tool("echo", {"message": "warm"})
http.call_tool("echo", {"message": "warm"})
server_pid = stdio.transport.process.pid
sys.stdout.flush()
started = time.monotonic()
pid = os.fork()
if pid == 0:
    report = {}
    for name, client in (("stdio", stdio), ("http", http)):
        try:
            client.call_tool("echo", {"message": "child"})
            report[name] = "no error"
        except BaseException as exc:
            report[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"child": report}), flush=True)
    sys.exit(0)  # a normal exit: atexit runs mcpcall.close_all()
status = "hung"
while time.monotonic() < started + 10:
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        status = code
        break
    time.sleep(0.02)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
took = time.monotonic() - started
with open(f"/proc/{server_pid}/stat") as f:
    alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
answers = []
for client in (stdio, http):
    try:
        answers.append(client.call_tool("echo", {"message": "parent"}, timeout=5).text)
    except Exception as exc:
        answers.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"parent": {"took": took, "status": status, "server_alive": alive, "answers": answers}}), flush=True)
sys.stdin.readline()  # the test checks what the HTTP server saw, then lets us close
stdio.close()
http.close()
'''


@pytest.fixture
def server(server: FaultServer) -> FaultServer:
    server.modern = False  # a legacy session: the one a child must not DELETE
    return server


@pytest.mark.timeout(60)
def test_child_that_exits_normally_leaves_the_parents_servers_alone(server: FaultServer) -> None:
    # At the child's exit, atexit closed the copied clients: it SIGTERMed the parent's server, sent DELETE, or hung.
    proc = subprocess.Popen([PYTHON, "-c", DRIVER, server.url], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        report: dict = {}
        while "parent" not in report:  # the parent's line comes last (after the child exited or was killed)
            line = proc.stdout.readline()
            if not line:
                proc.kill()
                pytest.fail(f"the driver stopped early: {report} {proc.communicate()[1][-3000:]}")
            report.update(json.loads(line))
        deletes = server.requests(verb="DELETE")
        proc.stdin.write("\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    parent, child = report["parent"], report.get("child", {"stdio": "no report", "http": "no report"})
    assert parent["status"] == 0, f"the child {'hung' if parent['status'] == 'hung' else 'failed'}: {parent} {err[-2000:]}"
    assert parent["took"] < 3, f"the child took {parent['took']:.1f} s to exit"
    assert parent["server_alive"], "the child's exit ended the parent's stdio server"
    assert deletes == [], "the child DELETEd the parent's HTTP session"
    assert parent["answers"] == ["parent", "parent"]
    for name in ("stdio", "http"):
        assert child[name].startswith("ForkedClient: "), child[name]
        assert "connect a new client after the fork" in child[name], child[name]
    assert len(server.requests(verb="DELETE")) == 1  # the parent's own close()
    assert proc.returncode == 0, err[-2000:]


def _established_to(port: int) -> int:
    """TCP connections on this host, ESTABLISHED, to ``port`` on 127.0.0.1 (the clients' ends)."""
    found = 0
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].split(":")[1], 16) == port:
                found += 1
    return found


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_child_does_not_keep_the_parents_pooled_http_sockets(server: FaultServer, transport: str) -> None:
    # A child inherited the pooled sockets and held them: after the parent's close() they stayed ESTABLISHED.
    # With HTTP+SSE the stream's socket has an open response, and socket.close() left its descriptor open.
    url = server.origin + "/sse" if transport == "sse" else server.url
    client = mcpcall.connect(url, protocol="legacy", timeout=10, transport=transport)
    client.list_tools()
    assert _established_to(server.port) >= 1, "precondition: a pooled connection"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait until the parent is done (it closes the pipe), touch nothing else
        try:
            os.close(write_end)
            select.select([read_end], [], [], 20)
        finally:
            os._exit(0)
    os.close(read_end)
    try:
        time.sleep(0.3)  # the child has let go of what it inherited (or has not)
        client.close()
        assert wait_until(lambda: _established_to(server.port) == 0, 3), (
            f"{_established_to(server.port)} connections to the server still open while the child lives"
        )
    finally:
        os.close(write_end)
        os.waitpid(pid, 0)
