"""examples/celery_app.py with a real Redis broker and a real prefork worker: 100 tool calls, none lost.

The test starts ``redis-server`` on 127.0.0.1 at a free port and ``celery worker
--pool prefork --concurrency 2`` on it, sends the calls by task name (as a
caller on another machine would, without importing the example), and checks
what comes back, which pool process ran what (from the worker's log), that
each pool process started its own demo server after the fork, and that no
demo server outlives the worker. Every demo server of this test carries a
unique ``MCPCALL_TEST_MARKER`` in its environment, so it can be told apart
from any other in /proc.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import ROOT, pid_alive, require_peer, wait_until

pytestmark = pytest.mark.timeout(180)

celery = pytest.importorskip("celery")
redis = pytest.importorskip("redis")
kombu_pools = pytest.importorskip("kombu.pools")

CALLS = 100
WORKER_HOST = "mcpcall-test@127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes], grace: float, group: bool = False) -> None:
    """SIGTERM, a bounded wait, then SIGKILL (the whole process group with ``group``) and reap."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    if group:  # pool processes left behind by a worker that did not stop in time
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if process.poll() is None:
        process.kill()
    process.wait(10)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start_redis(binary: str, port: int, data: Path, log_path: Path) -> subprocess.Popen[bytes] | None:
    """redis-server on 127.0.0.1:``port`` once it answers PING; None (and nothing left running) if it does not."""
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--dir", str(data)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
        )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        up = wait_until(lambda: process.poll() is not None or answers(), timeout=15)
    finally:
        client.close()
        client.connection_pool.disconnect()
    if up and process.poll() is None:
        return process
    _stop(process, grace=5)
    return None


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A throwaway redis-server on 127.0.0.1 (no persistence), stopped afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        require_peer("redis-server (Debian: apt-get install redis-server)")
    assert binary is not None
    data = tmp_path / "redis"
    data.mkdir()
    log_path = tmp_path / "redis.log"
    for _attempt in range(3):  # another process may take the free port before redis binds it
        port = _free_port()
        process = _start_redis(binary, port, data, log_path)
        if process is not None:
            break
    else:
        pytest.fail(f"redis-server did not start:\n{_tail(log_path)}")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(process, grace=10)


@pytest.fixture
def client_app(redis_url: str) -> Iterator[Any]:
    """A Celery app for the caller's side: sends tasks by name, reads results; its connections closed after."""
    app = celery.Celery("mcpcall_test_caller", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.update(broker_connection_retry_on_startup=True, accept_content=["json"], result_accept_content=["json"])
    try:
        yield app
    finally:
        # Celery closes none of this itself: the result backend's pub/sub and pool, the app's broker and
        # producer pools, kombu's process-wide pools (control.ping uses them); each redis transport's
        # epoll descriptor goes only when its transport is garbage.
        backend = app.backend
        consumer = getattr(backend, "result_consumer", None)
        if consumer is not None:
            consumer.stop()
        pool = backend.client.connection_pool
        pool.disconnect()
        app.amqp.producer_pool.force_close_all()
        app.pool.force_close_all()
        app.close()
        app.amqp._producer_pool = None
        kombu_pools.reset()
        del app, backend, consumer
        gc.collect()
        # celery < 5.7 (5.6 is the last for Python 3.9): results collected just now unsubscribe through the
        # stopped pub/sub, and redis-py opens a new connection for that.
        pool.disconnect()


def _demo_servers(marker: str) -> dict[int, int]:
    """{pid: parent pid} of every live demo server started with this test's marker."""
    found: dict[int, int] = {}
    needle = f"MCPCALL_TEST_MARKER={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if b"mcpcall.demo_server" not in cmdline:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in environ and pid_alive(pid):
            found[pid] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def _call(call_id: str, tool: str, arguments: Any) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": f"mcp__demo__{tool}", "arguments": text}}


def test_celery_prefork_worker_runs_100_tool_calls(tmp_path: Path, redis_url: str, client_app: Any) -> None:
    marker = uuid.uuid4().hex
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {
        "command": sys.executable, "args": ["-m", "mcpcall.demo_server"],
        "env": {"MCPCALL_TEST_MARKER": "${env:MCPCALL_TEST_MARKER}"},  # set on the worker, expanded per machine
    }}}))
    env = dict(os.environ, MCPCALL_CELERY_BROKER=redis_url, MCPCALL_CONFIG=str(config),
               MCPCALL_TEST_MARKER=marker, PYTHONUNBUFFERED="1")
    env.pop("MCPCALL_CELERY_BACKEND", None)
    log_path = tmp_path / "worker.log"
    with open(log_path, "ab") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "examples.celery_app", "worker", "--pool", "prefork",
             "--concurrency", "2", "--loglevel", "INFO", "--hostname", WORKER_HOST,
             "--without-gossip", "--without-mingle"],
            cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the last resort kills pool processes too
        )
    try:
        # Ready when it answers a ping (bounded; a worker that died says why).
        deadline = time.monotonic() + 60
        while not client_app.control.ping(destination=[WORKER_HOST], timeout=1.0):
            assert worker.poll() is None, f"the worker exited with {worker.returncode}:\n{_tail(log_path)}"
            assert time.monotonic() < deadline, f"the worker did not answer a ping in 60 s:\n{_tail(log_path)}"

        # 100 calls fanned out as one group, gathered under one bound.
        calls = [_call(f"call_{i}", "echo", {"message": f"message {i}"}) for i in range(CALLS)]
        group = celery.group(client_app.signature("mcpcall.execute_tool_call", args=(call,)) for call in calls)
        started = time.monotonic()
        result = group.apply_async()
        messages = result.get(timeout=90)
        elapsed = time.monotonic() - started
        task_ids = [child.id for child in result.results]
        result.forget()
        assert messages == [{"role": "tool", "tool_call_id": f"call_{i}", "content": f"message {i}"}
                            for i in range(CALLS)], f"took {elapsed:.1f} s"

        # Failures come back as error tool messages, one call or a batch.
        error = client_app.signature("mcpcall.execute_tool_call", args=(_call("bad", "fail", {"message": "nope"}),))
        message = error.apply_async().get(timeout=30)
        assert message["tool_call_id"] == "bad"
        assert message["content"].startswith("Error") and "nope" in message["content"]
        batch = [
            _call("b0", "echo", {"message": "first"}),
            _call("b1", "add", {"a": 2, "b": 3}),
            _call("b2", "fail", {"message": "broken"}),
            _call("b3", "no_such_tool", {}),
            _call("b4", "echo", "{not json"),
        ]
        answers = client_app.signature("mcpcall.execute_many", args=(batch, 30.0)).apply_async().get(timeout=60)
        assert [a["tool_call_id"] for a in answers] == ["b0", "b1", "b2", "b3", "b4"]
        assert answers[0]["content"] == "first" and answers[1]["content"] == "5"
        assert all(a["content"].startswith("Error") for a in answers[2:]), answers
        assert "broken" in answers[2]["content"] and "no tool named" in answers[3]["content"]

        # Each pool process built its own registry after the fork: one demo server each, none in the main process.
        servers = _demo_servers(marker)
        parents = set(servers.values())
        assert len(servers) == 2 and len(parents) == 2, servers
        assert all(_parent(p) == worker.pid for p in parents), (servers, worker.pid)
    finally:
        _stop(worker, grace=30, group=True)
    assert worker.returncode == 0, f"the worker exited with {worker.returncode}:\n{_tail(log_path)}"

    # The log: every task ran exactly once (none lost, none run twice), and both pool processes ran some.
    log_text = log_path.read_text(errors="replace")
    ran: dict[str, list[str]] = {}
    for match in re.finditer(r"/(ForkPoolWorker-\d+)\] Task mcpcall\.execute_tool_call\[([0-9a-f-]+)\] succeeded",
                             log_text):
        ran.setdefault(match.group(2), []).append(match.group(1))
    assert all(len(ran.get(task_id, [])) == 1 for task_id in task_ids), "a task ran twice or not at all"
    by_process: set[str] = {ran[task_id][0] for task_id in task_ids}
    assert len(by_process) == 2, f"only {by_process} ran the calls"
    assert len(re.findall(r"tool registry closed in worker process \d+", log_text)) == 2, _tail(log_path)

    # No demo server outlives the worker.
    assert wait_until(lambda: not _demo_servers(marker), timeout=10), _demo_servers(marker)
